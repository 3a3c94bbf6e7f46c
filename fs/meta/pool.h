/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pool.h — the stores of a mounted pool (fs/POOLS.md): assembling a pool
 * from its sources (every store found, checked against store 0's table,
 * routed in iopath), one allocator per store behind one unit space, and the
 * facts the rest of the daemon asks about stores (names, states, space).
 *
 * A store that is not a pool is a pool of one: store 0, unit base 0, named
 * by its label. Every mount has a struct cfs_pool, RAM mounts too (one
 * store, no superblock).
 *
 * Units: store i owns pool units [unit_base, unit_base + unit_count); the
 * allocator of a store counts from 0, this module adds the base. A run of
 * units handed to cfs_pool_free()/cfs_pool_reserve() lies in one store
 * (ranges of two stores never touch: fs/format/FORMAT.md 3.4).
 *
 * Locking: one rwlock inside the pool, taken shared by every allocation,
 * free and lookup (once per unit allocated or freed, never per request),
 * exclusive only to add or drop a store. Lock order: inode locks -> pool ->
 * allocator -> journal tail.
 *
 * What it does not do: placement decisions of files (namespace.c asks
 * cfs_pool_default_store() when a file has none), moves (move.c), FUSE.
 */
#ifndef CFS_POOL_H
#define CFS_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/format/format.h"
#include "fs/meta/alloc.h"
#include "iopath/iopath.h"

struct cfs_pool;

/* Pool addresses of the store windows: store i's superblock area (64 KiB)
 * is routed at CFS_POOL_RAW_BASE + io_store * CFS_POOL_RAW_STRIDE, so the
 * metadata queue reaches every store's superblocks (store add and remove
 * write them). Above every unit (CFS_POOL_ADDRESS_MAX). */
#define CFS_POOL_RAW_BASE CFS_POOL_ADDRESS_MAX
#define CFS_POOL_RAW_STRIDE (1ull << 40)

/* ---- assembling a pool (mount, fsck) ----------------------------------------------- */

/* One source of a mount, as probed. */
struct cfs_pool_source {
	const char *path;  /* as given (device, image) */
	struct cfs_sb sb;  /* its superblock */
	unsigned io_store; /* its index in the cfs_io, once opened */
};

/*
 * Split a SOURCE argument into paths: "SRC1,SRC2,..." in place (commas
 * become NULs), unless the whole string names an existing file (a path with
 * a comma). Returns the count (1..max) or -E2BIG, -EINVAL for an empty path.
 */
int cfs_pool_split_sources(char *arg, const char **paths, unsigned max);

/* -EINVAL with err when two paths name the same file or device (checked
 * before the stores are locked: a second lock of one store would wait for
 * the first). */
int cfs_pool_check_distinct(const char *const *paths, unsigned n, char *err, size_t err_bytes);

/*
 * Read and check the superblocks of path (O_DIRECT where possible; an RBD
 * image through librbd, without its lock, in the cluster cfg->ceph names):
 * 0 and *sb, or -errno with err (not a chunkfs store, interrupted
 * mkchunkfs, unsupported features, ...). CFS_SB_RO_REQUIRED is returned as
 * such.
 */
int cfs_pool_probe(const char *path, const struct cfs_io_config *cfg, struct cfs_sb *sb, char *err,
		   size_t err_bytes);

/*
 * Check that sources[0..n) are exactly the stores of one pool: one of them is
 * store 0 (its index is returned in *store0), every store of store 0's table
 * is there once (uuid, index, unit range and allocation unit agree), and no
 * source is foreign. A single store that is not a pool passes as a pool of
 * one. 0, or -ENOENT (a store missing: named by label and uuid), -EINVAL (a
 * source not of this pool, of another pool, given twice, or a data store
 * without its store 0), with one line in err. Nothing is written.
 */
int cfs_pool_check(const struct cfs_pool_source *sources, unsigned n, unsigned *store0, char *err,
		   size_t err_bytes);

/*
 * The route table of an assembled pool: store 0 at its own offsets over its
 * whole size, every other store's data region at its units' pool addresses,
 * and each store's superblock window (CFS_POOL_RAW_BASE). sources[i].io_store
 * must be set. Returns the route count (<= CFS_IO_ROUTES_MAX).
 */
unsigned cfs_pool_routes(const struct cfs_pool_source *sources, unsigned n, unsigned store0,
			 struct cfs_io_route *routes);

/*
 * Everything above for a mount or fsck: probe paths[0..n), check them, open
 * store 0 with cfg (path replaced; each store's dio policy: REQUIRED for a
 * block device, else cfg->dio), add the others, publish the routes. On
 * success *io is open and sources[] (n entries, caller's array) describes
 * the stores. -errno with err on failure (nothing left open).
 */
int cfs_pool_open_io(const char *const *paths, unsigned n, const struct cfs_io_config *cfg,
		     struct cfs_pool_source *sources, struct cfs_io **io, char *err,
		     size_t err_bytes);

