/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mount.c — mount (superblocks, snapshot, log replay, orphans), the RAM temp
 * mount, unmount (final snapshot + CLEAN) and the crash hook (fs/meta/mount.h).
 *
 * What it does not do: FUSE, data I/O, option parsing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/base/text.h"
#include "fs/meta/journal.h"
#include "fs/meta/mount.h"
#include "fs/meta/namespace.h"
#include "fs/meta/pool.h"

/* The namespace's side of the journal: what a commit captures, what a
 * snapshot holds, what each replayed record does. */
static const struct cfs_journal_ops ns_journal_ops = {
	.capture = cfs_ns_commit_capture,
	.snapshot = cfs_ns_snapshot,
	.apply_fs_info = cfs_ns_apply_fs_info,
	.apply_inode = cfs_ns_apply_inode,
	.apply_inode_delete = cfs_ns_apply_inode_delete,
	.apply_dirent_add = cfs_ns_apply_dirent_add,
	.apply_dirent_remove = cfs_ns_apply_dirent_remove,
	.apply_rename = cfs_ns_apply_rename,
	.apply_extent = cfs_ns_apply_extent,
	.apply_written = cfs_ns_apply_written,
	.apply_written_run = cfs_ns_apply_written_run,
	.apply_piece = cfs_ns_apply_piece,
	.apply_xattr = cfs_ns_apply_xattr,
	.apply_place = cfs_ns_apply_place,
};

/* Free everything (the committer is stopped or was never started). */
static void fs_free(struct cfs_fs *fs)
{
	if (fs->journal)
		cfs_journal_abandon(fs->journal);
	cfs_ns_destroy(fs->ns);
	cfs_journal_destroy(fs->journal);
	cfs_pool_destroy(fs->pool);
	if (fs->meta_q)
		cfs_ioq_destroy(fs->meta_q);
	free(fs);
}

/* The parts common to both mounts, once fs->geom is set. */
static int fs_build(struct cfs_fs *fs, const struct cfs_journal_config *jcfg, char *err,
		    size_t err_bytes)
{
	int ret;

	if (fs->ram)
		ret = cfs_pool_create_ram(fs->geom.store_units, &fs->pool);
	else
		ret = cfs_pool_create(&fs->sb, fs->opts.pool_sources, fs->opts.pool_source_count,
				      &fs->pool);
	if (!ret)
		ret = cfs_ns_create(fs, &fs->ns);
	if (!ret)
		ret = cfs_journal_create(fs, jcfg, &fs->journal);
	if (ret)
		cfs_text_error(err, err_bytes, "cannot set up the metadata: %s", strerror(-ret));
	return ret;
}

static struct cfs_fs *fs_new(struct cfs_io *io, const struct cfs_fs_options *opts)
{
	struct cfs_fs *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return NULL;
	fs->io = io;
	if (opts)
		fs->opts = *opts;
	atomic_init(&fs->readonly, false);
	return fs;
}

/*
 * The extent geometry of a store mount. A pool numbers units across its
 * stores (fs/POOLS.md): the maps are sized for all of its units (a file may
 * still map twice the pool), and any pool unit is a valid store unit, so a
 * store added later needs no new geometry.
 */
/* Valid store units of a pool: every unit of its address space. */
static uint64_t pool_store_units(const struct cfs_sb *sb)
{
	return (CFS_POOL_ADDRESS_MAX - sb->data_offset_bytes) / sb->alloc_unit_bytes;
}

static int geom_init(struct cfs_fs *fs)
{
	const struct cfs_sb *sb = &fs->sb;
	uint64_t units = sb->data_unit_count;
	int ret;

	if (sb->incompat & CFS_FEAT_INCOMPAT_POOL)
		for (uint32_t i = 1; i < sb->store_count; i++)
			units += sb->stores[i].unit_count;
	ret = cfs_extent_geom_init(&fs->geom, sb->alloc_unit_bytes, sb->logical_sector_bytes, units,
				   sb->data_offset_bytes);
	if (!ret && (sb->incompat & CFS_FEAT_INCOMPAT_POOL))
		fs->geom.store_units = pool_store_units(sb);
	return ret;
}

