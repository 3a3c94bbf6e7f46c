/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_extent_nomem.c — the extent map when memory runs out: an unmap that
 * needs new leaves and cannot get them says -ENOMEM and changes nothing
 * (every unit still maps where it did, nothing reported as unmapped), and
 * the same unmap works once memory is back; unmapping a whole file needs no
 * memory at all. Linked with -Wl,--wrap=malloc,--wrap=calloc (Makefile), so
 * the allocations of fs/meta/extent.c come here and fail while `failing`.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "fs/meta/extent.h"

#define UNIT (64u * 1024)
#define DATA0 (1u << 20)
#define RUNS 40u /* file unit i maps store unit 10 * i: one run each */

void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t count, size_t size);

static atomic_bool failing;
static atomic_uint refused;

void *__wrap_malloc(size_t size)
{
	if (atomic_load(&failing)) {
		atomic_fetch_add(&refused, 1);
		return NULL;
	}
	return __real_malloc(size);
}

void *__wrap_calloc(size_t count, size_t size)
{
	if (atomic_load(&failing)) {
		atomic_fetch_add(&refused, 1);
		return NULL;
	}
	return __real_calloc(count, size);
}

static struct cfs_extent_geom geom;
static struct cfs_extent_map *map;

static void notify(void *arg)
{
	(void)arg;
}

static void setup(void)
{
	cr_assert_eq(cfs_extent_geom_init(&geom, UNIT, 512, 4096, DATA0), 0);
	cr_assert_eq(cfs_extent_map_create(&geom, notify, NULL, &map), 0);
	for (uint64_t i = 0; i < RUNS; i++)
		cr_assert_eq(cfs_extent_map_units(map, i, 10 * i, 1), 0);
}

static void teardown(void)
{
	atomic_store(&failing, false);
	cfs_extent_quiesce(map);
	cfs_extent_map_destroy(map);
}

static void count_unmapped(void *arg, uint64_t file_unit, uint64_t store_unit, uint64_t count,
			   uint32_t piece_offset_bytes, uint32_t piece_bytes)
{
	*(uint64_t *)arg += count;
}

static void assert_all_mapped(void)
{
	for (uint64_t i = 0; i < RUNS; i++)
		cr_assert_eq(cfs_extent_unit_get(map, i), (int64_t)(10 * i), "unit %lu",
			     (unsigned long)i);
	cr_assert_eq(cfs_extent_mapped_units(map), RUNS);
}

Test(extent_nomem, punch_fails_whole, .init = setup, .fini = teardown)
{
	uint64_t reported = 0;

	atomic_store(&failing, true);
	cr_assert_eq(cfs_extent_unmap(map, 5, 3, count_unmapped, &reported), -ENOMEM);
	atomic_store(&failing, false);
	cr_assert_gt(atomic_load(&refused), 0,
		     "the unmap allocated nothing: the test tests nothing");
	cr_assert_eq(reported, 0);
	assert_all_mapped();
	cr_assert_eq(cfs_extent_unmap(map, 5, 3, count_unmapped, &reported), 3);
	cr_assert_eq(reported, 3);
	cr_assert_eq(cfs_extent_unit_get(map, 5), -1);
	cr_assert_eq(cfs_extent_unit_get(map, 8), 80);
}

Test(extent_nomem, truncate_fails_whole, .init = setup, .fini = teardown)
{
	uint64_t reported = 0;

	atomic_store(&failing, true);
	cr_assert_eq(cfs_extent_unmap(map, 10, UINT64_MAX, count_unmapped, &reported), -ENOMEM);
	atomic_store(&failing, false);
	cr_assert_eq(reported, 0);
	assert_all_mapped();
}

Test(extent_nomem, delete_needs_no_memory, .init = setup, .fini = teardown)
{
	uint64_t reported = 0;

	atomic_store(&failing, true);
	cr_assert_eq(cfs_extent_unmap(map, 0, UINT64_MAX, count_unmapped, &reported), RUNS);
	atomic_store(&failing, false);
	cr_assert_eq(reported, RUNS);
	cr_assert_eq(cfs_extent_mapped_units(map), 0);
}
