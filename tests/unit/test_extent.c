/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_extent.c — the per-file map: geometry, runs, written-state
 * transitions (NONE / bitmap / ALL), unwritten marking, unmapping, dirty
 * collection, replay application, SEEK_DATA/SEEK_HOLE, and concurrent
 * mark_written from several threads (also against a concurrent clearer).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fs/meta/extent.h"

#define UNIT	(64u * 1024)
#define SECTOR	512u
#define SPU	(UNIT / SECTOR)		/* 128 sectors per unit */
#define DATA0	(1u << 20)		/* data region offset */

static struct cfs_extent_geom geom;
static struct cfs_extent_map *map;
static atomic_int notified;

static void notify(void *arg)
{
	(void)arg;
	atomic_fetch_add(&notified, 1);
}

static void setup(void)
{
	cr_assert_eq(cfs_extent_geom_init(&geom, UNIT, SECTOR, 4096, DATA0), 0);
	cr_assert_eq(cfs_extent_map_create(&geom, notify, NULL, &map), 0);
	atomic_store(&notified, 0);
}

static void teardown(void)
{
	cfs_extent_quiesce(map);
	cfs_extent_map_destroy(map);
}

static uint64_t dev(uint64_t store_unit, uint64_t in_unit)
{
	return DATA0 + store_unit * UNIT + in_unit;
}

Test(extent, geom)
{
	struct cfs_extent_geom g;

	cr_assert_eq(cfs_extent_geom_init(&g, UNIT, SECTOR, 4096, 0), 0);
	cr_assert_eq(g.sectors_per_unit, SPU);
	cr_assert_geq(g.max_units, 2 * 4096);
	cr_assert_eq(g.max_units, 8192);
	cr_assert_eq(cfs_extent_geom_init(&g, 1u << 20, 512, 16ull << 20, 0), 0);
	cr_assert_eq(g.max_units, 32ull << 20);
	/* The earlier table's rounding: a multiple of its leaf (64..65536). */
	cr_assert_eq(cfs_extent_geom_init(&g, 4096, 512, 1000, 0), 0);
	cr_assert_eq(g.max_units, 2048);
	cr_assert_eq(cfs_extent_geom_init(&g, 3000, 512, 10, 0), -EINVAL);
	cr_assert_eq(cfs_extent_geom_init(&g, 4096, 8192, 10, 0), -EINVAL);
	cr_assert_eq(cfs_extent_geom_init(&g, 1u << 30, 256, 10, 0), -EINVAL);
	cr_assert_eq(cfs_extent_geom_init(&g, 4096, 512, 0, 0), -EINVAL);
	cr_assert_eq(cfs_extent_geom_init(&g, 4096, 512, 1, 0), 0);
	cr_assert_eq(g.max_units, 64);
}

Test(extent, empty_map_is_one_hole, .init = setup, .fini = teardown)
{
	struct cfs_extent_run run;
	bool written = true;

	cr_assert_eq(cfs_extent_lookup(map, 12345, 1ull << 40, &run), 0);
	cr_assert_not(run.mapped);
	cr_assert_eq(run.length_bytes, 1ull << 40);
	cr_assert_eq(cfs_extent_lookup(map, 0, 0, &run), -EINVAL);
	cr_assert_eq(cfs_extent_written_span(map, 100, 5000, &written), 5000);
	cr_assert_not(written);
	cr_assert_eq(cfs_extent_mapped_units(map), 0);
	cr_assert_eq(cfs_extent_unit_get(map, 3), -1);
	/* Far beyond the largest file: still a hole, never an error. */
	cr_assert_eq(cfs_extent_lookup(map, geom.max_units * UNIT + 7, 10, &run), 0);
	cr_assert_not(run.mapped);
}

Test(extent, runs, .init = setup, .fini = teardown)
{
	struct cfs_extent_run run;

	/* file units 2,3,4 -> store 10,11,12; 5 -> 20; 7 -> 21 */
	cr_assert_eq(cfs_extent_map_units(map, 2, 10, 3), 0);
	cr_assert_eq(cfs_extent_map_units(map, 5, 20, 1), 0);
	cr_assert_eq(cfs_extent_map_units(map, 7, 21, 1), 0);
	cr_assert_eq(cfs_extent_mapped_units(map), 5);

	cr_assert_eq(cfs_extent_lookup(map, 100, 10 * UNIT, &run), 0);
	cr_assert_not(run.mapped);
	cr_assert_eq(run.length_bytes, 2 * UNIT - 100);

	cr_assert_eq(cfs_extent_lookup(map, 2 * UNIT + 512, 10 * UNIT, &run), 0);
	cr_assert(run.mapped);
	cr_assert_eq(run.store_unit, 10);
	cr_assert_eq(run.device_offset_bytes, dev(10, 512));
	cr_assert_eq(run.length_bytes, 3 * UNIT - 512); /* stops at store 20 */

	cr_assert_eq(cfs_extent_lookup(map, 5 * UNIT, UNIT + 1, &run), 0);
	cr_assert_eq(run.store_unit, 20);
	cr_assert_eq(run.length_bytes, UNIT);

	cr_assert_eq(cfs_extent_lookup(map, 6 * UNIT, 100 * UNIT, &run), 0);
	cr_assert_not(run.mapped);
	cr_assert_eq(run.length_bytes, UNIT);

	/* Clamped by the requested length. */
	cr_assert_eq(cfs_extent_lookup(map, 2 * UNIT, 10, &run), 0);
	cr_assert_eq(run.length_bytes, 10);
}

Test(extent, map_errors, .init = setup, .fini = teardown)
{
	cr_assert_eq(cfs_extent_map_units(map, 0, 0, 2), 0);
	cr_assert_eq(cfs_extent_map_units(map, 1, 5, 1), -EEXIST);
	/* Same mapping again: a no-op (replay over a snapshot). */
	cr_assert_eq(cfs_extent_map_units(map, 0, 0, 2), 0);
	cr_assert_eq(cfs_extent_mapped_units(map), 2);
	cr_assert_eq(cfs_extent_map_units(map, geom.max_units, 0, 1), -EFBIG);
	cr_assert_eq(cfs_extent_map_units(map, 10, 4095, 2), -ERANGE);
	cr_assert_eq(cfs_extent_map_units(map, 10, 4095, 1), 0);
}

Test(extent, written_transitions, .init = setup, .fini = teardown)
{
	bool w;

	cr_assert_eq(cfs_extent_map_units(map, 0, 3, 1), 0);
	cr_assert_not(cfs_extent_sector_written(map, 0));
	/* Partial: a bitmap. */
	cr_assert_eq(cfs_extent_mark_written(map, 4096, 8192, dev(3, 4096)), 0);
	cr_assert_not(cfs_extent_sector_written(map, 4095));
	cr_assert(cfs_extent_sector_written(map, 4096));
	cr_assert(cfs_extent_sector_written(map, 12287));
	cr_assert_not(cfs_extent_sector_written(map, 12288));
	cr_assert_eq(cfs_extent_written_span(map, 0, UNIT, &w), 4096);
	cr_assert_not(w);
	cr_assert_eq(cfs_extent_written_span(map, 5000, UNIT, &w), 12288 - 5000);
	cr_assert(w);
	/* Fill it up: ALL. */
	cr_assert_eq(cfs_extent_mark_written(map, 0, 4096, dev(3, 0)), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 12288, UNIT - 12288, dev(3, 12288)), 0);
	cr_assert_eq(cfs_extent_written_span(map, 0, 10 * UNIT, &w), UNIT);
	cr_assert(w);
	cr_assert_eq(atomic_load(&notified), 1);
}

struct collected {
	int n;
	uint64_t fu[16];
	enum cfs_extent_ws state[16];
	uint8_t bits[16][SPU / 8];
};

static int collect_cb(void *arg, const struct cfs_extent_unit_view *v)
{
	struct collected *c = arg;

	c->fu[c->n] = v->file_unit;
	c->state[c->n] = v->state;
	cfs_extent_view_bits(v, 0, v->sector_count, c->bits[c->n]);
	c->n++;
	return 0;
}

