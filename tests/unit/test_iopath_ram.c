// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_iopath_ram.c — backend "ram" through the public iopath interface:
 * round trips, the alignment it advertises, memory given back by DISCARD and
 * ZERO, range checks, completion only at reap, the event fd, statistics, and
 * several queues on one target from several threads.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "iopath/iopath.h"
#include "tests/unit/unit.h"

static struct cfs_io *open_ram(uint64_t size, uint32_t align, unsigned flags)
{
	struct cfs_io_config cfg = {
		.backend = "ram", .size_bytes = size, .align_bytes = align, .ram_flags = flags,
	};

	return t_io_open(&cfg);
}

/* Skip (not fail) where this process may not lock `bytes` (an ordinary user
 * under Debian's 8 MiB RLIMIT_MEMLOCK, e.g. a package build): the RAM store's
 * mlock2() would refuse, as chunkfs(8) says for -o mlock. */
static void skip_unless_lockable(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int err = 0;

	cr_assert_neq(p, MAP_FAILED);
	if (mlock2(p, bytes, MLOCK_ONFAULT))
		err = errno;
	munmap(p, bytes);
	if (err)
		cr_skip_test("cannot lock %zu MiB here (%s): RLIMIT_MEMLOCK", bytes >> 20,
			     strerror(err));
}

static void *xalloc(size_t bytes, size_t align)
{
	void *p = NULL;

	cr_assert_eq(posix_memalign(&p, align, bytes), 0);
	return p;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((seed * 131 + i * 7 + (i >> 9)) ^ (seed >> 3));
}

Test(ram, open_needs_size_and_sane_alignment)
{
	struct cfs_io_config cfg = { .backend = "ram" };
	struct cfs_io *io = NULL;

	cr_assert_eq(cfs_io_open(&cfg, &io), -EINVAL);
	cfg.size_bytes = MIB;
	cfg.align_bytes = 768;
	cr_assert_eq(cfs_io_open(&cfg, &io), -EINVAL);
	cfg.align_bytes = 8192;
	cr_assert_eq(cfs_io_open(&cfg, &io), -EINVAL);
	cfg.align_bytes = 4096;
	cfg.size_bytes = MIB + 512;
	cr_assert_eq(cfs_io_open(&cfg, &io), -EINVAL);
	cr_assert_null(io);
}

Test(ram, geometry)
{
	struct cfs_io *io = open_ram(8 * MIB, 512, 0);
	const struct cfs_io_geometry *g = cfs_io_geometry(io);

	cr_assert_eq(g->size_bytes, 8 * MIB);
	cr_assert_eq(g->logical_sector_bytes, 512);
	cr_assert_eq(g->physical_sector_bytes, 512);
	cr_assert_eq(g->mem_align_bytes, 512);
	cr_assert(g->discard_supported);
	cr_assert_str_eq(g->backend, "ram");
	cfs_io_close(io);

	io = open_ram(8 * MIB, 0, 0);
	g = cfs_io_geometry(io);
	cr_assert_eq(g->logical_sector_bytes, 1);
	cr_assert_eq(g->physical_sector_bytes, 4096);
	cr_assert_eq(g->mem_align_bytes, 1);
	cfs_io_close(io);
}

static const uint32_t sizes[] = { 512, 2048, 4096, 16384, 1u << 20 };

/* Sizes the target's alignment allows, each in its own 2 MiB slot, with
 * the 4 KiB after it checked to stay zero (nothing spills over). */
