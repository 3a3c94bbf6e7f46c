// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * stats.c — per-chunk I/O counters and the log-linear latency histogram.
 *
 * Every update is a relaxed __atomic operation on a uint64_t: completions on
 * any thread charge the same struct cfs_io_stats without a lock, and readers
 * (getfattr through fs/fuse/xattr.c, `chunkfs stat`) copy it with atomic loads, so
 * reading statistics never blocks or slows I/O. min/max use CAS loops.
 *
 * Histogram: values below CFS_HIST_SUB ns each have a bucket of their own;
 * above, every power of two [2^p, 2^(p+1)) is cut into CFS_HIST_SUB equal
 * sub-buckets, so a bucket's width is at most 1/CFS_HIST_SUB of its lower
 * bound (6.25% with 16 sub-buckets). The last bucket is open-ended.
 *
 * What this file does not do: it does not count in-flight requests (the core,
 * io.c, owns inflight_now/inflight_max because only it knows when a request
 * enters), nor misaligned refusals or short transfers (err_misaligned and
 * err_short are charged by the core where it detects them). Counters are
 * independent: a snapshot taken during I/O may see ops of a completion whose
 * bytes it does not see yet. That is the price of no lock, and fine for rates.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "fs/base/counter.h"
#include "iopath/iopath.h"

/* Any new field must be added to cfs_io_stats_snapshot() and _reset(). */
_Static_assert(sizeof(struct cfs_latency_hist) == (4 + CFS_HIST_BUCKETS) * sizeof(uint64_t),
	       "cfs_latency_hist changed: update stats.c");
_Static_assert(sizeof(struct cfs_io_stats) ==
		       CFS_IO_OP_COUNT * sizeof(struct cfs_io_op_stats) + 10 * sizeof(uint64_t),
	       "cfs_io_stats changed: update stats.c");
/* Group g >= 1 starts at 2^(g + SUB_BITS - 1); the last group must fit in 64 bits. */
_Static_assert(CFS_HIST_POW + CFS_HIST_SUB_BITS - 1 < 64, "histogram exceeds 64-bit range");

uint64_t cfs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Bucket layout: group 0 holds 0..SUB-1 one value per bucket; group g >= 1
 * holds [2^(g+SUB_BITS-1), 2^(g+SUB_BITS)) in SUB equal parts. Group 1 thus
 * continues group 0 with width-1 buckets, and every value has exactly one
 * bucket (the property test_stats.c checks at every boundary).
 */
unsigned cfs_hist_bucket(uint64_t latency_ns)
{
	unsigned p, group, sub;

	if (latency_ns < CFS_HIST_SUB)
		return (unsigned)latency_ns;
	p = 63u - (unsigned)__builtin_clzll(latency_ns); /* p >= SUB_BITS */
	group = p - CFS_HIST_SUB_BITS + 1;
	if (group >= CFS_HIST_POW)
		return CFS_HIST_BUCKETS - 1;
	sub = (unsigned)(latency_ns >> (p - CFS_HIST_SUB_BITS)) & (CFS_HIST_SUB - 1);
	return group * CFS_HIST_SUB + sub;
}

/* The largest value that falls in `bucket` (inclusive). */
uint64_t cfs_hist_bucket_upper_ns(unsigned bucket)
{
	unsigned group = bucket / CFS_HIST_SUB, sub = bucket % CFS_HIST_SUB;
	uint64_t width, lower;

	if (bucket >= CFS_HIST_BUCKETS - 1)
		return UINT64_MAX;
	if (group == 0)
		return bucket;
	width = 1ull << (group - 1);
	lower = (uint64_t)(CFS_HIST_SUB + sub) << (group - 1);
	return lower + width - 1;
}

