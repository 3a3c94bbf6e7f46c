/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * extent_race.c — the extent map's concurrency cases as a plain program, so
 * they run under ThreadSanitizer (make BUILD=tsan bench-build; Criterion's
 * arena cannot be set up under TSan on this kernel, so tests/unit/
 * test_extent.c cannot): lock-free lookups of a stable range while another
 * thread splits, merges, punches and clears runs next to it; completions
 * racing the committer's fold; completions racing a clearer (and a read's
 * written-state snapshot racing both); lookups racing
 * online moves (cfs_extent_remap); completions into pieces racing the fold;
 * lookups racing a piece's growth (cfs_extent_relocate). Exits 0, or 1 with
 * a message on the first wrong answer (TSan reports make it exit 66).
 *
 * usage: extent_race [rounds]   (default 200; tests/integration/extent_race.sh)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "fs/meta/extent.h"

#define UNIT (64u * 1024)
#define SECTOR 512u
#define SPU (UNIT / SECTOR)
#define DATA0 (1u << 20)
#define STABLE 64u

static struct cfs_extent_geom geom;
static struct cfs_extent_map *map;
static atomic_bool stop;
static int rounds = 200;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "extent_race: %s:%d: ", __func__, __LINE__);               \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static uint64_t dev(uint64_t su, uint64_t in_unit)
{
	return DATA0 + su * UNIT + in_unit;
}

static int nop(void *arg, const struct cfs_extent_unit_view *v)
{
	(void)arg;
	(void)v;
	return 0;
}

static void fresh_map(void)
{
	if (map) {
		cfs_extent_quiesce(map);
		cfs_extent_map_destroy(map);
	}
	CHECK(cfs_extent_map_create(&geom, NULL, NULL, &map) == 0, "map_create");
	atomic_store(&stop, false);
}

static void join_all(pthread_t *t, int n)
{
	atomic_store(&stop, true);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

/* ---- 1. lookups of a stable range while runs split and merge next to it -------------- */

static void *stable_reader(void *p)
{
	uint64_t seed = (uint64_t)(uintptr_t)p;

	while (!atomic_load(&stop)) {
		struct cfs_extent_run run;
		uint64_t fu;
		bool w;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		fu = (seed >> 33) % STABLE;
		CHECK(cfs_extent_lookup(map, fu * UNIT + 512, UNIT, &run) == 0 && run.mapped &&
			      run.store_unit == fu && run.device_offset_bytes == dev(fu, 512),
		      "stable unit %llu looked up wrong", (unsigned long long)fu);
		CHECK(cfs_extent_written_span(map, fu * UNIT, UNIT, &w) == UNIT && w,
		      "stable unit %llu not wholly written", (unsigned long long)fu);
		CHECK(cfs_extent_lookup(map, (64 + (seed >> 40) % 128) * UNIT, 8 * UNIT, &run) == 0,
		      "lookup in the churn");
		CHECK(!run.mapped || run.store_unit >= 1000, "churn unit maps %llu",
		      (unsigned long long)run.store_unit);
	}
	return NULL;
}

static void split_and_merge(void)
{
	pthread_t t[2];

	fresh_map();
	CHECK(cfs_extent_map_units(map, 0, 0, STABLE) == 0, "map stable");
	CHECK(cfs_extent_mark_written(map, 0, STABLE * UNIT, dev(0, 0)) == 0, "write stable");
	CHECK(cfs_extent_collect_dirty(map, nop, NULL) == 0, "collect");
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, stable_reader, (void *)(uintptr_t)(i + 1));
	for (int r = 0; r < rounds; r++) {
		uint64_t base = 1000 + (uint64_t)(r % 7) * 200;

		CHECK(cfs_extent_map_units(map, 64, base, 128) == 0, "map churn");
		for (uint64_t fu = 64; fu < 192; fu += 3)
			CHECK(cfs_extent_mark_written(map, fu * UNIT, fu % 2 ? UNIT : 8 * SECTOR,
						      dev(base + fu - 64, 0)) == 0,
			      "split");
		CHECK(cfs_extent_collect_dirty(map, nop, NULL) == 0, "collect");
		CHECK(cfs_extent_mark_written(map, 64 * UNIT, 128 * UNIT, dev(base, 0)) == 0,
		      "fill");
		CHECK(cfs_extent_collect_dirty(map, nop, NULL) == 0, "fold");
		CHECK(cfs_extent_unmap(map, 100, 20, NULL, NULL) == 20, "punch");
		CHECK(cfs_extent_mark_unwritten(map, 150 * UNIT + 1024, 4096, NULL, NULL) == 0,
		      "clear");
		CHECK(cfs_extent_unmap(map, 64, 128, NULL, NULL) == 108, "unmap churn");
		cfs_extent_quiesce(map);
	}
	join_all(t, 2);
}

/* ---- 2. completions racing the committer's fold --------------------------------------- */