static void round_trips(struct cfs_io *io)
{
	uint32_t align = cfs_io_geometry(io)->logical_sector_bytes;
	struct cfs_ioq *q = t_ioq_new(io, 8);
	uint8_t *w = xalloc(MIB, 4096), *r = xalloc(MIB, 4096);
	struct cfs_io_stats *st = calloc(1, sizeof(*st));
	uint64_t bytes = 0, ops = 0;

	cfs_io_stats_reset(st);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i];
		uint64_t slot = i * 2 * MIB;

		if (n % align)
			continue;
		fill(w, n, i + 1);
		memset(r, 0xee, n);
		cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, slot, n, w, st), (int)n);
		cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, slot, n, r, st), (int)n);
		cr_assert_eq(memcmp(w, r, n), 0, "round trip of %u bytes", n);
		cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, slot + n, 4096, r, NULL), 4096);
		for (int j = 0; j < 4096; j++)
			cr_assert_eq(r[j], 0, "byte %d after %u bytes", j, n);
		bytes += n;
		ops++;
	}
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_FLUSH, 0, 0, NULL, st), 0);
	cr_assert_eq(st->op[CFS_IO_WRITE].ops, ops);
	cr_assert_eq(st->op[CFS_IO_READ].ops, ops);
	cr_assert_eq(st->op[CFS_IO_WRITE].bytes, bytes);
	cr_assert_eq(st->op[CFS_IO_READ].bytes, bytes);
	cr_assert_eq(st->op[CFS_IO_FLUSH].ops, 1);
	cr_assert_eq(st->op[CFS_IO_WRITE].latency.count, ops);
	cr_assert_eq(st->inflight_now, 0);
	cr_assert_geq(st->inflight_max, 1);
	free(st);
	free(w);
	free(r);
	cfs_ioq_destroy(q);
}

Test(ram, round_trips_aligned_512)
{
	struct cfs_io *io = open_ram(16 * MIB, 512, 0);

	round_trips(io);
	cfs_io_close(io);
}

Test(ram, round_trips_aligned_4096)
{
	struct cfs_io *io = open_ram(16 * MIB, 4096, 0);

	round_trips(io);
	cfs_io_close(io);
}

Test(ram, round_trips_mlock_and_hugepages)
{
	struct cfs_io *io;

	skip_unless_lockable(16 * MIB);
	io = open_ram(16 * MIB, 512, CFS_IO_RAM_MLOCK | CFS_IO_RAM_HUGEPAGES);

	round_trips(io);
	cfs_io_close(io);
}

Test(ram, misaligned_refused_and_counted)
{
	struct cfs_io *io = open_ram(4 * MIB, 512, 0);
	struct cfs_ioq *q = t_ioq_new(io, 8);
	uint8_t *buf = xalloc(8192, 4096);
	struct cfs_io_stats *st = calloc(1, sizeof(*st));

	cfs_io_stats_reset(st);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 100, 512, buf, st), -EINVAL);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 512, 100, buf, st), -EINVAL);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 0, 512, buf + 8, st), -EINVAL);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_ZERO, 256, 512, NULL, st), -EINVAL);
	cr_assert_eq(st->err_misaligned, 4);
	cr_assert_eq(st->op[CFS_IO_WRITE].ops, 0, "refused requests are not completions");
	/* The aligned neighbour works. */
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 512, 512, buf, st), 512);
	free(st);
	free(buf);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

Test(ram, align_zero_accepts_anything)
{
	struct cfs_io *io = open_ram(MIB, 0, 0);
	struct cfs_ioq *q = t_ioq_new(io, 8);
	uint8_t *w = malloc(9000), *r = malloc(9000);

	fill(w, 9000, 3);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 12345, 7777, w + 1, NULL), 7777);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 12345, 7777, r + 3, NULL), 7777);
	cr_assert_eq(memcmp(w + 1, r + 3, 7777), 0);
	/* ZERO over partial pages: exactly the range is cleared. */
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_ZERO, 12345 + 100, 5000, NULL, NULL), 5000);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 12345, 7777, r, NULL), 7777);
	for (int i = 0; i < 7777; i++)
		cr_assert_eq(r[i], (i >= 100 && i < 5100) ? 0 : w[1 + i], "byte %d", i);
	free(w);
	free(r);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

Test(ram, out_of_range_refused)
{
	struct cfs_io *io = open_ram(MIB, 512, 0);
	struct cfs_ioq *q = t_ioq_new(io, 8);
	uint8_t *buf = xalloc(8192, 4096);

	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, MIB, 512, buf, NULL), -EINVAL);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, MIB - 512, 1024, buf, NULL), -EINVAL);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_DISCARD, MIB - 512, 1024, NULL, NULL), -EINVAL);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, UINT64_MAX - 511, 512, buf, NULL), -EINVAL);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, MIB - 512, 512, buf, NULL), 512);
	free(buf);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

/* A range longer than one request goes in pieces: every byte lands, the
 * whole range reads back, ZERO without a buffer clears it all, and a range
 * past the end fails without writing beyond. */
