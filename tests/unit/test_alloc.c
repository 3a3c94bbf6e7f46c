/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_alloc.c — the data-region allocator: contiguity near a hint, the
 * fall-back to shorter runs, busy-until-durable, ENOSPC vs EAGAIN, reserve,
 * discard callbacks and the counting invariant.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "fs/meta/alloc.h"

static void check_counts(struct cfs_alloc *a)
{
	struct cfs_alloc_stat st;

	cfs_alloc_stat(a, &st);
	cr_assert_eq(st.free_units + st.busy_units + st.used_units, st.total_units);
}

Test(alloc, create_limits)
{
	struct cfs_alloc *a;

	cr_assert_eq(cfs_alloc_create(0, &a), -EINVAL);
	cr_assert_eq(cfs_alloc_create(CFS_ALLOC_UNITS_MAX + 1, &a), -EINVAL);
	cr_assert_eq(cfs_alloc_create(1, &a), 0);
	cfs_alloc_destroy(a);
	cfs_alloc_destroy(NULL);
}

Test(alloc, contiguous_from_hint)
{
	struct cfs_alloc *a;
	uint64_t first, count;

	cr_assert_eq(cfs_alloc_create(1000, &a), 0);
	cr_assert_eq(cfs_alloc_get(a, 100, 10, &first, &count), 0);
	cr_assert_eq(first, 100);
	cr_assert_eq(count, 10);
	/* The next allocation after the previous end continues the file. */
	cr_assert_eq(cfs_alloc_get(a, 110, 5, &first, &count), 0);
	cr_assert_eq(first, 110);
	cr_assert_eq(count, 5);
	/* A hint inside a used range goes to the next free run. */
	cr_assert_eq(cfs_alloc_get(a, 105, 3, &first, &count), 0);
	cr_assert_eq(first, 115);
	cr_assert_eq(cfs_alloc_get(a, 0, 0, &first, &count), -EINVAL);
	check_counts(a);
	cfs_alloc_destroy(a);
}

Test(alloc, no_hint_rotor_spreads)
{
	struct cfs_alloc *a;
	uint64_t f1, f2, c;

	cr_assert_eq(cfs_alloc_create(100, &a), 0);
	cr_assert_eq(cfs_alloc_get(a, CFS_ALLOC_NO_HINT, 4, &f1, &c), 0);
	cr_assert_eq(cfs_alloc_get(a, CFS_ALLOC_NO_HINT, 4, &f2, &c), 0);
	cr_assert_eq(f2, f1 + 4);
	cfs_alloc_destroy(a);
}

Test(alloc, wraps_and_falls_back_to_short_runs)
{
	struct cfs_alloc *a;
	uint64_t first, count, total = 0;

	cr_assert_eq(cfs_alloc_create(64, &a), 0);
	/* Fragment: use every other unit. */
	for (uint64_t u = 0; u < 64; u += 2)
		cr_assert_eq(cfs_alloc_reserve(a, u, 1), 0);
	/* A 4-unit run exists nowhere: single units, from the hint on. */
	cr_assert_eq(cfs_alloc_get(a, 10, 4, &first, &count), 0);
	cr_assert_eq(first, 11);
	cr_assert_eq(count, 1);
	/* The hint's own unit when free; then wrap to the start. */
	cr_assert_eq(cfs_alloc_get(a, 63, 1, &first, &count), 0);
	cr_assert_eq(first, 63);
	cr_assert_eq(cfs_alloc_get(a, 63, 1, &first, &count), 0);
	cr_assert_eq(first, 1);
	/* Drain everything. */
	while (cfs_alloc_get(a, 0, 3, &first, &count) == 0)
		total += count;
	cr_assert_eq(total, 29);
	cr_assert_eq(cfs_alloc_get(a, 0, 1, &first, &count), -ENOSPC);
	check_counts(a);
	cfs_alloc_destroy(a);
}

Test(alloc, run_straddling_hint_is_found_whole)
{
	struct cfs_alloc *a;
	uint64_t first, count;

	cr_assert_eq(cfs_alloc_create(128, &a), 0);
	cr_assert_eq(cfs_alloc_reserve(a, 0, 10), 0);
	cr_assert_eq(cfs_alloc_reserve(a, 40, 88), 0);
	/* Free run [10, 40); hint 30 has only 10 after it, but the wrap search
	 * finds the run starting at 10 whole. */
	cr_assert_eq(cfs_alloc_get(a, 30, 20, &first, &count), 0);
	cr_assert_eq(first, 10);
	cr_assert_eq(count, 20);
	cfs_alloc_destroy(a);
}

