// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_iopath_uring.c — the iopath core (io.c), its buffer arena (buf.c),
 * alignment discovery (align.c) and the "uring" backend, on an image file in
 * /var/tmp (a disk filesystem: tmpfs ignores O_DIRECT's rules) and on a loop
 * device over one.
 *
 * Every test gets its own directory and image, so Criterion may run them in
 * parallel. The loop-device tests skip when not root or when losetup fails,
 * and always detach in their fini.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "iopath/backend.h"
#include "iopath/buf.h"
#include "iopath/iopath.h"

#define IMG_BYTES	(64ull << 20)
#define MiB		(1u << 20)

static char dir_path[64];
static char img_path[128];
static char loop_path[64];
static struct cfs_io_stats stats;

/* ---- helpers ---------------------------------------------------------------- */

static void make_image(uint64_t bytes)
{
	int fd;

	strcpy(dir_path, "/var/tmp/cfs-uring-XXXXXX");
	cr_assert_not_null(mkdtemp(dir_path));
	snprintf(img_path, sizeof(img_path), "%s/img", dir_path);
	fd = open(img_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)bytes), 0);
	close(fd);
	cfs_io_stats_reset(&stats);
}

static void setup(void)
{
	make_image(IMG_BYTES);
}

static void teardown(void)
{
	unlink(img_path);
	rmdir(dir_path);
}

static struct cfs_io *open_uring(const char *path, uint64_t size_bytes, bool read_only)
{
	struct cfs_io_config cfg = {
		.backend = "uring",
		.path = path,
		.size_bytes = size_bytes,
		.dio = CFS_DIO_REQUIRED,
		.read_only = read_only,
	};
	struct cfs_io *io = NULL;
	int ret = cfs_io_open(&cfg, &io);

	cr_assert_eq(ret, 0, "cfs_io_open(%s): %s", path, strerror(-ret));
	return io;
}

static struct cfs_ioq *make_queue(struct cfs_io *io, unsigned depth, size_t arena_bytes)
{
	struct cfs_ioq_config cfg = { .depth = depth, .buffer_arena_bytes = arena_bytes };
	struct cfs_ioq *q = NULL;
	int ret = cfs_ioq_create(io, &cfg, &q);

	if (ret == -ENOSYS || ret == -EPERM)
		cr_skip_test("io_uring unavailable: %s", strerror(-ret));
	cr_assert_eq(ret, 0, "cfs_ioq_create: %s", strerror(-ret));
	return q;
}

static void *aligned_buf(size_t bytes)
{
	void *p = NULL;

	cr_assert_eq(posix_memalign(&p, 4096, bytes), 0);
	return p;
}

/* A pattern that differs per byte, offset and seed. */
static void fill(void *buf, uint32_t length, uint64_t offset, unsigned seed)
{
	unsigned char *p = buf;
	uint32_t i;

	for (i = 0; i < length; i++)
		p[i] = (unsigned char)((offset + i) * 131u + seed * 7u + ((offset + i) >> 9));
}

static bool check(const void *buf, uint32_t length, uint64_t offset, unsigned seed)
{
	const unsigned char *p = buf;
	uint32_t i;

	for (i = 0; i < length; i++)
		if (p[i] != (unsigned char)((offset + i) * 131u + seed * 7u + ((offset + i) >> 9)))
			return false;
	return true;
}

static bool all_zero(const void *buf, uint32_t length)
{
	const unsigned char *p = buf;
	uint32_t i;

	for (i = 0; i < length; i++)
		if (p[i])
			return false;
	return true;
}

struct done_rec {
	int calls;
	int res;
};

static void rec_done(struct cfs_io_req *req, int res)
{
	struct done_rec *rec = req->cookie;

	rec->calls++;
	rec->res = res;
}

/* ---- round trips ---------------------------------------------------------------- */

TestSuite(uring, .init = setup, .fini = teardown, .timeout = 60);

static const uint32_t sizes[] = { 512, 2048, 4096, 16384, MiB };

static void round_trips(bool fixed)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_ioq *q = make_queue(io, 8, fixed ? 2 * MiB : 0);
	unsigned i, seed = 1;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t length = sizes[i];
		/* offsets aligned to the request's own sector, not to its size */
		uint64_t offsets[] = { 0, 512, 3 * MiB + 1536, IMG_BYTES - length };
		unsigned k;

		for (k = 0; k < 4; k++, seed++) {
			uint64_t offset = offsets[k];
			void *wbuf, *rbuf;

			if (fixed) {
				wbuf = cfs_ioq_buf_get(q, length);
				rbuf = cfs_ioq_buf_get(q, length);
				cr_assert(wbuf && rbuf);
				cr_assert(cfs_ioq_buf_is_fixed(q, wbuf, length));
			} else {
				wbuf = aligned_buf(length);
				rbuf = aligned_buf(length);
				cr_assert_not(cfs_ioq_buf_is_fixed(q, wbuf, length));
			}
			fill(wbuf, length, offset, seed);
			memset(rbuf, 0xee, length);
			cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, offset, length, wbuf, &stats),
				     (int)length, "write %u at %llu", length,
				     (unsigned long long)offset);
			cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, offset, length, rbuf, &stats),
				     (int)length);
			cr_assert(check(rbuf, length, offset, seed), "data of %u at %llu", length,
				  (unsigned long long)offset);
			if (fixed) {
				cfs_ioq_buf_put(q, wbuf);
				cfs_ioq_buf_put(q, rbuf);
			} else {
				free(wbuf);
				free(rbuf);
			}
		}
	}
	cr_assert_eq(stats.op[CFS_IO_WRITE].ops, 20);
	cr_assert_eq(stats.op[CFS_IO_READ].ops, 20);
	cr_assert_eq(stats.op[CFS_IO_READ].errors + stats.op[CFS_IO_WRITE].errors, 0);
	cr_assert_eq(stats.op[CFS_IO_READ].bytes, 4 * (512 + 2048 + 4096 + 16384 + MiB));
	cr_assert_eq(stats.inflight_now, 0);
	cr_assert_eq(cfs_ioq_inflight(q), 0);
	if (fixed)
		cr_assert_eq(cfs_buf_arena_free_bytes(q), 2 * MiB);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

Test(uring, round_trip_fixed_buffers)
{
	round_trips(true);
}

Test(uring, round_trip_plain_buffers)
{
	round_trips(false);
}

Test(uring, geometry_of_an_ext4_image)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	const struct cfs_io_geometry *geo = cfs_io_geometry(io);

	cr_assert_eq(geo->size_bytes, IMG_BYTES);
	cr_assert(geo->direct);
	cr_assert_not(geo->is_block_device);
	cr_assert_str_eq(geo->backend, "uring");
	cr_assert(geo->logical_sector_bytes >= 512 && geo->logical_sector_bytes <= 4096);
	cr_assert_eq(geo->logical_sector_bytes & (geo->logical_sector_bytes - 1), 0);
	cr_assert_geq(geo->physical_sector_bytes, geo->logical_sector_bytes);
	cr_assert(geo->mem_align_bytes >= 1 && geo->mem_align_bytes <= geo->logical_sector_bytes);
	cr_assert(geo->discard_supported);
	cfs_io_close(io);
}