int cfs_fs_open(struct cfs_io *io, const struct cfs_fs_options *opts, struct cfs_fs **out,
		char *err, size_t err_bytes)
{
	const struct cfs_io_geometry *geo = cfs_io_geometry(io);
	struct cfs_ioq_config qcfg = {.depth = 16};
	struct cfs_journal_config jcfg = {.ops = &ns_journal_ops, .persist = true};
	struct cfs_fs *fs;
	const char *why = NULL;
	uint8_t *area = NULL;
	uint64_t replayed = 0;
	int slot, ret;

	*out = NULL;
	fs = fs_new(io, opts);
	if (!fs) {
		cfs_text_error(err, err_bytes, "out of memory");
		return -ENOMEM;
	}
	ret = cfs_ioq_create(io, &qcfg, &fs->meta_q);
	if (ret) {
		cfs_text_error(err, err_bytes, "cannot create the metadata queue: %s",
			       strerror(-ret));
		goto out_free;
	}
	area = aligned_alloc(4096, 2 * CFS_SB_BLOCK_BYTES);
	if (!area) {
		ret = -ENOMEM;
		cfs_text_error(err, err_bytes, "out of memory");
		goto out_free;
	}
	ret = cfs_ioq_sync(fs->meta_q, CFS_IO_READ, 0, 2 * CFS_SB_BLOCK_BYTES, area, NULL);
	if (ret >= 0 && ret != 2 * CFS_SB_BLOCK_BYTES)
		ret = -EIO;
	if (ret < 0) {
		cfs_text_error(err, err_bytes, "cannot read the superblocks: %s", strerror(-ret));
		goto out_free;
	}
	ret = cfs_sb_pick(area, area + CFS_SB_BLOCK_BYTES, &fs->sb, &slot, &why);
	if (ret < 0) {
		cfs_text_error(err, err_bytes, "%s: %s",
			       ret == -EINVAL ? "not a chunkfs store"
					      : "cannot use the superblocks",
			       why ? why : strerror(-ret));
		goto out_free;
	}
	if (why)
		cfs_fs_log(fs, "one superblock copy is bad (%s); using the other", why);
	ret = cfs_sb_check_mountable(&fs->sb, &why);
	if (ret < 0) {
		cfs_text_error(err, err_bytes, "cannot mount: %s", why ? why : strerror(-ret));
		goto out_free;
	}
	if (cfs_sb_is_data_store(&fs->sb)) {
		/* The target must start with store 0 (cfs_pool_open_io). */
		ret = -EINVAL;
		cfs_text_error(err, err_bytes,
			       "a data store of a pool: mount the pool with all its stores, as "
			       "SRC1,SRC2,...");
		goto out_free;
	}
	if ((fs->sb.incompat & CFS_FEAT_INCOMPAT_POOL) && fs->sb.store_count > 1 &&
	    fs->opts.pool_source_count < 2) {
		ret = -EINVAL;
		cfs_text_error(err, err_bytes, "store 0 of a pool of %u stores: mount all of them",
			       fs->sb.store_count);
		goto out_free;
	}
	if (ret == CFS_SB_RO_REQUIRED) {
		cfs_fs_log(fs, "the store has features this version does not know: read-only");
		fs->mounted_ro = true;
	}
	if (fs->opts.read_only)
		fs->mounted_ro = true;
	/* Store 0's own size (a pool's target is larger: every store). */
	if (fs->sb.store_size_bytes > cfs_io_store_geometry(io, 0)->size_bytes) {
		ret = -EUCLEAN;
		cfs_text_error(err, err_bytes,
			       "the target holds %llu bytes but the store was formatted for %llu",
			       (unsigned long long)cfs_io_store_geometry(io, 0)->size_bytes,
			       (unsigned long long)fs->sb.store_size_bytes);
		goto out_free;
	}
	/* The written-state of data is kept per store sector, and the data
	 * path's read-modify-write works in device sectors: they must agree. */
	if (fs->sb.logical_sector_bytes != geo->logical_sector_bytes) {
		ret = -EINVAL;
		cfs_text_error(
			err, err_bytes,
			"the store was formatted for %u-byte sectors but the target has %u-byte "
			"logical sectors",
			fs->sb.logical_sector_bytes, geo->logical_sector_bytes);
		goto out_free;
	}
	fs->log_seed = cfs_log_seed(fs->sb.uuid);
	ret = geom_init(fs);
	if (ret) {
		cfs_text_error(err, err_bytes,
			       "unsupported geometry (allocation unit %u, sector %u)",
			       fs->sb.alloc_unit_bytes, fs->sb.logical_sector_bytes);
		goto out_free;
	}
	fs->inode_limit = cfs_sb_half_size_bytes(&fs->sb) / CFS_BYTES_PER_INODE;
	if (fs->inode_limit > CFS_INODES_MAX)
		fs->inode_limit = CFS_INODES_MAX;
	jcfg.commit_interval_ms = fs->opts.commit_interval_ms;
	jcfg.next_seq = fs->sb.log_seq_start;
	ret = fs_build(fs, &jcfg, err, err_bytes);
	if (ret)
		goto out_free;
	atomic_store(&fs->readonly, fs->mounted_ro);

	ret = cfs_journal_load(fs->journal, &replayed, &why);
	if (!ret)
		ret = cfs_ns_mount_finish(fs, &why);
	if (ret) {
		cfs_text_error(err, err_bytes, "cannot load the metadata: %s",
			       why ? why : strerror(-ret));
		goto out_free;
	}
	if (replayed)
		cfs_fs_log(fs, "replayed %llu log records", (unsigned long long)replayed);
	/* A single store's log named its own units only (a record beyond them
	 * refused the replay above); from now on it is a pool of one whose
	 * first data store may join while mounted (fs/POOLS.md), so any pool
	 * unit is a valid store unit, as on a pool. Before the committer and
	 * the loops start: nothing reads the geometry concurrently yet. */
	fs->geom.store_units = pool_store_units(&fs->sb);
	/* Read-write: a fresh snapshot, so the log starts empty past anything
	 * an interrupted run left (FORMAT.md 7.4), and a superblock without
	 * CLEAN while mounted. */
	if (!fs->mounted_ro) {
		ret = cfs_journal_snapshot(fs->journal, false);
		if (ret) {
			cfs_text_error(err, err_bytes, "cannot write the mount snapshot: %s",
				       strerror(-ret));
			goto out_free;
		}
	}
	ret = cfs_journal_start(fs->journal);
	if (ret) {
		cfs_text_error(err, err_bytes, "cannot start the committer: %s", strerror(-ret));
		goto out_free;
	}
	free(area);
	*out = fs;
	return 0;

out_free:
	free(area);
	fs_free(fs);
	return ret;
}

