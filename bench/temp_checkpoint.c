// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * temp_checkpoint.c — the temp-table checkpoint of IBM's Informix note
 * "DIRECT_IO for temporary dbspaces"
 * as a file workload: a database fills an 80 MB temp table with 2 KiB pages
 * in its buffer pool, then a checkpoint flushes every dirty page to the temp
 * chunk and waits until they are written. 20 rounds; each round's flush
 * time is measured from the first page write to the end of the fsync.
 *
 *   temp_checkpoint [-r rounds] [-m MB] [-p page] [-q depth] [-b] [-c] FILE
 *
 * Modes (how the note's rows map here):
 *   default  O_DIRECT through io_uring, `depth` page writes in flight, then
 *            fdatasync: "DIRECT_IO 5" (kernel AIO on the chunk).
 *   -b       buffered pwrite() of each page, then fdatasync: Informix AIO
 *            in a standard file system (the page cache absorbs the writes,
 *            the fsync pays for them).
 * Pages are written in ascending chunk offset, as a checkpoint sorts them,
 * one 2 KiB write each (no coalescing: every page is one request). Every
 * round stamps its number into the pages, so no layer can skip a write of
 * unchanged bytes.
 *
 * The chunk is created at its full size and written once before the timed
 * rounds (-c skips that): Informix creates a chunk before any table lives in
 * it, and the first writes into a fresh file measure allocation, not the
 * checkpoint.
 *
 * Output: one line per round on stderr with -v, and one CSV line on stdout:
 *   mode,page,depth,rounds,MB,avg_ms,worst_ms,best_ms,median_ms
 *
 * What this does not do: simulate the inserts (CPU work in the database) or
 * read anything back (the tests verify data).
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEPTH_MAX 1024u

struct opts {
	unsigned rounds;
	uint64_t bytes;
	uint32_t page;
	unsigned depth;
	bool buffered;
	bool no_create;
	bool verbose;
	const char *path;
};

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [-r rounds] [-m MB] [-p page] [-q depth] [-b] [-c] [-v] FILE\n"
		"  -r  checkpoints (default 20)\n"
		"  -m  temp table size in MB (10^6 bytes, default 80)\n"
		"  -p  page size in bytes (default 2048)\n"
		"  -q  O_DIRECT page writes in flight (default 32, max %u)\n"
		"  -b  buffered writes + fdatasync instead of O_DIRECT + io_uring\n"
		"  -c  do not create and prefill the chunk first\n"
		"  -v  one line per round on stderr\n",
		prog, DEPTH_MAX);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Stamp page number and round into every 64 bytes of the page. */
static void fill_page(uint8_t *p, uint32_t page, uint64_t index, unsigned round)
{
	for (uint32_t off = 0; off < page; off += 64) {
		uint64_t w[8] = {index, round, off, 0x74656d70u, index ^ round, 0, 0, 0};

		memcpy(p + off, w, page - off < 64 ? page - off : 64);
	}
}

static int flush_buffered(int fd, const struct opts *o, uint8_t *page, unsigned round)
{
	uint64_t pages = o->bytes / o->page;

	for (uint64_t i = 0; i < pages; i++) {
		fill_page(page, o->page, i, round);
		if (pwrite(fd, page, o->page, (off_t)(i * o->page)) != (ssize_t)o->page)
			return errno ? -errno : -EIO;
	}
	return fdatasync(fd) ? -errno : 0;
}

/*
 * Keep `depth` page writes in flight: each completion's buffer slot gets the
 * next page. Submitting as soon as a slot is refilled keeps the device (or
 * the FUSE daemon) busy, as kernel AIO from several database threads would.
 */
static int flush_direct(struct io_uring *ring, int fd, const struct opts *o, uint8_t *bufs,
			unsigned round)
{
	uint64_t pages = o->bytes / o->page, next = 0, done = 0;
	unsigned inflight = 0;
	int ret;

	while (done < pages) {
		while (inflight < o->depth && next < pages) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
			unsigned slot = (unsigned)(next % o->depth);
			uint8_t *buf = bufs + (size_t)slot * o->page;

			if (!sqe)
				break;
			fill_page(buf, o->page, next, round);
			io_uring_prep_write(sqe, fd, buf, o->page, next * o->page);
			sqe->user_data = next;
			next++;
			inflight++;
		}
		ret = io_uring_submit_and_wait(ring, 1);
		if (ret < 0)
			return ret;
		for (;;) {
			struct io_uring_cqe *cqe;

			if (io_uring_peek_cqe(ring, &cqe))
				break;
			if (cqe->res != (int)o->page) {
				fprintf(stderr, "temp_checkpoint: page %llu: %s\n",
					(unsigned long long)cqe->user_data,
					cqe->res < 0 ? strerror(-cqe->res) : "short write");
				return cqe->res < 0 ? cqe->res : -EIO;
			}
			io_uring_cqe_seen(ring, cqe);
			inflight--;
			done++;
		}
	}
	return fdatasync(fd) ? -errno : 0;
}

