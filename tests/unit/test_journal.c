/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_journal.c — persistence of the metadata engine on a formatted store
 * held by iopath's "ram" backend (optionally wrapped in "fault"): clean
 * close and reopen gives an identical namespace; a crash (no clean close)
 * keeps everything committed and nothing half-applied; a torn log tail
 * ends replay cleanly; snapshots cycle through both halves; a failed
 * metadata write turns the filesystem read-only; orphans are freed at
 * mount; mount refuses stores it must not touch.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs/meta/alloc.h"
#include "fs/meta/journal.h"
#include "fs/meta/mount.h"
#include "fs/meta/namespace.h"
#include "fs/meta/piece.h"
#include "fs/meta/pool.h"
#include "tests/unit/unit.h"

#define UNIT (64u * 1024)
#define STORE_BYTES (64ull << 20)

static struct cfs_io *io;
static struct cfs_fs *fs;
static struct cfs_fs_options opts = {
	.commit_interval_ms = 3600 * 1000, /* commits only when a test asks */
};

/* ---- a store: what mkchunkfs writes, in memory ------------------------------- */

static void io_write(uint64_t offset, const void *data, uint32_t length)
{
	struct cfs_ioq *q = t_ioq_new(io, 4);
	void *buf = aligned_alloc(4096, (length + 4095) & ~4095u);

	memcpy(buf, data, length);
	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_WRITE, offset, length, buf, NULL), (int)length);
	cr_assert_geq(cfs_ioq_sync(q, CFS_IO_FLUSH, 0, 0, NULL, NULL), 0);
	cfs_ioq_destroy(q);
	free(buf);
}

static void io_read(uint64_t offset, void *data, uint32_t length)
{
	struct cfs_ioq *q = t_ioq_new(io, 4);
	void *buf = aligned_alloc(4096, (length + 4095) & ~4095u);

	cr_assert_eq(cfs_ioq_sync(q, CFS_IO_READ, offset, length, buf, NULL), (int)length);
	cfs_ioq_destroy(q);
	memcpy(data, buf, length);
	free(buf);
}

/* Feature bits of the stores format_store() makes: mkchunkfs's default. */
static uint64_t store_incompat = CFS_FEAT_INCOMPAT_WRITTEN_RUNS;

static struct cfs_sb format_store(uint64_t meta_bytes, uint64_t flags)
{
	const struct cfs_io_geometry *geo = cfs_io_geometry(io);
	struct cfs_sb sb;
	const char *why = NULL;
	uint8_t *block = calloc(1, 8192);

	cfs_sb_init_defaults(&sb);
	sb.logical_sector_bytes = geo->logical_sector_bytes;
	sb.physical_sector_bytes = geo->physical_sector_bytes;
	cr_assert_eq(cfs_sb_layout(&sb, geo->size_bytes, 4096, UNIT, meta_bytes, &why), 0, "%s",
		     why);
	cr_assert_eq(cfs_uuid_generate(sb.uuid), 0);
	cr_assert_eq(cfs_sb_set_label(&sb, "test"), 0);
	sb.incompat = store_incompat;
	/* The empty snapshot at the start of half A, then a zeroed block. */
	cr_assert_eq(cfs_snap_seal(block, 4096, 0, 0, sb.log_seq_start, cfs_log_seed(sb.uuid)), 0);
	io_write(cfs_sb_half_offset_bytes(&sb, 0), block, 8192);
	memset(block, 0, 8192);
	sb.flags = flags;
	sb.generation = 1;
	cfs_sb_encode(&sb, block + CFS_SB_SLOT_OFFSET_BYTES(1));
	sb.generation = 2;
	cfs_sb_encode(&sb, block + CFS_SB_SLOT_OFFSET_BYTES(0));
	io_write(0, block, 8192);
	free(block);
	return sb;
}

static void open_target(const char *fault_spec)
{
	struct cfs_io_config cfg = {
		.backend = "ram",
		.size_bytes = STORE_BYTES,
		.align_bytes = 512,
		.fault_spec = fault_spec,
	};

	cr_assert_eq(cfs_io_open(&cfg, &io), 0);
}

static void mount_fs(void)
{
	char err[256] = "";

	cr_assert_eq(cfs_fs_open(io, &opts, &fs, err, sizeof(err)), 0, "mount: %s", err);
}

static void setup(void)
{
	open_target(NULL);
	format_store(0, 0);
	mount_fs();
}

static void setup_fault(void)
{
	open_target("volatile=1,seed=3");
	format_store(0, 0);
	mount_fs();
}

static void setup_small_meta(void)
{
	open_target(NULL);
	format_store(CFS_META_MIN_BYTES, 0);
	mount_fs();
}

static void release_all(void);

static void teardown(void)
{
	release_all();
	if (fs)
		cfs_fs_close(fs);
	fs = NULL;
	cfs_io_close(io);
}

static void remount(void)
{
	cr_assert_eq(cfs_fs_close(fs), 0);
	fs = NULL;
	mount_fs();
}

static void crash_and_remount(void)
{
	cfs_fs_abandon(fs);
	fs = NULL;
	mount_fs();
}

/* ---- building a namespace ------------------------------------------------------ */

static uint64_t mk(uint64_t parent, const char *name, uint32_t mode)
{
	struct cfs_attr a;

	if (S_ISDIR(mode))
		cr_assert_eq(cfs_ns_mkdir(fs, parent, name, mode & 07777, 0, 0, &a), 0, "%s", name);
	else
		cr_assert_eq(cfs_ns_mknod(fs, parent, name, mode, 0, 3, 4, &a), 0, "%s", name);
	cfs_ns_forget(fs, a.ino, 1);
	return a.ino;
}

static void write_sim(struct cfs_inode *in, uint64_t offset, uint64_t length)
{
	uint64_t pos = offset;

	unsigned io_gen = cfs_ns_io_begin(in);
	cr_assert_eq(cfs_ns_map_for_write(fs, in, offset, length), 0);
	while (pos < offset + length) {
		struct cfs_extent_run run;

		cr_assert_eq(cfs_extent_lookup(in->map, pos, offset + length - pos, &run), 0);
		cr_assert(run.mapped);
		cr_assert_eq(cfs_extent_mark_written(in->map, pos, run.length_bytes,
						     run.device_offset_bytes),
			     0);
		pos += run.length_bytes;
	}
	cfs_ns_write_done(fs, in, offset, length);
	cfs_ns_io_end(fs, in, io_gen);
}

