/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fs.h — the mounted filesystem object, struct cfs_fs: what every module of
 * the metadata engine works on. The backing target (iopath), the superblock,
 * the geometry, the mount options, the read-only state and the log lines;
 * and pointers to the allocator, the namespace and the journal.
 *
 * The modules below it (alloc, extent) do not see it; the journal and the
 * namespace take it; mount.h builds and frees it (mount, RAM mount, unmount).
 *
 * What this does not do: FUSE (fs/fuse/ops.c), data I/O (fs/fuse/data.c),
 * option parsing (fs/fuse/main.c).
 */
#ifndef CFS_FS_H
#define CFS_FS_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/format/format.h"
#include "fs/meta/extent.h"
#include "iopath/iopath.h"

struct cfs_journal;
struct cfs_ns;
struct cfs_pool;
struct cfs_pool_source;

/* RAM mount geometry: synthetic, nothing persisted. 64 KiB units keep memory
 * returned on punch and unlink fine-grained (the RAM backend frees discarded
 * pages); the map costs 32 bytes per run of units, whatever their size. */
#define CFS_RAM_ALLOC_UNIT_DEFAULT (64u * 1024)

/* Inode limit: one inode per this many bytes of one metadata half, so a full
 * namespace still fits a snapshot (RAM mounts: per this many bytes of RAM). */
#define CFS_BYTES_PER_INODE 1024u
#define CFS_INODES_MAX (1ull << 32)

typedef void (*cfs_log_fn)(void *arg, const char *line);

struct cfs_fs_options {
	uint32_t commit_interval_ms;   /* 0 = CFS_COMMIT_INTERVAL_MS_DEFAULT */
	bool read_only;		       /* mount read-only: nothing is written */
	bool no_discard;	       /* freed units are not discarded on the stores */
	uint32_t ram_alloc_unit_bytes; /* RAM: 0 = CFS_RAM_ALLOC_UNIT_DEFAULT */
	uint32_t root_mode;	       /* a new root's permission bits, 0 = 0755 */
	uint32_t root_uid;	       /* a new root's owner */
	uint32_t root_gid;
	cfs_log_fn log; /* where log lines go; NULL = stderr */
	void *log_arg;
	/* The mount's sources as probed (fs/meta/pool.h, cfs_pool_open_io):
	 * several for a pool, one for a single store (its path then names
	 * store 0). Fewer than 2: store 0 of a larger pool is refused. NULL:
	 * no paths known (tools). Read during cfs_fs_open. */
	const struct cfs_pool_source *pool_sources;
	unsigned pool_source_count;
};

struct cfs_fs {
	struct cfs_io *io;	/* the backing target (caller-owned) */
	struct cfs_ioq *meta_q; /* metadata I/O: mount, then the committer */
	struct cfs_sb sb;	/* in-core superblock [committer after mount] */
	bool ram;		/* RAM mount: no store format, no log */
	bool mounted_ro;	/* read-only by option or ro_compat */
	_Atomic bool readonly;	/* mounted_ro, or a metadata write failed */
	uint64_t log_seed;	/* checksum seed of this store */
	struct cfs_fs_options opts;

	struct cfs_extent_geom geom; /* units, sectors, data region */
	uint64_t inode_limit;	     /* statfs files */

	struct cfs_pool *pool; /* the stores and their allocators (pool.h) */
	struct cfs_ns *ns;
	struct cfs_journal *journal;
};

/* True once the filesystem refuses changes (read-only mount, or a failed
 * metadata write). [lock-free] */
bool cfs_fs_is_readonly(const struct cfs_fs *fs);

/* Turn the filesystem read-only after a failed metadata write: logs one line
 * naming what failed (only the first time). */
void cfs_fs_set_readonly(struct cfs_fs *fs, const char *what, int err);

/* Log one line through opts.log (printf-style). */
void cfs_fs_log(struct cfs_fs *fs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Device byte offset of a store unit. */
static inline uint64_t cfs_fs_unit_offset_bytes(const struct cfs_fs *fs, uint64_t store_unit)
{
	return fs->geom.data_offset_bytes + (store_unit << fs->geom.unit_shift);
}

#endif /* CFS_FS_H */
