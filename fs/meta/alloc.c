/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * alloc.c — the allocator of the data region: one bit per allocation unit
 * (1 = not free: used or busy) plus a list of busy ranges tagged with the
 * sequence number of the log record that freed them.
 *
 * Invariant (checked by assertions): free_units + busy_units + used_units ==
 * unit_count, a bit is clear exactly for FREE units, and every busy range
 * covers set bits only.
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

struct cfs_alloc {
	pthread_mutex_t lock;
	uint64_t unit_count;
	uint64_t word_count;
	uint64_t *bits; /* 1 = used or busy */
	uint64_t free_units;
	uint64_t busy_units;
	uint64_t rotor; /* where CFS_ALLOC_NO_HINT starts */
	struct busy_range *busy;
	size_t busy_len;
	size_t busy_cap;
};

static inline bool bit_get(const struct cfs_alloc *a, uint64_t u)
{
	return (a->bits[u >> 6] >> (u & 63)) & 1;
}

/* Set or clear bits [first, first + count); all must currently be !value. */
static void bits_change(struct cfs_alloc *a, uint64_t first, uint64_t count, bool value)
{
	uint64_t u = first;
	uint64_t end = first + count;

	while (u < end) {
		uint64_t word = u >> 6;
		unsigned shift = (unsigned)(u & 63);
		uint64_t n = 64 - shift;
		uint64_t mask;

		if (n > end - u)
			n = end - u;
		mask = (n == 64 ? ~0ull : ((1ull << n) - 1)) << shift;
		if (value) {
			CFS_ASSERT((a->bits[word] & mask) == 0);
			a->bits[word] |= mask;
		} else {
			CFS_ASSERT((a->bits[word] & mask) == mask);
			a->bits[word] &= ~mask;
		}
		u += n;
	}
}

/* First unit in [from, end) whose bit equals value, or end. */
static uint64_t find_bit(const struct cfs_alloc *a, uint64_t from, uint64_t end, bool value)
{
	uint64_t u = from;

	while (u < end) {
		uint64_t word = a->bits[u >> 6];
		unsigned shift = (unsigned)(u & 63);

		if (!value)
			word = ~word;
		word >>= shift;
		if (word) {
			uint64_t hit = u + (uint64_t)__builtin_ctzll(word);

			return hit < end ? hit : end;
		}
		u += 64 - shift;
	}
	return end;
}

/*
 * First free run in [from, end) that is at least `want` long (exact = true),
 * or the first free run of any length (exact = false). Returns its start and
 * length (capped at want) or false.
 */
static bool find_run(const struct cfs_alloc *a, uint64_t from, uint64_t end, uint64_t want,
		     bool exact, uint64_t *first, uint64_t *count)
{
	uint64_t pos = from;

	while (pos < end) {
		uint64_t start = find_bit(a, pos, end, false);
		uint64_t stop;

		if (start >= end)
			return false;
		/* A run may continue past `end` (the wrap point): look at the whole
		 * region so a run straddling the hint is seen whole. */
		stop = find_bit(a, start, a->unit_count, true);
		if (!exact || stop - start >= want) {
			*first = start;
			*count = stop - start < want ? stop - start : want;
			return true;
		}
		pos = stop;
	}
	return false;
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
	a->word_count = (unit_count + 63) / 64;
	a->bits = calloc(a->word_count, sizeof(uint64_t));
	a->busy_cap = CFS_ALLOC_BUSY_INITIAL;
	a->busy = calloc(a->busy_cap, sizeof(*a->busy));
	if (!a->bits || !a->busy) {
		free(a->bits);
		free(a->busy);
		free(a);
		return -ENOMEM;
	}
	/* Bits past the last unit are "used" so no search ever returns them. */
	if (unit_count & 63)
		a->bits[a->word_count - 1] = ~0ull << (unit_count & 63);
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
	free(alloc->bits);
	free(alloc->busy);
	free(alloc);
}