Test(uring, size_limit_and_alignment_override)
{
	struct cfs_io_config cfg = { .backend = "uring", .path = img_path, .align_bytes = 4096 };
	struct cfs_io *io = NULL;

	cfg.size_bytes = IMG_BYTES + 4096;
	cr_assert_eq(cfs_io_open(&cfg, &io), -EINVAL, "larger than the file");
	cfg.size_bytes = 8 * MiB + 1000;
	cr_assert_eq(cfs_io_open(&cfg, &io), 0);
	cr_assert_eq(cfs_io_geometry(io)->size_bytes, 8 * MiB, "rounded down to a sector");
	cr_assert_eq(cfs_io_geometry(io)->logical_sector_bytes, 4096);
	cr_assert_eq(cfs_io_geometry(io)->mem_align_bytes, 4096);
	cfs_io_close(io);

	cfg.align_bytes = 3000;
	cr_assert_eq(cfs_io_open(&cfg, &io), -EINVAL, "not a power of two");
	cfg.align_bytes = 8192;
	cr_assert_eq(cfs_io_open(&cfg, &io), -EINVAL, "above CFS_IO_SECTOR_MAX");
	cfg.align_bytes = 0;
	cfg.backend = "nosuch";
	cr_assert_eq(cfs_io_open(&cfg, &io), -EINVAL);
	cfg.backend = "uring";
	cfg.path = "/nonexistent/chunkfs-image";
	cr_assert_eq(cfs_io_open(&cfg, &io), -ENOENT);
	cfg.path = dir_path;
	cr_assert_lt(cfs_io_open(&cfg, &io), 0, "a directory is not a target");
}

/* ---- refusals ----------------------------------------------------------------- */

Test(uring, misaligned_requests_are_refused_and_counted)
{
	struct cfs_io_config cfg = { .backend = "uring", .path = img_path, .align_bytes = 4096 };
	struct done_rec rec = { 0 };
	struct cfs_io_req req;
	struct cfs_ioq *q;
	struct cfs_io *io;
	char *buf = aligned_buf(3 * 4096);

	/* 4096 so that every misalignment below is one on any disk. */
	cr_assert_eq(cfs_io_open(&cfg, &io), 0);
	q = make_queue(io, 4, 0);
	memset(&req, 0, sizeof(req));
	req.op = CFS_IO_WRITE;
	req.buf = buf;
	req.length_bytes = 4096;
	req.stats = &stats;
	req.done = rec_done;
	req.cookie = &rec;

	req.offset_bytes = 512;
	cr_assert_eq(cfs_ioq_queue(q, &req), -EINVAL, "offset");
	req.offset_bytes = 0;
	req.length_bytes = 4096 + 512;
	cr_assert_eq(cfs_ioq_queue(q, &req), -EINVAL, "length");
	req.length_bytes = 4096;
	req.buf = buf + 512;
	cr_assert_eq(cfs_ioq_queue(q, &req), -EINVAL, "buffer");
	req.buf = buf + 1;
	req.op = CFS_IO_READ;
	cr_assert_eq(cfs_ioq_queue(q, &req), -EINVAL, "buffer, read");
	req.op = CFS_IO_ZERO;
	req.offset_bytes = 100;
	cr_assert_eq(cfs_ioq_queue(q, &req), -EINVAL, "zero range");
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 0, 4096, buf + 2048, &stats), -EINVAL);

	cr_assert_eq(stats.err_misaligned, 6);
	cr_assert_eq(rec.calls, 0, "done() never runs for a refused request");
	cr_assert_eq(stats.inflight_now, 0);
	cr_assert_eq(cfs_ioq_inflight(q), 0);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 4096, 8192, buf + 4096, &stats), 8192,
		     "aligned again: accepted");
	cfs_ioq_destroy(q);
	cfs_io_close(io);
	free(buf);
}

Test(uring, malformed_and_out_of_range_requests_are_refused)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_ioq *q = make_queue(io, 4, 0);
	struct done_rec rec = { 0 };
	char *buf = aligned_buf(2 * MiB);
	struct cfs_io_req req = {
		.op = CFS_IO_READ, .buf = buf, .length_bytes = 4096,
		.stats = &stats, .done = rec_done, .cookie = &rec,
	};

	req.offset_bytes = IMG_BYTES;
	cr_assert_eq(cfs_ioq_queue(q, &req), -EINVAL, "at the end");
	req.offset_bytes = IMG_BYTES - 4096;
	req.length_bytes = 8192;
	cr_assert_eq(cfs_ioq_queue(q, &req), -EINVAL, "across the end");
	req.offset_bytes = UINT64_MAX - 4095;
	req.length_bytes = 8192;
	cr_assert_eq(cfs_ioq_queue(q, &req), -EINVAL, "wrapping");
	req.offset_bytes = 0;
	req.length_bytes = CFS_IO_LENGTH_MAX + 4096;
	cr_assert_eq(cfs_ioq_queue(q, &req), -EINVAL, "too long");
	req.length_bytes = 0;
	cr_assert_eq(cfs_ioq_queue(q, &req), -EINVAL, "empty read");
	req.length_bytes = 4096;
	req.buf = NULL;
	cr_assert_eq(cfs_ioq_queue(q, &req), -EINVAL, "no buffer");
	req.buf = buf;
	req.op = CFS_IO_OP_COUNT;
	cr_assert_eq(cfs_ioq_queue(q, &req), -EINVAL, "bad op");
	req.op = CFS_IO_FLUSH;
	cr_assert_eq(cfs_ioq_queue(q, &req), -EINVAL, "flush with a length");
	req.op = CFS_IO_READ;
	req.done = NULL;
	cr_assert_eq(cfs_ioq_queue(q, &req), -EINVAL, "no done()");

	cr_assert_eq(stats.err_other, 9);
	cr_assert_eq(stats.err_misaligned, 0);
	cr_assert_eq(rec.calls, 0);
	cr_assert_eq(cfs_ioq_inflight(q), 0);
	cr_assert_eq(stats.inflight_now, 0);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
	free(buf);
}

Test(uring, read_only_target_refuses_writes)
{
	struct cfs_io *io = open_uring(img_path, 0, true);
	struct cfs_ioq *q = make_queue(io, 4, 0);
	char *buf = aligned_buf(4096);

	cr_assert_not(cfs_io_geometry(io)->discard_supported);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 0, 4096, buf, &stats), -EROFS);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_ZERO, 0, 4096, NULL, &stats), -EROFS);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_DISCARD, 0, 4096, NULL, &stats), -EROFS);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 0, 4096, buf, &stats), 4096);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_FLUSH, 0, 0, NULL, &stats), 0);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
	free(buf);
}

/* ---- queue depth ---------------------------------------------------------------- */