Test(alloc, busy_until_commit)
{
	struct cfs_alloc *a;
	struct cfs_alloc_stat st;
	uint64_t first, count;

	cr_assert_eq(cfs_alloc_create(8, &a), 0);
	cr_assert_eq(cfs_alloc_get(a, 0, 8, &first, &count), 0);
	cr_assert_eq(count, 8);
	cfs_alloc_free(a, 2, 3, 100);
	cr_assert_eq(cfs_alloc_unit_state(a, 2), CFS_ALLOC_STATE_BUSY);
	cr_assert_eq(cfs_alloc_unit_state(a, 5), CFS_ALLOC_STATE_USED);
	cfs_alloc_stat(a, &st);
	cr_assert_eq(st.busy_units, 3);
	cr_assert_eq(st.free_units, 0);
	/* Freed but not durable: not allocatable, and the caller is told to
	 * force a commit rather than fail. */
	cr_assert_eq(cfs_alloc_get(a, 0, 1, &first, &count), -EAGAIN);
	cr_assert_eq(cfs_alloc_commit_done(a, 99, false), 0);
	cr_assert_eq(cfs_alloc_get(a, 0, 1, &first, &count), -EAGAIN);
	cr_assert_eq(cfs_alloc_commit_done(a, 100, false), 3);
	cr_assert_eq(cfs_alloc_unit_state(a, 2), CFS_ALLOC_STATE_FREE);
	cr_assert_eq(cfs_alloc_get(a, 0, 8, &first, &count), 0);
	cr_assert_eq(first, 2);
	cr_assert_eq(count, 3);
	cr_assert_eq(cfs_alloc_get(a, 0, 1, &first, &count), -ENOSPC);
	check_counts(a);
	cfs_alloc_destroy(a);
}

/* Units kept back (a pool's space for the kernel's write-back): a request
 * that would leave fewer gets ENOSPC, with busy units counted as coming. */
Test(alloc, get_keeping_leaves_the_kept_units)
{
	struct cfs_alloc *a;
	uint64_t first, count;

	cr_assert_eq(cfs_alloc_create(16, &a), 0);
	cr_assert_eq(cfs_alloc_get_keeping(a, 0, 13, 4, &first, &count), -ENOSPC);
	cr_assert_eq(cfs_alloc_get_keeping(a, 0, 12, 4, &first, &count), 0);
	cr_assert_eq(count, 12);
	cr_assert_eq(cfs_alloc_get_keeping(a, 0, 1, 4, &first, &count), -ENOSPC);
	cfs_alloc_free(a, 0, 2, 7); /* busy until seq 7 is durable */
	cr_assert_eq(cfs_alloc_get_keeping(a, 0, 2, 4, &first, &count), 0, "2 free of 4 + 2 busy");
	cr_assert_eq(cfs_alloc_get_keeping(a, 0, 1, 4, &first, &count), -ENOSPC);
	cr_assert_eq(cfs_alloc_get(a, 0, 4, &first, &count), 0, "the kept ones, unasked");
	check_counts(a);
	cfs_alloc_destroy(a);
}

struct keeping_race {
	struct cfs_alloc *a;
	_Atomic uint64_t taken;
};

static void *keeping_taker(void *arg)
{
	struct keeping_race *r = arg;
	uint64_t first, count;

	while (cfs_alloc_get_keeping(r->a, CFS_ALLOC_NO_HINT, 1, 100, &first, &count) == 0)
		atomic_fetch_add(&r->taken, count);
	return NULL;
}

/* Four threads take single units while 100 are kept: the check and the
 * allocation are one step, so together they stop exactly at the line. */
Test(alloc, get_keeping_holds_the_line_under_concurrency)
{
	struct keeping_race r = {.taken = 0};
	struct cfs_alloc_stat st;
	pthread_t t[4];

	cr_assert_eq(cfs_alloc_create(20000, &r.a), 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, keeping_taker, &r), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	cfs_alloc_stat(r.a, &st);
	cr_assert_eq(st.free_units, 100);
	cr_assert_eq(atomic_load(&r.taken), 19900);
	cfs_alloc_destroy(r.a);
}