int cfs_fs_open_ram(struct cfs_io *io, const struct cfs_fs_options *opts, struct cfs_fs **out,
		    char *err, size_t err_bytes)
{
	const struct cfs_io_geometry *geo = cfs_io_geometry(io);
	struct cfs_ioq_config qcfg = {.depth = 16};
	struct cfs_journal_config jcfg = {.ops = &ns_journal_ops, .persist = false};
	struct cfs_fs *fs;
	const char *why = NULL;
	uint32_t unit, sector;
	int ret;

	*out = NULL;
	fs = fs_new(io, opts);
	if (!fs) {
		cfs_text_error(err, err_bytes, "out of memory");
		return -ENOMEM;
	}
	fs->ram = true;
	unit = fs->opts.ram_alloc_unit_bytes ? fs->opts.ram_alloc_unit_bytes
					     : CFS_RAM_ALLOC_UNIT_DEFAULT;
	/* Written-state granularity: the advertised alignment, which the data
	 * path's read-modify-write uses too. */
	sector = geo->logical_sector_bytes;
	if (sector < 512 || (sector & (sector - 1))) {
		ret = -EINVAL;
		cfs_text_error(
			err, err_bytes,
			"a RAM mount needs an alignment of at least 512 bytes, a power of two "
			"(it has %u)",
			sector);
		goto out_free;
	}
	ret = cfs_extent_geom_init(&fs->geom, unit, sector, geo->size_bytes / unit, 0);
	if (ret) {
		cfs_text_error(err, err_bytes, "a RAM mount of %llu bytes cannot use %u-byte units",
			       (unsigned long long)geo->size_bytes, unit);
		goto out_free;
	}
	fs->inode_limit = geo->size_bytes / CFS_BYTES_PER_INODE;
	if (fs->inode_limit > CFS_INODES_MAX)
		fs->inode_limit = CFS_INODES_MAX;
	ret = cfs_ioq_create(io, &qcfg, &fs->meta_q);
	if (ret) {
		cfs_text_error(err, err_bytes, "cannot create the metadata queue: %s",
			       strerror(-ret));
		goto out_free;
	}
	jcfg.commit_interval_ms = fs->opts.commit_interval_ms;
	ret = fs_build(fs, &jcfg, err, err_bytes);
	if (!ret)
		ret = cfs_ns_mount_finish(fs, &why);
	if (!ret)
		ret = cfs_journal_start(fs->journal);
	if (ret) {
		if (err && !err[0])
			cfs_text_error(err, err_bytes, "cannot start: %s",
				       why ? why : strerror(-ret));
		goto out_free;
	}
	*out = fs;
	return 0;
out_free:
	fs_free(fs);
	return ret;
}

int cfs_fs_close(struct cfs_fs *fs)
{
	int ret, snap;

	if (!fs)
		return 0;
	ret = cfs_journal_stop(fs->journal);
	if (!fs->ram && !fs->mounted_ro && !cfs_fs_is_readonly(fs)) {
		snap = cfs_journal_snapshot(fs->journal, true);
		if (snap && !ret)
			ret = snap;
	}
	fs_free(fs);
	return ret;
}

void cfs_fs_abandon(struct cfs_fs *fs)
{
	if (fs)
		fs_free(fs);
}
