/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * unique_map.c — see unique_map.h.
 */
#include <errno.h>
#include <stdlib.h>

#include "fs/base/hash.h"
#include "fs/fuse/unique_map.h"

#define SLOT_EMPTY 0ull
#define SLOT_TOMB UINT64_MAX
#define SLOT_CLAIMED (UINT64_MAX - 1)

int cfs_unique_map_init(struct cfs_unique_map *m, size_t max_values)
{
	m->keys = NULL;
	m->vals = NULL;
	if (max_values > (1ull << 30))
		return -EINVAL;
	m->bits = CFS_UNIQUE_MAP_MIN_BITS;
	while ((1ull << m->bits) < 2 * (uint64_t)max_values)
		m->bits++;
	m->keys = calloc(1ull << m->bits, sizeof(*m->keys)); /* all SLOT_EMPTY */
	m->vals = calloc(1ull << m->bits, sizeof(*m->vals));
	if (!m->keys || !m->vals) {
		cfs_unique_map_destroy(m);
		return -ENOMEM;
	}
	return 0;
}

void cfs_unique_map_destroy(struct cfs_unique_map *m)
{
	free((void *)m->keys);
	free(m->vals);
	m->keys = NULL;
	m->vals = NULL;
}

size_t cfs_unique_map_slots(const struct cfs_unique_map *m)
{
	return m->keys ? (size_t)1 << m->bits : 0;
}

/* Uniques come in steps of 2 (the kernel's low bit marks interrupts):
 * Fibonacci hashing of unique / 2 spreads consecutive ones. */
static inline size_t slot_of(const struct cfs_unique_map *m, uint64_t unique)
{
	return (size_t)cfs_hash_spread(unique >> 1, m->bits);
}

void cfs_unique_map_insert(struct cfs_unique_map *m, uint64_t unique, void *val)
{
	size_t mask = ((size_t)1 << m->bits) - 1, s = slot_of(m, unique);

	for (size_t i = 0; i <= mask; i++, s = (s + 1) & mask) {
		uint64_t k = atomic_load_explicit(&m->keys[s], memory_order_relaxed);

		if ((k == SLOT_EMPTY || k == SLOT_TOMB) &&
		    atomic_compare_exchange_strong(&m->keys[s], &k, SLOT_CLAIMED)) {
			m->vals[s] = val;
			atomic_store_explicit(&m->keys[s], unique, memory_order_release);
			return;
		}
	}
	abort(); /* more values than the map was sized for */
}

void *cfs_unique_map_take(struct cfs_unique_map *m, uint64_t unique)
{
	size_t mask = ((size_t)1 << m->bits) - 1, s = slot_of(m, unique);

	for (size_t i = 0; i <= mask; i++, s = (s + 1) & mask) {
		uint64_t k = atomic_load_explicit(&m->keys[s], memory_order_acquire);

		if (k == unique) {
			void *val = m->vals[s];

			atomic_store_explicit(&m->keys[s], SLOT_TOMB, memory_order_release);
			return val;
		}
		if (k == SLOT_EMPTY)
			return NULL;
	}
	return NULL;
}