static void build_tree(void)
{
	uint64_t d = mk(CFS_ROOT_INO, "chunks", S_IFDIR | 0750);
	uint64_t t = mk(d, "temp", S_IFDIR | 0700);
	uint64_t f = mk(d, "rootdbs", S_IFREG | 0660);
	uint64_t g = mk(t, "tmpdbs", S_IFREG | 0660);
	struct cfs_inode *in;
	struct cfs_attr a;
	struct cfs_setattr s = {.valid = CFS_SET_SIZE};
	char big[40000];

	cr_assert_eq(cfs_ns_symlink(fs, CFS_ROOT_INO, "rootdbs", "/srv/chunks/rootdbs", 0, 0, &a),
		     0);
	cfs_ns_forget(fs, a.ino, 1);
	mk(CFS_ROOT_INO, "fifo", S_IFIFO | 0600);
	cr_assert_eq(cfs_ns_link(fs, f, CFS_ROOT_INO, "hardlink", &a), 0);
	cfs_ns_forget(fs, f, 1);
	cr_assert_eq(cfs_ns_setxattr(fs, f, "user.page", "2048", 4, 0), 0);
	memset(big, 0x5a, sizeof(big));
	cr_assert_eq(cfs_ns_setxattr(fs, f, "user.big", big, sizeof(big), 0), 0);
	cr_assert_eq(cfs_ns_set_page_size(fs, f, 2048), 0);
	cr_assert_eq(cfs_ns_open(fs, f, &in), 0);
	write_sim(in, 0, 5 * UNIT);
	write_sim(in, 7 * UNIT + 1024, 2048); /* a partial unit: bitmap */
	cfs_ns_release(fs, in);
	cr_assert_eq(cfs_ns_fallocate(fs, g, 0, 0, 3 * UNIT, NULL), 0);
	cr_assert_eq(cfs_ns_open(fs, g, &in), 0);
	write_sim(in, UNIT, 512);
	cfs_ns_release(fs, in);
	s.size_bytes = 2 * UNIT + 100;
	cr_assert_eq(cfs_ns_setattr(fs, g, &s, &a, NULL), 0);
	cr_assert_eq(cfs_ns_rename(fs, d, "temp", CFS_ROOT_INO, "temp", 0), 0);
	mk(CFS_ROOT_INO, "gone", S_IFREG | 0600);
	cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "gone"), 0);
}

/* Dumps live until release() or teardown, so a failed assertion (which
 * ends the test at once) leaves no leak report behind. */
static char *dumps[8];

static char *dump(void)
{
	char *d = cfs_ns_dump(fs);

	cr_assert_not_null(d);
	for (int i = 0; i < 8; i++)
		if (!dumps[i]) {
			dumps[i] = d;
			return d;
		}
	cr_assert_fail("too many dumps");
	return d;
}

static void release(char *d)
{
	for (int i = 0; i < 8; i++)
		if (dumps[i] == d)
			dumps[i] = NULL;
	free(d);
}

static void release_all(void)
{
	for (int i = 0; i < 8; i++) {
		free(dumps[i]);
		dumps[i] = NULL;
	}
}

static void assert_same(const char *a, const char *b)
{
	if (strcmp(a, b)) {
		fprintf(stderr, "--- expected\n%s--- got\n%s", a, b);
		cr_assert_fail("namespace differs");
	}
}

/* The namespace dumps as want did (after a remount, a crash, a repair). */
static void assert_dump(const char *want)
{
	char *now = dump();

	assert_same(want, now);
	release(now);
}

/* ---- tests ------------------------------------------------------------------------ */

Test(journal, fresh_store_gets_a_root, .init = setup, .fini = teardown)
{
	struct cfs_attr a;

	cr_assert_eq(cfs_ns_getattr(fs, CFS_ROOT_INO, &a), 0);
	cr_assert(S_ISDIR(a.mode));
	cr_assert_eq(a.mode & 07777, 0755);
	cr_assert_not(fs->sb.flags & CFS_SB_CLEAN);
	remount();
	cr_assert_eq(cfs_ns_getattr(fs, CFS_ROOT_INO, &a), 0);
}

Test(journal, clean_close_reopen_identical, .init = setup, .fini = teardown)
{
	char *before;
	struct cfs_sb sb;
	uint8_t block[4096];
	int slot;

	build_tree();
	before = dump();
	cr_assert_eq(cfs_fs_close(fs), 0);
	fs = NULL;
	/* The store says CLEAN after a clean close. */
	{
		uint8_t area[8192];

		io_read(0, area, sizeof(area));
		cr_assert_geq(cfs_sb_pick(area, area + 4096, &sb, &slot, NULL), 0);
		cr_assert(sb.flags & CFS_SB_CLEAN);
	}
	(void)block;
	mount_fs();
	assert_dump(before);
	/* And again, through a second cycle. */
	remount();
	assert_dump(before);
	release(before);
}

Test(journal, crash_keeps_committed_drops_uncommitted, .init = setup, .fini = teardown)
{
	char *committed;
	struct cfs_attr a;

	build_tree();
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	committed = dump();
	/* Not committed: must vanish whole. */
	mk(CFS_ROOT_INO, "late", S_IFREG | 0600);
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "hardlink", CFS_ROOT_INO, "moved", 0), 0);
	cr_assert_eq(cfs_ns_setxattr(fs, CFS_ROOT_INO, "user.late", "1", 1, 0), 0);
	crash_and_remount();
	assert_dump(committed);
	cr_assert_eq(cfs_ns_lookup(fs, CFS_ROOT_INO, "late", &a), -ENOENT);
	release(committed);
}

Test(journal, crash_after_commits_and_fsync_of_written_state, .init = setup, .fini = teardown)
{
	uint64_t f = mk(CFS_ROOT_INO, "f", S_IFREG | 0600);
	struct cfs_inode *in;
	char *committed;
	bool w;

	cr_assert_eq(cfs_ns_open(fs, f, &in), 0);
	for (int i = 0; i < 20; i++) {
		write_sim(in, (uint64_t)i * 4096, 4096);
		if (i % 4 == 3)
			cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	}
	committed = dump();
	cfs_ns_release(fs, in);
	crash_and_remount();
	assert_dump(committed);
	cr_assert_eq(cfs_ns_open(fs, f, &in), 0);
	cr_assert_eq(cfs_extent_written_span(in->map, 0, 2 * UNIT, &w), 20 * 4096);
	cr_assert(w);
	cfs_ns_release(fs, in);
	release(committed);
}

Test(journal, power_loss_with_volatile_cache, .init = setup_fault, .fini = teardown)
{
	char *committed;

	build_tree();
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	committed = dump();
	mk(CFS_ROOT_INO, "late", S_IFREG | 0600);
	cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "hardlink"), 0);
	cfs_fs_abandon(fs);
	fs = NULL;
	/* Everything not flushed is dropped, torn per physical sector. */
	cr_assert_geq(cfs_io_fault_crash(io, true), 0);
	mount_fs();
	assert_dump(committed);
	release(committed);
}

Test(journal, torn_log_tail_ends_replay, .init = setup, .fini = teardown)
{
	struct cfs_journal_stat st;
	char *first;
	uint64_t log_start = cfs_sb_log_offset_bytes(&fs->sb);
	uint64_t second_at;
	uint8_t sector[512];

	mk(CFS_ROOT_INO, "a", S_IFREG | 0600);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	first = dump();
	cfs_journal_stat(fs->journal, &st);
	second_at = log_start + st.log_used_bytes;
	mk(CFS_ROOT_INO, "b", S_IFDIR | 0700);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cfs_fs_abandon(fs);
	fs = NULL;
	/* Tear the second commit: a bit flip in its first record's payload. */
	io_read(second_at, sector, sizeof(sector));
	sector[40] ^= 0x01;
	io_write(second_at, sector, sizeof(sector));
	mount_fs();
	assert_dump(first);
	release(first);
}

