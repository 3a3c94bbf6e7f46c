/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * piece.h — pieces of allocation units for small files, on one store: a
 * file smaller than half a unit maps a power-of-two piece of a unit set
 * aside for pieces instead of a whole unit (fs/format/FORMAT.md, incompat
 * PIECES; the namespace decides which files get one).
 *
 * A unit becomes a piece unit when a piece is wanted and no piece unit has
 * room: it is taken from the store's unit allocator (alloc.h) and kept
 * until its last piece is freed and that free is durable; then it goes back
 * to the allocator as a busy unit of a durable free, so the allocator's
 * commit releases and discards it. Inside a unit, pieces are a buddy system:
 * every piece is aligned to its size, and free buddies merge.
 *
 * Like units, a freed piece is busy until the commit that logs its free is
 * durable (cfs_pieces_commit_done): a piece freed by file A and written by
 * file B would otherwise hold B's bytes when a crash replays A's mapping.
 *
 * Not persisted: mount rebuilds it from the maps (cfs_pieces_reserve for
 * every mapped piece); a piece that overlaps another, or a unit that holds
 * pieces and is mapped whole too, refuses the mount.
 *
 * Policy: best fit. A piece comes from the piece unit whose largest free
 * block is the smallest that fits, and inside it from the smallest free
 * block that fits, so units fill up and large blocks stay whole. A new piece
 * unit is taken next to the last one (piece units stay together, and out of
 * the way of large files' runs).
 *
 * Memory: per piece unit a node per block of the smallest piece, times two
 * (a byte each): 512 bytes for 1 MiB units of 4 KiB pieces. The smallest
 * piece is chosen at create so that a unit has at most CFS_PIECES_BLOCKS_MAX.
 *
 * Locking: one mutex inside, taken by every call; it calls the unit
 * allocator under it. Lock order: pool -> pieces -> allocator.
 *
 * What it does not do: I/O, logging, know files or stores (the pool keeps
 * one per store and adds the store's unit base).
 */
#ifndef CFS_PIECE_H
#define CFS_PIECE_H

#include <stdint.h>

#include "fs/meta/alloc.h"

/* Blocks (smallest pieces) per unit at most: bounds a piece unit's tree. */
#define CFS_PIECES_BLOCKS_MAX 4096u

struct cfs_pieces;

struct cfs_pieces_stat {
	uint64_t units;	     /* units holding pieces */
	uint64_t used_bytes; /* in pieces mapped by files */
	uint64_t busy_bytes; /* in pieces freed, not durable yet */
	uint64_t free_bytes; /* room left in the piece units */
	uint64_t pieces;     /* pieces in use (busy ones included) */
};

/*
 * The smallest piece for a store of units of unit_bytes whose pieces must
 * be at least at_least bytes (a power of two: the format's 4 KiB, or the
 * physical sector): at least unit_bytes / CFS_PIECES_BLOCKS_MAX. 0 when no
 * piece fits (it would be more than half a unit).
 */
uint32_t cfs_pieces_min_bytes(uint32_t unit_bytes, uint32_t at_least);

/* Pieces of units of unit_bytes, from min_bytes (cfs_pieces_min_bytes, not
 * 0) to half a unit, taking units from alloc (which must outlive it). 0,
 * -EINVAL, -ENOMEM. */
int cfs_pieces_create(struct cfs_alloc *alloc, uint32_t unit_bytes, uint32_t min_bytes,
		      struct cfs_pieces **out);
/* Free it; its units stay USED in the allocator. NULL is a no-op. */
void cfs_pieces_destroy(struct cfs_pieces *p);

/* The piece for `bytes` of data with pieces from min_bytes in units of
 * unit_bytes: the next power of two, at least min_bytes; 0 when that is more
 * than half a unit (a whole unit then). */
uint32_t cfs_pieces_size(uint32_t min_bytes, uint32_t unit_bytes, uint64_t bytes);

/*
 * Allocate a piece of `bytes` (a power of two from min_bytes to half a
 * unit): *unit_out and *offset_out (bytes into the unit). 0; -EAGAIN when no
 * room now but busy pieces or busy units will free some at the next durable
 * commit (the caller drops its locks, forces a commit and retries, as for
 * units); -ENOSPC; -EINVAL for a size it does not make.
 */
int cfs_pieces_get(struct cfs_pieces *p, uint32_t bytes, uint64_t *unit_out, uint32_t *offset_out);
/* cfs_pieces_get() that takes a new unit only if the allocator keeps
 * keep_units after it (cfs_alloc_get_keeping); a piece in a unit already
 * holding pieces takes no unit. */
int cfs_pieces_get_keeping(struct cfs_pieces *p, uint32_t bytes, uint64_t keep_units,
			   uint64_t *unit_out, uint32_t *offset_out);

/*
 * Mark a piece in use (mount: rebuilding from the maps). The unit is
 * reserved in the allocator with its first piece. -EEXIST if the piece
 * overlaps one in use or its unit is used whole (corruption at mount),
 * -ERANGE beyond the allocator's units, -EINVAL for a piece it does not make
 * (size or alignment), -ENOMEM.
 */
int cfs_pieces_reserve(struct cfs_pieces *p, uint64_t unit, uint32_t offset, uint32_t bytes);

/*
 * Give back a piece in use. seq as cfs_alloc_free(): busy until
 * cfs_pieces_commit_done(seq' >= seq), or free at once with 0 (a piece no
 * durable record ever mapped). Freeing a piece that is not in use is a bug
 * (always-on assertion). A unit left empty by a free at once goes back to
 * the allocator at once.
 */
void cfs_pieces_free(struct cfs_pieces *p, uint64_t unit, uint32_t offset, uint32_t bytes,
		     uint64_t seq);

/*
 * The committer: every free with seq <= durable_seq is durable. Those
 * pieces become free; units left empty go back to the allocator as busy
 * units of seq durable_seq, so the allocator's commit_done (call it after
 * this one) releases and discards them. Returns the pieces released.
 */
uint64_t cfs_pieces_commit_done(struct cfs_pieces *p, uint64_t durable_seq);

void cfs_pieces_stat(struct cfs_pieces *p, struct cfs_pieces_stat *st);

/* Tests: 1 if the piece is in use or busy (exactly that piece), 0 if all
 * its blocks are free, -1 otherwise (part of it, or beyond a piece unit). */
int cfs_pieces_state(struct cfs_pieces *p, uint64_t unit, uint32_t offset, uint32_t bytes);

#endif /* CFS_PIECE_H */