static void *sector_marker(void *p)
{
	int id = (int)(uintptr_t)p;

	for (uint32_t s = 0; s < SPU; s++)
		for (uint64_t fu = (uint64_t)id; fu < 96; fu += 2) {
			uint32_t sec = (s * 37 + (uint32_t)fu) % SPU;

			CHECK(cfs_extent_mark_written(map, fu * UNIT + sec * SECTOR, SECTOR,
						      dev(fu, sec * SECTOR)) == 0,
			      "mark");
		}
	return NULL;
}

static void *collector(void *p)
{
	(void)p;
	while (!atomic_load(&stop)) {
		CHECK(cfs_extent_collect_dirty(map, nop, NULL) == 0, "collect");
		cfs_extent_quiesce(map);
	}
	return NULL;
}

static void fold_race(void)
{
	pthread_t t[2], c;
	bool w;

	fresh_map();
	CHECK(cfs_extent_map_units(map, 0, 0, 96) == 0, "map");
	pthread_create(&c, NULL, collector, NULL);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, sector_marker, (void *)(uintptr_t)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	join_all(&c, 1);
	CHECK(cfs_extent_written_span(map, 0, 96 * UNIT, &w) == 96 * UNIT && w,
	      "a completed write was lost to the fold");
}

/* ---- 3. completions racing a clearer -------------------------------------------------- */

static void *clearer(void *p)
{
	(void)p;
	while (!atomic_load(&stop))
		CHECK(cfs_extent_mark_unwritten(map, 0, UNIT / 2, NULL, NULL) == 0, "clear");
	return NULL;
}

/* A read's written-state snapshot while sector 0 flips: never an empty span
 * (a data path READ asserts it). */
static void *span_reader(void *p)
{
	(void)p;
	while (!atomic_load(&stop)) {
		bool w;

		CHECK(cfs_extent_written_span(map, 0, UNIT / 2, &w) > 0,
		      "an empty span while sector 0 flips");
	}
	return NULL;
}

static void clear_race(void)
{
	pthread_t c[2];
	bool w;

	fresh_map();
	CHECK(cfs_extent_map_units(map, 0, 0, 1) == 0, "map");
	pthread_create(&c[0], NULL, clearer, NULL);
	pthread_create(&c[1], NULL, span_reader, NULL);
	for (int r = 0; r < 100 * rounds; r++) {
		uint32_t s = SPU / 2 + (uint32_t)(r % (SPU / 2));

		CHECK(cfs_extent_mark_written(map, s * SECTOR, SECTOR, dev(0, s * SECTOR)) == 0,
		      "mark");
		CHECK(cfs_extent_sector_written(map, s * SECTOR), "sector %u lost to a clear", s);
		if (r % 7 == 0)
			CHECK(cfs_extent_mark_written(map, 0, SECTOR, dev(0, 0)) == 0, "mark 0");
	}
	join_all(c, 2);
	CHECK(cfs_extent_written_span(map, UNIT / 2, UNIT / 2, &w) == UNIT / 2 && w,
	      "second half not written");
}

/* ---- 4. lookups racing online moves --------------------------------------------------- */

static void *move_reader(void *p)
{
	(void)p;
	while (!atomic_load(&stop)) {
		for (uint64_t fu = 0; fu < 16; fu++) {
			struct cfs_extent_run run;

			CHECK(cfs_extent_lookup(map, fu * UNIT + SECTOR, SECTOR, &run) == 0 &&
				      run.mapped,
			      "unit %llu unmapped while it moved", (unsigned long long)fu);
			CHECK(run.store_unit == fu || run.store_unit == 1000 + fu,
			      "unit %llu maps %llu", (unsigned long long)fu,
			      (unsigned long long)run.store_unit);
			CHECK(cfs_extent_sector_written(map, fu * UNIT + SECTOR) &&
				      !cfs_extent_sector_written(map, fu * UNIT + 2 * SECTOR),
			      "unit %llu's written-state changed while it moved",
			      (unsigned long long)fu);
		}
	}
	return NULL;
}

static void move_race(void)
{
	pthread_t t;

	fresh_map();
	CHECK(cfs_extent_map_units(map, 0, 0, 16) == 0, "map");
	for (uint64_t fu = 0; fu < 16; fu++)
		CHECK(cfs_extent_mark_written(map, fu * UNIT + SECTOR, SECTOR, dev(fu, SECTOR)) ==
			      0,
		      "mark");
	pthread_create(&t, NULL, move_reader, NULL);
	for (int r = 0; r < 10 * rounds; r++)
		for (uint64_t fu = 0; fu < 16; fu++)
			CHECK(cfs_extent_remap(map, fu, r % 2 ? 1000 + fu : fu,
					       r % 2 ? fu : 1000 + fu, NULL, NULL) == 0,
			      "remap");
	join_all(&t, 1);
}

/* ---- 5. completions into pieces racing the fold --------------------------------------- */

#define PIECE_BYTES (16u * 1024)
#define PIECE_SECTORS (PIECE_BYTES / SECTOR)

/* File unit fu maps the piece (fu / 4 + 10, fu % 4 * PIECE_BYTES). */
static struct cfs_extent_loc piece_of(uint64_t fu)
{
	return (struct cfs_extent_loc){fu / 4 + 10, (uint32_t)(fu % 4) * PIECE_BYTES, PIECE_BYTES};
}

