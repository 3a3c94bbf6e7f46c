/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fsck.c — fsck.chunkfs: check a chunkfs store, and with -y repair what can
 * be repaired safely.
 *
 * The check reads, never writes: both superblock copies, the active half's
 * snapshot and its log (fs/format/FORMAT.md sections 3-6, through fs/format/format.c's
 * decoders), then fsck's own model of the metadata (fsck_model.c) checks
 * extents, unit ownership, directories and link counts. A torn log tail is
 * the normal end of a log after a crash and is only a note.
 *
 * Repairs (-y, -p, -a), in the order they are made:
 *   1. a superblock copy that is bad while the other is good is rewritten
 *      from the good one (next generation, its own slot: FORMAT.md 4);
 *   2. namespace repairs go through the daemon's metadata engine: a
 *      read-write mount of the engine already frees orphans and drops
 *      entries naming missing inodes; fsck then sets wrong link counts and
 *      ".." pointers and links inodes without an entry into /lost+found, and
 *      the engine's unmount writes the result as a snapshot with CLEAN (the
 *      same write sequence the daemon uses, so fsck adds no writer of its
 *      own to the format). Then the store is checked again.
 * What is never repaired: a unit owned by two files (whose data is it?), a
 * bad snapshot, a directory cycle. Those are reported and exit 4.
 *
 * Exit codes are e2fsck's: 0 clean, 1 errors corrected, 4 errors left,
 * 8 operational error (cannot open, in use, not a chunkfs store), 16 usage.
 *
 * The store lock is the daemon's (fs/fuse/main.c): flock(LOCK_EX) on the store's
 * path and on a loop device's backing file, plus O_EXCL on block devices, so
 * a mounted store is refused and a mount waits while fsck runs. An RBD image
 * (rbd:POOL/IMAGE) has its exclusive lock instead (iopath/rbd_lock.c), taken
 * when it opens, also for a check that only reads.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fs/meta/mount.h"
#include "fs/meta/namespace.h"
#include "fs/meta/pool.h"
#include "iopath/iopath.h"
#include "mkchunkfs/fsck.h"
#include "mkchunkfs/mkchunkfs.h"

#define PROG "fsck.chunkfs"
/* Log window for the walk: the largest record fits with room to spare. */
#define LOG_WINDOW_BYTES (4u << 20)

struct fsck {
	const char *path;	 /* what the user gave (a pool: SRC1,SRC2,...) */
	bool rbd;		 /* path is rbd:POOL/[NAMESPACE/]IMAGE */
	struct cfs_io_ceph ceph; /* its cluster: --ceph-conf, --id, --cluster */
	bool repair;		 /* -y / -p / -a */
	bool verbose;		 /* -v */
	bool quiet;		 /* -q: problems only */
	/* the stores (fs/POOLS.md): one, or every store of a pool */
	char *path_list;
	const char *paths[CFS_POOL_STORES_MAX];
	unsigned path_count;
	struct cfs_pool_source sources[CFS_POOL_STORES_MAX];
	int lock_fd[2 * CFS_POOL_STORES_MAX];
	struct cfs_io *io;
	struct cfs_ioq *q;
	uint32_t sector_bytes; /* the target's I/O granule */
	size_t mem_align;
	struct fsck_report r;
	/* what the check of the superblocks found */
	struct cfs_sb sb;
	int sb_slot;	   /* the copy in use */
	bool sb_other_bad; /* the other copy needs rewriting */
	bool fatal;	   /* the metadata could not be read at all */
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG
		   " [-n | -y | -p | -a] [-f] [-v] [-q] [--ceph-conf PATH] [--id USER]\n"
		   "       [--cluster NAME] DEVICE|IMAGE|rbd:POOL/[NAMESPACE/]IMAGE\n"
		   "\n"
		   "Check a chunkfs store; read-only unless -y.\n"
		   "\n"
		   "  -n     never write (the default)\n"
		   "  -y     repair what can be repaired safely (-p and -a: the same)\n"
		   "  -f     accepted for fsck(8); every check is always complete\n"
		   "  -v     verbose: print the superblock and every note\n"
		   "  -q     print problems only, no summary\n"
		   "  -V     print the version and exit\n"
		   "  --ceph-conf PATH, --id USER, --cluster NAME\n"
		   "         an RBD store's cluster (default: Ceph's search, admin, ceph)\n"
		   "\n"
		   "Exit: 0 clean, 1 errors corrected, 4 errors left, 8 operational error,\n"
		   "16 usage. See fsck.chunkfs(8).\n");
}

