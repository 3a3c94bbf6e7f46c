// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_stats.c — iopath/stats.c: histogram bucket layout, percentiles,
 * error classification, reset, snapshot and lock-free concurrent recording.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "iopath/iopath.h"

static struct cfs_io_stats *new_stats(void)
{
	struct cfs_io_stats *s = calloc(1, sizeof(*s));

	cr_assert(s);
	cfs_io_stats_reset(s);
	return s;
}

Test(stats, small_values_are_exact)
{
	for (uint64_t v = 0; v < 2 * CFS_HIST_SUB; v++) {
		unsigned b = cfs_hist_bucket(v);

		cr_assert_eq(b, v, "value %lu in bucket %u", (unsigned long)v, b);
		cr_assert_eq(cfs_hist_bucket_upper_ns(b), v);
	}
}

/* Every bucket's upper bound maps to it, upper+1 maps to the next one, and
 * the bounds grow strictly: the buckets tile [0, UINT64_MAX] with no gap. */
Test(stats, buckets_monotone_and_covering)
{
	uint64_t prev = 0;

	cr_assert_eq(cfs_hist_bucket(0), 0);
	for (unsigned b = 0; b < CFS_HIST_BUCKETS - 1; b++) {
		uint64_t up = cfs_hist_bucket_upper_ns(b);

		if (b > 0)
			cr_assert_gt(up, prev, "bucket %u", b);
		cr_assert_eq(cfs_hist_bucket(up), b, "upper of %u", b);
		cr_assert_eq(cfs_hist_bucket(up + 1), b + 1, "upper+1 of %u", b);
		prev = up;
	}
	cr_assert_eq(cfs_hist_bucket_upper_ns(CFS_HIST_BUCKETS - 1), UINT64_MAX);
	cr_assert_eq(cfs_hist_bucket(UINT64_MAX), CFS_HIST_BUCKETS - 1);
	cr_assert_eq(cfs_hist_bucket(1ull << 62), CFS_HIST_BUCKETS - 1);
}

/* Relative bucket width never exceeds 1/CFS_HIST_SUB. */
Test(stats, bucket_width_bounded)
{
	for (unsigned b = CFS_HIST_SUB; b < CFS_HIST_BUCKETS - 1; b++) {
		uint64_t lower = cfs_hist_bucket_upper_ns(b - 1) + 1;
		uint64_t width = cfs_hist_bucket_upper_ns(b) - lower + 1;

		cr_assert_leq(width * CFS_HIST_SUB, lower, "bucket %u", b);
	}
}

Test(stats, record_counts_and_minmax)
{
	struct cfs_latency_hist h;

	memset(&h, 0, sizeof(h));
	h.min_ns = UINT64_MAX;
	cfs_hist_record(&h, 700);
	cfs_hist_record(&h, 30);
	cfs_hist_record(&h, 9000);
	cfs_hist_record(&h, 30);
	cr_assert_eq(h.count, 4);
	cr_assert_eq(h.sum_ns, 700 + 30 + 9000 + 30);
	cr_assert_eq(h.min_ns, 30);
	cr_assert_eq(h.max_ns, 9000);
	cr_assert_eq(h.bucket[cfs_hist_bucket(30)], 2);
	cr_assert_eq(h.bucket[cfs_hist_bucket(700)], 1);
	cr_assert_eq(h.bucket[cfs_hist_bucket(9000)], 1);
}

static void check_within(uint64_t got, uint64_t want, const char *what)
{
	/* Upper bound of the bucket: at or above the truth, within 1/16. */
	cr_assert_geq(got, want, "%s: %lu < %lu", what, (unsigned long)got, (unsigned long)want);
	cr_assert_leq((double)got, (double)want * (1.0 + 1.0 / CFS_HIST_SUB),
		      "%s: %lu vs %lu", what, (unsigned long)got, (unsigned long)want);
}

Test(stats, percentiles_uniform_1_to_1000us)
{
	struct cfs_io_stats *s = new_stats();
	struct cfs_latency_hist *h = &s->op[CFS_IO_READ].latency;

	for (uint64_t us = 1; us <= 1000; us++)
		cfs_hist_record(h, us * 1000);
	check_within(cfs_hist_percentile_ns(h, 0.50), 500000, "p50");
	check_within(cfs_hist_percentile_ns(h, 0.90), 900000, "p90");
	check_within(cfs_hist_percentile_ns(h, 0.99), 990000, "p99");
	/* p100 and p99.9 cannot exceed the maximum recorded. */
	cr_assert_eq(cfs_hist_percentile_ns(h, 1.0), 1000000);
	cr_assert_leq(cfs_hist_percentile_ns(h, 0.999), 1000000);
	check_within(cfs_hist_percentile_ns(h, 0.999), 999000, "p99.9");
	/* The smallest percentile is at least min. */
	cr_assert_geq(cfs_hist_percentile_ns(h, 0.0001), 1000);
	free(s);
}

