/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_pool.c — the stores of a pool (fs/meta/pool.c): one allocator per
 * store behind one unit space, names, the default store, and the checks that
 * assemble a pool from its sources (membership, foreign and missing stores,
 * routes).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "fs/meta/pool.h"

/* Store 0 of 100 units, store 1 (hdd0) of 50 units from unit 101, store 3
 * (hdd1) of 20 units from 200. */
static void make_sb0(struct cfs_sb *sb)
{
	const char *why = NULL;

	cfs_sb_init_defaults(sb);
	cr_assert_eq(cfs_sb_layout(sb, (100ull << 20) + (1ull << 20) + (4ull << 20), 0, 0, 0, &why),
		     0, "%s", why);
	cr_assert_eq(sb->data_unit_count, 100);
	cfs_uuid_generate(sb->uuid);
	cfs_sb_set_label(sb, "ssd0");
	sb->incompat = CFS_FEAT_INCOMPAT_POOL;
	memcpy(sb->pool_uuid, sb->uuid, CFS_UUID_BYTES);
	sb->store_count = 3;
	memcpy(sb->stores[0].uuid, sb->uuid, CFS_UUID_BYTES);
	sb->stores[0] = (struct cfs_store_entry){
		.index = 0, .state = CFS_STORE_ACTIVE, .unit_base = 0, .unit_count = 100};
	memcpy(sb->stores[0].uuid, sb->uuid, CFS_UUID_BYTES);
	strcpy(sb->stores[0].label, "ssd0");
	sb->stores[1] = (struct cfs_store_entry){
		.index = 1, .state = CFS_STORE_ACTIVE, .unit_base = 101, .unit_count = 50};
	cfs_uuid_generate(sb->stores[1].uuid);
	strcpy(sb->stores[1].label, "hdd0");
	sb->stores[2] = (struct cfs_store_entry){
		.index = 3, .state = CFS_STORE_REMOVING, .unit_base = 200, .unit_count = 20};
	cfs_uuid_generate(sb->stores[2].uuid);
	cr_assert_eq(cfs_sb_validate(sb, &why), 0, "%s", why);
}

Test(pool, allocators_per_store)
{
	struct cfs_pool *pool;
	struct cfs_alloc_stat st;
	struct cfs_sb sb;
	uint64_t first, count;

	make_sb0(&sb);
	cr_assert_eq(cfs_pool_create(&sb, NULL, 0, &pool), 0);
	cr_assert_eq(cfs_pool_count(pool), 3);
	cr_assert(cfs_pool_is_multi(pool));
	cr_assert_eq(cfs_pool_get(pool, 1, CFS_ALLOC_NO_HINT, 10, false, &first, &count), 0);
	cr_assert_eq(first, 101);
	cr_assert_eq(count, 10);
	/* A hint inside the store is used; one in another store is ignored. */
	cr_assert_eq(cfs_pool_get(pool, 1, 130, 5, false, &first, &count), 0);
	cr_assert_eq(first, 130);
	cr_assert_eq(cfs_pool_get(pool, 0, 130, 5, false, &first, &count), 0);
	cr_assert_lt(first, 100);
	/* All of store 1: what is left, then nothing. */
	cr_assert_eq(cfs_pool_get(pool, 1, CFS_ALLOC_NO_HINT, 100, false, &first, &count), 0);
	cr_assert_leq(first + count, 151);
	while (cfs_pool_get(pool, 1, CFS_ALLOC_NO_HINT, 100, false, &first, &count) == 0)
		cr_assert(first >= 101 && first + count <= 151);
	cr_assert_eq(cfs_pool_get(pool, 1, CFS_ALLOC_NO_HINT, 1, false, &first, &count), -ENOSPC);
	cr_assert_eq(cfs_pool_get(pool, 2, CFS_ALLOC_NO_HINT, 1, false, &first, &count), -ENOENT);
	/* Frees and reserves go to the store the units are in. */
	cfs_pool_free(pool, 101, 10, 0);
	cr_assert_eq(cfs_pool_unit_state(pool, 105), CFS_ALLOC_STATE_FREE);
	cr_assert_eq(cfs_pool_reserve(pool, 101, 2), 0);
	cr_assert_eq(cfs_pool_reserve(pool, 101, 2), -EEXIST);
	cr_assert_eq(cfs_pool_reserve(pool, 100, 1), -ERANGE); /* the gap */
	cr_assert_eq(cfs_pool_reserve(pool, 149, 3), -ERANGE); /* runs out of store 1 */
	cr_assert_eq(cfs_pool_unit_state(pool, 100), -ERANGE);
	cfs_pool_stat(pool, &st);
	cr_assert_eq(st.total_units, 170);
	cfs_pool_destroy(pool);
}

