/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * killpriv.c — FUSE_HANDLE_KILLPRIV_V2 for libfuse 3.14 (see killpriv.h).
 */
#include <linux/fuse.h>
#include <stdatomic.h>
#include <unistd.h>

#include "fs/fuse/daemon.h"
#include "fs/fuse/killpriv.h"

/* 7.39 (Linux 6.6): shared mmap of FOPEN_DIRECT_IO files, bit 36 of the INIT
 * flags (bit 4 of flags2); Debian 12's uapi header (7.38) does not have it. */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif

static _Atomic uint64_t init_unique; /* the INIT request, until its reply */
static uint64_t init_offered;	     /* the flags we add that its INIT offered */
static _Thread_local bool kill_requested;

void cfs_killpriv_note(const void *msg, size_t bytes)
{
	const struct fuse_in_header *in = msg;
	const void *arg = in + 1;
	size_t arg_bytes = bytes > sizeof(*in) ? bytes - sizeof(*in) : 0;

	kill_requested = false;
	if (bytes < sizeof(*in))
		return;
	switch (in->opcode) {
	case FUSE_WRITE:
		if (arg_bytes >= sizeof(struct fuse_write_in))
			kill_requested = ((const struct fuse_write_in *)arg)->write_flags &
					 FUSE_WRITE_KILL_SUIDGID;
		break;
	case FUSE_OPEN:
		if (arg_bytes >= sizeof(struct fuse_open_in))
			kill_requested = ((const struct fuse_open_in *)arg)->open_flags &
					 FUSE_OPEN_KILL_SUIDGID;
		break;
	case FUSE_INIT:
		/* Only a kernel that offers a flag gets it in the reply. */
		if (arg_bytes >= offsetof(struct fuse_init_in, flags2)) {
			const struct fuse_init_in *init = arg;
			uint64_t flags = init->flags;

			if ((flags & FUSE_INIT_EXT) &&
			    arg_bytes >= offsetof(struct fuse_init_in, unused))
				flags |= (uint64_t)init->flags2 << 32;
			init_offered =
				flags & (FUSE_HANDLE_KILLPRIV_V2 | FUSE_DIRECT_IO_ALLOW_MMAP);
			if (init_offered)
				atomic_store(&init_unique, in->unique);
		}
		break;
	default:
		break;
	}
}

bool cfs_killpriv_requested(void)
{
	return kill_requested;
}

void cfs_killpriv_init_reply(struct iovec *iov, int count)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	uint64_t unique = atomic_load_explicit(&init_unique, memory_order_relaxed);
	struct fuse_init_out *arg;

	if (!unique || out->unique != unique)
		return;
	atomic_store(&init_unique, 0);
	if (out->error || count < 2 ||
	    iov[1].iov_len < offsetof(struct fuse_init_out, max_background))
		return;
	arg = iov[1].iov_base;
	arg->flags |= (uint32_t)(init_offered & FUSE_HANDLE_KILLPRIV_V2);
	if ((init_offered & FUSE_DIRECT_IO_ALLOW_MMAP) &&
	    iov[1].iov_len >= offsetof(struct fuse_init_out, unused)) {
		/* Shared mmap of FOPEN_DIRECT_IO handles: fs/fuse/ops.c,
		 * "page cache", says how the mapping stays coherent. */
		arg->flags |= FUSE_INIT_EXT;
		arg->flags2 |= (uint32_t)(FUSE_DIRECT_IO_ALLOW_MMAP >> 32);
	}
}

static ssize_t dev_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	return read(fd, buf, len);
}

static ssize_t dev_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	cfs_killpriv_init_reply(iov, count);
	return writev(fd, iov, count);
}

const struct fuse_custom_io cfs_killpriv_dev_io = {
	.read = dev_read,
	.writev = dev_writev,
};