int cfs_alloc_get(struct cfs_alloc *alloc, uint64_t hint_unit, uint64_t want_units,
		  uint64_t *first_out, uint64_t *count_out)
{
	struct cfs_alloc *a = alloc;
	uint64_t hint, first = 0, count = 0;
	bool found;
	int ret = 0;

	if (want_units == 0)
		return -EINVAL;
	pthread_mutex_lock(&a->lock);
	if (a->free_units == 0) {
		ret = a->busy_units ? -EAGAIN : -ENOSPC;
		goto out_unlock;
	}
	hint = hint_unit == CFS_ALLOC_NO_HINT ? a->rotor : hint_unit % a->unit_count;
	if (want_units > a->unit_count)
		want_units = a->unit_count;

	found = find_run(a, hint, a->unit_count, want_units, true, &first, &count) ||
		find_run(a, 0, hint, want_units, true, &first, &count) ||
		find_run(a, hint, a->unit_count, want_units, false, &first, &count) ||
		find_run(a, 0, hint, want_units, false, &first, &count);
	/* free_units > 0 guarantees a free bit somewhere. */
	CFS_ASSERT(found);
	CFS_ASSERT(count >= 1 && count <= want_units);
	bits_change(a, first, count, true);
	a->free_units -= count;
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
	if (find_bit(a, first_unit, first_unit + count, true) != first_unit + count) {
		ret = -EEXIST;
		goto out_unlock;
	}
	bits_change(a, first_unit, count, true);
	a->free_units -= count;
out_unlock:
	pthread_mutex_unlock(&a->lock);
	return ret;
}

/* Units [first, +count) must be USED: set and on no busy range. */
static void assert_used(const struct cfs_alloc *a, uint64_t first, uint64_t count)
{
	CFS_ASSERT(first < a->unit_count && count <= a->unit_count - first);
	CFS_ASSERT(find_bit(a, first, first + count, false) == first + count);
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
		bits_change(a, first_unit, count, false);
		a->free_units += count;
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

uint64_t cfs_alloc_commit_done(struct cfs_alloc *alloc, uint64_t durable_seq,
			       void (*discard)(void *arg, uint64_t first_unit, uint64_t count),
			       void *arg)
{
	struct cfs_alloc *a = alloc;
	struct busy_range *ready = NULL;
	size_t ready_len = 0, keep = 0;
	uint64_t released = 0;

	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->busy_len; i++)
		ready_len += a->busy[i].seq <= durable_seq;
	if (ready_len == 0)
		goto out_unlock;
	if (discard)
		ready = malloc(ready_len * sizeof(*ready));
	ready_len = 0;
	for (size_t i = 0; i < a->busy_len; i++) {
		struct busy_range b = a->busy[i];

		if (b.seq > durable_seq) {
			a->busy[keep++] = b;
			continue;
		}
		if (ready) {
			/* Still busy (bit set, counted busy) while discarding. */
			ready[ready_len++] = b;
			continue;
		}
		bits_change(a, b.first_unit, b.count, false);
		a->busy_units -= b.count;
		a->free_units += b.count;
		released += b.count;
	}
	a->busy_len = keep;
	if (!ready)
		goto out_unlock;
	pthread_mutex_unlock(&a->lock);

	/* No lock while the device discards: allocations go on, and these
	 * units are neither free nor on the busy list, so nobody takes them. */
	for (size_t i = 0; i < ready_len; i++)
		discard(arg, ready[i].first_unit, ready[i].count);

	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < ready_len; i++) {
		bits_change(a, ready[i].first_unit, ready[i].count, false);
		a->busy_units -= ready[i].count;
		a->free_units += ready[i].count;
		released += ready[i].count;
	}
out_unlock:
	pthread_mutex_unlock(&a->lock);
	free(ready);
	return released;
}

void cfs_alloc_stat(struct cfs_alloc *alloc, struct cfs_alloc_stat *st)
{
	pthread_mutex_lock(&alloc->lock);
	st->total_units = alloc->unit_count;
	st->free_units = alloc->free_units;
	st->busy_units = alloc->busy_units;
	CFS_ASSERT(alloc->free_units + alloc->busy_units <= alloc->unit_count);
	st->used_units = alloc->unit_count - alloc->free_units - alloc->busy_units;
	pthread_mutex_unlock(&alloc->lock);
}

int cfs_alloc_unit_state(struct cfs_alloc *alloc, uint64_t unit)
{
	int state;

	if (unit >= alloc->unit_count)
		return -ERANGE;
	pthread_mutex_lock(&alloc->lock);
	state = bit_get(alloc, unit) ? CFS_ALLOC_STATE_USED : CFS_ALLOC_STATE_FREE;
	for (size_t i = 0; state == CFS_ALLOC_STATE_USED && i < alloc->busy_len; i++) {
		const struct busy_range *b = &alloc->busy[i];

		if (unit >= b->first_unit && unit - b->first_unit < b->count)
			state = CFS_ALLOC_STATE_BUSY;
	}
	pthread_mutex_unlock(&alloc->lock);
	return state;
}
