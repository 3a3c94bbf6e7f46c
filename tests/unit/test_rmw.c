// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_rmw.c — iopath/rmw.c: unaligned reads and writes checked against an
 * in-memory model; concurrent overlapping unaligned writers on several
 * queues and threads never lose a non-overlapping update; aligned writes
 * wait for a read-modify-write of their sectors; statistics; -EBUSY when the
 * bounce pool is empty.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "iopath/iopath.h"
#include "tests/unit/unit.h"

static struct cfs_io *open_target(const char *backend, uint64_t size, uint32_t align,
				  const char *fault_spec)
{
	struct cfs_io_config cfg = {
		.backend = backend, .size_bytes = size, .align_bytes = align,
		.fault_spec = fault_spec,
	};

	return t_io_open(&cfg);
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* ---- one rmw at a time, checked against a model ------------------------------ */

struct waiter {
	atomic_int finished;
	int res;
};

static void rmw_done(struct cfs_io_req *req, int res)
{
	struct waiter *w = req->cookie;

	w->res = res;
	atomic_fetch_add(&w->finished, 1);
}

/* Start an rmw and reap q until it finished; returns its result. */
static int rmw_sync(struct cfs_ioq *q, uint8_t op, uint64_t offset, uint32_t length, void *buf,
		    struct cfs_io_stats *stats)
{
	struct waiter w = { 0 };
	struct cfs_io_rmw rmw = {
		.req = { .offset_bytes = offset, .length_bytes = length, .op = op, .buf = buf,
			 .stats = stats, .done = rmw_done, .cookie = &w },
	};
	int ret = cfs_io_rmw_start(q, &rmw);

	if (ret)
		return ret;
	cr_assert_eq(atomic_load(&w.finished), 0, "done() ran inside cfs_io_rmw_start()");
	cfs_ioq_submit(q);
	while (!atomic_load(&w.finished))
		cfs_ioq_reap(q, 1);
	cr_assert_eq(atomic_load(&w.finished), 1, "done() ran twice");
	return w.res;
}

static void model_check(struct cfs_ioq *q, const uint8_t *model, uint64_t size)
{
	uint8_t *r = NULL;

	cr_assert_eq(posix_memalign((void **)&r, 4096, MIB), 0);
	for (uint64_t off = 0; off < size; off += MIB) {
		cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, off, MIB, r, NULL), (int)MIB);
		for (uint64_t i = 0; i < MIB; i++)
			if (r[i] != model[off + i])
				cr_assert_fail("byte %lu: store %02x, model %02x",
					       (unsigned long)(off + i), r[i], model[off + i]);
	}
	free(r);
}