/* ---- the store lock (fs/fuse/main.c's, without waiting) ------------------------- */

static int lock_path(const char *path, int *out_fd)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		say("%s: %s", path, strerror(errno));
		return -errno;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		int err = errno;

		close(fd);
		if (err == EWOULDBLOCK) {
			say("%s: store in use (mounted by chunkfs, or another fsck): refusing "
			    "to check it",
			    path);
			return -EBUSY;
		}
		say("%s: cannot lock: %s", path, strerror(err));
		return -err;
	}
	*out_fd = fd;
	return 0;
}

/* Lock one store path (and a loop device's backing file) into fds[0..1]. */
static int lock_one(const char *path, int fds[2])
{
	char backing[PATH_MAX] = "", sys[128];
	struct stat st;
	FILE *f;
	int ret;

	ret = lock_path(path, &fds[0]);
	if (ret)
		return ret;
	/* A loop device and its backing file are one store. */
	if (stat(path, &st) || !S_ISBLK(st.st_mode) || major(st.st_rdev) != 7)
		return 0;
	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u/loop/backing_file", major(st.st_rdev),
		 minor(st.st_rdev));
	f = fopen(sys, "re");
	if (!f)
		return 0;
	if (!fgets(backing, sizeof(backing), f))
		backing[0] = '\0';
	fclose(f);
	backing[strcspn(backing, "\n")] = '\0';
	return backing[0] ? lock_path(backing, &fds[1]) : 0;
}

static int lock_store(struct fsck *c)
{
	for (unsigned i = 0; i < c->path_count; i++) {
		/* an RBD image: its exclusive lock, taken as it opens */
		int ret = cfs_source_is_rbd(c->paths[i])
				  ? 0
				  : lock_one(c->paths[i], &c->lock_fd[2 * i]);

		if (ret)
			return ret;
	}
	return 0;
}

/* ---- I/O ----------------------------------------------------------------------- */

static void backend_log(void *arg, const char *line)
{
	(void)arg;
	say("%s", line);
}

static int open_store(struct fsck *c)
{
	struct cfs_io_config cfg = {0};
	struct cfs_ioq_config qc = {0};
	const struct cfs_io_geometry *geo;
	char err[512] = "";
	int ret;

	cfs_io_config_source(&cfg, c->path);
	if (!c->rbd)
		cfg.backend = "uring"; /* a pool's RBD stores too */
	cfg.read_only = !c->repair;
	cfg.exclusive = true;
	cfg.dio = CFS_DIO_OPTIONAL; /* block devices: required (cfs_pool_open_io) */
	cfg.ceph = c->ceph;
	cfg.log = backend_log;
	/* Every store of a pool is probed, checked against store 0's table
	 * and routed; a single store is a pool of one. An RBD image opens
	 * alone, and its backend says why it did not (the holder, in use). */
	ret = c->rbd ? cfs_io_open(&cfg, &c->io)
		     : cfs_pool_open_io(c->paths, c->path_count, &cfg, c->sources, &c->io, err,
					sizeof(err));
	if (ret && c->rbd)
		return ret;
	if (ret == -EBUSY) {
		say("%s: device is busy (mounted, or open exclusively): refusing to check it",
		    c->path);
		return ret;
	}
	if (ret) {
		say("%s", err[0] ? err : strerror(-ret));
		return ret;
	}
	geo = cfs_io_geometry(c->io);
	c->sector_bytes = geo->logical_sector_bytes;
	c->mem_align = geo->mem_align_bytes > 4096 ? geo->mem_align_bytes : 4096;
	qc.depth = 4;
	ret = cfs_ioq_create(c->io, &qc, &c->q);
	if (ret)
		say("%s: cannot create an I/O queue: %s", c->path, strerror(-ret));
	return ret;
}