void cfs_hist_record(struct cfs_latency_hist *hist, uint64_t latency_ns)
{
	uint64_t unset = 0;

	cfs_counter_add(&hist->bucket[cfs_hist_bucket(latency_ns)], 1);
	cfs_counter_add(&hist->sum_ns, latency_ns);
	/* A zeroed histogram (calloc, never reset) has min_ns 0 meaning "none
	 * yet", not a 0 ns completion: take the first value over it. */
	if (cfs_counter_load(&hist->count) == 0)
		__atomic_compare_exchange_n(&hist->min_ns, &unset, latency_ns, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	cfs_counter_min(&hist->min_ns, latency_ns);
	cfs_counter_max(&hist->max_ns, latency_ns);
	/* count last: a reader that sees count sees (almost always) the bucket */
	cfs_counter_add(&hist->count, 1);
}

uint64_t cfs_hist_percentile_ns(const struct cfs_latency_hist *hist, double fraction)
{
	uint64_t total = 0, rank, seen = 0, upper, min_ns, max_ns;
	unsigned b;

	/* The bucket sum, not hist->count: on a live histogram they may differ
	 * by the completions in progress, and the walk must reach its rank. */
	for (b = 0; b < CFS_HIST_BUCKETS; b++)
		total += cfs_counter_load(&hist->bucket[b]);
	if (total == 0)
		return 0;
	if (!(fraction > 0.0))
		fraction = 1e-12;
	if (fraction > 1.0)
		fraction = 1.0;
	rank = (uint64_t)(fraction * (double)total);
	if ((double)rank < fraction * (double)total)
		rank++; /* ceil: the smallest rank covering fraction */
	if (rank == 0)
		rank = 1;
	if (rank > total)
		rank = total;

	for (b = 0; b < CFS_HIST_BUCKETS; b++) {
		seen += cfs_counter_load(&hist->bucket[b]);
		if (seen >= rank)
			break;
	}
	upper = cfs_hist_bucket_upper_ns(b);
	max_ns = cfs_counter_load(&hist->max_ns);
	min_ns = cfs_counter_load(&hist->min_ns);
	if (upper > max_ns)
		upper = max_ns;
	if (upper < min_ns)
		upper = min_ns;
	return upper;
}

static void hist_reset(struct cfs_latency_hist *hist)
{
	unsigned b;

	cfs_counter_store(&hist->count, 0);
	cfs_counter_store(&hist->sum_ns, 0);
	cfs_counter_store(&hist->min_ns, UINT64_MAX);
	cfs_counter_store(&hist->max_ns, 0);
	for (b = 0; b < CFS_HIST_BUCKETS; b++)
		cfs_counter_store(&hist->bucket[b], 0);
}

/*
 * inflight_now is a gauge, not a counter: zeroing it would make it wrap when
 * the requests in flight at reset time complete. It is kept, and the
 * high-water mark restarts from it.
 */
void cfs_io_stats_reset(struct cfs_io_stats *stats)
{
	struct timespec ts;
	unsigned op;

	for (op = 0; op < CFS_IO_OP_COUNT; op++) {
		cfs_counter_store(&stats->op[op].ops, 0);
		cfs_counter_store(&stats->op[op].bytes, 0);
		cfs_counter_store(&stats->op[op].errors, 0);
		hist_reset(&stats->op[op].latency);
	}
	cfs_counter_store(&stats->inflight_max, cfs_counter_load(&stats->inflight_now));
	cfs_counter_store(&stats->err_eio, 0);
	cfs_counter_store(&stats->err_enospc, 0);
	cfs_counter_store(&stats->err_misaligned, 0);
	cfs_counter_store(&stats->err_short, 0);
	cfs_counter_store(&stats->err_other, 0);
	cfs_counter_store(&stats->short_retries, 0);
	cfs_counter_store(&stats->rmw_ops, 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	cfs_counter_store(&stats->reset_time_ns,
			  (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
}

static void hist_snapshot(const struct cfs_latency_hist *hist, struct cfs_latency_hist *copy)
{
	unsigned b;

	copy->count = cfs_counter_load(&hist->count);
	copy->sum_ns = cfs_counter_load(&hist->sum_ns);
	copy->min_ns = cfs_counter_load(&hist->min_ns);
	copy->max_ns = cfs_counter_load(&hist->max_ns);
	for (b = 0; b < CFS_HIST_BUCKETS; b++)
		copy->bucket[b] = cfs_counter_load(&hist->bucket[b]);
}

void cfs_io_stats_snapshot(const struct cfs_io_stats *stats, struct cfs_io_stats *copy)
{
	unsigned op;

	for (op = 0; op < CFS_IO_OP_COUNT; op++) {
		copy->op[op].ops = cfs_counter_load(&stats->op[op].ops);
		copy->op[op].bytes = cfs_counter_load(&stats->op[op].bytes);
		copy->op[op].errors = cfs_counter_load(&stats->op[op].errors);
		hist_snapshot(&stats->op[op].latency, &copy->op[op].latency);
	}
	copy->inflight_now = cfs_counter_load(&stats->inflight_now);
	copy->inflight_max = cfs_counter_load(&stats->inflight_max);
	copy->err_eio = cfs_counter_load(&stats->err_eio);
	copy->err_enospc = cfs_counter_load(&stats->err_enospc);
	copy->err_misaligned = cfs_counter_load(&stats->err_misaligned);
	copy->err_short = cfs_counter_load(&stats->err_short);
	copy->err_other = cfs_counter_load(&stats->err_other);
	copy->short_retries = cfs_counter_load(&stats->short_retries);
	copy->rmw_ops = cfs_counter_load(&stats->rmw_ops);
	copy->reset_time_ns = cfs_counter_load(&stats->reset_time_ns);
}

/*
 * Errors by kind. -EINVAL here is a backend's refusal (err_other): the core's
 * own alignment refusal never reaches a backend and is charged to
 * err_misaligned where it happens.
 */
void cfs_io_stats_record(struct cfs_io_stats *stats, enum cfs_io_op op, int res,
			 uint64_t latency_ns)
{
	struct cfs_io_op_stats *os;

	if (!stats || (unsigned)op >= CFS_IO_OP_COUNT)
		return;
	os = &stats->op[op];
	if (res >= 0) {
		cfs_counter_add(&os->bytes, (uint64_t)res);
	} else {
		cfs_counter_add(&os->errors, 1);
		if (res == -EIO)
			cfs_counter_add(&stats->err_eio, 1);
		else if (res == -ENOSPC)
			cfs_counter_add(&stats->err_enospc, 1);
		else
			cfs_counter_add(&stats->err_other, 1);
	}
	cfs_hist_record(&os->latency, latency_ns);
	cfs_counter_add(&os->ops, 1);
}