Test(uring, full_queue_returns_ebusy_and_recovers)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_ioq *q = make_queue(io, 4, 0);
	struct cfs_io_req req[6];
	struct done_rec rec = { 0 };
	char *buf = aligned_buf(6 * 4096);
	unsigned i;

	for (i = 0; i < 6; i++) {
		req[i] = (struct cfs_io_req){
			.op = CFS_IO_READ, .offset_bytes = i * 4096ull, .length_bytes = 4096,
			.buf = buf + i * 4096, .stats = &stats, .done = rec_done, .cookie = &rec,
		};
	}
	for (i = 0; i < 4; i++)
		cr_assert_eq(cfs_ioq_queue(q, &req[i]), 0);
	cr_assert_eq(cfs_ioq_queue(q, &req[4]), -EBUSY, "depth 4 is full");
	cr_assert_eq(cfs_ioq_inflight(q), 4);
	cr_assert_eq(stats.inflight_now, 4);
	cr_assert_eq(cfs_ioq_submit(q), 4);
	cr_assert_eq(cfs_ioq_queue(q, &req[4]), -EBUSY, "still full while in flight");
	cr_assert_eq(cfs_ioq_reap(q, 4), 4);
	cr_assert_eq(rec.calls, 4);
	cr_assert_eq(cfs_ioq_queue(q, &req[4]), 0, "room again");
	cr_assert_eq(cfs_ioq_queue(q, &req[5]), 0);
	/* reap without submit: the backend submits before it sleeps */
	cr_assert_eq(cfs_ioq_reap(q, 2), 2);
	cr_assert_eq(rec.calls, 6);
	cr_assert_eq(rec.res, 4096);
	cr_assert_eq(stats.inflight_max, 4);
	cr_assert_eq(cfs_ioq_reap(q, 5), 0, "min_complete is clamped to what is in flight");
	cfs_ioq_destroy(q);
	cfs_io_close(io);
	free(buf);
}

struct qd_ctx {
	unsigned done;
	unsigned bad;
};

static void qd_done(struct cfs_io_req *req, int res)
{
	struct qd_ctx *ctx = req->cookie;

	ctx->done++;
	if (res != (int)req->length_bytes)
		ctx->bad++;
}

Test(uring, sixty_four_in_flight_all_verified)
{
	enum { QD = 64, BS = 16384 };
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_ioq *q = make_queue(io, QD, (size_t)QD * BS);
	struct cfs_io_req req[QD];
	struct qd_ctx ctx = { 0 };
	void *buf[QD];
	unsigned i, pass;

	for (i = 0; i < QD; i++) {
		buf[i] = cfs_ioq_buf_get(q, BS);
		cr_assert_not_null(buf[i]);
	}
	cr_assert_null(cfs_ioq_buf_get(q, 4096), "arena exhausted");
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < QD; i++) {
			/* scattered, descending, non-overlapping */
			uint64_t offset = (uint64_t)(QD - 1 - i) * 3 * BS + 512;

			if (pass == 0)
				fill(buf[i], BS, offset, 77);
			else
				memset(buf[i], 0, BS);
			req[i] = (struct cfs_io_req){
				.op = pass == 0 ? CFS_IO_WRITE : CFS_IO_READ,
				.offset_bytes = offset, .length_bytes = BS, .buf = buf[i],
				.stats = &stats, .done = qd_done, .cookie = &ctx,
			};
			cr_assert_eq(cfs_ioq_queue(q, &req[i]), 0);
		}
		cr_assert_eq(cfs_ioq_inflight(q), QD);
		cr_assert_eq(cfs_ioq_submit(q), QD);
		while (cfs_ioq_inflight(q))
			cr_assert_geq(cfs_ioq_reap(q, 1), 0);
	}
	cr_assert_eq(ctx.done, 2 * QD);
	cr_assert_eq(ctx.bad, 0);
	for (i = 0; i < QD; i++)
		cr_assert(check(buf[i], BS, req[i].offset_bytes, 77), "request %u", i);
	cr_assert_eq(stats.inflight_max, QD);
	cr_assert_eq(stats.inflight_now, 0);
	cr_assert_eq(stats.op[CFS_IO_READ].latency.count, QD);
	for (i = 0; i < QD; i++)
		cfs_ioq_buf_put(q, buf[i]);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

/* ---- flush, discard, zero --------------------------------------------------------- */

Test(uring, flush)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_ioq *q = make_queue(io, 4, MiB);
	void *buf = cfs_ioq_buf_get(q, 4096);

	fill(buf, 4096, 0, 3);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 0, 4096, buf, &stats), 4096);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_FLUSH, 0, 0, NULL, &stats), 0);
	cr_assert_eq(stats.op[CFS_IO_FLUSH].ops, 1);
	cr_assert_eq(stats.op[CFS_IO_FLUSH].errors, 0);
	cfs_ioq_buf_put(q, buf);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

static void discard_or_zero(enum cfs_io_op op, uint32_t length)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_ioq *q = make_queue(io, 4, 4 * MiB);
	uint64_t offset = 4 * MiB;
	uint32_t done;
	char *buf = cfs_ioq_buf_get(q, MiB);

	/* write a pattern over [offset - 4096, offset + length + 4096) */
	for (done = 0; done < length + 8192; done += 4096) {
		fill(buf, 4096, offset - 4096 + done, 9);
		cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, offset - 4096 + done, 4096, buf, &stats),
			     4096);
	}
	cr_assert_eq(cfs_ioq_sync(q, op, offset, length, NULL, &stats), (int)length);
	for (done = 0; done < length; done += MiB) {
		uint32_t n = length - done < MiB ? length - done : MiB;

		memset(buf, 0x5a, n);
		cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, offset + done, n, buf, &stats), (int)n);
		cr_assert(all_zero(buf, n), "%s left data at +%u",
			  op == CFS_IO_ZERO ? "zero" : "discard", done);
	}
	/* the neighbours are untouched */
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, offset - 4096, 4096, buf, &stats), 4096);
	cr_assert(check(buf, 4096, offset - 4096, 9));
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, offset + length, 4096, buf, &stats), 4096);
	cr_assert(check(buf, 4096, offset + length, 9));
	cr_assert_eq(stats.op[op].ops, 1);
	cr_assert_eq(stats.op[op].bytes, length);
	cfs_ioq_buf_put(q, buf);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

Test(uring, discard_punches_a_file_to_zeros)
{
	discard_or_zero(CFS_IO_DISCARD, 64 * 1024);
}

Test(uring, zero_range)
{
	discard_or_zero(CFS_IO_ZERO, 12 * 1024);
}

Test(uring, zero_longer_than_one_request)
{
	/* DISCARD/ZERO are not bound by CFS_IO_LENGTH_MAX */
	discard_or_zero(CFS_IO_ZERO, 3 * MiB + 4096);
}

/* ---- short transfers ------------------------------------------------------------- */

/*
 * The image shrinks behind iopath's back (someone truncated it): a read
 * across the new end gets part of its data, then no progress at all; after
 * CFS_IO_RETRY_MAX attempts it fails with -EIO and counts err_short.
 */
Test(uring, short_read_at_end_of_file_fails_after_bounded_retries)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_ioq *q = make_queue(io, 4, MiB);
	char *buf = cfs_ioq_buf_get(q, 16384);
	uint64_t end = 32 * MiB + 4096;

	fill(buf, 16384, end - 4096, 5);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, end - 4096, 16384, buf, &stats), 16384);
	cr_assert_eq(truncate(img_path, (off_t)end), 0);

	memset(buf, 0, 16384);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, end - 4096, 16384, buf, &stats), -EIO);
	cr_assert(check(buf, 4096, end - 4096, 5), "the part before EOF was read");
	cr_assert_eq(stats.err_short, 1);
	cr_assert_eq(stats.short_retries, CFS_IO_RETRY_MAX);
	cr_assert_eq(stats.op[CFS_IO_READ].errors, 1);

	/* entirely beyond the end: no progress at all */
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 40 * MiB, 4096, buf, &stats), -EIO);
	cr_assert_eq(stats.err_short, 2);
	cr_assert_eq(stats.inflight_now, 0);
	cr_assert_eq(cfs_ioq_inflight(q), 0);
	cfs_ioq_buf_put(q, buf);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

