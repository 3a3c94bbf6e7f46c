/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_namespace.c — every namespace operation and its errors on a RAM mount
 * (iopath "ram" backend, nothing persisted): names, lookups, hashed lookup
 * with thousands of names, readdir cookies under concurrent modification,
 * rename flags, unlink while open, truncate and punch freeing units (busy
 * until the commit), fallocate, SEEK_DATA/HOLE, xattrs, ENOSPC and recovery.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/meta/alloc.h"
#include "fs/meta/mount.h"
#include "fs/meta/namespace.h"
#include "fs/meta/pool.h"

#define UNIT (64u * 1024)

static struct cfs_io *io;
static struct cfs_fs *fs;

static void open_ram(uint64_t size_bytes)
{
	struct cfs_io_config cfg = {.backend = "ram", .size_bytes = size_bytes, .align_bytes = 512};
	struct cfs_fs_options opts = {.ram_alloc_unit_bytes = UNIT};
	char err[256] = "";

	cr_assert_eq(cfs_io_open(&cfg, &io), 0);
	cr_assert_eq(cfs_fs_open_ram(io, &opts, &fs, err, sizeof(err)), 0, "%s", err);
}

static void setup(void)
{
	open_ram(64u << 20);
}

static void setup_small(void)
{
	open_ram(16 * UNIT); /* 16 units */
}

static void teardown(void)
{
	cr_assert_eq(cfs_fs_close(fs), 0);
	cfs_io_close(io);
}

static uint64_t mkfile(uint64_t parent, const char *name)
{
	struct cfs_attr a;

	cr_assert_eq(cfs_ns_mknod(fs, parent, name, S_IFREG | 0644, 0, 1, 2, &a), 0, "%s", name);
	return a.ino;
}

static uint64_t mkdir_(uint64_t parent, const char *name)
{
	struct cfs_attr a;

	cr_assert_eq(cfs_ns_mkdir(fs, parent, name, 0755, 0, 0, &a), 0, "%s", name);
	return a.ino;
}

static int lookup(uint64_t parent, const char *name, struct cfs_attr *a)
{
	struct cfs_attr tmp;

	return cfs_ns_lookup(fs, parent, name, a ? a : &tmp);
}

static uint32_t nlink_of(uint64_t ino)
{
	struct cfs_attr a;

	cr_assert_eq(cfs_ns_getattr(fs, ino, &a), 0);
	return a.nlink;
}

/* What the data path does for a write: map, "write", mark written, done. */
static int write_sim(struct cfs_inode *inode, uint64_t offset, uint64_t length)
{
	uint64_t pos = offset;
	int ret;

	unsigned io_gen = cfs_ns_io_begin(inode);
	ret = cfs_ns_map_for_write(fs, inode, offset, length);
	while (!ret && pos < offset + length) {
		struct cfs_extent_run run;

		cr_assert_eq(cfs_extent_lookup(inode->map, pos, offset + length - pos, &run), 0);
		cr_assert(run.mapped);
		ret = cfs_extent_mark_written(inode->map, pos, run.length_bytes,
					      run.device_offset_bytes);
		pos += run.length_bytes;
	}
	if (!ret)
		cfs_ns_write_done(fs, inode, offset, length);
	cfs_ns_io_end(fs, inode, io_gen);
	return ret;
}

static struct cfs_alloc_stat alloc_stat(void)
{
	struct cfs_alloc_stat st;

	cfs_pool_stat(fs->pool, &st);
	return st;
}

/* ---- basics -------------------------------------------------------------- */

Test(namespace, root, .init = setup, .fini = teardown)
{
	struct cfs_attr a;

	cr_assert_eq(cfs_ns_getattr(fs, CFS_ROOT_INO, &a), 0);
	cr_assert(S_ISDIR(a.mode));
	cr_assert_eq(a.nlink, 2);
	cr_assert_eq(a.ino, CFS_ROOT_INO);
	cr_assert_eq(cfs_ns_lookup(fs, CFS_ROOT_INO, "..", &a), 0);
	cr_assert_eq(a.ino, CFS_ROOT_INO);
	cr_assert_eq(cfs_ns_getattr(fs, 999, &a), -ENOENT);
}

Test(namespace, create_lookup_errors, .init = setup, .fini = teardown)
{
	struct cfs_attr a, b;
	char name[300];
	uint64_t f = mkfile(CFS_ROOT_INO, "file");

	cr_assert_eq(lookup(CFS_ROOT_INO, "file", &a), 0);
	cr_assert_eq(a.ino, f);
	cr_assert(S_ISREG(a.mode));
	cr_assert_eq(a.uid, 1);
	cr_assert_eq(a.gid, 2);
	cr_assert_eq(a.nlink, 1);
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, "file", S_IFREG | 0644, 0, 0, 0, &b), -EEXIST);
	cr_assert_eq(lookup(CFS_ROOT_INO, "nope", NULL), -ENOENT);
	cr_assert_eq(lookup(f, "x", NULL), -ENOTDIR);
	cr_assert_eq(cfs_ns_mknod(fs, f, "x", S_IFREG, 0, 0, 0, &b), -ENOTDIR);
	cr_assert_eq(cfs_ns_mknod(fs, 12345, "x", S_IFREG, 0, 0, 0, &b), -ENOENT);
	memset(name, 'n', sizeof(name));
	name[256] = '\0';
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, name, S_IFREG, 0, 0, 0, &b), -ENAMETOOLONG);
	cr_assert_eq(lookup(CFS_ROOT_INO, name, NULL), -ENAMETOOLONG);
	name[255] = '\0';
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, name, S_IFREG, 0, 0, 0, &b), 0);
	cr_assert_eq(lookup(CFS_ROOT_INO, name, NULL), 0);
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, "", S_IFREG, 0, 0, 0, &b), -EINVAL);
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, ".", S_IFREG, 0, 0, 0, &b), -EINVAL);
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, "..", S_IFREG, 0, 0, 0, &b), -EINVAL);
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, "a/b", S_IFREG, 0, 0, 0, &b), -EINVAL);
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, "d", S_IFDIR | 0755, 0, 0, 0, &b), -EINVAL);
	cr_assert_eq(lookup(CFS_ROOT_INO, "", NULL), -EINVAL);
}

Test(namespace, special_files, .init = setup, .fini = teardown)
{
	struct cfs_attr a;

	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, "fifo", S_IFIFO | 0600, 0, 0, 0, &a), 0);
	cr_assert(S_ISFIFO(a.mode));
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, "sock", S_IFSOCK | 0600, 0, 0, 0, &a), 0);
	cr_assert(S_ISSOCK(a.mode));
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, "chr", S_IFCHR | 0600, 0x0103, 0, 0, &a), 0);
	cr_assert(S_ISCHR(a.mode));
	cr_assert_eq(a.rdev, 0x0103);
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, "blk", S_IFBLK | 0600, 0x0801, 0, 0, &a), 0);
	cr_assert(S_ISBLK(a.mode));
	cr_assert_eq(cfs_ns_mknod(fs, CFS_ROOT_INO, "plain", 0644, 0, 0, 0, &a), 0);
	cr_assert(S_ISREG(a.mode));
}

