/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mount.h — mount and unmount: builds the mounted filesystem object (struct
 * cfs_fs, fs/meta/fs.h) on a backing target and tears it down.
 *
 * The top of the metadata engine, the one module that calls all the others:
 * the superblocks (fs/format), the allocator, the namespace and the journal,
 * which it wires to the namespace (struct cfs_journal_ops) so that neither
 * of those two calls the other both ways.
 *
 * Main invariant: once cfs_fs_open*() returns, the in-memory state is the
 * truth and the store holds a prefix of it (snapshot + durable log); the
 * committer is the only thread writing metadata to the store.
 *
 * The caller opens the struct cfs_io and closes it after cfs_fs_close().
 */
#ifndef CFS_MOUNT_H
#define CFS_MOUNT_H

#include <stddef.h>

#include "fs/meta/fs.h"

/*
 * Mount the chunkfs store on io: read and pick the superblocks (refusing an
 * interrupted mkchunkfs, an unknown version or incompat feature, a store
 * larger than the target, a target whose logical sector differs from the
 * store's, with their messages), load the snapshot, replay
 * the log up to the first bad record, rebuild the allocator, delete orphans,
 * and (read-write) write a fresh snapshot if anything was replayed and a
 * superblock without CLEAN, then start the committer. err receives one line
 * on failure. 0 or -errno.
 */
int cfs_fs_open(struct cfs_io *io, const struct cfs_fs_options *opts, struct cfs_fs **out,
		char *err, size_t err_bytes);

/*
 * The RAM temp mount on io (the "ram" backend): the same namespace on a
 * synthetic geometry: the whole target is data, units of
 * opts->ram_alloc_unit_bytes (default 64 KiB), written-state at the target's
 * logical sector (its advertised alignment: at least 512, a power of two,
 * else -EINVAL). Nothing is written except data; there is no superblock.
 */
int cfs_fs_open_ram(struct cfs_io *io, const struct cfs_fs_options *opts, struct cfs_fs **out,
		    char *err, size_t err_bytes);

/* Unmount: stop the committer after a last commit, write the final snapshot
 * with CLEAN (not for RAM or read-only), free everything. Returns 0 or the
 * -errno of the failed metadata write (everything is freed anyway). */
int cfs_fs_close(struct cfs_fs *fs);

/* Test hook: a crash. Stop the committer without a last commit and free all
 * memory without writing anything more. */
void cfs_fs_abandon(struct cfs_fs *fs);

#endif /* CFS_MOUNT_H */
