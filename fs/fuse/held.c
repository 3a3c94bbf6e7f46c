/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * held.c — bookkeeping of the blocks a file's small writes are held in
 * (held.h). Under the inode lock, no I/O.
 */
#include <stdlib.h>
#include <string.h>

#include "fs/base/assert.h"
#include "fs/fuse/held.h"

struct cfs_held *cfs_held_new(void)
{
	struct cfs_held *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	for (unsigned i = 0; i < CFS_HELD_SLOTS; i++)
		h->block[i].bytes = h->bytes[i];
	return h;
}

struct cfs_held_block *cfs_held_find(struct cfs_held *h, uint64_t file_offset_bytes)
{
	for (unsigned i = 0; i < CFS_HELD_SLOTS; i++) {
		struct cfs_held_block *blk = &h->block[i];

		if ((blk->state == CFS_HELD_LIVE || blk->state == CFS_HELD_FILLING) &&
		    blk->file_offset_bytes == file_offset_bytes)
			return blk;
	}
	return NULL;
}

bool cfs_held_any(const struct cfs_held *h, uint64_t start_bytes, uint64_t end_bytes)
{
	for (unsigned i = 0; i < CFS_HELD_SLOTS; i++)
		if (h->block[i].state != CFS_HELD_FREE &&
		    cfs_held_overlaps(&h->block[i], start_bytes, end_bytes))
			return true;
	return false;
}

bool cfs_held_flushing(const struct cfs_held *h, uint64_t start_bytes, uint64_t end_bytes)
{
	for (unsigned i = 0; i < CFS_HELD_SLOTS; i++)
		if (h->block[i].flushing && cfs_held_overlaps(&h->block[i], start_bytes, end_bytes))
			return true;
	return false;
}

/* Nothing to do for it: its changes are stored, no flush in flight. (A
 * loop may still have it listed: it finds it clean, or changed again.) */
static bool idle(const struct cfs_held_block *blk)
{
	return blk->stored_seq == blk->mod_seq && !blk->flushing;
}

struct cfs_held_block *cfs_held_take(struct cfs_held *h, uint64_t file_offset_bytes,
				     uint64_t keep_start_bytes, uint64_t keep_end_bytes)
{
	struct cfs_held_block *pick = NULL;

	CFS_ASSERT(file_offset_bytes % CFS_HELD_BLOCK_BYTES == 0);
	for (unsigned i = 0; i < CFS_HELD_SLOTS; i++) {
		struct cfs_held_block *blk = &h->block[i];

		if (blk->state == CFS_HELD_FREE) {
			pick = blk;
			break;
		}
		if (blk->state == CFS_HELD_LIVE && idle(blk) &&
		    !cfs_held_overlaps(blk, keep_start_bytes, keep_end_bytes) &&
		    (!pick || blk->last_use < pick->last_use))
			pick = blk;
	}
	if (!pick)
		return NULL;
	pick->file_offset_bytes = file_offset_bytes;
	pick->state = CFS_HELD_FILLING;
	pick->flushing = false;
	pick->want = false;
	/* Sequence numbers only grow: a block taken again starts level with
	 * the file, so nothing waits for changes it never had. */
	pick->mod_seq = pick->captured_seq = pick->stored_seq = h->seq;
	pick->due_ns = 0;
	pick->dirty_start = pick->dirty_end = 0;
	pick->last_use = pick->taken = ++h->clock;
	memset(pick->bytes, 0, CFS_HELD_BLOCK_BYTES);
	return pick;
}

void cfs_held_write(struct cfs_held *h, struct cfs_held_block *blk, uint32_t offset_in_block,
		    const void *src, uint32_t length_bytes)
{
	CFS_ASSERT(blk->state == CFS_HELD_LIVE);
	CFS_ASSERT(offset_in_block + (uint64_t)length_bytes <= CFS_HELD_BLOCK_BYTES);
	memcpy(blk->bytes + offset_in_block, src, length_bytes);
	if (blk->dirty_start == blk->dirty_end) {
		blk->dirty_start = offset_in_block;
		blk->dirty_end = offset_in_block + length_bytes;
	} else {
		if (offset_in_block < blk->dirty_start)
			blk->dirty_start = offset_in_block;
		if (offset_in_block + length_bytes > blk->dirty_end)
			blk->dirty_end = offset_in_block + length_bytes;
	}
	blk->mod_seq = ++h->seq;
	blk->last_use = ++h->clock;
}

uint64_t cfs_held_flush_begin(struct cfs_held_block *blk, void *dst, uint32_t *start, uint32_t *end)
{
	CFS_ASSERT(blk->state == CFS_HELD_LIVE && !blk->flushing);
	memcpy(dst, blk->bytes, CFS_HELD_BLOCK_BYTES);
	*start = blk->dirty_start;
	*end = blk->dirty_end;
	blk->dirty_start = blk->dirty_end = 0;
	blk->flushing = true;
	blk->want = false;
	blk->captured_seq = blk->mod_seq;
	return blk->captured_seq;
}

bool cfs_held_flush_end(struct cfs_held_block *blk, uint64_t seq)
{
	bool again;

	CFS_ASSERT(blk->flushing && seq >= blk->stored_seq);
	blk->stored_seq = seq;
	blk->flushing = false;
	if (blk->state == CFS_HELD_DEAD) {
		blk->state = CFS_HELD_FREE;
		blk->want = false;
		return false;
	}
	again = blk->want && blk->mod_seq > blk->captured_seq;
	blk->want = false;
	return again;
}

void cfs_held_forget(struct cfs_held_block *blk)
{
	if (blk->flushing) {
		/* Changes the flush in flight does not carry are dropped. */
		blk->state = CFS_HELD_DEAD;
		blk->mod_seq = blk->captured_seq;
	} else {
		blk->state = CFS_HELD_FREE;
		blk->dirty_start = blk->dirty_end = 0;
		/* What it had is dropped, not awaited. */
		blk->captured_seq = blk->stored_seq = blk->mod_seq;
	}
	blk->want = false;
}

void cfs_held_drop(struct cfs_held *h)
{
	for (unsigned i = 0; i < CFS_HELD_SLOTS; i++)
		if (h->block[i].state == CFS_HELD_LIVE || h->block[i].state == CFS_HELD_FILLING)
			cfs_held_forget(&h->block[i]);
}

void cfs_held_drop_clean(struct cfs_held *h)
{
	for (unsigned i = 0; i < CFS_HELD_SLOTS; i++)
		if (h->block[i].state == CFS_HELD_LIVE && idle(&h->block[i]))
			cfs_held_forget(&h->block[i]);
}

void cfs_held_counts(const struct cfs_held *h, uint32_t *blocks, uint32_t *pending)
{
	*blocks = *pending = 0;
	for (unsigned i = 0; i < CFS_HELD_SLOTS; i++) {
		const struct cfs_held_block *blk = &h->block[i];

		if (blk->state == CFS_HELD_FREE)
			continue;
		(*blocks)++;
		if (blk->state != CFS_HELD_LIVE || blk->flushing || blk->stored_seq < blk->mod_seq)
			(*pending)++;
	}
}

bool cfs_held_unused(const struct cfs_held *h)
{
	for (unsigned i = 0; i < CFS_HELD_SLOTS; i++)
		if (h->block[i].state != CFS_HELD_FREE || h->block[i].listed)
			return false;
	return true;
}