Test(journal, snapshots_cycle_through_both_halves, .init = setup_small_meta, .fini = teardown)
{
	struct cfs_journal_stat st;
	uint64_t d = mk(CFS_ROOT_INO, "d", S_IFDIR | 0755);
	char name[32], *before;
	uint64_t start_snaps;
	unsigned half_seen[2] = {0, 0};

	cfs_journal_stat(fs->journal, &st);
	start_snaps = st.snapshots;
	for (int round = 0; round < 600; round++) {
		char value[8192];

		/* Churn: 20 creates, 19 unlinks, one 8 KiB xattr per commit, so
		 * the log fills many times while the namespace stays small. */
		for (int i = 0; i < 20; i++) {
			snprintf(name, sizeof(name), "f%d.%d", round, i);
			mk(d, name, S_IFREG | 0600);
			if (i)
				cr_assert_eq(cfs_ns_unlink(fs, d, name), 0);
		}
		memset(value, round & 0xff, sizeof(value));
		cr_assert_eq(cfs_ns_setxattr(fs, d, "user.v", value, sizeof(value), 0), 0);
		cr_assert_eq(cfs_journal_commit_sync(fs), 0);
		half_seen[fs->sb.meta_active_half]++;
	}
	cfs_journal_stat(fs->journal, &st);
	cr_assert_geq(st.snapshots - start_snaps, 10, "only %llu snapshots",
		      (unsigned long long)(st.snapshots - start_snaps));
	cr_assert_gt(half_seen[0], 0);
	cr_assert_gt(half_seen[1], 0);
	before = dump();
	crash_and_remount();
	assert_dump(before);
	remount();
	assert_dump(before);
	release(before);
}

Test(journal, busy_units_until_durable, .init = setup, .fini = teardown)
{
	uint64_t f = mk(CFS_ROOT_INO, "f", S_IFREG | 0600);
	struct cfs_inode *in;
	struct cfs_setattr s = {.valid = CFS_SET_SIZE, .size_bytes = 0};
	struct cfs_attr a;
	int64_t su;

	cr_assert_eq(cfs_ns_open(fs, f, &in), 0);
	write_sim(in, 0, 2 * UNIT);
	su = cfs_extent_unit_get(in->map, 1);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cr_assert_eq(cfs_ns_setattr(fs, f, &s, &a, NULL), 0);
	cr_assert_eq(cfs_pool_unit_state(fs->pool, (uint64_t)su), CFS_ALLOC_STATE_BUSY);
	/* A crash now: the file still owns the unit (the truncate is lost). */
	cfs_ns_release(fs, in);
	crash_and_remount();
	cr_assert_eq(cfs_pool_unit_state(fs->pool, (uint64_t)su), CFS_ALLOC_STATE_USED);
	cr_assert_eq(cfs_ns_getattr(fs, f, &a), 0);
	cr_assert_eq(a.size_bytes, 2 * UNIT);
	/* Again, committed this time. */
	cr_assert_eq(cfs_ns_setattr(fs, f, &s, &a, NULL), 0);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cr_assert_eq(cfs_pool_unit_state(fs->pool, (uint64_t)su), CFS_ALLOC_STATE_FREE);
}

Test(journal, orphans_freed_at_mount, .init = setup, .fini = teardown)
{
	struct cfs_inode *in;
	struct cfs_attr a;
	struct cfs_alloc_stat st;
	uint64_t ino;

	cr_assert_eq(cfs_ns_create_open(fs, CFS_ROOT_INO, "tmp", 0600, 0, 0, &a, &in), 0);
	ino = a.ino;
	write_sim(in, 0, 4 * UNIT);
	cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "tmp"), 0);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cfs_pool_stat(fs->pool, &st);
	cr_assert_eq(st.used_units, 4);
	/* Crash with the file open: an orphan on the store. */
	crash_and_remount();
	cr_assert_eq(cfs_ns_getattr(fs, ino, &a), -ENOENT);
	cfs_pool_stat(fs->pool, &st);
	cr_assert_eq(st.used_units, 0);
}

/* O_TMPFILE: a file born without a name is an orphan from its first record.
 * Left open by a crash (log replay) or by a clean close (the checkpoint's
 * snapshot holds it with no links) it is freed at mount; one given a name
 * by link before is an ordinary file. */
Test(journal, tmpfile_orphans_freed_at_mount, .init = setup, .fini = teardown)
{
	struct cfs_inode *unnamed, *named;
	struct cfs_attr a;
	struct cfs_alloc_stat st;
	uint64_t unnamed_ino, named_ino;

	for (int round = 0; round < 2; round++) {
		cr_assert_eq(cfs_ns_tmpfile_open(fs, CFS_ROOT_INO, 0600, 0, 0, true, &a, &unnamed),
			     0);
		unnamed_ino = a.ino;
		cr_assert_eq(cfs_ns_tmpfile_open(fs, CFS_ROOT_INO, 0600, 0, 0, true, &a, &named),
			     0);
		named_ino = a.ino;
		write_sim(unnamed, 0, 3 * UNIT);
		write_sim(named, 0, 2 * UNIT);
		cr_assert_eq(cfs_ns_link(fs, named_ino, CFS_ROOT_INO, "named", &a), 0);
		cr_assert_eq(cfs_journal_commit_sync(fs), 0);
		cfs_pool_stat(fs->pool, &st);
		cr_assert_eq(st.used_units, 5);
		if (round == 0) {
			crash_and_remount();
		} else {
			cfs_ns_release(fs, named);
			cfs_ns_forget(fs, named_ino, 2);
			remount(); /* unnamed still open: in the snapshot, nlink 0 */
		}
		cr_assert_eq(cfs_ns_getattr(fs, unnamed_ino, &a), -ENOENT, "round %d", round);
		cr_assert_eq(cfs_ns_lookup(fs, CFS_ROOT_INO, "named", &a), 0, "round %d", round);
		cr_assert_eq(a.ino, named_ino);
		cr_assert_eq(a.nlink, 1);
		cfs_ns_forget(fs, named_ino, 1);
		cfs_pool_stat(fs->pool, &st);
		cr_assert_eq(st.used_units, 2, "round %d: the unnamed file's units are not free",
			     round);
		cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "named"), 0);
	}
}

Test(journal, failed_metadata_write_turns_read_only, .init = NULL, .fini = teardown)
{
	struct cfs_attr a;
	char *committed;

	open_target("op=read,nth=1000000,err=EIO");
	format_store(0, 0);
	mount_fs();
	mk(CFS_ROOT_INO, "kept", S_IFREG | 0600);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	committed = dump();
	cr_assert_eq(cfs_io_fault_arm(io, "op=write,nth=1,err=EIO"), 0);
	mk(CFS_ROOT_INO, "lost", S_IFREG | 0600);
	cr_assert_eq(cfs_journal_commit_sync(fs), -EIO);
	cr_assert(cfs_fs_is_readonly(fs));
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, "x", S_IFREG, 0, 0, 0, &a), -EROFS);
	cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "kept"), -EROFS);
	cr_assert_eq(cfs_ns_setxattr(fs, CFS_ROOT_INO, "user.x", "1", 1, 0), -EROFS);
	cr_assert_eq(cfs_journal_commit_sync(fs), -EROFS);
	/* Reads still work. */
	cr_assert_eq(cfs_ns_lookup(fs, CFS_ROOT_INO, "kept", &a), 0);
	cr_assert_eq(cfs_fs_close(fs), -EIO);
	fs = NULL;
	cr_assert_eq(cfs_io_fault_arm(io, "op=read,nth=1000000,err=EIO"), 0);
	mount_fs();
	assert_dump(committed);
	release(committed);
}