Test(extent, dirty_collect_and_notify, .init = setup, .fini = teardown)
{
	struct collected c = { 0 };

	cr_assert_eq(cfs_extent_map_units(map, 0, 0, 4), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 0, UNIT, dev(0, 0)), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 2 * UNIT, 1024, dev(2, 0)), 0);
	cr_assert_eq(atomic_load(&notified), 1);
	cr_assert_eq(cfs_extent_collect_dirty(map, collect_cb, &c), 0);
	cr_assert_eq(c.n, 2);
	for (int i = 0; i < 2; i++) {
		if (c.fu[i] == 0) {
			cr_assert_eq(c.state[i], CFS_EXTENT_WS_ALL);
		} else {
			cr_assert_eq(c.fu[i], 2);
			cr_assert_eq(c.state[i], CFS_EXTENT_WS_BITMAP);
			cr_assert_eq(c.bits[i][0], 0x03);
			cr_assert_eq(c.bits[i][1], 0);
		}
	}
	/* Clean now; writing already-written sectors dirties nothing. */
	c.n = 0;
	cr_assert_eq(cfs_extent_mark_written(map, 0, 512, dev(0, 0)), 0);
	cr_assert_eq(cfs_extent_collect_dirty(map, collect_cb, &c), 0);
	cr_assert_eq(c.n, 0);
	/* A new change notifies again. */
	cr_assert_eq(cfs_extent_mark_written(map, 3 * UNIT, 512, dev(3, 0)), 0);
	cr_assert_eq(atomic_load(&notified), 2);
}

static int stop_cb(void *arg, const struct cfs_extent_unit_view *v)
{
	(void)v;
	return ++*(int *)arg == 1 ? 0 : 99;
}

Test(extent, collect_stopped_keeps_rest_dirty, .init = setup, .fini = teardown)
{
	struct collected c = { 0 };
	int calls = 0;

	cr_assert_eq(cfs_extent_map_units(map, 0, 0, 3), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(cfs_extent_mark_written(map, (uint64_t)i * UNIT, 512, dev(i, 0)), 0);
	cr_assert_eq(cfs_extent_collect_dirty(map, stop_cb, &calls), 99);
	cr_assert_eq(cfs_extent_collect_dirty(map, collect_cb, &c), 0);
	cr_assert_eq(c.n, 2);
}

Test(extent, write_to_retired_unit_is_ignored, .init = setup, .fini = teardown)
{
	cr_assert_eq(cfs_extent_map_units(map, 0, 5, 1), 0);
	/* Unmapped and re-mapped elsewhere while a write to store 5 flew. */
	cr_assert_eq(cfs_extent_unmap(map, 0, 1, NULL, NULL), 1);
	cr_assert_eq(cfs_extent_map_units(map, 0, 9, 1), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 0, UNIT, dev(5, 0)), 0);
	cr_assert_not(cfs_extent_sector_written(map, 0));
	cr_assert_eq(cfs_extent_mark_written(map, 0, UNIT, dev(9, 0)), 0);
	cr_assert(cfs_extent_sector_written(map, 0));
}

struct unmapped {
	int n;
	uint64_t fu[8], su[8], count[8];
	uint32_t poff[8], pbytes[8];
};

static void unmap_cb(void *arg, uint64_t fu, uint64_t su, uint64_t count, uint32_t poff,
		     uint32_t pbytes)
{
	struct unmapped *u = arg;

	u->fu[u->n] = fu;
	u->su[u->n] = su;
	u->count[u->n] = count;
	u->poff[u->n] = poff;
	u->pbytes[u->n] = pbytes;
	u->n++;
}

Test(extent, unmap_reports_runs, .init = setup, .fini = teardown)
{
	struct unmapped u = { 0 };

	cr_assert_eq(cfs_extent_map_units(map, 0, 100, 3), 0);
	cr_assert_eq(cfs_extent_map_units(map, 3, 200, 2), 0);
	cr_assert_eq(cfs_extent_map_units(map, 1000, 300, 1), 0);
	cr_assert_eq(cfs_extent_unmap(map, 1, UINT64_MAX, unmap_cb, &u), 5);
	cr_assert_eq(u.n, 3);
	cr_assert_eq(u.fu[0], 1);
	cr_assert_eq(u.su[0], 101);
	cr_assert_eq(u.count[0], 2);
	cr_assert_eq(u.fu[1], 3);
	cr_assert_eq(u.su[1], 200);
	cr_assert_eq(u.count[1], 2);
	cr_assert_eq(u.fu[2], 1000);
	cr_assert_eq(cfs_extent_mapped_units(map), 1);
	cr_assert_eq(cfs_extent_unit_get(map, 0), 100);
	cr_assert_eq(cfs_extent_unit_get(map, 1), -1);
	cr_assert_not(cfs_extent_quiesce(map));
}

struct cleared {
	int n;
	uint64_t fu[8];
	uint32_t first[8], count[8];
};

static void clear_cb(void *arg, uint64_t fu, uint64_t su, uint32_t first, uint32_t count)
{
	struct cleared *c = arg;

	(void)su;
	c->fu[c->n] = fu;
	c->first[c->n] = first;
	c->count[c->n] = count;
	c->n++;
}

Test(extent, mark_unwritten, .init = setup, .fini = teardown)
{
	struct cleared c = { 0 };
	bool w;

	cr_assert_eq(cfs_extent_map_units(map, 0, 0, 3), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 0, 3 * UNIT, dev(0, 0)), 0);
	/* [1000, UNIT + 2000): whole sectors 1024.. and ..1536 of unit 1. */
	cr_assert_eq(cfs_extent_mark_unwritten(map, 1000, UNIT + 1000, clear_cb, &c), 0);
	cr_assert_eq(c.n, 2);
	cr_assert_eq(c.first[0], 2);
	cr_assert_eq(c.count[0], SPU - 2);
	cr_assert_eq(c.fu[1], 1);
	cr_assert_eq(c.first[1], 0);
	cr_assert_eq(c.count[1], 3);
	cr_assert(cfs_extent_sector_written(map, 1000)); /* the partial sector */
	cr_assert_not(cfs_extent_sector_written(map, 1024));
	cr_assert_not(cfs_extent_sector_written(map, UNIT + 1535));
	cr_assert(cfs_extent_sector_written(map, UNIT + 1536));
	cr_assert_eq(cfs_extent_written_span(map, 1024, 3 * UNIT, &w), UNIT + 1536 - 1024);
	cr_assert_not(w);
	/* Rewriting restores; a whole-unit clear gives NONE. */
	cr_assert_eq(cfs_extent_mark_written(map, 0, UNIT, dev(0, 0)), 0);
	cr_assert_eq(cfs_extent_written_span(map, 0, UNIT, &w), UNIT);
	cr_assert(w);
	cr_assert_eq(cfs_extent_mark_unwritten(map, 2 * UNIT, UNIT, NULL, NULL), 0);
	cr_assert_eq(cfs_extent_written_span(map, 2 * UNIT, UNIT, &w), UNIT);
	cr_assert_not(w);
	/* Nothing written there any more: no callback. */
	c.n = 0;
	cr_assert_eq(cfs_extent_mark_unwritten(map, 2 * UNIT, UNIT, clear_cb, &c), 0);
	cr_assert_eq(c.n, 0);
}

Test(extent, apply_ws, .init = setup, .fini = teardown)
{
	uint8_t bits[SPU / 8] = { 0 };
	bool w;

	cr_assert_eq(cfs_extent_map_units(map, 4, 8, 1), 0);
	bits[0] = 0x05;	/* sectors 10 and 12 of the range starting at 10 */
	cr_assert_eq(cfs_extent_apply_ws(map, 4, 8, CFS_EXTENT_WS_OP_OR, 10, 3, bits), 0);
	cr_assert(cfs_extent_sector_written(map, 4 * UNIT + 10 * SECTOR));
	cr_assert_not(cfs_extent_sector_written(map, 4 * UNIT + 11 * SECTOR));
	cr_assert(cfs_extent_sector_written(map, 4 * UNIT + 12 * SECTOR));
	/* Wrong store unit: ignored. */
	cr_assert_eq(cfs_extent_apply_ws(map, 4, 9, CFS_EXTENT_WS_OP_OR, 0, SPU, NULL), 0);
	cr_assert_not(cfs_extent_sector_written(map, 4 * UNIT));
	cr_assert_eq(cfs_extent_apply_ws(map, 4, 8, CFS_EXTENT_WS_OP_OR, 0, SPU, NULL), 0);
	cr_assert_eq(cfs_extent_written_span(map, 4 * UNIT, UNIT, &w), UNIT);
	cr_assert(w);
	cr_assert_eq(cfs_extent_apply_ws(map, 4, 8, CFS_EXTENT_WS_OP_CLEAR, 0, 1, NULL), 0);
	cr_assert_not(cfs_extent_sector_written(map, 4 * UNIT));
	memset(bits, 0, sizeof(bits));
	cr_assert_eq(cfs_extent_apply_ws(map, 4, 8, CFS_EXTENT_WS_OP_SET, 0, SPU, bits), 0);
	cr_assert_eq(cfs_extent_written_span(map, 4 * UNIT, UNIT, &w), UNIT);
	cr_assert_not(w);
	cr_assert_eq(cfs_extent_apply_ws(map, 4, 8, CFS_EXTENT_WS_OP_SET, 1, SPU, bits), -EINVAL);
	/* Replay does not dirty. */
	cr_assert_eq(atomic_load(&notified), 0);
}

