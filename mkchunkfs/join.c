/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * join.c — mkchunkfs --join STORE0 TARGET: format TARGET as a data store of
 * STORE0's pool (fs/POOLS.md, fs/format/FORMAT.md 3.4).
 *
 * The order makes an interruption harmless: TARGET is written completely
 * first (its own superblocks name the pool, its index and its units), and
 * only then does store 0's superblock gain the entry, in its other slot, as
 * the next generation. Killed in between, store 0 still describes the pool
 * without TARGET, and a mount that is given TARGET names it as not in the
 * table (an interrupted join); its older slot stays valid if the new one is
 * torn.
 *
 * Refused before anything is written: STORE0 not a chunkfs store, a data
 * store, in use (a chunkfs daemon holds its lock), read-only features; a
 * TARGET with another logical sector; a duplicate label; a full table; -b or
 * -a different from the pool's. Both stores are locked as the daemon locks
 * them (flock on the path; an RBD image TARGET by its exclusive lock), so
 * a mount cannot start in between. STORE0 is a local store: the daemon
 * reaches a pool's metadata through the ring, never through librbd.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "mkchunkfs/mkchunkfs.h"

struct store0 {
	const char *path;
	int fd;	     /* O_DIRECT where the filesystem allows it */
	int lock_fd; /* flock, as the daemon's store lock */
	struct cfs_sb sb;
	int slot;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int lock_path(const char *path, int *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		cfs_mkfs_error("%s: %s", path, strerror(errno));
		return -errno;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		cfs_mkfs_error("%s: in use (mounted by chunkfs, or checked by fsck): unmount the "
			       "pool first",
			       path);
		close(fd);
		return -EBUSY;
	}
	*out = fd;
	return 0;
}

static int open_store0(struct store0 *s)
{
	const char *why = NULL;
	uint8_t *buf = NULL;
	int ret;

	ret = lock_path(s->path, &s->lock_fd);
	if (ret)
		return ret;
	s->fd = open(s->path, O_RDWR | O_CLOEXEC | O_DIRECT);
	if (s->fd < 0 && errno == EINVAL)
		s->fd = open(s->path, O_RDWR | O_CLOEXEC);
	if (s->fd < 0) {
		cfs_mkfs_error("%s: %s", s->path, strerror(errno));
		return -errno;
	}
	if (posix_memalign((void **)&buf, 4096, CFS_MKFS_SB_PAIR_BYTES))
		return -ENOMEM;
	if (pread(s->fd, buf, CFS_MKFS_SB_PAIR_BYTES, 0) != CFS_MKFS_SB_PAIR_BYTES) {
		cfs_mkfs_error("%s: cannot read its superblocks", s->path);
		ret = -EIO;
		goto out;
	}
	ret = cfs_sb_pick(buf, buf + CFS_SB_BLOCK_BYTES, &s->sb, &s->slot, &why);
	if (ret < 0) {
		cfs_mkfs_error("%s: %s: %s", s->path,
			       ret == -EINVAL ? "not a chunkfs store" : "unusable superblocks",
			       why);
		goto out;
	}
	ret = cfs_sb_check_mountable(&s->sb, &why);
	if (ret) {
		cfs_mkfs_error("%s: %s", s->path,
			       ret > 0 ? "has features this mkchunkfs does not know" : why);
		ret = ret > 0 ? -EOPNOTSUPP : ret;
		goto out;
	}
	if (cfs_sb_is_data_store(&s->sb)) {
		cfs_mkfs_error("%s: a data store of a pool; --join needs the pool's store 0 (the "
			       "store holding its metadata)",
			       s->path);
		ret = -EINVAL;
	}
out:
	free(buf);
	return ret;
}

/* Store 0's next superblock: the pool fields and table, with `add` in it. */
static int table_with(const struct cfs_sb *old, const struct cfs_sb *add, struct cfs_sb *out)
{
	const char *why = NULL;
	int ret = cfs_sb_table_add(old, add, out, &why);

	if (ret == -ENOSPC) {
		cfs_mkfs_error("the pool has %u stores already, the most it can hold",
			       CFS_POOL_STORES_MAX);
		return ret;
	}
	if (ret) {
		cfs_mkfs_error("cannot add the store to the pool: %s", why);
		return ret;
	}
	out->wtime_ns = now_ns();
	return 0;
}

static int write_store0(struct store0 *s, const struct cfs_sb *next)
{
	uint8_t *block = NULL;
	int ret = 0;

	if (posix_memalign((void **)&block, 4096, CFS_SB_BLOCK_BYTES))
		return -ENOMEM;
	cfs_sb_encode(next, block);
	if (pwrite(s->fd, block, CFS_SB_BLOCK_BYTES,
		   (off_t)CFS_SB_SLOT_OFFSET_BYTES(cfs_sb_slot(next->generation))) !=
		    CFS_SB_BLOCK_BYTES ||
	    fsync(s->fd)) {
		cfs_mkfs_error("%s: writing its superblock failed: %s", s->path, strerror(errno));
		ret = -EIO;
	}
	free(block);
	return ret;
}