Test(alloc, busy_released_by_seq_out_of_order)
{
	struct cfs_alloc *a;
	uint64_t first, count;

	cr_assert_eq(cfs_alloc_create(16, &a), 0);
	cr_assert_eq(cfs_alloc_get(a, 0, 16, &first, &count), 0);
	cfs_alloc_free(a, 0, 2, 20);
	cfs_alloc_free(a, 4, 2, 10);
	cfs_alloc_free(a, 8, 2, 30);
	cfs_alloc_free(a, 10, 2, 30); /* merged with the previous */
	cr_assert_eq(cfs_alloc_commit_done(a, 15, false), 2);
	cr_assert_eq(cfs_alloc_unit_state(a, 4), CFS_ALLOC_STATE_FREE);
	cr_assert_eq(cfs_alloc_unit_state(a, 0), CFS_ALLOC_STATE_BUSY);
	cr_assert_eq(cfs_alloc_commit_done(a, 30, false), 6);
	check_counts(a);
	cfs_alloc_destroy(a);
}

struct discard_log {
	uint64_t first[8];
	uint64_t count[8];
	int n;
	struct cfs_alloc *a;
	int state_during;
};

static void log_discard(struct discard_log *log, uint64_t first, uint64_t count)
{
	log->first[log->n] = first;
	log->count[log->n] = count;
	log->n++;
}

/* Records the discard and tries to allocate its units (nothing else may be
 * free: the allocation would take other units). */
static void discard_cb(void *arg, uint64_t first, uint64_t count)
{
	struct discard_log *log = arg;
	uint64_t f, c;

	log_discard(log, first, count);
	/* While the device discards, nobody may get these units. */
	log->state_during = cfs_alloc_get(log->a, first, count, &f, &c);
}

/* Records the discard and only looks: the units being discarded are not FREE. */
static void discard_look_cb(void *arg, uint64_t first, uint64_t count)
{
	struct discard_log *log = arg;

	log_discard(log, first, count);
	for (uint64_t u = first; u < first + count; u++)
		cr_assert_neq(cfs_alloc_unit_state(log->a, u), CFS_ALLOC_STATE_FREE);
}

Test(alloc, discard_before_free)
{
	struct cfs_alloc *a;
	struct discard_log log = {.n = 0};
	uint64_t first, count;

	cr_assert_eq(cfs_alloc_create(4, &a), 0);
	log.a = a;
	cr_assert_eq(cfs_alloc_get(a, 0, 4, &first, &count), 0);
	cfs_alloc_free(a, 1, 2, 7);
	cr_assert_eq(cfs_alloc_commit_done(a, 7, true), 2);
	cr_assert_eq(log.n, 0); /* released at once, discarded by a later pass */
	cr_assert_eq(cfs_alloc_discard_some(a, 64, discard_cb, &log), 0);
	cr_assert_eq(log.n, 1);
	cr_assert_eq(log.first[0], 1);
	cr_assert_eq(log.count[0], 2);
	cr_assert_eq(log.state_during, -EAGAIN);
	cr_assert_eq(cfs_alloc_unit_state(a, 1), CFS_ALLOC_STATE_FREE);
	check_counts(a);
	cfs_alloc_destroy(a);
}

/* An allocator of 16 units, all of them used, its discards logged in log. */
static struct cfs_alloc *all_used(struct discard_log *log)
{
	struct cfs_alloc *a;
	uint64_t first, count;

	cr_assert_eq(cfs_alloc_create(16, &a), 0);
	log->a = a;
	cr_assert_eq(cfs_alloc_get(a, 0, 16, &first, &count), 0);
	return a;
}

/* A moved chunk frees its source one unit per transaction: neighbours that
 * become durable together go to the device as one discard, in unit order,
 * and a gap still splits them. */