Test(stats, percentiles_bimodal)
{
	struct cfs_latency_hist h;

	memset(&h, 0, sizeof(h));
	h.min_ns = UINT64_MAX;
	/* 95% fast (10 us), 5% slow (5 ms): p50/p90 fast, p99 slow. */
	for (int i = 0; i < 950; i++)
		cfs_hist_record(&h, 10000);
	for (int i = 0; i < 50; i++)
		cfs_hist_record(&h, 5000000);
	check_within(cfs_hist_percentile_ns(&h, 0.5), 10000, "p50");
	check_within(cfs_hist_percentile_ns(&h, 0.9), 10000, "p90");
	check_within(cfs_hist_percentile_ns(&h, 0.95), 10000, "p95");
	cr_assert_eq(cfs_hist_percentile_ns(&h, 0.951), 5000000);
	cr_assert_eq(cfs_hist_percentile_ns(&h, 0.99), 5000000);
}

Test(stats, percentile_single_value_and_empty)
{
	struct cfs_latency_hist h;

	memset(&h, 0, sizeof(h));
	h.min_ns = UINT64_MAX;
	cr_assert_eq(cfs_hist_percentile_ns(&h, 0.5), 0);
	cfs_hist_record(&h, 123456);
	/* One sample: every percentile is exactly it (clamped to min and max). */
	cr_assert_eq(cfs_hist_percentile_ns(&h, 0.01), 123456);
	cr_assert_eq(cfs_hist_percentile_ns(&h, 0.5), 123456);
	cr_assert_eq(cfs_hist_percentile_ns(&h, 1.0), 123456);
}

Test(stats, percentile_open_ended_bucket)
{
	struct cfs_latency_hist h;
	uint64_t huge = 1ull << 50;

	memset(&h, 0, sizeof(h));
	h.min_ns = UINT64_MAX;
	cfs_hist_record(&h, huge);
	cfs_hist_record(&h, huge + 5);
	cr_assert_eq(cfs_hist_percentile_ns(&h, 1.0), huge + 5);
	cr_assert_eq(cfs_hist_percentile_ns(&h, 0.5), huge + 5);
}

Test(stats, record_errors_by_kind)
{
	struct cfs_io_stats *s = new_stats();

	cfs_io_stats_record(s, CFS_IO_WRITE, 4096, 1000);
	cfs_io_stats_record(s, CFS_IO_WRITE, -EIO, 2000);
	cfs_io_stats_record(s, CFS_IO_WRITE, -ENOSPC, 3000);
	cfs_io_stats_record(s, CFS_IO_READ, -EINVAL, 10);
	cfs_io_stats_record(s, CFS_IO_READ, -EBADF, 10);
	cfs_io_stats_record(s, CFS_IO_READ, 512, 10);
	cfs_io_stats_record(s, CFS_IO_FLUSH, 0, 50000);
	cfs_io_stats_record(NULL, CFS_IO_READ, 512, 10);	/* NULL: ignored */

	cr_assert_eq(s->op[CFS_IO_WRITE].ops, 3);
	cr_assert_eq(s->op[CFS_IO_WRITE].bytes, 4096);
	cr_assert_eq(s->op[CFS_IO_WRITE].errors, 2);
	cr_assert_eq(s->op[CFS_IO_WRITE].latency.count, 3);
	cr_assert_eq(s->op[CFS_IO_WRITE].latency.sum_ns, 6000);
	cr_assert_eq(s->op[CFS_IO_READ].ops, 3);
	cr_assert_eq(s->op[CFS_IO_READ].bytes, 512);
	cr_assert_eq(s->op[CFS_IO_READ].errors, 2);
	cr_assert_eq(s->op[CFS_IO_FLUSH].ops, 1);
	cr_assert_eq(s->op[CFS_IO_FLUSH].errors, 0);
	cr_assert_eq(s->err_eio, 1);
	cr_assert_eq(s->err_enospc, 1);
	cr_assert_eq(s->err_other, 2);
	cr_assert_eq(s->err_misaligned, 0);	/* the core's, never record()'s */
	free(s);
}