Test(ram, sync_range_splits_long_ranges)
{
	const uint64_t length = 3 * MIB + 512 * 1024; /* four requests, the last a half */
	struct cfs_io *io = open_ram(8 * MIB, 4096, 0);
	struct cfs_ioq *q = t_ioq_new(io, 8);
	uint8_t *w = xalloc(length, 4096), *r = xalloc(length, 4096);

	fill(w, length, 11);
	cr_assert_eq(cfs_ioq_sync_range(q, CFS_IO_WRITE, MIB, length, w), 0);
	memset(r, 0xee, length);
	cr_assert_eq(cfs_ioq_sync_range(q, CFS_IO_READ, MIB, length, r), 0);
	cr_assert_eq(memcmp(w, r, length), 0);
	/* Piece by piece it is the same data as one request would see. */
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, MIB + 3 * MIB, 512 * 1024, r, NULL), 512 * 1024);
	cr_assert_eq(memcmp(r, w + 3 * MIB, 512 * 1024), 0);
	cr_assert_eq(cfs_ioq_sync_range(q, CFS_IO_ZERO, MIB, length, NULL), 0);
	cr_assert_eq(cfs_ioq_sync_range(q, CFS_IO_READ, MIB, length, r), 0);
	for (uint64_t i = 0; i < length; i++)
		cr_assert_eq(r[i], 0, "byte %llu", (unsigned long long)i);
	cr_assert_eq(cfs_ioq_sync_range(q, CFS_IO_WRITE, 6 * MIB, 3 * MIB, w), -EINVAL);
	cr_assert_eq(cfs_ioq_sync_range(q, CFS_IO_READ, 0, 0, r), 0, "nothing to do");
	free(w);
	free(r);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

static long rss_bytes(void)
{
	long pages_total, pages_rss;
	FILE *f = fopen("/proc/self/statm", "r");

	cr_assert(f);
	cr_assert_eq(fscanf(f, "%ld %ld", &pages_total, &pages_rss), 2);
	fclose(f);
	return pages_rss * sysconf(_SC_PAGESIZE);
}

/* Memory grows with the data, not the size, and goes back on DISCARD/ZERO. */
static void discard_returns_memory(enum cfs_io_op op, unsigned flags)
{
	const uint64_t size = 256 * MIB, data = 64 * MIB;
	struct cfs_io *io = open_ram(size, 4096, flags);
	struct cfs_ioq *q = t_ioq_new(io, 8);
	uint8_t *buf = xalloc(MIB, 4096), *r = xalloc(MIB, 4096);
	long rss0, rss1, rss2;

	cr_assert_lt(cfs_io_ram_resident_bytes(io), MIB, "nothing is resident at open");
	rss0 = rss_bytes();
	fill(buf, MIB, 9);
	for (uint64_t off = 0; off < data; off += MIB)
		cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, MIB + off, MIB, buf, NULL), (int)MIB);
	rss1 = rss_bytes();
	cr_assert_geq(cfs_io_ram_resident_bytes(io), data);
	cr_assert_leq(cfs_io_ram_resident_bytes(io), data + 4 * MIB);
	cr_assert_geq(rss1 - rss0, (long)(data - 4 * MIB), "rss %ld -> %ld", rss0, rss1);

	/* Give back all but the first and last 4 KiB of the written range. */
	for (uint64_t off = 4096; off < data - 4096;) {
		uint32_t n = (uint32_t)(data - 4096 - off < 8 * MIB ? data - 4096 - off : 8 * MIB);

		cr_assert_eq(cfs_ioq_sync(q, op, MIB + off, n, NULL, NULL), (int)n);
		off += n;
	}
	rss2 = rss_bytes();
	cr_assert_lt(cfs_io_ram_resident_bytes(io), 4 * MIB, "resident %lu",
		     (unsigned long)cfs_io_ram_resident_bytes(io));
	cr_assert_lt(rss2, rss1 - (long)(data - 8 * MIB), "rss %ld -> %ld", rss1, rss2);

	/* The freed range reads as zeros; the kept edges kept their data. */
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, MIB, 8192, r, NULL), 8192);
	cr_assert_eq(memcmp(r, buf, 4096), 0);
	for (int i = 4096; i < 8192; i++)
		cr_assert_eq(r[i], 0);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, MIB + data - MIB, MIB, r, NULL), (int)MIB);
	for (uint32_t i = 0; i < MIB - 4096; i++)
		cr_assert_eq(r[i], 0);
	cr_assert_eq(memcmp(r + MIB - 4096, buf + MIB - 4096, 4096), 0);
	free(buf);
	free(r);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

