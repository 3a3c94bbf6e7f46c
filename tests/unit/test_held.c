/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_held.c — the bookkeeping of held blocks (fs/fuse/held.h): blocks are
 * found by offset, taken free or evicted only when they have nothing to
 * write and are not the write's own, flushes carry and store what they
 * copied, waiters see exactly the changes made before they arrived, and
 * dropping discards what no flush carries.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fuse/held.h"

#define B CFS_HELD_BLOCK_BYTES

static struct cfs_held_block *live(struct cfs_held *h, uint64_t off)
{
	struct cfs_held_block *blk = cfs_held_take(h, off, off, off + B);

	cr_assert_not_null(blk);
	cr_assert_eq(blk->state, CFS_HELD_FILLING);
	blk->state = CFS_HELD_LIVE;
	return blk;
}

Test(held, take_find_and_zeros)
{
	struct cfs_held *h = cfs_held_new();
	struct cfs_held_block *a;
	uint32_t blocks, pending;

	cr_assert_not_null(h);
	cr_assert_null(cfs_held_find(h, 0));
	a = live(h, 8 * B);
	for (unsigned i = 0; i < B; i++)
		cr_assert_eq(a->bytes[i], 0, "a new block reads as zeros");
	cr_assert_eq(cfs_held_find(h, 8 * B), a);
	cr_assert_null(cfs_held_find(h, 9 * B));
	cr_assert(cfs_held_any(h, 8 * B + 100, 8 * B + 101));
	cr_assert_not(cfs_held_any(h, 0, 8 * B));
	cfs_held_counts(h, &blocks, &pending);
	cr_assert_eq(blocks, 1);
	cr_assert_eq(pending, 0, "nothing changed yet");
	cfs_held_write(h, a, 10, "abc", 3);
	cr_assert(cfs_held_dirty(a));
	cr_assert_eq(memcmp(a->bytes + 10, "abc", 3), 0);
	cfs_held_counts(h, &blocks, &pending);
	cr_assert_eq(pending, 1);
	free(h);
}

/* A flush carries what it copied; writes during it make the block dirty
 * again; want starts the next flush only if there is something new. */
Test(held, flush_carries_its_copy)
{
	struct cfs_held *h = cfs_held_new();
	struct cfs_held_block *a = live(h, 0);
	uint8_t copy[B];
	uint32_t ds, de;
	uint64_t s1, s2;

	cfs_held_write(h, a, 0, "one", 3);
	cfs_held_write(h, a, 100, "two", 3);
	s1 = cfs_held_flush_begin(a, copy, &ds, &de);
	cr_assert_eq(memcmp(copy, "one", 3), 0);
	cr_assert_eq(ds, 0, "it writes what changed: from the first byte changed");
	cr_assert_eq(de, 103, "to the last");
	cr_assert_not(cfs_held_dirty(a));
	cr_assert(cfs_held_unstored(a, UINT64_MAX), "in flight, not stored");
	cfs_held_write(h, a, 0, "two", 3);
	cr_assert(cfs_held_dirty(a));
	cr_assert_eq(memcmp(copy, "one", 3), 0, "the copy in flight does not change");
	a->want = true;
	cr_assert(cfs_held_flush_end(a, s1), "wanted, and changed since the copy");
	cr_assert_eq(a->stored_seq, s1);
	s2 = cfs_held_flush_begin(a, copy, &ds, &de);
	cr_assert_gt(s2, s1);
	cr_assert_eq(ds, 0, "only the change since the first flush");
	cr_assert_eq(de, 3);
	a->want = true;
	cr_assert_not(cfs_held_flush_end(a, s2), "wanted, but nothing new");
	cr_assert_not(cfs_held_unstored(a, UINT64_MAX));
	free(h);
}

/* Something that arrived after change s waits for s, not for later ones. */
Test(held, waiters_see_changes_before_them)
{
	struct cfs_held *h = cfs_held_new();
	struct cfs_held_block *a = live(h, 0);
	uint8_t copy[B];
	uint32_t ds, de;
	uint64_t arrived, s;

	cfs_held_write(h, a, 0, "x", 1);
	arrived = h->seq;
	cfs_held_write(h, a, 1, "y", 1); /* after the waiter arrived */
	cr_assert(cfs_held_needs_flush(a, arrived));
	cr_assert(cfs_held_unstored(a, arrived));
	s = cfs_held_flush_begin(a, copy, &ds, &de);
	cr_assert_not(cfs_held_needs_flush(a, arrived), "the flush in flight carries it");
	cr_assert(cfs_held_unstored(a, arrived));
	cfs_held_write(h, a, 2, "z", 1);
	cr_assert_not(cfs_held_flush_end(a, s));
	cr_assert_not(cfs_held_unstored(a, arrived), "stored what it waited for");
	cr_assert(cfs_held_unstored(a, UINT64_MAX), "the later change is not stored");
	/* A block taken later starts level: nobody waits for it. */
	cfs_held_forget(a);
	a = live(h, 4 * B);
	cr_assert_not(cfs_held_unstored(a, UINT64_MAX));
	cr_assert_not(cfs_held_needs_flush(a, UINT64_MAX));
	free(h);
}