Test(namespace, nlookup_and_forget, .init = setup, .fini = teardown)
{
	uint64_t f = mkfile(CFS_ROOT_INO, "f");
	struct cfs_attr a;

	cr_assert_eq(lookup(CFS_ROOT_INO, "f", NULL), 0);
	cr_assert_eq(lookup(CFS_ROOT_INO, "f", NULL), 0);
	cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "f"), 0);
	/* Looked up three times (create + 2): alive until forgotten. */
	cr_assert_eq(cfs_ns_getattr(fs, f, &a), 0);
	cr_assert_eq(a.nlink, 0);
	cfs_ns_forget(fs, f, 2);
	cr_assert_eq(cfs_ns_getattr(fs, f, &a), 0);
	cfs_ns_forget(fs, f, 1);
	cr_assert_eq(cfs_ns_getattr(fs, f, &a), -ENOENT);
	cfs_ns_forget(fs, CFS_ROOT_INO, 1); /* unknown counts on root are harmless */
	cfs_ns_forget(fs, 424242, 1);
}

Test(namespace, mkdir_rmdir, .init = setup, .fini = teardown)
{
	uint64_t d = mkdir_(CFS_ROOT_INO, "d");
	uint64_t e = mkdir_(d, "e");
	struct cfs_attr a;

	cr_assert_eq(nlink_of(CFS_ROOT_INO), 3);
	cr_assert_eq(nlink_of(d), 3);
	cr_assert_eq(nlink_of(e), 2);
	cr_assert_eq(cfs_ns_lookup(fs, e, "..", &a), 0);
	cr_assert_eq(a.ino, d);
	mkfile(e, "f");
	cr_assert_eq(cfs_ns_rmdir(fs, d, "e"), -ENOTEMPTY);
	cr_assert_eq(cfs_ns_rmdir(fs, e, "f"), -ENOTDIR);
	cr_assert_eq(cfs_ns_unlink(fs, d, "e"), -EISDIR);
	cr_assert_eq(cfs_ns_rmdir(fs, d, "."), -EINVAL);
	cr_assert_eq(cfs_ns_rmdir(fs, d, ".."), -ENOTEMPTY);
	cr_assert_eq(cfs_ns_rmdir(fs, d, "zz"), -ENOENT);
	cr_assert_eq(cfs_ns_unlink(fs, e, "f"), 0);
	cr_assert_eq(cfs_ns_rmdir(fs, d, "e"), 0);
	cr_assert_eq(nlink_of(d), 2);
	/* A removed directory that is still looked up refuses new entries. */
	cr_assert_eq(cfs_ns_mknod(fs, e, "g", S_IFREG, 0, 0, 0, &a), -ENOENT);
	cr_assert_eq(cfs_ns_rmdir(fs, CFS_ROOT_INO, "d"), 0);
	cr_assert_eq(nlink_of(CFS_ROOT_INO), 2);
}

Test(namespace, setgid_directory, .init = setup, .fini = teardown)
{
	struct cfs_attr a;
	uint64_t d;

	cr_assert_eq(cfs_ns_mkdir(fs, CFS_ROOT_INO, "sg", 02775, 5, 77, &a), 0);
	d = a.ino;
	cr_assert_eq(cfs_ns_mknod(fs, d, "f", S_IFREG | 0644, 0, 9, 9, &a), 0);
	cr_assert_eq(a.gid, 77);
	cr_assert_eq(cfs_ns_mkdir(fs, d, "sub", 0755, 9, 9, &a), 0);
	cr_assert_eq(a.gid, 77);
	cr_assert(a.mode & S_ISGID);
}

Test(namespace, symlink_readlink, .init = setup, .fini = teardown)
{
	struct cfs_attr a;
	char buf[64], *long_target;
	uint64_t f = mkfile(CFS_ROOT_INO, "f");

	cr_assert_eq(cfs_ns_symlink(fs, CFS_ROOT_INO, "l", "/srv/chunks/rootdbs", 0, 0, &a), 0);
	cr_assert(S_ISLNK(a.mode));
	cr_assert_eq(a.size_bytes, 19);
	cr_assert_eq(cfs_ns_readlink(fs, a.ino, buf, sizeof(buf)), 19);
	cr_assert_eq(memcmp(buf, "/srv/chunks/rootdbs", 19), 0);
	cr_assert_eq(cfs_ns_readlink(fs, a.ino, buf, 4), 19);
	cr_assert_eq(cfs_ns_readlink(fs, f, buf, sizeof(buf)), -EINVAL);
	cr_assert_eq(cfs_ns_symlink(fs, CFS_ROOT_INO, "e", "", 0, 0, &a), -ENOENT);
	long_target = malloc(CFS_SYMLINK_MAX + 2);
	memset(long_target, 'x', CFS_SYMLINK_MAX + 1);
	long_target[CFS_SYMLINK_MAX + 1] = '\0';
	cr_assert_eq(cfs_ns_symlink(fs, CFS_ROOT_INO, "t", long_target, 0, 0, &a), -ENAMETOOLONG);
	long_target[CFS_SYMLINK_MAX] = '\0';
	cr_assert_eq(cfs_ns_symlink(fs, CFS_ROOT_INO, "t", long_target, 0, 0, &a), 0);
	free(long_target);
}

Test(namespace, hard_links, .init = setup, .fini = teardown)
{
	uint64_t f = mkfile(CFS_ROOT_INO, "f");
	uint64_t d = mkdir_(CFS_ROOT_INO, "d");
	struct cfs_attr a;

	cr_assert_eq(cfs_ns_link(fs, f, d, "g", &a), 0);
	cr_assert_eq(a.ino, f);
	cr_assert_eq(a.nlink, 2);
	cr_assert_eq(cfs_ns_link(fs, f, d, "g", &a), -EEXIST);
	cr_assert_eq(cfs_ns_link(fs, d, CFS_ROOT_INO, "dl", &a), -EPERM);
	cr_assert_eq(cfs_ns_link(fs, f, f, "x", &a), -ENOTDIR);
	cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "f"), 0);
	cr_assert_eq(nlink_of(f), 1);
	cr_assert_eq(lookup(d, "g", &a), 0);
	cr_assert_eq(a.ino, f);
}

/* ---- rename ---------------------------------------------------------------- */

Test(namespace, rename_basic_and_replace, .init = setup, .fini = teardown)
{
	uint64_t a_ino = mkfile(CFS_ROOT_INO, "a");
	uint64_t b_ino = mkfile(CFS_ROOT_INO, "b");
	struct cfs_attr a;

	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "a", CFS_ROOT_INO, "c", 0), 0);
	cr_assert_eq(lookup(CFS_ROOT_INO, "a", NULL), -ENOENT);
	cr_assert_eq(lookup(CFS_ROOT_INO, "c", &a), 0);
	cr_assert_eq(a.ino, a_ino);
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "c", CFS_ROOT_INO, "b", RENAME_NOREPLACE),
		     -EEXIST);
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "c", CFS_ROOT_INO, "b", 0), 0);
	cr_assert_eq(lookup(CFS_ROOT_INO, "b", &a), 0);
	cr_assert_eq(a.ino, a_ino);
	/* b's inode lost its last link; it lives while looked up (create). */
	cr_assert_eq(nlink_of(b_ino), 0);
	cfs_ns_forget(fs, b_ino, 1);
	cr_assert_eq(cfs_ns_getattr(fs, b_ino, &a), -ENOENT);
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "zz", CFS_ROOT_INO, "y", 0), -ENOENT);
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "b", CFS_ROOT_INO, "y", 0x80), -EINVAL);
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "b", CFS_ROOT_INO, "y",
				   RENAME_NOREPLACE | RENAME_EXCHANGE),
		     -EINVAL);
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "b", CFS_ROOT_INO, "y", RENAME_EXCHANGE),
		     -ENOENT);
	/* Two names of one inode: nothing happens. */
	cr_assert_eq(cfs_ns_link(fs, a_ino, CFS_ROOT_INO, "b2", &a), 0);
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "b", CFS_ROOT_INO, "b2", 0), 0);
	cr_assert_eq(lookup(CFS_ROOT_INO, "b", NULL), 0);
	cr_assert_eq(lookup(CFS_ROOT_INO, "b2", NULL), 0);
}

