/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_hash.c — unit tests of fs/base/hash.h: the intrusive table finds what
 * it holds through its growths, keeps items of equal hashes apart, removes
 * exactly the link asked for, visits every item once (also while removing
 * them), and aborts on a link it does not hold; cfs_hash_spread spreads
 * consecutive keys evenly.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#include "fs/base/hash.h"

struct item {
	uint64_t key;
	struct cfs_hlink link;
	unsigned seen;
};

static struct item *item_of(struct cfs_hlink *link)
{
	return cfs_container_of(link, struct item, link);
}

/* The item with key (hash = key), or NULL. */
static struct item *find(const struct cfs_htable *t, uint64_t key)
{
	for (struct cfs_hlink *l = cfs_htable_find(t, key); l; l = cfs_htable_find_next(l))
		if (item_of(l)->key == key)
			return item_of(l);
	return NULL;
}

static struct item *items_new(size_t n)
{
	struct item *items = calloc(n, sizeof(*items));

	cr_assert_not_null(items);
	for (size_t i = 0; i < n; i++)
		items[i].key = i * 7 + 1;
	return items;
}

Test(hash, empty_table_finds_nothing)
{
	struct cfs_htable t;

	cr_assert_eq(cfs_htable_init(&t, 3), 0);
	cr_assert_null(cfs_htable_find(&t, 0));
	cr_assert_null(cfs_htable_find(&t, 12345));
	cr_assert_null(cfs_htable_next(&t, NULL));
	cr_assert_eq(t.count, 0);
	cfs_htable_fini(&t);
	cr_assert_null(t.buckets);
}

Test(hash, finds_every_item_through_growth)
{
	enum { N = 20000 };
	struct item *items = items_new(N);
	struct cfs_htable t;

	cr_assert_eq(cfs_htable_init(&t, 3), 0);
	for (size_t i = 0; i < N; i++) {
		cfs_htable_insert(&t, &items[i].link, items[i].key);
		/* Never more items than buckets. */
		cr_assert_leq(t.count, 1ull << t.bits, "%llu items in %llu buckets",
			      (unsigned long long)t.count, 1ull << t.bits);
	}
	cr_assert_eq(t.count, N);
	cr_assert_eq(t.bits, 15, "8 buckets doubled to the first power of two >= %d: %u bits", N,
		     t.bits);
	for (size_t i = 0; i < N; i++)
		cr_assert_eq(find(&t, items[i].key), &items[i], "key %llu",
			     (unsigned long long)items[i].key);
	cr_assert_null(find(&t, 0));
	cr_assert_null(find(&t, 7 * N + 1));
	cfs_htable_fini(&t);
	free(items);
}

Test(hash, equal_hashes_stay_apart)
{
	struct item a = {.key = 1}, b = {.key = 2}, c = {.key = 3}, other = {.key = 4};
	struct cfs_htable t;
	unsigned found = 0;

	cr_assert_eq(cfs_htable_init(&t, 1), 0);
	/* a, b and c share one hash (three names colliding); other does not. */
	cfs_htable_insert(&t, &a.link, 99);
	cfs_htable_insert(&t, &other.link, 100);
	cfs_htable_insert(&t, &b.link, 99);
	cfs_htable_insert(&t, &c.link, 99);
	for (struct cfs_hlink *l = cfs_htable_find(&t, 99); l; l = cfs_htable_find_next(l)) {
		cr_assert_eq(l->hash, 99);
		found |= 1u << item_of(l)->key;
	}
	cr_assert_eq(found, (1u << 1) | (1u << 2) | (1u << 3));
	cfs_htable_remove(&t, &b.link);
	found = 0;
	for (struct cfs_hlink *l = cfs_htable_find(&t, 99); l; l = cfs_htable_find_next(l))
		found |= 1u << item_of(l)->key;
	cr_assert_eq(found, (1u << 1) | (1u << 3), "remove took exactly b");
	cr_assert_eq(item_of(cfs_htable_find(&t, 100)), &other);
	cr_assert_eq(t.count, 3);
	cfs_htable_fini(&t);
}