/* ---- the pool of a mount ------------------------------------------------------------ */

/* A store being added online (in memory only, never in a table): routed,
 * its superblocks written, its entry in store 0's table not yet durable, so
 * no unit of it may be handed out (a crash would leave a map naming a store
 * the pool does not have). */
#define CFS_STORE_JOINING 0x100u

/* A store as the rest of the daemon sees it. */
struct cfs_pool_store_info {
	uint32_t index;
	uint32_t state;	   /* enum cfs_store_state, or CFS_STORE_JOINING */
	unsigned io_store; /* its store in the cfs_io (routes) */
	uint64_t unit_base;
	uint64_t unit_count;
	uint64_t size_bytes; /* the store's size (0 if unknown) */
	char label[CFS_LABEL_BYTES];
	char source[256]; /* the path it was mounted from ("" if unknown) */
	struct cfs_alloc_stat space;
	uint64_t held_back_units; /* kept for the kernel's write-back (cfs_pool_set_held_back) */
	uint64_t room_units;	  /* free and busy units above those: what a move may take */
};

/*
 * The pool of a store mount from store 0's superblock (its table, or itself
 * as a pool of one) and, when mounted from several sources, what they were
 * (sources may be NULL: sizes and paths unknown). One allocator per store.
 * 0, -ENOMEM, -EINVAL.
 */
int cfs_pool_create(const struct cfs_sb *sb0, const struct cfs_pool_source *sources, unsigned n,
		    struct cfs_pool **out);
/* A RAM mount's pool: one store of unit_count units, named "ram". */
int cfs_pool_create_ram(uint64_t unit_count, struct cfs_pool **out);
void cfs_pool_destroy(struct cfs_pool *pool);

/*
 * Stores added and removed while mounted (fs/fuse/storeop.c, fs/POOLS.md):
 * add e (its index, units, uuid, label) in `state` with its own allocator,
 * reached as store io_store of the cfs_io; -EEXIST (its index, uuid or
 * label is taken, or its units touch another store's), -ENOSPC (the pool is
 * full), -ENOMEM. set_state: -ENOENT. drop: the store leaves the pool;
 * -EBUSY while any of its units is used or busy (or a piece is), -ENOENT,
 * -EINVAL for store 0. Each takes the pool lock exclusively.
 */
int cfs_pool_add_store(struct cfs_pool *pool, const struct cfs_store_entry *e, uint32_t state,
		       unsigned io_store, uint64_t size_bytes, const char *source);
int cfs_pool_set_state(struct cfs_pool *pool, uint32_t store, uint32_t state);
int cfs_pool_drop_store(struct cfs_pool *pool, uint32_t store);

/* Stores in the pool now. */
unsigned cfs_pool_count(struct cfs_pool *pool);
/* True when the pool has more than one store (placement means something). */
bool cfs_pool_is_multi(struct cfs_pool *pool);
/* The sum of the stores' sizes (a store of unknown size counts 0): the
 * root's user.chunkfs.store_bytes on a pool. */
uint64_t cfs_pool_size_bytes(struct cfs_pool *pool);

/*
 * Space held back for the kernel's writeback cache (-o writeback_cache,
 * fs/DAEMON.md): each store keeps `units` (at most a quarter of it) that
 * only the kernel's write-back of dirty pages may take, since the kernel
 * dirtied those pages without asking, and a write-back that finds no space
 * fails an fsync. Every other allocation (writes of the daemon's own,
 * fallocate, O_DIRECT, pieces, moves) gets ENOSPC from cfs_pool_get() and
 * cfs_pool_get_piece() while the write-back still has room: the check is
 * made under the allocator's lock, with the allocation. statfs's available
 * space leaves it out. 0 (the default): nothing held back.
 */
void cfs_pool_set_held_back(struct cfs_pool *pool, uint64_t units);
/*
 * Allocate up to want_units contiguous units on store `store` (an index),
 * as cfs_alloc_get() (hint: a pool unit, or CFS_ALLOC_NO_HINT; a hint in
 * another store counts as none). Only the kernel's write-back (writeback)
 * may take the units the store holds back. -ENOENT for an unknown store,
 * else cfs_alloc_get()'s results (-EAGAIN, -ENOSPC).
 */
int cfs_pool_get(struct cfs_pool *pool, uint32_t store, uint64_t hint_unit, uint64_t want_units,
		 bool writeback, uint64_t *first_out, uint64_t *count_out);
/* True if store `store` has `units` free or busy above what it holds back (always
 * when nothing is held back; an unknown store: the allocation will say). */
bool cfs_pool_has_room(struct cfs_pool *pool, uint32_t store, uint64_t units);
/* Free and busy units of every store above what it holds back (statfs's available
 * blocks). */
