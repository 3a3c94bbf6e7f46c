// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuse_null.c — the floor under the open/close case (seed 004): a FUSE
 * filesystem that does nothing but answer, so the benchmark can show what
 * the FUSE round trips themselves cost next to chunkfs, ext4 and tmpfs.
 *
 *   fuse_null [-n] MOUNTPOINT      (foreground; until unmounted)
 *
 * Every name in the root directory exists and is a 64 KiB regular file
 * (its inode number is a hash of the name); names and attributes are cached
 * by the kernel for an hour, as chunkfs lets it. OPEN is answered as chunkfs
 * answers it (no FLUSH on close, FOPEN_DIRECT_IO for O_DIRECT opens) and
 * RELEASE with 0, so an open+close costs one OPEN and one RELEASE.
 *
 * -n answers OPEN with ENOSYS: the kernel then stops sending OPEN and
 * RELEASE for the rest of the mount ("no_open", since Linux 5.1), and an
 * open+close never leaves the kernel. chunkfs cannot use that mode: it keeps
 * per-open state (the direct-I/O choice per open, write-behind's cached
 * opens), and without an open reply the kernel serializes O_DIRECT writes
 * to one file. It is here to measure what that mode would buy.
 *
 * Uses libfuse's stock multithreaded loop; reads and writes are not served.
 */
#define FUSE_USE_VERSION 34
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define NULL_TIMEOUT_S 3600.0
#define NULL_FILE_SIZE 65536

static int no_open;

/* FNV-1a over the name, kept clear of the root's inode number 1. */
static fuse_ino_t name_ino(const char *name)
{
	uint64_t h = 1469598103934665603ull;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return 2 + h % (1ull << 40);
}

static void fill_attr(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
		st->st_size = NULL_FILE_SIZE;
	}
}

static void null_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = name_ino(name);
	e.generation = 1;
	e.attr_timeout = NULL_TIMEOUT_S;
	e.entry_timeout = NULL_TIMEOUT_S;
	fill_attr(e.ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void null_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	fill_attr(ino, &st);
	fuse_reply_attr(req, &st, NULL_TIMEOUT_S);
}

static void null_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	if (no_open) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	fi->noflush = 1;
	fi->direct_io = (fi->flags & O_DIRECT) != 0;
	fuse_reply_open(req, fi);
}

static void null_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops null_ops = {
	.lookup = null_lookup,
	.getattr = null_getattr,
	.open = null_open,
	.release = null_release,
};

int main(int argc, char **argv)
{
	char *fuse_argv[] = {argv[0], "-o", "fsname=fuse_null,allow_other", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
	struct fuse_loop_config loop = {.clone_fd = 0, .max_idle_threads = 10};
	struct fuse_session *se;
	const char *mnt;
	int ret;

	if (argc == 3 && strcmp(argv[1], "-n") == 0) {
		no_open = 1;
		mnt = argv[2];
	} else if (argc == 2 && argv[1][0] != '-') {
		mnt = argv[1];
	} else {
		fprintf(stderr, "usage: fuse_null [-n] MOUNTPOINT\n");
		return 2;
	}
	se = fuse_session_new(&args, &null_ops, sizeof(null_ops), NULL);
	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, mnt) != 0) {
		fuse_session_destroy(se);
		return 1;
	}
	ret = fuse_session_loop_mt(se, &loop);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	return ret != 0;
}