/* The chunk at its full size, every page written once (not timed). */
static int create_chunk(const struct opts *o)
{
	int fd = open(o->path, O_WRONLY | O_CREAT, 0644);
	size_t chunk = 1u << 20;
	uint8_t *buf;
	int ret = 0;

	if (fd < 0)
		return -errno;
	buf = calloc(1, chunk);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	memset(buf, 0x5a, chunk);
	for (uint64_t off = 0; off < o->bytes && !ret; off += chunk) {
		size_t n = o->bytes - off < chunk ? (size_t)(o->bytes - off) : chunk;

		if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n)
			ret = errno ? -errno : -EIO;
	}
	if (!ret && fsync(fd))
		ret = -errno;
	free(buf);
	close(fd);
	return ret;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int parse(int argc, char **argv, struct opts *o)
{
	int c;

	*o = (struct opts){.rounds = 20, .bytes = 80000000, .page = 2048, .depth = 32};
	while ((c = getopt(argc, argv, "r:m:p:q:bcvh")) != -1) {
		switch (c) {
		case 'r':
			o->rounds = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'm':
			o->bytes = strtoull(optarg, NULL, 10) * 1000000u;
			break;
		case 'p':
			o->page = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'q':
			o->depth = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'b':
			o->buffered = true;
			break;
		case 'c':
			o->no_create = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			usage(stdout, argv[0]);
			exit(0);
		default:
			usage(stderr, argv[0]);
			return -EINVAL;
		}
	}
	if (optind + 1 != argc || !o->rounds || !o->page || o->page % 512 || !o->depth ||
	    o->depth > DEPTH_MAX || o->bytes < o->page) {
		usage(stderr, argv[0]);
		return -EINVAL;
	}
	o->path = argv[optind];
	o->bytes -= o->bytes % o->page;
	return 0;
}

int main(int argc, char **argv)
{
	struct io_uring ring;
	struct opts o;
	uint64_t *us, sum = 0; /* flush times in microseconds */
	uint8_t *bufs = NULL;
	int fd, ret;

	if (parse(argc, argv, &o))
		return 2;
	if (!o.no_create) {
		ret = create_chunk(&o);
		if (ret) {
			fprintf(stderr, "temp_checkpoint: %s: %s\n", o.path, strerror(-ret));
			return 1;
		}
	}
	fd = open(o.path, O_WRONLY | (o.buffered ? 0 : O_DIRECT));
	if (fd < 0) {
		fprintf(stderr, "temp_checkpoint: %s: %s\n", o.path, strerror(errno));
		return 1;
	}
	if (posix_memalign((void **)&bufs, 4096, (size_t)o.depth * o.page)) {
		fprintf(stderr, "temp_checkpoint: out of memory\n");
		return 1;
	}
	if (!o.buffered) {
		ret = io_uring_queue_init(o.depth * 2, &ring, 0);
		if (ret) {
			fprintf(stderr, "temp_checkpoint: io_uring: %s\n", strerror(-ret));
			return 1;
		}
	}
	us = calloc(o.rounds, sizeof(*us));
	if (!us)
		return 1;
	for (unsigned r = 0; r < o.rounds; r++) {
		uint64_t t0 = now_ns();

		ret = o.buffered ? flush_buffered(fd, &o, bufs, r + 1)
				 : flush_direct(&ring, fd, &o, bufs, r + 1);
		if (ret) {
			fprintf(stderr, "temp_checkpoint: round %u: %s\n", r + 1, strerror(-ret));
			return 1;
		}
		us[r] = (now_ns() - t0) / 1000;
		sum += us[r];
		if (o.verbose)
			fprintf(stderr, "round %u: %.3f ms\n", r + 1, us[r] / 1000.0);
	}
	qsort(us, o.rounds, sizeof(*us), cmp_u64);
	printf("%s,%u,%u,%u,%.1f,%.3f,%.3f,%.3f,%.3f\n", o.buffered ? "buffered" : "direct", o.page,
	       o.buffered ? 1 : o.depth, o.rounds, o.bytes / 1e6, sum / 1000.0 / o.rounds,
	       us[o.rounds - 1] / 1000.0, us[0] / 1000.0, us[o.rounds / 2] / 1000.0);
	if (!o.buffered)
		io_uring_queue_exit(&ring);
	free(us);
	free(bufs);
	close(fd);
	return 0;
}