uint64_t cfs_pool_avail_units(struct cfs_pool *pool);
/* cfs_alloc_reserve() of pool units: -ERANGE when they are in no store. */
int cfs_pool_reserve(struct cfs_pool *pool, uint64_t first_unit, uint64_t count);
/* cfs_alloc_free() of pool units (an always-on assertion if in no store). */
void cfs_pool_free(struct cfs_pool *pool, uint64_t first_unit, uint64_t count, uint64_t seq);
/* ---- pieces: files smaller than half a unit (piece.h) -------------------------------
 * Only on a store mount with incompat PIECES (FORMAT.md); each store has
 * its own, made on first use. */

/* The piece for `bytes` of data: the next power of two, at least the
 * smallest piece; 0 when that is more than half a unit, or without pieces. */
uint32_t cfs_pool_piece_size(struct cfs_pool *pool, uint64_t bytes);
/* A piece of `bytes` on store `store`: *unit_out a pool unit, *offset_out
 * bytes into it; a new unit for it as cfs_pool_get() (writeback).
 * cfs_pieces_get()'s results, -ENOENT for an unknown store, -EINVAL
 * without pieces. */
int cfs_pool_get_piece(struct cfs_pool *pool, uint32_t store, uint32_t bytes, bool writeback,
		       uint64_t *unit_out, uint32_t *offset_out);
/* cfs_pieces_reserve() of a pool unit's piece (mount): -ERANGE outside every
 * store, -EINVAL without pieces. */
int cfs_pool_reserve_piece(struct cfs_pool *pool, uint64_t unit, uint32_t offset, uint32_t bytes);
/* cfs_pieces_free() of a pool unit's piece. */
void cfs_pool_free_piece(struct cfs_pool *pool, uint64_t unit, uint32_t offset, uint32_t bytes,
			 uint64_t seq);
struct cfs_pieces_stat;
/* Totals of every store's pieces (statfs, tests). */
void cfs_pool_piece_stat(struct cfs_pool *pool, struct cfs_pieces_stat *st);

/* cfs_alloc_commit_done() of every store, after its pieces' (busy pieces
 * released, units they leave empty freed). */
uint64_t cfs_pool_commit_done(struct cfs_pool *pool, uint64_t durable_seq, bool queue_discards);
/* cfs_alloc_discard_some() of every store, up to budget_units each; discard
 * gets pool units. Returns the units still queued in the pool. */
uint64_t cfs_pool_discard_some(struct cfs_pool *pool, uint64_t budget_units,
			       void (*discard)(void *arg, uint64_t first_unit, uint64_t count),
			       void *arg);
/* While a hold is taken, cfs_pool_discard_some() discards nothing and
 * answers 0: the queued units stay free (allocatable), only their discard
 * waits. The mover holds discards while it copies (fs/POOLS.md): a move
 * frees as much as it copies, and its discards shared the disk with the
 * copy. Whoever releases the last hold kicks the committer. */
void cfs_pool_hold_discards(struct cfs_pool *pool);
void cfs_pool_release_discards(struct cfs_pool *pool);
/* Totals of every store (statfs). */
void cfs_pool_stat(struct cfs_pool *pool, struct cfs_alloc_stat *st);
/* CFS_ALLOC_STATE_* of one pool unit, -ERANGE outside every store. */
int cfs_pool_unit_state(struct cfs_pool *pool, uint64_t unit);

/* The unit ranges of the stores now (index order), for callers that sort
 * many units into stores without a lock per unit. Returns the count. */
struct cfs_pool_range {
	uint32_t index;
	uint64_t unit_base;
	uint64_t unit_count;
};
unsigned cfs_pool_ranges(struct cfs_pool *pool, struct cfs_pool_range *out);

/* The store holding pool unit `unit`, or CFS_STORE_NONE. */
uint32_t cfs_pool_store_of(struct cfs_pool *pool, uint64_t unit);
/* A store named by label or decimal index: its index, or CFS_STORE_NONE. */
uint32_t cfs_pool_find(struct cfs_pool *pool, const char *name, size_t name_length);
/* A store's description (space counted now). -ENOENT. */
int cfs_pool_store_info(struct cfs_pool *pool, uint32_t store, struct cfs_pool_store_info *info);
/* The i-th store in index order (0 <= i < count), for listings. -ENOENT. */
int cfs_pool_store_at(struct cfs_pool *pool, unsigned i, struct cfs_pool_store_info *info);
/* Write a store's name (its label, or its index in decimal) into buf. */
void cfs_pool_store_name(struct cfs_pool *pool, uint32_t store, char *buf, size_t buf_bytes);
/* Store state now (CFS_STORE_ACTIVE, CFS_STORE_REMOVING), 0 if unknown. */
uint32_t cfs_pool_store_state(struct cfs_pool *pool, uint32_t store);

/*
 * Where new units of a file with no placement and no units go: the pool's
 * default (set with cfs_pool_set_default: the root's placement) if it is
 * active, else the active store with the most free units.
 */
uint32_t cfs_pool_default_store(struct cfs_pool *pool);
void cfs_pool_set_default(struct cfs_pool *pool, uint32_t store);

#endif /* CFS_POOL_H */