static void *buf_alloc(const struct fsck *c, uint64_t bytes)
{
	uint64_t size = (bytes + c->mem_align - 1) / c->mem_align * c->mem_align;
	void *p = aligned_alloc(c->mem_align, size ? size : c->mem_align);

	if (p)
		memset(p, 0, size);
	return p;
}

/* Read or write [offset, +length): both sector multiples. */
static int store_io(struct fsck *c, enum cfs_io_op op, uint64_t offset, void *buf, uint64_t length)
{
	return cfs_ioq_sync_range(c->q, op, offset, length, buf);
}

static uint64_t round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) / to * to;
}

/* ---- superblocks -------------------------------------------------------------------- */

/* 0: usable superblock in c->sb; FSCK_EXIT_* otherwise. */
static int check_superblocks(struct fsck *c)
{
	static const char *const slot_name[] = {"0 (offset 0)", "1 (offset 4096)"};
	uint64_t area = round_up(CFS_SB_SLOTS * CFS_SB_BLOCK_BYTES, c->sector_bytes);
	const char *why = NULL, *slot_why[CFS_SB_SLOTS] = {NULL, NULL};
	uint8_t *buf = buf_alloc(c, area);
	bool good[CFS_SB_SLOTS];
	int ret, slot = -1;

	if (!buf)
		return FSCK_EXIT_OPERATIONAL;
	ret = store_io(c, CFS_IO_READ, 0, buf, area);
	if (ret) {
		say("%s: cannot read the superblocks: %s", c->path, strerror(-ret));
		free(buf);
		return FSCK_EXIT_OPERATIONAL;
	}
	for (unsigned s = 0; s < CFS_SB_SLOTS; s++) {
		struct cfs_sb one;
		int r = cfs_sb_decode(buf + CFS_SB_SLOT_OFFSET_BYTES(s), &one, &slot_why[s]);

		good[s] = r >= 0;
		if (good[s] && cfs_sb_slot(one.generation) != s) {
			good[s] = false;
			slot_why[s] = "superblock generation does not belong in this slot";
		}
	}
	ret = cfs_sb_pick(buf, buf + CFS_SB_BLOCK_BYTES, &c->sb, &slot, &why);
	free(buf);
	if (ret == -EINVAL) {
		say("%s: not a chunkfs store (no superblock magic in either slot)", c->path);
		return FSCK_EXIT_OPERATIONAL;
	}
	if (ret < 0) {
		fsck_problem(&c->r, FSCK_ERROR, "no usable superblock: %s", why);
		return FSCK_EXIT_UNCORRECTED;
	}
	c->sb_slot = slot;
	if (why || !good[!slot]) {
		fsck_problem(&c->r, FSCK_REPAIRABLE,
			     "superblock slot %s: %s; rewrite it from slot %s", slot_name[!slot],
			     why	       ? why
			     : slot_why[!slot] ? slot_why[!slot]
					       : "bad",
			     slot_name[slot]);
		c->sb_other_bad = true;
	}
	ret = cfs_sb_check_mountable(&c->sb, &why);
	if (ret < 0) {
		fsck_problem(&c->r, FSCK_ERROR, "superblock: %s", why);
		return FSCK_EXIT_UNCORRECTED;
	}
	if (ret == CFS_SB_RO_REQUIRED && c->repair) {
		say("%s: the store has features this fsck does not know: checking only", c->path);
		c->repair = false;
	}
	if (c->sb.store_size_bytes > cfs_io_store_geometry(c->io, 0)->size_bytes) {
		fsck_problem(&c->r, FSCK_ERROR,
			     "the store was formatted for %llu bytes, the target has %llu "
			     "(truncated?)",
			     (unsigned long long)c->sb.store_size_bytes,
			     (unsigned long long)cfs_io_store_geometry(c->io, 0)->size_bytes);
		return FSCK_EXIT_UNCORRECTED;
	}
	if (c->sb.logical_sector_bytes % c->sector_bytes) {
		fsck_problem(&c->r, FSCK_ERROR,
			     "the store's logical sector (%u) is not a multiple of the "
			     "target's (%u)",
			     c->sb.logical_sector_bytes, c->sector_bytes);
		return FSCK_EXIT_UNCORRECTED;
	}
	/* Checkable, but chunkfs mounts a store only through a target with
	 * its own sector size (fs/meta/mount.c): say so before the DBA finds out. */
	if (c->sb.logical_sector_bytes != c->sector_bytes)
		fsck_problem(&c->r, FSCK_WARN,
			     "the store was formatted for %u-byte sectors, the target has %u: "
			     "chunkfs will not mount it through this target",
			     c->sb.logical_sector_bytes, c->sector_bytes);
	if (c->verbose)
		cfs_sb_print(stdout, &c->sb);
	return 0;
}