Test(extent, seek, .init = setup, .fini = teardown)
{
	uint64_t size = 10 * UNIT;

	cr_assert_eq(cfs_extent_seek_data(map, 0, size), -ENXIO);
	cr_assert_eq(cfs_extent_seek_hole(map, 0, size), 0);
	cr_assert_eq(cfs_extent_seek_hole(map, size, size), -ENXIO);
	cr_assert_eq(cfs_extent_map_units(map, 3, 0, 2), 0);
	/* Mapped but unwritten is a hole. */
	cr_assert_eq(cfs_extent_seek_data(map, 0, size), -ENXIO);
	cr_assert_eq(cfs_extent_mark_written(map, 3 * UNIT + 4096, 4096, dev(0, 4096)), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 4 * UNIT, UNIT, dev(1, 0)), 0);
	cr_assert_eq(cfs_extent_seek_data(map, 0, size), 3 * UNIT + 4096);
	cr_assert_eq(cfs_extent_seek_data(map, 3 * UNIT + 5000, size), 3 * UNIT + 5000);
	cr_assert_eq(cfs_extent_seek_hole(map, 3 * UNIT + 5000, size), 3 * UNIT + 8192);
	cr_assert_eq(cfs_extent_seek_data(map, 3 * UNIT + 8192, size), 4 * UNIT);
	cr_assert_eq(cfs_extent_seek_hole(map, 4 * UNIT, size), 5 * UNIT);
	cr_assert_eq(cfs_extent_seek_data(map, 5 * UNIT, size), -ENXIO);
	/* The end of the file is a hole even inside written data. */
	cr_assert_eq(cfs_extent_seek_hole(map, 4 * UNIT, 4 * UNIT + 100), 4 * UNIT + 100);
}

Test(extent, view_bits_ranges, .init = setup, .fini = teardown)
{
	struct collected c = { 0 };
	uint8_t out[4];
	struct cfs_extent_unit_view v = { .state = CFS_EXTENT_WS_ALL, .sector_count = SPU };

	cfs_extent_view_bits(&v, 3, 11, out);
	cr_assert_eq(out[0], 0xff);
	cr_assert_eq(out[1], 0x07);
	cr_assert_eq(cfs_extent_map_units(map, 0, 0, 1), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 8 * SECTOR, 2 * SECTOR, dev(0, 8 * SECTOR)), 0);
	cr_assert_eq(cfs_extent_for_each(map, collect_cb, &c), 0);
	cr_assert_eq(c.n, 1);
	cr_assert_eq(c.bits[0][1], 0x03);
}

/* ---- concurrency ---------------------------------------------------------- */

struct writer_arg {
	int parity;
	int rounds;
};

static void *writer(void *p)
{
	struct writer_arg *a = p;

	for (int r = 0; r < a->rounds; r++) {
		uint64_t fu = (uint64_t)r;

		for (uint32_t s = (uint32_t)a->parity; s < SPU; s += 2)
			cr_assert_eq(cfs_extent_mark_written(map, fu * UNIT + s * SECTOR, SECTOR,
							     dev(fu, s * SECTOR)), 0);
	}
	return NULL;
}

static int count_all_cb(void *arg, const struct cfs_extent_unit_view *v)
{
	(void)arg;
	cr_assert_eq(v->state, CFS_EXTENT_WS_ALL, "unit %llu not collapsed to ALL",
		     (unsigned long long)v->file_unit);
	return 0;
}