/*
 * A short transfer that is then completed: a read that straddles the end of
 * a file which grows back between the first attempt's completion (seen on
 * the event fd) and the reap that resubmits the rest. Checks the requeue
 * arithmetic: done_bytes advances, the rest lands at offset + done_bytes in
 * buf + done_bytes.
 */
Test(uring, requeue_continues_where_the_short_transfer_stopped)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_ioq *q = make_queue(io, 4, MiB);
	char *buf = cfs_ioq_buf_get(q, 65536);
	struct done_rec rec = { 0 };
	struct cfs_io_req req = {
		.op = CFS_IO_READ, .offset_bytes = MiB, .length_bytes = 65536, .buf = buf,
		.stats = &stats, .done = rec_done, .cookie = &rec,
	};
	uint64_t end = MiB + 8192, count;
	struct pollfd pfd = { .fd = cfs_ioq_event_fd(q), .events = POLLIN };

	fill(buf, 65536, MiB, 11);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, MiB, 65536, buf, &stats), 65536);
	memset(buf, 0, 65536);
	cr_assert_eq(truncate(img_path, (off_t)end), 0);
	cr_assert_geq(pfd.fd, 0);
	cr_assert_eq(cfs_ioq_queue(q, &req), 0);
	cr_assert_eq(cfs_ioq_submit(q), 1);
	/* the short first attempt has completed (not reaped yet): grow the
	 * file back before the reap resubmits the rest */
	cr_assert_eq(poll(&pfd, 1, 10000), 1);
	cr_assert_eq(read(pfd.fd, &count, sizeof(count)), (ssize_t)sizeof(count));
	cr_assert_eq(truncate(img_path, (off_t)IMG_BYTES), 0);
	while (!rec.calls)
		cr_assert_geq(cfs_ioq_reap(q, 1), 0);
	cr_assert_eq(rec.res, 65536, "completed after the short part");
	cr_assert(check(buf, 8192, MiB, 11), "bytes before the old end");
	cr_assert(all_zero(buf + 8192, 65536 - 8192), "the regrown tail reads as a hole");
	cr_assert_eq(stats.short_retries, 1);
	cr_assert_eq(stats.err_short, 0);
	cfs_ioq_buf_put(q, buf);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

/* ---- buffer arena ------------------------------------------------------------------ */

Test(uring, arena_exhaustion_and_reuse)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_ioq *q = make_queue(io, 4, 4 * MiB);
	void *big[4], *small[1024], *p;
	char local[8192];
	unsigned i;

	cr_assert_eq(cfs_buf_arena_free_bytes(q), 4 * MiB);
	cr_assert_null(cfs_ioq_buf_get(q, 0));
	cr_assert_null(cfs_ioq_buf_get(q, CFS_IO_LENGTH_MAX + 1));
	for (i = 0; i < 4; i++) {
		big[i] = cfs_ioq_buf_get(q, MiB);
		cr_assert_not_null(big[i]);
		cr_assert_eq((uintptr_t)big[i] % 4096, 0);
		cr_assert(cfs_ioq_buf_is_fixed(q, big[i], MiB));
	}
	cr_assert_null(cfs_ioq_buf_get(q, 512), "exhausted");
	cfs_ioq_buf_put(q, big[2]);
	p = cfs_ioq_buf_get(q, 700 * 1024);
	cr_assert_eq(p, big[2], "the freed block is reused");
	cfs_ioq_buf_put(q, p);
	for (i = 0; i < 4; i++)
		if (i != 2)
			cfs_ioq_buf_put(q, big[i]);
	cr_assert_eq(cfs_buf_arena_free_bytes(q), 4 * MiB);

	for (i = 0; i < 1024; i++) {
		small[i] = cfs_ioq_buf_get(q, i % 2 ? 512 : 4096);
		cr_assert_not_null(small[i], "small %u", i);
	}
	cr_assert_null(cfs_ioq_buf_get(q, 512));
	for (i = 0; i < 1024; i += 2)	/* free every other page: no 8 KiB block */
		cfs_ioq_buf_put(q, small[i]);
	cr_assert_null(cfs_ioq_buf_get(q, 8192), "fragmented: no buddy pair free");
	for (i = 1; i < 1024; i += 2)
		cfs_ioq_buf_put(q, small[i]);
	for (i = 0; i < 4; i++) {
		big[i] = cfs_ioq_buf_get(q, MiB);
		cr_assert_not_null(big[i], "buddies merged back into 1 MiB block %u", i);
	}
	for (i = 0; i < 4; i++)
		cfs_ioq_buf_put(q, big[i]);

	cr_assert_not(cfs_ioq_buf_is_fixed(q, local, sizeof(local)));
	cr_assert_not(cfs_ioq_buf_is_fixed(q, (char *)big[3] + MiB - 4096, 8192),
		      "runs past the arena");
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

/* Random sizes 512 B .. 1 MiB over an arena that is not a power of two:
 * blocks never overlap, are aligned to 4096, and everything merges back. */