/* Write the good copy, next generation, into the other slot. */
static int repair_superblock(struct fsck *c)
{
	struct cfs_sb sb = c->sb;
	uint64_t slot_bytes = round_up(CFS_SB_BLOCK_BYTES, c->sector_bytes);
	uint8_t *buf = buf_alloc(c, slot_bytes);
	struct timespec now;
	int ret;

	if (!buf)
		return -ENOMEM;
	sb.generation++;
	clock_gettime(CLOCK_REALTIME, &now);
	sb.wtime_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	cfs_sb_encode(&sb, buf);
	ret = store_io(c, CFS_IO_WRITE, CFS_SB_SLOT_OFFSET_BYTES(cfs_sb_slot(sb.generation)), buf,
		       slot_bytes);
	if (!ret)
		ret = cfs_ioq_sync(c->q, CFS_IO_FLUSH, 0, 0, NULL, NULL);
	free(buf);
	if (ret < 0)
		return ret;
	printf("fixed: superblock slot %u rewritten (generation %llu)\n",
	       cfs_sb_slot(sb.generation), (unsigned long long)sb.generation);
	c->sb = sb;
	c->sb_slot = (int)cfs_sb_slot(sb.generation);
	c->sb_other_bad = false;
	return 0;
}

/* ---- snapshot and log ---------------------------------------------------------------- */

static int snap_cb(const struct cfs_log_record *rec, void *arg)
{
	return fsck_model_snapshot_record(arg, rec);
}

static int log_cb(const struct cfs_log_record *rec, void *arg)
{
	return fsck_model_log_record(arg, rec);
}

/* Load the active half's snapshot into the model. FSCK_EXIT_* or 0. */
static int check_snapshot(struct fsck *c, struct fsck_model *m, uint64_t seed)
{
	uint64_t length = c->sb.meta_snap_length_bytes;
	uint64_t read_bytes = round_up(length, c->sector_bytes);
	struct cfs_log_walk_result res;
	const char *why = NULL;
	struct cfs_snap snap;
	uint8_t *buf = buf_alloc(c, read_bytes);
	int ret;

	if (!buf)
		return FSCK_EXIT_OPERATIONAL;
	ret = store_io(c, CFS_IO_READ, cfs_sb_half_offset_bytes(&c->sb, c->sb.meta_active_half),
		       buf, read_bytes);
	if (ret) {
		say("%s: cannot read the snapshot: %s", c->path, strerror(-ret));
		free(buf);
		return FSCK_EXIT_OPERATIONAL;
	}
	ret = cfs_snap_decode(buf, (size_t)length, seed, &snap, &why);
	if (ret == 0 && snap.seq != c->sb.log_seq_start) {
		why = "its sequence number does not match the superblock's";
		ret = -EUCLEAN;
	}
	if (ret) {
		fsck_problem(&c->r, FSCK_ERROR, "snapshot of metadata half %c: %s",
			     c->sb.meta_active_half ? 'B' : 'A', why);
		free(buf);
		c->fatal = true;
		return FSCK_EXIT_UNCORRECTED;
	}
	ret = cfs_log_walk(snap.body, snap.body_length_bytes, 0, seed, snap_cb, m, &res);
	free(buf);
	if (ret) {
		say("%s: out of memory loading the snapshot", c->path);
		return FSCK_EXIT_OPERATIONAL;
	}
	c->r.snap_records = snap.record_count;
	return 0;
}

