/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * alloc.c — the allocator of the data region: the free ranges in a treap
 * ordered by first unit, each subtree knowing its longest range, plus a list
 * of busy ranges tagged with the sequence number of the log record that
 * freed them. Memory follows the free space's fragments, not the units: a
 * 100 TB store of large chunks is a few hundred ranges (the bitmap this
 * replaced took a bit per unit, 12.5 MB there).
 *
 * Invariant (checked by assertions): free_units + busy_units + used_units ==
 * unit_count, free ranges never touch or overlap (neighbours are merged),
 * and every busy range lies outside the free ranges.
 *
 * Policy: first fit from a hint (the unit after the file's previous one, or
 * a rotor), so chunk files that grow by appending stay contiguous; a shorter
 * run only when no run of the wanted length exists anywhere.
 *
 * What it does not do: persist anything (rebuilt from the maps at mount),
 * I/O (discard is a callback), or wait for commits (-EAGAIN says "busy").
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fs/base/assert.h"
#include "fs/meta/alloc.h"

struct busy_range {
	uint64_t first_unit;
	uint64_t count;
	uint64_t seq; /* free record; released when durable >= seq */
};

/* A free range [start, start + len), a treap node. */
struct fnode {
	uint64_t start;
	uint64_t len;
	uint64_t maxlen; /* longest range in this subtree */
	uint64_t prio;
	struct fnode *l, *r;
};

struct cfs_alloc {
	pthread_mutex_t lock;
	uint64_t unit_count;
	struct fnode *root;
	uint64_t free_ranges;
	uint64_t free_units;
	uint64_t busy_units;
	uint64_t rotor; /* where CFS_ALLOC_NO_HINT starts */
	uint64_t rng;	/* treap priorities */
	struct busy_range *busy;
	size_t busy_len;
	size_t busy_cap;
	/* Released units not discarded yet, oldest first (seq unused). */
	struct busy_range *undiscarded;
	size_t undiscarded_len;
	size_t undiscarded_cap;
	uint64_t undiscarded_units;
};

/* ---- the treap of free ranges -------------------------------------------------------- */

static inline uint64_t maxlen_of(const struct fnode *n)
{
	return n ? n->maxlen : 0;
}

static void update(struct fnode *n)
{
	uint64_t m = n->len;

	if (maxlen_of(n->l) > m)
		m = n->l->maxlen;
	if (maxlen_of(n->r) > m)
		m = n->r->maxlen;
	n->maxlen = m;
}

/* Split t into nodes starting before key (*a) and the rest (*b). */
static void split(struct fnode *t, uint64_t key, struct fnode **a, struct fnode **b)
{
	if (!t) {
		*a = *b = NULL;
		return;
	}
	if (t->start < key) {
		split(t->r, key, &t->r, b);
		update(t);
		*a = t;
	} else {
		split(t->l, key, a, &t->l);
		update(t);
		*b = t;
	}
}

/* Every node of a before every node of b. */
static struct fnode *merge(struct fnode *a, struct fnode *b)
{
	if (!a || !b)
		return a ? a : b;
	if (a->prio > b->prio) {
		a->r = merge(a->r, b);
		update(a);
		return a;
	}
	b->l = merge(a, b->l);
	update(b);
	return b;
}

/* The node with the largest start <= u, or NULL. */
static struct fnode *pred(struct fnode *t, uint64_t u)
{
	struct fnode *best = NULL;

	while (t) {
		if (t->start <= u) {
			best = t;
			t = t->r;
		} else {
			t = t->l;
		}
	}
	return best;
}

/* The first node (by start) with start >= from and len >= want, or NULL. */
static struct fnode *first_fit(struct fnode *t, uint64_t from, uint64_t want)
{
	struct fnode *hit;

	if (!t || t->maxlen < want)
		return NULL;
	if (t->start < from)
		return first_fit(t->r, from, want);
	hit = first_fit(t->l, from, want);
	if (hit)
		return hit;
	if (t->len >= want)
		return t;
	return first_fit(t->r, from, want);
}

static void tree_free(struct fnode *t)
{
	if (!t)
		return;
	tree_free(t->l);
	tree_free(t->r);
	free(t);
}

static uint64_t next_prio(struct cfs_alloc *a)
{
	/* xorshift64: only the shape of the treap depends on it. */
	a->rng ^= a->rng << 13;
	a->rng ^= a->rng >> 7;
	a->rng ^= a->rng << 17;
	return a->rng;
}

