/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * extent.c — the per-file map (file unit -> unit record) and the written-state
 * of sectors, read without locks by the data path.
 *
 * Main invariants:
 *   - A slot is NULL or points to a live record; a record's store unit and
 *     file unit never change; a record leaves its slot only under the inode
 *     lock and is then retired (freed by cfs_extent_quiesce()).
 *   - A record's state word is NONE, ALL, or a bitmap. Bits only go from 0
 *     to 1 in place (atomic OR, any thread). Anything that clears bits runs
 *     under the inode lock and replaces the state word with a new one
 *     (copy, change, compare-and-swap), after FREEZING the old bitmap:
 *     a writer that set bits in a bitmap and then finds it frozen redoes its
 *     OR on whatever replaced it, so no completed write is lost, and a
 *     writer that found it unfrozen is included in the copy.
 *   - bitmap->set_count is the number of set bits: every bit transition is
 *     counted by the thread whose fetch_or / copy observed it.
 *
 * Memory order: sequentially consistent everywhere the data path meets the
 * inode-locked side (slots, state words, freeze flags, dirty flags): the
 * loads compile to plain loads on x86, and correctness arguments stay simple.
 *
 * What it does not do: allocate store units, log, or lock the inode.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "fs/base/assert.h"
#include "fs/meta/extent.h"

#define WS_NONE ((uintptr_t)CFS_EXTENT_WS_NONE)
#define WS_ALL ((uintptr_t)CFS_EXTENT_WS_ALL)

#define XU_DIRTY (1u << 0) /* on the map's dirty stack */
#define XU_DEAD (1u << 1)  /* unmapped: retired */

struct ws_bitmap {
	_Atomic uint32_t set_count;	/* bits set */
	_Atomic uint32_t frozen;	/* being replaced under the inode lock */
	struct ws_bitmap *retired_next; /* map->retired_bitmaps */
	_Atomic uint64_t words[];	/* sectors_per_unit bits */
};

struct xunit {
	uint64_t store_unit;	    /* [const] */
	uint64_t file_unit;	    /* [const] */
	_Atomic uintptr_t ws;	    /* WS_NONE, WS_ALL or struct ws_bitmap * */
	_Atomic uint32_t flags;	    /* XU_* */
	struct xunit *dirty_next;   /* dirty stack link */
	struct xunit *retired_next; /* [inode lock] retired list link */
};

typedef _Atomic(struct xunit *) slot_t;

struct cfs_extent_map {
	const struct cfs_extent_geom *geom;
	_Atomic(void *) root; /* root_slots x _Atomic(slot_t *), lazily */
	_Atomic uint64_t mapped_units;
	_Atomic(struct xunit *) dirty_head; /* Treiber stack: push any thread, pop all */
	_Atomic uint32_t map_dirty;	    /* notify sent since the last collect */
	cfs_extent_notify_fn notify;
	void *notify_arg;
	struct xunit *retired_units;		     /* [inode lock] */
	_Atomic(struct ws_bitmap *) retired_bitmaps; /* push any thread, drain at quiesce */
};

static inline bool ws_is_bitmap(uintptr_t ws)
{
	return ws != WS_NONE && ws != WS_ALL;
}

static inline struct ws_bitmap *ws_bitmap(uintptr_t ws)
{
	return (struct ws_bitmap *)ws;
}

static inline uint32_t words_per_unit(const struct cfs_extent_geom *g)
{
	return (g->sectors_per_unit + 63) / 64;
}

/* ---- geometry ------------------------------------------------------------------- */

static inline bool is_pow2_u64(uint64_t x)
{
	return x && !(x & (x - 1));
}

static uint32_t log2_u64(uint64_t x)
{
	return 63u - (uint32_t)__builtin_clzll(x);
}

int cfs_extent_geom_init(struct cfs_extent_geom *geom, uint32_t unit_bytes, uint32_t sector_bytes,
			 uint64_t store_units, uint64_t data_offset_bytes)
{
	uint64_t leaf = CFS_EXTENT_LEAF_SLOTS_MIN;

	memset(geom, 0, sizeof(*geom));
	if (!is_pow2_u64(unit_bytes) || !is_pow2_u64(sector_bytes) || sector_bytes > unit_bytes)
		return -EINVAL;
	if (unit_bytes / sector_bytes > CFS_EXTENT_SECTORS_MAX || store_units == 0)
		return -EINVAL;
	/* Twice the store: one file can take every unit and still be refused
	 * with ENOSPC by the allocator, not EFBIG by its map (tmpfs and the
	 * RAM mount promise ENOSPC). About sqrt(2 * store_units) per level:
	 * an empty map costs nothing, a mapped file one root and the leaves
	 * it touches. */
	while (leaf < CFS_EXTENT_LEAF_SLOTS_MAX && leaf * leaf < 2 * store_units)
		leaf <<= 1;
	geom->unit_bytes = unit_bytes;
	geom->sector_bytes = sector_bytes;
	geom->unit_shift = log2_u64(unit_bytes);
	geom->sector_shift = log2_u64(sector_bytes);
	geom->sectors_per_unit = unit_bytes / sector_bytes;
	geom->leaf_slots = leaf;
	geom->leaf_shift = log2_u64(leaf);
	geom->root_slots = (2 * store_units + leaf - 1) / leaf;
	geom->max_units = geom->root_slots * leaf;
	geom->store_units = store_units;
	geom->data_offset_bytes = data_offset_bytes;
	CFS_ASSERT(geom->max_units >= 2 * store_units);
	return 0;
}