Test(journal, refuses_interrupted_mkfs_and_foreign_data, .init = NULL, .fini = NULL)
{
	char err[256] = "";
	uint8_t junk[8192];

	open_target(NULL);
	format_store(0, CFS_SB_INPROGRESS);
	cr_assert_eq(cfs_fs_open(io, &opts, &fs, err, sizeof(err)), -EUCLEAN);
	cr_assert_not_null(strstr(err, "mkchunkfs"), "%s", err);
	cr_assert_null(fs);
	memset(junk, 0xab, sizeof(junk));
	io_write(0, junk, sizeof(junk));
	cr_assert_eq(cfs_fs_open(io, &opts, &fs, err, sizeof(err)), -EINVAL);
	cr_assert_not_null(strstr(err, "not a chunkfs store"), "%s", err);
	cfs_io_close(io);
}

Test(journal, read_only_mount_writes_nothing, .init = setup, .fini = teardown)
{
	struct cfs_fs_options ro = opts;
	char err[256] = "", *before;
	struct cfs_attr a;

	build_tree();
	remount();
	before = dump();
	cr_assert_eq(cfs_fs_close(fs), 0);
	ro.read_only = true;
	cr_assert_eq(cfs_fs_open(io, &ro, &fs, err, sizeof(err)), 0, "%s", err);
	cr_assert(cfs_fs_is_readonly(fs));
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, "x", S_IFREG, 0, 0, 0, &a), -EROFS);
	assert_dump(before);
	release(before);
}

static void setup_big_meta(void)
{
	open_target(NULL);
	format_store(32ull << 20, 0);
	mount_fs();
}

Test(journal, many_records_one_commit_and_big_tail, .init = setup_big_meta, .fini = teardown)
{
	uint64_t d = mk(CFS_ROOT_INO, "d", S_IFDIR | 0755);
	char name[64], *before;

	/* More than a replay window's worth of records in one commit. */
	for (int i = 0; i < 12000; i++) {
		snprintf(name, sizeof(name), "entry-with-a-longish-name.%06d", i);
		mk(d, name, S_IFREG | 0600);
	}
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	before = dump();
	crash_and_remount();
	assert_dump(before);
	release(before);
}

/* ---- snapshots while other threads mutate, then a crash ------------------------ */

struct worker {
	uint64_t dir;
	int id;
	int rounds;
	atomic_int *running;
};

static void *worker_thread(void *p)
{
	struct worker *w = p;
	unsigned seed = (unsigned)w->id * 7919u + 1;

	for (int r = 0; r < w->rounds; r++) {
		char name[32], to[32];
		struct cfs_inode *in;
		struct cfs_attr a;
		struct cfs_setattr s = {.valid = CFS_SET_SIZE};
		struct cfs_ns_zero zero;
		uint64_t units = 1 + rand_r(&seed) % 2;

		snprintf(name, sizeof(name), "w%d.%d", w->id, r);
		cr_assert_eq(cfs_ns_create_open(fs, w->dir, name, 0600, 0, 0, &a, &in), 0);
		write_sim(in, 0, units * UNIT);
		write_sim(in, units * UNIT + 512 * (rand_r(&seed) % 64), 512);
		if (r % 3 == 0) {
			s.size_bytes = (uint64_t)(rand_r(&seed) % (int)(units * UNIT));
			cr_assert_eq(cfs_ns_setattr(fs, a.ino, &s, &a, &zero), 0);
			if (zero.count)
				cfs_ns_io_end(fs, zero.inode, zero.io_gen);
		}
		if (r % 4 == 1) {
			cr_assert_eq(cfs_ns_fallocate(fs, a.ino,
						      FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
						      1000, UNIT + 3000, &zero),
				     0);
			if (zero.count)
				cfs_ns_io_end(fs, zero.inode, zero.io_gen);
		}
		if (r % 5 == 2)
			cr_assert_eq(cfs_ns_setxattr(fs, a.ino, "user.r", name, strlen(name), 0),
				     0);
		{
			/* Log volume, so the small region compacts often. */
			char blob[6000];

			memset(blob, r & 0xff, sizeof(blob));
			cr_assert_eq(
				cfs_ns_setxattr(fs, w->dir, "user.blob", blob, sizeof(blob), 0), 0);
		}
		cfs_ns_release(fs, in);
		cfs_ns_forget(fs, a.ino, 1);
		if (r % 2) {
			snprintf(to, sizeof(to), "moved.%d.%d", w->id, r);
			cr_assert_eq(cfs_ns_rename(fs, w->dir, name, w->dir, to, 0), 0);
		}
		if (r % 3 == 2) {
			/* r - 2 was renamed if it is odd. */
			if ((r - 2) % 2)
				snprintf(name, sizeof(name), "moved.%d.%d", w->id, r - 2);
			else
				snprintf(name, sizeof(name), "w%d.%d", w->id, r - 2);
			cr_assert_eq(cfs_ns_unlink(fs, w->dir, name), 0, "%s", name);
		}
	}
	atomic_fetch_sub(w->running, 1);
	return NULL;
}

static void setup_stress(void)
{
	open_target(NULL);
	format_store(CFS_META_MIN_BYTES, 0); /* small: many snapshots */
	mount_fs();
}

Test(journal, snapshots_under_concurrent_mutation_then_crash, .init = setup_stress,
     .fini = teardown, .timeout = 300)
{
	enum { THREADS = 4 };
	struct worker w[THREADS];
	pthread_t t[THREADS];
	struct cfs_journal_stat st0, st1;
	char *before;
	atomic_int running = THREADS;

	cfs_journal_stat(fs->journal, &st0);
	for (int i = 0; i < THREADS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "d%d", i);
		w[i] = (struct worker){mk(CFS_ROOT_INO, name, S_IFDIR | 0755), i, 100, &running};
		pthread_create(&t[i], NULL, worker_thread, &w[i]);
	}
	/* Commits (and the snapshots they trigger) race the workers. */
	while (atomic_load(&running) > 0) {
		struct timespec ts = {0, 200000};

		cr_assert_eq(cfs_journal_commit_sync(fs), 0);
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cfs_journal_stat(fs->journal, &st1);
	cr_assert_gt(st1.snapshots, st0.snapshots, "no snapshot happened during the run");
	before = dump();
	crash_and_remount();
	assert_dump(before);
	remount();
	assert_dump(before);
	release(before);
}

/* ---- the same on an image file through io_uring (O_DIRECT) ----------------------- */

