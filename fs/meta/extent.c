/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * extent.c — the per-file map: copy-on-write base runs, unit records for
 * partly written (or freshly written) units, read without locks by the data
 * path, memory freed by epoch reclamation (fs/meta/epoch.h).
 *
 * Main invariants:
 *   - The base (top + leaves) is immutable once published; map->lock
 *     serializes building the next one. Runs in it are sorted, never
 *     overlap, and have count >= 1; leaves are never empty.
 *   - A record (xunit) in the hash table is keyed by its file unit and names
 *     the store unit it describes. It counts only while the base maps its
 *     file unit to that store unit with state NONE: a sector is written iff
 *     the run is ALL or such a record has it. A record never says NONE: it
 *     is created with bits, and a clear that empties it seals it (SEALED)
 *     and takes it out of the table under map->lock.
 *   - Record state words: a bitmap pointer, ALL or SEALED. Bits only go from
 *     0 to 1 in place (atomic OR, any thread). Anything that clears bits runs
 *     under the inode lock and replaces the state word (copy, change,
 *     compare-and-swap) after FREEZING the old bitmap: a writer that set
 *     bits in a bitmap and then finds it frozen redoes its OR on whatever
 *     replaced it (through map->lock if that was SEALED), so no completed
 *     write is lost outside the cleared range.
 *   - bitmap->set_count is the number of set bits: every bit transition is
 *     counted by the thread whose fetch_or / copy observed it.
 *   - Pieces: a run with a piece code maps one file unit to a part of a
 *     store unit; it never merges with a neighbour. Its record is keyed by
 *     (file unit, store unit, piece code), its bitmap covers the piece's
 *     sectors (bitmap->limit), and ALL means all of those. Sectors past a
 *     piece are a hole.
 *   - Inserting or removing a record and publishing a base happen under
 *     map->lock. A base change that makes a unit ALL is published before its
 *     record leaves the table; one that makes an ALL unit partly written
 *     inserts the record first. So a lock-free reader sees the old or the
 *     new state of a unit, never less.
 *
 * Memory order: sequentially consistent where the data path meets the locked
 * side (top, table and slots, state words, freeze flags, dirty flags).
 *
 * What it does not do: allocate store units, log, or lock the inode.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "fs/base/assert.h"
#include "fs/meta/epoch.h"
#include "fs/meta/extent.h"

#define WS_NONE ((uintptr_t)CFS_EXTENT_WS_NONE)
#define WS_ALL ((uintptr_t)CFS_EXTENT_WS_ALL)
#define WS_SEALED ((uintptr_t)2) /* record being removed: go through map->lock */

#define XU_DIRTY (1u << 0)   /* on the map's dirty stack */
#define XU_DEAD (1u << 1)    /* out of the table: retired */
#define XU_PENDING (1u << 2) /* on the map's list of records to take out */

#define LEAF_MAX CFS_EXTENT_LEAF_RUNS

/* What a retired object is, to free it. */
enum rkind { R_LEAF, R_TOP, R_XUNIT, R_BITMAP, R_TAB };

/* Header of everything that is retired (first member). */
struct rhead {
	struct rhead *next;
	uint64_t tag; /* epoch when it was unpublished */
	uint32_t kind;
	uint32_t bytes; /* accounting (cfs_extent_map_bytes) */
};

struct run {
	uint64_t fu;	/* first file unit */
	uint64_t count; /* >= 1 (1 for a piece) */
	uint64_t su;	/* first store unit */
	uint32_t all;	/* 1: every sector written; 0: NONE (records may add) */
	uint32_t piece; /* 0: whole units; else piece_code() of a piece of su */
};

/* A piece as one word: log2 of its bytes in bits 0-4, its index (offset /
 * bytes) above. 0 is a whole unit. */
#define PIECE_ANY UINT32_MAX /* matches any piece of a unit, and the whole unit */

static inline uint32_t piece_code(uint32_t offset_bytes, uint32_t bytes)
{
	uint32_t shift = bytes ? 31u - (uint32_t)__builtin_clz(bytes) : 0;

	return bytes ? ((offset_bytes >> shift) << 5) | shift : 0;
}

static inline uint32_t piece_bytes_of(uint32_t code)
{
	return code ? 1u << (code & 31u) : 0;
}

static inline uint32_t piece_offset_of(uint32_t code)
{
	return code ? (code >> 5) << (code & 31u) : 0;
}

struct leaf {
	struct rhead r;
	uint32_t n;
	struct run e[];
};

struct top {
	struct rhead r;
	uint32_t n;	      /* leaves */
	uint64_t *key;	      /* key[i] = e[0].fu of leaf[i] */
	struct leaf **leaf;   /* both arrays live after the struct */
	uint64_t bytes_total; /* this top and its leaves */
};

struct ws_bitmap {
	struct rhead r;
	_Atomic uint32_t set_count; /* bits set */
	_Atomic uint32_t frozen;    /* being replaced under the inode lock */
	uint32_t limit;		    /* [const] sectors: sectors_per_unit, or a
				     * piece's; set_count == limit is ALL */
	_Atomic uint64_t words[];   /* limit bits */
};

struct xunit {
	struct rhead r;
	uint64_t fu;		    /* [const] */
	uint64_t su;		    /* [const] */
	uint32_t piece;		    /* [const] piece code, 0: the whole unit */
	_Atomic uintptr_t ws;	    /* WS_ALL, WS_SEALED or struct ws_bitmap * */
	_Atomic uint32_t flags;	    /* XU_* */
	struct xunit *dirty_next;   /* dirty stack link */
	struct xunit *pending_next; /* [map->lock] map->pending link */
	uint64_t pending_tag;	    /* epoch when its base changed */
};

#define TAB_TOMB ((struct xunit *)1)

struct tab {
	struct rhead r;
	uint32_t cap;  /* power of two */
	uint32_t used; /* [map->lock] live records */
	uint32_t tombs;
	_Atomic(struct xunit *) slot[];
};

struct cfs_extent_map {
	const struct cfs_extent_geom *geom;
	_Atomic(struct top *) top;
	_Atomic(struct tab *) tab;
	_Atomic uint64_t mapped_units;
	_Atomic uint64_t piece_runs;	    /* file units mapped to pieces */
	_Atomic uint64_t piece_bytes;	    /* their bytes */
	pthread_mutex_t lock;		    /* base changes, table changes */
	_Atomic(struct xunit *) dirty_head; /* Treiber stack: push any thread, pop all */
	_Atomic uint32_t map_dirty;	    /* notify sent since the last collect */
	cfs_extent_notify_fn notify;
	void *notify_arg;
	_Atomic(struct rhead *) retired; /* push any thread, drain under lock */
	struct xunit *pending;		 /* [map->lock] records to take out later */
	_Atomic uint64_t record_bytes;	 /* live records and bitmaps */
	_Atomic uint64_t retired_bytes;
};

static inline bool ws_is_bitmap(uintptr_t ws)
{
	return ws > WS_SEALED;
}

static inline struct ws_bitmap *ws_bitmap(uintptr_t ws)
{
	return (struct ws_bitmap *)ws;
}

static inline uint32_t words_per_unit(const struct cfs_extent_geom *g)
{
	return (g->sectors_per_unit + 63) / 64;
}

/* Sectors a mapping with piece code `piece` holds. */
static inline uint32_t sectors_of(const struct cfs_extent_geom *g, uint32_t piece)
{
	return piece ? piece_bytes_of(piece) >> g->sector_shift : g->sectors_per_unit;
}

/* fu << shift, saturated (file units up to 2^41, units up to 2^30). */
static inline uint64_t unit_to_bytes(const struct cfs_extent_geom *g, uint64_t fu)
{
	if (fu >= (UINT64_MAX >> g->unit_shift))
		return UINT64_MAX;
	return fu << g->unit_shift;
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
	uint64_t leaf = 64;

	memset(geom, 0, sizeof(*geom));
	if (!is_pow2_u64(unit_bytes) || !is_pow2_u64(sector_bytes) || sector_bytes > unit_bytes)
		return -EINVAL;
	if (unit_bytes / sector_bytes > CFS_EXTENT_SECTORS_MAX || store_units == 0)
		return -EINVAL;
	/* Twice the store: one file can take every unit and still be refused
	 * with ENOSPC by the allocator, not EFBIG by its map (tmpfs and the
	 * RAM mount promise ENOSPC). Rounded up as the two-level table of
	 * earlier daemons did (leaves of about sqrt(2 * store_units), 64 to
	 * 65536 entries), so every mapping they wrote stays valid. */
	while (leaf < (1u << 16) && leaf * leaf < 2 * store_units)
		leaf <<= 1;
	geom->unit_bytes = unit_bytes;
	geom->sector_bytes = sector_bytes;
	geom->unit_shift = log2_u64(unit_bytes);
	geom->sector_shift = log2_u64(sector_bytes);
	geom->sectors_per_unit = unit_bytes / sector_bytes;
	geom->max_units = (2 * store_units + leaf - 1) / leaf * leaf;
	geom->store_units = store_units;
	geom->data_offset_bytes = data_offset_bytes;
	return 0;
}

/* ---- retiring and reclaiming ------------------------------------------------------- */

static void retire(struct cfs_extent_map *map, struct rhead *r, enum rkind kind)
{
	struct rhead *head = atomic_load(&map->retired);

	r->kind = kind;
	r->tag = cfs_epoch_now(); /* after the unpublish: see epoch.c */
	atomic_fetch_add(&map->retired_bytes, r->bytes);
	do {
		r->next = head;
	} while (!atomic_compare_exchange_weak(&map->retired, &head, r));
}

static void xunit_free(struct xunit *u)
{
	uintptr_t ws = atomic_load(&u->ws);

	if (ws_is_bitmap(ws))
		free(ws_bitmap(ws));
	free(u);
}

static void rfree(struct rhead *r)
{
	if (r->kind == R_XUNIT)
		xunit_free((struct xunit *)r);
	else
		free(r);
}

static void pending_drain(struct cfs_extent_map *map);