Test(uring, arena_random_mix_never_overlaps)
{
	enum { SLOTS = 48 };
	struct cfs_io *io = open_uring(img_path, 0, false);
	size_t arena = 11 * MiB + 12 * 4096;
	struct cfs_ioq *q = make_queue(io, 4, arena);
	struct {
		unsigned char *p;
		uint32_t length;
		unsigned char tag;
	} slot[SLOTS] = { { 0 } };
	unsigned i, iter, seed = 12345, got = 0, missed = 0;

	for (iter = 0; iter < 20000; iter++) {
		seed = seed * 1103515245u + 12345u;
		i = (seed >> 8) % SLOTS;
		if (slot[i].p) {
			uint32_t k;

			for (k = 0; k < slot[i].length; k += 509)
				cr_assert_eq(slot[i].p[k], slot[i].tag, "block %u overwritten", i);
			cfs_ioq_buf_put(q, slot[i].p);
			slot[i].p = NULL;
			continue;
		}
		seed = seed * 1103515245u + 12345u;
		slot[i].length = 512u << ((seed >> 16) % 12);	/* 512 B .. 1 MiB */
		slot[i].p = cfs_ioq_buf_get(q, slot[i].length);
		if (!slot[i].p) {
			missed++;
			continue;
		}
		got++;
		cr_assert_eq((uintptr_t)slot[i].p % 4096, 0);
		slot[i].tag = (unsigned char)iter;
		memset(slot[i].p, slot[i].tag, slot[i].length);
	}
	for (i = 0; i < SLOTS; i++)
		cfs_ioq_buf_put(q, slot[i].p);
	cr_assert_eq(cfs_buf_arena_free_bytes(q), arena);
	cr_assert_gt(got, 5000);
	for (i = 0; i < 11; i++)
		cr_assert_not_null(cfs_ioq_buf_get(q, MiB), "fully merged again (%u)", i);
	cr_assert_null(cfs_ioq_buf_get(q, MiB), "only 11 whole MiB fit");
	cr_assert_not_null(cfs_ioq_buf_get(q, 32768));
	cr_assert_not_null(cfs_ioq_buf_get(q, 16384));
	cr_assert_null(cfs_ioq_buf_get(q, 4096), "12 tail pages = 32K + 16K blocks");
	(void)missed;
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

/* Its own suite without the image fixture: an abort skips .fini. */
Test(arena, double_put_aborts, .signal = SIGABRT, .timeout = 30)
{
	struct cfs_io_config cfg = { .backend = "null", .size_bytes = MiB };
	struct cfs_io *io = NULL;
	struct cfs_ioq *q;
	void *p;

	cr_assert_eq(cfs_io_open(&cfg, &io), 0);
	q = make_queue(io, 4, MiB);
	p = cfs_ioq_buf_get(q, 4096);
	cfs_ioq_buf_put(q, p);
	cfs_ioq_buf_put(q, p);
}

/* ---- threads ----------------------------------------------------------------------- */

struct worker {
	struct cfs_io *io;
	unsigned id;
	unsigned errors;
	struct cfs_io_stats *stats;
};

static void *worker_main(void *arg)
{
	enum { QD = 16, BS = 8192, ROUNDS = 40 };
	struct worker *w = arg;
	struct cfs_ioq_config cfg = { .depth = QD, .buffer_arena_bytes = QD * BS };
	struct cfs_io_req req[QD];
	struct qd_ctx ctx = { 0 };
	struct cfs_ioq *q;
	void *buf[QD];
	unsigned i, round;
	uint64_t base = (uint64_t)w->id * 16 * MiB;

	if (cfs_ioq_create(w->io, &cfg, &q)) {
		w->errors++;
		return NULL;
	}
	for (i = 0; i < QD; i++)
		buf[i] = cfs_ioq_buf_get(q, BS);
	for (round = 0; round < ROUNDS; round++) {
		bool write = round % 2 == 0;

		for (i = 0; i < QD; i++) {
			uint64_t offset = base + ((uint64_t)(round / 2) * QD + i) * BS;

			if (write)
				fill(buf[i], BS, offset, w->id);
			else
				memset(buf[i], 0, BS);
			req[i] = (struct cfs_io_req){
				.op = write ? CFS_IO_WRITE : CFS_IO_READ, .offset_bytes = offset,
				.length_bytes = BS, .buf = buf[i], .stats = w->stats,
				.done = qd_done, .cookie = &ctx,
			};
			if (cfs_ioq_queue(q, &req[i]))
				w->errors++;
		}
		cfs_ioq_submit(q);
		while (cfs_ioq_inflight(q))
			if (cfs_ioq_reap(q, 1) < 0)
				w->errors++;
		if (!write)
			for (i = 0; i < QD; i++)
				if (!check(buf[i], BS, req[i].offset_bytes, w->id))
					w->errors++;
	}
	w->errors += ctx.bad;
	for (i = 0; i < QD; i++)
		cfs_ioq_buf_put(q, buf[i]);
	cfs_ioq_destroy(q);
	return NULL;
}

Test(uring, two_threads_two_queues_one_target)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct worker w[2] = { { .io = io, .id = 0, .stats = &stats },
			       { .io = io, .id = 1, .stats = &stats } };
	pthread_t t[2];
	unsigned i;

	for (i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(w[0].errors + w[1].errors, 0);
	cr_assert_eq(stats.op[CFS_IO_READ].ops + stats.op[CFS_IO_WRITE].ops, 2 * 40 * 16);
	cr_assert_eq(stats.inflight_now, 0, "shared stats charged from both threads");
	cfs_io_close(io);
}

/* One thread submits, another reaps the same queue (the daemon's shape when
 * FUSE workers submit and a completion thread replies). */
struct split_ctx {
	struct cfs_ioq *q;
	atomic_uint done;
	atomic_bool stop;
	unsigned bad;
};

static void split_done(struct cfs_io_req *req, int res)
{
	struct split_ctx *ctx = req->cookie;

	if (res != (int)req->length_bytes)
		ctx->bad++;
	atomic_fetch_add(&ctx->done, 1);
}

static void *reaper_main(void *arg)
{
	struct split_ctx *ctx = arg;

	while (!atomic_load(&ctx->stop) || cfs_ioq_inflight(ctx->q))
		if (cfs_ioq_reap(ctx->q, cfs_ioq_inflight(ctx->q) ? 1 : 0) == 0)
			usleep(50);
	return NULL;
}

Test(uring, one_thread_submits_another_reaps)
{
	enum { N = 2000, QD = 32 };
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_ioq *q = make_queue(io, QD, 0);
	struct split_ctx ctx = { .q = q };
	static struct cfs_io_req req[N];
	char *buf = aligned_buf(4096);
	pthread_t reaper;
	unsigned i;

	cr_assert_eq(pthread_create(&reaper, NULL, reaper_main, &ctx), 0);
	for (i = 0; i < N; i++) {
		int ret;

		req[i] = (struct cfs_io_req){
			.op = CFS_IO_READ, .offset_bytes = (uint64_t)(i % 1024) * 4096,
			.length_bytes = 4096, .buf = buf, .stats = &stats, .done = split_done,
			.cookie = &ctx,
		};
		while ((ret = cfs_ioq_queue(q, &req[i])) == -EBUSY) {
			cfs_ioq_submit(q);
			usleep(10);
		}
		cr_assert_eq(ret, 0);
		if (i % 8 == 7)
			cfs_ioq_submit(q);
	}
	cfs_ioq_submit(q);
	atomic_store(&ctx.stop, true);
	pthread_join(reaper, NULL);
	cr_assert_eq(atomic_load(&ctx.done), N);
	cr_assert_eq(ctx.bad, 0);
	cr_assert_eq(stats.inflight_now, 0);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
	free(buf);
}

/* ---- misc ---------------------------------------------------------------------------- */

Test(uring, event_fd_announces_completions)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_ioq *q = make_queue(io, 4, MiB);
	void *buf = cfs_ioq_buf_get(q, 4096);
	struct done_rec rec = { 0 };
	struct cfs_io_req req = {
		.op = CFS_IO_READ, .length_bytes = 4096, .buf = buf, .done = rec_done,
		.cookie = &rec,
	};
	int fd = cfs_ioq_event_fd(q);
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint64_t count;

	cr_assert_geq(fd, 0);
	cr_assert_eq(cfs_ioq_event_fd(q), fd, "one per queue");
	cr_assert_eq(poll(&pfd, 1, 0), 0, "nothing yet");
	cr_assert_eq(cfs_ioq_queue(q, &req), 0);
	cr_assert_eq(cfs_ioq_submit(q), 1);
	cr_assert_eq(poll(&pfd, 1, 5000), 1);
	cr_assert_eq(read(fd, &count, sizeof(count)), (ssize_t)sizeof(count));
	cr_assert_eq(cfs_ioq_reap(q, 0), 1);
	cr_assert_eq(rec.res, 4096);
	cfs_ioq_buf_put(q, buf);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

/* CFS_IOQ_SINGLE_THREAD: deferred completion work must still be found by a
 * non-sleeping reap after the event fd fired, and a second thread is
 * refused by the kernel rather than silently racing. */
struct foreign_ctx {
	struct cfs_ioq *q;
	int submit_ret;
};

static void *foreign_submit(void *arg)
{
	struct foreign_ctx *ctx = arg;

	ctx->submit_ret = cfs_ioq_submit(ctx->q);
	return NULL;
}

Test(uring, single_thread_queue)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_ioq_config cfg = { .depth = 8, .buffer_arena_bytes = MiB,
				      .flags = CFS_IOQ_SINGLE_THREAD };
	struct cfs_ioq *q = NULL;
	struct done_rec rec = { 0 };
	struct cfs_io_req req = { .op = CFS_IO_READ, .length_bytes = 4096, .done = rec_done,
				  .cookie = &rec };
	struct foreign_ctx ctx;
	struct pollfd pfd;
	pthread_t t;
	uint64_t count;
	void *buf;
	int ret;

	cfg.flags = 0x80;
	cr_assert_eq(cfs_ioq_create(io, &cfg, &q), -EINVAL, "unknown flag");
	cfg.flags = CFS_IOQ_SINGLE_THREAD;
	ret = cfs_ioq_create(io, &cfg, &q);
	if (ret == -ENOSYS || ret == -EPERM)
		cr_skip_test("io_uring unavailable");
	cr_assert_eq(ret, 0);
	buf = cfs_ioq_buf_get(q, 8192);
	fill(buf, 8192, 65536, 6);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 65536, 8192, buf, &stats), 8192);
	memset(buf, 0, 8192);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 65536, 8192, buf, &stats), 8192);
	cr_assert(check(buf, 8192, 65536, 6));

	pfd = (struct pollfd){ .fd = cfs_ioq_event_fd(q), .events = POLLIN };
	cr_assert_geq(pfd.fd, 0);
	req.buf = buf;
	cr_assert_eq(cfs_ioq_queue(q, &req), 0);
	cr_assert_eq(cfs_ioq_submit(q), 1);
	cr_assert_eq(poll(&pfd, 1, 5000), 1, "the event fd fires for deferred work");
	cr_assert_eq(read(pfd.fd, &count, sizeof(count)), (ssize_t)sizeof(count));
	for (int i = 0; i < 1000 && !rec.calls; i++) {
		cr_assert_geq(cfs_ioq_reap(q, 0), 0);
		if (!rec.calls)
			usleep(1000);
	}
	cr_assert_eq(rec.res, 4096, "reap(q, 0) ran the deferred completion");

	cr_assert_eq(cfs_ioq_queue(q, &req), 0);
	ctx.q = q;
	pthread_create(&t, NULL, foreign_submit, &ctx);
	pthread_join(t, NULL);
	cr_assert_eq(ctx.submit_ret, -EEXIST, "another thread may not submit");
	cr_assert_eq(cfs_ioq_reap(q, 1), 1, "the owner's reap submits and completes it");
	cfs_ioq_buf_put(q, buf);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

