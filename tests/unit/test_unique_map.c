/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_unique_map.c — the unique -> ring entry map of FUSE over io_uring:
 * sized from the number of entries (a queue of 64 per possible CPU), every
 * value found once, tombstones reused under the kernel's ever-growing
 * uniques, an insert on one thread taken on another, and an overfull map
 * stopping loudly.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fs/fuse/unique_map.h"

/* The kernel's uniques: even, increasing (the low bit marks interrupts). */
#define UNIQUE(i) (2 * (uint64_t)(i) + 2)

static void *val_of(uint64_t i)
{
	return (void *)(uintptr_t)(i + 1);
}

Test(unique_map, sized_from_the_entries)
{
	struct cfs_unique_map m;

	cr_assert_eq(cfs_unique_map_init(&m, 0), 0);
	cr_assert_eq(cfs_unique_map_slots(&m), 4096);
	cfs_unique_map_destroy(&m);
	cr_assert_eq(cfs_unique_map_slots(&m), 0);
	cr_assert_eq(cfs_unique_map_init(&m, 2048), 0);
	cr_assert_eq(cfs_unique_map_slots(&m), 4096);
	cfs_unique_map_destroy(&m);
	/* 64 possible CPUs x 64 entries: twice as many slots */
	cr_assert_eq(cfs_unique_map_init(&m, 64 * 64), 0);
	cr_assert_eq(cfs_unique_map_slots(&m), 8192);
	cfs_unique_map_destroy(&m);
	cr_assert_eq(cfs_unique_map_init(&m, 64 * 64 + 1), 0);
	cr_assert_eq(cfs_unique_map_slots(&m), 16384);
	cfs_unique_map_destroy(&m);
	cr_assert_eq(cfs_unique_map_init(&m, (1ull << 30) + 1), -EINVAL);
	cfs_unique_map_destroy(&m); /* harmless after a failed init */
}

/* Every entry of a 256-CPU machine in flight at once (16384): each found,
 * once, with its own value. */
Test(unique_map, holds_every_entry_at_once)
{
	const uint64_t n = 256 * 64;
	struct cfs_unique_map m;

	cr_assert_eq(cfs_unique_map_init(&m, n), 0);
	for (uint64_t i = 0; i < n; i++)
		cfs_unique_map_insert(&m, UNIQUE(i), val_of(i));
	cr_assert_null(cfs_unique_map_take(&m, UNIQUE(n)), "never inserted");
	for (uint64_t i = 0; i < n; i += 2)
		cr_assert_eq(cfs_unique_map_take(&m, UNIQUE(i)), val_of(i), "unique %lu",
			     (unsigned long)UNIQUE(i));
	for (uint64_t i = 1; i < n; i += 2)
		cr_assert_eq(cfs_unique_map_take(&m, UNIQUE(i)), val_of(i));
	for (uint64_t i = 0; i < n; i += 97)
		cr_assert_null(cfs_unique_map_take(&m, UNIQUE(i)), "taken twice");
	cfs_unique_map_destroy(&m);
}

/* A long run of requests, 64 in flight, uniques never repeating: slots of
 * taken values are reused, nothing is lost, the map never fills. */
Test(unique_map, tombstones_reused)
{
	const uint64_t inflight = 64, total = 2000000;
	struct cfs_unique_map m;

	cr_assert_eq(cfs_unique_map_init(&m, inflight), 0);
	for (uint64_t i = 0; i < total; i++) {
		cfs_unique_map_insert(&m, UNIQUE(i), val_of(i));
		if (i >= inflight - 1) {
			uint64_t old = i - (inflight - 1);

			if (cfs_unique_map_take(&m, UNIQUE(old)) != val_of(old))
				cr_assert_fail("unique %lu lost after %lu requests", (unsigned long)UNIQUE(old),
					 (unsigned long)i);
		}
	}
	cfs_unique_map_destroy(&m);
}

/* The transport's pattern: the loop inserts, another thread (the committer
 * answering an fsync) takes. */
struct handoff {
	struct cfs_unique_map *m;
	_Atomic uint64_t published; /* values 0 .. published-1 are inserted */
	_Atomic uint64_t taken;	    /* values 0 .. taken-1 are taken */
	uint64_t total;
	uint64_t wrong;
};

static void *taker(void *arg)
{
	struct handoff *h = arg;

	for (uint64_t i = 0; i < h->total; i++) {
		while (atomic_load_explicit(&h->published, memory_order_acquire) <= i)
			;
		if (cfs_unique_map_take(h->m, UNIQUE(i)) != val_of(i))
			h->wrong++;
		atomic_store_explicit(&h->taken, i + 1, memory_order_release);
	}
	return NULL;
}

Test(unique_map, insert_on_one_thread_take_on_another)
{
	struct cfs_unique_map m;
	struct handoff h = {.m = &m, .total = 300000};
	pthread_t t;

	cr_assert_eq(cfs_unique_map_init(&m, 256), 0);
	cr_assert_eq(pthread_create(&t, NULL, taker, &h), 0);
	for (uint64_t i = 0; i < h.total; i++) {
		/* at most 256 in the map, as with 256 ring entries */
		while (i - atomic_load_explicit(&h.taken, memory_order_acquire) >= 256)
			;
		cfs_unique_map_insert(&m, UNIQUE(i), val_of(i));
		atomic_store_explicit(&h.published, i + 1, memory_order_release);
	}
	pthread_join(t, NULL);
	cr_assert_eq(h.wrong, 0, "%lu values taken wrong", (unsigned long)h.wrong);
	cfs_unique_map_destroy(&m);
}

/* More values than slots is a caller bug: stop, never overwrite. */
Test(unique_map, overfull_aborts, .signal = SIGABRT)
{
	struct cfs_unique_map m;

	cr_assert_eq(cfs_unique_map_init(&m, 1), 0);
	for (uint64_t i = 0; i <= cfs_unique_map_slots(&m); i++)
		cfs_unique_map_insert(&m, UNIQUE(i), val_of(i));
}