/* [map->lock] Free what no reader can hold. True if something remains. */
static bool reclaim(struct cfs_extent_map *map)
{
	struct rhead *list, *keep = NULL, *keep_tail = NULL;
	uint64_t freed = 0;

	if (!atomic_load(&map->retired) && !map->pending)
		return false;
	/* Twice: something retired just now is free at once when no thread
	 * reads (the usual case outside the data path's bursts). */
	cfs_epoch_try_advance();
	cfs_epoch_try_advance();
	pending_drain(map);
	list = atomic_exchange(&map->retired, NULL);
	while (list) {
		struct rhead *next = list->next;
		bool busy = !cfs_epoch_safe(list->tag);

		/* A dead record still on the dirty stack: the committer's next
		 * collect pops it; free it after that. */
		if (!busy && list->kind == R_XUNIT)
			busy = atomic_load(&((struct xunit *)list)->flags) &
			       (XU_DIRTY | XU_PENDING);
		if (busy) {
			list->next = keep;
			keep = list;
			if (!keep_tail)
				keep_tail = list;
		} else {
			atomic_fetch_sub(&map->retired_bytes, list->bytes);
			freed += list->bytes;
			rfree(list);
		}
		list = next;
	}
	if (keep) {
		struct rhead *head = atomic_load(&map->retired);

		do {
			keep_tail->next = head;
		} while (!atomic_compare_exchange_weak(&map->retired, &head, keep));
	}
	/* After a big fold the freed records lie scattered through the heap:
	 * give their pages back (glibc frees whole free pages in place). */
	if (freed >= (1u << 20))
		malloc_trim(0);
	return keep != NULL || map->pending != NULL;
}

/* ---- bitmaps and records ------------------------------------------------------------- */

/* A cleared bitmap of limit sectors. */
static struct ws_bitmap *bitmap_new(uint32_t limit)
{
	size_t bytes = sizeof(struct ws_bitmap) + (limit + 63) / 64 * sizeof(uint64_t);
	struct ws_bitmap *bm = calloc(1, bytes);

	if (bm) {
		bm->r.bytes = (uint32_t)bytes;
		bm->limit = limit;
	}
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
	atomic_fetch_sub(&map->record_bytes, bm->r.bytes);
	retire(map, &bm->r, R_BITMAP);
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

/* A record for (fu, su, piece) whose state is ws (a bitmap of the caller's,
 * or ALL). */
static struct xunit *xunit_new(struct cfs_extent_map *map, uint64_t fu, uint64_t su, uint32_t piece,
			       uintptr_t ws)
{
	struct xunit *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	u->r.bytes = sizeof(*u);
	u->fu = fu;
	u->su = su;
	u->piece = piece;
	atomic_init(&u->ws, ws);
	atomic_fetch_add(&map->record_bytes,
			 sizeof(*u) + (ws_is_bitmap(ws) ? ws_bitmap(ws)->r.bytes : 0));
	return u;
}

/* [map->lock] A record leaves the table: it is dead and retired. */
static void retire_xunit(struct cfs_extent_map *map, struct xunit *u)
{
	uintptr_t ws = atomic_load(&u->ws);

	atomic_fetch_or(&u->flags, XU_DEAD);
	u->r.bytes = sizeof(*u) + (ws_is_bitmap(ws) ? ws_bitmap(ws)->r.bytes : 0);
	atomic_fetch_sub(&map->record_bytes, u->r.bytes);
	retire(map, &u->r, R_XUNIT);
}

/* ---- the record table (open addressing, lock-free reads) ------------------------------ */

/* Records are keyed by (file unit, store unit, piece): while a run moves to
 * other store units (cfs_extent_move) or a unit to a bigger piece
 * (cfs_extent_relocate) the records of both mappings coexist, and a reader
 * finds the one of the base it sees. */
static inline uint32_t tab_hash(const struct tab *t, uint64_t fu, uint64_t su, uint32_t piece)
{
	return (uint32_t)(((fu ^ ((su ^ ((uint64_t)piece << 40)) * 0xff51afd7ed558ccdull)) *
			   0x9e3779b97f4a7c15ull) >>
			  32) &
	       (t->cap - 1);
}

static inline bool xunit_is(const struct xunit *u, uint64_t fu, uint64_t su, uint32_t piece)
{
	return u->fu == fu && u->su == su && u->piece == piece;
}

/* [lock-free] The record of file unit fu mapping (su, piece), or NULL. */
static struct xunit *tab_find(const struct cfs_extent_map *map, uint64_t fu, uint64_t su,
			      uint32_t piece)
{
	struct tab *t = atomic_load(&((struct cfs_extent_map *)map)->tab);

	if (!t)
		return NULL;
	for (uint32_t i = tab_hash(t, fu, su, piece), n = 0; n < t->cap;
	     i = (i + 1) & (t->cap - 1), n++) {
		struct xunit *u = atomic_load(&t->slot[i]);

		if (!u)
			return NULL;
		if (u != TAB_TOMB && xunit_is(u, fu, su, piece))
			return u;
	}
	return NULL;
}

/* [map->lock] A table of cap slots holding every live record of old. */
static struct tab *tab_build(struct tab *old, uint32_t cap)
{
	size_t bytes = sizeof(struct tab) + (size_t)cap * sizeof(_Atomic(struct xunit *));
	struct tab *t = calloc(1, bytes);

	if (!t)
		return NULL;
	t->r.bytes = (uint32_t)bytes;
	t->cap = cap;
	for (uint32_t i = 0; old && i < old->cap; i++) {
		struct xunit *u = atomic_load(&old->slot[i]);
		uint32_t k;

		if (!u || u == TAB_TOMB)
			continue;
		for (k = tab_hash(t, u->fu, u->su, u->piece); atomic_load(&t->slot[k]);
		     k = (k + 1) & (cap - 1))
			;
		atomic_init(&t->slot[k], u);
		t->used++;
	}
	return t;
}

/* [map->lock] Room for one more record (grows or cleans the table). */
static int tab_reserve(struct cfs_extent_map *map)
{
	struct tab *t = atomic_load(&map->tab);
	uint32_t cap = 16;
	struct tab *n;

	if (t && (uint64_t)(t->used + t->tombs + 1) * 4 <= (uint64_t)t->cap * 3)
		return 0;
	while (t && cap < (t->used + 1) * 2)
		cap *= 2;
	n = tab_build(t, cap);
	if (!n)
		return -ENOMEM;
	atomic_store(&map->tab, n);
	if (t)
		retire(map, &t->r, R_TAB);
	return 0;
}

/* [map->lock, tab_reserve() done] Put u in the table, replacing the record of
 * the same mapping if there is one (returned, not retired). */
static struct xunit *tab_put(struct cfs_extent_map *map, struct xunit *u)
{
	struct tab *t = atomic_load(&map->tab);
	int64_t free_slot = -1;
	uint32_t i = tab_hash(t, u->fu, u->su, u->piece);

	for (uint32_t n = 0; n < t->cap; i = (i + 1) & (t->cap - 1), n++) {
		struct xunit *o = atomic_load(&t->slot[i]);

		if (o == TAB_TOMB) {
			if (free_slot < 0)
				free_slot = i;
			continue;
		}
		if (!o)
			break;
		if (xunit_is(o, u->fu, u->su, u->piece)) {
			atomic_store(&t->slot[i], u);
			return o;
		}
	}
	if (free_slot < 0) {
		free_slot = i;
		CFS_ASSERT(atomic_load(&t->slot[i]) == NULL);
	} else {
		t->tombs--;
	}
	atomic_store(&t->slot[free_slot], u);
	t->used++;
	return NULL;
}

/* [map->lock] A table emptied by folds and unmaps gives its memory back: no
 * table when no record is left, a quarter of the size when 1/16 is used. */
static void tab_shrink(struct cfs_extent_map *map, struct tab *t)
{
	struct tab *n = NULL;

	if (t->used && (t->cap <= 64 || (uint64_t)t->used * 16 > t->cap))
		return;
	if (t->used) {
		n = tab_build(t, t->cap / 4);
		if (!n)
			return; /* keep the big one */
	}
	atomic_store(&map->tab, n);
	retire(map, &t->r, R_TAB);
}

/* [map->lock] Take u out of the table and retire it; false if it is not
 * there (replaced meanwhile). */
static bool tab_take(struct cfs_extent_map *map, struct xunit *u)
{
	struct tab *t = atomic_load(&map->tab);

	for (uint32_t i = t ? tab_hash(t, u->fu, u->su, u->piece) : 0, n = 0; t && n < t->cap;
	     i = (i + 1) & (t->cap - 1), n++) {
		struct xunit *o = atomic_load(&t->slot[i]);

		if (!o)
			break;
		if (o == u) {
			atomic_store(&t->slot[i], TAB_TOMB);
			t->used--;
			t->tombs++;
			retire_xunit(map, u);
			tab_shrink(map, t);
			return true;
		}
	}
	return false;
}

/* [map->lock] Take u (which must be there) out of the table now: a reader
 * of an older base then finds no record (fine for a cleared or unmapped
 * unit: reads racing a punch may see zeros). */
static void tab_remove(struct cfs_extent_map *map, struct xunit *u)
{
	CFS_ASSERT(tab_take(map, u) || !"record not in its table");
}

/* [map->lock] The base no longer needs u (it says ALL there now, or maps
 * another store unit): take u out of the table once no reader can hold the
 * base it was published against. A reader of that base looks u up and must
 * find it, or it would read a written unit as zeros. */
static void tab_remove_later(struct cfs_extent_map *map, struct xunit *u)
{
	if (atomic_fetch_or(&u->flags, XU_PENDING) & XU_PENDING)
		return;
	u->pending_tag = cfs_epoch_now(); /* after the base was published */
	u->pending_next = map->pending;
	map->pending = u;
}

/* [map->lock] Take out the pending records whose old base no reader holds. */
static void pending_drain(struct cfs_extent_map *map)
{
	struct xunit **link = &map->pending;

	while (*link) {
		struct xunit *u = *link;

		if (!cfs_epoch_safe(u->pending_tag)) {
			link = &u->pending_next;
			continue;
		}
		*link = u->pending_next;
		/* Already replaced and retired: nothing to take out. */
		if (!(atomic_load(&u->flags) & XU_DEAD) && !tab_take(map, u))
			retire_xunit(map, u); /* replaced and not retired: never */
		atomic_fetch_and(&u->flags, ~XU_PENDING);
	}
}

/* ---- the base: lookups ---------------------------------------------------------------- */

/* A position in a base: leaf li, run ei. */
struct cursor {
	const struct top *t;
	uint32_t li, ei;
};

static inline const struct run *cur_run(const struct cursor *c)
{
	if (!c->t || c->li >= c->t->n)
		return NULL;
	return &c->t->leaf[c->li]->e[c->ei];
}

static inline void cur_next(struct cursor *c)
{
	if (++c->ei >= c->t->leaf[c->li]->n) {
		c->li++;
		c->ei = 0;
	}
}

/* Position c at the run holding fu, or at the first run after fu (or the end). */
static void cur_seek(struct cursor *c, const struct top *t, uint64_t fu)
{
	uint32_t lo = 0, hi;
	const struct leaf *l;

	c->t = t;
	c->li = 0;
	c->ei = 0;
	if (!t)
		return;
	hi = t->n;
	/* Last leaf whose first run starts at or before fu. */
	while (lo + 1 < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (t->key[mid] <= fu)
			lo = mid;
		else
			hi = mid;
	}
	l = t->leaf[lo];
	c->li = lo;
	if (l->e[0].fu > fu)
		return; /* before every run */
	hi = l->n;
	{
		uint32_t a = 0;

		while (a + 1 < hi) {
			uint32_t mid = a + (hi - a) / 2;

			if (l->e[mid].fu <= fu)
				a = mid;
			else
				hi = mid;
		}
		c->ei = a;
	}
	if (l->e[c->ei].fu + l->e[c->ei].count <= fu)
		cur_next(c); /* in the hole after run a */
}

static const struct top *top_of(const struct cfs_extent_map *map)
{
	return atomic_load(&((struct cfs_extent_map *)map)->top);
}

/* The run holding fu (copied, trimmed to start at fu), or false for a hole. */
static bool base_at(const struct top *t, uint64_t fu, struct run *out)
{
	struct cursor c;
	const struct run *r;

	cur_seek(&c, t, fu);
	r = cur_run(&c);
	if (!r || r->fu > fu)
		return false;
	out->fu = fu;
	out->count = r->count - (fu - r->fu);
	out->su = r->su + (fu - r->fu);
	out->all = r->all;
	out->piece = r->piece;
	return true;
}

/* [in a read section] Written-state word of unit fu mapped by r (a run
 * holding fu): WS_ALL, WS_NONE or a bitmap. */
static uintptr_t unit_ws(const struct cfs_extent_map *map, const struct run *r, uint64_t fu)
{
	struct xunit *u;
	uintptr_t ws;

	if (r->all)
		return WS_ALL;
	u = tab_find(map, fu, r->su + (fu - r->fu), r->piece);
	if (!u)
		return WS_NONE;
	ws = atomic_load(&u->ws);
	return ws == WS_SEALED ? WS_NONE : ws;
}

/* ---- lifecycle ------------------------------------------------------------------------ */

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
	pthread_mutex_init(&map->lock, NULL);
	*out = map;
	return 0;
}

