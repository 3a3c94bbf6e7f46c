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
#include <string.h>
#include <unistd.h>

#include "iopath/iopath.h"

#define MIB (1ull << 20)

static struct cfs_io *open_target(const char *backend, uint64_t size, uint32_t align,
				  const char *fault_spec)
{
	struct cfs_io_config cfg = {
		.backend = backend, .size_bytes = size, .align_bytes = align,
		.fault_spec = fault_spec,
	};
	struct cfs_io *io = NULL;
	int ret = cfs_io_open(&cfg, &io);

	cr_assert_eq(ret, 0, "open: %s", strerror(-ret));
	return io;
}

static struct cfs_ioq *new_queue(struct cfs_io *io, unsigned depth)
{
	struct cfs_ioq_config qc = { .depth = depth };
	struct cfs_ioq *q = NULL;

	cr_assert_eq(cfs_ioq_create(io, &qc, &q), 0);
	return q;
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
	struct cfs_ioq *q = new_queue(io, 16);
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