/* ---- slots ---------------------------------------------------------------------- */

static inline _Atomic(slot_t *) *root_of(const struct cfs_extent_map *map)
{
	return (_Atomic(slot_t *) *)atomic_load(&((struct cfs_extent_map *)map)->root);
}

static inline struct xunit *slot_load(const struct cfs_extent_map *map, uint64_t fu)
{
	_Atomic(slot_t *) *root;
	slot_t *leaf;

	if (fu >= map->geom->max_units)
		return NULL;
	root = root_of(map);
	if (!root)
		return NULL;
	leaf = atomic_load(&root[fu >> map->geom->leaf_shift]);
	if (!leaf)
		return NULL;
	return atomic_load(&leaf[fu & (map->geom->leaf_slots - 1)]);
}

/* First file unit >= fu that might be mapped (skips absent leaves), or
 * max_units. */
static uint64_t next_leaf_unit(const struct cfs_extent_map *map, uint64_t fu)
{
	const struct cfs_extent_geom *g = map->geom;
	_Atomic(slot_t *) *root = root_of(map);

	if (!root)
		return g->max_units;
	while (fu < g->max_units) {
		if (atomic_load(&root[fu >> g->leaf_shift]))
			return fu;
		fu = ((fu >> g->leaf_shift) + 1) << g->leaf_shift;
	}
	return g->max_units;
}

/* [inode lock] The slot for fu, allocating the root and leaf. NULL on ENOMEM. */
static slot_t *slot_ptr_alloc(struct cfs_extent_map *map, uint64_t fu)
{
	const struct cfs_extent_geom *g = map->geom;
	_Atomic(slot_t *) *root = root_of(map);
	slot_t *leaf;

	CFS_ASSERT(fu < g->max_units);
	if (!root) {
		root = calloc(g->root_slots, sizeof(*root));
		if (!root)
			return NULL;
		atomic_store(&map->root, (void *)root);
	}
	leaf = atomic_load(&root[fu >> g->leaf_shift]);
	if (!leaf) {
		leaf = calloc(g->leaf_slots, sizeof(*leaf));
		if (!leaf)
			return NULL;
		atomic_store(&root[fu >> g->leaf_shift], leaf);
	}
	return &leaf[fu & (g->leaf_slots - 1)];
}

/* [inode lock] The slot for fu if its leaf exists, else NULL. */
static slot_t *slot_ptr(struct cfs_extent_map *map, uint64_t fu)
{
	const struct cfs_extent_geom *g = map->geom;
	_Atomic(slot_t *) *root = root_of(map);
	slot_t *leaf;

	if (!root || fu >= g->max_units)
		return NULL;
	leaf = atomic_load(&root[fu >> g->leaf_shift]);
	return leaf ? &leaf[fu & (g->leaf_slots - 1)] : NULL;
}

/* ---- bitmaps -------------------------------------------------------------------- */

static struct ws_bitmap *bitmap_new(const struct cfs_extent_geom *g)
{
	struct ws_bitmap *bm = calloc(1, sizeof(*bm) + words_per_unit(g) * sizeof(uint64_t));

	return bm;
}

/* Mask of the bits of word w that fall in sectors [first, end). */
static inline uint64_t range_mask(uint32_t w, uint32_t first, uint32_t end)
{
	uint64_t lo = (uint64_t)w * 64, hi = lo + 64;
	uint64_t a = first > lo ? first : lo;
	uint64_t b = end < hi ? end : hi;

	if (a >= b)
		return 0;
	if (b - a == 64)
		return ~0ull;
	return ((1ull << (b - a)) - 1) << (a - lo);
}

static void retire_bitmap(struct cfs_extent_map *map, struct ws_bitmap *bm)
{
	struct ws_bitmap *head = atomic_load(&map->retired_bitmaps);

	do {
		bm->retired_next = head;
	} while (!atomic_compare_exchange_weak(&map->retired_bitmaps, &head, bm));
}