static void top_free_all(struct top *t)
{
	if (!t)
		return;
	for (uint32_t i = 0; i < t->n; i++)
		free(t->leaf[i]);
	free(t);
}

void cfs_extent_map_destroy(struct cfs_extent_map *map)
{
	struct tab *t;
	struct rhead *r;

	if (!map)
		return;
	top_free_all(atomic_load(&map->top));
	t = atomic_load(&map->tab);
	for (uint32_t i = 0; t && i < t->cap; i++) {
		struct xunit *u = atomic_load(&t->slot[i]);

		if (u && u != TAB_TOMB)
			xunit_free(u);
	}
	free(t);
	r = atomic_load(&map->retired);
	while (r) {
		struct rhead *next = r->next;

		rfree(r);
		r = next;
	}
	pthread_mutex_destroy(&map->lock);
	free(map);
}

uint64_t cfs_extent_mapped_units(const struct cfs_extent_map *map)
{
	return atomic_load(&((struct cfs_extent_map *)map)->mapped_units);
}

uint64_t cfs_extent_mapped_bytes(const struct cfs_extent_map *map)
{
	struct cfs_extent_map *m = (struct cfs_extent_map *)map;
	uint64_t units = atomic_load(&m->mapped_units), pieces = atomic_load(&m->piece_runs);

	/* Read apart: clamp a count caught between two updates. */
	return ((units > pieces ? units - pieces : 0) << map->geom->unit_shift) +
	       atomic_load(&m->piece_bytes);
}

uint64_t cfs_extent_piece_count(const struct cfs_extent_map *map)
{
	return atomic_load(&((struct cfs_extent_map *)map)->piece_runs);
}

uint64_t cfs_extent_map_bytes(const struct cfs_extent_map *map)
{
	struct cfs_extent_map *m = (struct cfs_extent_map *)map;
	const struct top *t = atomic_load(&m->top);
	struct tab *tab = atomic_load(&m->tab);

	return sizeof(*m) + (t ? t->bytes_total : 0) + (tab ? tab->r.bytes : 0) +
	       atomic_load(&m->record_bytes) + atomic_load(&m->retired_bytes);
}

/* ---- the base: copy-on-write changes ------------------------------------------------- */

enum change_kind {
	CH_SET,	  /* [fu, +count) maps [su, +count) (or piece of su), state all */
	CH_HOLE,  /* [fu, +count) becomes a hole */
	CH_STATE, /* mapped units of [fu, +count) get state all (if su_check:
		   * only those mapping su + offset with that piece code, or
		   * any piece with PIECE_ANY) */
};

struct change {
	uint64_t fu, count, su;
	uint8_t kind;
	bool all;
	bool su_check;
	uint32_t piece; /* CH_SET: of the new run; CH_STATE: to match */
};

/* Output of a splice: runs, merged when they continue each other. */
struct runbuf {
	struct run *e;
	size_t n;
	int64_t mapped_delta;
	int64_t piece_delta;	   /* piece runs */
	int64_t piece_bytes_delta; /* their bytes */
};

static void emit(struct runbuf *b, struct run r)
{
	if (r.count == 0)
		return;
	if (b->n) {
		struct run *last = &b->e[b->n - 1];

		if (last->fu + last->count == r.fu && last->su + last->count == r.su &&
		    last->all == r.all && !last->piece && !r.piece) {
			last->count += r.count;
			return;
		}
	}
	b->e[b->n++] = r;
}

/* The part [a, b) of run r (a, b inside it; a piece run is one unit). */
static inline struct run part_of(const struct run *r, uint64_t a, uint64_t b)
{
	return (struct run){a, b - a, r->su + (a - r->fu), r->all, r->piece};
}

/* Space accounting of a run entering (+1) or leaving (-1) the base. */
static void account(struct runbuf *b, uint64_t count, uint32_t piece, int sign)
{
	b->mapped_delta += sign * (int64_t)count;
	if (piece) {
		b->piece_delta += sign;
		b->piece_bytes_delta += sign * (int64_t)piece_bytes_of(piece);
	}
}

/* Apply changes (sorted, not overlapping) to runs in[0..n) into b. */
static void splice(const struct run *in, size_t n, const struct change *ch, size_t k,
		   struct runbuf *b)
{
	size_t i = 0;
	struct run cur = {0};
	bool have = n > 0;

	if (have)
		cur = in[0];
#define ADVANCE()                                                                                  \
	do {                                                                                       \
		if (++i < n)                                                                       \
			cur = in[i];                                                               \
		else                                                                               \
			have = false;                                                              \
	} while (0)
	for (size_t c = 0; c < k; c++) {
		const struct change *x = &ch[c];
		uint64_t end = x->fu + x->count;

		while (have && cur.fu + cur.count <= x->fu) {
			emit(b, cur);
			ADVANCE();
		}
		if (have && cur.fu < x->fu) {
			emit(b, part_of(&cur, cur.fu, x->fu));
			cur = part_of(&cur, x->fu, cur.fu + cur.count);
		}
		if (x->kind == CH_SET) {
			emit(b, (struct run){x->fu, x->count, x->su, x->all, x->piece});
			account(b, x->count, x->piece, 1);
		}
		while (have && cur.fu < end) {
			uint64_t stop = cur.fu + cur.count < end ? cur.fu + cur.count : end;
			struct run part = part_of(&cur, cur.fu, stop);
			bool rest = stop < cur.fu + cur.count;

			if (x->kind == CH_STATE) {
				if (!x->su_check ||
				    (part.su == x->su + (part.fu - x->fu) &&
				     (x->piece == PIECE_ANY || part.piece == x->piece)))
					part.all = x->all;
				emit(b, part);
			} else {
				account(b, part.count, part.piece, -1);
			}
			if (rest) {
				cur = part_of(&cur, stop, cur.fu + cur.count);
				break;
			}
			ADVANCE();
		}
	}
	while (have) {
		emit(b, cur);
		ADVANCE();
	}
#undef ADVANCE
}

static struct leaf *leaf_new(const struct run *e, uint32_t n)
{
	size_t bytes = sizeof(struct leaf) + (size_t)n * sizeof(struct run);
	struct leaf *l = malloc(bytes);

	if (!l)
		return NULL;
	memset(&l->r, 0, sizeof(l->r));
	l->r.bytes = (uint32_t)bytes;
	l->n = n;
	memcpy(l->e, e, (size_t)n * sizeof(*e));
	return l;
}

static struct top *top_new(uint32_t n)
{
	size_t bytes = sizeof(struct top) + (size_t)n * (sizeof(uint64_t) + sizeof(struct leaf *));
	struct top *t = calloc(1, bytes);

	if (!t)
		return NULL;
	t->r.bytes = (uint32_t)bytes;
	t->n = n;
	t->key = (uint64_t *)(t + 1);
	t->leaf = (struct leaf **)(t->key + n);
	return t;
}

/*
 * [map->lock] Apply changes (sorted by fu, not overlapping) to the base and
 * publish the result. Copies only the leaves the changes touch plus one
 * neighbour on each side (so leaves stay at least about half full) and the
 * top. 0 or -ENOMEM (nothing changed).
 */