/* Walk the log in windows (as the daemon's replay does) into the model. */
static int check_log(struct fsck *c, struct fsck_model *m, uint64_t seed)
{
	uint64_t start = cfs_sb_log_offset_bytes(&c->sb);
	uint64_t end = start + cfs_sb_log_size_bytes(&c->sb);
	uint64_t buf_offset = start, valid = 0, parsed = 0, seq = c->sb.log_seq_start;
	uint8_t *buf = buf_alloc(c, LOG_WINDOW_BYTES);
	const char *stop = "end of the log area";
	int ret = 0;

	if (!buf)
		return FSCK_EXIT_OPERATIONAL;
	for (;;) {
		struct cfs_log_walk_result res;
		uint64_t n = end - (buf_offset + valid);

		if (n > LOG_WINDOW_BYTES - valid)
			n = LOG_WINDOW_BYTES - valid;
		n = n / c->sector_bytes * c->sector_bytes;
		if (n) {
			ret = store_io(c, CFS_IO_READ, buf_offset + valid, buf + valid, n);
			if (ret) {
				say("%s: cannot read the log: %s", c->path, strerror(-ret));
				free(buf);
				return FSCK_EXIT_OPERATIONAL;
			}
			valid += n;
		}
		ret = cfs_log_walk(buf + parsed, valid - parsed, seq, seed, log_cb, m, &res);
		if (ret) {
			say("%s: out of memory replaying the log", c->path);
			free(buf);
			return FSCK_EXIT_OPERATIONAL;
		}
		parsed += res.end_offset_bytes;
		seq = res.next_seq;
		c->r.log_records += res.record_count;
		stop = res.why;
		if (buf_offset + valid >= end || valid - parsed >= CFS_LOG_HEADER_BYTES +
									   CFS_LOG_MAX_PAYLOAD +
									   CFS_LOG_ALIGN_BYTES)
			break;
		uint64_t keep = parsed / c->sector_bytes * c->sector_bytes;

		memmove(buf, buf + keep, valid - keep);
		buf_offset += keep;
		valid -= keep;
		parsed -= keep;
	}
	free(buf);
	fsck_problem(&c->r, FSCK_NOTE, "log: %llu records from seq %llu; it ends with: %s",
		     (unsigned long long)c->r.log_records, (unsigned long long)c->sb.log_seq_start,
		     stop ? stop : "?");
	if (fsck_model_pending_records(m))
		fsck_problem(&c->r, FSCK_NOTE,
			     "log: the last transaction (%u records) is incomplete: dropped, as "
			     "the daemon's replay drops it",
			     fsck_model_pending_records(m));
	return 0;
}

/* One whole check into c->r. 0 or FSCK_EXIT_OPERATIONAL / _UNCORRECTED for a
 * check that could not go on. */