/* Insert a node for [start, +len) (not touching any other). false: no memory. */
static bool range_insert(struct cfs_alloc *a, uint64_t start, uint64_t len)
{
	struct fnode *n = calloc(1, sizeof(*n)), *l, *r;

	if (!n)
		return false;
	n->start = start;
	n->len = n->maxlen = len;
	n->prio = next_prio(a);
	split(a->root, start, &l, &r);
	a->root = merge(merge(l, n), r);
	a->free_ranges++;
	return true;
}

/* Take node n (starting at start) out of the tree and free it. */
static void range_remove(struct cfs_alloc *a, uint64_t start)
{
	struct fnode *l, *m, *r;

	split(a->root, start, &l, &m);
	split(m, start + 1, &m, &r);
	CFS_ASSERT(m && !m->l && !m->r && m->start == start);
	free(m);
	a->root = merge(l, r);
	a->free_ranges--;
}

/*
 * Units [first, +count), all free and inside one range, become not free.
 * Splitting a range in two needs a node: false if there is no memory (then
 * nothing changed).
 */
static bool take_units(struct cfs_alloc *a, uint64_t first, uint64_t count)
{
	struct fnode *n = pred(a->root, first);
	uint64_t start, end, n_end;

	CFS_ASSERT(n && first + count <= n->start + n->len);
	start = n->start;
	n_end = n->start + n->len;
	end = first + count;
	if (first > start && end < n_end && !range_insert(a, end, n_end - end))
		return false;
	range_remove(a, start);
	if (first > start)
		CFS_ASSERT(range_insert(a, start, first - start) ||
			   !"cannot fail: a node was freed");
	else if (end < n_end && first == start)
		CFS_ASSERT(range_insert(a, end, n_end - end) || !"cannot fail: a node was freed");
	a->free_units -= count;
	return true;
}

/* Units [first, +count), none free, become free (merged with neighbours).
 * false if a node was needed and there is no memory: nothing changed. */
static bool give_units(struct cfs_alloc *a, uint64_t first, uint64_t count)
{
	struct fnode *p = pred(a->root, first + count);
	uint64_t start = first, end = first + count;

	/* p: the range at or before the end; its start must be past us, or it
	 * must end before us. */
	CFS_ASSERT(!p || p->start >= end || p->start + p->len <= first);
	if (p && p->start == end) {
		end = p->start + p->len;
		range_remove(a, p->start);
		p = pred(a->root, first);
	} else if (p && p->start > end) {
		p = pred(a->root, first);
	}
	if (p && p->start + p->len == first) {
		start = p->start;
		range_remove(a, p->start);
	}
	if (!range_insert(a, start, end - start)) {
		/* Put back what was merged (nodes were just freed: this fits). */
		if (start < first)
			CFS_ASSERT(range_insert(a, start, first - start));
		if (end > first + count)
			CFS_ASSERT(range_insert(a, first + count, end - first - count));
		return false;
	}
	a->free_units += count;
	return true;
}

/* Is [first, +count) wholly free? */
static bool all_free(const struct cfs_alloc *a, uint64_t first, uint64_t count)
{
	const struct fnode *n = pred(a->root, first);

	return n && first + count <= n->start + n->len;
}

/* Does [first, +count) touch a free unit? */
static bool any_free(const struct cfs_alloc *a, uint64_t first, uint64_t count)
{
	const struct fnode *n = pred(a->root, first + count - 1);

	return n && n->start + n->len > first;
}

/*
 * First free run starting at or after from (a range holding from counts from
 * from) that is at least want long (exact), or of any length; its start and
 * length (capped at want), or false.
 */
static bool find_after(const struct cfs_alloc *a, uint64_t from, uint64_t want, bool exact,
		       uint64_t *first, uint64_t *count)
{
	const struct fnode *n = pred(a->root, from);

	if (n && n->start + n->len > from && (!exact || n->start + n->len - from >= want)) {
		*first = from;
		*count = n->start + n->len - from;
	} else {
		n = first_fit(a->root, from + (n && n->start + n->len > from ? 1 : 0),
			      exact ? want : 1);
		if (!n)
			return false;
		*first = n->start;
		*count = n->len;
	}
	if (*count > want)
		*count = want;
	return true;
}