static int base_apply(struct cfs_extent_map *map, const struct change *ch, size_t k)
{
	struct top *t = atomic_load(&map->top), *nt = NULL;
	uint32_t n = t ? t->n : 0, li = 0, lj = 0, nleaves = 0, span = 0;
	struct leaf **made = NULL;
	struct runbuf b = {0};
	size_t m_in = 0, per = 0;
	uint64_t lo = ch[0].fu, hi = ch[k - 1].fu + ch[k - 1].count;
	bool tail;
	int ret = -ENOMEM;

	if (k == 0)
		return 0;
	if (n) {
		struct cursor c;

		cur_seek(&c, t, lo);
		li = c.li < n ? c.li : n - 1;
		cur_seek(&c, t, hi - 1);
		lj = c.li < n ? c.li : n - 1;
		if (lj < li)
			lj = li;
		if (li > 0)
			li--;
		if (lj + 1 < n)
			lj++;
		span = lj - li + 1;
		for (uint32_t i = li; i <= lj; i++)
			m_in += t->leaf[i]->n;
	}
	b.e = malloc((m_in + 2 * k + 2) * sizeof(*b.e));
	if (!b.e)
		return -ENOMEM;
	{
		struct run *in = malloc((m_in ? m_in : 1) * sizeof(*in));
		size_t at = 0;

		if (!in)
			goto out;
		for (uint32_t i = li; n && i <= lj; i++) {
			memcpy(in + at, t->leaf[i]->e, t->leaf[i]->n * sizeof(*in));
			at += t->leaf[i]->n;
		}
		splice(in, m_in, ch, k, &b);
		free(in);
	}
	/* Appending at the end packs full leaves; elsewhere spread evenly. */
	tail = n == 0 || lj == n - 1;
	nleaves = (uint32_t)((b.n + LEAF_MAX - 1) / LEAF_MAX);
	if (nleaves) {
		made = calloc(nleaves, sizeof(*made));
		if (!made)
			goto out;
		per = tail ? LEAF_MAX : (b.n + nleaves - 1) / nleaves;
		for (uint32_t i = 0, at = 0; i < nleaves; i++) {
			uint32_t cnt = (uint32_t)(b.n - at < per ? b.n - at : per);

			made[i] = leaf_new(b.e + at, cnt);
			if (!made[i])
				goto out;
			at += cnt;
		}
	}
	if (n - span + nleaves) {
		uint32_t at = 0;

		nt = top_new(n - span + nleaves);
		if (!nt)
			goto out;
		for (uint32_t i = 0; i < li && n; i++)
			nt->leaf[at++] = t->leaf[i];
		for (uint32_t i = 0; i < nleaves; i++)
			nt->leaf[at++] = made[i];
		for (uint32_t i = lj + 1; n && i < n; i++)
			nt->leaf[at++] = t->leaf[i];
		nt->bytes_total = nt->r.bytes;
		for (uint32_t i = 0; i < nt->n; i++) {
			nt->key[i] = nt->leaf[i]->e[0].fu;
			nt->bytes_total += nt->leaf[i]->r.bytes;
		}
	}
	atomic_store(&map->top, nt);
	if (t) {
		for (uint32_t i = li; i <= lj; i++)
			retire(map, &t->leaf[i]->r, R_LEAF);
		retire(map, &t->r, R_TOP);
	}
	atomic_fetch_add(&map->mapped_units, (uint64_t)b.mapped_delta);
	atomic_fetch_add(&map->piece_runs, (uint64_t)b.piece_delta);
	atomic_fetch_add(&map->piece_bytes, (uint64_t)b.piece_bytes_delta);
	free(made);
	made = NULL;
	ret = 0;
out:
	if (made) {
		for (uint32_t i = 0; i < nleaves; i++)
			free(made[i]);
		free(made);
	}
	free(b.e);
	return ret;
}

static int base_change1(struct cfs_extent_map *map, struct change c)
{
	return base_apply(map, &c, 1);
}

/* ---- lookups -------------------------------------------------------------------- */

int cfs_extent_lookup(const struct cfs_extent_map *map, uint64_t offset_bytes,
		      uint64_t length_bytes, struct cfs_extent_run *run)
{
	const struct cfs_extent_geom *g = map->geom;
	uint64_t fu = offset_bytes >> g->unit_shift;
	uint64_t in_unit = offset_bytes & (g->unit_bytes - 1);
	uint64_t end = offset_bytes + length_bytes;
	uint64_t covered;
	struct cursor c;
	const struct run *r;

	if (length_bytes == 0)
		return -EINVAL;
	if (end < offset_bytes)
		end = UINT64_MAX;
	run->offset_bytes = offset_bytes;
	cfs_epoch_enter();
	cur_seek(&c, top_of(map), fu);
	r = cur_run(&c);
	if (!r || r->fu > fu || fu >= g->max_units) {
		/* A hole up to the next run. */
		run->mapped = false;
		run->store_unit = 0;
		run->device_offset_bytes = 0;
		covered = r && fu < g->max_units ? unit_to_bytes(g, r->fu) : UINT64_MAX;
	} else if (r->piece) {
		/* A piece: its bytes, then a hole to the end of the unit. */
		uint32_t bytes = piece_bytes_of(r->piece);

		run->store_unit = r->su;
		run->mapped = in_unit < bytes;
		run->device_offset_bytes = run->mapped ? g->data_offset_bytes +
								 (r->su << g->unit_shift) +
								 piece_offset_of(r->piece) + in_unit
						       : 0;
		covered = (fu << g->unit_shift) + (run->mapped ? bytes : g->unit_bytes);
	} else {
		uint64_t next_fu = r->fu + r->count, next_su = r->su + r->count;

		run->mapped = true;
		run->store_unit = r->su + (fu - r->fu);
		run->device_offset_bytes =
			g->data_offset_bytes + (run->store_unit << g->unit_shift) + in_unit;
		/* Continue over runs that continue it in the file and on the store. */
		for (cur_next(&c); unit_to_bytes(g, next_fu) < end && (r = cur_run(&c)) &&
				   r->fu == next_fu && r->su == next_su && !r->piece;
		     cur_next(&c)) {
			next_fu += r->count;
			next_su += r->count;
		}
		covered = unit_to_bytes(g, next_fu);
	}
	cfs_epoch_exit();
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

/* [in a read section] Bytes from pos (< end) with the state of the sector
 * at pos, which goes to *state. */
static uint64_t span_of(const struct cfs_extent_map *map, const struct top *t, uint64_t pos,
			uint64_t end, bool *state)
{
	const struct cfs_extent_geom *g = map->geom;
	bool have_state = false, want = false;
	struct cursor c;
	const struct run *r;
	uint64_t start = pos;

	cur_seek(&c, t, pos >> g->unit_shift);
	while (pos < end) {
		uint64_t fu = pos >> g->unit_shift;

		r = cur_run(&c);
		if (r && r->fu + r->count <= fu) {
			cur_next(&c);
			continue;
		}
		if (!r || r->fu > fu || fu >= g->max_units) {
			/* A hole: unwritten up to the next run. */
			if (have_state && want)
				break;
			have_state = true;
			want = false;
			pos = r && fu < g->max_units ? unit_to_bytes(g, r->fu) : UINT64_MAX;
			continue;
		}
		if (r->all && !r->piece) {
			if (have_state && !want)
				break;
			have_state = true;
			want = true;
			pos = unit_to_bytes(g, r->fu + r->count);
			continue;
		}
		/* A NONE run (unit by unit, through the records) or a piece
		 * (its sectors, then unwritten to the end of the unit). */
		{
			uint64_t unit_start = fu << g->unit_shift;
			uintptr_t ws = unit_ws(map, r, fu);
			uint32_t s = (uint32_t)((pos - unit_start) >> g->sector_shift);
			uint32_t lim = sectors_of(g, r->piece);
			uint32_t stop;
			bool first = !have_state;

			if (first) {
				want = s < lim && ws_sector(ws, s);
				have_state = true;
			}
			stop = s < lim ? ws_scan(ws, s, lim, want) : lim;
			/* A write's marking (or a punch's clearing) may flip
			 * sector s between the two loads: it was `want` at the
			 * first, so it counts as that. Never an empty span. */
			if (first && stop == s)
				stop = s + 1;
			if (stop < lim || (want && lim < g->sectors_per_unit)) {
				pos = unit_start + ((uint64_t)stop << g->sector_shift);
				break;
			}
			pos = unit_start + g->unit_bytes;
		}
	}
	*state = want;
	return (pos > end ? end : pos) - start;
}

uint64_t cfs_extent_written_span(const struct cfs_extent_map *map, uint64_t offset_bytes,
				 uint64_t length_bytes, bool *written)
{
	uint64_t end = offset_bytes + length_bytes, n;

	if (end < offset_bytes)
		end = UINT64_MAX;
	cfs_epoch_enter();
	n = span_of(map, top_of(map), offset_bytes, end, written);
	cfs_epoch_exit();
	return n;
}

bool cfs_extent_sector_written(const struct cfs_extent_map *map, uint64_t offset_bytes)
{
	const struct cfs_extent_geom *g = map->geom;
	uint64_t fu = offset_bytes >> g->unit_shift;
	struct run r;
	bool w = false;

	uint32_t s = (uint32_t)((offset_bytes & (g->unit_bytes - 1)) >> g->sector_shift);

	cfs_epoch_enter();
	if (base_at(top_of(map), fu, &r) && s < sectors_of(g, r.piece))
		w = ws_sector(unit_ws(map, &r, fu), s);
	cfs_epoch_exit();
	return w;
}

/* ---- marking written ------------------------------------------------------------------ */

/* Result of setting bits in a record. */
enum { MARK_DONE = 0, MARK_SEALED = 1 };

/* Set sectors [first, end) of record u. MARK_DONE, MARK_SEALED (u is being
 * removed: go through map->lock), or -ENOMEM. */
static int xunit_mark(struct cfs_extent_map *map, struct xunit *u, uint32_t first, uint32_t end)
{
	for (;;) {
		uintptr_t ws = atomic_load(&u->ws);
		struct ws_bitmap *bm;
		uint32_t newly = 0;

		if (ws == WS_ALL)
			return MARK_DONE;
		if (ws == WS_SEALED)
			return MARK_SEALED;
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
			 * missed our bits. Wait for the new state word (or the
			 * freeze to be undone) and redo the OR (idempotent). */
			while (atomic_load(&u->ws) == ws && atomic_load(&bm->frozen))
				sched_yield();
			if (atomic_load(&u->ws) != ws)
				continue;
			/* Unfrozen (the replacement failed): our bits stand. */
		}
		if (atomic_load(&bm->set_count) == bm->limit) {
			uintptr_t expect = ws;

			/* Full: switch to ALL; whoever wins retires the bitmap.
			 * Losing means a replacement that already holds our bits. */
			if (atomic_compare_exchange_strong(&u->ws, &expect, WS_ALL))
				retire_bitmap(map, bm);
		}
		if (newly)
			mark_dirty(map, u);
		return MARK_DONE;
	}
}

/* A bitmap of limit sectors with [first, end) set, or WS_ALL for all of
 * them; 0 if out of memory. */
static uintptr_t ws_with(uint32_t limit, uint32_t first, uint32_t end)
{
	struct ws_bitmap *bm;

	if (first == 0 && end == limit)
		return WS_ALL;
	bm = bitmap_new(limit);
	if (!bm)
		return 0;
	for (uint32_t w = first / 64; w <= (end - 1) / 64; w++)
		atomic_store(&bm->words[w], range_mask(w, first, end));
	atomic_store(&bm->set_count, end - first);
	return (uintptr_t)bm;
}

/* Does run r (holding fu) map the place a write to su at poff bytes into
 * the unit went to? */
static inline bool run_is_place(const struct run *r, uint64_t su, uint32_t poff)
{
	return r->su == su && piece_offset_of(r->piece) == poff;
}

/* The first write into a unit of a NONE run (or after its record was
 * sealed): under map->lock, give it a record holding [first, end). */
