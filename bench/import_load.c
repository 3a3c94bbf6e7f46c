// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * import_load.c — the Informix dbimport of a filesystem-choice article as a file
 * workload: a database loads tables into new chunks, appending data pages
 * in order while it builds the indexes, whose pages land at scattered
 * places; at the end everything is flushed. The article timed this on ext4 and
 * ext2, with and without DIRECT_IO.
 *
 *   import_load [-n chunks] [-m MB] [-p page] [-x index%] [-a pages] [-d] DIR
 *
 * For each of `chunks` new files DIR/chunkN (created, extended to `MB` with
 * ftruncate as the database extends a chunk, never preallocated):
 *   the first (100 - index%) of the chunk takes data pages, written in
 *   ascending order `pages` pages per write (the database's big-buffer
 *   appends); the rest takes index pages, one page per write at a random
 *   place in the index area (every index page written once, in a random
 *   order), interleaved so the index grows along with the data;
 *   then fsync.
 * -d opens the chunks with O_DIRECT (DIRECT_IO 1), else writes are buffered
 * (DIRECT_IO 0). One thread, synchronous pwrite: a dbimport is one session.
 *
 * Output, one CSV line on stdout:
 *   mode,chunks,MB,page,index_pct,data_pages_per_write,writes,seconds,MBps
 * seconds runs from the first create to the end of the last fsync.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct opts {
	unsigned chunks;
	uint64_t bytes;
	uint32_t page;
	unsigned index_pct;
	unsigned pages_per_write;
	bool direct;
	const char *dir;
};

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [-n chunks] [-m MB] [-p page] [-x index%%] [-a pages] [-d] DIR\n"
		"  -n  new chunk files (default 4)\n"
		"  -m  size of each chunk in MB (default 128)\n"
		"  -p  page size in bytes (default 2048)\n"
		"  -x  percentage of each chunk taken by index pages (default 25)\n"
		"  -a  data pages per write (default 16)\n"
		"  -d  O_DIRECT (default buffered)\n",
		prog);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned long parse_num(const char *s, const char *what, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v == 0 || v > max) {
		fprintf(stderr, "import_load: bad %s '%s' (1..%lu)\n", what, s, max);
		exit(2);
	}
	return v;
}

/* xorshift64*: reproducible, and cheap next to a system call */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static void pwrite_all(int fd, const char *buf, size_t len, off_t off, const char *path)
{
	while (len) {
		ssize_t n = pwrite(fd, buf, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "import_load: write %s at %lld: %s\n", path,
				(long long)off, n < 0 ? strerror(errno) : "short write");
			exit(1);
		}
		buf += n;
		len -= n;
		off += n;
	}
}

/* One chunk: returns the number of writes. */
static uint64_t load_chunk(const struct opts *o, unsigned idx, char *buf, uint64_t *seed)
{
	uint64_t pages = o->bytes / o->page;
	uint64_t ipages = pages * o->index_pct / 100;
	uint64_t dpages = pages - ipages;
	uint64_t *perm, d = 0, i = 0, writes = 0;
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/chunk%u", o->dir, idx);
	fd = open(path, O_CREAT | O_EXCL | O_RDWR | (o->direct ? O_DIRECT : 0), 0660);
	if (fd < 0) {
		fprintf(stderr, "import_load: create %s: %s\n", path, strerror(errno));
		exit(1);
	}
	if (ftruncate(fd, (off_t)o->bytes)) {
		fprintf(stderr, "import_load: extend %s: %s\n", path, strerror(errno));
		exit(1);
	}
	/* every index page once, in a random order (Fisher-Yates) */
	perm = malloc((ipages ? ipages : 1) * sizeof(*perm));
	if (!perm) {
		fprintf(stderr, "import_load: out of memory\n");
		exit(1);
	}
	for (uint64_t k = 0; k < ipages; k++)
		perm[k] = k;
	for (uint64_t k = ipages; k > 1; k--) {
		uint64_t j = rnd(seed) % k, t = perm[k - 1];

		perm[k - 1] = perm[j];
		perm[j] = t;
	}
	/* interleave: index writes keep pace with the data appended so far */
	while (d < dpages || i < ipages) {
		if (d < dpages && (i * dpages >= d * ipages || i >= ipages)) {
			uint64_t n = dpages - d < o->pages_per_write ? dpages - d : o->pages_per_write;

			memset(buf, (int)(d & 0xff), 16);
			pwrite_all(fd, buf, n * o->page, (off_t)(d * o->page), path);
			d += n;
		} else {
			memset(buf, (int)(i & 0xff), 16);
			pwrite_all(fd, buf, o->page, (off_t)((dpages + perm[i]) * o->page), path);
			i++;
		}
		writes++;
	}
	if (fsync(fd)) {
		fprintf(stderr, "import_load: fsync %s: %s\n", path, strerror(errno));
		exit(1);
	}
	close(fd);
	free(perm);
	return writes;
}

int main(int argc, char **argv)
{
	struct opts o = { .chunks = 4, .bytes = 128ull << 20, .page = 2048, .index_pct = 25,
			  .pages_per_write = 16 };
	uint64_t seed = 0x9e3779b97f4a7c15ull, writes = 0;
	double t0, t1;
	char *buf;
	int c;

	while ((c = getopt(argc, argv, "n:m:p:x:a:dh")) != -1) {
		switch (c) {
		case 'n': o.chunks = parse_num(optarg, "chunk count", 100000); break;
		case 'm': o.bytes = (uint64_t)parse_num(optarg, "size", 1 << 20) << 20; break;
		case 'p': o.page = parse_num(optarg, "page size", 1 << 20); break;
		case 'x':
			o.index_pct = strcmp(optarg, "0") ? parse_num(optarg, "index share", 99) : 0;
			break;
		case 'a': o.pages_per_write = parse_num(optarg, "pages per write", 4096); break;
		case 'd': o.direct = true; break;
		case 'h': usage(stdout, argv[0]); return 0;
		default: usage(stderr, argv[0]); return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr, argv[0]);
		return 2;
	}
	o.dir = argv[optind];
	if (o.page % 512 || o.bytes % o.page) {
		fprintf(stderr, "import_load: the page size must be a multiple of 512 dividing the chunk size\n");
		return 2;
	}
	if (posix_memalign((void **)&buf, 4096, (size_t)o.page * o.pages_per_write)) {
		fprintf(stderr, "import_load: out of memory\n");
		return 1;
	}
	memset(buf, 0x5a, (size_t)o.page * o.pages_per_write);
	t0 = now();
	for (unsigned k = 0; k < o.chunks; k++)
		writes += load_chunk(&o, k, buf, &seed);
	t1 = now();
	printf("%s,%u,%llu,%u,%u,%u,%llu,%.3f,%.1f\n", o.direct ? "direct" : "buffered", o.chunks,
	       (unsigned long long)(o.bytes >> 20), o.page, o.index_pct, o.pages_per_write,
	       (unsigned long long)writes, t1 - t0, o.chunks * (o.bytes / 1e6) / (t1 - t0));
	free(buf);
	return 0;
}