int cfs_alloc_create(uint64_t unit_count, struct cfs_alloc **out)
{
	struct cfs_alloc *a;

	*out = NULL;
	if (unit_count == 0 || unit_count > CFS_ALLOC_UNITS_MAX)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->rng = 0x9e3779b97f4a7c15ull ^ unit_count;
	a->busy_cap = CFS_ALLOC_BUSY_INITIAL;
	a->busy = calloc(a->busy_cap, sizeof(*a->busy));
	if (!a->busy || !range_insert(a, 0, unit_count)) {
		free(a->busy);
		tree_free(a->root);
		free(a);
		return -ENOMEM;
	}
	a->unit_count = unit_count;
	a->free_units = unit_count;
	pthread_mutex_init(&a->lock, NULL);
	*out = a;
	return 0;
}

void cfs_alloc_destroy(struct cfs_alloc *alloc)
{
	if (!alloc)
		return;
	pthread_mutex_destroy(&alloc->lock);
	tree_free(alloc->root);
	free(alloc->busy);
	free(alloc->undiscarded);
	free(alloc);
}

int cfs_alloc_get(struct cfs_alloc *alloc, uint64_t hint_unit, uint64_t want_units,
		  uint64_t *first_out, uint64_t *count_out)
{
	return cfs_alloc_get_keeping(alloc, hint_unit, want_units, 0, first_out, count_out);
}

int cfs_alloc_get_keeping(struct cfs_alloc *alloc, uint64_t hint_unit, uint64_t want_units,
			  uint64_t keep_units, uint64_t *first_out, uint64_t *count_out)
{
	struct cfs_alloc *a = alloc;
	uint64_t hint, first = 0, count = 0;
	bool found;
	int ret = 0;

	if (want_units == 0)
		return -EINVAL;
	pthread_mutex_lock(&a->lock);
	/* Under the same lock as the allocation: two callers cannot both pass
	 * the check and take the kept units between them. */
	if (keep_units && a->free_units + a->busy_units < keep_units + want_units) {
		ret = -ENOSPC;
		goto out_unlock;
	}
	if (a->free_units == 0) {
		ret = a->busy_units ? -EAGAIN : -ENOSPC;
		goto out_unlock;
	}
	hint = hint_unit == CFS_ALLOC_NO_HINT ? a->rotor : hint_unit % a->unit_count;
	if (want_units > a->unit_count)
		want_units = a->unit_count;

	/* 1. a whole run at or after the hint; 2. anywhere (a run holding the
	 * hint counts whole here); 3. the first run at or after the hint,
	 * shorter; 4. the first run of all. */
	found = find_after(a, hint, want_units, true, &first, &count) ||
		find_after(a, 0, want_units, true, &first, &count) ||
		find_after(a, hint, want_units, false, &first, &count) ||
		find_after(a, 0, want_units, false, &first, &count);
	/* free_units > 0 guarantees a free range somewhere. */
	CFS_ASSERT(found);
	CFS_ASSERT(count >= 1 && count <= want_units);
	if (!take_units(a, first, count)) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	a->rotor = (first + count) % a->unit_count;
	*first_out = first;
	*count_out = count;
out_unlock:
	pthread_mutex_unlock(&a->lock);
	return ret;
}

int cfs_alloc_reserve(struct cfs_alloc *alloc, uint64_t first_unit, uint64_t count)
{
	struct cfs_alloc *a = alloc;
	int ret = 0;

	if (count == 0)
		return 0;
	if (first_unit >= a->unit_count || count > a->unit_count - first_unit)
		return -ERANGE;
	pthread_mutex_lock(&a->lock);
	if (!all_free(a, first_unit, count))
		ret = -EEXIST;
	else if (!take_units(a, first_unit, count))
		ret = -ENOMEM;
	pthread_mutex_unlock(&a->lock);
	return ret;
}

/* Units [first, +count) must be USED: set and on no busy range. */
static void assert_used(const struct cfs_alloc *a, uint64_t first, uint64_t count)
{
	CFS_ASSERT(first < a->unit_count && count <= a->unit_count - first);
	CFS_ASSERT(!any_free(a, first, count));
#ifdef CFS_DEBUG
	for (size_t i = 0; i < a->busy_len; i++) {
		const struct busy_range *b = &a->busy[i];

		CFS_ASSERT(b->first_unit + b->count <= first || first + count <= b->first_unit);
	}
#endif
}