Test(namespace, rename_directories, .init = setup, .fini = teardown)
{
	uint64_t d1 = mkdir_(CFS_ROOT_INO, "d1");
	uint64_t d2 = mkdir_(CFS_ROOT_INO, "d2");
	uint64_t sub = mkdir_(d1, "sub");
	uint64_t deep = mkdir_(sub, "deep");
	uint64_t f = mkfile(CFS_ROOT_INO, "f");
	struct cfs_attr a;

	(void)deep;
	(void)f;
	/* Into its own subtree. */
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "d1", sub, "x", 0), -EINVAL);
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "d1", deep, "x", 0), -EINVAL);
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "d1", d1, "x", 0), -EINVAL);
	/* Type rules. */
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "d2", CFS_ROOT_INO, "f", 0), -ENOTDIR);
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "f", CFS_ROOT_INO, "d2", 0), -EISDIR);
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "d2", CFS_ROOT_INO, "d1", 0), -ENOTEMPTY);
	/* Move sub from d1 to d2: link counts and "..". */
	cr_assert_eq(cfs_ns_rename(fs, d1, "sub", d2, "moved", 0), 0);
	cr_assert_eq(nlink_of(d1), 2);
	cr_assert_eq(nlink_of(d2), 3);
	cr_assert_eq(cfs_ns_lookup(fs, sub, "..", &a), 0);
	cr_assert_eq(a.ino, d2);
	/* Replace an empty directory. */
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "d2", CFS_ROOT_INO, "d1", 0), 0);
	cr_assert_eq(nlink_of(CFS_ROOT_INO), 3);
	cr_assert_eq(nlink_of(d1), 0);
	cr_assert_eq(lookup(CFS_ROOT_INO, "d1", &a), 0);
	cr_assert_eq(a.ino, d2);
}

Test(namespace, rename_exchange, .init = setup, .fini = teardown)
{
	uint64_t d = mkdir_(CFS_ROOT_INO, "d");
	uint64_t e = mkdir_(CFS_ROOT_INO, "e");
	uint64_t f = mkfile(e, "f");
	struct cfs_attr a;

	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "d", e, "f", RENAME_EXCHANGE), 0);
	cr_assert_eq(lookup(CFS_ROOT_INO, "d", &a), 0);
	cr_assert_eq(a.ino, f);
	cr_assert_eq(lookup(e, "f", &a), 0);
	cr_assert_eq(a.ino, d);
	/* The directory moved under e: link counts follow. */
	cr_assert_eq(nlink_of(e), 3);
	cr_assert_eq(nlink_of(CFS_ROOT_INO), 3);
	cr_assert_eq(cfs_ns_lookup(fs, d, "..", &a), 0);
	cr_assert_eq(a.ino, e);
	/* Exchanging a directory with its own ancestor's entry. */
	cr_assert_eq(cfs_ns_rename(fs, CFS_ROOT_INO, "e", e, "f", RENAME_EXCHANGE), -EINVAL);
}

/* ---- lookup at scale, readdir ----------------------------------------------------- */

struct listing {
	char (*names)[32];
	uint64_t *cookies;
	int count;
	int limit;
	uint64_t last_cookie;
};

static int list_cb(void *arg, const char *name, size_t length, uint64_t ino, uint32_t mode,
		   uint64_t next, const struct cfs_attr *attr)
{
	struct listing *l = arg;

	(void)ino;
	(void)mode;
	(void)attr;
	if (l->limit && l->count >= l->limit)
		return 1;
	cr_assert_lt(length, 32);
	memcpy(l->names[l->count], name, length);
	l->names[l->count][length] = '\0';
	l->cookies[l->count] = next;
	l->count++;
	l->last_cookie = next;
	return 0;
}

Test(namespace, thousands_of_names, .init = setup, .fini = teardown)
{
	const int n = 5000;
	struct listing l = {0};
	char name[32];
	uint64_t d = mkdir_(CFS_ROOT_INO, "big");

	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "chunk.%06d", i);
		mkfile(d, name);
	}
	for (int i = 0; i < n; i++) {
		struct cfs_attr a;

		snprintf(name, sizeof(name), "chunk.%06d", i);
		cr_assert_eq(lookup(d, name, &a), 0, "%s", name);
	}
	cr_assert_eq(lookup(d, "chunk.x", NULL), -ENOENT);
	for (int i = 0; i < n; i += 2) {
		snprintf(name, sizeof(name), "chunk.%06d", i);
		cr_assert_eq(cfs_ns_unlink(fs, d, name), 0);
	}
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "chunk.%06d", i);
		cr_assert_eq(lookup(d, name, NULL), i % 2 ? 0 : -ENOENT);
	}
	l.names = calloc(n + 2, sizeof(*l.names));
	l.cookies = calloc(n + 2, sizeof(*l.cookies));
	cr_assert_eq(cfs_ns_readdir(fs, d, 0, false, list_cb, &l), n / 2 + 2);
	cr_assert_str_eq(l.names[0], ".");
	cr_assert_str_eq(l.names[1], "..");
	for (int i = 1; i < l.count; i++)
		cr_assert_gt(l.cookies[i], l.cookies[i - 1]);
	free(l.names);
	free(l.cookies);
}

Test(namespace, readdir_paged_plus, .init = setup, .fini = teardown)
{
	struct listing l = {0};
	uint64_t d = mkdir_(CFS_ROOT_INO, "d");
	uint64_t offset = 0;
	int rounds = 0, got;
	struct cfs_attr a;
	uint64_t f = mkfile(d, "f0");

	for (int i = 1; i < 10; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		mkfile(d, name);
	}
	l.names = calloc(16, sizeof(*l.names));
	l.cookies = calloc(16, sizeof(*l.cookies));
	do {
		int before = l.count;

		l.limit = before + 3;
		got = cfs_ns_readdir(fs, d, offset, true, list_cb, &l);
		cr_assert_geq(got, 0);
		offset = l.last_cookie;
		rounds++;
		cr_assert_eq(got, l.count - before);
	} while (got > 0);
	cr_assert_eq(l.count, 12);
	cr_assert_eq(rounds, 5);
	/* plus: each entry counted as a lookup (create gave 1). */
	cfs_ns_forget(fs, f, 1);
	cr_assert_eq(cfs_ns_unlink(fs, d, "f0"), 0);
	cr_assert_eq(cfs_ns_getattr(fs, f, &a), 0);
	cfs_ns_forget(fs, f, 1);
	cr_assert_eq(cfs_ns_getattr(fs, f, &a), -ENOENT);
	cr_assert_eq(cfs_ns_readdir(fs, f, 0, false, list_cb, &l), -ENOENT);
	free(l.names);
	free(l.cookies);
}

struct churn {
	uint64_t dir;
	atomic_bool stop;
	atomic_int rounds; /* read by the lister while the churn runs */
};

static void *churn_thread(void *p)
{
	struct churn *c = p;
	char name[32];
	struct cfs_attr a;

	while (!atomic_load(&c->stop)) {
		snprintf(name, sizeof(name), "tmp.%d", c->rounds % 50);
		if (cfs_ns_mknod(fs, c->dir, name, S_IFREG | 0600, 0, 0, 0, &a) == 0)
			cfs_ns_forget(fs, a.ino, 1);
		snprintf(name, sizeof(name), "tmp.%d", (c->rounds + 25) % 50);
		cfs_ns_unlink(fs, c->dir, name);
		c->rounds++;
	}
	return NULL;
}