Test(journal, image_file_on_uring, .fini = NULL, .timeout = 120)
{
	char path[] = "/var/tmp/chunkfs-test-journal.XXXXXX";
	struct cfs_io_config cfg = {.backend = "uring", .dio = CFS_DIO_OPTIONAL};
	char *before;
	int fd = mkstemp(path);
	int ret;

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)STORE_BYTES), 0);
	close(fd);
	cfg.path = path;
	ret = cfs_io_open(&cfg, &io);
	if (ret) {
		unlink(path);
		cr_skip_test("io_uring backend unavailable here: %s", strerror(-ret));
	}
	format_store(0, 0);
	mount_fs();
	build_tree();
	before = dump();
	remount();
	assert_dump(before);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	crash_and_remount();
	assert_dump(before);
	release(before);
	cr_assert_eq(cfs_fs_close(fs), 0);
	fs = NULL;
	cfs_io_close(io);
	unlink(path);
}

/* ---- a full metadata region: ENOSPC, never read-only, room again after deletes -- */

Test(journal, metadata_full_is_enospc_then_recovers, .init = setup_small_meta, .fini = teardown)
{
	static char value[60000];
	char name[32];
	struct cfs_attr a;
	int files = 0, ret = 0;

	memset(value, 0x33, sizeof(value));
	while (files < 200) {
		uint64_t f;

		snprintf(name, sizeof(name), "f%d", files);
		ret = cfs_ns_mknod(fs, CFS_ROOT_INO, name, S_IFREG | 0600, 0, 0, 0, &a);
		if (ret)
			break;
		f = a.ino;
		cfs_ns_forget(fs, f, 1);
		files++;
		ret = cfs_ns_setxattr(fs, f, "user.v", value, sizeof(value), 0);
		if (ret)
			break;
		cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	}
	cr_assert_eq(ret, -ENOSPC, "filled %d files without ENOSPC (%d)", files, ret);
	cr_assert_not(cfs_fs_is_readonly(fs));
	cr_assert(cfs_journal_meta_full(fs->journal));
	/* Deleting makes room once the deletion is committed. */
	for (int i = 0; i < files; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, name), 0);
	}
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cr_assert_not(cfs_journal_meta_full(fs->journal));
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, "again", S_IFREG | 0600, 0, 0, 0, &a), 0);
	remount();
	cr_assert_eq(cfs_ns_lookup(fs, CFS_ROOT_INO, "again", &a), 0);
}

/* ---- power loss in the middle of commits, many times ------------------------------ */

static void commit_ignored(int res, void *arg)
{
	(void)res;
	(void)arg;
}

Test(journal, power_loss_mid_commit_fuzz, .init = setup_fault, .fini = teardown, .timeout = 300)
{
	enum { ROUNDS = 20, PER_ROUND = 40 }; /* 800 units: the store holds ~950 */
	static bool acked[ROUNDS * PER_ROUND];
	unsigned seed = 11;
	char name[32];
	struct cfs_attr a;

	for (int round = 0; round < ROUNDS; round++) {
		uint64_t dir;

		snprintf(name, sizeof(name), "r%d", round);
		cr_assert_eq(cfs_ns_mkdir(fs, CFS_ROOT_INO, name, 0755, 0, 0, &a), 0);
		dir = a.ino;
		cfs_ns_forget(fs, dir, 1);
		for (int i = 0; i < PER_ROUND; i++) {
			struct cfs_inode *in;

			snprintf(name, sizeof(name), "f%d", i);
			cr_assert_eq(cfs_ns_create_open(fs, dir, name, 0600, 0, 0, &a, &in), 0);
			write_sim(in, 0, (1 + rand_r(&seed) % 3) * 4096);
			cfs_ns_release(fs, in);
			cfs_ns_forget(fs, a.ino, 1);
			/* The first half is acknowledged durable. */
			if (i == PER_ROUND / 2 - 1) {
				cr_assert_eq(cfs_journal_commit_sync(fs), 0);
				for (int k = 0; k < PER_ROUND / 2; k++)
					acked[round * PER_ROUND + k] = true;
			}
		}
		/* The rest is being committed when the power goes. */
		cr_assert_eq(cfs_journal_commit_async(fs, commit_ignored, NULL), 0);
		{
			struct timespec ts = {0, (long)(rand_r(&seed) % 300) * 1000};

			nanosleep(&ts, NULL);
		}
		/* From here the device answers nothing; then the cache is lost,
		 * torn per physical sector. */
		cr_assert_eq(cfs_io_fault_arm(io, "volatile=1,every=1,err=EIO"), 0);
		cr_assert_geq(cfs_io_fault_crash(io, true), 0);
		cfs_fs_abandon(fs);
		fs = NULL;
		cr_assert_eq(cfs_io_fault_arm(io, "volatile=1,seed=3"), 0);
		mount_fs();
		/* Every acknowledged create is there, with its data. */
		for (int r = 0; r <= round; r++) {
			struct cfs_attr d;

			snprintf(name, sizeof(name), "r%d", r);
			cr_assert_eq(cfs_ns_lookup(fs, CFS_ROOT_INO, name, &d), 0, "%s", name);
			for (int k = 0; k < PER_ROUND; k++) {
				int ret;

				snprintf(name, sizeof(name), "f%d", k);
				ret = cfs_ns_lookup(fs, d.ino, name, &a);
				if (acked[r * PER_ROUND + k]) {
					cr_assert_eq(ret, 0, "round %d lost acknowledged %s", r,
						     name);
					cr_assert_geq(a.size_bytes, 4096);
					cr_assert_eq(a.blocks_512, UNIT / 512);
				}
				if (ret == 0) {
					/* Durable now if whole: a background commit may
					 * have logged the create before the write that
					 * followed it, and the crash took the write. */
					if (a.size_bytes >= 4096 && a.blocks_512 == UNIT / 512)
						acked[r * PER_ROUND + k] = true;
					cfs_ns_forget(fs, a.ino, 1);
				}
			}
			cfs_ns_forget(fs, d.ino, 1);
		}
	}
}

/* ---- written runs (incompat WRITTEN_RUNS) and stores without them ------------------ */

struct snap_count {
	uint64_t written;     /* EXTENT_WRITTEN records */
	uint64_t written_run; /* EXTENT_WRITTEN_RUN records */
	uint64_t units_in_runs;
};

static int count_snap_record(const struct cfs_log_record *rec, void *arg)
{
	struct snap_count *c = arg;
	const uint8_t *p = rec->payload;

	if (rec->type == CFS_LOG_EXTENT_WRITTEN)
		c->written++;
	if (rec->type == CFS_LOG_EXTENT_WRITTEN_RUN) {
		uint64_t count = 0;

		c->written_run++;
		for (int i = 7; i >= 0; i--)
			count = count << 8 | p[24 + i];
		c->units_in_runs += count;
	}
	return 0;
}

/* Close cleanly, then count the written-state records of the snapshot the
 * superblock points at, and mount again. */
static struct snap_count close_and_count(void)
{
	struct snap_count c = {0};
	uint8_t area[8192];
	struct cfs_sb sb;
	struct cfs_snap snap;
	struct cfs_log_walk_result res;
	const char *why = NULL;
	uint8_t *buf;
	uint32_t len;
	int slot;