Test(extent, concurrent_mark_written_two_threads, .init = setup, .fini = teardown)
{
	const int units = 256;
	pthread_t t[2];
	struct writer_arg args[2] = { { 0, units }, { 1, units } };
	bool w;

	cr_assert_eq(cfs_extent_map_units(map, 0, 0, units), 0);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, writer, &args[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	/* Every sector of every unit written, and every unit collapsed to ALL. */
	cr_assert_eq(cfs_extent_written_span(map, 0, (uint64_t)units * UNIT, &w),
		     (uint64_t)units * UNIT);
	cr_assert(w);
	cr_assert_eq(cfs_extent_for_each(map, count_all_cb, NULL), 0);
}

static atomic_bool stop_clearing;

static void *clearer(void *p)
{
	(void)p;
	/* Clears only the first half of unit 0, over and over (in the test
	 * the "inode lock" is this thread: the only one clearing). */
	while (!atomic_load(&stop_clearing))
		cr_assert_eq(cfs_extent_mark_unwritten(map, 0, UNIT / 2, NULL, NULL), 0);
	return NULL;
}

static void *second_half_writer(void *p)
{
	(void)p;
	for (int r = 0; r < 20000; r++) {
		uint32_t s = SPU / 2 + (uint32_t)(r % (SPU / 2));

		cr_assert_eq(cfs_extent_mark_written(map, s * SECTOR, SECTOR, dev(0, s * SECTOR)), 0);
		/* Once written, a sector outside the cleared half stays written. */
		cr_assert(cfs_extent_sector_written(map, s * SECTOR));
		if (r % 7 == 0)
			cr_assert_eq(cfs_extent_mark_written(map, 0, SECTOR, dev(0, 0)), 0);
	}
	return NULL;
}

Test(extent, writers_never_lose_bits_to_a_clearer, .init = setup, .fini = teardown)
{
	pthread_t tc, tw;
	bool w;

	cr_assert_eq(cfs_extent_map_units(map, 0, 0, 1), 0);
	atomic_store(&stop_clearing, false);
	pthread_create(&tc, NULL, clearer, NULL);
	pthread_create(&tw, NULL, second_half_writer, NULL);
	pthread_join(tw, NULL);
	atomic_store(&stop_clearing, true);
	pthread_join(tc, NULL);
	cr_assert_eq(cfs_extent_written_span(map, UNIT / 2, UNIT / 2, &w), UNIT / 2);
	cr_assert(w);
}

/* ---- runs: memory by extents, splitting and merging ------------------------ */

static int count_views_cb(void *arg, const struct cfs_extent_unit_view *v)
{
	struct collected *c = arg;

	if (c->n < 16) {
		c->fu[c->n] = v->file_unit;
		c->state[c->n] = v->state;
	}
	c->n++;
	return 0;
}

static int nop_cb(void *arg, const struct cfs_extent_unit_view *v)
{
	(void)arg;
	(void)v;
	return 0;
}

Test(extent, a_million_units_in_one_run_cost_a_run, .init = setup, .fini = teardown)
{
	struct cfs_extent_geom big;
	struct cfs_extent_map *m;
	struct collected c = { 0 };
	struct cfs_extent_run run;

	/* 4M units of 64 KiB (256 GiB): one file maps 1M of them. */
	cr_assert_eq(cfs_extent_geom_init(&big, UNIT, SECTOR, 4ull << 20, DATA0), 0);
	cr_assert_eq(cfs_extent_map_create(&big, NULL, NULL, &m), 0);
	cr_assert_eq(cfs_extent_map_units(m, 0, 1000, 1u << 20), 0);
	cr_assert_eq(cfs_extent_mapped_units(m), 1u << 20);
	cr_assert_lt(cfs_extent_map_bytes(m), 4096, "%llu bytes",
		     (unsigned long long)cfs_extent_map_bytes(m));
	/* Written unit by unit (a sequential fill), then collected: one run. */
	for (uint64_t fu = 0; fu < 4096; fu++)
		cr_assert_eq(cfs_extent_mark_written(m, fu * UNIT, UNIT,
						     DATA0 + (1000 + fu) * UNIT), 0);
	cr_assert_eq(cfs_extent_collect_dirty(m, nop_cb, NULL), 0);
	/* Folded records leave the table once no reader can hold the old base,
	 * and are freed two epochs later: a few calls with no reader. */
	for (int i = 0; i < 4 && cfs_extent_quiesce(m); i++)
		;
	cr_assert_not(cfs_extent_quiesce(m));
	cr_assert_lt(cfs_extent_map_bytes(m), 4096, "%llu bytes after the fill",
		     (unsigned long long)cfs_extent_map_bytes(m));
	cr_assert_eq(cfs_extent_for_each(m, count_views_cb, &c), 0);
	cr_assert_eq(c.n, 2);
	cr_assert_eq(c.state[0], CFS_EXTENT_WS_ALL);
	cr_assert_eq(c.state[1], CFS_EXTENT_WS_NONE);
	cr_assert_eq(c.fu[1], 4096);
	cr_assert_eq(cfs_extent_lookup(m, 0, (1ull << 20) * UNIT, &run), 0);
	cr_assert_eq(run.length_bytes, (1ull << 20) * UNIT);
	cfs_extent_quiesce(m);
	cfs_extent_map_destroy(m);
}

Test(extent, worst_case_every_unit_its_own_run, .init = setup, .fini = teardown)
{
	struct cfs_extent_geom big;
	struct cfs_extent_map *m;
	const uint64_t n = 100000;
	uint64_t bytes;

	cr_assert_eq(cfs_extent_geom_init(&big, UNIT, SECTOR, 4ull << 20, DATA0), 0);
	cr_assert_eq(cfs_extent_map_create(&big, NULL, NULL, &m), 0);
	/* Every other store unit: no two file units continue each other. */
	for (uint64_t fu = 0; fu < n; fu++)
		cr_assert_eq(cfs_extent_map_units(m, fu, 2 * fu, 1), 0);
	cfs_extent_quiesce(m);
	bytes = cfs_extent_map_bytes(m);
	/* 32 bytes a run, leaves packed when appended, plus the top. */
	cr_assert_lt(bytes, n * 40, "%llu bytes for %llu runs", (unsigned long long)bytes,
		     (unsigned long long)n);
	for (uint64_t fu = 0; fu < n; fu += 997)
		cr_assert_eq(cfs_extent_unit_get(m, fu), (int64_t)(2 * fu));
	cfs_extent_map_destroy(m);
}

Test(extent, punch_and_truncate_in_the_middle_of_a_run, .init = setup, .fini = teardown)
{
	struct unmapped u = { 0 };
	struct collected c = { 0 };
	struct cfs_extent_run run;
	bool w;

	cr_assert_eq(cfs_extent_map_units(map, 0, 100, 64), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 0, 64 * UNIT, dev(100, 0)), 0);
	cr_assert_eq(cfs_extent_collect_dirty(map, nop_cb, NULL), 0);
	/* Punch units 10..19 out of the middle: two runs remain. */
	cr_assert_eq(cfs_extent_unmap(map, 10, 10, unmap_cb, &u), 10);
	cr_assert_eq(u.n, 1);
	cr_assert_eq(u.fu[0], 10);
	cr_assert_eq(u.su[0], 110);
	cr_assert_eq(u.count[0], 10);
	cr_assert_eq(cfs_extent_lookup(map, 0, 64 * UNIT, &run), 0);
	cr_assert_eq(run.length_bytes, 10 * UNIT);
	cr_assert_eq(cfs_extent_lookup(map, 10 * UNIT, 64 * UNIT, &run), 0);
	cr_assert_not(run.mapped);
	cr_assert_eq(run.length_bytes, 10 * UNIT);
	cr_assert_eq(cfs_extent_lookup(map, 20 * UNIT + 5, 64 * UNIT, &run), 0);
	cr_assert_eq(run.store_unit, 120);
	cr_assert_eq(run.device_offset_bytes, dev(120, 5));
	cr_assert_eq(run.length_bytes, 44 * UNIT - 5);
	/* Clear sectors inside unit 30 of the second run: ALL, BITMAP, ALL. */
	cr_assert_eq(cfs_extent_mark_unwritten(map, 30 * UNIT + 4 * SECTOR, 2 * SECTOR, NULL,
					       NULL),
		     0);
	cr_assert(cfs_extent_sector_written(map, 30 * UNIT + 3 * SECTOR));
	cr_assert_not(cfs_extent_sector_written(map, 30 * UNIT + 4 * SECTOR));
	cr_assert_not(cfs_extent_sector_written(map, 30 * UNIT + 5 * SECTOR));
	cr_assert(cfs_extent_sector_written(map, 30 * UNIT + 6 * SECTOR));
	cr_assert_eq(cfs_extent_written_span(map, 20 * UNIT, 44 * UNIT, &w),
		     10 * UNIT + 4 * SECTOR);
	cr_assert(w);
	cr_assert_eq(cfs_extent_for_each(map, count_views_cb, &c), 0);
	cr_assert_eq(c.n, 4); /* 0..9 ALL, 20..29 ALL, 30 BITMAP, 31..63 ALL */
	cr_assert_eq(c.state[2], CFS_EXTENT_WS_BITMAP);
	cr_assert_eq(c.fu[2], 30);
	/* Truncate in the middle of the last run: units 40.. go. */
	u.n = 0;
	cr_assert_eq(cfs_extent_unmap(map, 40, UINT64_MAX, unmap_cb, &u), 24);
	cr_assert_eq(u.n, 1);
	cr_assert_eq(u.su[0], 140);
	cr_assert_eq(cfs_extent_mapped_units(map), 30);
	/* Rewriting the cleared sectors folds unit 30 back into one run. */
	cr_assert_eq(cfs_extent_mark_written(map, 30 * UNIT + 4 * SECTOR, 2 * SECTOR,
					     dev(130, 4 * SECTOR)),
		     0);
	cr_assert_eq(cfs_extent_collect_dirty(map, nop_cb, NULL), 0);
	c.n = 0;
	cr_assert_eq(cfs_extent_for_each(map, count_views_cb, &c), 0);
	cr_assert_eq(c.n, 2);
	cr_assert_eq(c.fu[1], 20);
	cr_assert_eq(c.state[1], CFS_EXTENT_WS_ALL);
}

Test(extent, move_keeps_the_written_state, .init = setup, .fini = teardown)
{
	struct cfs_extent_run run;

	cr_assert_eq(cfs_extent_map_units(map, 0, 10, 4), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 0, UNIT, dev(10, 0)), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 2 * UNIT + 7 * SECTOR, SECTOR,
					     dev(12, 7 * SECTOR)),
		     0);
	cr_assert_eq(cfs_extent_move(map, 1, 3, 500), 0);
	cr_assert_eq(cfs_extent_unit_get(map, 0), 10);
	cr_assert_eq(cfs_extent_unit_get(map, 2), 501);
	cr_assert(cfs_extent_sector_written(map, 0));
	cr_assert(cfs_extent_sector_written(map, 2 * UNIT + 7 * SECTOR));
	cr_assert_not(cfs_extent_sector_written(map, 2 * UNIT + 6 * SECTOR));
	cr_assert_not(cfs_extent_sector_written(map, UNIT));
	/* A late completion to the old unit marks nothing. */
	cr_assert_eq(cfs_extent_mark_written(map, 3 * UNIT, UNIT, dev(13, 0)), 0);
	cr_assert_not(cfs_extent_sector_written(map, 3 * UNIT));
	cr_assert_eq(cfs_extent_mark_written(map, 3 * UNIT, UNIT, dev(502, 0)), 0);
	cr_assert(cfs_extent_sector_written(map, 3 * UNIT));
	cr_assert_eq(cfs_extent_lookup(map, UNIT, 3 * UNIT, &run), 0);
	cr_assert_eq(run.store_unit, 500);
	cr_assert_eq(run.length_bytes, 3 * UNIT);
	cr_assert_eq(cfs_extent_move(map, 3, 2, 600), -ENOENT);
	cr_assert_eq(cfs_extent_move(map, 0, 1, 4095 + 1), -ERANGE);
}

Test(extent, apply_written_run, .init = setup, .fini = teardown)
{
	bool w;

	cr_assert_eq(cfs_extent_map_units(map, 0, 10, 4), 0);
	cr_assert_eq(cfs_extent_map_units(map, 4, 50, 4), 0);
	/* Units 0..3 map 10..13; 4..7 map 50..53: only the matching ones. */
	cr_assert_eq(cfs_extent_apply_written_run(map, 0, 10, 8), 0);
	cr_assert_eq(cfs_extent_written_span(map, 0, 8 * UNIT, &w), 4 * UNIT);
	cr_assert(w);
	cr_assert_not(cfs_extent_sector_written(map, 4 * UNIT));
	cr_assert_eq(atomic_load(&notified), 0);
}

/* ---- concurrency: lock-free readers while runs split and merge -------------- */

#define STABLE_UNITS 64u
static atomic_bool stop_readers;

/* Units [0, 64) map store units [0, 64) and stay wholly written; units
 * [64, 192) are remapped, punched, partly cleared and refilled meanwhile. */
