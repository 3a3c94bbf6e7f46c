/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * piece.c — pieces of units for small files (piece.h): per piece unit a
 * buddy tree, units listed by the largest piece they can still give, busy
 * pieces in a list tagged with the sequence number of their free.
 *
 * The tree of a unit of N blocks (a block is the smallest piece) is an array
 * of 2N bytes, node 1 the whole unit, nodes 2i and 2i+1 the halves of node
 * i. A node's byte is FREE_NONE (0) when nothing in it is free, order + 1
 * of the largest free aligned block inside it otherwise (the node's own
 * order + 1 when it is wholly free), or TAKEN when it is a piece in use or
 * busy. So a piece of order k fits where a node says more than k, and the
 * root says what the unit can still give.
 *
 * Invariants: a node is TAKEN only where no ancestor or descendant is (the
 * pieces never overlap); every other node's byte follows from its children
 * (wholly free, or the larger of their free orders); a unit is in the list
 * of its root's free order; used + busy + free bytes = units * unit bytes.
 *
 * What it does not do: I/O, logging, know files (piece.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fs/base/assert.h"
#include "fs/base/hash.h"
#include "fs/meta/piece.h"

#define FREE_NONE 0u
#define TAKEN 0x80u
#define ORDERS_MAX 13 /* a list per free order: 0 .. log2(CFS_PIECES_BLOCKS_MAX) */

_Static_assert((1u << (ORDERS_MAX - 1)) == CFS_PIECES_BLOCKS_MAX, "a list per tree level");

struct punit {
	struct cfs_hlink link; /* in pieces->units, hash: the unit */
	uint64_t unit;
	struct punit *prev, *next; /* in by_free[its root's free order] */
	int list;		   /* that order, or -1 when nothing is free */
	uint8_t tree[];		   /* 2 * blocks bytes, [0] unused */
};

struct busy_piece {
	uint64_t unit;
	uint32_t offset;
	uint32_t bytes;
	uint64_t seq;
};

struct cfs_pieces {
	pthread_mutex_t lock;
	struct cfs_alloc *alloc;
	uint32_t unit_bytes;
	uint32_t min_bytes;
	uint32_t min_shift;
	uint32_t top;	 /* order of the whole unit: log2(blocks) */
	uint32_t blocks; /* per unit */
	struct cfs_htable units;
	struct punit *by_free[ORDERS_MAX];
	uint64_t last_unit; /* the newest piece unit: the next goes after it */
	uint64_t unit_count;
	uint64_t used_bytes;
	uint64_t busy_bytes;
	uint64_t pieces;
	struct busy_piece *busy;
	size_t busy_len, busy_cap;
};

static inline uint32_t log2_u32(uint32_t x)
{
	return 31u - (uint32_t)__builtin_clz(x);
}

static inline bool pow2(uint32_t x)
{
	return x && !(x & (x - 1));
}

/* The free order + 1 a node gives its parent (0 for none). */
static inline uint32_t gives(uint8_t v)
{
	return v == TAKEN ? FREE_NONE : v;
}

uint32_t cfs_pieces_min_bytes(uint32_t unit_bytes, uint32_t at_least)
{
	uint32_t m = at_least;

	if (!pow2(unit_bytes) || !pow2(at_least))
		return 0;
	if (unit_bytes / CFS_PIECES_BLOCKS_MAX > m)
		m = unit_bytes / CFS_PIECES_BLOCKS_MAX;
	return m <= unit_bytes / 2 ? m : 0;
}

int cfs_pieces_create(struct cfs_alloc *alloc, uint32_t unit_bytes, uint32_t min_bytes,
		      struct cfs_pieces **out)
{
	struct cfs_pieces *p;

	*out = NULL;
	if (!pow2(unit_bytes) || !pow2(min_bytes) || min_bytes > unit_bytes / 2 ||
	    unit_bytes / min_bytes > CFS_PIECES_BLOCKS_MAX)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	if (cfs_htable_init(&p->units, 4)) {
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	p->alloc = alloc;
	p->unit_bytes = unit_bytes;
	p->min_bytes = min_bytes;
	p->min_shift = log2_u32(min_bytes);
	p->blocks = unit_bytes / min_bytes;
	p->top = log2_u32(p->blocks);
	p->last_unit = CFS_ALLOC_NO_HINT;
	*out = p;
	return 0;
}

void cfs_pieces_destroy(struct cfs_pieces *p)
{
	if (!p)
		return;
	for (struct cfs_hlink *l = cfs_htable_next(&p->units, NULL), *next; l; l = next) {
		next = cfs_htable_next(&p->units, l);
		free(cfs_container_of(l, struct punit, link));
	}
	cfs_htable_fini(&p->units);
	free(p->busy);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

uint32_t cfs_pieces_size(uint32_t min_bytes, uint32_t unit_bytes, uint64_t bytes)
{
	uint64_t size = min_bytes;

	if (!min_bytes)
		return 0;
	while (size < bytes && size <= unit_bytes / 2)
		size <<= 1;
	return size <= unit_bytes / 2 ? (uint32_t)size : 0;
}

/* ---- the lists of units by what they can give ------------------------------------ */

static void list_out(struct cfs_pieces *p, struct punit *u)
{
	if (u->list < 0)
		return;
	if (u->prev)
		u->prev->next = u->next;
	else
		p->by_free[u->list] = u->next;
	if (u->next)
		u->next->prev = u->prev;
	u->prev = u->next = NULL;
	u->list = -1;
}

/* Put u in the list of its root's free order (none: in no list). */
static void list_in(struct cfs_pieces *p, struct punit *u)
{
	uint32_t g = gives(u->tree[1]);

	list_out(p, u);
	if (g == FREE_NONE)
		return;
	u->list = (int)(g - 1);
	u->prev = NULL;
	u->next = p->by_free[u->list];
	if (u->next)
		u->next->prev = u;
	p->by_free[u->list] = u;
}

/* ---- one unit's tree -------------------------------------------------------------- */

static struct punit *unit_find(struct cfs_pieces *p, uint64_t unit)
{
	for (struct cfs_hlink *l = cfs_htable_find(&p->units, unit); l;
	     l = cfs_htable_find_next(l)) {
		struct punit *u = cfs_container_of(l, struct punit, link);

		if (u->unit == unit)
			return u;
	}
	return NULL;
}

/* A piece unit with every block free (in no list yet). */
static struct punit *unit_new(struct cfs_pieces *p, uint64_t unit)
{
	struct punit *u = calloc(1, sizeof(*u) + 2 * (size_t)p->blocks);

	if (!u)
		return NULL;
	u->unit = unit;
	u->list = -1;
	for (uint32_t i = 1; i < 2 * p->blocks; i++)
		u->tree[i] = (uint8_t)(p->top - log2_u32(i) + 1);
	cfs_htable_insert(&p->units, &u->link, unit);
	p->unit_count++;
	return u;
}

/* [lock] Unit (taken from the allocator) becomes a piece unit, the newest;
 * without memory it goes back and NULL. */
static struct punit *unit_adopt(struct cfs_pieces *p, uint64_t unit)
{
	struct punit *u = unit_new(p, unit);

	if (!u) {
		cfs_alloc_free(p->alloc, unit, 1, 0);
		return NULL;
	}
	p->last_unit = unit;
	return u;
}

/* Node i (of order `order`) changed: recompute its ancestors. */
static void tree_up(struct punit *u, uint32_t i, uint32_t order)
{
	for (; i > 1; i /= 2, order++) {
		uint32_t l = gives(u->tree[i & ~1u]), r = gives(u->tree[i | 1u]);

		u->tree[i / 2] = (uint8_t)(l == order + 1 && r == order + 1 ? order + 2
					   : l > r			    ? l
									    : r);
	}
}

/* The node of the piece at offset with order k. */
static uint32_t node_of(const struct cfs_pieces *p, uint32_t offset, uint32_t k)
{
	return (1u << (p->top - k)) + ((offset >> p->min_shift) >> k);
}

/* Can node i be taken as a piece of order k: wholly free, no ancestor
 * taken? */
static bool node_free(const struct punit *u, uint32_t i, uint32_t k)
{
	if (u->tree[i] != k + 1)
		return false;
	for (i /= 2; i >= 1; i /= 2)
		if (u->tree[i] == TAKEN)
			return false;
	return true;
}

static void node_take(struct punit *u, uint32_t i, uint32_t k)
{
	u->tree[i] = TAKEN;
	tree_up(u, i, k);
}

static void node_release(struct punit *u, uint32_t i, uint32_t k)
{
	CFS_ASSERT(u->tree[i] == TAKEN);
	u->tree[i] = (uint8_t)(k + 1);
	tree_up(u, i, k);
}

/* Best fit inside u: the smallest free block of order >= k, split down. */
static uint32_t tree_alloc(const struct cfs_pieces *p, struct punit *u, uint32_t k)
{
	uint32_t i = 1, order = p->top;

	while (order > k) {
		uint32_t l = gives(u->tree[2 * i]), r = gives(u->tree[2 * i + 1]);
		bool left;

		if (l > k && r > k)
			left = l <= r;
		else
			left = l > k;
		i = 2 * i + (left ? 0 : 1);
		order--;
	}
	CFS_ASSERT(u->tree[i] == k + 1);
	node_take(u, i, k);
	return (i - (1u << (p->top - k))) << (k + p->min_shift);
}

/* Does (offset, bytes) name a piece this allocator makes? Its order in *k. */
static bool piece_ok(const struct cfs_pieces *p, uint32_t offset, uint32_t bytes, uint32_t *k)
{
	if (!pow2(bytes) || bytes < p->min_bytes || bytes > p->unit_bytes / 2 || offset % bytes ||
	    offset > p->unit_bytes - bytes)
		return false;
	*k = log2_u32(bytes) - p->min_shift;
	return true;
}

/* [lock] u lost a piece; an empty unit goes back to the allocator (busy
 * until seq is durable; 0: free at once). */
static void unit_settle(struct cfs_pieces *p, struct punit *u, uint64_t seq)
{
	if (u->tree[1] != p->top + 1) {
		list_in(p, u);
		return;
	}
	list_out(p, u);
	cfs_htable_remove(&p->units, &u->link);
	p->unit_count--;
	cfs_alloc_free(p->alloc, u->unit, 1, seq);
	free(u);
}

/* ---- the calls -------------------------------------------------------------------- */

int cfs_pieces_get(struct cfs_pieces *p, uint32_t bytes, uint64_t *unit_out, uint32_t *offset_out)
{
	return cfs_pieces_get_keeping(p, bytes, 0, unit_out, offset_out);
}

int cfs_pieces_get_keeping(struct cfs_pieces *p, uint32_t bytes, uint64_t keep_units,
			   uint64_t *unit_out, uint32_t *offset_out)
{
	struct punit *u = NULL;
	uint32_t k;
	int ret = 0;

	if (!piece_ok(p, 0, bytes, &k))
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	for (uint32_t o = k; o <= p->top && !u; o++)
		u = p->by_free[o];
	if (!u) {
		uint64_t first, count;

		ret = cfs_alloc_get_keeping(p->alloc,
					    p->last_unit == CFS_ALLOC_NO_HINT ? p->last_unit
									      : p->last_unit + 1,
					    1, keep_units, &first, &count);
		if (ret == -ENOSPC && p->busy_len)
			ret = -EAGAIN; /* freed pieces come back at the commit */
		if (ret)
			goto out_unlock;
		u = unit_adopt(p, first);
		if (!u) {
			ret = -ENOMEM;
			goto out_unlock;
		}
	}
	*offset_out = tree_alloc(p, u, k);
	*unit_out = u->unit;
	list_in(p, u);
	p->used_bytes += bytes;
	p->pieces++;
out_unlock:
	pthread_mutex_unlock(&p->lock);
	return ret;
}

int cfs_pieces_reserve(struct cfs_pieces *p, uint64_t unit, uint32_t offset, uint32_t bytes)
{
	struct punit *u;
	uint32_t k, i;
	int ret = 0;

	if (!piece_ok(p, offset, bytes, &k))
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	u = unit_find(p, unit);
	if (!u) {
		ret = cfs_alloc_reserve(p->alloc, unit, 1);
		if (ret)
			goto out_unlock;
		u = unit_adopt(p, unit);
		if (!u) {
			ret = -ENOMEM;
			goto out_unlock;
		}
	}
	i = node_of(p, offset, k);
	if (!node_free(u, i, k)) {
		ret = -EEXIST;
		list_in(p, u);
		goto out_unlock;
	}
	node_take(u, i, k);
	list_in(p, u);
	p->used_bytes += bytes;
	p->pieces++;
out_unlock:
	pthread_mutex_unlock(&p->lock);
	return ret;
}

/* [lock] The piece becomes free blocks (its free is durable, or never was). */
static void release(struct cfs_pieces *p, uint64_t unit, uint32_t offset, uint32_t bytes,
		    uint64_t seq)
{
	struct punit *u = unit_find(p, unit);
	uint32_t k;

	CFS_ASSERT(u && piece_ok(p, offset, bytes, &k));
	node_release(u, node_of(p, offset, k), k);
	p->pieces--;
	unit_settle(p, u, seq);
}

void cfs_pieces_free(struct cfs_pieces *p, uint64_t unit, uint32_t offset, uint32_t bytes,
		     uint64_t seq)
{
	struct punit *u;
	uint32_t k;

	pthread_mutex_lock(&p->lock);
	u = unit_find(p, unit);
	/* Never in use: handing it out again would give it to two files. */
	CFS_ASSERT(u && piece_ok(p, offset, bytes, &k) && u->tree[node_of(p, offset, k)] == TAKEN);
	CFS_ASSERT(p->used_bytes >= bytes);
	p->used_bytes -= bytes;
	if (seq == 0) {
		release(p, unit, offset, bytes, 0);
	} else {
		if (p->busy_len == p->busy_cap) {
			size_t cap = p->busy_cap ? p->busy_cap * 2 : 64;
			struct busy_piece *b = realloc(p->busy, cap * sizeof(*b));

			/* Without room the piece stays taken until the next
			 * mount rebuilds the allocator: lost space, never a
			 * piece given twice. */
			if (!b)
				goto out_unlock;
			p->busy = b;
			p->busy_cap = cap;
		}
		p->busy[p->busy_len++] = (struct busy_piece){unit, offset, bytes, seq};
		p->busy_bytes += bytes;
	}
out_unlock:
	pthread_mutex_unlock(&p->lock);
}

uint64_t cfs_pieces_commit_done(struct cfs_pieces *p, uint64_t durable_seq)
{
	uint64_t released = 0;
	size_t kept = 0;

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->busy_len; i++) {
		struct busy_piece b = p->busy[i];

		if (b.seq > durable_seq) {
			p->busy[kept++] = b;
			continue;
		}
		p->busy_bytes -= b.bytes;
		release(p, b.unit, b.offset, b.bytes, durable_seq);
		released++;
	}
	p->busy_len = kept;
	pthread_mutex_unlock(&p->lock);
	return released;
}

void cfs_pieces_stat(struct cfs_pieces *p, struct cfs_pieces_stat *st)
{
	pthread_mutex_lock(&p->lock);
	st->units = p->unit_count;
	st->used_bytes = p->used_bytes;
	st->busy_bytes = p->busy_bytes;
	st->free_bytes = p->unit_count * p->unit_bytes - p->used_bytes - p->busy_bytes;
	st->pieces = p->pieces;
	pthread_mutex_unlock(&p->lock);
}

int cfs_pieces_state(struct cfs_pieces *p, uint64_t unit, uint32_t offset, uint32_t bytes)
{
	struct punit *u;
	uint32_t k, i;
	int ret = -1;

	if (!piece_ok(p, offset, bytes, &k))
		return -1;
	pthread_mutex_lock(&p->lock);
	u = unit_find(p, unit);
	if (u) {
		i = node_of(p, offset, k);
		if (u->tree[i] == TAKEN)
			ret = 1;
		else if (node_free(u, i, k))
			ret = 0;
	}
	pthread_mutex_unlock(&p->lock);
	return ret;
}