static void random_against_model(const char *backend, uint32_t align, const char *spec)
{
	const uint64_t size = 4 * MIB;
	struct cfs_io *io = open_target(backend, size, align, spec);
	struct cfs_ioq *q = t_ioq_new(io, 16);
	uint8_t *model = calloc(1, size), *buf = malloc(MIB + 64), *got = malloc(MIB + 64);
	struct cfs_io_stats *st = calloc(1, sizeof(*st));
	uint64_t seed = 0x1234567 + align, writes = 0, reads = 0;

	cfs_io_stats_reset(st);
	for (int i = 0; i < 2000; i++) {
		uint64_t r = rng_next(&seed);
		/* Mostly small (database pages, odd sizes), sometimes up to 1 MiB. */
		uint32_t length = (r & 15) == 0 ? 1 + (uint32_t)(rng_next(&seed) % MIB) :
						   1 + (uint32_t)(rng_next(&seed) % 9000);
		uint64_t offset = rng_next(&seed) % (size - length + 1);
		unsigned skew = (unsigned)(r >> 8) % 64;	/* buffer at any address */

		if ((r >> 4) & 1) {
			for (uint32_t j = 0; j < length; j++)
				buf[skew + j] = (uint8_t)(r >> 16) + (uint8_t)j;
			cr_assert_eq(rmw_sync(q, CFS_IO_WRITE, offset, length, buf + skew, st),
				     (int)length, "write %u at %lu", length, (unsigned long)offset);
			memcpy(model + offset, buf + skew, length);
			writes++;
		} else {
			cr_assert_eq(rmw_sync(q, CFS_IO_READ, offset, length, got + skew, st),
				     (int)length);
			cr_assert_eq(memcmp(got + skew, model + offset, length), 0,
				     "read %u at %lu", length, (unsigned long)offset);
			reads++;
		}
	}
	model_check(q, model, size);
	cr_assert_eq(st->rmw_ops, writes + reads);
	cr_assert_eq(st->op[CFS_IO_WRITE].ops, writes, "the sector I/O is not charged");
	cr_assert_eq(st->op[CFS_IO_READ].ops, reads);
	cr_assert_eq(st->inflight_now, 0);
	free(st);
	free(model);
	free(buf);
	free(got);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

Test(rmw, random_against_model_512)
{
	random_against_model("ram", 512, NULL);
}

Test(rmw, random_against_model_4096)
{
	random_against_model("ram", 4096, NULL);
}

Test(rmw, random_against_model_fault_wrapper)
{
	/* Through the fault wrapper (delays reorder completions). */
	random_against_model("ram", 512, "op=read,every=1,nth=3,delay_us=20");
}

/* ---- argument checks ---------------------------------------------------------- */

static void never_done(struct cfs_io_req *req, int res)
{
	cr_assert_fail("done() for a refused request");
}

Test(rmw, refuses_bad_requests)
{
	struct cfs_io *io = open_target("ram", MIB, 512, NULL);
	struct cfs_ioq *q = t_ioq_new(io, 8);
	char buf[64];
	struct cfs_io_rmw rmw = {
		.req = { .offset_bytes = 10, .length_bytes = 0, .op = CFS_IO_WRITE, .buf = buf,
			 .done = never_done },
	};

	cr_assert_eq(cfs_io_rmw_start(q, &rmw), -EINVAL, "zero length");
	rmw.req.length_bytes = (uint32_t)MIB + 1;
	cr_assert_eq(cfs_io_rmw_start(q, &rmw), -EINVAL, "too long");
	rmw.req.length_bytes = 20;
	rmw.req.offset_bytes = MIB - 10;
	cr_assert_eq(cfs_io_rmw_start(q, &rmw), -EINVAL, "past the end");
	rmw.req.offset_bytes = 10;
	rmw.req.op = CFS_IO_FLUSH;
	cr_assert_eq(cfs_io_rmw_start(q, &rmw), -EINVAL, "not a read or write");
	cfs_ioq_reap(q, 0);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

Test(rmw, largest_request_spans_two_pieces)
{
	/* 1 MiB at an odd offset: the cover is 1 MiB + 2 sectors, more than
	 * one sector request may carry. */
	struct cfs_io *io = open_target("ram", 4 * MIB, 4096, NULL);
	struct cfs_ioq *q = t_ioq_new(io, 8);
	uint8_t *w = malloc(MIB), *r = malloc(MIB + 1);

	for (uint32_t i = 0; i < MIB; i++)
		w[i] = (uint8_t)(i * 13 + 1);
	cr_assert_eq(rmw_sync(q, CFS_IO_WRITE, 4096 + 123, (uint32_t)MIB, w, NULL), (int)MIB);
	cr_assert_eq(rmw_sync(q, CFS_IO_READ, 4096 + 123, (uint32_t)MIB, r + 1, NULL), (int)MIB);
	cr_assert_eq(memcmp(w, r + 1, MIB), 0);
	cr_assert_eq(rmw_sync(q, CFS_IO_READ, 4096, 123, r, NULL), 123);
	for (int i = 0; i < 123; i++)
		cr_assert_eq(r[i], 0);
	free(w);
	free(r);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

/* Errors of the sector I/O reach the caller once, and the lock is freed. */
Test(rmw, inner_error_reaches_caller_and_unlocks)
{
	struct cfs_io *io = open_target("ram", MIB, 512, "op=read,nth=1,err=EIO");
	struct cfs_ioq *q = t_ioq_new(io, 8);
	struct cfs_io_stats *st = calloc(1, sizeof(*st));
	char buf[100] = "hello";

	cfs_io_stats_reset(st);
	cr_assert_eq(rmw_sync(q, CFS_IO_WRITE, 700, 5, buf, st), -EIO);
	cr_assert_eq(st->op[CFS_IO_WRITE].errors, 1);
	cr_assert_eq(st->err_eio, 1);
	cr_assert_eq(st->rmw_ops, 1);
	/* The range is free again: the same write now succeeds. */
	cr_assert_eq(rmw_sync(q, CFS_IO_WRITE, 700, 5, buf, st), 5);
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(rmw_sync(q, CFS_IO_READ, 700, 5, buf, st), 5);
	cr_assert_str_eq(buf, "hello");
	free(st);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

Test(rmw, busy_when_bounce_pool_is_empty)
{
	/* Big writes use the big slots; while delayed reads keep them in flight
	 * the pool runs dry and start says -EBUSY instead of allocating. */
	enum { N = 80 };
	struct cfs_io *io = open_target("ram", 128 * MIB, 512, "op=read,every=1,delay_us=100000");
	struct cfs_ioq *q = t_ioq_new(io, 256);
	struct cfs_io_rmw *rmw = calloc(N, sizeof(*rmw));
	struct waiter *w = calloc(N, sizeof(*w));
	uint8_t *buf = calloc(1, MIB);
	int started = 0, busy = 0;

	for (int i = 0; i < N; i++) {
		rmw[i].req = (struct cfs_io_req){ .offset_bytes = (uint64_t)i * MIB + 1,
						  .length_bytes = 100000, .op = CFS_IO_WRITE,
						  .buf = buf, .done = rmw_done, .cookie = &w[i] };
		int ret = cfs_io_rmw_start(q, &rmw[i]);

		cr_assert(ret == 0 || ret == -EBUSY, "ret %d", ret);
		if (ret == 0)
			started++;
		else
			busy++;
	}
	cr_assert_gt(busy, 0);
	cr_assert_geq(started, 8);
	cfs_ioq_submit(q);
	for (int finished = 0; finished < started;) {
		cfs_ioq_reap(q, 1);
		finished = 0;
		for (int i = 0; i < N; i++)
			finished += atomic_load(&w[i].finished);
	}
	cr_assert_eq(cfs_ioq_inflight(q), 0);
	free(rmw);
	free(w);
	free(buf);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

/* ---- the caller's hooks -------------------------------------------------------- */

struct hooked {
	struct cfs_io_rmw rmw;		/* first: the hooks get &rmw */
	uint64_t unwritten_from, unwritten_to;	/* device range the hook calls unwritten */
	int asked;
	int written_calls, written_res;
	struct waiter *w;
};

static bool hook_unwritten(struct cfs_io_rmw *rmw, uint64_t sector_offset)
{
	struct hooked *h = (struct hooked *)rmw;

	h->asked++;
	return sector_offset >= h->unwritten_from && sector_offset < h->unwritten_to;
}

static void hook_written(struct cfs_io_rmw *rmw, int res)
{
	struct hooked *h = (struct hooked *)rmw;

	cr_assert_eq(atomic_load(&h->w->finished), 0, "written() comes before done()");
	h->written_calls++;
	h->written_res = res;
}

static int hooked_write(struct cfs_ioq *q, struct hooked *h, uint64_t offset, uint32_t length,
			void *buf)
{
	struct waiter w = { 0 };

	h->w = &w;
	h->rmw.req = (struct cfs_io_req){ .offset_bytes = offset, .length_bytes = length,
					  .op = CFS_IO_WRITE, .buf = buf, .done = rmw_done,
					  .cookie = &w };
	h->rmw.edge_unwritten = hook_unwritten;
	h->rmw.written = hook_written;
	cr_assert_eq(cfs_io_rmw_start(q, &h->rmw), 0);
	cfs_ioq_submit(q);
	while (!atomic_load(&w.finished))
		cfs_ioq_reap(q, 1);
	return w.res;
}

Test(rmw, hooks_unwritten_edges_and_written)
{
	struct cfs_io *io = open_target("ram", MIB, 512, NULL);
	struct cfs_ioq *q = t_ioq_new(io, 8);
	uint8_t *full = aligned_alloc(4096, 4096), *r = aligned_alloc(4096, 4096);
	char data[600];
	struct hooked h;

	memset(full, 0xff, 4096);
	memset(data, 'd', sizeof(data));
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 0, 4096, full, NULL), 4096);

	/* One partial sector, unwritten: merged over zeros, not over 0xff. */
	memset(&h, 0, sizeof(h));
	h.unwritten_from = 512;
	h.unwritten_to = 1024;
	cr_assert_eq(hooked_write(q, &h, 512 + 100, 10, data), 10);
	cr_assert_eq(h.asked, 1);
	cr_assert_eq(h.written_calls, 1);
	cr_assert_eq(h.written_res, 10);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 0, 4096, r, NULL), 4096);
	for (int i = 0; i < 4096; i++) {
		uint8_t want = i < 512 || i >= 1024 ? 0xff : (i >= 612 && i < 622 ? 'd' : 0);

		cr_assert_eq(r[i], want, "byte %d", i);
	}

	/* Two edges, only the head unwritten: the tail is still read. */
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 0, 4096, full, NULL), 4096);
	memset(&h, 0, sizeof(h));
	h.unwritten_from = 1024;
	h.unwritten_to = 1536;
	cr_assert_eq(hooked_write(q, &h, 1024 + 500, 100, data), 100);
	cr_assert_eq(h.asked, 2);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 0, 4096, r, NULL), 4096);
	for (int i = 0; i < 4096; i++) {
		uint8_t want = i >= 1524 && i < 1624 ? 'd' : (i >= 1024 && i < 1524 ? 0 : 0xff);

		cr_assert_eq(r[i], want, "byte %d", i);
	}

	/* Nothing unwritten: plain read-modify-write. */
	memset(&h, 0, sizeof(h));
	cr_assert_eq(hooked_write(q, &h, 3000, 600, data), 600);
	cr_assert_eq(h.asked, 2);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 0, 4096, r, NULL), 4096);
	cr_assert_eq(r[2999], 0xff);
	cr_assert_eq(r[3000], 'd');
	cr_assert_eq(r[3599], 'd');
	cr_assert_eq(r[3600], 0xff);
	free(full);
	free(r);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

