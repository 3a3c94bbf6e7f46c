// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuse_null.c — the floor under the open/close case (bench/openclose.c) and
 * under the data path (bench/perf.sh, bench/ram-vs-tmpfs.sh): a FUSE
 * filesystem that does nothing but answer, so the benchmarks can show what the FUSE round trips themselves
 * cost next to chunkfs, ext4, tmpfs and the raw store.
 *
 *   fuse_null [-n] [-s SIZE] MOUNTPOINT      (foreground; until unmounted)
 *
 * Every name in the root directory exists and is a regular file of SIZE
 * bytes (default 64 KiB; k/m/g suffixes; its inode number is a hash of the
 * name); names and attributes are cached by the kernel for an hour, as
 * chunkfs lets it. OPEN is answered as chunkfs answers it (no FLUSH on
 * close, FOPEN_DIRECT_IO for O_DIRECT opens) and RELEASE with 0, so an
 * open+close costs one OPEN and one RELEASE. READ is answered with zeros
 * from one static buffer and WRITE with "all written", touching no store;
 * the connection is set up as chunkfs sets it (1 MiB requests, asynchronous
 * direct I/O, max_background 256), so fio on an O_DIRECT file here measures
 * the kernel's and libfuse's share of every request a FUSE filesystem that
 * sees each I/O must pay: what is left between this and chunkfs is the
 * daemon's own work (the store, the statistics, its loops).
 *
 * -n answers OPEN with ENOSYS: the kernel then stops sending OPEN and
 * RELEASE for the rest of the mount ("no_open", since Linux 5.1), and an
 * open+close never leaves the kernel. chunkfs cannot use that mode: it keeps
 * per-open state (the direct-I/O choice per open, write-behind's cached
 * opens), and without an open reply the kernel serializes O_DIRECT writes
 * to one file. It is here to measure what that mode would buy.
 *
 * Uses libfuse's stock multithreaded loop (threads are started as requests
 * wait, up to libfuse's default of 10 idle ones).
 */
#define FUSE_USE_VERSION 34
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NULL_TIMEOUT_S 3600.0
/* As chunkfs: fs/fuse/daemon.h (CFS_MAX_BACKGROUND, CFS_CONGESTION_THRESHOLD) and
 * the 1 MiB request size of fs/fuse/ops.c. */
#define NULL_MAX_IO (1u << 20)
#define NULL_MAX_BACKGROUND 256u
#define NULL_CONGESTION_THRESHOLD 192u

static int no_open;
static uint64_t file_size = 65536;
static char zeros[NULL_MAX_IO];

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
		st->st_size = (off_t)file_size;
		st->st_blocks = (blkcnt_t)(file_size / 512);
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

static void null_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	uint64_t left = (uint64_t)off < file_size ? file_size - (uint64_t)off : 0;

	(void)ino;
	(void)fi;
	if (size > left)
		size = (size_t)left;
	if (size > sizeof(zeros))
		size = sizeof(zeros);
	fuse_reply_buf(req, zeros, size);
}

static void null_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)ino;
	(void)buf;
	(void)fi;
	if ((uint64_t)off + size > file_size) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	fuse_reply_write(req, size);
}

static void null_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->want |= conn->capable & (FUSE_CAP_ASYNC_READ | FUSE_CAP_ASYNC_DIO);
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->max_write = NULL_MAX_IO;
	conn->max_readahead = NULL_MAX_IO;
	conn->max_background = NULL_MAX_BACKGROUND;
	conn->congestion_threshold = NULL_CONGESTION_THRESHOLD;
}

static const struct fuse_lowlevel_ops null_ops = {
	.init = null_init,
	.lookup = null_lookup,
	.getattr = null_getattr,
	.open = null_open,
	.read = null_read,
	.write = null_write,
	.release = null_release,
};

/* SIZE with an optional k/m/g suffix (powers of 1024); 0 if malformed. */
static uint64_t parse_size(const char *text)
{
	static const char suffixes[] = "kmg";
	const char *unit;
	char *end;
	unsigned long long v = strtoull(text, &end, 10);
	int shift = 0;

	if (end == text || text[0] == '-')
		return 0;
	if (*end != '\0' && (unit = strchr(suffixes, *end | 0x20)) != NULL) {
		shift = 10 * (int)(unit - suffixes + 1);
		end++;
	}
	if (*end != '\0' || v > (UINT64_MAX >> shift))
		return 0;
	return (uint64_t)v << shift;
}

int main(int argc, char **argv)
{
	char *fuse_argv[] = {argv[0], "-o", "fsname=fuse_null,allow_other", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
	struct fuse_loop_config loop = {.clone_fd = 0, .max_idle_threads = 10};
	struct fuse_session *se;
	const char *mnt;
	int opt, ret;

	while ((opt = getopt(argc, argv, "ns:")) != -1) {
		switch (opt) {
		case 'n':
			no_open = 1;
			break;
		case 's':
			file_size = parse_size(optarg);
			if (file_size == 0) {
				fprintf(stderr, "fuse_null: -s %s: not a size (bytes, k, m or g)\n",
					optarg);
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: fuse_null [-n] [-s SIZE] MOUNTPOINT\n");
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: fuse_null [-n] [-s SIZE] MOUNTPOINT\n");
		return 2;
	}
	mnt = argv[optind];
	se = fuse_session_new(&args, &null_ops, sizeof(null_ops), NULL);
	fuse_opt_free_args(&args); /* what libfuse added to them while parsing */
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
