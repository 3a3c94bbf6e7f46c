/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto_ext.c — parts of the FUSE protocol libfuse 3.14 does not offer (see proto_ext.h).
 */
#include <linux/fuse.h>
#include <stdatomic.h>
#include <unistd.h>

#include "fs/fuse/daemon.h"
#include "fs/fuse/proto_ext.h"

/* 7.39 (Linux 6.6): shared mmap of FOPEN_DIRECT_IO files, bit 36 of the INIT
 * flags (bit 4 of flags2); Debian 12's uapi header (7.38) does not have it. */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif

/* 7.38 (Linux 6.2); Debian 12's uapi header has it, older ones may not. */
#ifndef FOPEN_PARALLEL_DIRECT_WRITES
#define FOPEN_PARALLEL_DIRECT_WRITES (1u << 6)
#endif

static _Atomic uint64_t init_unique; /* the INIT request, until its reply */
static uint64_t init_offered;	     /* the flags we add that its INIT offered */
static _Thread_local bool kill_requested;
/* The request noted last in this thread, if an OPEN or CREATE: its reply,
 * made by its handler in this thread, may gain FOPEN_PARALLEL_DIRECT_WRITES. */
static _Thread_local uint64_t open_unique;

void cfs_proto_note(const void *msg, size_t bytes)
{
	const struct fuse_in_header *in = msg;
	const void *arg = in + 1;
	size_t arg_bytes = bytes > sizeof(*in) ? bytes - sizeof(*in) : 0;

	kill_requested = false;
	open_unique = 0;
	if (bytes < sizeof(*in))
		return;
	if (in->opcode == FUSE_OPEN || in->opcode == FUSE_CREATE)
		open_unique = in->unique; /* FUSE_TMPFILE is a CREATE by now (tmpfile.h) */
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

bool cfs_proto_kill_suidgid(void)
{
	return kill_requested;
}

/* An OPEN's reply is a fuse_open_out, a CREATE's a fuse_entry_out and then
 * one (libfuse sends either in iov[1]): the fuse_open_out ends iov[1]. */
static void open_reply(struct iovec *iov, int count)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	struct fuse_open_out *arg;

	open_unique = 0;
	if (out->error || count < 2 || iov[1].iov_len < sizeof(*arg))
		return;
	arg = (struct fuse_open_out *)((char *)iov[1].iov_base + iov[1].iov_len - sizeof(*arg));
	if (arg->open_flags & FOPEN_DIRECT_IO)
		arg->open_flags |= FOPEN_PARALLEL_DIRECT_WRITES;
}

void cfs_proto_reply(struct iovec *iov, int count)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	uint64_t unique = atomic_load_explicit(&init_unique, memory_order_relaxed);
	struct fuse_init_out *arg;

	if (open_unique && out->unique == open_unique) {
		open_reply(iov, count);
		return;
	}
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
	cfs_proto_reply(iov, count);
	return writev(fd, iov, count);
}

const struct fuse_custom_io cfs_proto_dev_io = {
	.read = dev_read,
	.writev = dev_writev,
};
