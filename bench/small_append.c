// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * small_append.c — the write pattern of every log written with small
 * buffered writes (database write-ahead logs, journals, binary logs): one
 * process, one file, COUNT buffered pwrite()s of SIZE bytes, timed one by
 * one; then one fsync, timed on its own.
 *
 *   small_append [-m append|overwrite] [-s size] [-n count] [-k | -x] FILE
 *
 *   append     the file is created empty and every write extends it: the
 *              tail block is partly written, again and again (a log).
 *   overwrite  the file is first written to COUNT*SIZE bytes (rounded up to
 *              4 KiB) and fsynced, untimed; then every write replaces SIZE
 *              bytes in place at the next offset (a page or a record
 *              rewritten).
 * -k keeps FILE afterwards (default: removed).
 * -x FILE exists and is written as it is: not created, truncated, filled
 *    first, read back or removed. For bench/fuse_null, which stores nothing
 *    and whose every name is a file: the same writes with nothing behind the
 *    FUSE round trip (bench/smallappend.sh -N).
 *
 * Every write carries its sequence number, so no layer can skip a write of
 * unchanged bytes; after the fsync the file is read back and checked
 * (not with -x).
 *
 * Output: one CSV line on stdout:
 *   mode,size,count,us_per_write,p50_us,p99_us,max_us,writes_s,fsync_ms
 * (us_per_write = the writes' total time / count; writes_s that total.)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SIZE_MAX_BYTES (1u << 20)

struct opts {
	bool overwrite;
	uint32_t size;
	uint32_t count;
	bool keep;
	bool existing; /* -x */
	const char *path;
};

static void usage(FILE *f, const char *prog)
{
	fprintf(f, "usage: %s [-m append|overwrite] [-s size] [-n count] [-k | -x] FILE\n",
		prog);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	int c;

	*o = (struct opts){.size = 200, .count = 20000};
	while ((c = getopt(argc, argv, "m:s:n:kxh")) != -1) {
		switch (c) {
		case 'm':
			if (strcmp(optarg, "append") && strcmp(optarg, "overwrite")) {
				fprintf(stderr, "small_append: -m: append or overwrite, not '%s'\n",
					optarg);
				return -1;
			}
			o->overwrite = !strcmp(optarg, "overwrite");
			break;
		case 's':
			if (parse_u32(optarg, 1, SIZE_MAX_BYTES, &o->size)) {
				fprintf(stderr, "small_append: -s: 1..%u bytes, not '%s'\n",
					SIZE_MAX_BYTES, optarg);
				return -1;
			}
			break;
		case 'n':
			if (parse_u32(optarg, 1, 100000000, &o->count)) {
				fprintf(stderr, "small_append: -n: 1..100000000, not '%s'\n",
					optarg);
				return -1;
			}
			break;
		case 'k':
			o->keep = true;
			break;
		case 'x':
			o->existing = true;
			o->keep = true;
			break;
		case 'h':
			usage(stdout, argv[0]);
			exit(0);
		default:
			usage(stderr, argv[0]);
			return -1;
		}
	}
	if (optind != argc - 1) {
		usage(stderr, argv[0]);
		return -1;
	}
	o->path = argv[optind];
	return 0;
}

/* Record i: its number in the first bytes, then a byte pattern of i. */
static void fill(unsigned char *buf, uint32_t size, uint32_t i)
{
	memset(buf, (int)('a' + i % 26), size);
	memcpy(buf, &i, size < sizeof(i) ? size : sizeof(i));
}

static int write_all(int fd, const unsigned char *buf, size_t len, off_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, buf, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The file after the run: every record as written last. */
static int verify(int fd, const struct opts *o)
{
	unsigned char *want = malloc(o->size), *got = malloc(o->size);
	int rc = 0;

	if (!want || !got) {
		rc = -1;
		goto out;
	}
	for (uint32_t i = 0; i < o->count; i++) {
		ssize_t n = pread(fd, got, o->size, (off_t)i * o->size);

		fill(want, o->size, i);
		if (n != (ssize_t)o->size || memcmp(want, got, o->size)) {
			fprintf(stderr,
				"small_append: %s: record %u (offset %llu) is not what was written\n",
				o->path, i, (unsigned long long)i * o->size);
			rc = -1;
			break;
		}
	}
out:
	free(want);
	free(got);
	return rc;
}

int main(int argc, char **argv)
{
	struct opts o;
	unsigned char *buf;
	uint64_t *lat, total = 0, t_fsync;
	int fd, rc = 1;

	if (parse(argc, argv, &o))
		return 2;
	buf = malloc(o.size);
	lat = calloc(o.count, sizeof(*lat));
	if (!buf || !lat) {
		fprintf(stderr, "small_append: out of memory\n");
		return 1;
	}
	fd = open(o.path, o.existing ? O_RDWR : O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		fprintf(stderr, "small_append: %s: %s\n", o.path, strerror(errno));
		return 1;
	}
	if (o.overwrite && !o.existing) {
		/* the file exists with data before the timed rewrites */
		size_t len = ((size_t)o.count * o.size + 4095) & ~(size_t)4095;
		unsigned char *init = calloc(1, len);

		if (!init || write_all(fd, init, len, 0) || fsync(fd)) {
			fprintf(stderr, "small_append: %s: writing the file first: %s\n", o.path,
				strerror(errno));
			free(init);
			goto out;
		}
		free(init);
	}
	for (uint32_t i = 0; i < o.count; i++) {
		uint64_t t0;

		fill(buf, o.size, i);
		t0 = now_ns();
		if (write_all(fd, buf, o.size, (off_t)i * o.size)) {
			fprintf(stderr, "small_append: %s: write %u: %s\n", o.path, i,
				strerror(errno));
			goto out;
		}
		lat[i] = now_ns() - t0;
		total += lat[i];
	}
	t_fsync = now_ns();
	if (fsync(fd)) {
		fprintf(stderr, "small_append: %s: fsync: %s\n", o.path, strerror(errno));
		goto out;
	}
	t_fsync = now_ns() - t_fsync;
	if (!o.existing && verify(fd, &o))
		goto out;
	qsort(lat, o.count, sizeof(*lat), cmp_u64);
	printf("%s,%u,%u,%.2f,%.2f,%.2f,%.2f,%.4f,%.3f\n", o.overwrite ? "overwrite" : "append",
	       o.size, o.count, total / 1e3 / o.count, lat[o.count / 2] / 1e3,
	       lat[(uint64_t)o.count * 99 / 100] / 1e3, lat[o.count - 1] / 1e3, total / 1e9,
	       t_fsync / 1e6);
	rc = 0;
out:
	close(fd);
	if (!o.keep)
		unlink(o.path);
	free(buf);
	free(lat);
	return rc;
}