static void mark_dirty(struct cfs_extent_map *map, struct xunit *u)
{
	struct xunit *head;

	if (atomic_fetch_or(&u->flags, XU_DIRTY) & XU_DIRTY)
		return;
	head = atomic_load(&map->dirty_head);
	do {
		u->dirty_next = head;
	} while (!atomic_compare_exchange_weak(&map->dirty_head, &head, u));
	if (atomic_exchange(&map->map_dirty, 1) == 0 && map->notify)
		map->notify(map->notify_arg);
}

static void view_of(const struct cfs_extent_map *map, struct xunit *u,
		    struct cfs_extent_unit_view *view);

/* ---- lifecycle ------------------------------------------------------------------ */

int cfs_extent_map_create(const struct cfs_extent_geom *geom, cfs_extent_notify_fn notify,
			  void *notify_arg, struct cfs_extent_map **out)
{
	struct cfs_extent_map *map = calloc(1, sizeof(*map));

	*out = NULL;
	if (!map)
		return -ENOMEM;
	map->geom = geom;
	map->notify = notify;
	map->notify_arg = notify_arg;
	*out = map;
	return 0;
}

static void xunit_free(struct xunit *u)
{
	uintptr_t ws = atomic_load(&u->ws);

	if (ws_is_bitmap(ws))
		free(ws_bitmap(ws));
	free(u);
}

void cfs_extent_map_destroy(struct cfs_extent_map *map)
{
	_Atomic(slot_t *) *root;
	struct ws_bitmap *bm;

	if (!map)
		return;
	root = root_of(map);
	for (uint64_t r = 0; root && r < map->geom->root_slots; r++) {
		slot_t *leaf = atomic_load(&root[r]);

		if (!leaf)
			continue;
		for (uint64_t i = 0; i < map->geom->leaf_slots; i++) {
			struct xunit *u = atomic_load(&leaf[i]);

			if (u)
				xunit_free(u);
		}
		free(leaf);
	}
	free(root);
	while (map->retired_units) {
		struct xunit *u = map->retired_units;

		map->retired_units = u->retired_next;
		xunit_free(u);
	}
	bm = atomic_load(&map->retired_bitmaps);
	while (bm) {
		struct ws_bitmap *next = bm->retired_next;

		free(bm);
		bm = next;
	}
	free(map);
}

uint64_t cfs_extent_mapped_units(const struct cfs_extent_map *map)
{
	return atomic_load(&((struct cfs_extent_map *)map)->mapped_units);
}

/* ---- lookups -------------------------------------------------------------------- */

int cfs_extent_lookup(const struct cfs_extent_map *map, uint64_t offset_bytes,
		      uint64_t length_bytes, struct cfs_extent_run *run)
{
	const struct cfs_extent_geom *g = map->geom;
	uint64_t fu = offset_bytes >> g->unit_shift;
	uint64_t in_unit = offset_bytes & (g->unit_bytes - 1);
	uint64_t end = offset_bytes + length_bytes;
	uint64_t covered, next;
	struct xunit *first;

	if (length_bytes == 0)
		return -EINVAL;
	if (end < offset_bytes)
		end = UINT64_MAX;
	run->offset_bytes = offset_bytes;
	first = slot_load(map, fu);
	if (!first) {
		/* A hole: extend over unmapped units, whole leaves at a time. */
		run->mapped = false;
		run->store_unit = 0;
		run->device_offset_bytes = 0;
		next = fu + 1;
		while (next < g->max_units && (next << g->unit_shift) < end) {
			uint64_t leaf_next = next_leaf_unit(map, next);

			if (leaf_next != next) {
				next = leaf_next;
				continue;
			}
			if (slot_load(map, next))
				break;
			next++;
		}
		covered = next >= g->max_units ? UINT64_MAX : (next << g->unit_shift);
		run->length_bytes = (covered > end ? end : covered) - offset_bytes;
		return 0;
	}
	run->mapped = true;
	run->store_unit = first->store_unit;
	run->device_offset_bytes =
		g->data_offset_bytes + (first->store_unit << g->unit_shift) + in_unit;
	next = fu + 1;
	while (next < g->max_units && (next << g->unit_shift) < end) {
		struct xunit *u = slot_load(map, next);

		if (!u || u->store_unit != first->store_unit + (next - fu))
			break;
		next++;
	}
	covered = next << g->unit_shift;
	run->length_bytes = (covered > end ? end : covered) - offset_bytes;
	return 0;
}

/* Written-state of sector s of a state word. */
static inline bool ws_sector(uintptr_t ws, uint32_t s)
{
	if (ws == WS_NONE)
		return false;
	if (ws == WS_ALL)
		return true;
	return (atomic_load(&ws_bitmap(ws)->words[s / 64]) >> (s % 64)) & 1;
}