Test(uring, destroy_drains_requests_in_flight)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_ioq *q = make_queue(io, 8, 0);
	struct cfs_io_req req[8];
	struct done_rec rec = { 0 };
	char *buf = aligned_buf(8 * 4096);
	unsigned i;

	for (i = 0; i < 8; i++) {
		req[i] = (struct cfs_io_req){
			.op = CFS_IO_WRITE, .offset_bytes = i * 4096ull, .length_bytes = 4096,
			.buf = buf + i * 4096, .stats = &stats, .done = rec_done, .cookie = &rec,
		};
		cr_assert_eq(cfs_ioq_queue(q, &req[i]), 0);
	}
	cfs_ioq_submit(q);
	cfs_ioq_destroy(q);	/* some staged, some in flight */
	cr_assert_eq(rec.calls, 8);
	cr_assert_eq(stats.inflight_now, 0);
	cfs_io_close(io);
	free(buf);
}

Test(uring, resume_stages_a_parked_request_on_another_queue)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_ioq *qa = make_queue(io, 4, 0), *qb = make_queue(io, 4, 0);
	char *buf = aligned_buf(4096);
	struct done_rec rec = { 0 };
	struct cfs_io_req req = {
		.op = CFS_IO_WRITE, .offset_bytes = 8192, .length_bytes = 4096, .buf = buf,
		.stats = &stats, .done = rec_done, .cookie = &rec,
	};

	/* What cfs_ioq_queue() does before it parks a request on qa. */
	req.queued_ns = cfs_now_ns();
	stats.inflight_now = 1;
	fill(buf, 4096, 8192, 4);
	cr_assert_eq(cfs_ioq_resume(qb, &req), 0);
	cr_assert_eq(cfs_ioq_inflight(qa), 0);
	cr_assert_eq(cfs_ioq_inflight(qb), 1, "counted where it was staged");
	cr_assert_eq(cfs_ioq_reap(qb, 1), 1);
	cr_assert_eq(rec.res, 4096);
	cr_assert_eq(stats.inflight_now, 0);
	memset(buf, 0, 4096);
	cr_assert_eq(cfs_ioq_sync(qa, CFS_IO_READ, 8192, 4096, buf, NULL), 4096);
	cr_assert(check(buf, 4096, 8192, 4));
	cfs_ioq_destroy(qa);
	cfs_ioq_destroy(qb);
	cfs_io_close(io);
	free(buf);
}

Test(uring, buffered_when_direct_io_is_off)
{
	struct cfs_io_config cfg = { .backend = "uring", .path = img_path, .dio = CFS_DIO_OFF };
	struct cfs_io *io = NULL;
	struct cfs_ioq *q;
	char *buf = aligned_buf(4096);

	cr_assert_eq(cfs_io_open(&cfg, &io), 0);
	cr_assert_not(cfs_io_geometry(io)->direct);
	q = make_queue(io, 4, 0);
	fill(buf, 4096, 0, 8);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 0, 4096, buf, NULL), 4096);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_FLUSH, 0, 0, NULL, NULL), 0);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 0, 4096, buf, NULL), 4096);
	cr_assert(check(buf, 4096, 0, 8));
	/* alignment is still enforced: what works here works on a device */
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 100, 4096, buf, NULL), -EINVAL);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
	free(buf);
}

Test(uring, null_backend_completes_without_data)
{
	struct cfs_io_config cfg = { .backend = "null", .size_bytes = 1ull << 30 };
	struct cfs_io *io = NULL;
	struct cfs_ioq *q;
	char *buf = aligned_buf(4096);

	cr_assert_eq(cfs_io_open(&cfg, &io), 0);
	cr_assert_str_eq(cfs_io_geometry(io)->backend, "null");
	q = make_queue(io, 4, 0);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 0, 4096, buf, &stats), 4096);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 512, 4096, buf, &stats), 4096);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 100, 4096, buf, &stats), -EINVAL);
	cr_assert_eq(stats.op[CFS_IO_READ].ops, 1);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
	free(buf);
}

