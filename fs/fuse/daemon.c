/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * daemon.c — the state and the reply helpers every part of the FUSE front
 * shares (fs/fuse/daemon.h): the one struct cfs_daemon of the process, the
 * one place -errno and attributes become FUSE replies, and the CPUs each
 * event loop runs on (both transports).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fuse/daemon.h"
#include "fs/meta/namespace.h"

struct cfs_daemon cfs_daemon;

void cfs_reply_err(fuse_req_t req, int err)
{
	/* ENOSYS would switch the operation off for the whole mount. */
	if (err == -ENOSYS)
		err = -EIO;
	fuse_reply_err(req, -err);
}

void cfs_attr_to_stat(const struct cfs_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = (off_t)a->size_bytes;
	st->st_blocks = (blkcnt_t)a->blocks_512;
	st->st_blksize = a->blksize_bytes;
	st->st_atim.tv_sec = a->atime_ns / 1000000000;
	st->st_atim.tv_nsec = a->atime_ns % 1000000000;
	st->st_mtim.tv_sec = a->mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = a->mtime_ns % 1000000000;
	st->st_ctim.tv_sec = a->ctime_ns / 1000000000;
	st->st_ctim.tv_nsec = a->ctime_ns % 1000000000;
}

void cfs_reply_xattr_value(fuse_req_t req, ssize_t n, const void *buf, size_t size)
{
	if (n < 0)
		cfs_reply_err(req, (int)n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else if ((size_t)n > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

void cfs_reply_attr(fuse_req_t req, const struct cfs_attr *attr)
{
	struct stat st;

	cfs_attr_to_stat(attr, &st);
	fuse_reply_attr(req, &st, CFS_ATTR_TIMEOUT_S);
}

void cfs_loop_pin_cpus(unsigned index, unsigned loops, unsigned ncpus)
{
	cpu_set_t allowed, mine;
	unsigned n = 0;

	if (loops < 2 || pthread_getaffinity_np(pthread_self(), sizeof(allowed), &allowed))
		return;
	CPU_ZERO(&mine);
	for (unsigned c = index; c < ncpus && c < CPU_SETSIZE; c += loops)
		if (CPU_ISSET(c, &allowed)) {
			CPU_SET(c, &mine);
			n++;
		}
	if (n && n < (unsigned)CPU_COUNT(&allowed))
		pthread_setaffinity_np(pthread_self(), sizeof(mine), &mine);
}