/* First sector >= s (and < end) whose state differs from `state`, or end. */
static uint32_t ws_scan(uintptr_t ws, uint32_t s, uint32_t end, bool state)
{
	struct ws_bitmap *bm;

	if (ws == WS_NONE)
		return state ? s : end;
	if (ws == WS_ALL)
		return state ? end : s;
	bm = ws_bitmap(ws);
	while (s < end) {
		uint64_t word = atomic_load(&bm->words[s / 64]);

		if (state)
			word = ~word;
		word >>= s % 64;
		if (word) {
			uint32_t hit = s + (uint32_t)__builtin_ctzll(word);

			return hit < end ? hit : end;
		}
		s = (s / 64 + 1) * 64;
	}
	return end;
}

uint64_t cfs_extent_written_span(const struct cfs_extent_map *map, uint64_t offset_bytes,
				 uint64_t length_bytes, bool *written)
{
	const struct cfs_extent_geom *g = map->geom;
	uint64_t end = offset_bytes + length_bytes;
	uint64_t pos = offset_bytes;
	bool state = false, have_state = false;

	if (end < offset_bytes)
		end = UINT64_MAX;
	while (pos < end) {
		uint64_t fu = pos >> g->unit_shift;
		uint64_t unit_start = fu << g->unit_shift;
		uint64_t unit_end = unit_start + g->unit_bytes;
		struct xunit *u = slot_load(map, fu);
		uintptr_t ws = u ? atomic_load(&u->ws) : WS_NONE;
		uint32_t s = (uint32_t)((pos - unit_start) >> g->sector_shift);
		uint32_t stop;
		uint64_t stop_bytes;

		if (!have_state) {
			state = ws_sector(ws, s);
			have_state = true;
		}
		stop = ws_scan(ws, s, g->sectors_per_unit, state);
		stop_bytes = unit_start + ((uint64_t)stop << g->sector_shift);
		if (stop < g->sectors_per_unit) {
			pos = stop_bytes;
			break;
		}
		pos = unit_end;
	}
	*written = state;
	return (pos > end ? end : pos) - offset_bytes;
}

bool cfs_extent_sector_written(const struct cfs_extent_map *map, uint64_t offset_bytes)
{
	const struct cfs_extent_geom *g = map->geom;
	struct xunit *u = slot_load(map, offset_bytes >> g->unit_shift);
	uint32_t s;

	if (!u)
		return false;
	s = (uint32_t)((offset_bytes & (g->unit_bytes - 1)) >> g->sector_shift);
	return ws_sector(atomic_load(&u->ws), s);
}

/* ---- marking written (lock-free) ---------------------------------------------------- */

/* Set sectors [first, end) of u. 0 or -ENOMEM. */
static int unit_mark_written(struct cfs_extent_map *map, struct xunit *u, uint32_t first,
			     uint32_t end)
{
	const struct cfs_extent_geom *g = map->geom;
	uint32_t spu = g->sectors_per_unit;
	bool whole = first == 0 && end == spu;

	for (;;) {
		uintptr_t ws = atomic_load(&u->ws);
		struct ws_bitmap *bm;
		uint32_t newly = 0;

		if (ws == WS_ALL)
			return 0;
		if (ws == WS_NONE) {
			uintptr_t next = WS_ALL;

			if (!whole) {
				bm = bitmap_new(g);
				if (!bm)
					return -ENOMEM;
				for (uint32_t w = first / 64; w <= (end - 1) / 64; w++)
					atomic_store(&bm->words[w], range_mask(w, first, end));
				atomic_store(&bm->set_count, end - first);
				next = (uintptr_t)bm;
			}
			if (atomic_compare_exchange_strong(&u->ws, &ws, next)) {
				mark_dirty(map, u);
				return 0;
			}
			if (!whole)
				free(ws_bitmap(next));
			continue;
		}
		bm = ws_bitmap(ws);
		for (uint32_t w = first / 64; w <= (end - 1) / 64; w++) {
			uint64_t mask = range_mask(w, first, end);
			uint64_t old = atomic_fetch_or(&bm->words[w], mask);

			newly += (uint32_t)__builtin_popcountll(mask & ~old);
		}
		if (newly)
			atomic_fetch_add(&bm->set_count, newly);
		if (atomic_load(&bm->frozen)) {
			/* Being replaced under the inode lock: the copy may have
			 * missed our bits. Wait for the new state word and redo
			 * the OR on it (idempotent). */
			while (atomic_load(&u->ws) == ws)
				sched_yield();
			continue;
		}
		if (atomic_load(&bm->set_count) == spu) {
			uintptr_t expect = ws;

			/* Full: switch to ALL; whoever wins retires the bitmap.
			 * Losing means a replacement that already holds our bits. */
			if (atomic_compare_exchange_strong(&u->ws, &expect, WS_ALL))
				retire_bitmap(map, bm);
		}
		if (newly)
			mark_dirty(map, u);
		return 0;
	}
}