Test(stats, reset_zeroes_and_stamps)
{
	struct cfs_io_stats *s = new_stats();
	uint64_t before = s->reset_time_ns;

	cr_assert_gt(before, 0);
	cfs_io_stats_record(s, CFS_IO_READ, 4096, 1000);
	cfs_io_stats_record(s, CFS_IO_ZERO, -EIO, 1000);
	s->rmw_ops = 3;
	s->inflight_now = 2;
	s->inflight_max = 9;
	cfs_io_stats_reset(s);
	for (int op = 0; op < CFS_IO_OP_COUNT; op++) {
		cr_assert_eq(s->op[op].ops, 0);
		cr_assert_eq(s->op[op].bytes, 0);
		cr_assert_eq(s->op[op].latency.count, 0);
		cr_assert_eq(s->op[op].latency.min_ns, UINT64_MAX);
		cr_assert_eq(s->op[op].latency.max_ns, 0);
		for (int b = 0; b < (int)CFS_HIST_BUCKETS; b++)
			cr_assert_eq(s->op[op].latency.bucket[b], 0);
	}
	cr_assert_eq(s->err_eio, 0);
	cr_assert_eq(s->rmw_ops, 0);
	/* A gauge survives; the high-water mark restarts from it. */
	cr_assert_eq(s->inflight_now, 2);
	cr_assert_eq(s->inflight_max, 2);
	cr_assert_geq(s->reset_time_ns, before);
	free(s);
}

Test(stats, snapshot_copies_everything)
{
	struct cfs_io_stats *s = new_stats(), *c = malloc(sizeof(*c));

	cr_assert(c);
	memset(c, 0xa5, sizeof(*c));
	for (int i = 1; i <= 100; i++)
		cfs_io_stats_record(s, (enum cfs_io_op)(i % CFS_IO_OP_COUNT),
				    i % 7 ? i : -EIO, (uint64_t)i * 997);
	s->rmw_ops = 11;
	s->err_short = 3;
	s->err_misaligned = 4;
	s->short_retries = 5;
	s->inflight_now = 6;
	s->inflight_max = 7;
	cfs_io_stats_snapshot(s, c);
	cr_assert_eq(memcmp(s, c, sizeof(*s)), 0);
	free(c);
	free(s);
}

Test(stats, now_is_monotonic)
{
	uint64_t a = cfs_now_ns(), b = cfs_now_ns();

	cr_assert_gt(a, 0);
	cr_assert_geq(b, a);
}

#define THREADS 4
#define PER_THREAD 200000

static struct cfs_io_stats *shared;

static void *recorder(void *arg)
{
	uintptr_t id = (uintptr_t)arg;

	for (uint64_t i = 0; i < PER_THREAD; i++) {
		/* Thread id picks the latency range so min/max have one winner. */
		uint64_t lat = 1000 + id * 100000 + (i % 5000);

		cfs_io_stats_record(shared, CFS_IO_WRITE, i % 100 == 0 ? -EIO : 4096, lat);
	}
	return NULL;
}

Test(stats, concurrent_recording_sums_exactly)
{
	pthread_t t[THREADS];
	struct cfs_io_stats *c;
	uint64_t sum = 0, want_sum = 0;

	shared = new_stats();
	for (uintptr_t i = 0; i < THREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, recorder, (void *)i), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);

	c = malloc(sizeof(*c));
	cr_assert(c);
	cfs_io_stats_snapshot(shared, c);
	struct cfs_io_op_stats *w = &c->op[CFS_IO_WRITE];

	cr_assert_eq(w->ops, (uint64_t)THREADS * PER_THREAD);
	cr_assert_eq(w->latency.count, (uint64_t)THREADS * PER_THREAD);
	cr_assert_eq(w->errors, (uint64_t)THREADS * PER_THREAD / 100);
	cr_assert_eq(c->err_eio, (uint64_t)THREADS * PER_THREAD / 100);
	cr_assert_eq(w->bytes, (uint64_t)THREADS * (PER_THREAD - PER_THREAD / 100) * 4096);
	for (unsigned b = 0; b < CFS_HIST_BUCKETS; b++)
		sum += w->latency.bucket[b];
	cr_assert_eq(sum, (uint64_t)THREADS * PER_THREAD);
	for (uint64_t id = 0; id < THREADS; id++)
		for (uint64_t i = 0; i < PER_THREAD; i++)
			want_sum += 1000 + id * 100000 + (i % 5000);
	cr_assert_eq(w->latency.sum_ns, want_sum);
	cr_assert_eq(w->latency.min_ns, 1000);
	cr_assert_eq(w->latency.max_ns, 1000 + (THREADS - 1) * 100000 + 4999);
	free(c);
	free(shared);
}

/* A zeroed struct (calloc, no reset) still gets a true minimum. */
Test(stats, zeroed_histogram_min)
{
	struct cfs_io_stats *s = calloc(1, sizeof(*s));

	cfs_io_stats_record(s, CFS_IO_READ, 512, 5000);
	cfs_io_stats_record(s, CFS_IO_READ, 512, 7000);
	cr_assert_eq(s->op[CFS_IO_READ].latency.min_ns, 5000);
	cr_assert_eq(s->op[CFS_IO_READ].latency.max_ns, 7000);
	check_within(cfs_hist_percentile_ns(&s->op[CFS_IO_READ].latency, 0.01), 5000, "p1");
	free(s);
}
