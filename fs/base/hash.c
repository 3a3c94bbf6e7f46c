/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * hash.c — the intrusive hash table of fs/base/hash.h.
 */
#include <errno.h>
#include <stdlib.h>

#include "fs/base/hash.h"

int cfs_htable_init(struct cfs_htable *t, unsigned bits)
{
	CFS_ASSERT(bits >= 1 && bits <= 40);
	t->bits = bits;
	t->count = 0;
	t->buckets = calloc((size_t)1 << bits, sizeof(*t->buckets));
	return t->buckets ? 0 : -ENOMEM;
}

void cfs_htable_fini(struct cfs_htable *t)
{
	free(t->buckets);
	t->buckets = NULL;
	t->count = 0;
}

/* Double the buckets, moving every chain in bucket order. Without memory
 * the table stays as it is. */
static void grow(struct cfs_htable *t)
{
	unsigned bits = t->bits + 1;
	struct cfs_hlink **buckets;

	if (bits > 63)
		return;
	buckets = calloc((size_t)1 << bits, sizeof(*buckets));
	if (!buckets)
		return; /* longer chains; still correct */
	for (uint64_t b = 0; b < (1ull << t->bits); b++) {
		struct cfs_hlink *link = t->buckets[b];

		while (link) {
			struct cfs_hlink *next = link->next;
			uint64_t to = cfs_hash_spread(link->hash, bits);

			link->next = buckets[to];
			buckets[to] = link;
			link = next;
		}
	}
	free(t->buckets);
	t->buckets = buckets;
	t->bits = bits;
}

void cfs_htable_insert(struct cfs_htable *t, struct cfs_hlink *link, uint64_t hash)
{
	uint64_t b;

	if (t->count >= (1ull << t->bits))
		grow(t);
	b = cfs_hash_spread(hash, t->bits);
	link->hash = hash;
	link->next = t->buckets[b];
	t->buckets[b] = link;
	t->count++;
}

void cfs_htable_remove(struct cfs_htable *t, struct cfs_hlink *link)
{
	struct cfs_hlink **at = &t->buckets[cfs_hash_spread(link->hash, t->bits)];

	while (*at != link) {
		CFS_ASSERT(*at);
		at = &(*at)->next;
	}
	*at = link->next;
	link->next = NULL;
	t->count--;
}

struct cfs_hlink *cfs_htable_next(const struct cfs_htable *t, const struct cfs_hlink *link)
{
	uint64_t b = 0;

	if (link) {
		if (link->next)
			return link->next;
		b = cfs_hash_spread(link->hash, t->bits) + 1;
	}
	for (; b < (1ull << t->bits); b++)
		if (t->buckets[b])
			return t->buckets[b];
	return NULL;
}