int cfs_extent_mark_written(struct cfs_extent_map *map, uint64_t offset_bytes,
			    uint64_t length_bytes, uint64_t device_offset_bytes)
{
	const struct cfs_extent_geom *g = map->geom;
	uint64_t end = offset_bytes + length_bytes;
	uint64_t rel, store_first, fu_first;
	uint64_t pos = offset_bytes;

	CFS_ASSERT((offset_bytes & (g->sector_bytes - 1)) == 0);
	CFS_ASSERT((length_bytes & (g->sector_bytes - 1)) == 0);
	CFS_ASSERT(device_offset_bytes >= g->data_offset_bytes);
	rel = device_offset_bytes - g->data_offset_bytes;
	/* The device range was derived from the same offset within the unit. */
	CFS_ASSERT((rel & (g->unit_bytes - 1)) == (offset_bytes & (g->unit_bytes - 1)));
	store_first = rel >> g->unit_shift;
	fu_first = offset_bytes >> g->unit_shift;

	while (pos < end) {
		uint64_t fu = pos >> g->unit_shift;
		uint64_t unit_start = fu << g->unit_shift;
		uint64_t stop = unit_start + g->unit_bytes < end ? unit_start + g->unit_bytes : end;
		struct xunit *u = slot_load(map, fu);
		int ret;

		/* Skip units unmapped (or re-mapped elsewhere) while the write
		 * was in flight: the bytes went to the retired store unit. */
		if (u && u->store_unit == store_first + (fu - fu_first)) {
			ret = unit_mark_written(map, u,
						(uint32_t)((pos - unit_start) >> g->sector_shift),
						(uint32_t)((stop - unit_start) >> g->sector_shift));
			if (ret)
				return ret;
		}
		pos = stop;
	}
	return 0;
}

/* ---- changes under the inode lock ------------------------------------------------------ */

int64_t cfs_extent_unit_get(const struct cfs_extent_map *map, uint64_t file_unit)
{
	struct xunit *u = slot_load(map, file_unit);

	return u ? (int64_t)u->store_unit : -1;
}

int cfs_extent_map_units(struct cfs_extent_map *map, uint64_t file_unit, uint64_t store_unit,
			 uint64_t count)
{
	const struct cfs_extent_geom *g = map->geom;
	struct xunit **fresh;
	uint64_t added = 0;
	int ret = 0;

	if (count == 0)
		return 0;
	if (file_unit >= g->max_units || count > g->max_units - file_unit)
		return -EFBIG;
	if (store_unit >= g->store_units || count > g->store_units - store_unit)
		return -ERANGE;
	for (uint64_t i = 0; i < count; i++) {
		struct xunit *u = slot_load(map, file_unit + i);

		if (u && u->store_unit != store_unit + i)
			return -EEXIST;
	}
	fresh = calloc(count, sizeof(*fresh));
	if (!fresh)
		return -ENOMEM;
	/* Allocate everything before publishing anything: all or nothing. */
	for (uint64_t i = 0; i < count; i++) {
		if (slot_load(map, file_unit + i))
			continue;
		if (!slot_ptr_alloc(map, file_unit + i)) {
			ret = -ENOMEM;
			goto out_free;
		}
		fresh[i] = calloc(1, sizeof(**fresh));
		if (!fresh[i]) {
			ret = -ENOMEM;
			goto out_free;
		}
		fresh[i]->store_unit = store_unit + i;
		fresh[i]->file_unit = file_unit + i;
	}
	for (uint64_t i = 0; i < count; i++) {
		if (!fresh[i])
			continue;
		atomic_store(slot_ptr(map, file_unit + i), fresh[i]);
		fresh[i] = NULL;
		added++;
	}
	atomic_fetch_add(&map->mapped_units, added);
out_free:
	for (uint64_t i = 0; i < count; i++)
		free(fresh[i]);
	free(fresh);
	return ret;
}

uint64_t cfs_extent_unmap(struct cfs_extent_map *map, uint64_t file_unit, uint64_t count,
			  cfs_extent_unmap_fn fn, void *arg)
{
	const struct cfs_extent_geom *g = map->geom;
	uint64_t end, fu, removed = 0;
	uint64_t run_fu = 0, run_store = 0, run_count = 0;

	if (file_unit >= g->max_units)
		return 0;
	end = count > g->max_units - file_unit ? g->max_units : file_unit + count;
	fu = next_leaf_unit(map, file_unit);
	while (fu < end) {
		slot_t *slot = slot_ptr(map, fu);
		struct xunit *u = slot ? atomic_load(slot) : NULL;

		if (!slot) {
			fu = next_leaf_unit(map, fu);
			continue;
		}
		if (u) {
			/* Unpublish first (seq_cst), then the caller checks the
			 * I/O count: a reader that raised it later sees NULL. */
			atomic_store(slot, NULL);
			atomic_fetch_or(&u->flags, XU_DEAD);
			u->retired_next = map->retired_units;
			map->retired_units = u;
			removed++;
			if (run_count && run_fu + run_count == fu &&
			    run_store + run_count == u->store_unit) {
				run_count++;
			} else {
				if (run_count && fn)
					fn(arg, run_fu, run_store, run_count);
				run_fu = fu;
				run_store = u->store_unit;
				run_count = 1;
			}
		}
		fu++;
	}
	if (run_count && fn)
		fn(arg, run_fu, run_store, run_count);
	atomic_fetch_sub(&map->mapped_units, removed);
	return removed;
}

