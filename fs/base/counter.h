/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * counter.h — statistics counters: plain uint64_t fields that any thread
 * bumps and any thread reads with relaxed atomics.
 *
 * Relaxed is enough because a counter orders nothing: completions on several
 * threads add to it, readers (getfattr, `chunkfs stat`) copy it, and a
 * reader may see one counter a step ahead of another. What must be ordered
 * (publishing a pointer, a reset) uses its own acquire/release. No lock, no
 * call: these inline to one instruction, or to a short compare-and-swap loop
 * for a maximum or minimum.
 */
#ifndef CFS_BASE_COUNTER_H
#define CFS_BASE_COUNTER_H

#include <stdbool.h>
#include <stdint.h>

static inline void cfs_counter_add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static inline void cfs_counter_sub(uint64_t *c, uint64_t v)
{
	__atomic_fetch_sub(c, v, __ATOMIC_RELAXED);
}

static inline uint64_t cfs_counter_load(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

static inline void cfs_counter_store(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, v, __ATOMIC_RELAXED);
}

/* Raise *c to v if v is larger. */
static inline void cfs_counter_max(uint64_t *c, uint64_t v)
{
	uint64_t cur = cfs_counter_load(c);

	while (v > cur &&
	       !__atomic_compare_exchange_n(c, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* Lower *c to v if v is smaller. */
static inline void cfs_counter_min(uint64_t *c, uint64_t v)
{
	uint64_t cur = cfs_counter_load(c);

	while (v < cur &&
	       !__atomic_compare_exchange_n(c, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* A gauge with its high-water mark (requests in flight): one more now, and
 * the maximum raised to it. */
static inline void cfs_gauge_up(uint64_t *now, uint64_t *max)
{
	cfs_counter_max(max, __atomic_add_fetch(now, 1, __ATOMIC_RELAXED));
}

static inline void cfs_gauge_down(uint64_t *now)
{
	cfs_counter_sub(now, 1);
}

#endif /* CFS_BASE_COUNTER_H */