Test(rmw, written_not_called_when_an_edge_read_fails)
{
	struct cfs_io *io = open_target("ram", MIB, 512, "op=read,nth=1,err=EIO");
	struct cfs_ioq *q = t_ioq_new(io, 8);
	char data[10] = "0123456789";
	struct hooked h;

	memset(&h, 0, sizeof(h));
	cr_assert_eq(hooked_write(q, &h, 100, 10, data), -EIO);
	cr_assert_eq(h.written_calls, 0);
	memset(&h, 0, sizeof(h));
	cr_assert_eq(hooked_write(q, &h, 100, 10, data), 10);
	cr_assert_eq(h.written_calls, 1);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

/* ---- an aligned write waits for a read-modify-write of its sectors ---------- */

struct order_log {
	atomic_int seq;
	int rmw_at, aligned_at, other_at;
};

static void order_rmw_done(struct cfs_io_req *req, int res)
{
	struct order_log *log = req->cookie;

	cr_assert_eq(res, (int)req->length_bytes);
	log->rmw_at = atomic_fetch_add(&log->seq, 1) + 1;
}

static void order_aligned_done(struct cfs_io_req *req, int res)
{
	struct order_log *log = req->cookie;

	cr_assert_eq(res, (int)req->length_bytes);
	if (req->offset_bytes == 4096)
		log->aligned_at = atomic_fetch_add(&log->seq, 1) + 1;
	else
		log->other_at = atomic_fetch_add(&log->seq, 1) + 1;
}

static void aligned_waits(uint32_t align, uint64_t other_offset)
{
	/* Every read is delayed 20 ms, so the rmw holds its lock for a while. */
	struct cfs_io *io = open_target("ram", MIB, align, "op=read,every=1,delay_us=20000");
	struct cfs_ioq *q = t_ioq_new(io, 8);
	struct order_log log = { 0 };
	uint8_t *aligned = aligned_alloc(4096, 4096), *check = aligned_alloc(4096, 4096);
	char small[3] = { 'x', 'y', 'z' };
	struct cfs_io_rmw rmw = {
		.req = { .offset_bytes = 4096 + 100, .length_bytes = 3, .op = CFS_IO_WRITE,
			 .buf = small, .done = order_rmw_done, .cookie = &log },
	};
	struct cfs_io_req w = { .offset_bytes = 4096, .length_bytes = 4096, .op = CFS_IO_WRITE,
				.buf = aligned, .done = order_aligned_done, .cookie = &log };
	struct cfs_io_req other = w;

	other.offset_bytes = other_offset;
	memset(aligned, 0xab, 4096);
	cr_assert_eq(cfs_io_rmw_start(q, &rmw), 0);
	cr_assert_eq(cfs_ioq_queue(q, &w), 0);
	cr_assert_eq(cfs_ioq_queue(q, &other), 0);
	cr_assert_eq(cfs_ioq_inflight(q), 2, "the rmw's read and the unrelated write; "
		     "the overlapping write is parked");
	cfs_ioq_submit(q);
	while (atomic_load(&log.seq) < 3)
		cfs_ioq_reap(q, 1);
	cr_assert_eq(log.other_at, 1, "an unrelated write does not wait");
	cr_assert_eq(log.rmw_at, 2);
	cr_assert_eq(log.aligned_at, 3, "the overlapping write waited for the rmw");
	/* It came later, so its bytes win everywhere. */
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 4096, 4096, check, NULL), 4096);
	cr_assert_eq(memcmp(check, aligned, 4096), 0);
	free(aligned);
	free(check);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