int cfs_extent_remap(struct cfs_extent_map *map, uint64_t file_unit, uint64_t from_store_unit,
		     uint64_t to_store_unit, cfs_extent_unit_fn fn, void *arg)
{
	const struct cfs_extent_geom *g = map->geom;
	slot_t *slot = slot_ptr(map, file_unit);
	struct xunit *u = slot ? atomic_load(slot) : NULL;
	struct xunit *fresh;
	uintptr_t ws;

	if (!u || u->store_unit != from_store_unit)
		return -ESTALE;
	if (to_store_unit >= g->store_units)
		return -ERANGE;
	fresh = calloc(1, sizeof(*fresh));
	if (!fresh)
		return -ENOMEM;
	fresh->store_unit = to_store_unit;
	fresh->file_unit = file_unit;
	/* No write is in flight (the caller's promise), so the old state is
	 * stable: copy it. A bitmap is copied, never shared, because the old
	 * record's bitmap goes when the old record is freed. */
	ws = atomic_load(&u->ws);
	if (ws_is_bitmap(ws)) {
		struct ws_bitmap *old = ws_bitmap(ws), *bm = bitmap_new(g);

		if (!bm) {
			free(fresh);
			return -ENOMEM;
		}
		for (uint32_t w = 0; w < words_per_unit(g); w++)
			atomic_store(&bm->words[w], atomic_load(&old->words[w]));
		atomic_store(&bm->set_count, atomic_load(&old->set_count));
		ws = (uintptr_t)bm;
	}
	atomic_store(&fresh->ws, ws);
	/* Publish, then retire the old record as an unmap does. */
	atomic_store(slot, fresh);
	atomic_fetch_or(&u->flags, XU_DEAD);
	u->retired_next = map->retired_units;
	map->retired_units = u;
	if (fn) {
		struct cfs_extent_unit_view view;

		view_of(map, fresh, &view);
		return fn(arg, &view);
	}
	return 0;
}

/*
 * [inode lock] Replace u's state by applying op to sectors [first, end)
 * (bits: LSB-first bytes for the range, NULL = all ones). Freezes an old
 * bitmap before copying it so concurrent writers redo their OR on the new
 * state. dirty: mark the record dirty if the state changed.
 */
static int unit_update(struct cfs_extent_map *map, struct xunit *u, enum cfs_extent_ws_op op,
		       uint32_t first, uint32_t end, const uint8_t *bits)
{
	const struct cfs_extent_geom *g = map->geom;
	uint32_t spu = g->sectors_per_unit;
	uint32_t words = words_per_unit(g);

	for (;;) {
		uintptr_t ws = atomic_load(&u->ws);
		struct ws_bitmap *old = ws_is_bitmap(ws) ? ws_bitmap(ws) : NULL;
		struct ws_bitmap *bm = bitmap_new(g);
		uint32_t set = 0;
		uintptr_t next;

		if (!bm)
			return -ENOMEM;
		if (old)
			atomic_store(&old->frozen, 1);
		for (uint32_t w = 0; w < words; w++) {
			uint64_t v;
			uint64_t mask = range_mask(w, first, end);

			if (old)
				v = atomic_load(&old->words[w]);
			else
				v = ws == WS_ALL ? range_mask(w, 0, spu) : 0;
			if (mask) {
				uint64_t given = 0;

				for (uint32_t b = 0; b < 64; b++) {
					uint32_t s = w * 64 + b;

					if (!((mask >> b) & 1))
						continue;
					if (!bits ||
					    ((bits[(s - first) / 8] >> ((s - first) % 8)) & 1))
						given |= 1ull << b;
				}
				switch (op) {
				case CFS_EXTENT_WS_OP_OR:
					v |= given;
					break;
				case CFS_EXTENT_WS_OP_CLEAR:
					v &= ~mask;
					break;
				case CFS_EXTENT_WS_OP_SET:
					v = (v & ~mask) | given;
					break;
				}
			}
			atomic_store(&bm->words[w], v);
			set += (uint32_t)__builtin_popcountll(v);
		}
		if (set == 0) {
			next = WS_NONE;
		} else if (set == spu) {
			next = WS_ALL;
		} else {
			atomic_store(&bm->set_count, set);
			next = (uintptr_t)bm;
		}
		if (next != (uintptr_t)bm)
			free(bm);
		if (next == ws && !old) {
			return 0;
		}
		if (atomic_compare_exchange_strong(&u->ws, &ws, next)) {
			if (old)
				retire_bitmap(map, old);
			return 0;
		}
		/* A writer switched the state (NONE -> x, bitmap -> ALL) under us:
		 * start over from its result. An old bitmap we froze is retired
		 * by whoever replaced it. */
		if (next == (uintptr_t)bm)
			free(bm);
	}
}

