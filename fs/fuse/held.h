/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * held.h — the blocks of a file the daemon holds for small buffered writes
 * (fs/DAEMON.md, "Held blocks"): which 4 KiB blocks, their bytes, and how far
 * each has reached the store. A buffered write smaller than a block lands in
 * the block's held copy and is answered at once; the block goes to the store
 * later, whole, by one aligned write (a "flush"): when a write fills it, at
 * fsync, before an unabsorbed write of its bytes, or after CFS_HELD_DELAY_NS.
 * A READ of its bytes takes a copy of it instead (data.c, read_snap).
 *
 * This module is bookkeeping only: no I/O, no locking, no FUSE. Every call is
 * made under the owning inode's lock; fs/fuse/data.c decides when to absorb,
 * fill, flush and wait, and does the I/O.
 *
 * Sequence numbers. Every change of a held block's bytes takes the next number
 * of its file (cfs_held.seq). A block remembers the last change (mod_seq), the
 * last change a flush has copied (captured_seq) and the last change known to
 * be on the store (stored_seq). Something that must see every change made
 * before it arrived (an fsync, a read) notes seq on arrival and waits until
 * each block is stored up to min(mod_seq, that number): later changes need not
 * hold it up, so a writer cannot starve it.
 */
#ifndef CFS_HELD_H
#define CFS_HELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A block: the page cache's page, the write-behind's rounding (data.c's
 * BEHIND_ROUND), a multiple of every sector size chunkfs accepts. */
#define CFS_HELD_BLOCK_BYTES 4096u
/* Blocks held per file: the tail of an appender, and room for writes that
 * straddle blocks (SQLite's 4120-byte WAL frames touch two). */
#define CFS_HELD_SLOTS 4u
/* The most blocks one absorbed write may touch (an unaligned write of up to
 * 8 KiB); larger writes take the write-behind path. */
#define CFS_HELD_WRITE_BLOCKS 3u
/* How long a changed block may stay only in the daemon's memory. */
#define CFS_HELD_DELAY_NS (2u * 1000u * 1000u)

enum cfs_held_state {
	CFS_HELD_FREE = 0,
	CFS_HELD_FILLING, /* its bytes are being read from the store for a write
			   * not yet answered: nothing else may change or use it */
	CFS_HELD_LIVE,	  /* bytes = the block's current content */
	CFS_HELD_DEAD,	  /* dropped while a flush of it was in flight: free
			   * (no further flush) when that lands */
};

struct cfs_held_block {
	uint64_t file_offset_bytes; /* block-aligned */
	uint8_t state;		    /* enum cfs_held_state */
	bool flushing;		    /* a flush of it is in flight */
	bool want;		    /* flush again as soon as that one lands */
	bool listed;		    /* on a loop's timer list (data.c) */
	uint64_t mod_seq;	    /* last change */
	uint64_t captured_seq;	    /* last change a flush has copied */
	uint64_t stored_seq;	    /* last change on the store (or failed) */
	uint32_t dirty_start;	    /* the bytes changed since a flush copied them: */
	uint32_t dirty_end;	    /* a flush writes only those (sectors rounded) */
	uint64_t due_ns;	    /* flush by then (CLOCK_MONOTONIC) while changed */
	uint64_t last_use;	    /* cfs_held.clock at its last write: eviction */
	uint64_t taken;		    /* cfs_held.clock when taken: a fill finds its block */
	/* data.c's timer list: touched only by the loop that listed it. */
	void *timer_loop;  /* struct cfs_loop */
	void *timer_inode; /* struct cfs_inode: the file */
	struct cfs_held_block *timer_next;
	uint8_t *bytes; /* CFS_HELD_BLOCK_BYTES */
};

struct cfs_held {
	uint64_t seq;	/* changes of this file's blocks */
	uint64_t clock; /* writes of this file's blocks (eviction order) */
	struct cfs_held_block block[CFS_HELD_SLOTS];
	uint8_t bytes[CFS_HELD_SLOTS][CFS_HELD_BLOCK_BYTES];
};