static int unit_mark_slow(struct cfs_extent_map *map, uint64_t fu, uint64_t su, uint32_t poff,
			  uint32_t first, uint32_t end, struct xunit **found)
{
	struct xunit *u, *old;
	struct run r;
	uintptr_t ws;
	int ret = 0;

	*found = NULL;
	pthread_mutex_lock(&map->lock);
	if (!base_at(atomic_load(&map->top), fu, &r) || !run_is_place(&r, su, poff) || r.all ||
	    end > sectors_of(map->geom, r.piece))
		goto out_unlock; /* unmapped, re-mapped, or written meanwhile */
	u = tab_find(map, fu, su, r.piece);
	if (u && atomic_load(&u->ws) != WS_SEALED) {
		*found = u; /* another writer made it: OR into it, unlocked */
		goto out_unlock;
	}
	ret = tab_reserve(map);
	if (ret)
		goto out_unlock;
	ws = ws_with(sectors_of(map->geom, r.piece), first, end);
	if (!ws) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	u = xunit_new(map, fu, su, r.piece, ws);
	if (!u) {
		if (ws_is_bitmap(ws))
			free(ws_bitmap(ws));
		ret = -ENOMEM;
		goto out_unlock;
	}
	old = tab_put(map, u);
	if (old) /* never: a sealed record left the table under this lock */
		retire_xunit(map, old);
	mark_dirty(map, u);
out_unlock:
	pthread_mutex_unlock(&map->lock);
	return ret;
}

/* [in a read section] Mark sectors [first, end) of unit fu written if it
 * still maps su (at poff bytes into it: a piece). 0 or -ENOMEM. */
static int unit_mark(struct cfs_extent_map *map, uint64_t fu, uint64_t su, uint32_t poff,
		     uint32_t first, uint32_t end)
{
	for (;;) {
		struct run r;
		struct xunit *u;
		int ret;

		/* (A write beyond a piece's end went to another mapping at the
		 * same offset: lookups end a piece's runs at its end.) */
		if (!base_at(atomic_load(&map->top), fu, &r) || !run_is_place(&r, su, poff) ||
		    r.all || end > sectors_of(map->geom, r.piece))
			return 0;
		u = tab_find(map, fu, su, r.piece);
		if (!u) {
			ret = unit_mark_slow(map, fu, su, poff, first, end, &u);
			if (ret || !u)
				return ret;
		}
		ret = xunit_mark(map, u, first, end);
		if (ret != MARK_SEALED)
			return ret;
		/* Sealed: the record is leaving; the next pass sees what
		 * replaced it. */
		ret = unit_mark_slow(map, fu, su, poff, first, end, &u);
		if (ret || !u)
			return ret;
		ret = xunit_mark(map, u, first, end);
		if (ret != MARK_SEALED)
			return ret;
	}
}

int cfs_extent_mark_written(struct cfs_extent_map *map, uint64_t offset_bytes,
			    uint64_t length_bytes, uint64_t device_offset_bytes)
{
	const struct cfs_extent_geom *g = map->geom;
	uint64_t end = offset_bytes + length_bytes;
	uint64_t rel, store_first, fu_first, in_unit;
	uint64_t pos = offset_bytes;
	uint32_t poff;
	int ret = 0;

	CFS_ASSERT((offset_bytes & (g->sector_bytes - 1)) == 0);
	CFS_ASSERT((length_bytes & (g->sector_bytes - 1)) == 0);
	CFS_ASSERT(device_offset_bytes >= g->data_offset_bytes);
	rel = device_offset_bytes - g->data_offset_bytes;
	/* The device range was derived from the same offset within the unit,
	 * plus a piece's offset in its store unit (0 for whole units). */
	in_unit = offset_bytes & (g->unit_bytes - 1);
	CFS_ASSERT((rel & (g->unit_bytes - 1)) >= in_unit);
	poff = (uint32_t)((rel & (g->unit_bytes - 1)) - in_unit);
	CFS_ASSERT(!poff || in_unit + length_bytes <= g->unit_bytes);
	store_first = rel >> g->unit_shift;
	fu_first = offset_bytes >> g->unit_shift;

	cfs_epoch_enter();
	while (pos < end && !ret) {
		uint64_t fu = pos >> g->unit_shift;
		uint64_t unit_start = fu << g->unit_shift;
		uint64_t stop = unit_start + g->unit_bytes < end ? unit_start + g->unit_bytes : end;

		/* Units unmapped (or re-mapped elsewhere) while the write was in
		 * flight are skipped inside: the bytes went to a retired unit. */
		ret = unit_mark(map, fu, store_first + (fu - fu_first), poff,
				(uint32_t)((pos - unit_start) >> g->sector_shift),
				(uint32_t)((stop - unit_start) >> g->sector_shift));
		pos = stop;
	}
	cfs_epoch_exit();
	return ret;
}

/* ---- changes under the inode lock ------------------------------------------------------ */

int64_t cfs_extent_unit_get(const struct cfs_extent_map *map, uint64_t file_unit)
{
	struct run r;
	int64_t su = -1;

	cfs_epoch_enter();
	if (base_at(top_of(map), file_unit, &r))
		su = (int64_t)r.su;
	cfs_epoch_exit();
	return su;
}

int cfs_extent_unit_loc(const struct cfs_extent_map *map, uint64_t file_unit,
			struct cfs_extent_loc *loc)
{
	struct run r;
	bool mapped;

	cfs_epoch_enter();
	mapped = base_at(top_of(map), file_unit, &r);
	cfs_epoch_exit();
	if (!mapped)
		return -ENOENT;
	*loc = (struct cfs_extent_loc){r.su, piece_offset_of(r.piece), piece_bytes_of(r.piece)};
	return 0;
}

/* Is loc a piece the map can hold? */
static bool piece_valid(const struct cfs_extent_geom *g, const struct cfs_extent_loc *loc)
{
	uint32_t b = loc->piece_bytes;

	return is_pow2_u64(b) && b >= CFS_EXTENT_PIECE_MIN && b >= g->sector_bytes &&
	       b <= g->unit_bytes / 2 && loc->piece_offset_bytes % b == 0 &&
	       loc->piece_offset_bytes <= g->unit_bytes - b;
}

uint64_t cfs_extent_unit_span(const struct cfs_extent_map *map, uint64_t file_unit, uint64_t count,
			      bool *mapped)
{
	uint64_t end = count > UINT64_MAX - file_unit ? UINT64_MAX : file_unit + count;
	uint64_t pos = file_unit;
	struct cursor c;
	const struct run *r;

	*mapped = false;
	if (count == 0)
		return 0;
	cfs_epoch_enter();
	cur_seek(&c, top_of(map), file_unit);
	r = cur_run(&c);
	if (r && r->fu <= file_unit) {
		*mapped = true;
		/* Runs that follow each other in the file, whatever their store
		 * units. */
		pos = r->fu + r->count;
		for (cur_next(&c); pos < end && (r = cur_run(&c)) && r->fu == pos; cur_next(&c))
			pos = r->fu + r->count;
	} else {
		pos = r ? r->fu : end;
	}
	cfs_epoch_exit();
	return (pos > end ? end : pos) - file_unit;
}

/* Holes of [fu, fu + count) as CH_SET changes to su + offset (or to piece
 * code `piece` of su: count 1); -EEXIST if a unit there maps another place
 * (replace: the new mapping instead). Returns the number of changes written
 * to ch (room: 2 * runs + 2), or -errno. */
static int64_t plan_map(const struct top *t, uint64_t fu, uint64_t su, uint32_t piece,
			uint64_t count, bool replace, struct change *ch)
{
	struct cursor c;
	const struct run *r;
	uint64_t pos = fu, end = fu + count;
	int64_t k = 0;

	cur_seek(&c, t, fu);
	while (pos < end) {
		uint64_t stop;

		r = cur_run(&c);
		if (!r || r->fu >= end) {
			ch[k++] = (struct change){pos,	 end - pos, su + (pos - fu), CH_SET, false,
						  false, piece};
			break;
		}
		if (r->fu > pos) {
			ch[k++] = (struct change){
				pos, r->fu - pos, su + (pos - fu), CH_SET, false, false, piece};
			pos = r->fu;
		}
		stop = r->fu + r->count < end ? r->fu + r->count : end;
		if (r->su + (pos - r->fu) != su + (pos - fu) || r->piece != piece) {
			if (!replace)
				return -EEXIST;
			/* Replace the mapping: the new one starts unwritten. */
			ch[k++] = (struct change){pos,	 stop - pos, su + (pos - fu), CH_SET, false,
						  false, piece};
		}
		pos = stop;
		cur_next(&c);
	}
	return k;
}

/* Number of runs of t overlapping [fu, fu + count) (an upper bound is enough). */
static size_t runs_in(const struct top *t, uint64_t fu, uint64_t count)
{
	struct cursor c;
	const struct run *r;
	size_t n = 0;

	for (cur_seek(&c, t, fu); (r = cur_run(&c)) && r->fu < fu + count; cur_next(&c))
		n++;
	return n;
}

/* [map->lock] Retire every record of file units [fu, fu + count) (old: the
 * base they were mapped in, for a targeted lookup when the range is short). */
static void drop_records(struct cfs_extent_map *map, const struct top *old, uint64_t fu,
			 uint64_t count)
{
	struct tab *t = atomic_load(&map->tab);

	if (!t || !t->used)
		return;
	if (count <= t->used) {
		for (uint64_t i = 0; i < count; i++) {
			struct run r;
			struct xunit *u;

			if (!base_at(old, fu + i, &r))
				continue;
			u = tab_find(map, fu + i, r.su, r.piece);
			if (u)
				tab_remove(map, u);
		}
		return;
	}
	for (uint32_t i = 0; i < t->cap; i++) {
		struct xunit *u = atomic_load(&t->slot[i]);

		if (u && u != TAB_TOMB && u->fu >= fu && u->fu - fu < count)
			tab_remove(map, u);
	}
}

/* Map [file_unit, +count) to [store_unit, +count), or (piece code != 0,
 * count 1) to that piece of store_unit. */
static int map_units(struct cfs_extent_map *map, uint64_t file_unit, uint64_t store_unit,
		     uint32_t piece, uint64_t count, bool replace)
{
	const struct cfs_extent_geom *g = map->geom;
	const struct top *old;
	struct change *ch;
	int64_t k;
	int ret;

	if (count == 0)
		return 0;
	CFS_ASSERT(!piece || count == 1);
	if (file_unit >= g->max_units || count > g->max_units - file_unit)
		return -EFBIG;
	if (store_unit >= g->store_units || count > g->store_units - store_unit)
		return -ERANGE;
	pthread_mutex_lock(&map->lock);
	cfs_epoch_enter();
	ch = malloc((2 * runs_in(atomic_load(&map->top), file_unit, count) + 2) * sizeof(*ch));
	if (!ch) {
		ret = -ENOMEM;
		goto out;
	}
	old = atomic_load(&map->top);
	k = plan_map(old, file_unit, store_unit, piece, count, replace, ch);
	ret = k < 0 ? (int)k : 0;
	if (k > 0)
		ret = base_apply(map, ch, (size_t)k);
	if (!ret && replace) {
		/* Records of replaced mappings no longer count; drop them. */
		for (int64_t i = 0; i < k; i++)
			drop_records(map, old, ch[i].fu, ch[i].count);
	}
	free(ch);
	reclaim(map);
out:
	cfs_epoch_exit();
	pthread_mutex_unlock(&map->lock);
	return ret;
}