/* Space held back for the kernel's write-back: each store keeps it (at most
 * a quarter of the store) above what has_room grants; avail leaves it out. */
Test(pool, space_held_back_for_write_back)
{
	struct cfs_pool *pool;
	struct cfs_sb sb;
	uint64_t first, count;

	make_sb0(&sb);
	cr_assert_eq(cfs_pool_create(&sb, NULL, 0, &pool), 0);
	cr_assert(cfs_pool_has_room(pool, 0, 100)); /* nothing held back */
	cr_assert_eq(cfs_pool_avail_units(pool), 170);
	cfs_pool_set_held_back(pool, 10);
	/* 10 of store 0 (100), 10 of store 1 (50), 5 of store 3 (a quarter of 20) */
	cr_assert_eq(cfs_pool_avail_units(pool), 90 + 40 + 15);
	cr_assert(cfs_pool_has_room(pool, 0, 90));
	cr_assert_not(cfs_pool_has_room(pool, 0, 91));
	cr_assert(cfs_pool_has_room(pool, 3, 15));
	cr_assert_not(cfs_pool_has_room(pool, 3, 16));
	cr_assert(cfs_pool_has_room(pool, 2, 1)); /* no such store: the allocator says */
	/* Other allocations stop at the held-back units, in the same step as
	 * the check; the kernel's write-back takes them. */
	cr_assert_eq(cfs_pool_get(pool, 1, CFS_ALLOC_NO_HINT, 41, false, &first, &count), -ENOSPC);
	cr_assert_eq(cfs_pool_get(pool, 1, CFS_ALLOC_NO_HINT, 40, false, &first, &count), 0);
	cr_assert_eq(count, 40);
	cr_assert_not(cfs_pool_has_room(pool, 1, 1));
	cr_assert_eq(cfs_pool_get(pool, 1, CFS_ALLOC_NO_HINT, 1, false, &first, &count), -ENOSPC);
	cr_assert_eq(cfs_pool_avail_units(pool), 90 + 0 + 15);
	cr_assert_eq(cfs_pool_get(pool, 1, CFS_ALLOC_NO_HINT, 5, true, &first, &count), 0);
	cr_assert_eq(cfs_pool_avail_units(pool), 90 + 0 + 15);
	cfs_pool_free(pool, first, count, 0);
	cr_assert_not(cfs_pool_has_room(pool, 1, 1)); /* 10 free, 10 held back */
	cfs_pool_set_held_back(pool, 0);
	cr_assert(cfs_pool_has_room(pool, 1, 10));
	cr_assert_eq(cfs_pool_get(pool, 1, CFS_ALLOC_NO_HINT, 10, false, &first, &count), 0);
	cfs_pool_destroy(pool);
}

static uint64_t discarded[8][2];
static int discards;

static void discard(void *arg, uint64_t first, uint64_t count)
{
	(void)arg;
	discarded[discards][0] = first;
	discarded[discards][1] = count;
	discards++;
}

/* A pool whose units 201-202 (store 3) were freed by the record of seq 7. */
static struct cfs_pool *pool_with_busy_units(void)
{
	struct cfs_pool *pool;
	struct cfs_sb sb;
	uint64_t first, count;

	make_sb0(&sb);
	cr_assert_eq(cfs_pool_create(&sb, NULL, 0, &pool), 0);
	cr_assert_eq(cfs_pool_get(pool, 3, CFS_ALLOC_NO_HINT, 4, false, &first, &count), 0);
	cr_assert_eq(first, 200);
	cfs_pool_free(pool, 201, 2, 7);
	return pool;
}

Test(pool, busy_units_come_back_as_pool_units)
{
	struct cfs_pool *pool = pool_with_busy_units();

	cr_assert_eq(cfs_pool_unit_state(pool, 201), CFS_ALLOC_STATE_BUSY);
	discards = 0;
	cr_assert_eq(cfs_pool_commit_done(pool, 6, true), 0);
	cr_assert_eq(cfs_pool_commit_done(pool, 7, true), 2);
	cr_assert_eq(discards, 0); /* queued: the commit does not wait for it */
	cr_assert_eq(cfs_pool_discard_some(pool, 64, discard, NULL), 0);
	cr_assert_eq(discards, 1);
	cr_assert_eq(discarded[0][0], 201);
	cr_assert_eq(discarded[0][1], 2);
	cr_assert_eq(cfs_pool_unit_state(pool, 202), CFS_ALLOC_STATE_FREE);
	cfs_pool_destroy(pool);
}