static int check_store(struct fsck *c)
{
	struct fsck_model *m = NULL;
	struct cfs_extent_geom eg;
	struct fsck_geom g;
	uint64_t seed;
	int ret;

	c->fatal = false;
	c->sb_other_bad = false;
	ret = check_superblocks(c);
	if (ret)
		return ret;
	seed = cfs_log_seed(c->sb.uuid);
	/* How far a file's map reaches is the engine's choice (twice the
	 * store, rounded to its leaves): ask it, so both agree on EFBIG. */
	if (cfs_extent_geom_init(&eg, c->sb.alloc_unit_bytes, c->sb.logical_sector_bytes,
				 c->sb.data_unit_count, c->sb.data_offset_bytes)) {
		fsck_problem(&c->r, FSCK_ERROR,
			     "allocation unit %u and sector %u: the daemon cannot map this "
			     "geometry",
			     c->sb.alloc_unit_bytes, c->sb.logical_sector_bytes);
		return FSCK_EXIT_UNCORRECTED;
	}
	g.unit_count = c->sb.data_unit_count;
	g.stores = NULL;
	g.store_count = 0;
	if (c->sb.incompat & CFS_FEAT_INCOMPAT_POOL) {
		/* Units are numbered across the pool (FORMAT.md 3.4). */
		g.stores = c->sb.stores;
		g.store_count = c->sb.store_count;
		for (uint32_t i = 0; i < c->sb.store_count; i++)
			if (c->sb.stores[i].unit_base + c->sb.stores[i].unit_count > g.unit_count)
				g.unit_count =
					c->sb.stores[i].unit_base + c->sb.stores[i].unit_count;
		if (c->verbose)
			printf("%s: a pool of %u stores, all present and matching store 0's "
			       "table\n",
			       c->path, c->sb.store_count);
	}
	g.unit_bytes = c->sb.alloc_unit_bytes;
	g.sector_bytes = c->sb.logical_sector_bytes;
	g.max_file_units = eg.max_units;
	g.incompat = c->sb.incompat;
	g.physical_sector_bytes = c->sb.physical_sector_bytes;
	if (fsck_model_create(&g, &c->r, &m))
		return FSCK_EXIT_OPERATIONAL;
	ret = check_snapshot(c, m, seed);
	if (!ret)
		ret = check_log(c, m, seed);
	if (!ret && fsck_model_check(m)) {
		say("%s: out of memory checking the metadata", c->path);
		ret = FSCK_EXIT_OPERATIONAL;
	}
	fsck_model_destroy(m);
	return ret;
}

/* ---- namespace repairs through the engine ----------------------------------------------- */

static void engine_log(void *arg, const char *line)
{
	printf("chunkfs engine: %s\n", line);
}

static uint64_t lost_found(struct cfs_fs *fs, bool *created)
{
	struct cfs_attr attr;
	int ret;

	*created = false;
	ret = cfs_ns_lookup(fs, CFS_ROOT_INO, "lost+found", &attr);
	if (ret == -ENOENT) {
		ret = cfs_ns_mkdir(fs, CFS_ROOT_INO, "lost+found", 0700, 0, 0, &attr);
		*created = ret == 0;
	}
	if (ret)
		return 0;
	cfs_ns_forget(fs, attr.ino, 1);
	return S_ISDIR(attr.mode) ? attr.ino : 0;
}

/* Set what the model found wrong on the engine's in-memory inodes; the
 * engine's unmount snapshot writes it. */
static int apply_fix(struct cfs_fs *fs, const struct fsck_fix *f, uint64_t lf, uint64_t bump_root)
{
	struct cfs_inode *inode;
	int ret;

	if (f->kind == FSCK_FIX_LOST) {
		char name[32];
		struct cfs_attr attr;

		if (!lf)
			return -ENOENT;
		snprintf(name, sizeof(name), "#%llu", (unsigned long long)f->ino);
		ret = cfs_ns_link(fs, f->ino, lf, name, &attr);
		if (ret)
			return ret;
		cfs_ns_forget(fs, f->ino, 1);
	}
	ret = cfs_ns_open(fs, f->ino, &inode);
	if (ret)
		return ret;
	pthread_mutex_lock(&inode->lock);
	if (f->kind == FSCK_FIX_PARENT)
		inode->parent_ino = f->value;
	else
		inode->nlink = (uint32_t)(f->value + (f->ino == CFS_ROOT_INO ? bump_root : 0));
	pthread_mutex_unlock(&inode->lock);
	cfs_ns_release(fs, inode);
	return 0;
}