	cr_assert_eq(cfs_fs_close(fs), 0);
	fs = NULL;
	io_read(0, area, sizeof(area));
	cr_assert_geq(cfs_sb_pick(area, area + 4096, &sb, &slot, NULL), 0);
	len = (uint32_t)((sb.meta_snap_length_bytes + 4095) & ~4095ull);
	buf = malloc(len);
	io_read(cfs_sb_half_offset_bytes(&sb, sb.meta_active_half), buf, len);
	cr_assert_eq(
		cfs_snap_decode(buf, sb.meta_snap_length_bytes, cfs_log_seed(sb.uuid), &snap, &why),
		0, "%s", why);
	cfs_log_walk(snap.body, snap.body_length_bytes, 0, cfs_log_seed(sb.uuid), count_snap_record,
		     &c, &res);
	free(buf);
	mount_fs();
	return c;
}

/* A file of 600 units written whole, plus one partly written unit. */
static char *write_big_file(void)
{
	uint64_t f = mk(CFS_ROOT_INO, "big", S_IFREG | 0600);
	struct cfs_inode *in;

	cr_assert_eq(cfs_ns_open(fs, f, &in), 0);
	write_sim(in, 0, 600 * UNIT);
	write_sim(in, 600 * UNIT + 4096, 4096);
	cfs_ns_release(fs, in);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	return dump();
}

/* A second file written whole after the snapshot, committed, then a crash:
 * its written-state comes back from the log. */
static void written_after_snapshot_survive_a_crash(void)
{
	uint64_t f = mk(CFS_ROOT_INO, "more", S_IFREG | 0600);
	struct cfs_inode *in;
	char *before, *after;

	cr_assert_eq(cfs_ns_open(fs, f, &in), 0);
	write_sim(in, 0, 3 * UNIT);
	cfs_ns_release(fs, in);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	before = dump();
	crash_and_remount();
	after = dump();
	assert_same(before, after);
	release(before);
	release(after);
}

Test(journal, snapshot_holds_runs_of_written_units, .init = setup, .fini = teardown)
{
	char *before = write_big_file(), *after;
	struct snap_count c = close_and_count();

	/* A few run records for the 600 units (the map may cut a run at a
	 * leaf), one bitmap record for the partial unit. */
	cr_assert_geq(c.written_run, 1);
	cr_assert_leq(c.written_run, 6, "%llu run records", (unsigned long long)c.written_run);
	cr_assert_eq(c.units_in_runs, 600);
	cr_assert_eq(c.written, 1);
	after = dump();
	assert_same(before, after);
	release(before);
	release(after);
	written_after_snapshot_survive_a_crash();
}

static void setup_no_runs(void)
{
	store_incompat = 0;
	setup();
}

static void teardown_no_runs(void)
{
	teardown();
	store_incompat = CFS_FEAT_INCOMPAT_WRITTEN_RUNS;
}

Test(journal, store_without_written_runs_gets_unit_records, .init = setup_no_runs,
     .fini = teardown_no_runs)
{
	char *before = write_big_file(), *after;
	struct snap_count c = close_and_count();

	/* What chunkfs before the feature reads: one record per unit. */
	cr_assert_eq(c.written_run, 0);
	cr_assert_eq(c.written, 601);
	cr_assert_eq(fs->sb.incompat, 0);
	after = dump();
	assert_same(before, after);
	release(before);
	release(after);
	written_after_snapshot_survive_a_crash();
}

/* ---- pieces (incompat PIECES): records, replay, snapshots, mount, frees ------------- */

static void setup_pieces(void)
{
	store_incompat = CFS_FEAT_INCOMPAT_WRITTEN_RUNS | CFS_FEAT_INCOMPAT_PIECES;
	setup();
}

/* Map file unit 0 of in to a new piece of `bytes`, as the namespace does:
 * the allocator's piece, the map, and one logged transaction. */
static struct cfs_extent_loc map_piece(struct cfs_inode *in, uint32_t bytes)
{
	struct cfs_extent_loc loc = {0, 0, bytes};
	struct cfs_jrec_piece rec;
	struct cfs_txn txn;

	cr_assert_eq(cfs_pool_get_piece(fs->pool, 0, bytes, false, &loc.store_unit,
					&loc.piece_offset_bytes),
		     0);
	rec = (struct cfs_jrec_piece){in->ino, 0, loc.store_unit, loc.piece_offset_bytes, bytes};
	pthread_mutex_lock(&in->lock);
	cr_assert_eq(cfs_extent_map_piece(in->map, 0, &loc), 0);
	cfs_txn_begin(&txn, fs->journal);
	cfs_txn_piece(&txn, &rec);
	cfs_txn_end(&txn);
	pthread_mutex_unlock(&in->lock);
	return loc;
}

static uint64_t piece_bytes_used(void)
{
	struct cfs_pieces_stat st;

	cfs_pool_piece_stat(fs->pool, &st);
	return st.used_bytes;
}

Test(journal, pieces_survive_crash_snapshot_and_unlink, .init = setup_pieces,
     .fini = teardown_no_runs)
{
	uint64_t f = mk(CFS_ROOT_INO, "small", S_IFREG | 0600);
	uint64_t g = mk(CFS_ROOT_INO, "tiny", S_IFREG | 0600);
	struct cfs_extent_loc lf, lg;
	struct cfs_inode *in;
	struct cfs_attr a;
	char *before;

	cr_assert_eq(cfs_ns_open(fs, f, &in), 0);
	lf = map_piece(in, 16 * 1024);
	write_sim(in, 0, 8192); /* half of it: a bitmap */
	cfs_ns_release(fs, in);
	cr_assert_eq(cfs_ns_open(fs, g, &in), 0);
	lg = map_piece(in, 4096);
	write_sim(in, 0, 4096); /* all of it */
	cfs_ns_release(fs, in);
	cr_assert_eq(lf.store_unit, lg.store_unit); /* one piece unit */
	cr_assert_eq(cfs_ns_getattr(fs, f, &a), 0);
	cr_assert_eq(a.blocks_512, 16 * 1024 / 512);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	before = dump();
	cr_assert(strstr(before, "piece "), "%s", before);
	/* From the log. */
	crash_and_remount();
	assert_dump(before);
	cr_assert_eq(piece_bytes_used(), 20 * 1024);
	cr_assert_eq(cfs_pool_unit_state(fs->pool, lf.store_unit), CFS_ALLOC_STATE_USED);
	/* From a snapshot. */
	remount();
	assert_dump(before);
	cr_assert_eq(piece_bytes_used(), 20 * 1024);
	/* Unlinked: busy until the unlink is durable, then the empty unit
	 * goes back. */
	cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "small"), 0);
	cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "tiny"), 0);
	cr_assert_eq(piece_bytes_used(), 0);
	cr_assert_eq(cfs_pool_unit_state(fs->pool, lf.store_unit), CFS_ALLOC_STATE_USED);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cr_assert_eq(cfs_pool_unit_state(fs->pool, lf.store_unit), CFS_ALLOC_STATE_FREE);
	release(before);
}