int cfs_extent_map_units(struct cfs_extent_map *map, uint64_t file_unit, uint64_t store_unit,
			 uint64_t count)
{
	return map_units(map, file_unit, store_unit, 0, count, false);
}

int cfs_extent_remap_units(struct cfs_extent_map *map, uint64_t file_unit, uint64_t store_unit,
			   uint64_t count)
{
	return map_units(map, file_unit, store_unit, 0, count, true);
}

int cfs_extent_map_piece(struct cfs_extent_map *map, uint64_t file_unit,
			 const struct cfs_extent_loc *loc)
{
	if (!piece_valid(map->geom, loc))
		return -EINVAL;
	return map_units(map, file_unit, loc->store_unit,
			 piece_code(loc->piece_offset_bytes, loc->piece_bytes), 1, false);
}

int cfs_extent_remap_piece(struct cfs_extent_map *map, uint64_t file_unit,
			   const struct cfs_extent_loc *loc)
{
	if (!piece_valid(map->geom, loc))
		return -EINVAL;
	return map_units(map, file_unit, loc->store_unit,
			 piece_code(loc->piece_offset_bytes, loc->piece_bytes), 1, true);
}

int64_t cfs_extent_unmap(struct cfs_extent_map *map, uint64_t file_unit, uint64_t count,
			 cfs_extent_unmap_fn fn, void *arg)
{
	const struct cfs_extent_geom *g = map->geom;
	struct top *old;
	uint64_t end;
	int64_t removed = 0;
	uint64_t run_fu = 0, run_su = 0, run_count = 0;
	struct cursor c;
	const struct run *r;

	if (file_unit >= g->max_units || count == 0)
		return 0;
	end = count > g->max_units - file_unit ? g->max_units : file_unit + count;
	pthread_mutex_lock(&map->lock);
	cfs_epoch_enter();
	old = atomic_load(&map->top);
	if (!old || runs_in(old, file_unit, end - file_unit) == 0)
		goto out;
	if (file_unit == 0 && end == g->max_units) {
		/* Everything: nothing to allocate. */
		atomic_store(&map->top, NULL);
		for (uint32_t i = 0; i < old->n; i++)
			retire(map, &old->leaf[i]->r, R_LEAF);
		retire(map, &old->r, R_TOP);
		atomic_store(&map->mapped_units, 0);
		atomic_store(&map->piece_runs, 0);
		atomic_store(&map->piece_bytes, 0);
	} else if (base_change1(map, (struct change){file_unit, end - file_unit, 0, CH_HOLE, false,
						     false, 0})) {
		removed = -ENOMEM; /* nothing unmapped */
		goto out;
	}
	drop_records(map, old, file_unit, end - file_unit);
	/* Report from the old base (retired, still readable in this section). */
	for (cur_seek(&c, old, file_unit); (r = cur_run(&c)) && r->fu < end; cur_next(&c)) {
		uint64_t a = r->fu > file_unit ? r->fu : file_unit;
		uint64_t b = r->fu + r->count < end ? r->fu + r->count : end;
		uint64_t su = r->su + (a - r->fu);

		removed += (int64_t)(b - a);
		if (run_count && run_fu + run_count == a && run_su + run_count == su && !r->piece) {
			run_count += b - a;
			continue;
		}
		if (run_count && fn)
			fn(arg, run_fu, run_su, run_count, 0, 0);
		run_count = 0;
		if (r->piece) {
			if (fn)
				fn(arg, a, su, 1, piece_offset_of(r->piece),
				   piece_bytes_of(r->piece));
			continue;
		}
		run_fu = a;
		run_su = su;
		run_count = b - a;
	}
	if (run_count && fn)
		fn(arg, run_fu, run_su, run_count, 0, 0);
	reclaim(map);
out:
	cfs_epoch_exit();
	pthread_mutex_unlock(&map->lock);
	return removed;
}

/*
 * [inode lock, map->lock, read section] Apply op to sectors [first, end) of
 * unit fu (bits: LSB-first bytes for the range, NULL = all ones), if it maps
 * su (whole or a piece of it; sectors past a piece are ignored). Freezes an
 * old bitmap before copying it so concurrent writers redo their OR on the
 * new state. *changed (may be NULL) says whether any sector changed.
 */