int cfs_extent_mark_unwritten(struct cfs_extent_map *map, uint64_t offset_bytes,
			      uint64_t length_bytes, cfs_extent_clear_fn fn, void *arg)
{
	const struct cfs_extent_geom *g = map->geom;
	uint64_t end = offset_bytes + length_bytes;
	/* Whole sectors only: round the start up and the end down. */
	uint64_t first = (offset_bytes + g->sector_bytes - 1) & ~((uint64_t)g->sector_bytes - 1);
	uint64_t last = end & ~((uint64_t)g->sector_bytes - 1);
	uint64_t pos = first;

	if (end < offset_bytes)
		return -EINVAL;
	while (pos < last) {
		uint64_t fu = pos >> g->unit_shift;
		uint64_t unit_start = fu << g->unit_shift;
		uint64_t stop =
			unit_start + g->unit_bytes < last ? unit_start + g->unit_bytes : last;
		struct xunit *u = slot_load(map, fu);

		if (fu >= g->max_units)
			break;
		if (u) {
			uint32_t s0 = (uint32_t)((pos - unit_start) >> g->sector_shift);
			uint32_t s1 = (uint32_t)((stop - unit_start) >> g->sector_shift);
			uintptr_t before = atomic_load(&u->ws);
			int ret;

			if (before != WS_NONE) {
				ret = unit_update(map, u, CFS_EXTENT_WS_OP_CLEAR, s0, s1, NULL);
				if (ret)
					return ret;
				if (fn)
					fn(arg, fu, u->store_unit, s0, s1 - s0);
			}
		}
		pos = stop;
	}
	return 0;
}

/* ---- views, collect, for_each, apply ---------------------------------------------------- */

static void view_of(const struct cfs_extent_map *map, struct xunit *u,
		    struct cfs_extent_unit_view *view)
{
	uintptr_t ws = atomic_load(&u->ws);

	view->file_unit = u->file_unit;
	view->store_unit = u->store_unit;
	view->sector_count = map->geom->sectors_per_unit;
	view->bits = NULL;
	if (ws == WS_NONE) {
		view->state = CFS_EXTENT_WS_NONE;
	} else if (ws == WS_ALL) {
		view->state = CFS_EXTENT_WS_ALL;
	} else {
		view->state = CFS_EXTENT_WS_BITMAP;
		view->bits = ws_bitmap(ws)->words;
	}
}

void cfs_extent_view_bits(const struct cfs_extent_unit_view *view, uint32_t first_sector,
			  uint32_t sector_count, uint8_t *out)
{
	uint32_t bytes = (sector_count + 7) / 8;

	CFS_ASSERT(first_sector <= view->sector_count);
	CFS_ASSERT(sector_count <= view->sector_count - first_sector);
	if (view->state != CFS_EXTENT_WS_BITMAP) {
		memset(out, view->state == CFS_EXTENT_WS_ALL ? 0xff : 0, bytes);
		if (sector_count % 8)
			out[bytes - 1] &= (uint8_t)((1u << (sector_count % 8)) - 1);
		return;
	}
	memset(out, 0, bytes);
	for (uint32_t i = 0; i < sector_count; i++) {
		uint32_t s = first_sector + i;

		if ((atomic_load(&view->bits[s / 64]) >> (s % 64)) & 1)
			out[i / 8] |= (uint8_t)(1u << (i % 8));
	}
}

int cfs_extent_collect_dirty(struct cfs_extent_map *map, cfs_extent_unit_fn fn, void *arg)
{
	struct xunit *u;
	int ret = 0;

	atomic_store(&map->map_dirty, 0);
	u = atomic_exchange(&map->dirty_head, NULL);
	while (u) {
		struct xunit *next = u->dirty_next;
		struct cfs_extent_unit_view view;

		if (ret) {
			/* fn stopped the walk: the rest stay dirty. */
			atomic_fetch_and(&u->flags, ~XU_DIRTY);
			mark_dirty(map, u);
			u = next;
			continue;
		}
		/* Clear before reading: a write completing now re-dirties it. */
		atomic_fetch_and(&u->flags, ~XU_DIRTY);
		if (!(atomic_load(&u->flags) & XU_DEAD)) {
			view_of(map, u, &view);
			ret = fn(arg, &view);
			if (ret)
				mark_dirty(map, u); /* not consumed */
		}
		u = next;
	}
	return ret;
}