Test(namespace, readdir_cookies_stable_under_concurrent_changes, .init = setup, .fini = teardown)
{
	const int stable = 400;
	struct churn c = {.rounds = 0};
	struct listing l = {0};
	pthread_t t;
	uint64_t offset = 0;
	int *seen = calloc(stable, sizeof(int));
	char name[32];
	int got;

	c.dir = mkdir_(CFS_ROOT_INO, "d");
	for (int i = 0; i < stable; i++) {
		snprintf(name, sizeof(name), "keep.%d", i);
		mkfile(c.dir, name);
	}
	l.names = calloc(4096, sizeof(*l.names));
	l.cookies = calloc(4096, sizeof(*l.cookies));
	atomic_store(&c.stop, false);
	pthread_create(&t, NULL, churn_thread, &c);
	/* A loaded machine may not run the churn before the listing is half
	 * done: list only once it has changed the directory. */
	for (int i = 0; i < 10000 && atomic_load(&c.rounds) == 0; i++)
		usleep(1000);
	do {
		int before = l.count;

		l.limit = before + 7; /* small pages: many resumptions */
		got = cfs_ns_readdir(fs, c.dir, offset, false, list_cb, &l);
		offset = l.last_cookie;
		usleep(100);
		cr_assert_lt(l.count, 4000);
		/* Entries created during the listing may appear; stop creating
		 * them half-way so the listing can reach its end. */
		if (l.count > stable / 2 && !atomic_load(&c.stop)) {
			atomic_store(&c.stop, true);
			pthread_join(t, NULL);
		}
	} while (got > 0);
	cr_assert_gt(c.rounds, 0);
	/* Every entry that existed throughout: exactly once. */
	for (int i = 0; i < l.count; i++) {
		int k;

		if (sscanf(l.names[i], "keep.%d", &k) == 1)
			seen[k]++;
	}
	for (int i = 0; i < stable; i++)
		cr_assert_eq(seen[i], 1, "keep.%d seen %d times", i, seen[i]);
	free(seen);
	free(l.names);
	free(l.cookies);
}

/* ---- attributes --------------------------------------------------------------------- */

Test(namespace, setattr, .init = setup, .fini = teardown)
{
	uint64_t f = mkfile(CFS_ROOT_INO, "f");
	struct cfs_setattr s = {0};
	struct cfs_attr a;

	s.valid = CFS_SET_MODE | CFS_SET_UID | CFS_SET_GID | CFS_SET_ATIME | CFS_SET_MTIME;
	s.mode = S_IFDIR | 04711; /* type bits ignored */
	s.uid = 10;
	s.gid = 20;
	s.atime_ns = 1000;
	s.mtime_ns = 2000;
	cr_assert_eq(cfs_ns_setattr(fs, f, &s, &a, NULL), 0);
	cr_assert_eq(a.mode, S_IFREG | 04711);
	cr_assert_eq(a.uid, 10);
	cr_assert_eq(a.gid, 20);
	cr_assert_eq(a.atime_ns, 1000);
	cr_assert_eq(a.mtime_ns, 2000);
	cr_assert_gt(a.ctime_ns, 2000);
	s.valid = CFS_SET_SIZE;
	s.size_bytes = 12345;
	cr_assert_eq(cfs_ns_setattr(fs, f, &s, &a, NULL), 0);
	cr_assert_eq(a.size_bytes, 12345);
	cr_assert_eq(a.blocks_512, 0); /* sparse */
	cr_assert_eq(cfs_ns_setattr(fs, CFS_ROOT_INO, &s, &a, NULL), -EISDIR);
	s.size_bytes = 1ull << 61;
	cr_assert_eq(cfs_ns_setattr(fs, f, &s, &a, NULL), -EFBIG);
	cr_assert_eq(cfs_ns_setattr(fs, 999, &s, &a, NULL), -ENOENT);
	cr_assert_eq(cfs_ns_set_page_size(fs, f, 2048), 0);
	cr_assert_eq(cfs_ns_set_page_size(fs, f, 3000), -EINVAL);
}

/* CFS_SET_KILL_SUIDGID (fs/fuse/proto_ext.h): suid always, sgid only with group
 * execute, never on directories; alone with nothing to clear, no change. */
Test(namespace, setattr_kill_suidgid, .init = setup, .fini = teardown)
{
	uint64_t f = mkfile(CFS_ROOT_INO, "f");
	struct cfs_setattr s = {0};
	struct cfs_attr a;
	int64_t ctime;

	s.valid = CFS_SET_MODE;
	s.mode = 06777;
	cr_assert_eq(cfs_ns_setattr(fs, f, &s, &a, NULL), 0);
	s.valid = CFS_SET_KILL_SUIDGID;
	cr_assert_eq(cfs_ns_setattr(fs, f, &s, &a, NULL), 0);
	cr_assert_eq(a.mode, S_IFREG | 0777);
	ctime = a.ctime_ns;
	cr_assert_eq(cfs_ns_setattr(fs, f, &s, &a, NULL), 0);
	cr_assert_eq(a.mode, S_IFREG | 0777);
	cr_assert_eq(a.ctime_ns, ctime, "a kill with nothing to clear changed ctime");

	s.valid = CFS_SET_MODE;
	s.mode = 06767; /* sgid without group execute: mandatory locking */
	cr_assert_eq(cfs_ns_setattr(fs, f, &s, &a, NULL), 0);
	s.valid = CFS_SET_KILL_SUIDGID | CFS_SET_UID; /* chown */
	s.uid = 42;
	cr_assert_eq(cfs_ns_setattr(fs, f, &s, &a, NULL), 0);
	cr_assert_eq(a.mode, S_IFREG | 02767);
	cr_assert_eq(a.uid, 42);

	cr_assert_eq(cfs_ns_mkdir(fs, CFS_ROOT_INO, "d", 06775, 0, 0, &a), 0);
	s.valid = CFS_SET_KILL_SUIDGID | CFS_SET_GID;
	s.gid = 7;
	cr_assert_eq(cfs_ns_setattr(fs, a.ino, &s, &a, NULL), 0);
	cr_assert_eq(a.mode & 07777, 06775);
	cr_assert_eq(a.gid, 7);
}

/* ---- space ------------------------------------------------------------------------------ */

Test(namespace, write_maps_contiguously, .init = setup, .fini = teardown)
{
	struct cfs_inode *in;
	struct cfs_attr a;
	struct cfs_extent_run run;
	bool w;

	cr_assert_eq(cfs_ns_create_open(fs, CFS_ROOT_INO, "chunk", 0600, 0, 0, &a, &in), 0);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(write_sim(in, (uint64_t)i * UNIT, UNIT), 0);
	cr_assert_eq(cfs_extent_lookup(in->map, 0, 8 * UNIT, &run), 0);
	cr_assert(run.mapped);
	cr_assert_eq(run.length_bytes, 8 * UNIT, "one contiguous run");
	cr_assert_eq(cfs_ns_getattr(fs, a.ino, &a), 0);
	cr_assert_eq(a.size_bytes, 8 * UNIT);
	cr_assert_eq(a.blocks_512, 8 * UNIT / 512);
	/* Partial write: only its sectors are written. */
	cr_assert_eq(write_sim(in, 10 * UNIT + 4096, 4096), 0);
	cr_assert_eq(cfs_extent_written_span(in->map, 10 * UNIT, UNIT, &w), 4096);
	cr_assert_not(w);
	cr_assert_eq(cfs_ns_seek(fs, in, 8 * UNIT, SEEK_DATA), 10 * UNIT + 4096);
	cr_assert_eq(cfs_ns_seek(fs, in, 10 * UNIT + 4096, SEEK_HOLE), 10 * UNIT + 8192);
	cr_assert_eq(cfs_ns_seek(fs, in, 0, 99), -EINVAL);
	cfs_ns_release(fs, in);
}