Test(ram, discard_returns_memory)
{
	discard_returns_memory(CFS_IO_DISCARD, 0);
}

Test(ram, zero_returns_memory)
{
	discard_returns_memory(CFS_IO_ZERO, 0);
}

Test(ram, discard_returns_memory_mlocked)
{
	skip_unless_lockable(256 * MIB);
	discard_returns_memory(CFS_IO_DISCARD, CFS_IO_RAM_MLOCK);
}

static int done_calls;

static void count_done(struct cfs_io_req *req, int res)
{
	cr_assert_eq(res, (int)req->length_bytes);
	done_calls++;
}

Test(ram, done_runs_at_reap_not_in_queue)
{
	struct cfs_io *io = open_ram(MIB, 512, 0);
	struct cfs_ioq *q = t_ioq_new(io, 4);
	uint8_t *buf = xalloc(4096, 4096);
	struct cfs_io_req req[5];

	memset(req, 0, sizeof(req));
	done_calls = 0;
	for (int i = 0; i < 4; i++) {
		req[i] = (struct cfs_io_req){ .offset_bytes = (uint64_t)i * 4096, .length_bytes = 4096,
					      .op = CFS_IO_WRITE, .buf = buf, .done = count_done };
		cr_assert_eq(cfs_ioq_queue(q, &req[i]), 0);
	}
	req[4] = req[0];
	cr_assert_eq(cfs_ioq_queue(q, &req[4]), -EBUSY, "depth 4 is full");
	cr_assert_eq(done_calls, 0);
	cr_assert_eq(cfs_ioq_inflight(q), 4);
	cr_assert_eq(cfs_ioq_submit(q), 4);
	cr_assert_eq(cfs_ioq_reap(q, 1), 4);
	cr_assert_eq(done_calls, 4);
	cr_assert_eq(cfs_ioq_inflight(q), 0);
	cr_assert_eq(cfs_ioq_reap(q, 1), 0, "nothing in flight: reap does not wait");
	free(buf);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

Test(ram, submit_counts_batches_and_requests)
{
	struct cfs_io *io = open_ram(MIB, 512, 0);
	struct cfs_ioq *q = t_ioq_new(io, 8);
	uint8_t *buf = xalloc(4096, 4096);
	struct cfs_io_req req[4];
	uint64_t batches, requests;

	memset(req, 0, sizeof(req));
	done_calls = 0;
	for (int i = 0; i < 4; i++)
		req[i] = (struct cfs_io_req){ .offset_bytes = (uint64_t)i * 4096, .length_bytes = 4096,
					      .op = CFS_IO_WRITE, .buf = buf, .done = count_done };
	cfs_ioq_submit_counts(q, &batches, &requests);
	cr_assert_eq(batches + requests, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(cfs_ioq_queue(q, &req[i]), 0);
	cr_assert_eq(cfs_ioq_submit(q), 3);
	cr_assert_eq(cfs_ioq_submit(q), 0, "nothing staged");
	cr_assert_eq(cfs_ioq_queue(q, &req[3]), 0);
	cr_assert_eq(cfs_ioq_submit(q), 1);
	cfs_ioq_submit_counts(q, &batches, &requests);
	cr_assert_eq(batches, 2, "an empty submit is not a batch");
	cr_assert_eq(requests, 4);
	cr_assert_eq(cfs_ioq_reap(q, 4), 4);
	free(buf);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

Test(ram, event_fd_signals_completions)
{
	struct cfs_io *io = open_ram(MIB, 512, 0);
	struct cfs_ioq *q = t_ioq_new(io, 4);
	uint8_t *buf = xalloc(4096, 4096);
	struct cfs_io_req req = { .length_bytes = 4096, .op = CFS_IO_READ, .buf = buf,
				  .done = count_done };
	int fd = cfs_ioq_event_fd(q);
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint64_t v;

	cr_assert_geq(fd, 0);
	cr_assert_eq(poll(&pfd, 1, 0), 0, "quiet before any I/O");
	done_calls = 0;
	cr_assert_eq(cfs_ioq_queue(q, &req), 0);
	cfs_ioq_submit(q);
	cr_assert_eq(poll(&pfd, 1, 1000), 1);
	cr_assert_eq(read(fd, &v, sizeof(v)), (ssize_t)sizeof(v));
	cr_assert_eq(cfs_ioq_reap(q, 0), 1);
	cr_assert_eq(done_calls, 1);
	cr_assert_eq(poll(&pfd, 1, 0), 0, "quiet again after read + reap");
	free(buf);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

/* ---- several queues, several threads ---------------------------------------- */

#define THREAD_REGION (4 * MIB)
#define THREAD_ROUNDS 300

struct worker {
	struct cfs_io *io;
	unsigned id;
	int failures;
};

static void worker_done(struct cfs_io_req *req, int res)
{
	int *bad = req->cookie;

	if (res != (int)req->length_bytes)
		(*bad)++;
}

/* Each thread owns a queue and a region: batches of async writes, then
 * reads back and checks, over and over. */
static void *worker(void *arg)
{
	struct worker *w = arg;
	struct cfs_ioq *q = NULL;
	struct cfs_ioq_config qc = { .depth = 16 };
	uint8_t *wbuf, *rbuf;
	struct cfs_io_req req[16];
	uint64_t base = (uint64_t)w->id * THREAD_REGION;

	if (cfs_ioq_create(w->io, &qc, &q) || posix_memalign((void **)&wbuf, 4096, 16 * 16384) ||
	    posix_memalign((void **)&rbuf, 4096, 16 * 16384)) {
		w->failures++;
		return NULL;
	}
	for (unsigned round = 0; round < THREAD_ROUNDS; round++) {
		uint64_t off = base + (uint64_t)(round % 8) * 16 * 16384;

		for (unsigned i = 0; i < 16; i++) {
			fill(wbuf + i * 16384, 16384, w->id * 100000 + round * 16 + i);
			req[i] = (struct cfs_io_req){ .offset_bytes = off + i * 16384,
						      .length_bytes = 16384, .op = CFS_IO_WRITE,
						      .buf = wbuf + i * 16384, .done = worker_done,
						      .cookie = &w->failures };
			if (cfs_ioq_queue(q, &req[i]))
				w->failures++;
		}
		cfs_ioq_submit(q);
		while (cfs_ioq_inflight(q))
			cfs_ioq_reap(q, 1);
		for (unsigned i = 0; i < 16; i++) {
			req[i].op = CFS_IO_READ;
			req[i].buf = rbuf + i * 16384;
			if (cfs_ioq_queue(q, &req[i]))
				w->failures++;
		}
		cfs_ioq_submit(q);
		while (cfs_ioq_inflight(q))
			cfs_ioq_reap(q, 1);
		if (memcmp(wbuf, rbuf, 16 * 16384))
			w->failures++;
	}
	free(wbuf);
	free(rbuf);
	cfs_ioq_destroy(q);
	return NULL;
}

Test(ram, concurrent_queues_from_threads)
{
	enum { N = 4 };
	struct cfs_io *io = open_ram(N * THREAD_REGION, 512, 0);
	struct worker w[N];
	pthread_t t[N];

	for (unsigned i = 0; i < N; i++) {
		w[i] = (struct worker){ .io = io, .id = i };
		cr_assert_eq(pthread_create(&t[i], NULL, worker, &w[i]), 0);
	}
	for (unsigned i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		cr_assert_eq(w[i].failures, 0, "thread %u", i);
	}
	cfs_io_close(io);
}

/* Reaping on another thread than the one queueing (the lock-free list). */
struct reaper_arg {
	struct cfs_ioq *q;
	atomic_int done;
	atomic_bool stop;
};

static void reaped_done(struct cfs_io_req *req, int res)
{
	struct reaper_arg *ra = req->cookie;

	atomic_fetch_add(&ra->done, 1);
}

static void *reaper(void *arg)
{
	struct reaper_arg *ra = arg;

	while (!atomic_load(&ra->stop) || cfs_ioq_inflight(ra->q))
		cfs_ioq_reap(ra->q, 0);
	return NULL;
}

Test(ram, submit_and_reap_on_two_threads)
{
	enum { TOTAL = 200000, DEPTH = 64 };
	struct cfs_io *io = open_ram(MIB, 512, 0);
	struct reaper_arg ra = { .q = t_ioq_new(io, DEPTH) };
	struct cfs_io_req *req = calloc(DEPTH, sizeof(*req));
	uint8_t *buf = xalloc(512, 512);
	pthread_t t;
	int queued = 0;

	cr_assert_eq(pthread_create(&t, NULL, reaper, &ra), 0);
	while (queued < TOTAL) {
		struct cfs_io_req *r = &req[queued % DEPTH];

		/* Reuse a slot only after its completion: inflight < DEPTH. */
		if (queued - atomic_load(&ra.done) >= DEPTH) {
			sched_yield();
			continue;
		}
		*r = (struct cfs_io_req){ .offset_bytes = (uint64_t)(queued % 2048) * 512,
					  .length_bytes = 512, .op = CFS_IO_READ, .buf = buf,
					  .done = reaped_done, .cookie = &ra };
		cr_assert_eq(cfs_ioq_queue(ra.q, r), 0);
		cfs_ioq_submit(ra.q);
		queued++;
	}
	atomic_store(&ra.stop, true);
	pthread_join(t, NULL);
	cr_assert_eq(atomic_load(&ra.done), TOTAL);
	free(req);
	free(buf);
	cfs_ioq_destroy(ra.q);
	cfs_io_close(io);
}

static void rmw_done(struct cfs_io_req *req, int res)
{
	*(int *)req->cookie = res;
}

/* The daemon's RAM path (fs/fuse/data.c ram_read/ram_write) copies through
 * cfs_io_ram_ptr() and may do so only while no read-modify-write holds a
 * range lock (cfs_io_ranges_locked()). */
Test(ram, direct_pointer_and_range_lock_flag)
{
	struct cfs_io *io = open_ram(4 * MIB, 512, 0);
	struct cfs_ioq *q = t_ioq_new(io, 8);
	struct cfs_io_config ncfg = {.backend = "null", .size_bytes = MIB};
	struct cfs_io *null_io = NULL;
	uint8_t *w = xalloc(4096, 4096), *r = xalloc(4096, 4096), *p;
	uint8_t patch[10];
	int res = 1;
	struct cfs_io_rmw rmw = {
		.req = {.op = CFS_IO_WRITE, .offset_bytes = 100, .length_bytes = sizeof(patch),
			.buf = patch, .done = rmw_done, .cookie = &res},
	};

	p = cfs_io_ram_ptr(io, 0, 4 * MIB);
	cr_assert_not_null(p);
	cr_assert_eq(cfs_io_ram_ptr(io, MIB, 4096), p + MIB);
	cr_assert_eq(cfs_io_ram_ptr(io, 4 * MIB, 0), p + 4 * MIB);
	cr_assert_null(cfs_io_ram_ptr(io, 4 * MIB, 1), "past the end");
	cr_assert_null(cfs_io_ram_ptr(io, 1, 4 * MIB), "past the end");
	cr_assert_null(cfs_io_ram_ptr(NULL, 0, 0));
	cr_assert_eq(cfs_io_open(&ncfg, &null_io), 0);
	cr_assert_null(cfs_io_ram_ptr(null_io, 0, 0), "not a RAM target");
	cfs_io_close(null_io);

	/* One store: a queued write shows through the pointer, a copy
	 * through the pointer shows to a queued read. */
	fill(w, 4096, 5);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, MIB, 4096, w, NULL), 4096);
	cr_assert_eq(memcmp(p + MIB, w, 4096), 0);
	fill(w, 4096, 6);
	memcpy(p + 2 * MIB, w, 4096);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 2 * MIB, 4096, r, NULL), 4096);
	cr_assert_eq(memcmp(r, w, 4096), 0);

	/* A read-modify-write holds its lock from start to done(). */
	cr_assert(!cfs_io_ranges_locked(io));
	memset(patch, 0x5a, sizeof(patch));
	cr_assert_eq(cfs_io_rmw_start(q, &rmw), 0);
	cr_assert(cfs_io_ranges_locked(io), "no lock while the rmw is in flight");
	for (int i = 0; i < 100 && res == 1; i++) {
		cfs_ioq_submit(q);
		cfs_ioq_reap(q, 0);
	}
	cr_assert_eq(res, (int)sizeof(patch));
	cr_assert(!cfs_io_ranges_locked(io), "lock left after done()");
	cr_assert_eq(p[100], 0x5a);
	cr_assert_eq(p[109], 0x5a);
	cr_assert_eq(p[110], 0);
	free(w);
	free(r);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}