static void *stable_reader(void *p)
{
	uint64_t seed = (uint64_t)(uintptr_t)p;

	while (!atomic_load(&stop_readers)) {
		struct cfs_extent_run run;
		uint64_t fu;
		bool w;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		fu = (seed >> 33) % STABLE_UNITS;
		cr_assert_eq(cfs_extent_lookup(map, fu * UNIT + 512, UNIT, &run), 0);
		cr_assert(run.mapped);
		cr_assert_eq(run.store_unit, fu);
		cr_assert_eq(run.device_offset_bytes, dev(fu, 512));
		cr_assert_eq(cfs_extent_written_span(map, fu * UNIT, UNIT, &w), UNIT);
		cr_assert(w);
		cr_assert(cfs_extent_sector_written(map, fu * UNIT + (seed % SPU) * SECTOR));
		/* Anywhere in the churning part: a consistent answer. */
		cr_assert_eq(cfs_extent_lookup(map, (64 + (seed >> 40) % 128) * UNIT, 8 * UNIT,
					       &run),
			     0);
		if (run.mapped)
			cr_assert_geq(run.store_unit, 1000);
	}
	return NULL;
}

Test(extent, runs_split_and_merge_under_concurrent_lookups, .init = setup, .fini = teardown)
{
	pthread_t t[2];

	cr_assert_eq(cfs_extent_map_units(map, 0, 0, STABLE_UNITS), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 0, STABLE_UNITS * UNIT, dev(0, 0)), 0);
	cr_assert_eq(cfs_extent_collect_dirty(map, nop_cb, NULL), 0);
	atomic_store(&stop_readers, false);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, stable_reader, (void *)(uintptr_t)(i + 1));
	/* This thread is the inode lock and the completions of the churn. */
	for (int round = 0; round < 300; round++) {
		uint64_t base = 1000 + (uint64_t)(round % 7) * 200;

		cr_assert_eq(cfs_extent_map_units(map, 64, base, 128), 0);
		/* Split: every third unit written, some partly. */
		for (uint64_t fu = 64; fu < 192; fu += 3)
			cr_assert_eq(cfs_extent_mark_written(map, fu * UNIT, (fu % 2 ? UNIT : 8 * SECTOR),
							     dev(base + fu - 64, 0)),
				     0);
		cr_assert_eq(cfs_extent_collect_dirty(map, nop_cb, NULL), 0);
		/* Merge: fill everything, fold. */
		cr_assert_eq(cfs_extent_mark_written(map, 64 * UNIT, 128 * UNIT, dev(base, 0)), 0);
		cr_assert_eq(cfs_extent_collect_dirty(map, nop_cb, NULL), 0);
		/* Punch in the middle of the run, clear inside a unit. */
		cr_assert_eq(cfs_extent_unmap(map, 100, 20, NULL, NULL), 20);
		cr_assert_eq(cfs_extent_mark_unwritten(map, 150 * UNIT + 1024, 4096, NULL, NULL), 0);
		cr_assert_eq(cfs_extent_unmap(map, 64, 128, NULL, NULL), 108);
		cfs_extent_quiesce(map);
	}
	atomic_store(&stop_readers, true);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(cfs_extent_mapped_units(map), STABLE_UNITS);
	cfs_extent_quiesce(map);
	/* What the churn retired was freed although readers never stopped. */
	cr_assert_lt(cfs_extent_map_bytes(map), 8192, "%llu bytes",
		     (unsigned long long)cfs_extent_map_bytes(map));
}

struct marker_arg {
	int id;
	uint64_t units;
};

/* A completion thread: writes every sector of its share of the units, one
 * sector at a time in a scattered order. */
static void *sector_marker(void *p)
{
	struct marker_arg *a = p;

	for (uint32_t s = 0; s < SPU; s++) {
		for (uint64_t fu = (uint64_t)a->id; fu < a->units; fu += 2) {
			uint32_t sec = (s * 37 + (uint32_t)fu) % SPU;

			cr_assert_eq(cfs_extent_mark_written(map, fu * UNIT + sec * SECTOR, SECTOR,
							     dev(fu, sec * SECTOR)),
				     0);
		}
	}
	return NULL;
}

static atomic_bool stop_collecting;

static void *collector(void *p)
{
	(void)p;
	while (!atomic_load(&stop_collecting)) {
		cr_assert_eq(cfs_extent_collect_dirty(map, nop_cb, NULL), 0);
		cfs_extent_quiesce(map);
	}
	return NULL;
}