Test(pool, held_discards_wait_and_their_units_stay_free)
{
	struct cfs_pool *pool = pool_with_busy_units();

	cr_assert_eq(cfs_pool_commit_done(pool, 7, true), 2);
	discards = 0;
	cfs_pool_hold_discards(pool);
	cfs_pool_hold_discards(pool); /* two holders */
	/* Nothing discarded, nothing said to be left (the committer would spin). */
	cr_assert_eq(cfs_pool_discard_some(pool, 64, discard, NULL), 0);
	cr_assert_eq(discards, 0);
	cr_assert_eq(cfs_pool_unit_state(pool, 201), CFS_ALLOC_STATE_FREE);
	cfs_pool_release_discards(pool);
	cr_assert_eq(cfs_pool_discard_some(pool, 64, discard, NULL), 0);
	cr_assert_eq(discards, 0);
	cfs_pool_release_discards(pool);
	cr_assert_eq(cfs_pool_discard_some(pool, 64, discard, NULL), 0);
	cr_assert_eq(discards, 1);
	cr_assert_eq(discarded[0][0], 201);
	cr_assert_eq(discarded[0][1], 2);
	cfs_pool_destroy(pool);
}

Test(pool, names_states_and_the_default)
{
	struct cfs_pool_store_info info;
	struct cfs_pool *pool;
	struct cfs_sb sb;
	uint64_t first, count;
	char name[80];

	make_sb0(&sb);
	cr_assert_eq(cfs_pool_create(&sb, NULL, 0, &pool), 0);
	cr_assert_eq(cfs_pool_find(pool, "hdd0", 4), 1);
	cr_assert_eq(cfs_pool_find(pool, "hdd", 3), CFS_STORE_NONE);
	cr_assert_eq(cfs_pool_find(pool, "3", 1), 3);
	cr_assert_eq(cfs_pool_find(pool, "2", 1), CFS_STORE_NONE);
	cfs_pool_store_name(pool, 3, name, sizeof(name));
	cr_assert_str_eq(name, "3"); /* no label: its index */
	cr_assert_eq(cfs_pool_store_state(pool, 3), CFS_STORE_REMOVING);
	cr_assert_eq(cfs_pool_store_of(pool, 150), 1);
	cr_assert_eq(cfs_pool_store_of(pool, 151), CFS_STORE_NONE);
	/* The default: the active store with the most free units (store 0,
	 * 100 units; never the removing one), until one is chosen. */
	cr_assert_eq(cfs_pool_default_store(pool), 0);
	cr_assert_eq(cfs_pool_get(pool, 0, CFS_ALLOC_NO_HINT, 80, false, &first, &count), 0);
	cr_assert_eq(cfs_pool_default_store(pool), 1);
	cfs_pool_set_default(pool, 0);
	cr_assert_eq(cfs_pool_default_store(pool), 0);
	cfs_pool_set_default(pool, 3); /* removing: not a default */
	cr_assert_eq(cfs_pool_default_store(pool), 1);
	cr_assert_eq(cfs_pool_store_info(pool, 1, &info), 0);
	cr_assert_str_eq(info.label, "hdd0");
	cr_assert_eq(info.unit_base, 101);
	cr_assert_eq(info.space.free_units, 50);
	cfs_pool_destroy(pool);
}

Test(pool, a_store_is_a_pool_of_one)
{
	struct cfs_pool *pool;
	struct cfs_sb sb;
	uint64_t first, count;
	const char *why;

	cfs_sb_init_defaults(&sb);
	cr_assert_eq(cfs_sb_layout(&sb, 64ull << 20, 0, 0, 0, &why), 0);
	cfs_sb_set_label(&sb, "rootdbs");
	cr_assert_eq(cfs_pool_create(&sb, NULL, 0, &pool), 0);
	cr_assert_eq(cfs_pool_count(pool), 1);
	cr_assert_not(cfs_pool_is_multi(pool));
	cr_assert_eq(cfs_pool_find(pool, "rootdbs", 7), 0);
	cr_assert_eq(cfs_pool_get(pool, 0, CFS_ALLOC_NO_HINT, 3, false, &first, &count), 0);
	cr_assert_eq(first, 0);
	cfs_pool_destroy(pool);
}