Test(alloc, neighbours_from_different_commits_discard_as_one)
{
	struct discard_log log = {.n = 0};
	struct cfs_alloc *a = all_used(&log);

	cfs_alloc_free(a, 5, 1, 12); /* freed out of order, each its own seq */
	cfs_alloc_free(a, 3, 1, 10);
	cfs_alloc_free(a, 4, 1, 11);
	cfs_alloc_free(a, 9, 2, 13);  /* unit 8 stays used: a gap */
	cfs_alloc_free(a, 14, 1, 20); /* not durable yet */
	cr_assert_eq(cfs_alloc_commit_done(a, 13, true), 5);
	cr_assert_eq(cfs_alloc_discard_some(a, 64, discard_cb, &log), 0);
	cr_assert_eq(log.n, 2);
	cr_assert_eq(log.first[0], 3);
	cr_assert_eq(log.count[0], 3);
	cr_assert_eq(log.first[1], 9);
	cr_assert_eq(log.count[1], 2);
	cr_assert_eq(log.state_during, -EAGAIN);
	cr_assert_eq(cfs_alloc_unit_state(a, 8), CFS_ALLOC_STATE_USED);
	cr_assert_eq(cfs_alloc_unit_state(a, 14), CFS_ALLOC_STATE_BUSY);
	check_counts(a);
	cr_assert_eq(cfs_alloc_commit_done(a, 20, true), 1);
	cr_assert_eq(cfs_alloc_discard_some(a, 64, discard_cb, &log), 0);
	cr_assert_eq(log.n, 3);
	cr_assert_eq(log.first[2], 14);
	check_counts(a);
	cfs_alloc_destroy(a);
}

/* Released units are allocatable before their discard; the pass skips the
 * ones allocated again (their new owner's data must not be discarded) and
 * does no more than its budget at a time. */
Test(alloc, discard_pass_skips_reused_units_and_keeps_its_budget)
{
	struct discard_log log = {.n = 0};
	struct cfs_alloc *a = all_used(&log);

	cfs_alloc_free(a, 2, 10, 5);
	cr_assert_eq(cfs_alloc_commit_done(a, 5, true), 10);
	cr_assert_eq(cfs_alloc_unit_state(a, 4), CFS_ALLOC_STATE_FREE);
	cr_assert_eq(cfs_alloc_reserve(a, 4, 2), 0); /* taken again before the pass */
	cr_assert_eq(cfs_alloc_discard_some(a, 3, discard_look_cb, &log), 5); /* 7-11 */
	cr_assert_eq(log.n, 2); /* 2-3, then 6 (the budget of 3 ends there) */
	cr_assert_eq(log.first[0], 2);
	cr_assert_eq(log.count[0], 2);
	cr_assert_eq(log.first[1], 6);
	cr_assert_eq(log.count[1], 1);
	cr_assert_eq(cfs_alloc_discard_some(a, 64, discard_look_cb, &log), 0);
	cr_assert_eq(log.n, 3);
	cr_assert_eq(log.first[2], 7);
	cr_assert_eq(log.count[2], 5);
	cr_assert_eq(cfs_alloc_unit_state(a, 4), CFS_ALLOC_STATE_USED);
	cr_assert_eq(cfs_alloc_unit_state(a, 9), CFS_ALLOC_STATE_FREE);
	cr_assert_eq(cfs_alloc_discard_some(a, 64, discard_look_cb, &log), 0);
	cr_assert_eq(log.n, 3);
	check_counts(a);
	cfs_alloc_destroy(a);
}

Test(alloc, immediate_free_with_seq_zero)
{
	struct cfs_alloc *a;
	uint64_t first, count;

	cr_assert_eq(cfs_alloc_create(4, &a), 0);
	cr_assert_eq(cfs_alloc_get(a, 0, 4, &first, &count), 0);
	cfs_alloc_free(a, 0, 4, 0);
	cr_assert_eq(cfs_alloc_unit_state(a, 3), CFS_ALLOC_STATE_FREE);
	cfs_alloc_destroy(a);
}

Test(alloc, reserve_conflicts)
{
	struct cfs_alloc *a;

	cr_assert_eq(cfs_alloc_create(100, &a), 0);
	cr_assert_eq(cfs_alloc_reserve(a, 10, 10), 0);
	cr_assert_eq(cfs_alloc_reserve(a, 19, 2), -EEXIST);
	cr_assert_eq(cfs_alloc_unit_state(a, 20), CFS_ALLOC_STATE_FREE);
	cr_assert_eq(cfs_alloc_reserve(a, 95, 6), -ERANGE);
	cr_assert_eq(cfs_alloc_reserve(a, 100, 1), -ERANGE);
	cr_assert_eq(cfs_alloc_unit_state(a, 100), -ERANGE);
	check_counts(a);
	cfs_alloc_destroy(a);
}