Test(extent, completions_race_the_fold, .init = setup, .fini = teardown)
{
	const uint64_t units = 96;
	struct marker_arg args[2] = { { 0, units }, { 1, units } };
	pthread_t t[2], tc;
	bool w;

	cr_assert_eq(cfs_extent_map_units(map, 0, 0, units), 0);
	atomic_store(&stop_collecting, false);
	pthread_create(&tc, NULL, collector, NULL);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, sector_marker, &args[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	atomic_store(&stop_collecting, true);
	pthread_join(tc, NULL);
	cr_assert_eq(cfs_extent_written_span(map, 0, units * UNIT, &w), units * UNIT);
	cr_assert(w);
	cr_assert_eq(cfs_extent_collect_dirty(map, nop_cb, NULL), 0);
	cr_assert_eq(cfs_extent_for_each(map, count_all_cb, NULL), 0);
}
/* ---- remap (online moves between stores) ------------------------------------ */

struct remap_seen {
	int calls;
	uint64_t store_unit;
	enum cfs_extent_ws state;
	uint8_t bits[SPU / 8];
};

static int remap_cb(void *arg, const struct cfs_extent_unit_view *view)
{
	struct remap_seen *s = arg;

	s->calls++;
	s->store_unit = view->store_unit;
	s->state = view->state;
	cfs_extent_view_bits(view, 0, SPU, s->bits);
	return 0;
}

Test(extent, remap_keeps_written_state, .init = setup, .fini = teardown)
{
	struct cfs_extent_run run;
	struct remap_seen seen = { 0 };
	bool w;

	cr_assert_eq(cfs_extent_map_units(map, 0, 10, 3), 0);
	/* unit 0: partly written (a bitmap), unit 1: all, unit 2: none */
	cr_assert_eq(cfs_extent_mark_written(map, 3 * SECTOR, 2 * SECTOR, dev(10, 3 * SECTOR)), 0);
	cr_assert_eq(cfs_extent_mark_written(map, UNIT, UNIT, dev(11, 0)), 0);

	cr_assert_eq(cfs_extent_remap(map, 0, 10, 500, remap_cb, &seen), 0);
	cr_assert_eq(seen.calls, 1);
	cr_assert_eq(seen.store_unit, 500);
	cr_assert_eq(seen.state, CFS_EXTENT_WS_BITMAP);
	cr_assert_eq(seen.bits[0], 0x18); /* sectors 3 and 4 */
	cr_assert_eq(cfs_extent_lookup(map, 0, 3 * UNIT, &run), 0);
	cr_assert(run.mapped);
	cr_assert_eq(run.store_unit, 500);
	cr_assert_eq(run.device_offset_bytes, dev(500, 0));
	cr_assert_eq(run.length_bytes, UNIT); /* 500 and 11 are not contiguous */
	cr_assert_not(cfs_extent_sector_written(map, 2 * SECTOR));
	cr_assert(cfs_extent_sector_written(map, 3 * SECTOR));
	cr_assert(cfs_extent_sector_written(map, 4 * SECTOR));
	cr_assert_not(cfs_extent_sector_written(map, 5 * SECTOR));

	cr_assert_eq(cfs_extent_remap(map, 1, 11, 501, remap_cb, &seen), 0);
	cr_assert_eq(seen.state, CFS_EXTENT_WS_ALL);
	cr_assert_eq(cfs_extent_written_span(map, UNIT, UNIT, &w), UNIT);
	cr_assert(w);
	cr_assert_eq(cfs_extent_remap(map, 2, 12, 502, NULL, NULL), 0);
	cr_assert_eq(cfs_extent_written_span(map, 2 * UNIT, UNIT, &w), UNIT);
	cr_assert_not(w);
	/* Now 500, 501, 502: one contiguous run again. */
	cr_assert_eq(cfs_extent_lookup(map, 0, 3 * UNIT, &run), 0);
	cr_assert_eq(run.length_bytes, 3 * UNIT);
	cr_assert_eq(cfs_extent_mapped_units(map), 3);
	/* The switch is the caller's to log: it dirtied nothing (the one
	 * notification is the marks' above). */
	cr_assert_eq(atomic_load(&notified), 1);
}

Test(extent, remap_refuses_stale_and_out_of_range, .init = setup, .fini = teardown)
{
	cr_assert_eq(cfs_extent_remap(map, 7, 1, 2, NULL, NULL), -ESTALE); /* a hole */
	cr_assert_eq(cfs_extent_map_units(map, 7, 1, 1), 0);
	cr_assert_eq(cfs_extent_remap(map, 7, 2, 3, NULL, NULL), -ESTALE); /* maps 1, not 2 */
	cr_assert_eq(cfs_extent_remap(map, 7, 1, 4096, NULL, NULL), -ERANGE);
	cr_assert_eq(cfs_extent_unit_get(map, 7), 1);
	cr_assert_eq(cfs_extent_remap(map, 7, 1, 4095, NULL, NULL), 0);
	cr_assert_eq(cfs_extent_unit_get(map, 7), 4095);
	/* A second switch from the old unit finds the new one. */
	cr_assert_eq(cfs_extent_remap(map, 7, 1, 9, NULL, NULL), -ESTALE);
}

Test(extent, remap_late_write_to_old_unit_is_skipped, .init = setup, .fini = teardown)
{
	cr_assert_eq(cfs_extent_map_units(map, 0, 5, 1), 0);
	cr_assert_eq(cfs_extent_remap(map, 0, 5, 9, NULL, NULL), 0);
	/* A completion naming the old store unit marks nothing... */
	cr_assert_eq(cfs_extent_mark_written(map, 0, SECTOR, dev(5, 0)), 0);
	cr_assert_not(cfs_extent_sector_written(map, 0));
	/* ...one naming the new one does. */
	cr_assert_eq(cfs_extent_mark_written(map, 0, SECTOR, dev(9, 0)), 0);
	cr_assert(cfs_extent_sector_written(map, 0));
	/* The old record is retired, and goes at quiesce. */
	cr_assert_not(cfs_extent_quiesce(map));
}

/* Lookups from another thread while units switch back and forth: a reader
 * sees the old or the new store unit, never anything else, and the written
 * state both records carry. (No quiesce while it runs: the reader holds no
 * I/O reference, which is what keeps retired records alive.) */
struct remap_reader {
	atomic_bool stop;
	atomic_ulong bad;
	atomic_ulong looks;
};

static void *remap_read(void *arg)
{
	struct remap_reader *r = arg;

	while (!atomic_load(&r->stop)) {
		for (uint64_t fu = 0; fu < 16; fu++) {
			struct cfs_extent_run run;
			uint64_t su;

			if (cfs_extent_lookup(map, fu * UNIT + SECTOR, SECTOR, &run) || !run.mapped) {
				atomic_fetch_add(&r->bad, 1);
				continue;
			}
			su = run.store_unit;
			if ((su != fu && su != 1000 + fu) ||
			    !cfs_extent_sector_written(map, fu * UNIT + SECTOR) ||
			    cfs_extent_sector_written(map, fu * UNIT + 2 * SECTOR))
				atomic_fetch_add(&r->bad, 1);
			atomic_fetch_add(&r->looks, 1);
		}
	}
	return NULL;
}

Test(extent, remap_under_concurrent_lookups, .init = setup, .fini = teardown)
{
	struct remap_reader r;
	pthread_t t;

	atomic_init(&r.stop, false);
	atomic_init(&r.bad, 0);
	atomic_init(&r.looks, 0);
	cr_assert_eq(cfs_extent_map_units(map, 0, 0, 16), 0);
	for (uint64_t fu = 0; fu < 16; fu++)
		cr_assert_eq(cfs_extent_mark_written(map, fu * UNIT + SECTOR, SECTOR,
						     dev(fu, SECTOR)), 0);
	cr_assert_eq(pthread_create(&t, NULL, remap_read, &r), 0);
	/* Until the reader has looked often enough (it may start late). */
	for (int round = 0; round < 2000 || atomic_load(&r.looks) < 20000; round++) {
		for (uint64_t fu = 0; fu < 16; fu++) {
			uint64_t from = round % 2 ? 1000 + fu : fu;
			uint64_t to = round % 2 ? fu : 1000 + fu;

			cr_assert_eq(cfs_extent_remap(map, fu, from, to, NULL, NULL), 0);
		}
	}
	atomic_store(&r.stop, true);
	pthread_join(t, NULL);
	cr_assert_eq(atomic_load(&r.bad), 0, "%lu bad lookups of %lu",
		     (unsigned long)atomic_load(&r.bad), (unsigned long)atomic_load(&r.looks));
}

/* ---- pieces: a file unit mapped to part of a store unit ------------------------- */

#define KIB 1024u

static struct cfs_extent_loc piece_at(uint64_t su, uint32_t off, uint32_t bytes)
{
	return (struct cfs_extent_loc){su, off, bytes};
}

struct piece_views {
	int n;
	struct cfs_extent_unit_view v[8];
	uint8_t bits[8][SPU / 8];
};

static int piece_views_cb(void *arg, const struct cfs_extent_unit_view *v)
{
	struct piece_views *p = arg;

	cr_assert_lt(p->n, 8);
	p->v[p->n] = *v;
	p->v[p->n].bits = NULL;
	cfs_extent_view_bits(v, 0, v->sector_count, p->bits[p->n]);
	p->n++;
	return 0;
}

Test(extent, piece_lookup_and_space, .init = setup, .fini = teardown)
{
	struct cfs_extent_loc p = piece_at(7, 16 * KIB, 8 * KIB), got;
	struct cfs_extent_run run;

	cr_assert_eq(cfs_extent_map_piece(map, 0, &p), 0);
	cr_assert_eq(cfs_extent_lookup(map, 0, 2 * UNIT, &run), 0);
	cr_assert(run.mapped);
	cr_assert_eq(run.length_bytes, 8 * KIB);
	cr_assert_eq(run.store_unit, 7);
	cr_assert_eq(run.device_offset_bytes, dev(7, 16 * KIB));
	cr_assert_eq(cfs_extent_lookup(map, 4096 + 512, 100, &run), 0);
	cr_assert_eq(run.device_offset_bytes, dev(7, 16 * KIB + 4096 + 512));
	/* The rest of the file unit is a hole, up to the unit's end. */
	cr_assert_eq(cfs_extent_lookup(map, 8 * KIB, 2 * UNIT, &run), 0);
	cr_assert_not(run.mapped);
	cr_assert_eq(run.length_bytes, UNIT - 8 * KIB);
	/* A whole unit after it that continues on the store: no merge. */
	cr_assert_eq(cfs_extent_map_units(map, 1, 8, 1), 0);
	cr_assert_eq(cfs_extent_lookup(map, 0, 2 * UNIT, &run), 0);
	cr_assert_eq(run.length_bytes, 8 * KIB);
	cr_assert_eq(cfs_extent_lookup(map, UNIT, UNIT, &run), 0);
	cr_assert_eq(run.device_offset_bytes, dev(8, 0));
	cr_assert_eq(cfs_extent_mapped_units(map), 2);
	cr_assert_eq(cfs_extent_piece_count(map), 1);
	cr_assert_eq(cfs_extent_mapped_bytes(map), UNIT + 8 * KIB);
	cr_assert_eq(cfs_extent_unit_loc(map, 0, &got), 0);
	cr_assert_eq(got.store_unit, 7);
	cr_assert_eq(got.piece_offset_bytes, 16 * KIB);
	cr_assert_eq(got.piece_bytes, 8 * KIB);
	cr_assert_eq(cfs_extent_unit_loc(map, 1, &got), 0);
	cr_assert_eq(got.piece_bytes, 0);
	cr_assert_eq(cfs_extent_unit_loc(map, 2, &got), -ENOENT);
	cr_assert_eq(cfs_extent_unit_get(map, 0), 7);
}

Test(extent, piece_map_rules, .init = setup, .fini = teardown)
{
	struct cfs_extent_loc p = piece_at(7, 0, 4096), q = piece_at(7, 4096, 4096);
	struct cfs_extent_loc bad[] = {
		piece_at(7, 0, 2048),	    /* below 4 KiB */
		piece_at(7, 0, 12 * KIB),   /* not a power of two */
		piece_at(7, 0, UNIT),	    /* a whole unit */
		piece_at(7, 4096, 8 * KIB), /* not aligned to its size */
		piece_at(7, UNIT, 4096),    /* past the unit */
	};
	struct cfs_extent_loc far = piece_at(4096, 0, 4096);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(cfs_extent_map_piece(map, 0, &bad[i]), -EINVAL, "bad piece %zu", i);
	cr_assert_eq(cfs_extent_map_piece(map, 0, &far), -ERANGE);
	cr_assert_eq(cfs_extent_map_piece(map, geom.max_units, &p), -EFBIG);
	cr_assert_eq(cfs_extent_map_piece(map, 0, &p), 0);
	/* Again: nothing changes (replay); another place: taken. */
	cr_assert_eq(cfs_extent_mark_written(map, 0, 512, dev(7, 0)), 0);
	cr_assert_eq(cfs_extent_map_piece(map, 0, &p), 0);
	cr_assert(cfs_extent_sector_written(map, 0));
	cr_assert_eq(cfs_extent_map_piece(map, 0, &q), -EEXIST);
	cr_assert_eq(cfs_extent_map_units(map, 0, 7, 1), -EEXIST);
	/* Replay replaces, and the new mapping starts unwritten. */
	cr_assert_eq(cfs_extent_remap_piece(map, 0, &q), 0);
	cr_assert_not(cfs_extent_sector_written(map, 0));
	cr_assert_eq(cfs_extent_remap_units(map, 0, 7, 1), 0);
	cr_assert_eq(cfs_extent_piece_count(map), 0);
	cr_assert_eq(cfs_extent_mapped_bytes(map), UNIT);
	/* Moves of whole units refuse pieces. */
	cr_assert_eq(cfs_extent_remap_piece(map, 0, &p), 0);
	cr_assert_eq(cfs_extent_move(map, 0, 1, 9), -EINVAL);
	cr_assert_eq(cfs_extent_remap(map, 0, 7, 9, NULL, NULL), -ESTALE);
}

Test(extent, piece_written_state, .init = setup, .fini = teardown)
{
	struct cfs_extent_loc p = piece_at(7, 16 * KIB, 8 * KIB);
	struct piece_views pv = {0};
	bool w;

	cr_assert_eq(cfs_extent_map_piece(map, 0, &p), 0);
	/* A write that went to the same offset of another place: ignored. */
	cr_assert_eq(cfs_extent_mark_written(map, 0, 4096, dev(7, 0)), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 0, 4096, dev(8, 16 * KIB)), 0);
	cr_assert_not(cfs_extent_sector_written(map, 0));
	cr_assert_eq(cfs_extent_mark_written(map, 0, 4096, dev(7, 16 * KIB)), 0);
	cr_assert(cfs_extent_sector_written(map, 0));
	cr_assert_not(cfs_extent_sector_written(map, 4096));
	cr_assert_eq(cfs_extent_written_span(map, 0, UNIT, &w), 4096);
	cr_assert(w);
	cr_assert_eq(cfs_extent_written_span(map, 4096, 2 * UNIT, &w), 2 * UNIT);
	cr_assert_not(w);
	cr_assert_eq(cfs_extent_collect_dirty(map, piece_views_cb, &pv), 0);
	cr_assert_eq(pv.n, 1);
	cr_assert_eq(pv.v[0].state, CFS_EXTENT_WS_BITMAP);
	cr_assert_eq(pv.v[0].sector_count, 16);
	cr_assert_eq(pv.v[0].piece_offset_bytes, 16 * KIB);
	cr_assert_eq(pv.v[0].piece_bytes, 8 * KIB);
	cr_assert_eq(pv.bits[0][0], 0xff);
	cr_assert_eq(pv.bits[0][1], 0x00);
	/* The rest of the piece: ALL, folded into the run; past it a hole. */
	cr_assert_eq(cfs_extent_mark_written(map, 4096, 4096, dev(7, 20 * KIB)), 0);
	pv.n = 0;
	cr_assert_eq(cfs_extent_collect_dirty(map, piece_views_cb, &pv), 0);
	cr_assert_eq(pv.v[0].state, CFS_EXTENT_WS_ALL);
	cr_assert_eq(cfs_extent_written_span(map, 0, UNIT, &w), 8 * KIB);
	cr_assert(w);
	cr_assert_not(cfs_extent_sector_written(map, 8 * KIB));
	cr_assert_eq(cfs_extent_seek_data(map, 0, UNIT), 0);
	cr_assert_eq(cfs_extent_seek_hole(map, 0, UNIT), 8 * KIB);
	cr_assert_eq(cfs_extent_seek_data(map, 8 * KIB, UNIT), -ENXIO);
	pv.n = 0;
	cr_assert_eq(cfs_extent_for_each(map, piece_views_cb, &pv), 0);
	cr_assert_eq(pv.n, 1);
	cr_assert_eq(pv.v[0].state, CFS_EXTENT_WS_ALL);
	cr_assert_eq(pv.v[0].unit_count, 1);
	cr_assert_eq(pv.v[0].sector_count, 16);
	/* Clearing past the piece stops at its end; inside it, a bitmap. */
	cr_assert_eq(cfs_extent_mark_unwritten(map, 6 * KIB, UNIT, NULL, NULL), 0);
	cr_assert_eq(cfs_extent_written_span(map, 0, UNIT, &w), 6 * KIB);
	cr_assert(w);
	cr_assert_eq(cfs_extent_seek_hole(map, 0, UNIT), 6 * KIB);
}

