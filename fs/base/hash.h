/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * hash.h — a small intrusive hash table (chained, growing) and the key
 * spreading every table of the tree uses.
 *
 * The item embeds a struct cfs_hlink and is found again with
 * cfs_container_of(); the table owns only its bucket array, never the items.
 * Each link carries its 64-bit hash: a lookup compares hashes before it
 * compares keys, and a growth rehashes without calling back. The table
 * spreads the hash itself (cfs_hash_spread), so a sequential key such as an
 * inode number is a fine hash as it is.
 *
 * It grows (doubles) before an insert would put more items than buckets in
 * it; if the larger array cannot be allocated it keeps the one it has and
 * its chains grow longer: still correct, and no insert ever fails. Not
 * thread-safe: the caller holds whatever lock guards the items (namespace.c:
 * ns_lock for the inode table and every directory's names).
 *
 * Why fs/fuse/unique_map.h is not one of these: its insert and take run on
 * any thread without a lock and allocate nothing after setup, which a chained
 * table cannot do without a lock-free list; it is open addressing over
 * atomics instead, and shares the spreading.
 */
#ifndef CFS_BASE_HASH_H
#define CFS_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "fs/base/assert.h"

#define cfs_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Fibonacci hashing: the top `bits` bits of key times 2^64 / phi, an index
 * in [0, 2^bits). Consecutive keys land far apart. bits in [1, 63]. */
static inline uint64_t cfs_hash_spread(uint64_t key, unsigned bits)
{
	return (key * 0x9E3779B97F4A7C15ull) >> (64 - bits);
}

struct cfs_hlink {
	struct cfs_hlink *next; /* in its bucket's chain */
	uint64_t hash;
};

struct cfs_htable {
	struct cfs_hlink **buckets;
	unsigned bits;	/* 1 << bits buckets */
	uint64_t count; /* items in the table */
};

/* An empty table of 1 << bits buckets (bits in [1, 40]). 0 or -ENOMEM. */
int cfs_htable_init(struct cfs_htable *t, unsigned bits);
/* Free the bucket array (the items are the caller's). */
void cfs_htable_fini(struct cfs_htable *t);

/* Add link with hash (the same hash may be in the table many times). */
void cfs_htable_insert(struct cfs_htable *t, struct cfs_hlink *link, uint64_t hash);
/* Take link out; it must be in the table. */
void cfs_htable_remove(struct cfs_htable *t, struct cfs_hlink *link);

static inline struct cfs_hlink *cfs_hlink_match(struct cfs_hlink *link, uint64_t hash)
{
	while (link && link->hash != hash)
		link = link->next;
	return link;
}

/* The first item with this hash, or NULL; the next one with
 * cfs_htable_find_next(). The caller compares its keys. */
static inline struct cfs_hlink *cfs_htable_find(const struct cfs_htable *t, uint64_t hash)
{
	return cfs_hlink_match(t->buckets[cfs_hash_spread(hash, t->bits)], hash);
}

static inline struct cfs_hlink *cfs_htable_find_next(const struct cfs_hlink *link)
{
	return cfs_hlink_match(link->next, link->hash);
}

/* Every item once, bucket by bucket: start with NULL, continue with the
 * item returned. To remove or free the current item, take the next one
 * first; nothing else may be inserted or removed meanwhile. */
struct cfs_hlink *cfs_htable_next(const struct cfs_htable *t, const struct cfs_hlink *link);

#endif /* CFS_BASE_HASH_H */