/* Eviction: only a LIVE block with nothing to write, not flushing, least
 * recently written, and never one of the write's own blocks. */
Test(held, take_evicts_only_clean_blocks)
{
	struct cfs_held *h = cfs_held_new();
	struct cfs_held_block *blk[CFS_HELD_SLOTS];
	uint8_t copy[B];
	uint32_t ds, de;
	uint64_t s;

	for (unsigned i = 0; i < CFS_HELD_SLOTS; i++) {
		blk[i] = live(h, (uint64_t)i * B);
		cfs_held_write(h, blk[i], 0, "d", 1);
	}
	cr_assert_null(cfs_held_take(h, 100 * B, 100 * B, 101 * B), "all dirty");
	s = cfs_held_flush_begin(blk[1], copy, &ds, &de);
	cr_assert_null(cfs_held_take(h, 100 * B, 100 * B, 101 * B), "flushing");
	cfs_held_flush_end(blk[1], s);
	s = cfs_held_flush_begin(blk[2], copy, &ds, &de);
	cfs_held_flush_end(blk[2], s);
	cfs_held_write(h, blk[1], 5, "e", 1);
	s = cfs_held_flush_begin(blk[1], copy, &ds, &de);
	cfs_held_flush_end(blk[1], s); /* 1 written after 2: 2 goes first */
	cr_assert_eq(cfs_held_take(h, 100 * B, 2 * B, 3 * B), blk[1],
		     "2 is the write's own block: the other clean one");
	cr_assert_eq(cfs_held_take(h, 101 * B, 0, 0), blk[2]);
	cr_assert_eq(blk[2]->file_offset_bytes, 101 * B);
	cr_assert_eq(blk[2]->bytes[0], 0, "taken again: zeros");
	cr_assert_null(cfs_held_find(h, 2 * B));
	free(h);
}

/* Dropping: a block in flight is DEAD until its flush lands (then FREE),
 * and what no flush carries is not waited for. */
Test(held, drop_discards)
{
	struct cfs_held *h = cfs_held_new();
	struct cfs_held_block *a = live(h, 0), *b = live(h, B), *c = live(h, 2 * B);
	uint8_t copy[B];
	uint32_t ds, de;
	uint32_t blocks, pending;
	uint64_t s;

	cfs_held_write(h, a, 0, "a", 1);
	s = cfs_held_flush_begin(a, copy, &ds, &de);
	cfs_held_write(h, a, 1, "b", 1);
	cfs_held_write(h, b, 0, "c", 1);
	cfs_held_drop(h);
	cr_assert_eq(a->state, CFS_HELD_DEAD);
	cr_assert_eq(b->state, CFS_HELD_FREE);
	cr_assert_eq(c->state, CFS_HELD_FREE);
	cr_assert_null(cfs_held_find(h, 0), "a DEAD block is nobody's copy");
	cr_assert(cfs_held_any(h, 0, 1), "but its flush is in flight");
	cr_assert(cfs_held_flushing(h, 0, 1));
	cr_assert_not(cfs_held_unstored(b, UINT64_MAX));
	cfs_held_counts(h, &blocks, &pending);
	cr_assert_eq(blocks, 1);
	cr_assert_eq(pending, 1);
	a->want = true;
	cr_assert_not(cfs_held_flush_end(a, s), "a DEAD block is not flushed again");
	cr_assert_eq(a->state, CFS_HELD_FREE);
	cr_assert_not(cfs_held_unstored(a, UINT64_MAX));
	cr_assert(cfs_held_unused(h));
	b = live(h, 0);
	b->listed = true;
	cfs_held_drop_clean(h);
	cr_assert_eq(b->state, CFS_HELD_FREE, "clean: dropped at the last close");
	cr_assert_not(cfs_held_unused(h), "a loop still lists it");
	free(h);
}