Test(uring, probe_alignment_of_a_file)
{
	struct cfs_io_geometry geo = { 0 };
	int fd = open(img_path, O_RDONLY);

	cr_assert_eq(cfs_io_probe_alignment(fd, &geo), 0);
	cr_assert(geo.logical_sector_bytes >= 512 && geo.logical_sector_bytes <= 4096);
	cr_assert_geq(geo.physical_sector_bytes, geo.logical_sector_bytes);
	cr_assert_not(geo.is_block_device);
	close(fd);
	cr_assert_eq(cfs_io_probe_alignment(-1, &geo), -EINVAL);
}

/* ---- loop device --------------------------------------------------------------------- */

static int run(const char *cmd, char *out, size_t out_size)
{
	FILE *p = popen(cmd, "r");
	int status;

	if (!p)
		return -1;
	if (out && out_size) {
		out[0] = '\0';
		if (fgets(out, (int)out_size, p))
			out[strcspn(out, "\n")] = '\0';
	}
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void loop_setup(void)
{
	char cmd[256];

	loop_path[0] = '\0';
	make_image(IMG_BYTES);
	if (geteuid() != 0)
		return;
	snprintf(cmd, sizeof(cmd), "losetup -f --show '%s' 2>/dev/null", img_path);
	if (run(cmd, loop_path, sizeof(loop_path)) != 0 || strncmp(loop_path, "/dev/loop", 9))
		loop_path[0] = '\0';
}

static void loop_teardown(void)
{
	char cmd[128];

	if (loop_path[0]) {
		snprintf(cmd, sizeof(cmd), "losetup -d '%s' 2>/dev/null", loop_path);
		run(cmd, NULL, 0);
	}
	teardown();
}

TestSuite(uring_loop, .init = loop_setup, .fini = loop_teardown, .timeout = 60);

Test(uring_loop, block_device_round_trip_discard_zero)
{
	struct cfs_io_config cfg = {
		.backend = "uring", .dio = CFS_DIO_REQUIRED, .exclusive = true,
	};
	const struct cfs_io_geometry *geo;
	struct cfs_io *io = NULL, *again = NULL;
	struct cfs_ioq *q;
	char *buf;
	uint32_t i;

	if (!loop_path[0])
		cr_skip_test("needs root and a free loop device");
	cfg.path = loop_path;
	cr_assert_eq(cfs_io_open(&cfg, &io), 0);
	geo = cfs_io_geometry(io);
	cr_assert(geo->is_block_device);
	cr_assert_eq(geo->size_bytes, IMG_BYTES);
	cr_assert_geq(geo->logical_sector_bytes, 512);
	cr_assert(geo->discard_supported, "loop devices discard by punching the image");
	cr_assert_eq(cfs_io_open(&cfg, &again), -EBUSY, "O_EXCL: already open exclusively");

	q = make_queue(io, 16, 2 * MiB);
	buf = cfs_ioq_buf_get(q, MiB);
	for (i = 0; i < 4; i++) {
		uint32_t length = (uint32_t[]){ 4096, 16384, 65536, MiB }[i];
		uint64_t offset = (uint64_t)i * 2 * MiB + 4096;

		fill(buf, length, offset, i);
		cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, offset, length, buf, &stats),
			     (int)length);
		memset(buf, 0, length);
		cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, offset, length, buf, &stats),
			     (int)length);
		cr_assert(check(buf, length, offset, i));
	}
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_FLUSH, 0, 0, NULL, &stats), 0);

	/* discard (the asynchronous block discard command, or its fallback) */
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_DISCARD, 6 * MiB + 4096, MiB, NULL, &stats), MiB);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 6 * MiB + 4096, MiB, buf, &stats), MiB);
	cr_assert(all_zero(buf, MiB), "a loop device punches its image: zeros");

	/* zero (write-zeroes through fallocate on the block device) */
	fill(buf, 65536, 4 * MiB, 3);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 4 * MiB, 65536, buf, &stats), 65536);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_ZERO, 4 * MiB + 4096, 8192, NULL, &stats), 8192);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 4 * MiB, 65536, buf, &stats), 65536);
	cr_assert(check(buf, 4096, 4 * MiB, 3));
	cr_assert(all_zero(buf + 4096, 8192));
	cr_assert(check(buf + 12288, 65536 - 12288, 4 * MiB + 12288, 3));
	cr_assert_eq(stats.op[CFS_IO_DISCARD].errors + stats.op[CFS_IO_ZERO].errors, 0);

	cfs_ioq_buf_put(q, buf);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
}

Test(uring_loop, probe_alignment_of_a_4k_loop_device)
{
	struct cfs_io_geometry geo = { 0 };
	char cmd[256], dev[64];
	int fd;

	if (!loop_path[0])
		cr_skip_test("needs root and a free loop device");
	snprintf(cmd, sizeof(cmd), "losetup -d '%s'; losetup -f --show -b 4096 '%s' 2>/dev/null",
		 loop_path, img_path);
	loop_path[0] = '\0';
	if (run(cmd, dev, sizeof(dev)) != 0 || strncmp(dev, "/dev/loop", 9))
		cr_skip_test("losetup -b 4096 failed");
	strcpy(loop_path, dev);
	fd = open(loop_path, O_RDONLY | O_DIRECT);
	cr_assert_geq(fd, 0);
	cr_assert_eq(cfs_io_probe_alignment(fd, &geo), 0);
	cr_assert(geo.is_block_device);
	cr_assert_eq(geo.logical_sector_bytes, 4096);
	cr_assert_eq(geo.physical_sector_bytes, 4096);
	close(fd);
}

/* ---- pools: several stores behind one target --------------------------------- */

static char pool_path[2][128];

static void pool_setup(void)
{
	make_image(IMG_BYTES);
	for (int i = 0; i < 2; i++) {
		int fd;

		snprintf(pool_path[i], sizeof(pool_path[i]), "%s/store%d", dir_path, i + 1);
		fd = open(pool_path[i], O_RDWR | O_CREAT | O_TRUNC, 0600);
		cr_assert_geq(fd, 0);
		cr_assert_eq(ftruncate(fd, 16 << 20), 0);
		close(fd);
	}
}

static void pool_teardown(void)
{
	unlink(pool_path[0]);
	unlink(pool_path[1]);
	teardown();
}

static int add_store(struct cfs_io *io, const char *path)
{
	struct cfs_io_config cfg = { .path = path, .dio = CFS_DIO_REQUIRED };

	return cfs_io_add_store(io, &cfg);
}

/* The bytes at [offset, +length) of a file, read around the target. */
static void pread_file(const char *path, uint64_t offset, void *buf, uint32_t length)
{
	int fd = open(path, O_RDONLY);

	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, buf, length, (off_t)offset), (ssize_t)length);
	close(fd);
}