static int repair_namespace(struct fsck *c)
{
	struct cfs_fs_options fo = {0};
	struct cfs_fs *fs;
	bool created = false;
	uint64_t lf = 0;
	char err[512] = "";
	int ret;

	fo.log = engine_log;
	fo.root_mode = 0755;
	fo.pool_sources = c->sources;
	fo.pool_source_count = c->path_count;
	ret = cfs_fs_open(c->io, &fo, &fs, err, sizeof(err));
	if (ret) {
		say("%s: the engine refused to mount the store for repairs: %s", c->path,
		    err[0] ? err : strerror(-ret));
		return ret;
	}
	for (size_t i = 0; i < c->r.fix_count; i++)
		if (c->r.fixes[i].kind == FSCK_FIX_LOST && !lf)
			lf = lost_found(fs, &created);
	for (size_t i = 0; i < c->r.fix_count; i++) {
		const struct fsck_fix *f = &c->r.fixes[i];

		ret = apply_fix(fs, f, lf, created);
		if (ret)
			say("inode %llu: repair failed: %s", (unsigned long long)f->ino,
			    strerror(-ret));
	}
	ret = cfs_fs_close(fs);
	if (ret)
		say("%s: writing the repaired metadata failed: %s", c->path, strerror(-ret));
	else
		printf("fixed: metadata rewritten (%zu inode repairs; orphans and dangling "
		       "entries removed)\n",
		       c->r.fix_count);
	return ret;
}

/* ---- main ------------------------------------------------------------------------------- */

static void summary(const struct fsck *c)
{
	const struct fsck_report *r = &c->r;
	unsigned bad = r->counts[FSCK_ERROR] + r->counts[FSCK_REPAIRABLE];

	if (c->quiet)
		return;
	printf("%s: %s, %llu inodes (%llu files, %llu directories), %llu of %llu units used "
	       "(%llu free), snapshot %llu records, log %llu records\n",
	       c->path, bad ? "errors found" : "clean", (unsigned long long)r->inodes,
	       (unsigned long long)r->files, (unsigned long long)r->dirs,
	       (unsigned long long)r->units_used, (unsigned long long)r->units_total,
	       (unsigned long long)(r->units_total - r->units_used),
	       (unsigned long long)r->snap_records, (unsigned long long)r->log_records);
}

static void close_store(struct fsck *c)
{
	if (c->q)
		cfs_ioq_destroy(c->q);
	if (c->io)
		cfs_io_close(c->io);
	c->q = NULL;
	c->io = NULL;
	for (unsigned i = 0; i < 2 * CFS_POOL_STORES_MAX; i++)
		if (c->lock_fd[i] >= 0)
			close(c->lock_fd[i]);
	free(c->path_list);
}