int cfs_mkfs_join(const struct cfs_mkfs_opts *opts)
{
	struct store0 s0 = {.path = opts->join, .fd = -1, .lock_fd = -1};
	struct cfs_mkfs_write_cfg wcfg = {0};
	struct cfs_mkfs_target t;
	struct cfs_mkfs_found found;
	struct cfs_sb sb, next;
	int status = CFS_MKFS_EXIT_USAGE, lock_fd = -1;
	uint8_t uuid[CFS_UUID_BYTES];
	const char *why = NULL;
	int ret;

	cfs_mkfs_target_init(&t);
	if (open_store0(&s0) < 0)
		goto out;
	if (cfs_mkfs_target_open(&t, opts) < 0)
		goto out;
	/* (an RBD image is locked as it opens: its exclusive lock) */
	if (t.exists && !t.is_rbd && lock_path(t.path, &lock_fd) < 0)
		goto out;
	if (t.geo.logical_sector_bytes != s0.sb.logical_sector_bytes) {
		cfs_mkfs_error("%s: %u-byte logical sectors, the pool's are %u bytes: every store "
			       "of a pool has the same",
			       t.path, t.geo.logical_sector_bytes, s0.sb.logical_sector_bytes);
		goto out;
	}
	if ((opts->block_size_bytes && opts->block_size_bytes != s0.sb.block_size_bytes) ||
	    (opts->alloc_unit_bytes && opts->alloc_unit_bytes != s0.sb.alloc_unit_bytes)) {
		cfs_mkfs_error("-b and -a must be the pool's (block %u, allocation unit %u), or "
			       "left out",
			       s0.sb.block_size_bytes, s0.sb.alloc_unit_bytes);
		goto out;
	}

	/* The new store: the pool's geometry, the next index, units after
	 * every store's, one unit number apart (FORMAT.md 3.4). */
	if (opts->uuid_given) {
		memcpy(uuid, opts->uuid, CFS_UUID_BYTES);
	} else if ((ret = cfs_uuid_generate(uuid)) < 0) {
		cfs_mkfs_error("cannot generate a uuid: %s", strerror(-ret));
		goto out;
	}
	ret = cfs_sb_data_store_new(&s0.sb, t.store_size_bytes, t.geo.logical_sector_bytes,
				    t.geo.physical_sector_bytes, uuid, opts->label, &sb, &why);
	if (ret < 0) {
		cfs_mkfs_error("%s: %s", t.path, why);
		goto out;
	}
	/* Everything store 0's table must accept, checked before writing. */
	if (table_with(&s0.sb, &sb, &next) < 0)
		goto out;
	if (cfs_mkfs_signatures_find(&t, &found) < 0)
		goto out;
	if (opts->dry_run) {
		if (!opts->quiet) {
			sb.generation = 2;
			cfs_sb_print(stdout, &sb);
			puts("dry run (-n): nothing was written");
		}
		if (found.count)
			cfs_mkfs_error("note: %s contains %s; %s", t.path, found.what,
				       opts->force ? "a real run will erase it (-f)"
						   : "a real run needs -f");
		status = CFS_MKFS_EXIT_OK;
		goto out;
	}
	if (found.count && !opts->force) {
		cfs_mkfs_error("%s contains %s; use -f to overwrite", t.path, found.what);
		goto out;
	}

	status = CFS_MKFS_EXIT_WRITE;
	if (found.count && cfs_mkfs_signatures_wipe(&t) < 0)
		goto out;
	if (cfs_mkfs_target_prepare(&t) < 0)
		goto out;
	wcfg.discard = (t.is_block_device || t.is_rbd) && !opts->no_discard;
	wcfg.fill = !t.is_block_device && !t.is_rbd && !opts->sparse;
	wcfg.progress = !opts->quiet && isatty(STDOUT_FILENO);
	if (cfs_mkfs_write(&t, &sb, &wcfg) < 0)
		goto out;
	cfs_mkfs_test_kill_point("joined");
	/* Then store 0 learns about it: the join takes effect here. */
	if (write_store0(&s0, &next) < 0)
		goto out;
	status = CFS_MKFS_EXIT_OK;
	if (!opts->quiet) {
		cfs_sb_print(stdout, &sb);
		printf("joined:          the pool of %s, now %u stores; mount it as chunkfs "
		       "%s,%s,... DIR\n",
		       s0.path, next.store_count, s0.path, t.path);
	}
out:
	/* A failed write leaves the new store unfinished (INPROGRESS) and store
	 * 0 as it was: the pool does not know it. */
	cfs_mkfs_target_close(&t, status == CFS_MKFS_EXIT_WRITE);
	if (s0.fd >= 0)
		close(s0.fd);
	if (s0.lock_fd >= 0)
		close(s0.lock_fd);
	if (lock_fd >= 0)
		close(lock_fd);
	return status;
}