Test(uring_pool, routes_send_requests_to_their_store, .init = pool_setup, .fini = pool_teardown)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	/* store 0 at its own offsets; store 1's [1 MiB, 9 MiB) at pool 100
	 * MiB; store 2's [0, 4 MiB) at pool 200 MiB */
	struct cfs_io_route routes[] = {
		{ 0, IMG_BYTES, 0, 0 },
		{ 100ull * MiB, 8 * MiB, 1 * MiB, 1 },
		{ 200ull * MiB, 4 * MiB, 0, 2 },
	};
	struct cfs_ioq *q;
	uint8_t *buf = aligned_buf(MiB), *back = aligned_buf(MiB);

	cr_assert_eq(add_store(io, pool_path[0]), 1);
	cr_assert_eq(add_store(io, pool_path[1]), 2);
	cr_assert_not_null(cfs_io_store_geometry(io, 2));
	cr_assert_eq(cfs_io_store_geometry(io, 2)->size_bytes, 16 << 20);
	cr_assert_null(cfs_io_store_geometry(io, 3));
	cr_assert_eq(cfs_io_set_routes(io, routes, 3), 0);
	cr_assert_eq(cfs_io_geometry(io)->size_bytes, 204ull * MiB);
	q = make_queue(io, 16, 4 * MiB);

	fill(buf, MiB, 1, 1);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 102ull * MiB, MiB, buf, NULL), (int)MiB);
	fill(buf, MiB, 2, 2);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 203ull * MiB, MiB, buf, NULL), (int)MiB);
	fill(buf, MiB, 3, 3);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 5 * MiB, MiB, buf, NULL), (int)MiB);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_FLUSH, 0, 0, NULL, NULL), 0);

	/* Each landed on its store at the routed offset. */
	pread_file(pool_path[0], 3 * MiB, back, MiB);
	cr_assert(check(back, MiB, 1, 1));
	pread_file(pool_path[1], 3 * MiB, back, MiB);
	cr_assert(check(back, MiB, 2, 2));
	pread_file(img_path, 5 * MiB, back, MiB);
	cr_assert(check(back, MiB, 3, 3));
	/* And read back through the pool. */
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 102ull * MiB, MiB, back, NULL), (int)MiB);
	cr_assert(check(back, MiB, 1, 1));

	/* Outside every route, across two routes' gap, or past a route's end. */
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 150ull * MiB, 4096, back, NULL), -EINVAL);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, 108ull * MiB - 4096, 8192, back, NULL),
		     -EINVAL);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 204ull * MiB, 4096, back, NULL), -EINVAL);
	cfs_ioq_destroy(q);
	cfs_io_close(io);
	free(buf);
	free(back);
}

Test(uring_pool, route_tables_are_checked, .init = pool_setup, .fini = pool_teardown)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_io_route overlap[] = {
		{ 0, IMG_BYTES, 0, 0 },
		{ IMG_BYTES - 4096, 8192, 0, 1 },
	};
	struct cfs_io_route too_long[] = { { 100ull * MiB, 17 * MiB, 0, 1 } };
	struct cfs_io_route no_store[] = { { 100ull * MiB, MiB, 0, 5 } };
	struct cfs_io_route unaligned[] = { { 100ull * MiB + 100, MiB, 0, 1 } };

	cr_assert_eq(add_store(io, pool_path[0]), 1);
	cr_assert_eq(cfs_io_set_routes(io, overlap, 2), -EINVAL);
	cr_assert_eq(cfs_io_set_routes(io, too_long, 1), -EINVAL);
	cr_assert_eq(cfs_io_set_routes(io, no_store, 1), -EINVAL);
	cr_assert_eq(cfs_io_set_routes(io, unaligned, 1), -EINVAL);
	cr_assert_eq(cfs_io_set_routes(io, overlap, 0), -EINVAL);
	/* Nothing changed: still store 0 at its own offsets. */
	cr_assert_eq(cfs_io_geometry(io)->size_bytes, IMG_BYTES);
	cr_assert_eq(cfs_io_drop_store(io, 0), -EINVAL);
	cr_assert_eq(cfs_io_drop_store(io, 1), 0);
	cr_assert_eq(cfs_io_drop_store(io, 1), -EINVAL);
	cr_assert_null(cfs_io_store_geometry(io, 1));
	/* The index is free again. */
	cr_assert_eq(add_store(io, pool_path[1]), 1);
	cfs_io_close(io);
}

static int flushes_ok;

static void flush_done(struct cfs_io_req *req, int res)
{
	(void)req;
	if (res == 0)
		flushes_ok++;
}

/* A FLUSH reaches store 0 and every store that completed a write since its
 * last flush (counted per store), and many flushes in a row or in flight at
 * once all complete. */
Test(uring_pool, flush_parts, .init = pool_setup, .fini = pool_teardown)
{
	struct cfs_io *io = open_uring(img_path, 0, false);
	struct cfs_io_route routes[] = {
		{ 0, IMG_BYTES, 0, 0 },
		{ 100ull * MiB, 8 * MiB, 0, 1 },
		{ 200ull * MiB, 8 * MiB, 0, 2 },
	};
	struct cfs_ioq *q;
	uint8_t *buf = aligned_buf(4096);

	cr_assert_eq(add_store(io, pool_path[0]), 1);
	cr_assert_eq(add_store(io, pool_path[1]), 2);
	cr_assert_eq(cfs_io_set_routes(io, routes, 3), 0);
	q = make_queue(io, 8, 0);
	fill(buf, 4096, 0, 9);
	/* Only store 0 and the stores written since their last flush. */
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 100ull * MiB, 4096, buf, NULL), 4096);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_FLUSH, 0, 0, NULL, NULL), 0);
	cr_assert_eq(cfs_uring_store_flushes(io, 0), 1);
	cr_assert_eq(cfs_uring_store_flushes(io, 1), 1);
	cr_assert_eq(cfs_uring_store_flushes(io, 2), 0);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_FLUSH, 0, 0, NULL, NULL), 0);
	cr_assert_eq(cfs_uring_store_flushes(io, 0), 2);
	cr_assert_eq(cfs_uring_store_flushes(io, 1), 1);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, 200ull * MiB, 4096, buf, NULL), 4096);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_FLUSH, 0, 0, NULL, NULL), 0);
	cr_assert_eq(cfs_uring_store_flushes(io, 1), 1);
	cr_assert_eq(cfs_uring_store_flushes(io, 2), 1);
	for (int round = 0; round < 200; round++) {
		uint64_t at = (round % 3) * 100ull * MiB + (uint64_t)(round % 7) * 4096;

		cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, at, 4096, buf, NULL), 4096);
		cr_assert_eq(cfs_ioq_sync(q, CFS_IO_FLUSH, 0, 0, NULL, NULL), 0, "round %d", round);
	}
	/* Several flushes in flight at once, after writes to every store. */
	for (int round = 0; round < 20; round++) {
		struct cfs_io_req reqs[6];
		int finished = 0;

		for (int i = 0; i < 3; i++)
			cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, i * 100ull * MiB, 4096, buf, NULL),
				     4096);
		flushes_ok = 0;
		for (int i = 0; i < 6; i++) {
			reqs[i] = (struct cfs_io_req){ .op = CFS_IO_FLUSH, .done = flush_done };
			cr_assert_eq(cfs_ioq_queue(q, &reqs[i]), 0);
		}
		cfs_ioq_submit(q);
		while (finished < 6) {
			int n = cfs_ioq_reap(q, 1);

			cr_assert_geq(n, 0);
			finished += n;
		}
		cr_assert_eq(flushes_ok, 6);
	}
	cfs_ioq_destroy(q);
	cfs_io_close(io);
	free(buf);
}