Test(namespace, truncate_frees_units_busy_until_commit, .init = setup_small, .fini = teardown)
{
	struct cfs_inode *in;
	struct cfs_attr a;
	struct cfs_setattr s = {.valid = CFS_SET_SIZE};
	struct cfs_ns_zero zero;
	int64_t su2, su3, su1;
	bool w;

	cr_assert_eq(cfs_ns_create_open(fs, CFS_ROOT_INO, "f", 0600, 0, 0, &a, &in), 0);
	cr_assert_eq(write_sim(in, 0, 4 * UNIT), 0);
	su1 = cfs_extent_unit_get(in->map, 1);
	su2 = cfs_extent_unit_get(in->map, 2);
	su3 = cfs_extent_unit_get(in->map, 3);
	/* Cut inside unit 1, inside a sector. */
	s.size_bytes = UNIT + 1000;
	cr_assert_eq(cfs_ns_setattr(fs, a.ino, &s, &a, &zero), 0);
	cr_assert_eq(a.size_bytes, UNIT + 1000);
	cr_assert_eq(cfs_extent_unit_get(in->map, 2), -1);
	cr_assert_eq(cfs_pool_unit_state(fs->pool, (uint64_t)su2), CFS_ALLOC_STATE_BUSY);
	cr_assert_eq(cfs_pool_unit_state(fs->pool, (uint64_t)su3), CFS_ALLOC_STATE_BUSY);
	/* The tail of unit 1 reads as zeros; the cut sector is reported. */
	cr_assert_eq(cfs_extent_written_span(in->map, UNIT + 1024, UNIT, &w), UNIT);
	cr_assert_not(w);
	cr_assert(cfs_extent_sector_written(in->map, UNIT + 512));
	cr_assert_eq(zero.count, 1);
	cr_assert_eq(zero.length_bytes[0], 24);
	cr_assert_eq(zero.device_offset_bytes[0], (uint64_t)su1 * UNIT + 1000);
	cr_assert_eq(zero.inode, in);
	cfs_ns_io_end(fs, zero.inode, zero.io_gen);
	/* Busy units are not handed out before the commit... */
	{
		struct cfs_inode *in2;
		struct cfs_attr b;

		cr_assert_eq(cfs_ns_create_open(fs, CFS_ROOT_INO, "g", 0600, 0, 0, &b, &in2), 0);
		cr_assert_eq(write_sim(in2, 0, UNIT), 0);
		cr_assert_neq(cfs_extent_unit_get(in2->map, 0), su2);
		cr_assert_neq(cfs_extent_unit_get(in2->map, 0), su3);
		cfs_ns_release(fs, in2);
	}
	/* ...and are free after it. */
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cr_assert_eq(cfs_pool_unit_state(fs->pool, (uint64_t)su2), CFS_ALLOC_STATE_FREE);
	cfs_ns_release(fs, in);
}

/* A file never idle (a busy database chunk, the mover's relocations): units
 * it unmaps come back once the I/O older than the unmap is done, though
 * newer I/O keeps arriving. */
Test(namespace, units_freed_under_io_come_back_on_a_busy_file, .init = setup_small,
     .fini = teardown)
{
	struct cfs_inode *in;
	struct cfs_attr a;
	struct cfs_setattr s = {.valid = CFS_SET_SIZE};
	struct cfs_ns_zero zero;
	unsigned old_gen, new_gen, newer_gen;
	int64_t su0;

	cr_assert_eq(cfs_ns_create_open(fs, CFS_ROOT_INO, "f", 0600, 0, 0, &a, &in), 0);
	cr_assert_eq(write_sim(in, 0, 4 * UNIT), 0);
	su0 = cfs_extent_unit_get(in->map, 0);
	/* A read that looked up the units is in flight while they go. */
	old_gen = cfs_ns_io_begin(in);
	s.size_bytes = 0;
	cr_assert_eq(cfs_ns_setattr(fs, a.ino, &s, &a, &zero), 0);
	cr_assert_eq(zero.count, 0);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cr_assert_eq(cfs_pool_unit_state(fs->pool, (uint64_t)su0), CFS_ALLOC_STATE_USED,
		     "freed under a reference older than the unmap");
	/* New I/O joins the other generation and stays in flight... */
	new_gen = cfs_ns_io_begin(in);
	cr_assert_neq(new_gen, old_gen);
	/* ...yet the end of the old one gives the units back. */
	cfs_ns_io_end(fs, in, old_gen);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cr_assert_eq(cfs_pool_unit_state(fs->pool, (uint64_t)su0), CFS_ALLOC_STATE_FREE);
	cr_assert_eq(alloc_stat().free_units, 16);

	/* Again, the other way round: units unmapped under new_gen's
	 * reference wait for it, not for one taken after the unmap. */
	cr_assert_eq(write_sim(in, 0, 2 * UNIT), 0);
	su0 = cfs_extent_unit_get(in->map, 0);
	cr_assert_eq(cfs_ns_setattr(fs, a.ino, &s, &a, &zero), 0);
	newer_gen = cfs_ns_io_begin(in);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cr_assert_eq(cfs_pool_unit_state(fs->pool, (uint64_t)su0), CFS_ALLOC_STATE_USED);
	cfs_ns_io_end(fs, in, new_gen);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cr_assert_eq(alloc_stat().free_units, 16, "waited for a reference newer than the unmap");
	cfs_ns_io_end(fs, in, newer_gen);
	cfs_ns_release(fs, in);
}

/* A full store whose only space is units a truncate freed under an older
 * I/O reference: an allocation says "coming" (-EAGAIN, the data path waits
 * without blocking that I/O), not -ENOSPC, and gets the units once the
 * reference ends. With nothing coming back, -ENOSPC. */
Test(namespace, full_store_with_units_coming_back_says_eagain, .init = setup_small,
     .fini = teardown)
{
	struct cfs_inode *in, *in2;
	struct cfs_attr a, b;
	struct cfs_setattr s = {.valid = CFS_SET_SIZE, .size_bytes = 0};
	struct cfs_ns_zero zero;
	unsigned gen;

	cr_assert_eq(cfs_ns_create_open(fs, CFS_ROOT_INO, "f", 0600, 0, 0, &a, &in), 0);
	cr_assert_eq(cfs_ns_create_open(fs, CFS_ROOT_INO, "g", 0600, 0, 0, &b, &in2), 0);
	cr_assert_eq(write_sim(in, 0, 16 * UNIT), 0);
	cr_assert_eq(cfs_ns_map_for_write(fs, in2, 0, UNIT), -ENOSPC, "nothing coming back");
	gen = cfs_ns_io_begin(in); /* a read of f in flight */
	cr_assert_eq(cfs_ns_setattr(fs, a.ino, &s, &a, &zero), 0);
	cr_assert_eq(cfs_ns_map_for_write(fs, in2, 0, 2 * UNIT), -EAGAIN);
	cr_assert_eq(cfs_ns_fallocate(fs, b.ino, 0, 0, 2 * UNIT, NULL), -EAGAIN);
	cfs_ns_io_end(fs, in, gen);
	cr_assert_eq(cfs_ns_map_for_write(fs, in2, 0, 2 * UNIT), 0);
	cr_assert_eq(cfs_ns_fallocate(fs, b.ino, 0, 2 * UNIT, 14 * UNIT, NULL), 0);
	cr_assert_eq(cfs_ns_map_for_write(fs, in, 0, UNIT), -ENOSPC, "full again");
	cfs_ns_release(fs, in);
	cfs_ns_release(fs, in2);
}