Test(journal, piece_records_refused_without_the_feature, .init = setup, .fini = teardown)
{
	uint64_t f = mk(CFS_ROOT_INO, "f", S_IFREG | 0600);
	struct cfs_jrec_piece rec = {f, 0, 3, 0, 4096};
	struct cfs_txn txn;
	char err[256] = "";

	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cfs_txn_begin(&txn, fs->journal);
	cfs_txn_piece(&txn, &rec);
	cfs_txn_end(&txn);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cfs_fs_abandon(fs);
	fs = NULL;
	cr_assert_eq(cfs_fs_open(io, &opts, &fs, err, sizeof(err)), -EUCLEAN);
	cr_assert(strstr(err, "pieces feature"), "%s", err);
}

Test(journal, piece_records_that_can_never_be_valid, .init = setup_pieces, .fini = teardown_no_runs)
{
	uint64_t f = mk(CFS_ROOT_INO, "f", S_IFREG | 0600);
	struct cfs_jrec_piece bad[] = {
		{f, 0, 3, 4096, 8192},	      /* not aligned to its size */
		{f, 0, 3, 0, 2048},	      /* below 4 KiB */
		{f, 0, 3, 0, UNIT},	      /* a whole unit */
		{f, 0, 1ull << 40, 0, 4096},  /* beyond the data region */
		{f + 100, 0, 3, 0, 3 * 4096}, /* not a power of two, no such file */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cfs_txn txn;
		char err[256] = "";

		if (!fs)
			mount_fs();
		cfs_txn_begin(&txn, fs->journal);
		cfs_txn_piece(&txn, &bad[i]);
		cfs_txn_end(&txn);
		cr_assert_eq(cfs_journal_commit_sync(fs), 0);
		cfs_fs_abandon(fs);
		fs = NULL;
		cr_assert_eq(cfs_fs_open(io, &opts, &fs, err, sizeof(err)), -EUCLEAN, "record %zu",
			     i);
		cr_assert(strstr(err, "piece") || strstr(err, "data region"), "%zu: %s", i, err);
		/* The store stays as it was: format again for the next. */
		fs = NULL;
		format_store(0, 0);
	}
	mount_fs();
}

Test(journal, overlapping_pieces_refuse_the_mount, .init = setup_pieces, .fini = teardown_no_runs)
{
	uint64_t f = mk(CFS_ROOT_INO, "f", S_IFREG | 0600);
	uint64_t g = mk(CFS_ROOT_INO, "g", S_IFREG | 0600);
	struct cfs_jrec_piece a = {f, 0, 3, 0, 8192}, b = {g, 0, 3, 4096, 4096};
	struct cfs_jrec_extent whole = {g, 0, 3, 1};
	struct cfs_txn txn;
	char err[256] = "";

	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cfs_txn_begin(&txn, fs->journal);
	cfs_txn_piece(&txn, &a);
	cfs_txn_piece(&txn, &b);
	cfs_txn_end(&txn);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cfs_fs_abandon(fs);
	fs = NULL;
	cr_assert_eq(cfs_fs_open(io, &opts, &fs, err, sizeof(err)), -EUCLEAN);
	cr_assert(strstr(err, "pieces"), "%s", err);
	/* A unit that holds a piece and is mapped whole by another file. */
	format_store(0, 0);
	mount_fs();
	f = mk(CFS_ROOT_INO, "f", S_IFREG | 0600);
	g = mk(CFS_ROOT_INO, "g", S_IFREG | 0600);
	a.ino = f;
	whole.ino = g;
	cfs_txn_begin(&txn, fs->journal);
	cfs_txn_piece(&txn, &a);
	cfs_txn_extent(&txn, CFS_LOG_EXTENT_MAP, &whole);
	cfs_txn_end(&txn);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cfs_fs_abandon(fs);
	fs = NULL;
	cr_assert_eq(cfs_fs_open(io, &opts, &fs, err, sizeof(err)), -EUCLEAN);
	cr_assert(strstr(err, "mapped by two files"), "%s", err);
	format_store(0, 0);
	mount_fs();
}

/* ---- the namespace's use of pieces: small files' first writes, growth ----------- */

static int copy_result;

/* cfs_ns_copy_fn as the data path's: move the bytes on the store. */
static int copy_on_store(void *arg, uint64_t from_bytes, uint64_t to_bytes, uint32_t bytes)
{
	uint8_t *buf = malloc(bytes);

	(void)arg;
	if (copy_result) {
		free(buf);
		return copy_result;
	}
	io_read(from_bytes, buf, bytes);
	io_write(to_bytes, buf, bytes);
	free(buf);
	return 0;
}

/* Write `length` bytes of `seed` at offset through the map, as the data
 * path does after cfs_ns_map_for_write, and mark them written. */
static void write_bytes(struct cfs_inode *in, uint64_t offset, uint32_t length, uint8_t seed)
{
	uint8_t *buf = malloc(length);
	uint64_t pos = offset;

	for (uint32_t i = 0; i < length; i++)
		buf[i] = (uint8_t)(seed + i * 7);
	unsigned io_gen = cfs_ns_io_begin(in);
	while (pos < offset + length) {
		struct cfs_extent_run run;

		cr_assert_eq(cfs_extent_lookup(in->map, pos, offset + length - pos, &run), 0);
		cr_assert(run.mapped, "offset %llu unmapped", (unsigned long long)pos);
		io_write(run.device_offset_bytes, buf + (pos - offset), (uint32_t)run.length_bytes);
		cr_assert_eq(cfs_extent_mark_written(in->map, pos, run.length_bytes,
						     run.device_offset_bytes),
			     0);
		pos += run.length_bytes;
	}
	cfs_ns_write_done(fs, in, offset, length);
	cfs_ns_io_end(fs, in, io_gen);
	free(buf);
}

/* The bytes at offset read back through the map are seed's. */
static void check_bytes(struct cfs_inode *in, uint64_t offset, uint32_t length, uint8_t seed)
{
	uint8_t *buf = malloc(length);
	uint64_t pos = offset;

	while (pos < offset + length) {
		struct cfs_extent_run run;

		cr_assert_eq(cfs_extent_lookup(in->map, pos, offset + length - pos, &run), 0);
		cr_assert(run.mapped);
		io_read(run.device_offset_bytes, buf + (pos - offset), (uint32_t)run.length_bytes);
		pos += run.length_bytes;
	}
	for (uint32_t i = 0; i < length; i++)
		cr_assert_eq(buf[i], (uint8_t)(seed + i * 7), "byte %u", i);
	free(buf);
}

static uint64_t piece_busy_bytes(void)
{
	struct cfs_pieces_stat st;

	cfs_pool_piece_stat(fs->pool, &st);
	return st.busy_bytes;
}

static struct cfs_extent_loc loc0(struct cfs_inode *in)
{
	struct cfs_extent_loc loc;

	cr_assert_eq(cfs_extent_unit_loc(in->map, 0, &loc), 0);
	return loc;
}

/* The space held back for the kernel's write-back (cfs_pool_set_held_back):
 * a new piece takes none of it while a unit of pieces has room, and a piece
 * grows into it only for the write-back. */