static void *piece_marker(void *p)
{
	int id = (int)(uintptr_t)p;

	for (uint32_t s = 0; s < PIECE_SECTORS; s++)
		for (uint64_t fu = (uint64_t)id; fu < 32; fu += 2) {
			uint32_t sec = (s * 7 + (uint32_t)fu) % PIECE_SECTORS;
			struct cfs_extent_loc l = piece_of(fu);

			CHECK(cfs_extent_mark_written(
				      map, fu * UNIT + sec * SECTOR, SECTOR,
				      dev(l.store_unit, l.piece_offset_bytes + sec * SECTOR)) == 0,
			      "mark piece");
		}
	return NULL;
}

static void piece_fold_race(void)
{
	pthread_t t[2], c;
	bool w;

	fresh_map();
	for (uint64_t fu = 0; fu < 32; fu++) {
		struct cfs_extent_loc l = piece_of(fu);

		CHECK(cfs_extent_map_piece(map, fu, &l) == 0, "map piece");
	}
	pthread_create(&c, NULL, collector, NULL);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, piece_marker, (void *)(uintptr_t)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	join_all(&c, 1);
	for (uint64_t fu = 0; fu < 32; fu++) {
		CHECK(cfs_extent_written_span(map, fu * UNIT, UNIT, &w) == PIECE_BYTES && w,
		      "a completed write into piece %llu was lost", (unsigned long long)fu);
		CHECK(!cfs_extent_sector_written(map, fu * UNIT + PIECE_BYTES),
		      "written past piece %llu", (unsigned long long)fu);
	}
}

/* ---- 6. lookups racing a piece's growth ----------------------------------------------- */

/* A file unit's places as it grows: 4 KiB, 16 KiB, 32 KiB pieces, then a
 * whole unit; the lookup of sector 1 must find one of them, written, and
 * sector 2 unwritten, at every moment. */
static struct cfs_extent_loc grow_place(uint64_t fu, int stage)
{
	static const uint32_t bytes[] = {4096, 16384, 32768, 0};

	return (struct cfs_extent_loc){2000 + fu * 4 + (uint64_t)stage,
				       bytes[stage] ? bytes[stage] : 0, bytes[stage]};
}

static void *grow_reader(void *p)
{
	(void)p;
	while (!atomic_load(&stop)) {
		for (uint64_t fu = 0; fu < 8; fu++) {
			struct cfs_extent_run run;
			bool known = false;

			CHECK(cfs_extent_lookup(map, fu * UNIT + SECTOR, SECTOR, &run) == 0 &&
				      run.mapped,
			      "unit %llu unmapped while it grew", (unsigned long long)fu);
			for (int st = 0; st < 4; st++) {
				struct cfs_extent_loc l = grow_place(fu, st);

				known |= run.device_offset_bytes ==
					 dev(l.store_unit, l.piece_offset_bytes + SECTOR);
			}
			CHECK(known, "unit %llu looked up at %llu", (unsigned long long)fu,
			      (unsigned long long)run.device_offset_bytes);
			CHECK(cfs_extent_sector_written(map, fu * UNIT + SECTOR) &&
				      !cfs_extent_sector_written(map, fu * UNIT + 2 * SECTOR),
			      "unit %llu's written-state changed while it grew",
			      (unsigned long long)fu);
		}
	}
	return NULL;
}

static void piece_grow_race(void)
{
	for (int r = 0; r < rounds; r++) {
		pthread_t t;

		fresh_map();
		for (uint64_t fu = 0; fu < 8; fu++) {
			struct cfs_extent_loc l = grow_place(fu, 0);

			CHECK(cfs_extent_map_piece(map, fu, &l) == 0, "map piece");
			CHECK(cfs_extent_mark_written(
				      map, fu * UNIT + SECTOR, SECTOR,
				      dev(l.store_unit, l.piece_offset_bytes + SECTOR)) == 0,
			      "mark");
			if (r % 2)
				CHECK(cfs_extent_collect_dirty(map, nop, NULL) == 0, "collect");
		}
		pthread_create(&t, NULL, grow_reader, NULL);
		for (int st = 1; st < 4; st++)
			for (uint64_t fu = 0; fu < 8; fu++) {
				struct cfs_extent_loc from = grow_place(fu, st - 1);
				struct cfs_extent_loc to = grow_place(fu, st);

				CHECK(cfs_extent_relocate(map, fu, &from, &to, NULL, NULL) == 0,
				      "relocate");
			}
		join_all(&t, 1);
	}
}

int main(int argc, char **argv)
{
	if (argc > 1)
		rounds = atoi(argv[1]);
	CHECK(cfs_extent_geom_init(&geom, UNIT, SECTOR, 4096, DATA0) == 0, "geom");
	split_and_merge();
	fold_race();
	clear_race();
	move_race();
	piece_fold_race();
	piece_grow_race();
	cfs_extent_quiesce(map);
	cfs_extent_map_destroy(map);
	printf("extent_race: %d rounds, ok\n", rounds);
	return 0;
}