/* ---- assembling ---------------------------------------------------------------- */

static void data_sb(const struct cfs_sb *s0, unsigned entry, struct cfs_sb *sb)
{
	const char *why = NULL;
	const struct cfs_store_entry *e = &s0->stores[entry];

	cfs_sb_init_defaults(sb);
	cr_assert_eq(cfs_sb_layout_data_store(sb, (e->unit_count + 1) << 20, 0, 0, &why), 0);
	sb->data_unit_count = e->unit_count;
	sb->data_size_bytes = e->unit_count << 20;
	memcpy(sb->uuid, e->uuid, CFS_UUID_BYTES);
	sb->incompat = CFS_FEAT_INCOMPAT_POOL;
	memcpy(sb->pool_uuid, s0->uuid, CFS_UUID_BYTES);
	sb->store_index = e->index;
	sb->unit_base = e->unit_base;
	cr_assert_eq(cfs_sb_validate(sb, &why), 0, "%s", why);
}

Test(pool, check_membership)
{
	static struct cfs_pool_source src[4];
	struct cfs_io_route routes[CFS_IO_ROUTES_MAX];
	char err[512];
	unsigned zero = 9, n;

	src[0].path = "d1";
	src[1].path = "s0";
	src[2].path = "d3";
	src[3].path = "x";

	make_sb0(&src[1].sb);
	data_sb(&src[1].sb, 1, &src[0].sb);
	data_sb(&src[1].sb, 2, &src[2].sb);
	cr_assert_eq(cfs_pool_check(src, 3, &zero, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(zero, 1);
	/* A store missing: named. */
	cr_assert_eq(cfs_pool_check(src, 2, &zero, err, sizeof(err)), -ENOENT);
	cr_assert_not_null(strstr(err, "index 3"), "%s", err);
	/* Store 0 missing. */
	cr_assert_eq(cfs_pool_check(src, 1, &zero, err, sizeof(err)), -ENOENT);
	cr_assert_not_null(strstr(err, "the store holding its metadata"), "%s", err);
	/* A store of another pool. */
	src[3].sb = src[2].sb;
	cfs_uuid_generate(src[3].sb.pool_uuid);
	cr_assert_eq(cfs_pool_check(src, 4, &zero, err, sizeof(err)), -EINVAL);
	cr_assert_not_null(strstr(err, "x: a store of another pool"), "%s", err);
	/* The same store twice. */
	src[3].sb = src[2].sb;
	cr_assert_eq(cfs_pool_check(src, 4, &zero, err, sizeof(err)), -EINVAL);
	cr_assert_not_null(strstr(err, "given twice"), "%s", err);
	/* A table entry that disagrees with the store's own superblock. */
	src[2].sb.unit_base++;
	cr_assert_eq(cfs_pool_check(src, 3, &zero, err, sizeof(err)), -EINVAL);
	cr_assert_not_null(strstr(err, "does not match"), "%s", err);
	src[2].sb.unit_base--;
	/* Routes: store 0 whole, each data store at its units, and every
	 * store's superblock window. */
	src[0].io_store = 1;
	src[1].io_store = 0;
	src[2].io_store = 2;
	n = cfs_pool_routes(src, 3, 1, routes);
	cr_assert_eq(n, 6);
	cr_assert_eq(routes[0].pool_offset_bytes, 0);
	cr_assert_eq(routes[0].length_bytes, src[1].sb.store_size_bytes);
	for (unsigned i = 1; i < n; i++) {
		if (routes[i].store == 1 && routes[i].pool_offset_bytes < CFS_POOL_RAW_BASE) {
			cr_assert_eq(routes[i].pool_offset_bytes,
				     src[1].sb.data_offset_bytes + 101 * (1ull << 20));
			cr_assert_eq(routes[i].length_bytes, 50ull << 20);
			cr_assert_eq(routes[i].store_offset_bytes, src[0].sb.data_offset_bytes);
		}
	}
}

Test(pool, a_single_store_with_a_stranger_is_refused)
{
	static struct cfs_pool_source src[2];
	char err[512];
	unsigned zero;
	const char *why;

	src[0].path = "a";
	src[1].path = "b";
	for (int i = 0; i < 2; i++) {
		cfs_sb_init_defaults(&src[i].sb);
		cr_assert_eq(cfs_sb_layout(&src[i].sb, 64ull << 20, 0, 0, 0, &why), 0);
		cfs_uuid_generate(src[i].sb.uuid);
	}
	cr_assert_eq(cfs_pool_check(src, 1, &zero, err, sizeof(err)), 0);
	cr_assert_eq(cfs_pool_check(src, 2, &zero, err, sizeof(err)), -EINVAL);
	cr_assert_not_null(strstr(err, "two separate stores"), "%s", err);
}

Test(pool, stores_added_and_dropped_while_mounted)
{
	struct cfs_store_entry e = {.index = 4, .unit_base = 300, .unit_count = 10};
	struct cfs_pool_store_info info;
	struct cfs_pool *pool;
	struct cfs_sb sb;
	uint64_t first, count;

	make_sb0(&sb);
	cr_assert_eq(cfs_pool_create(&sb, NULL, 0, &pool), 0);
	/* Without sources only store 0's size is known. */
	cr_assert_eq(cfs_pool_size_bytes(pool), sb.store_size_bytes);
	cfs_uuid_generate(e.uuid);
	strcpy(e.label, "new0");
	cr_assert_eq(cfs_pool_add_store(pool, &e, CFS_STORE_JOINING, 7, 1u << 20, "/x"), 0);
	cr_assert_eq(cfs_pool_count(pool), 4);
	cr_assert_eq(cfs_pool_size_bytes(pool), sb.store_size_bytes + (1u << 20));
	/* Listed in index order, with its cfs_io store. */
	cr_assert_eq(cfs_pool_store_at(pool, 3, &info), 0);
	cr_assert_eq(info.index, 4);
	cr_assert_eq(info.io_store, 7);
	cr_assert_eq(info.state, CFS_STORE_JOINING);
	cr_assert_str_eq(info.source, "/x");
	/* Joining: never the default, never given by placement. */
	cr_assert_neq(cfs_pool_default_store(pool), 4);
	cr_assert_eq(cfs_pool_find(pool, "new0", 4), 4);
	/* Taken: index, uuid, label, or units touching another store's. */
	e.index = 1;
	cr_assert_eq(cfs_pool_add_store(pool, &e, CFS_STORE_ACTIVE, 8, 0, NULL), -EEXIST);
	e.index = 5;
	cr_assert_eq(cfs_pool_add_store(pool, &e, CFS_STORE_ACTIVE, 8, 0, NULL), -EEXIST);
	cfs_uuid_generate(e.uuid);
	cr_assert_eq(cfs_pool_add_store(pool, &e, CFS_STORE_ACTIVE, 8, 0, NULL), -EEXIST);
	strcpy(e.label, "new1");
	e.unit_base = 310; /* right after new0's last unit: touching */
	cr_assert_eq(cfs_pool_add_store(pool, &e, CFS_STORE_ACTIVE, 8, 0, NULL), -EEXIST);
	cr_assert_eq(cfs_pool_count(pool), 4);
	/* Active: its units are pool units like any other. */
	cr_assert_eq(cfs_pool_set_state(pool, 4, CFS_STORE_ACTIVE), 0);
	cr_assert_eq(cfs_pool_set_state(pool, 9, CFS_STORE_ACTIVE), -ENOENT);
	cr_assert_eq(cfs_pool_get(pool, 4, CFS_ALLOC_NO_HINT, 3, false, &first, &count), 0);
	cr_assert_eq(first, 300);
	cr_assert_eq(cfs_pool_store_of(pool, 302), 4);
	/* Dropped only when none of its units is used or busy; never store 0. */
	cr_assert_eq(cfs_pool_drop_store(pool, 4), -EBUSY);
	cfs_pool_free(pool, 300, 3, 5);
	cr_assert_eq(cfs_pool_drop_store(pool, 4), -EBUSY); /* busy until durable */
	cfs_pool_commit_done(pool, 5, false);
	cfs_pool_set_default(pool, 4);
	cr_assert_eq(cfs_pool_drop_store(pool, 4), 0);
	cr_assert_eq(cfs_pool_size_bytes(pool), sb.store_size_bytes);
	cr_assert_eq(cfs_pool_drop_store(pool, 4), -ENOENT);
	cr_assert_eq(cfs_pool_drop_store(pool, 0), -EINVAL);
	cr_assert_eq(cfs_pool_count(pool), 3);
	cr_assert_eq(cfs_pool_store_of(pool, 302), CFS_STORE_NONE);
	cr_assert_eq(cfs_pool_find(pool, "new0", 4), CFS_STORE_NONE);
	cr_assert_neq(cfs_pool_default_store(pool), 4);
	cfs_pool_destroy(pool);
}