static int unit_update(struct cfs_extent_map *map, uint64_t fu, uint64_t su,
		       enum cfs_extent_ws_op op, uint32_t first, uint32_t end, const uint8_t *bits,
		       bool *changed)
{
	struct run r;
	uint32_t spu, words;

	if (changed)
		*changed = false;
	if (!base_at(atomic_load(&map->top), fu, &r) || r.su != su)
		return 0;
	spu = sectors_of(map->geom, r.piece);
	words = (spu + 63) / 64;
	if (end > spu)
		end = spu;
	if (first >= end)
		return 0;
	for (;;) {
		struct xunit *u = r.all ? NULL : tab_find(map, fu, su, r.piece);
		uintptr_t ws;
		struct ws_bitmap *old, *bm;
		uint32_t set = 0;
		bool differs = false;
		int ret;

		if (u && atomic_load(&u->ws) == WS_SEALED)
			u = NULL;
		ws = u ? atomic_load(&u->ws) : (r.all ? WS_ALL : WS_NONE);
		old = ws_is_bitmap(ws) ? ws_bitmap(ws) : NULL;
		bm = bitmap_new(spu);
		if (!bm)
			return -ENOMEM;
		if (old)
			atomic_store(&old->frozen, 1);
		for (uint32_t w = 0; w < words; w++) {
			uint64_t v, before;
			uint64_t mask = range_mask(w, first, end);

			if (old)
				v = atomic_load(&old->words[w]);
			else
				v = ws == WS_ALL ? range_mask(w, 0, spu) : 0;
			before = v;
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
			differs |= v != before;
			atomic_store(&bm->words[w], v);
			set += (uint32_t)__builtin_popcountll(v);
		}
		atomic_store(&bm->set_count, set);
		if (changed)
			*changed = differs;
		if (u) {
			uintptr_t next = set == spu ? WS_ALL : set == 0 ? WS_SEALED : (uintptr_t)bm;

			if (next != (uintptr_t)bm)
				free(bm);
			if (!old && next == ws)
				return 0; /* ALL stays ALL */
			if (next == WS_ALL) {
				/* Fold now: base ALL first, then the record goes. */
				ret = base_change1(map, (struct change){fu, 1, su, CH_STATE, true,
									true, r.piece});
				if (ret) {
					if (old)
						atomic_store(&old->frozen, 0);
					return ret;
				}
			}
			if (!atomic_compare_exchange_strong(&u->ws, &ws, next)) {
				/* A writer filled the bitmap (-> ALL) under us: start
				 * over from its result. */
				if (next == (uintptr_t)bm)
					free(bm);
				continue;
			}
			if (old)
				retire_bitmap(map, old);
			if (next == (uintptr_t)bm)
				atomic_fetch_add(&map->record_bytes, bm->r.bytes);
			if (next == WS_SEALED)
				tab_remove(map, u);
			else if (next == WS_ALL)
				tab_remove_later(map, u);
			return 0;
		}
		/* No record: the base says ALL or NONE. */
		if (set == spu || set == 0) {
			free(bm);
			if ((set == spu) == (ws == WS_ALL))
				return 0;
			return base_change1(map, (struct change){fu, 1, su, CH_STATE, set == spu,
								 true, r.piece});
		}
		ret = tab_reserve(map);
		if (!ret) {
			u = xunit_new(map, fu, su, r.piece, (uintptr_t)bm);
			ret = u ? 0 : -ENOMEM;
		}
		if (ret) {
			free(bm);
			return ret;
		}
		{
			struct xunit *stale = tab_put(map, u);

			if (stale)
				retire_xunit(map, stale);
		}
		if (ws == WS_ALL) {
			/* The record first, then the base stops saying ALL. */
			ret = base_change1(
				map, (struct change){fu, 1, su, CH_STATE, false, true, r.piece});
			if (ret) {
				tab_remove(map, u);
				return ret;
			}
		}
		return 0;
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
	int ret = 0;

	if (end < offset_bytes)
		return -EINVAL;
	pthread_mutex_lock(&map->lock);
	cfs_epoch_enter();
	while (pos < last && !ret) {
		uint64_t fu = pos >> g->unit_shift;
		uint64_t unit_start = fu << g->unit_shift;
		uint64_t stop =
			unit_start + g->unit_bytes < last ? unit_start + g->unit_bytes : last;
		struct run r;

		if (fu >= g->max_units)
			break;
		if (!base_at(atomic_load(&map->top), fu, &r)) {
			/* A hole: jump to the next run. */
			struct cursor c;
			const struct run *n;

			cur_seek(&c, atomic_load(&map->top), fu);
			n = cur_run(&c);
			if (!n)
				break;
			pos = n->fu << g->unit_shift;
			continue;
		}
		{
			uint32_t s0 = (uint32_t)((pos - unit_start) >> g->sector_shift);
			uint32_t s1 = (uint32_t)((stop - unit_start) >> g->sector_shift);
			bool changed;

			if (s1 > sectors_of(g, r.piece)) /* past a piece: a hole */
				s1 = sectors_of(g, r.piece);
			ret = s0 < s1 ? unit_update(map, fu, r.su, CFS_EXTENT_WS_OP_CLEAR, s0, s1,
						    NULL, &changed)
				      : (changed = false, 0);
			if (!ret && changed && fn)
				fn(arg, fu, r.su, s0, s1 - s0);
		}
		pos = stop;
	}
	reclaim(map);
	cfs_epoch_exit();
	pthread_mutex_unlock(&map->lock);
	return ret;
}

/* ---- views, collect, for_each, apply ---------------------------------------------------- */

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

/* A one-unit view of a state word (ALL, NONE or a bitmap) of unit fu
 * mapping (su, piece). */
static void view_unit(const struct cfs_extent_map *map, uint64_t fu, uint64_t su, uint32_t piece,
		      uintptr_t ws, struct cfs_extent_unit_view *view)
{
	view->file_unit = fu;
	view->store_unit = su;
	view->unit_count = 1;
	view->sector_count = sectors_of(map->geom, piece);
	view->bits = NULL;
	view->piece_offset_bytes = piece_offset_of(piece);
	view->piece_bytes = piece_bytes_of(piece);
	if (ws == WS_ALL) {
		view->state = CFS_EXTENT_WS_ALL;
	} else if (ws_is_bitmap(ws)) {
		view->state = CFS_EXTENT_WS_BITMAP;
		view->bits = ws_bitmap(ws)->words;
	} else {
		view->state = CFS_EXTENT_WS_NONE;
	}
}

static int change_cmp(const void *a, const void *b)
{
	const struct change *x = a, *y = b;

	return x->fu < y->fu ? -1 : x->fu > y->fu;
}

bool cfs_extent_is_dirty(const struct cfs_extent_map *map)
{
	return atomic_load(&map->dirty_head) != NULL;
}

/*
 * [in a read section] Is u the record of the place its file unit maps now?
 * Not after a relocation: the old place's record waits for its removal and
 * may still be dirty, but the relocation logged the new place's state, and
 * a record of the old place logged after it would be replayed onto the new
 * one (records name the store unit, not the piece: a piece that grew in its
 * own unit would get the old piece's "all written").
 */
static bool rec_is_current(const struct cfs_extent_map *map, const struct xunit *u)
{
	struct run r;

	return base_at(top_of(map), u->fu, &r) && r.su == u->su && r.piece == u->piece;
}

int cfs_extent_collect_dirty(struct cfs_extent_map *map, cfs_extent_unit_fn fn, void *arg)
{
	struct xunit *u, **full = NULL;
	size_t nfull = 0, capfull = 0;
	int ret = 0;

	cfs_epoch_enter();
	atomic_store(&map->map_dirty, 0);
	u = atomic_exchange(&map->dirty_head, NULL);
	while (u) {
		struct xunit *next = u->dirty_next;
		struct cfs_extent_unit_view view;
		uintptr_t ws;

		if (ret) {
			/* fn stopped the walk: the rest stay dirty. */
			atomic_fetch_and(&u->flags, ~XU_DIRTY);
			if (!(atomic_load(&u->flags) & XU_DEAD))
				mark_dirty(map, u);
			u = next;
			continue;
		}
		/* Clear before reading: a write completing now re-dirties it. */
		atomic_fetch_and(&u->flags, ~XU_DIRTY);
		ws = atomic_load(&u->ws);
		if (!(atomic_load(&u->flags) & XU_DEAD) && ws != WS_SEALED &&
		    rec_is_current(map, u)) {
			view_unit(map, u->fu, u->su, u->piece, ws, &view);
			ret = fn(arg, &view);
			if (ret) {
				mark_dirty(map, u); /* not consumed */
			} else if (ws == WS_ALL) {
				if (nfull == capfull) {
					size_t cap = capfull ? capfull * 2 : 64;
					struct xunit **g = realloc(full, cap * sizeof(*g));

					if (g) {
						full = g;
						capfull = cap;
					}
				}
				if (nfull < capfull)
					full[nfull++] = u;
			}
		}
		u = next;
	}
	if (nfull) {
		/* Fold wholly written records into the base runs: one change set,
		 * sorted by file unit. */
		struct change *ch = malloc(nfull * sizeof(*ch));
		size_t k = 0;

		pthread_mutex_lock(&map->lock);
		for (size_t i = 0; ch && i < nfull; i++) {
			u = full[i];
			if ((atomic_load(&u->flags) & XU_DEAD) ||
			    tab_find(map, u->fu, u->su, u->piece) != u)
				continue;
			ch[k++] = (struct change){u->fu, 1, u->su, CH_STATE, true, true, u->piece};
		}
		if (ch && k) {
			qsort(ch, k, sizeof(*ch), change_cmp);
			if (!base_apply(map, ch, k)) {
				for (size_t i = 0; i < k; i++)
					tab_remove_later(map, tab_find(map, ch[i].fu, ch[i].su,
								       ch[i].piece));
			}
		}
		reclaim(map);
		pthread_mutex_unlock(&map->lock);
		free(ch);
	}
	free(full);
	cfs_epoch_exit();
	return ret;
}

/* Pending output of for_each: a run of one state being extended. */
struct walk {
	const struct cfs_extent_map *map;
	cfs_extent_unit_fn fn;
	void *arg;
	struct cfs_extent_unit_view v;
	bool have;
	int ret;
};

static void walk_flush(struct walk *w)
{
	if (w->have && !w->ret)
		w->ret = w->fn(w->arg, &w->v);
	w->have = false;
}

/* Add [fu, +count) -> su with state (NONE or ALL) to the pending run. */
static void walk_add(struct walk *w, uint64_t fu, uint64_t count, uint64_t su,
		     enum cfs_extent_ws state)
{
	if (w->ret || count == 0)
		return;
	if (w->have && w->v.state == state && w->v.file_unit + w->v.unit_count == fu &&
	    w->v.store_unit + w->v.unit_count == su) {
		w->v.unit_count += count;
		return;
	}
	walk_flush(w);
	w->v = (struct cfs_extent_unit_view){fu,   su, count, state, w->map->geom->sectors_per_unit,
					     NULL, 0,  0};
	w->have = true;
}

static int xunit_fu_cmp(const void *a, const void *b)
{
	const struct xunit *x = *(struct xunit *const *)a, *y = *(struct xunit *const *)b;

	return x->fu < y->fu ? -1 : x->fu > y->fu;
}

int cfs_extent_for_each(const struct cfs_extent_map *cmap, cfs_extent_unit_fn fn, void *arg)
{
	struct cfs_extent_map *map = (struct cfs_extent_map *)cmap;
	struct walk w = {.map = map, .fn = fn, .arg = arg};
	struct xunit **recs = NULL;
	size_t nrec = 0, at = 0;
	const struct top *t;
	struct cursor c;
	const struct run *r;
	struct tab *tab;

	cfs_epoch_enter();
	/* The records, sorted by file unit, taken with the base they belong to
	 * (the data path adds records under map->lock). */
	pthread_mutex_lock(&map->lock);
	t = atomic_load(&map->top);
	tab = atomic_load(&map->tab);
	if (tab && tab->used) {
		recs = malloc(tab->used * sizeof(*recs));
		if (!recs) {
			pthread_mutex_unlock(&map->lock);
			cfs_epoch_exit();
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < tab->cap; i++) {
			struct xunit *u = atomic_load(&tab->slot[i]);

			if (u && u != TAB_TOMB)
				recs[nrec++] = u;
		}
	}
	pthread_mutex_unlock(&map->lock);
	if (nrec)
		qsort(recs, nrec, sizeof(*recs), xunit_fu_cmp);

	for (cur_seek(&c, t, 0); (r = cur_run(&c)) && !w.ret; cur_next(&c)) {
		uint64_t pos = r->fu, end = r->fu + r->count;

		if (r->piece) {
			/* One view of its own: its state, or its record's. */
			uintptr_t ws = r->all ? WS_ALL : WS_NONE;

			while (at < nrec && recs[at]->fu < r->fu)
				at++;
			for (; at < nrec && recs[at]->fu == r->fu; at++)
				if (!r->all && xunit_is(recs[at], r->fu, r->su, r->piece) &&
				    atomic_load(&recs[at]->ws) != WS_SEALED)
					ws = atomic_load(&recs[at]->ws);
			walk_flush(&w);
			view_unit(map, r->fu, r->su, r->piece, ws, &w.v);
			w.have = true;
			walk_flush(&w);
			continue;
		}
		if (r->all) {
			walk_add(&w, r->fu, r->count, r->su, CFS_EXTENT_WS_ALL);
			continue;
		}
		while (at < nrec && recs[at]->fu < r->fu)
			at++;
		for (; at < nrec && recs[at]->fu < end && !w.ret; at++) {
			struct xunit *u = recs[at];
			uint64_t su = r->su + (u->fu - r->fu);
			uintptr_t ws = atomic_load(&u->ws);

			if (u->su != su || u->piece || ws == WS_SEALED)
				continue; /* of another mapping */
			walk_add(&w, pos, u->fu - pos, r->su + (pos - r->fu), CFS_EXTENT_WS_NONE);
			pos = u->fu + 1;
			if (ws == WS_ALL) {
				walk_add(&w, u->fu, 1, su, CFS_EXTENT_WS_ALL);
			} else {
				walk_flush(&w);
				view_unit(map, u->fu, su, 0, ws, &w.v);
				w.have = true;
				walk_flush(&w);
			}
		}
		walk_add(&w, pos, end - pos, r->su + (pos - r->fu), CFS_EXTENT_WS_NONE);
	}
	walk_flush(&w);
	free(recs);
	cfs_epoch_exit();
	return w.ret;
}

int cfs_extent_apply_ws(struct cfs_extent_map *map, uint64_t file_unit, uint64_t store_unit,
			enum cfs_extent_ws_op op, uint32_t first_sector, uint32_t sector_count,
			const uint8_t *bits)
{
	uint32_t spu = map->geom->sectors_per_unit;
	int ret;

	if (op > CFS_EXTENT_WS_OP_SET || first_sector > spu || sector_count > spu - first_sector)
		return -EINVAL;
	if (sector_count == 0)
		return 0;
	pthread_mutex_lock(&map->lock);
	cfs_epoch_enter();
	ret = unit_update(map, file_unit, store_unit, op, first_sector, first_sector + sector_count,
			  bits, NULL);
	reclaim(map);
	cfs_epoch_exit();
	pthread_mutex_unlock(&map->lock);
	return ret;
}

int cfs_extent_apply_written_run(struct cfs_extent_map *map, uint64_t file_unit,
				 uint64_t store_unit, uint64_t count)
{
	const struct cfs_extent_geom *g = map->geom;
	const struct top *old;
	struct tab *t;
	int ret;

	if (count == 0 || file_unit >= g->max_units)
		return 0;
	if (count > g->max_units - file_unit)
		count = g->max_units - file_unit;
	pthread_mutex_lock(&map->lock);
	cfs_epoch_enter();
	old = atomic_load(&map->top);
	ret = base_change1(map, (struct change){file_unit, count, store_unit, CH_STATE, true, true,
						PIECE_ANY});
	/* Records of the units now ALL are no longer needed. */
	t = atomic_load(&map->tab);
	for (uint32_t i = 0; !ret && old && t && i < t->cap; i++) {
		struct xunit *u = atomic_load(&t->slot[i]);

		if (u && u != TAB_TOMB && u->fu >= file_unit && u->fu - file_unit < count &&
		    u->su == store_unit + (u->fu - file_unit))
			tab_remove_later(map, u);
	}
	reclaim(map);
	cfs_epoch_exit();
	pthread_mutex_unlock(&map->lock);
	return ret;
}

/* [map->lock, read section] cfs_extent_move's work. */
static int move_locked(struct cfs_extent_map *map, uint64_t file_unit, uint64_t count,
		       uint64_t new_store_unit)
{
	const struct cfs_extent_geom *g = map->geom;
	struct change *ch = NULL;
	struct xunit **made = NULL, **gone = NULL;
	size_t k = 0, nmade = 0, ngone = 0;
	const struct top *old;
	struct cursor c;
	const struct run *r;
	uint64_t pos = file_unit;
	struct tab *t;
	int ret = 0;

	if (count == 0)
		return 0;
	if (file_unit >= g->max_units || count > g->max_units - file_unit)
		return -ENOENT;
	if (new_store_unit >= g->store_units || count > g->store_units - new_store_unit)
		return -ERANGE;
	old = atomic_load(&map->top);
	ch = malloc((runs_in(old, file_unit, count) + 1) * sizeof(*ch));
	if (!ch) {
		ret = -ENOMEM;
		goto out;
	}
	for (cur_seek(&c, old, file_unit); pos < file_unit + count; cur_next(&c)) {
		uint64_t stop;

		r = cur_run(&c);
		if (!r || r->fu > pos) {
			ret = -ENOENT;
			goto out;
		}
		if (r->piece) {
			ret = -EINVAL; /* cfs_extent_relocate's */
			goto out;
		}
		stop = r->fu + r->count < file_unit + count ? r->fu + r->count : file_unit + count;
		ch[k++] = (struct change){pos,	  stop - pos,  new_store_unit + (pos - file_unit),
					  CH_SET, r->all != 0, false,
					  0};
		pos = stop;
	}
	/* Copies of the records under the new store units, in the table
	 * before the base names them (a reader sees one pair or the other). */
	t = atomic_load(&map->tab);
	if (t && t->used) {
		made = calloc(t->used, sizeof(*made));
		gone = calloc(t->used, sizeof(*gone));
		if (!made || !gone) {
			ret = -ENOMEM;
			goto out;
		}
		for (uint32_t i = 0; i < t->cap; i++) {
			struct xunit *u = atomic_load(&t->slot[i]);
			struct run br;

			if (!u || u == TAB_TOMB || u->fu < file_unit ||
			    u->fu - file_unit >= count || !base_at(old, u->fu, &br) ||
			    br.su != u->su || u->piece)
				continue;
			gone[ngone++] = u;
		}
		for (size_t i = 0; i < ngone; i++) {
			struct xunit *u = gone[i];
			uintptr_t ws = atomic_load(&u->ws), nws = ws;

			if (ws_is_bitmap(ws)) {
				struct ws_bitmap *bm = bitmap_new(g->sectors_per_unit);

				if (!bm) {
					ret = -ENOMEM;
					goto out;
				}
				for (uint32_t w = 0; w < words_per_unit(g); w++)
					atomic_store(&bm->words[w],
						     atomic_load(&ws_bitmap(ws)->words[w]));
				atomic_store(&bm->set_count,
					     atomic_load(&ws_bitmap(ws)->set_count));
				nws = (uintptr_t)bm;
			}
			made[nmade] =
				xunit_new(map, u->fu, new_store_unit + (u->fu - file_unit), 0, nws);
			if (!made[nmade]) {
				if (ws_is_bitmap(nws))
					free(ws_bitmap(nws));
				ret = -ENOMEM;
				goto out;
			}
			nmade++;
		}
	}
	for (size_t i = 0; i < nmade; i++) {
		ret = tab_reserve(map);
		if (ret)
			goto out;
		/* A copy still pending removal from an earlier move back. */
		struct xunit *prev = tab_put(map, made[i]);

		if (prev)
			retire_xunit(map, prev);
		made[i] = NULL;
	}
	ret = base_apply(map, ch, k);
	if (ret) {
		/* The copies are unreachable through the old base: drop them. */
		for (size_t i = 0; i < nmade; i++) {
			struct xunit *u = tab_find(map, gone[i]->fu,
						   new_store_unit + (gone[i]->fu - file_unit), 0);

			if (u)
				tab_remove(map, u);
		}
		goto out;
	}
	for (size_t i = 0; i < ngone; i++)
		tab_remove_later(map, gone[i]);
out:
	for (size_t i = 0; made && i < nmade; i++) {
		if (made[i]) {
			atomic_fetch_sub(&map->record_bytes, sizeof(struct xunit));
			xunit_free(made[i]);
		}
	}
	free(made);
	free(gone);
	free(ch);
	return ret;
}

int cfs_extent_move(struct cfs_extent_map *map, uint64_t file_unit, uint64_t count,
		    uint64_t new_store_unit)
{
	int ret;

	pthread_mutex_lock(&map->lock);
	cfs_epoch_enter();
	ret = move_locked(map, file_unit, count, new_store_unit);
	reclaim(map);
	cfs_epoch_exit();
	pthread_mutex_unlock(&map->lock);
	return ret;
}

int cfs_extent_remap(struct cfs_extent_map *map, uint64_t file_unit, uint64_t from_store_unit,
		     uint64_t to_store_unit, cfs_extent_unit_fn fn, void *arg)
{
	struct cfs_extent_loc from = {from_store_unit, 0, 0}, to = {to_store_unit, 0, 0};

	if (from_store_unit == to_store_unit)
		return cfs_extent_unit_get(map, file_unit) == (int64_t)from_store_unit ? 0
										       : -ESTALE;
	return cfs_extent_relocate(map, file_unit, &from, &to, fn, arg);
}

/* [map->lock, read section] cfs_extent_relocate's work; *view gets the
 * new state. */
static int relocate_locked(struct cfs_extent_map *map, uint64_t fu, uint32_t from_piece,
			   const struct cfs_extent_loc *to, struct cfs_extent_unit_view *view)
{
	uint32_t to_piece = piece_code(to->piece_offset_bytes, to->piece_bytes);
	uint32_t lim_from = sectors_of(map->geom, from_piece);
	uint32_t lim_to = sectors_of(map->geom, to_piece);
	struct xunit *old_rec, *made = NULL;
	struct ws_bitmap *bm = NULL;
	struct run r;
	uintptr_t ws;
	bool all;
	int ret;

	base_at(atomic_load(&map->top), fu, &r);
	old_rec = r.all ? NULL : tab_find(map, fu, r.su, r.piece);
	ws = unit_ws(map, &r, fu);
	all = ws == WS_ALL && lim_to == lim_from;
	if (!all && ws != WS_NONE) {
		/* The old sectors as they are, the new ones unwritten. */
		bm = bitmap_new(lim_to);
		if (!bm)
			return -ENOMEM;
		for (uint32_t w = 0; w < (lim_from + 63) / 64; w++)
			atomic_store(&bm->words[w],
				     ws == WS_ALL ? range_mask(w, 0, lim_from)
						  : atomic_load(&ws_bitmap(ws)->words[w]));
		atomic_store(&bm->set_count,
			     ws == WS_ALL ? lim_from : atomic_load(&ws_bitmap(ws)->set_count));
		ret = tab_reserve(map);
		if (!ret) {
			made = xunit_new(map, fu, to->store_unit, to_piece, (uintptr_t)bm);
			ret = made ? 0 : -ENOMEM;
		}
		if (ret) {
			free(bm);
			return ret;
		}
		/* In the table before the base names it. A record of this
		 * place still pending removal is replaced. */
		made = tab_put(map, made);
		if (made)
			retire_xunit(map, made);
	}
	ret = base_change1(map,
			   (struct change){fu, 1, to->store_unit, CH_SET, all, false, to_piece});
	if (ret) {
		if (bm)
			tab_remove(map, tab_find(map, fu, to->store_unit, to_piece));
		return ret;
	}
	if (old_rec)
		tab_remove_later(map, old_rec);
	view_unit(map, fu, to->store_unit, to_piece,
		  all  ? WS_ALL
		  : bm ? (uintptr_t)bm
		       : WS_NONE,
		  view);
	return 0;
}

int cfs_extent_relocate(struct cfs_extent_map *map, uint64_t file_unit,
			const struct cfs_extent_loc *from, const struct cfs_extent_loc *to,
			cfs_extent_unit_fn fn, void *arg)
{
	const struct cfs_extent_geom *g = map->geom;
	uint32_t from_piece = piece_code(from->piece_offset_bytes, from->piece_bytes);
	struct cfs_extent_unit_view view;
	struct run r;
	int ret;

	if ((to->piece_bytes && !piece_valid(g, to)) ||
	    (!to->piece_bytes && to->piece_offset_bytes) ||
	    cfs_extent_loc_bytes(g, to) < cfs_extent_loc_bytes(g, from) ||
	    (to->store_unit == from->store_unit &&
	     to->piece_offset_bytes == from->piece_offset_bytes &&
	     to->piece_bytes == from->piece_bytes))
		return -EINVAL;
	if (to->store_unit >= g->store_units)
		return -ERANGE;
	pthread_mutex_lock(&map->lock);
	cfs_epoch_enter();
	if (file_unit >= g->max_units || !base_at(atomic_load(&map->top), file_unit, &r) ||
	    r.su != from->store_unit || r.piece != from_piece) {
		ret = -ESTALE;
		goto out;
	}
	ret = relocate_locked(map, file_unit, from_piece, to, &view);
	if (ret)
		goto out;
	/* fn reads the new state while this section keeps it. */
	reclaim(map);
	pthread_mutex_unlock(&map->lock);
	ret = fn ? fn(arg, &view) : 0;
	cfs_epoch_exit();
	return ret;
out:
	reclaim(map);
	cfs_epoch_exit();
	pthread_mutex_unlock(&map->lock);
	return ret;
}

bool cfs_extent_quiesce(struct cfs_extent_map *map)
{
	bool more;

	pthread_mutex_lock(&map->lock);
	more = reclaim(map);
	pthread_mutex_unlock(&map->lock);
	return more;
}

/* ---- SEEK_DATA / SEEK_HOLE -------------------------------------------------------------- */

/* First byte >= offset (and < size) whose written-state is `state`, or -1. */
static int64_t seek_state(const struct cfs_extent_map *map, uint64_t offset, uint64_t size,
			  bool state)
{
	const struct top *t;
	uint64_t pos = offset;
	int64_t at = -1;

	cfs_epoch_enter();
	t = top_of(map);
	while (pos < size) {
		bool st;
		uint64_t n = span_of(map, t, pos, size, &st);

		if (st == state) {
			at = (int64_t)pos;
			break;
		}
		pos += n;
	}
	cfs_epoch_exit();
	return at;
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