Test(alloc, double_free_aborts, .signal = SIGABRT)
{
	struct cfs_alloc *a;

	cfs_alloc_create(10, &a);
	cfs_alloc_reserve(a, 0, 1);
	cfs_alloc_free(a, 0, 1, 0);
	cfs_alloc_free(a, 0, 1, 0);
}

Test(alloc, large_region_random_churn)
{
	struct cfs_alloc *a;
	const uint64_t units = 100000;
	uint64_t *firsts = calloc(4096, sizeof(uint64_t));
	uint64_t *counts = calloc(4096, sizeof(uint64_t));
	int n = 0;
	uint64_t seq = 1;

	cr_assert_eq(cfs_alloc_create(units, &a), 0);
	srand(7);
	for (int i = 0; i < 20000; i++) {
		if (n < 4096 && (rand() % 3 || n == 0)) {
			uint64_t f, c;
			int ret =
				cfs_alloc_get(a, (uint64_t)rand() % units, 1 + rand() % 64, &f, &c);

			if (ret == -EAGAIN) {
				cfs_alloc_commit_done(a, seq, false);
				continue;
			}
			cr_assert_eq(ret, 0);
			firsts[n] = f;
			counts[n] = c;
			n++;
		} else {
			int k = rand() % n;

			cfs_alloc_free(a, firsts[k], counts[k], seq++);
			firsts[k] = firsts[n - 1];
			counts[k] = counts[n - 1];
			n--;
		}
		if (i % 1000 == 0)
			check_counts(a);
	}
	for (int k = 0; k < n; k++)
		cfs_alloc_free(a, firsts[k], counts[k], 0);
	cfs_alloc_commit_done(a, UINT64_MAX, false);
	{
		struct cfs_alloc_stat st;

		cfs_alloc_stat(a, &st);
		cr_assert_eq(st.free_units, units);
	}
	free(firsts);
	free(counts);
	cfs_alloc_destroy(a);
}

/* A 100 TB store of 1 MiB units: memory by free fragments, not units. */
Test(alloc, memory_follows_fragments)
{
	const uint64_t units = 100ull << 20;
	struct cfs_alloc *a;
	struct cfs_alloc_stat st;
	uint64_t first, count;

	cr_assert_eq(cfs_alloc_create(units, &a), 0);
	/* 90 chunks of 1 TiB allocated one after the other: one free range. */
	for (int i = 0; i < 90; i++) {
		cr_assert_eq(cfs_alloc_get(a, CFS_ALLOC_NO_HINT, 1u << 20, &first, &count), 0);
		cr_assert_eq(count, 1u << 20);
	}
	cfs_alloc_stat(a, &st);
	cr_assert_eq(st.free_ranges, 1);
	cr_assert_eq(st.free_units, units - 90ull * (1u << 20));
	/* Every tenth chunk freed: ten more fragments, merged when adjacent. */
	for (uint64_t c = 0; c < 90; c += 10)
		cfs_alloc_free(a, c << 20, 1u << 20, 0);
	cfs_alloc_stat(a, &st);
	cr_assert_eq(st.free_ranges, 10);
	cfs_alloc_free(a, 1ull << 20, 1u << 20, 0); /* next to chunk 0's range */
	cfs_alloc_stat(a, &st);
	cr_assert_eq(st.free_ranges, 10);
	cr_assert_eq(cfs_alloc_unit_state(a, (1ull << 20) + 5), CFS_ALLOC_STATE_FREE);
	cr_assert_eq(cfs_alloc_unit_state(a, (2ull << 20) + 5), CFS_ALLOC_STATE_USED);
	/* A hint inside a free range starts there. */
	cr_assert_eq(cfs_alloc_get(a, (1ull << 20) + 100, 10, &first, &count), 0);
	cr_assert_eq(first, (1ull << 20) + 100);
	cfs_alloc_stat(a, &st);
	cr_assert_eq(st.free_ranges, 11);
	cfs_alloc_destroy(a);
}