Test(extent, piece_replay_clips_to_the_piece, .init = setup, .fini = teardown)
{
	struct cfs_extent_loc p = piece_at(7, 32 * KIB, 4096);
	uint8_t ones[SPU / 8];
	bool w;

	memset(ones, 0xff, sizeof(ones));
	cr_assert_eq(cfs_extent_map_piece(map, 0, &p), 0);
	/* A record about the store unit, longer than the piece: its sectors
	 * apply, the rest is ignored. */
	cr_assert_eq(cfs_extent_apply_ws(map, 0, 7, CFS_EXTENT_WS_OP_OR, 4, 100, ones), 0);
	cr_assert_eq(cfs_extent_written_span(map, 0, UNIT, &w), 2048);
	cr_assert_not(w);
	cr_assert_eq(cfs_extent_written_span(map, 2048, UNIT, &w), 2048);
	cr_assert(w);
	cr_assert_eq(cfs_extent_apply_ws(map, 0, 7, CFS_EXTENT_WS_OP_OR, 50, 10, ones), 0);
	cr_assert_not(cfs_extent_sector_written(map, 50 * SECTOR));
	/* Another store unit: not this mapping. */
	cr_assert_eq(cfs_extent_apply_ws(map, 0, 8, CFS_EXTENT_WS_OP_OR, 0, 8, NULL), 0);
	cr_assert_not(cfs_extent_sector_written(map, 0));
	/* A written run over the store unit: the whole piece. */
	cr_assert_eq(cfs_extent_apply_written_run(map, 0, 7, 1), 0);
	cr_assert_eq(cfs_extent_written_span(map, 0, UNIT, &w), 4096);
	cr_assert(w);
	cr_assert_not(cfs_extent_sector_written(map, 4096));
}

Test(extent, piece_unmap_reports_the_piece, .init = setup, .fini = teardown)
{
	struct cfs_extent_loc p = piece_at(7, 8 * KIB, 8 * KIB);
	struct unmapped u = {0};

	cr_assert_eq(cfs_extent_map_units(map, 1, 8, 2), 0);
	cr_assert_eq(cfs_extent_map_piece(map, 0, &p), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 0, 4096, dev(7, 8 * KIB)), 0);
	cr_assert_eq(cfs_extent_unmap(map, 0, UINT64_MAX, unmap_cb, &u), 3);
	cr_assert_eq(u.n, 2);
	cr_assert_eq(u.fu[0], 0);
	cr_assert_eq(u.su[0], 7);
	cr_assert_eq(u.count[0], 1);
	cr_assert_eq(u.poff[0], 8 * KIB);
	cr_assert_eq(u.pbytes[0], 8 * KIB);
	cr_assert_eq(u.fu[1], 1);
	cr_assert_eq(u.su[1], 8);
	cr_assert_eq(u.count[1], 2);
	cr_assert_eq(u.pbytes[1], 0);
	cr_assert_eq(cfs_extent_mapped_bytes(map), 0);
	cr_assert_eq(cfs_extent_piece_count(map), 0);
	/* A completion of the write to the old piece marks nothing now. */
	cr_assert_eq(cfs_extent_map_piece(map, 0, &p), 0);
	cr_assert_not(cfs_extent_sector_written(map, 0));
}