/* Space held back for the kernel's write-back (-o writeback_cache): writes
 * of the daemon's own and fallocate stop above it with -ENOSPC, statfs
 * leaves it out, and only cfs_ns_map_for_writeback takes it. */
Test(namespace, space_held_back_only_for_write_back, .init = setup_small, .fini = teardown)
{
	struct cfs_inode *in, *in2;
	struct cfs_attr a, b;
	struct cfs_ns_statfs st;

	cfs_pool_set_held_back(fs->pool, 4); /* a quarter of the 16 units */
	cfs_ns_statfs(fs, &st);
	cr_assert_eq(st.blocks_free, 16);
	cr_assert_eq(st.blocks_avail, 12);
	cr_assert_eq(cfs_ns_create_open(fs, CFS_ROOT_INO, "f", 0600, 0, 0, &a, &in), 0);
	cr_assert_eq(cfs_ns_create_open(fs, CFS_ROOT_INO, "g", 0600, 0, 0, &b, &in2), 0);
	cr_assert_eq(write_sim(in, 0, 12 * UNIT), 0);
	cfs_ns_statfs(fs, &st);
	cr_assert_eq(st.blocks_avail, 0);
	cr_assert_eq(cfs_ns_map_for_write(fs, in, 12 * UNIT, UNIT), -ENOSPC);
	cr_assert_eq(cfs_ns_map_for_write(fs, in2, 0, 100), -ENOSPC, "not even a piece");
	cr_assert_eq(cfs_ns_fallocate(fs, b.ino, 0, 0, UNIT, NULL), -ENOSPC);
	cr_assert_eq(cfs_ns_map_for_writeback(fs, in, 12 * UNIT, 3 * UNIT), 0);
	cr_assert_eq(cfs_ns_map_for_writeback(fs, in2, 0, 100), 0);
	cr_assert_eq(cfs_ns_map_for_writeback(fs, in, 15 * UNIT, UNIT), -ENOSPC, "all of it taken");
	cfs_ns_release(fs, in);
	cfs_ns_release(fs, in2);
}

Test(namespace, unlink_while_open, .init = setup_small, .fini = teardown)
{
	struct cfs_inode *in;
	struct cfs_attr a;
	uint64_t ino;

	cr_assert_eq(cfs_ns_create_open(fs, CFS_ROOT_INO, "f", 0600, 0, 0, &a, &in), 0);
	ino = a.ino;
	cr_assert_eq(write_sim(in, 0, 3 * UNIT), 0);
	cr_assert_eq(alloc_stat().used_units, 3);
	cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "f"), 0);
	cr_assert_eq(lookup(CFS_ROOT_INO, "f", NULL), -ENOENT);
	/* Still open and looked up: data stays. */
	cr_assert_eq(cfs_ns_getattr(fs, ino, &a), 0);
	cr_assert_eq(a.nlink, 0);
	cr_assert_eq(alloc_stat().used_units, 3);
	cr_assert_eq(write_sim(in, 3 * UNIT, UNIT), 0);
	cfs_ns_release(fs, in);
	cr_assert_eq(alloc_stat().used_units, 4, "still looked up");
	cfs_ns_forget(fs, ino, 1);
	cr_assert_eq(cfs_ns_getattr(fs, ino, &a), -ENOENT);
	cr_assert_eq(alloc_stat().used_units, 0);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cr_assert_eq(alloc_stat().free_units, 16);
}

/* open(O_TMPFILE): a file without a name, deleted at its last release and
 * forget unless link gave it its first name; only a linkable one may get
 * one, only once, and never a file that was unlinked. */
Test(namespace, tmpfile_without_a_name, .init = setup_small, .fini = teardown)
{
	uint64_t d = mkdir_(CFS_ROOT_INO, "d");
	uint64_t f = mkfile(CFS_ROOT_INO, "f");
	struct cfs_inode *in, *excl, *in2;
	struct cfs_attr a, dir0, dir1;
	uint64_t ino, excl_ino;

	cr_assert_eq(cfs_ns_getattr(fs, d, &dir0), 0);
	cr_assert_eq(cfs_ns_tmpfile_open(fs, d, S_IFREG | 0640, 7, 8, true, &a, &in), 0);
	ino = a.ino;
	cr_assert(S_ISREG(a.mode));
	cr_assert_eq(a.mode & 07777, 0640);
	cr_assert_eq(a.nlink, 0);
	cr_assert_eq(a.uid, 7);
	cr_assert_eq(a.gid, 8);
	cr_assert_eq(cfs_ns_getattr(fs, d, &dir1), 0);
	cr_assert_eq(dir1.mtime_ns, dir0.mtime_ns, "the directory changed");
	cr_assert_eq(dir1.nlink, 2);
	cr_assert_eq(cfs_ns_rmdir(fs, CFS_ROOT_INO, "d"), 0, "d holds no name");
	d = mkdir_(CFS_ROOT_INO, "d");
	cr_assert_eq(write_sim(in, 0, 2 * UNIT), 0);
	cr_assert_eq(alloc_stat().used_units, 2);

	/* Errors of the directory, as for a create. */
	cr_assert_eq(cfs_ns_tmpfile_open(fs, f, 0600, 0, 0, true, &a, &in2), -ENOTDIR);
	cr_assert_eq(cfs_ns_tmpfile_open(fs, 999, 0600, 0, 0, true, &a, &in2), -ENOENT);
	cr_assert_eq(cfs_ns_tmpfile_open(fs, d, 0600, 0, 0, true, &a, &in2), 0);
	cr_assert_eq(cfs_ns_rmdir(fs, CFS_ROOT_INO, "d"), 0);
	cr_assert_eq(cfs_ns_tmpfile_open(fs, d, 0600, 0, 0, true, &a, &excl), -ENOENT,
		     "a removed directory");
	cfs_ns_release(fs, in2);
	cfs_ns_forget(fs, a.ino, 1);
	cfs_ns_forget(fs, d, 1);

	/* Not linkable (O_EXCL): no name ever; deleted at release + forget. */
	cr_assert_eq(cfs_ns_tmpfile_open(fs, CFS_ROOT_INO, 0600, 0, 0, false, &a, &excl), 0);
	excl_ino = a.ino;
	cr_assert_eq(cfs_ns_link(fs, excl_ino, CFS_ROOT_INO, "x", &a), -ENOENT);
	cr_assert_eq(write_sim(excl, 0, UNIT), 0);
	cr_assert_eq(alloc_stat().used_units, 3);
	cfs_ns_release(fs, excl);
	cr_assert_eq(cfs_ns_getattr(fs, excl_ino, &a), 0, "still looked up");
	cfs_ns_forget(fs, excl_ino, 1);
	cr_assert_eq(cfs_ns_getattr(fs, excl_ino, &a), -ENOENT);
	cr_assert_eq(alloc_stat().used_units, 2);

	/* Linkable: named once, then an ordinary file. */
	cr_assert_eq(cfs_ns_link(fs, ino, CFS_ROOT_INO, "named", &a), 0);
	cr_assert_eq(a.ino, ino);
	cr_assert_eq(a.nlink, 1);
	cr_assert_eq(cfs_ns_link(fs, ino, CFS_ROOT_INO, "second", &a), 0);
	cr_assert_eq(a.nlink, 2);
	cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "second"), 0);
	cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "named"), 0);
	cr_assert_eq(cfs_ns_link(fs, ino, CFS_ROOT_INO, "again", &a), -ENOENT,
		     "unlinked after its first name: stays unlinked");
	cfs_ns_release(fs, in);
	cfs_ns_forget(fs, ino, 3);
	cr_assert_eq(cfs_ns_getattr(fs, ino, &a), -ENOENT);
	cr_assert_eq(alloc_stat().used_units, 0);

	/* A file unlinked while open cannot be named again either. */
	cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "f"), 0);
	cr_assert_eq(cfs_ns_link(fs, f, CFS_ROOT_INO, "f2", &a), -ENOENT);
}