int cfs_extent_for_each(const struct cfs_extent_map *map, cfs_extent_unit_fn fn, void *arg)
{
	const struct cfs_extent_geom *g = map->geom;
	uint64_t fu = next_leaf_unit(map, 0);

	while (fu < g->max_units) {
		struct xunit *u = slot_load(map, fu);

		if (u) {
			struct cfs_extent_unit_view view;
			int ret;

			view_of(map, u, &view);
			ret = fn(arg, &view);
			if (ret)
				return ret;
		}
		fu++;
		if ((fu & (g->leaf_slots - 1)) == 0)
			fu = next_leaf_unit(map, fu);
	}
	return 0;
}

int cfs_extent_apply_ws(struct cfs_extent_map *map, uint64_t file_unit, uint64_t store_unit,
			enum cfs_extent_ws_op op, uint32_t first_sector, uint32_t sector_count,
			const uint8_t *bits)
{
	uint32_t spu = map->geom->sectors_per_unit;
	struct xunit *u;

	if (op > CFS_EXTENT_WS_OP_SET || first_sector > spu || sector_count > spu - first_sector)
		return -EINVAL;
	u = slot_load(map, file_unit);
	if (!u || u->store_unit != store_unit || sector_count == 0)
		return 0;
	return unit_update(map, u, op, first_sector, first_sector + sector_count, bits);
}

bool cfs_extent_quiesce(struct cfs_extent_map *map)
{
	struct xunit **link = &map->retired_units;
	struct ws_bitmap *bm = atomic_exchange(&map->retired_bitmaps, NULL);

	while (bm) {
		struct ws_bitmap *next = bm->retired_next;

		free(bm);
		bm = next;
	}
	while (*link) {
		struct xunit *u = *link;

		if (atomic_load(&u->flags) & XU_DIRTY) {
			/* Still on the dirty stack: the committer frees it next. */
			link = &u->retired_next;
			continue;
		}
		*link = u->retired_next;
		xunit_free(u);
	}
	return map->retired_units != NULL;
}

/* ---- SEEK_DATA / SEEK_HOLE -------------------------------------------------------------- */

/* First byte >= offset (and < size) whose written-state is `state`, or -1. */
static int64_t seek_state(const struct cfs_extent_map *map, uint64_t offset, uint64_t size,
			  bool state)
{
	const struct cfs_extent_geom *g = map->geom;
	uint64_t pos = offset;

	while (pos < size) {
		uint64_t fu = pos >> g->unit_shift;
		uint64_t unit_start = fu << g->unit_shift;
		struct xunit *u;
		uintptr_t ws;
		uint32_t s, hit;

		if (fu >= g->max_units)
			return state ? -1 : (int64_t)pos;
		u = slot_load(map, fu);
		if (!u) {
			uint64_t next;

			if (!state)
				return (int64_t)pos;
			next = next_leaf_unit(map, fu + 1);
			if (next == fu + 1 || next >= g->max_units) {
				pos = (fu + 1) << g->unit_shift;
				if (next >= g->max_units)
					return -1;
			} else {
				pos = next << g->unit_shift;
			}
			continue;
		}
		ws = atomic_load(&u->ws);
		s = (uint32_t)((pos - unit_start) >> g->sector_shift);
		/* ws_scan finds the first sector whose state differs from !state. */
		hit = ws_scan(ws, s, g->sectors_per_unit, !state);
		if (hit < g->sectors_per_unit) {
			uint64_t at = unit_start + ((uint64_t)hit << g->sector_shift);

			return (int64_t)(at > pos ? at : pos);
		}
		pos = unit_start + g->unit_bytes;
	}
	return -1;
}

int64_t cfs_extent_seek_data(const struct cfs_extent_map *map, uint64_t offset_bytes,
			     uint64_t size_bytes)
{
	int64_t at;

	if (offset_bytes >= size_bytes)
		return -ENXIO;
	at = seek_state(map, offset_bytes, size_bytes, true);
	if (at < 0 || (uint64_t)at >= size_bytes)
		return -ENXIO;
	return at;
}

int64_t cfs_extent_seek_hole(const struct cfs_extent_map *map, uint64_t offset_bytes,
			     uint64_t size_bytes)
{
	int64_t at;

	if (offset_bytes >= size_bytes)
		return -ENXIO;
	at = seek_state(map, offset_bytes, size_bytes, false);
	if (at < 0 || (uint64_t)at > size_bytes)
		return (int64_t)size_bytes;
	return at;
}