Test(extent, relocate_grows_a_piece, .init = setup, .fini = teardown)
{
	struct cfs_extent_loc small = piece_at(7, 16 * KIB, 8 * KIB);
	struct cfs_extent_loc big = piece_at(7, 32 * KIB, 32 * KIB);
	struct cfs_extent_loc whole = {9, 0, 0};
	struct cfs_extent_run run;
	struct piece_views pv = {0};
	bool w;

	cr_assert_eq(cfs_extent_map_piece(map, 0, &small), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 1024, 2048, dev(7, 17 * KIB)), 0);
	/* Smaller, the same, or not the current place: refused. */
	cr_assert_eq(cfs_extent_relocate(map, 0, &small, &(struct cfs_extent_loc){7, 0, 4096}, NULL,
					 NULL),
		     -EINVAL);
	cr_assert_eq(cfs_extent_relocate(map, 0, &small, &small, NULL, NULL), -EINVAL);
	cr_assert_eq(cfs_extent_relocate(map, 0, &big, &whole, NULL, NULL), -ESTALE);
	cr_assert_eq(cfs_extent_relocate(map, 1, &small, &big, NULL, NULL), -ESTALE);
	cr_assert_eq(cfs_extent_relocate(map, 0, &small, &big, piece_views_cb, &pv), 0);
	cr_assert_eq(pv.n, 1);
	cr_assert_eq(pv.v[0].state, CFS_EXTENT_WS_BITMAP);
	cr_assert_eq(pv.v[0].sector_count, 64);
	cr_assert_eq(pv.v[0].piece_offset_bytes, 32 * KIB);
	cr_assert_eq(pv.bits[0][0], 0x3c); /* sectors 2..5 */
	cr_assert_eq(cfs_extent_lookup(map, 0, UNIT, &run), 0);
	cr_assert_eq(run.length_bytes, 32 * KIB);
	cr_assert_eq(run.device_offset_bytes, dev(7, 32 * KIB));
	cr_assert_eq(cfs_extent_written_span(map, 1024, UNIT, &w), 2048);
	cr_assert(w);
	cr_assert_eq(cfs_extent_mapped_bytes(map), 32 * KIB);
	/* A late completion to the old piece: not the mapping any more. */
	cr_assert_eq(cfs_extent_mark_written(map, 0, 1024, dev(7, 16 * KIB)), 0);
	cr_assert_not(cfs_extent_sector_written(map, 0));
	/* Fill the new piece, then grow it into a whole unit: ALL of 64
	 * sectors is 64 of the unit's 128. */
	cr_assert_eq(cfs_extent_mark_written(map, 0, 32 * KIB, dev(7, 32 * KIB)), 0);
	pv.n = 0;
	cr_assert_eq(cfs_extent_collect_dirty(map, piece_views_cb, &pv), 0);
	cr_assert_eq(pv.v[0].state, CFS_EXTENT_WS_ALL);
	pv.n = 0;
	cr_assert_eq(cfs_extent_relocate(map, 0, &big, &whole, piece_views_cb, &pv), 0);
	cr_assert_eq(pv.v[0].state, CFS_EXTENT_WS_BITMAP);
	cr_assert_eq(pv.v[0].sector_count, SPU);
	cr_assert_eq(pv.v[0].piece_bytes, 0);
	for (unsigned i = 0; i < SPU / 8; i++)
		cr_assert_eq(pv.bits[0][i], i < 8 ? 0xff : 0, "byte %u", i);
	cr_assert_eq(cfs_extent_written_span(map, 0, UNIT, &w), 32 * KIB);
	cr_assert(w);
	cr_assert_eq(cfs_extent_piece_count(map), 0);
	cr_assert_eq(cfs_extent_mapped_bytes(map), UNIT);
	/* Written to the end: ALL, folded. */
	cr_assert_eq(cfs_extent_mark_written(map, 32 * KIB, 32 * KIB, dev(9, 32 * KIB)), 0);
	pv.n = 0;
	cr_assert_eq(cfs_extent_collect_dirty(map, piece_views_cb, &pv), 0);
	cr_assert_eq(pv.v[0].state, CFS_EXTENT_WS_ALL);
	cr_assert_eq(cfs_extent_written_span(map, 0, 2 * UNIT, &w), UNIT);
}

Test(extent, relocate_in_the_same_unit_keeps_records_apart, .init = setup, .fini = teardown)
{
	struct cfs_extent_loc a = piece_at(7, 0, 4096), b = piece_at(7, 8 * KIB, 8 * KIB);
	struct cfs_extent_loc c = piece_at(7, 16 * KIB, 16 * KIB);
	bool w;

	/* An unwritten piece relocates to an unwritten one. */
	cr_assert_eq(cfs_extent_map_piece(map, 0, &a), 0);
	cr_assert_eq(cfs_extent_relocate(map, 0, &a, &b, NULL, NULL), 0);
	cr_assert_eq(cfs_extent_written_span(map, 0, UNIT, &w), UNIT);
	cr_assert_not(w);
	cr_assert_eq(cfs_extent_mark_written(map, 0, 512, dev(7, 8 * KIB)), 0);
	cr_assert_eq(cfs_extent_relocate(map, 0, &b, &c, NULL, NULL), 0);
	cr_assert(cfs_extent_sector_written(map, 0));
	cr_assert_not(cfs_extent_sector_written(map, 512));
	/* Back to a place it had before (a's record is gone). */
	cr_assert_eq(cfs_extent_unmap(map, 0, 1, NULL, NULL), 1);
	cr_assert_eq(cfs_extent_map_piece(map, 0, &a), 0);
	cr_assert_not(cfs_extent_sector_written(map, 0));
	cr_assert_eq(cfs_extent_mark_written(map, 0, 4096, dev(7, 0)), 0);
	cr_assert_eq(cfs_extent_relocate(map, 0, &a, &b, NULL, NULL), 0);
	cr_assert_eq(cfs_extent_written_span(map, 0, UNIT, &w), 4096);
	cr_assert(w);
	cr_assert_not(cfs_extent_sector_written(map, 4096));
}

/*
 * A piece written whole, then grown into a bigger piece of the same store
 * unit before the committer collected it: the old record must not be
 * collected after the relocation. Its view (that store unit, ALL) would be
 * logged after the relocation's records, and replay would apply it to the
 * new piece (records name the store unit, not the piece): every sector of
 * the bigger piece written, the ones never written showing whatever the
 * unit held before (another file's bytes after a power loss).
 */
Test(extent, relocate_drops_the_old_pieces_dirty_record, .init = setup, .fini = teardown)
{
	struct cfs_extent_loc a = piece_at(7, 0, 4096), b = piece_at(7, 8 * KIB, 8 * KIB);
	struct cfs_extent_loc c = piece_at(7, 16 * KIB, 16 * KIB);
	struct piece_views pv = {0};

	cr_assert_eq(cfs_extent_map_piece(map, 0, &a), 0);
	cr_assert_eq(cfs_extent_mark_written(map, 0, 4096, dev(7, 0)), 0);
	cr_assert(cfs_extent_is_dirty(map));
	cr_assert_eq(cfs_extent_relocate(map, 0, &a, &b, piece_views_cb, &pv), 0);
	cr_assert_eq(pv.n, 1);
	cr_assert_eq(pv.v[0].piece_offset_bytes, 8 * KIB);
	pv.n = 0;
	cr_assert_eq(cfs_extent_collect_dirty(map, piece_views_cb, &pv), 0);
	for (int i = 0; i < pv.n; i++)
		cr_assert(pv.v[i].piece_offset_bytes == 8 * KIB && pv.v[i].piece_bytes == 8 * KIB,
			  "collected the old piece (offset %u, %u bytes, state %d)",
			  pv.v[i].piece_offset_bytes, pv.v[i].piece_bytes, (int)pv.v[i].state);
	/* The same for a partly written one (a bitmap record). */
	cr_assert_eq(cfs_extent_mark_written(map, 0, 512, dev(7, 8 * KIB)), 0);
	cr_assert_eq(cfs_extent_relocate(map, 0, &b, &c, NULL, NULL), 0);
	pv.n = 0;
	cr_assert_eq(cfs_extent_collect_dirty(map, piece_views_cb, &pv), 0);
	for (int i = 0; i < pv.n; i++)
		cr_assert_eq(pv.v[i].piece_offset_bytes, 16 * KIB, "collected the old piece");
	/* What the new place gets written is still collected. */
	cr_assert_eq(cfs_extent_mark_written(map, 8 * KIB, 512, dev(7, 24 * KIB)), 0);
	pv.n = 0;
	cr_assert_eq(cfs_extent_collect_dirty(map, piece_views_cb, &pv), 0);
	cr_assert_eq(pv.n, 1);
	cr_assert_eq(pv.v[0].piece_offset_bytes, 16 * KIB);
}