void cfs_alloc_free(struct cfs_alloc *alloc, uint64_t first_unit, uint64_t count, uint64_t seq)
{
	struct cfs_alloc *a = alloc;
	struct busy_range *last;

	if (count == 0)
		return;
	pthread_mutex_lock(&a->lock);
	assert_used(a, first_unit, count);
	if (seq == 0) {
		/* Out of memory for a node: the units stay used until the next
		 * mount rebuilds the allocator (leaking is safe). */
		give_units(a, first_unit, count);
		goto out_unlock;
	}
	a->busy_units += count;
	last = a->busy_len ? &a->busy[a->busy_len - 1] : NULL;
	if (last && last->seq == seq && last->first_unit + last->count == first_unit) {
		last->count += count;
		goto out_unlock;
	}
	if (a->busy_len == a->busy_cap) {
		size_t cap = a->busy_cap * 2;
		struct busy_range *grown = realloc(a->busy, cap * sizeof(*grown));

		if (!grown) {
			/* Out of memory for the seq: the units stay allocated
			 * (counted as used) until the next mount rebuilds the
			 * allocator from the maps. Leaking space is safe;
			 * releasing it early is not. */
			a->busy_units -= count;
			goto out_unlock;
		}
		a->busy = grown;
		a->busy_cap = cap;
	}
	a->busy[a->busy_len++] = (struct busy_range){first_unit, count, seq};
out_unlock:
	pthread_mutex_unlock(&a->lock);
}

static int by_first_unit(const void *x, const void *y)
{
	const struct busy_range *a = x, *b = y;

	return (a->first_unit > b->first_unit) - (a->first_unit < b->first_unit);
}

/* Sorts ranges by first unit and merges the adjacent ones; their seq no
 * longer matters (all durable). Returns how many are left. */
static size_t coalesce(struct busy_range *r, size_t len)
{
	size_t out = 0;

	qsort(r, len, sizeof(*r), by_first_unit);
	for (size_t i = 0; i < len; i++) {
		if (out && r[out - 1].first_unit + r[out - 1].count == r[i].first_unit)
			r[out - 1].count += r[i].count;
		else
			r[out++] = r[i];
	}
	return out;
}

/* Queue released units for cfs_alloc_discard_some(), merged with the last
 * entry when they follow it. Out of memory: not discarded (space on the
 * device only, as a crash before the discard leaves it). */
static void queue_discard(struct cfs_alloc *a, uint64_t first, uint64_t count)
{
	struct busy_range *last =
		a->undiscarded_len ? &a->undiscarded[a->undiscarded_len - 1] : NULL;

	if (last && last->first_unit + last->count == first) {
		last->count += count;
		a->undiscarded_units += count;
		return;
	}
	if (a->undiscarded_len == a->undiscarded_cap) {
		size_t cap = a->undiscarded_cap ? 2 * a->undiscarded_cap : CFS_ALLOC_BUSY_INITIAL;
		struct busy_range *grown = realloc(a->undiscarded, cap * sizeof(*grown));

		if (!grown)
			return;
		a->undiscarded = grown;
		a->undiscarded_cap = cap;
	}
	a->undiscarded[a->undiscarded_len++] = (struct busy_range){first, count, 0};
	a->undiscarded_units += count;
}

uint64_t cfs_alloc_commit_done(struct cfs_alloc *alloc, uint64_t durable_seq, bool queue_discards)
{
	struct cfs_alloc *a = alloc;
	struct busy_range *ready;
	size_t ready_len = 0, keep = 0;
	uint64_t released = 0;

	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->busy_len; i++)
		ready_len += a->busy[i].seq <= durable_seq;
	if (ready_len == 0)
		goto out_unlock;
	ready = queue_discards ? malloc(ready_len * sizeof(*ready)) : NULL; /* NULL: not queued */
	ready_len = 0;
	for (size_t i = 0; i < a->busy_len; i++) {
		struct busy_range b = a->busy[i];

		if (b.seq > durable_seq) {
			a->busy[keep++] = b;
			continue;
		}
		a->busy_units -= b.count;
		if (!give_units(a, b.first_unit, b.count))
			continue; /* no memory for a node: used until remount */
		released += b.count;
		if (ready)
			ready[ready_len++] = b;
	}
	a->busy_len = keep;
	/* Neighbours freed by different transactions (a moved chunk frees one
	 * unit per switch) are queued as one range: on an image file each
	 * discard is a hole punch and a host journal update, whatever its
	 * length. */
	if (ready) { /* queue_discards, and memory for the list */
		ready_len = coalesce(ready, ready_len);
		for (size_t i = 0; i < ready_len; i++)
			queue_discard(a, ready[i].first_unit, ready[i].count);
	}
	free(ready);