Test(rmw, aligned_write_waits_for_rmw_512)
{
	aligned_waits(512, 8192);
}

Test(rmw, aligned_write_waits_for_rmw_4096)
{
	aligned_waits(4096, 64 * 1024);
}

/* A sector outside the cover but in the same physical sector waits too. */
Test(rmw, lock_covers_the_physical_sector)
{
	/* RAM with align 0: logical sector 1, physical 4096. An aligned write
	 * to [4096+2048, 4096+2560) shares the rmw's physical sector. */
	struct cfs_io *io = open_target("ram", MIB, 0, "op=read,every=1,delay_us=20000");
	struct cfs_ioq *q = t_ioq_new(io, 8);
	struct order_log log = { 0 };
	char small[3] = { 'x', 'y', 'z' }, data[512];
	struct cfs_io_rmw rmw = {
		.req = { .offset_bytes = 4096 + 100, .length_bytes = 3, .op = CFS_IO_WRITE,
			 .buf = small, .done = order_rmw_done, .cookie = &log },
	};
	struct cfs_io_req w = { .offset_bytes = 4096 + 2048, .length_bytes = 512,
				.op = CFS_IO_WRITE, .buf = data, .done = order_aligned_done,
				.cookie = &log };

	/* With sector 1 the rmw reads nothing, but its cover write holds the
	 * lock from start to reap: the neighbour queued meanwhile waits. */
	memset(data, 1, sizeof(data));
	cr_assert_eq(cfs_io_rmw_start(q, &rmw), 0);
	cr_assert_eq(cfs_ioq_queue(q, &w), 0);
	cfs_ioq_submit(q);
	while (atomic_load(&log.seq) < 2)
		cfs_ioq_reap(q, 1);
	cr_assert_eq(log.rmw_at, 1);
	cr_assert_eq(log.other_at, 2, "same physical sector: waited");
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

/* ---- concurrent writers ------------------------------------------------------
 *
 * Threads, each with its own queue, keep SLOTS writes in flight over one small
 * region, so ranges overlap all the time, within a queue and across queues.
 * Every write gets a start ticket before it is started and an end ticket in
 * done(), from one global counter. Afterwards, for every byte:
 *   - no write covered it: it is still zero;
 *   - else it holds the value of a covering write W that was not overwritten
 *     for sure, i.e. no covering write started after W ended
 *     (W.end >= max start of the covering writes). A lost update -- a
 *     read-modify-write writing back a stale neighbour -- leaves a value of
 *     an older write and fails this.
 * Aligned writes that were already in flight when a read-modify-write locked
 * the same sectors are not waited for (rmw.c's header): bytes an aligned
 * write covered are only checked to come from one of their writers.
 */
#define REGION		(16 * 1024u)
#define SLOTS		4
#define WRITES		20000

struct wrec {
	uint64_t offset;
	uint32_t length;
	bool aligned;
	uint8_t salt;
	uint64_t start, end;
};

struct conc;

struct slot {
	struct cfs_io_rmw rmw;
	struct cfs_io_req req;
	uint8_t *buf;
	struct wrec *rec;
	struct conc *c;
	atomic_bool busy;
};

struct conc {
	struct cfs_io *io;
	unsigned threads;
	bool mixed;			/* some writes aligned, through cfs_ioq_queue */
	unsigned writes;		/* per thread, <= WRITES */
	atomic_ullong ticket;
	atomic_uint finished_threads;
	atomic_int errors;
	struct wrec rec[8][WRITES];
};

struct conc_thread {
	struct conc *c;
	unsigned id;
};

static inline uint8_t wval(const struct wrec *w, uint64_t pos)
{
	return (uint8_t)(w->salt + pos * 7 + (pos >> 8));
}

static void slot_done(struct cfs_io_req *req, int res)
{
	struct slot *s = req->cookie;

	if (res != (int)req->length_bytes)
		atomic_fetch_add(&s->c->errors, 1);
	s->rec->end = atomic_fetch_add(&s->c->ticket, 1);
	atomic_store(&s->busy, false);
}

static void *conc_thread(void *arg)
{
	struct conc_thread *t = arg;
	struct conc *c = t->c;
	struct cfs_ioq *q = NULL;
	struct cfs_ioq_config qc = { .depth = 4 * SLOTS };
	struct slot slot[SLOTS];
	uint64_t seed = 0x9e3779b97f4a7c15ull * (t->id + 1);
	unsigned issued = 0;

	if (cfs_ioq_create(c->io, &qc, &q)) {
		atomic_fetch_add(&c->errors, 1);
		return NULL;
	}
	for (int i = 0; i < SLOTS; i++) {
		slot[i].c = c;
		atomic_init(&slot[i].busy, false);
		if (posix_memalign((void **)&slot[i].buf, 4096, 8192 + 64))
			abort();
	}
	for (;;) {
		bool any_busy = false;

		for (int i = 0; i < SLOTS; i++) {
			struct slot *s = &slot[i];
			struct wrec *w;
			uint64_t r;
			unsigned skew;
			int ret;

			if (atomic_load(&s->busy)) {
				any_busy = true;
				continue;
			}
			if (issued == c->writes)
				continue;
			w = &c->rec[t->id][issued];
			r = rng_next(&seed);
			w->aligned = c->mixed && (r & 3) == 0;
			if (w->aligned) {
				w->length = 512 * (1 + (uint32_t)((r >> 8) % 8));
				/* First half only: the second half keeps the
				 * strong check in the mixed run. */
				w->offset = 512 * ((r >> 16) % ((REGION / 2 - w->length) / 512 + 1));
			} else {
				w->length = (r & 12) ? 1 + (uint32_t)((r >> 8) % 700) :
						       1 + (uint32_t)((r >> 8) % 6000);
				w->offset = (r >> 24) % (REGION - w->length + 1);
			}
			w->salt = (uint8_t)(r >> 56) | 1;
			skew = w->aligned ? 0 : (unsigned)(r >> 40) % 64;
			for (uint32_t j = 0; j < w->length; j++)
				s->buf[skew + j] = wval(w, w->offset + j);
			s->rec = w;
			atomic_store(&s->busy, true);
			w->start = atomic_fetch_add(&c->ticket, 1);
			if (w->aligned) {
				s->req = (struct cfs_io_req){ .offset_bytes = w->offset,
							      .length_bytes = w->length,
							      .op = CFS_IO_WRITE, .buf = s->buf,
							      .done = slot_done, .cookie = s };
				ret = cfs_ioq_queue(q, &s->req);
			} else {
				memset(&s->rmw, 0, sizeof(s->rmw));
				s->rmw.req = (struct cfs_io_req){ .offset_bytes = w->offset,
								  .length_bytes = w->length,
								  .op = CFS_IO_WRITE,
								  .buf = s->buf + skew,
								  .done = slot_done, .cookie = s };
				ret = cfs_io_rmw_start(q, &s->rmw);
			}
			if (ret) {
				/* -EBUSY: try again after a reap */
				if (ret != -EBUSY)
					atomic_fetch_add(&c->errors, 1);
				atomic_store(&s->busy, false);
				continue;
			}
			issued++;
			any_busy = true;
		}
		cfs_ioq_submit(q);
		if (cfs_ioq_inflight(q))
			cfs_ioq_reap(q, 1);
		else
			sched_yield();
		if (!any_busy && issued == c->writes)
			break;
	}
	/* Others' parked writes may still be resumed onto this queue by a
	 * release here: keep reaping until every thread is done. */
	atomic_fetch_add(&c->finished_threads, 1);
	while (atomic_load(&c->finished_threads) < c->threads || cfs_ioq_inflight(q)) {
		if (cfs_ioq_inflight(q))
			cfs_ioq_reap(q, 0);
		else
			sched_yield();
	}
	cfs_ioq_destroy(q);
	for (int i = 0; i < SLOTS; i++)
		free(slot[i].buf);
	return NULL;
}

static void concurrent_writers(const char *backend, const char *path, uint32_t align,
			       const char *spec, unsigned threads, bool mixed, unsigned writes)
{
	struct cfs_io_config cfg = { .backend = backend, .path = path, .size_bytes = 4 * MIB,
				     .align_bytes = align, .fault_spec = spec,
				     .dio = CFS_DIO_OPTIONAL };
	struct conc *c = calloc(1, sizeof(*c));
	struct conc_thread t[8];
	pthread_t tid[8];
	uint64_t *max_start = calloc(REGION, sizeof(uint64_t));
	uint8_t *covered = calloc(REGION, 1), *aligned_cover = calloc(REGION, 1);
	uint8_t *ok = calloc(REGION, 1), *final = NULL;
	struct cfs_ioq *q;

	cr_assert(threads <= 8);
	cr_assert_eq(cfs_io_open(&cfg, &c->io), 0);
	c->threads = threads;
	c->mixed = mixed;
	c->writes = writes;
	cr_assert(writes <= WRITES);
	q = t_ioq_new(c->io, 8);
	cr_assert_eq(posix_memalign((void **)&final, 4096, REGION), 0);
	memset(final, 0, REGION);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 0, REGION, final, NULL), (int)REGION);

	for (unsigned i = 0; i < threads; i++) {
		t[i] = (struct conc_thread){ .c = c, .id = i };
		cr_assert_eq(pthread_create(&tid[i], NULL, conc_thread, &t[i]), 0);
	}
	for (unsigned i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	cr_assert_eq(atomic_load(&c->errors), 0);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 0, REGION, final, NULL), (int)REGION);

	for (unsigned i = 0; i < threads; i++)
		for (unsigned k = 0; k < writes; k++) {
			const struct wrec *w = &c->rec[i][k];

			for (uint64_t p = w->offset; p < w->offset + w->length; p++) {
				covered[p] = 1;
				if (w->aligned)
					aligned_cover[p] = 1;
				if (w->start > max_start[p])
					max_start[p] = w->start;
			}
		}
	for (unsigned i = 0; i < threads; i++)
		for (unsigned k = 0; k < writes; k++) {
			const struct wrec *w = &c->rec[i][k];

			cr_assert_gt(w->end, w->start);
			for (uint64_t p = w->offset; p < w->offset + w->length; p++)
				if ((aligned_cover[p] || w->end >= max_start[p]) &&
				    final[p] == wval(w, p))
					ok[p] = 1;
		}
	for (uint64_t p = 0; p < REGION; p++) {
		if (!covered[p])
			cr_assert_eq(final[p], 0, "byte %lu was never written", (unsigned long)p);
		else
			cr_assert(ok[p], "byte %lu = %02x is from no surviving writer (lost update)",
				  (unsigned long)p, final[p]);
	}
	free(max_start);
	free(covered);
	free(aligned_cover);
	free(ok);
	free(final);
	cfs_ioq_destroy(q);
	cfs_io_close(c->io);
	free(c);
}