static inline bool cfs_held_overlaps(const struct cfs_held_block *blk, uint64_t start_bytes,
				     uint64_t end_bytes)
{
	return blk->file_offset_bytes < end_bytes &&
	       start_bytes < blk->file_offset_bytes + CFS_HELD_BLOCK_BYTES;
}

/* One allocation (free() releases it: the namespace frees it with the
 * inode); NULL when out of memory. */
struct cfs_held *cfs_held_new(void);

/* The LIVE or FILLING block at file_offset_bytes (block-aligned), or NULL. */
struct cfs_held_block *cfs_held_find(struct cfs_held *h, uint64_t file_offset_bytes);
/* Is any block in [start, end) not free (LIVE, FILLING or DEAD)? */
bool cfs_held_any(const struct cfs_held *h, uint64_t start_bytes, uint64_t end_bytes);
/* Is a flush of a block in [start, end) in flight? */
bool cfs_held_flushing(const struct cfs_held *h, uint64_t start_bytes, uint64_t end_bytes);

/*
 * A block for file_offset_bytes, FILLING with zeros: a FREE one, else the
 * LIVE block least recently written that needs nothing (stored, not
 * flushing) and is not in [keep_start, keep_end) (the other blocks of the
 * write it is taken for). NULL if none; the caller then does not absorb.
 */
struct cfs_held_block *cfs_held_take(struct cfs_held *h, uint64_t file_offset_bytes,
				     uint64_t keep_start_bytes, uint64_t keep_end_bytes);

/* Copy length bytes into blk at offset_in_block; a change (next seq). */
void cfs_held_write(struct cfs_held *h, struct cfs_held_block *blk, uint32_t offset_in_block,
		    const void *src, uint32_t length_bytes);

/* Changed since the last flush copied it. */
static inline bool cfs_held_dirty(const struct cfs_held_block *blk)
{
	return blk->mod_seq > blk->captured_seq;
}

/* Are changes up to upto_seq of blk still to reach the store? */
static inline bool cfs_held_unstored(const struct cfs_held_block *blk, uint64_t upto_seq)
{
	uint64_t need = blk->mod_seq < upto_seq ? blk->mod_seq : upto_seq;

	return blk->state != CFS_HELD_FREE && blk->stored_seq < need;
}

/* Is a flush needed (or a flush again, want) for changes up to upto_seq,
 * beyond the one in flight? */
static inline bool cfs_held_needs_flush(const struct cfs_held_block *blk, uint64_t upto_seq)
{
	uint64_t need = blk->mod_seq < upto_seq ? blk->mod_seq : upto_seq;

	return blk->state != CFS_HELD_FREE && blk->captured_seq < need;
}

/* A flush starts: copy the bytes to dst (the flush's own buffer, so writes
 * may go on changing blk), returns the change it carries; [*start, *end) are
 * the bytes changed since the last flush, all it needs to write (the rest is
 * on the store, or was never written and reads as zeros). blk must be LIVE
 * and not flushing. */
uint64_t cfs_held_flush_begin(struct cfs_held_block *blk, void *dst, uint32_t *start,
			      uint32_t *end);
/* That flush is on the store (or failed: the error is the file's next
 * fsync's). True when another flush must start now (want, and changes
 * since). A DEAD block becomes FREE. */
bool cfs_held_flush_end(struct cfs_held_block *blk, uint64_t seq);

/* Forget blk: FREE, or DEAD while a flush of it is in flight (changes that
 * flush does not carry are dropped). */
void cfs_held_forget(struct cfs_held_block *blk);
/* Forget every block (truncate, punch: their bytes may be old): FREE, or
 * DEAD while a flush is in flight. Changes not yet flushed are dropped. */
void cfs_held_drop(struct cfs_held *h);
/* Forget the LIVE blocks that need nothing (last close). */
void cfs_held_drop_clean(struct cfs_held *h);

/* Every block FREE and on no loop's list: h may be freed. */
bool cfs_held_unused(const struct cfs_held *h);

/* Counts the inode mirrors for lock-free checks: blocks not FREE, and blocks
 * with changes not yet on the store (or FILLING, or DEAD). */
void cfs_held_counts(const struct cfs_held *h, uint32_t *blocks, uint32_t *pending);

#endif /* CFS_HELD_H */