Test(namespace, enospc_and_recovery_after_delete, .init = setup_small, .fini = teardown)
{
	struct cfs_inode *in, *in2;
	struct cfs_attr a, b;
	struct cfs_ns_statfs st;

	cr_assert_eq(cfs_ns_create_open(fs, CFS_ROOT_INO, "f", 0600, 0, 0, &a, &in), 0);
	cr_assert_eq(write_sim(in, 0, 16 * UNIT), 0);
	/* One file filling the store runs out of space, not out of map. */
	cr_assert_eq(write_sim(in, 16 * UNIT, 512), -ENOSPC);
	cr_assert_eq(cfs_ns_create_open(fs, CFS_ROOT_INO, "g", 0600, 0, 0, &b, &in2), 0);
	cr_assert_eq(write_sim(in2, 0, 512), -ENOSPC);
	cfs_ns_statfs(fs, &st);
	cr_assert_eq(st.blocks, 16);
	cr_assert_eq(st.blocks_free, 0);
	cr_assert_eq(st.block_bytes, UNIT);
	cfs_ns_release(fs, in);
	cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "f"), 0);
	cfs_ns_forget(fs, a.ino, 1);
	/* Freed units are busy; the allocation forces the commit itself. */
	cr_assert_eq(write_sim(in2, 0, 4 * UNIT), 0);
	cfs_ns_statfs(fs, &st);
	cr_assert_eq(st.blocks_free, 12);
	cfs_ns_release(fs, in2);
}

Test(namespace, fallocate, .init = setup, .fini = teardown)
{
	uint64_t f = mkfile(CFS_ROOT_INO, "f");
	struct cfs_inode *in;
	struct cfs_attr a;
	struct cfs_ns_zero zero;
	bool w;

	cr_assert_eq(cfs_ns_open(fs, f, &in), 0);
	cr_assert_eq(cfs_ns_fallocate(fs, f, FALLOC_FL_KEEP_SIZE, 0, 2 * UNIT, NULL), 0);
	cr_assert_eq(cfs_ns_getattr(fs, f, &a), 0);
	cr_assert_eq(a.size_bytes, 0);
	cr_assert_eq(a.blocks_512, 2 * UNIT / 512);
	cr_assert_eq(cfs_ns_fallocate(fs, f, 0, UNIT, 3 * UNIT, NULL), 0);
	cr_assert_eq(cfs_ns_getattr(fs, f, &a), 0);
	cr_assert_eq(a.size_bytes, 4 * UNIT);
	cr_assert_eq(a.blocks_512, 4 * UNIT / 512);
	/* Allocated but unwritten: reads as zeros, SEEK_DATA finds nothing. */
	cr_assert_eq(cfs_extent_written_span(in->map, 0, 4 * UNIT, &w), 4 * UNIT);
	cr_assert_not(w);
	cr_assert_eq(cfs_ns_seek(fs, in, 0, SEEK_DATA), -ENXIO);
	cr_assert_eq(write_sim(in, 0, 4 * UNIT), 0);
	/* Punch [UNIT/2 + 100, 3 UNIT + 700): unit 1, 2 freed; partial ends. */
	cr_assert_eq(cfs_ns_fallocate(fs, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      UNIT / 2 + 100, 5 * UNIT / 2 + 600, &zero),
		     0);
	cr_assert_eq(cfs_extent_unit_get(in->map, 1), -1);
	cr_assert_eq(cfs_extent_unit_get(in->map, 2), -1);
	cr_assert_geq(cfs_extent_unit_get(in->map, 0), 0);
	cr_assert_eq(zero.count, 2);
	cr_assert_eq(zero.length_bytes[0], 412);
	cr_assert_eq(zero.length_bytes[1], 188);
	cfs_ns_io_end(fs, zero.inode, zero.io_gen);
	cr_assert(cfs_extent_sector_written(in->map, UNIT / 2));
	cr_assert_not(cfs_extent_sector_written(in->map, UNIT / 2 + 512));
	cr_assert_not(cfs_extent_sector_written(in->map, 3 * UNIT));
	cr_assert(cfs_extent_sector_written(in->map, 3 * UNIT + 512));
	cr_assert_eq(cfs_ns_getattr(fs, f, &a), 0);
	cr_assert_eq(a.size_bytes, 4 * UNIT);
	cr_assert_eq(a.blocks_512, 2 * UNIT / 512);
	cr_assert_eq(cfs_ns_seek(fs, in, UNIT / 2, SEEK_HOLE), UNIT / 2 + 512);
	/* Other modes and bad arguments. */
	cr_assert_eq(cfs_ns_fallocate(fs, f, FALLOC_FL_COLLAPSE_RANGE, 0, UNIT, NULL), -EOPNOTSUPP);
	cr_assert_eq(cfs_ns_fallocate(fs, f, FALLOC_FL_PUNCH_HOLE, 0, UNIT, NULL), -EOPNOTSUPP);
	cr_assert_eq(cfs_ns_fallocate(fs, f, 0, 0, 0, NULL), -EINVAL);
	cr_assert_eq(cfs_ns_fallocate(fs, CFS_ROOT_INO, 0, 0, UNIT, NULL), -EISDIR);
	/* Three times the 64 MiB store: ENOSPC, as on ext4. One unit beyond
	 * what the map addresses (twice the store): EFBIG. Neither allocates
	 * nor resizes anything. */
	cr_assert_eq(cfs_ns_fallocate(fs, f, 0, 0, 3 * (64ull << 20), NULL), -ENOSPC);
	cr_assert_eq(cfs_ns_fallocate(fs, f, 0, 2 * (64ull << 20), UNIT, NULL), -EFBIG);
	cr_assert_eq(cfs_ns_getattr(fs, f, &a), 0);
	cr_assert_eq(a.size_bytes, 4 * UNIT);
	cr_assert_eq(a.blocks_512, 2 * UNIT / 512);
	cfs_ns_release(fs, in);
}

/* ---- xattrs --------------------------------------------------------------------------------- */