Test(journal, pieces_and_the_space_held_back, .init = setup_pieces, .fini = teardown_no_runs)
{
	uint64_t f = mk(CFS_ROOT_INO, "small", S_IFREG | 0600);
	uint64_t f2 = mk(CFS_ROOT_INO, "small2", S_IFREG | 0600);
	uint64_t g = mk(CFS_ROOT_INO, "chunk", S_IFREG | 0600);
	struct cfs_inode *in, *in2, *big;
	struct cfs_alloc_stat st;

	cr_assert_eq(cfs_ns_open(fs, f, &in), 0);
	cr_assert_eq(cfs_ns_open(fs, f2, &in2), 0);
	cr_assert_eq(cfs_ns_open(fs, g, &big), 0);
	cr_assert_eq(cfs_ns_map_for_write(fs, in, 0, 4096), 0);
	cr_assert_neq(loc0(in).piece_bytes, 0);
	cfs_pool_set_held_back(fs->pool, 8);
	cfs_pool_stat(fs->pool, &st);
	cr_assert_eq(cfs_ns_map_for_write(fs, big, 0, (st.free_units - 7) * UNIT), -ENOSPC);
	cr_assert_eq(cfs_ns_map_for_write(fs, big, 0, (st.free_units - 8) * UNIT), 0);
	cr_assert_eq(cfs_ns_map_for_write(fs, big, (st.free_units - 8) * UNIT, UNIT), -ENOSPC);
	cr_assert_eq(cfs_ns_map_for_write(fs, in2, 0, 4096), 0, "a piece beside the first");
	cr_assert_eq(loc0(in2).store_unit, loc0(in).store_unit);
	cr_assert_eq(cfs_ns_grow_pieces(fs, in, 0, UNIT, true, false, copy_on_store, NULL),
		     -ENOSPC);
	cr_assert_neq(loc0(in).piece_bytes, 0, "unchanged");
	cr_assert_eq(cfs_ns_grow_pieces(fs, in, 0, UNIT, true, true, copy_on_store, NULL), 0);
	cr_assert_eq(loc0(in).piece_bytes, 0, "a whole unit");
	cfs_pool_stat(fs->pool, &st);
	cr_assert_eq(st.free_units + st.busy_units, 7);
	cfs_ns_release(fs, in);
	cfs_ns_release(fs, in2);
	cfs_ns_release(fs, big);
}

Test(journal, small_files_get_pieces_that_grow_by_copy, .init = setup_pieces,
     .fini = teardown_no_runs)
{
	uint64_t f = mk(CFS_ROOT_INO, "small", S_IFREG | 0600);
	uint64_t g = mk(CFS_ROOT_INO, "chunk", S_IFREG | 0600);
	struct cfs_extent_loc first, second, third;
	struct cfs_inode *in;
	struct cfs_attr a;
	char *before;

	/* A first write of 4608 bytes: an 8 KiB piece. */
	cr_assert_eq(cfs_ns_open(fs, f, &in), 0);
	cr_assert_eq(cfs_ns_map_for_write(fs, in, 0, 4608), 0);
	first = loc0(in);
	cr_assert_eq(first.piece_bytes, 8192);
	write_bytes(in, 0, 4608, 1);
	cr_assert_eq(cfs_ns_getattr(fs, f, &a), 0);
	cr_assert_eq(a.blocks_512, 8192 / 512);
	/* Inside the piece: nothing to do. Past it: the piece must grow. */
	cr_assert_eq(cfs_ns_map_for_write(fs, in, 6000, 2192), 0);
	cr_assert_not(cfs_ns_pieces_must_grow(fs, in, 0, 8192, false));
	cr_assert_eq(cfs_ns_map_for_write(fs, in, 8192, 4096), -EXDEV);
	cr_assert(cfs_ns_pieces_must_grow(fs, in, 8192, 4096, false));
	cr_assert(cfs_ns_pieces_must_grow(fs, in, 0, 1, true));

	/* A copy that finds writes in flight changes nothing. */
	copy_result = -EBUSY;
	cr_assert_eq(cfs_ns_grow_pieces(fs, in, 8192, 4096, false, false, copy_on_store, NULL),
		     -EBUSY);
	copy_result = 0;
	cr_assert_eq(loc0(in).store_unit, first.store_unit);
	cr_assert_eq(loc0(in).piece_offset_bytes, first.piece_offset_bytes);
	cr_assert_eq(piece_bytes_used(), 8192);

	/* Grown to 16 KiB: the bytes moved, the written sectors kept. */
	cr_assert_eq(cfs_ns_grow_pieces(fs, in, 8192, 4096, false, false, copy_on_store, NULL), 0);
	second = loc0(in);
	cr_assert_eq(second.piece_bytes, 16384);
	cr_assert(second.store_unit != first.store_unit ||
		  second.piece_offset_bytes != first.piece_offset_bytes);
	check_bytes(in, 0, 4608, 1);
	cr_assert_eq(cfs_ns_map_for_write(fs, in, 8192, 4096), 0);
	write_bytes(in, 8192, 4096, 2);
	cr_assert_eq(cfs_ns_getattr(fs, f, &a), 0);
	cr_assert_eq(a.blocks_512, 16384 / 512);
	/* The old piece is busy until the switch is durable. */
	cr_assert_eq(piece_bytes_used(), 16384);
	cr_assert_eq(piece_busy_bytes(), 8192);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cr_assert_eq(piece_busy_bytes(), 0);

	/* From the log: the new place with its written sectors. */
	cfs_ns_release(fs, in);
	before = dump();
	crash_and_remount();
	assert_dump(before);
	release(before);
	cr_assert_eq(cfs_ns_open(fs, f, &in), 0);
	check_bytes(in, 0, 4608, 1);
	check_bytes(in, 8192, 4096, 2);

	/* Past half a unit: a whole unit, the pieces' unit given back. */
	cr_assert_eq(cfs_ns_map_for_write(fs, in, 30208, UNIT - 30208), -EXDEV);
	cr_assert_eq(
		cfs_ns_grow_pieces(fs, in, 30208, UNIT - 30208, false, false, copy_on_store, NULL),
		0);
	third = loc0(in);
	cr_assert_eq(third.piece_bytes, 0);
	cr_assert_eq(cfs_ns_map_for_write(fs, in, 30208, UNIT - 30208), 0);
	write_bytes(in, 30208, UNIT - 30208, 3);
	cr_assert_eq(cfs_extent_piece_count(in->map), 0);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cr_assert_eq(piece_bytes_used(), 0);
	cfs_ns_release(fs, in);
	before = dump();
	crash_and_remount();
	assert_dump(before);
	cr_assert_eq(cfs_ns_open(fs, f, &in), 0);
	check_bytes(in, 0, 4608, 1);
	check_bytes(in, 8192, 4096, 2);
	check_bytes(in, 30208, UNIT - 30208, 3);
	cfs_ns_release(fs, in);
	release(before);

	/* A file whose first write goes past half a unit, or fallocated: whole. */
	cr_assert_eq(cfs_ns_open(fs, g, &in), 0);
	cr_assert_eq(cfs_ns_fallocate(fs, g, 0, 0, 4096, NULL), 0);
	cr_assert_eq(loc0(in).piece_bytes, 0);
	cfs_ns_release(fs, in);
}