Test(hash, remove_takes_only_what_was_asked)
{
	enum { N = 5000 };
	struct item *items = items_new(N);
	struct cfs_htable t;

	cr_assert_eq(cfs_htable_init(&t, 4), 0);
	for (size_t i = 0; i < N; i++)
		cfs_htable_insert(&t, &items[i].link, items[i].key);
	for (size_t i = 0; i < N; i += 2)
		cfs_htable_remove(&t, &items[i].link);
	cr_assert_eq(t.count, N / 2);
	for (size_t i = 0; i < N; i++)
		cr_assert_eq(find(&t, items[i].key), i % 2 ? &items[i] : NULL, "key %llu",
			     (unsigned long long)items[i].key);
	/* Removed links can go back in. */
	for (size_t i = 0; i < N; i += 2)
		cfs_htable_insert(&t, &items[i].link, items[i].key);
	for (size_t i = 0; i < N; i++)
		cr_assert_eq(find(&t, items[i].key), &items[i]);
	cfs_htable_fini(&t);
	free(items);
}

Test(hash, iteration_visits_every_item_once)
{
	enum { N = 3000 };
	struct item *items = items_new(N);
	struct cfs_htable t;
	size_t visits = 0;

	cr_assert_eq(cfs_htable_init(&t, 2), 0);
	for (size_t i = 0; i < N; i++)
		cfs_htable_insert(&t, &items[i].link, i % 10 == 0 ? 42 : items[i].key);
	for (struct cfs_hlink *l = cfs_htable_next(&t, NULL); l; l = cfs_htable_next(&t, l)) {
		item_of(l)->seen++;
		visits++;
	}
	cr_assert_eq(visits, N);
	for (size_t i = 0; i < N; i++)
		cr_assert_eq(items[i].seen, 1, "item %zu seen %u times", i, items[i].seen);
	/* Removing the current item, having taken the next one first. */
	for (struct cfs_hlink *l = cfs_htable_next(&t, NULL), *next; l; l = next) {
		next = cfs_htable_next(&t, l);
		cfs_htable_remove(&t, l);
		item_of(l)->seen++;
	}
	cr_assert_eq(t.count, 0);
	cr_assert_null(cfs_htable_next(&t, NULL));
	for (size_t i = 0; i < N; i++)
		cr_assert_eq(items[i].seen, 2, "item %zu removed %u times", i, items[i].seen - 1);
	cfs_htable_fini(&t);
	free(items);
}

Test(hash, spread_of_consecutive_keys)
{
	enum { BITS = 10, N = 1 << BITS };
	unsigned load[N] = {0}, max = 0;

	for (uint64_t key = 1000; key < 1000 + N; key++) {
		uint64_t b = cfs_hash_spread(key, BITS);

		cr_assert_lt(b, N);
		load[b]++;
	}
	for (unsigned b = 0; b < N; b++)
		max = load[b] > max ? load[b] : max;
	/* Fibonacci hashing puts consecutive keys about 1/phi of the range
	 * apart: no bucket gets more than a few. */
	cr_assert_leq(max, 3, "a bucket holds %u of %d consecutive keys", max, N);
	cr_assert_eq(cfs_hash_spread(UINT64_MAX, 63) >> 63, 0, "63 bits: an index below 2^63");
}

Test(hash, removing_a_link_not_in_the_table_aborts, .signal = SIGABRT)
{
	struct item a = {.key = 1}, stranger = {.key = 2};
	struct cfs_htable t;

	cr_assert_eq(cfs_htable_init(&t, 1), 0);
	cfs_htable_insert(&t, &a.link, a.key);
	stranger.link.hash = a.key; /* its bucket's chain ends without it */
	cfs_htable_remove(&t, &stranger.link);
}

Test(hash, a_table_of_zero_bits_aborts, .signal = SIGABRT)
{
	struct cfs_htable t;

	cfs_htable_init(&t, 0);
}