int main(int argc, char **argv)
{
	enum { OPT_CEPH_CONF = 256, OPT_CEPH_ID, OPT_CEPH_CLUSTER };
	static const struct option long_opts[] = {
		{"ceph-conf", required_argument, NULL, OPT_CEPH_CONF},
		{"id", required_argument, NULL, OPT_CEPH_ID},
		{"cluster", required_argument, NULL, OPT_CEPH_CLUSTER},
		{NULL, 0, NULL, 0},
	};
	struct fsck c = {.sb_slot = -1};
	bool no_write = false;
	int opt, ret, exit_code;

	while ((opt = getopt_long(argc, argv, "nyapfvqVh", long_opts, NULL)) != -1) {
		switch (opt) {
		case OPT_CEPH_CONF:
			c.ceph.conf = optarg;
			break;
		case OPT_CEPH_ID:
			c.ceph.id = optarg;
			break;
		case OPT_CEPH_CLUSTER:
			c.ceph.cluster = optarg;
			break;
		case 'n':
			no_write = true;
			break;
		case 'y':
		case 'a':
		case 'p':
			c.repair = true;
			break;
		case 'f':
			break;
		case 'v':
			c.verbose = true;
			break;
		case 'q':
			c.quiet = true;
			break;
		case 'V':
			printf(PROG " " CFS_MKFS_VERSION "\n");
			return FSCK_EXIT_OK;
		case 'h':
			usage(stdout);
			return FSCK_EXIT_OK;
		default:
			usage(stderr);
			return FSCK_EXIT_USAGE;
		}
	}
	if (no_write && c.repair) {
		say("-n and -y (-p, -a) exclude each other");
		usage(stderr);
		return FSCK_EXIT_USAGE;
	}
	if (optind != argc - 1) {
		usage(stderr);
		return FSCK_EXIT_USAGE;
	}
	c.path = argv[optind];
	for (unsigned i = 0; i < 2 * CFS_POOL_STORES_MAX; i++)
		c.lock_fd[i] = -1;
	/* One RBD image; a list is a pool, which may have RBD images among its
	 * stores. */
	c.rbd = cfs_source_is_rbd(c.path) && !strchr(c.path, ',');
	if (!c.rbd && !strstr(c.path, CFS_RBD_PREFIX) &&
	    (c.ceph.conf || c.ceph.id || c.ceph.cluster)) {
		say("--ceph-conf, --id and --cluster are for RBD stores (rbd:POOL/IMAGE)");
		return FSCK_EXIT_USAGE;
	}
	/* An RBD image is one store, locked by its backend when it opens. */
	if (!c.rbd) {
		char err[512];

		c.path_list = strdup(c.path);
		ret = c.path_list
			      ? cfs_pool_split_sources(c.path_list, c.paths, CFS_POOL_STORES_MAX)
			      : -ENOMEM;
		if (ret < 0) {
			say("%s: %s", c.path,
			    ret == -E2BIG ? "more stores than a pool holds"
					  : "an empty store path");
			free(c.path_list);
			return FSCK_EXIT_USAGE;
		}
		c.path_count = (unsigned)ret;
		for (unsigned i = 0; i < c.path_count; i++) {
			struct cfs_rbd_name name;
			const char *why;

			if (cfs_source_is_rbd(c.paths[i]) &&
			    cfs_rbd_name_parse(c.paths[i], &name, &why)) {
				say("%s: %s", c.paths[i], why);
				free(c.path_list);
				return FSCK_EXIT_USAGE;
			}
		}
		if (cfs_pool_check_distinct(c.paths, c.path_count, err, sizeof(err))) {
			say("%s", err);
			free(c.path_list);
			return FSCK_EXIT_USAGE;
		}
	}
	c.r.out = stdout;
	c.r.verbose = c.verbose;
	if (lock_store(&c) || open_store(&c)) {
		close_store(&c);
		return FSCK_EXIT_OPERATIONAL;
	}
	ret = check_store(&c);
	if (ret == FSCK_EXIT_OPERATIONAL) {
		exit_code = ret;
		goto out;
	}
	bool problems = c.r.counts[FSCK_ERROR] || c.r.counts[FSCK_REPAIRABLE];
	bool repairable = c.r.counts[FSCK_REPAIRABLE] || c.r.need_mount || c.sb_other_bad;

	summary(&c);
	if (!c.repair || !repairable) {
		exit_code = problems ? FSCK_EXIT_UNCORRECTED : FSCK_EXIT_OK;
		goto out;
	}
	/* Repairs. The superblock first: it is independent of the rest. */
	if (c.sb_other_bad && repair_superblock(&c)) {
		say("%s: rewriting the superblock failed", c.path);
		exit_code = FSCK_EXIT_UNCORRECTED;
		goto out;
	}
	/* The engine refuses what it cannot mount (a unit owned twice); an
	 * error the model found may be one of those, so leave it alone. */
	if (!c.fatal && !c.r.counts[FSCK_ERROR] && (c.r.fix_count || c.r.need_mount))
		repair_namespace(&c);
	/* Check again: the exit code says what is left. */
	fsck_report_reset(&c.r);
	if (!c.quiet)
		printf("%s: checking again after the repairs\n", c.path);
	ret = check_store(&c);
	summary(&c);
	if (ret == FSCK_EXIT_OPERATIONAL)
		exit_code = ret;
	else if (c.r.counts[FSCK_ERROR] || c.r.counts[FSCK_REPAIRABLE] || c.sb_other_bad)
		exit_code = FSCK_EXIT_UNCORRECTED;
	else
		exit_code = FSCK_EXIT_CORRECTED;
out:
	free(c.r.fixes);
	close_store(&c);
	return exit_code;
}