out_unlock:
	pthread_mutex_unlock(&a->lock);
	return released;
}

/* Pieces one cfs_alloc_discard_some() call takes out of the free space. */
#define DISCARD_PIECES 16u

uint64_t cfs_alloc_discard_some(struct cfs_alloc *alloc, uint64_t budget_units,
				void (*discard)(void *arg, uint64_t first_unit, uint64_t count),
				void *arg)
{
	struct cfs_alloc *a = alloc;
	struct busy_range taken[DISCARD_PIECES];
	unsigned n = 0;
	size_t done = 0; /* queue entries finished */
	uint64_t left = 0;

	pthread_mutex_lock(&a->lock);
	while (done < a->undiscarded_len && budget_units && n < DISCARD_PIECES) {
		struct busy_range *q = &a->undiscarded[done];
		uint64_t end = q->first_unit + q->count;
		const struct fnode *f = pred(a->root, q->first_unit);
		uint64_t from, to;

		/* The first free run inside what is left of the entry: units
		 * allocated again since their release are not discarded. */
		if (!f || f->start + f->len <= q->first_unit)
			f = first_fit(a->root, q->first_unit, 1);
		if (!f || f->start >= end) {
			a->undiscarded_units -= q->count;
			done++;
			continue;
		}
		from = f->start > q->first_unit ? f->start : q->first_unit;
		to = f->start + f->len < end ? f->start + f->len : end;
		if (to - from > budget_units)
			to = from + budget_units;
		a->undiscarded_units -= to - q->first_unit;
		q->count = end - to;
		q->first_unit = to;
		if (q->count == 0)
			done++;
		if (!take_units(a, from, to - from))
			continue;	    /* no node for the split: not discarded */
		a->busy_units += to - from; /* -EAGAIN, not -ENOSPC, meanwhile */
		taken[n++] = (struct busy_range){from, to - from, 0};
		budget_units -= to - from;
	}
	if (done)
		memmove(a->undiscarded, a->undiscarded + done,
			(a->undiscarded_len - done) * sizeof(*a->undiscarded));
	a->undiscarded_len -= done;
	pthread_mutex_unlock(&a->lock);

	/* No lock while the device discards: allocations go on, and the taken
	 * units are neither free nor on the busy list, so nobody gets them. */
	for (unsigned i = 0; i < n; i++)
		discard(arg, taken[i].first_unit, taken[i].count);

	pthread_mutex_lock(&a->lock);
	for (unsigned i = 0; i < n; i++) {
		a->busy_units -= taken[i].count;
		give_units(a, taken[i].first_unit, taken[i].count); /* else: used until remount */
	}
	left = a->undiscarded_units;
	pthread_mutex_unlock(&a->lock);
	return left;
}

void cfs_alloc_stat(struct cfs_alloc *alloc, struct cfs_alloc_stat *st)
{
	pthread_mutex_lock(&alloc->lock);
	st->total_units = alloc->unit_count;
	st->free_units = alloc->free_units;
	st->busy_units = alloc->busy_units;
	CFS_ASSERT(alloc->free_units + alloc->busy_units <= alloc->unit_count);
	st->used_units = alloc->unit_count - alloc->free_units - alloc->busy_units;
	st->free_ranges = alloc->free_ranges;
	pthread_mutex_unlock(&alloc->lock);
}

int cfs_alloc_unit_state(struct cfs_alloc *alloc, uint64_t unit)
{
	int state;

	if (unit >= alloc->unit_count)
		return -ERANGE;
	pthread_mutex_lock(&alloc->lock);
	state = all_free(alloc, unit, 1) ? CFS_ALLOC_STATE_FREE : CFS_ALLOC_STATE_USED;
	for (size_t i = 0; state == CFS_ALLOC_STATE_USED && i < alloc->busy_len; i++) {
		const struct busy_range *b = &alloc->busy[i];

		if (unit >= b->first_unit && unit - b->first_unit < b->count)
			state = CFS_ALLOC_STATE_BUSY;
	}
	pthread_mutex_unlock(&alloc->lock);
	return state;
}