Test(rmw_concurrent, two_threads_512, .timeout = 120)
{
	concurrent_writers("ram", NULL, 512, NULL, 2, false, WRITES);
}

Test(rmw_concurrent, four_threads_512, .timeout = 120)
{
	concurrent_writers("ram", NULL, 512, NULL, 4, false, WRITES);
}

Test(rmw_concurrent, four_threads_4096, .timeout = 120)
{
	concurrent_writers("ram", NULL, 4096, NULL, 4, false, WRITES);
}

Test(rmw_concurrent, three_threads_delayed_reads, .timeout = 120)
{
	/* Delayed sector reads hold locks longer: more parking and resuming
	 * on other threads' queues. */
	concurrent_writers("ram", NULL, 512, "op=read,every=1,nth=2,delay_us=30", 3, false, WRITES);
}

Test(rmw_concurrent, aligned_writes_mixed_in, .timeout = 120)
{
	concurrent_writers("ram", NULL, 512, NULL, 4, true, WRITES);
}

/* ---- over io_uring on an image file ------------------------------------------ */

/* A sparse image in /var/tmp (a real filesystem: /tmp may be tmpfs), or
 * skip when io_uring or the file cannot be had. */
static char *uring_image(void)
{
	static char path[64];
	struct cfs_io_config cfg = { .backend = "uring", .path = path, .dio = CFS_DIO_OPTIONAL };
	struct cfs_io *io = NULL;
	int fd;

	snprintf(path, sizeof(path), "/var/tmp/cfs_test_rmw.%d.img", (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, 4 * MIB) < 0)
		cr_skip_test("cannot create %s", path);
	close(fd);
	if (cfs_io_open(&cfg, &io)) {
		unlink(path);
		cr_skip_test("io_uring backend unavailable here");
	}
	cfs_io_close(io);
	return path;
}

