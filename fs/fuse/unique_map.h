/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * unique_map.h — FUSE request unique -> pointer, lock-free, fixed size.
 *
 * FUSE over io_uring (fs/fuse/transport_uring.c) records which ring entry holds
 * each request while libfuse handles it, so that the reply, made by any
 * thread through libfuse's writev hook, finds its entry. One insert per
 * request (the entry's loop), one take per reply (any thread); a unique is
 * inserted once and taken once.
 *
 * Open addressing with linear probing over atomics; no lock, no allocation
 * after init. The map is sized at init for the most values that can be in it
 * at once (one per ring entry) with at least twice as many slots, so a probe
 * stays short and an insert always finds a slot. (Not fs/base/hash.h's
 * table: that one is chained, grows, and wants its writers under a lock; a
 * chained table taken from by any thread without one would need a lock-free
 * list. The two share cfs_hash_spread.)
 *
 * Keys 0, UINT64_MAX and UINT64_MAX - 1 are reserved (FUSE never uses them
 * for a request that is answered).
 */
#ifndef CFS_UNIQUE_MAP_H
#define CFS_UNIQUE_MAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define CFS_UNIQUE_MAP_MIN_BITS 12u /* 4096 slots at least */

struct cfs_unique_map {
	_Atomic uint64_t *keys;
	void **vals;
	unsigned bits; /* 1 << bits slots */
};

/* Room for max_values at once. 0 or -ENOMEM (-EINVAL past 2^30 values). */
int cfs_unique_map_init(struct cfs_unique_map *m, size_t max_values);
void cfs_unique_map_destroy(struct cfs_unique_map *m);
size_t cfs_unique_map_slots(const struct cfs_unique_map *m);

/* Record unique -> val. More values than init allowed for aborts: a caller
 * bug, never a load condition. */
void cfs_unique_map_insert(struct cfs_unique_map *m, uint64_t unique, void *val);

/* Remove and return the value of unique; NULL when it is not in the map. */
void *cfs_unique_map_take(struct cfs_unique_map *m, uint64_t unique);

#endif /* CFS_UNIQUE_MAP_H */