Test(namespace, xattrs, .init = setup, .fini = teardown)
{
	uint64_t f = mkfile(CFS_ROOT_INO, "f");
	struct cfs_attr a;
	char buf[128], *big;
	uint64_t l;

	cr_assert_eq(cfs_ns_setxattr(fs, f, "user.page", "2048", 4, 0), 0);
	cr_assert_eq(cfs_ns_getxattr(fs, f, "user.page", NULL, 0), 4);
	cr_assert_eq(cfs_ns_getxattr(fs, f, "user.page", buf, 2), 4); /* caller answers ERANGE */
	cr_assert_eq(cfs_ns_getxattr(fs, f, "user.page", buf, sizeof(buf)), 4);
	cr_assert_eq(memcmp(buf, "2048", 4), 0);
	cr_assert_eq(cfs_ns_setxattr(fs, f, "user.page", "4096", 4, CFS_XATTR_CREATE), -EEXIST);
	cr_assert_eq(cfs_ns_setxattr(fs, f, "user.new", "x", 1, CFS_XATTR_REPLACE), -ENODATA);
	cr_assert_eq(cfs_ns_setxattr(fs, f, "user.page", "4096", 4, CFS_XATTR_REPLACE), 0);
	cr_assert_eq(cfs_ns_setxattr(fs, f, "user.empty", "", 0, 0), 0);
	cr_assert_eq(cfs_ns_getxattr(fs, f, "user.empty", buf, sizeof(buf)), 0);
	cr_assert_eq(cfs_ns_listxattr(fs, f, NULL, 0), 21);
	cr_assert_eq(cfs_ns_listxattr(fs, f, buf, sizeof(buf)), 21);
	cr_assert(!memcmp(buf, "user.empty\0user.page\0", 21) ||
		  !memcmp(buf, "user.page\0user.empty\0", 21));
	cr_assert_eq(cfs_ns_getxattr(fs, f, "security.capability", buf, sizeof(buf)), -ENODATA);
	cr_assert_eq(cfs_ns_setxattr(fs, f, "trusted.x", "1", 1, 0), -EOPNOTSUPP);
	cr_assert_eq(cfs_ns_removexattr(fs, f, "user.page"), 0);
	cr_assert_eq(cfs_ns_removexattr(fs, f, "user.page"), -ENODATA);
	cr_assert_eq(cfs_ns_getxattr(fs, f, "user.page", buf, sizeof(buf)), -ENODATA);
	/* Limits. */
	big = calloc(1, CFS_XATTR_VALUE_MAX + 1);
	cr_assert_eq(cfs_ns_setxattr(fs, f, "user.big", big, CFS_XATTR_VALUE_MAX + 1, 0), -E2BIG);
	cr_assert_eq(cfs_ns_setxattr(fs, f, "user.big", big, CFS_XATTR_VALUE_MAX, 0), 0);
	cr_assert_eq(cfs_ns_getxattr(fs, f, "user.big", NULL, 0), CFS_XATTR_VALUE_MAX);
	memset(big, 'n', 300);
	memcpy(big, "user.", 5);
	big[256] = '\0';
	cr_assert_eq(cfs_ns_setxattr(fs, f, big, "1", 1, 0), -ERANGE);
	free(big);
	/* Symlinks take no user xattrs. */
	cr_assert_eq(cfs_ns_symlink(fs, CFS_ROOT_INO, "l", "f", 0, 0, &a), 0);
	cr_assert_eq(cfs_ns_setxattr(fs, a.ino, "user.x", "1", 1, 0), -EPERM);
	l = (uint64_t)cfs_ns_listxattr(fs, a.ino, buf, sizeof(buf));
	cr_assert_eq(l, 0);
	cr_assert_eq(cfs_ns_setxattr(fs, CFS_ROOT_INO, "user.dir", "1", 1, 0), 0);
}

/* ---- statistics pointer, dump -------------------------------------------------------------- */

Test(namespace, stats_and_dump, .init = setup, .fini = teardown)
{
	uint64_t f = mkfile(CFS_ROOT_INO, "f");
	struct cfs_inode *in;
	struct cfs_chunk_stats *s1, *s2;
	char *dump;

	cr_assert_eq(cfs_ns_open(fs, f, &in), 0);
	s1 = cfs_ns_inode_stats(in);
	cr_assert_not_null(s1);
	s2 = cfs_ns_inode_stats(in);
	cr_assert_eq(s1, s2);
	cr_assert_gt(s1->io.reset_time_ns, 0);
	cfs_ns_release(fs, in);
	cr_assert_eq(cfs_ns_open(fs, CFS_ROOT_INO, &in), 0);
	cr_assert_null(cfs_ns_inode_stats(in));
	cfs_ns_release(fs, in);
	dump = cfs_ns_dump(fs);
	cr_assert_not_null(dump);
	cr_assert_not_null(strstr(dump, "entry f -> 2"));
	free(dump);
	cr_assert_eq(cfs_ns_inode_count(fs), 2);
}

/* ---- concurrency ---------------------------------------------------------------------------- */

struct creator {
	uint64_t dir;
	int id;
};

static void *creator_thread(void *p)
{
	struct creator *c = p;
	char name[32];

	for (int i = 0; i < 300; i++) {
		struct cfs_attr a;

		snprintf(name, sizeof(name), "t%d.%d", c->id, i);
		cr_assert_eq(cfs_ns_mknod(fs, c->dir, name, S_IFREG | 0600, 0, 0, 0, &a), 0);
		if (i % 3 == 0)
			cr_assert_eq(cfs_ns_unlink(fs, c->dir, name), 0);
		if (i % 5 == 0) {
			char to[32];

			snprintf(to, sizeof(to), "r%d.%d", c->id, i);
			cfs_ns_rename(fs, c->dir, name, CFS_ROOT_INO, to, 0);
		}
	}
	return NULL;
}

Test(namespace, concurrent_mutations, .init = setup, .fini = teardown)
{
	pthread_t t[4];
	struct creator c[4];
	struct listing l = {0};
	int total = 0;

	for (int i = 0; i < 4; i++) {
		char name[16];

		snprintf(name, sizeof(name), "d%d", i);
		c[i] = (struct creator){mkdir_(CFS_ROOT_INO, name), i};
		pthread_create(&t[i], NULL, creator_thread, &c[i]);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	l.names = calloc(2048, sizeof(*l.names));
	l.cookies = calloc(2048, sizeof(*l.cookies));
	for (int i = 0; i < 4; i++) {
		l.count = 0;
		total += cfs_ns_readdir(fs, c[i].dir, 2, false, list_cb, &l);
	}
	l.count = 0;
	total += cfs_ns_readdir(fs, CFS_ROOT_INO, 2, false, list_cb, &l) - 4;
	/* 300 per thread, a third unlinked: 200 left, some moved to root. */
	cr_assert_eq(total, 4 * 200);
	free(l.names);
	free(l.cookies);
}

Test(namespace, zero_pin_outlives_delete, .init = setup_small, .fini = teardown)
{
	struct cfs_inode *in;
	struct cfs_attr a;
	struct cfs_setattr s = {.valid = CFS_SET_SIZE, .size_bytes = 1000};
	struct cfs_ns_zero zero;

	cr_assert_eq(cfs_ns_create_open(fs, CFS_ROOT_INO, "f", 0600, 0, 0, &a, &in), 0);
	cr_assert_eq(write_sim(in, 0, 3 * UNIT), 0);
	/* A path truncate (no handle) leaves a zeroing write to do... */
	cr_assert_eq(cfs_ns_setattr(fs, a.ino, &s, &a, &zero), 0);
	cr_assert_eq(zero.count, 1);
	cr_assert_eq(zero.length_bytes[0], 24);
	/* ...while the file is closed, unlinked and forgotten. */
	cfs_ns_release(fs, in);
	cr_assert_eq(cfs_ns_unlink(fs, CFS_ROOT_INO, "f"), 0);
	cfs_ns_forget(fs, a.ino, 1);
	cr_assert_eq(cfs_ns_getattr(fs, a.ino, &a), -ENOENT);
	/* Its last unit waits for the zeroing write. */
	cr_assert_eq(alloc_stat().used_units, 1);
	cfs_ns_io_end(fs, zero.inode, zero.io_gen);
	cr_assert_eq(alloc_stat().used_units, 0);
	cr_assert_eq(cfs_journal_commit_sync(fs), 0);
	cr_assert_eq(alloc_stat().free_units, 16);
}