Test(rmw_uring, random_against_model, .timeout = 120)
{
	char *path = uring_image();
	struct cfs_io_config cfg = { .backend = "uring", .path = path, .dio = CFS_DIO_OPTIONAL };
	struct cfs_io *io = NULL;
	struct cfs_ioq *q;
	uint8_t *model = calloc(1, 4 * MIB), *buf = malloc(70000), *got = malloc(70000);
	uint64_t seed = 77;

	cr_assert_eq(cfs_io_open(&cfg, &io), 0);
	q = t_ioq_new(io, 16);
	for (int i = 0; i < 1000; i++) {
		uint32_t length = 1 + (uint32_t)(rng_next(&seed) % 65536);
		uint64_t offset = rng_next(&seed) % (4 * MIB - length + 1);
		unsigned skew = (unsigned)(rng_next(&seed) % 64);

		if (i % 3) {
			for (uint32_t j = 0; j < length; j++)
				buf[skew + j] = (uint8_t)(i + j * 3);
			cr_assert_eq(rmw_sync(q, CFS_IO_WRITE, offset, length, buf + skew, NULL),
				     (int)length);
			memcpy(model + offset, buf + skew, length);
		} else {
			cr_assert_eq(rmw_sync(q, CFS_IO_READ, offset, length, got + skew, NULL),
				     (int)length);
			cr_assert_eq(memcmp(got + skew, model + offset, length), 0);
		}
	}
	model_check(q, model, 4 * MIB);
	free(model);
	free(buf);
	free(got);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
	unlink(path);
}

Test(rmw_uring, concurrent_writers, .timeout = 120)
{
	char *path = uring_image();

	concurrent_writers("uring", path, 0, NULL, 4, false, 2500);
	unlink(path);
}

Test(rmw_uring, concurrent_writers_mixed, .timeout = 120)
{
	char *path = uring_image();

	concurrent_writers("uring", path, 0, NULL, 4, true, 2500);
	unlink(path);
}
