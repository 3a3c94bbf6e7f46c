/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto_ext.h — parts of the FUSE protocol libfuse 3.14 does not offer,
 * added around it: the raw request is read before libfuse dispatches it
 * (cfs_proto_note, both transports), and each reply is patched in the
 * transports' writev hooks (cfs_proto_reply) before the kernel reads it.
 *
 * FUSE_HANDLE_KILLPRIV_V2 (7.33): the daemon clears suid/sgid itself, so the
 * kernel stops asking for security.capability before every buffered write
 * (fs/DAEMON.md, "suid, sgid and buffered writes"). Without the flag, each
 * buffered write() first costs a GETXATTR round trip (the kernel's
 * file_remove_privs() probe), under the file's inode lock. With it the
 * kernel marks a file without suid/sgid as such and skips the probe; in
 * exchange it tells the daemon when a write, a truncate, an open(O_TRUNC) or
 * a chown must clear the bits: FUSE_WRITE_KILL_SUIDGID,
 * FUSE_OPEN_KILL_SUIDGID and FATTR_KILL_SUIDGID. libfuse 3.14 neither offers
 * the flag nor passes the write and open flags to handlers, so
 * cfs_proto_note() keeps, for this thread, whether the kernel asked to clear
 * the bits: the handler runs next, in the same thread, and asks
 * cfs_proto_kill_suidgid(); and cfs_proto_reply() adds the flag to the INIT
 * reply. SETATTR's FATTR_KILL_SUIDGID reaches handlers as
 * FUSE_SET_ATTR_KILL_SUID (the same bit). chunkfs stores no security.*
 * xattrs, so there are no capabilities to clear.
 *
 * FUSE_DIRECT_IO_ALLOW_MMAP (7.39, Linux 6.6), added to the INIT reply when
 * the kernel offers it: shared mmap of FOPEN_DIRECT_IO handles (fs/fuse/ops.c,
 * "page cache").
 *
 * FOPEN_PARALLEL_DIRECT_WRITES (7.38, Linux 6.2), added to the reply of an
 * OPEN or CREATE that gives an FOPEN_DIRECT_IO handle: without it the kernel
 * holds the file's inode lock for the whole round trip of each synchronous
 * O_DIRECT write, so writers of one chunk (database processes, threads
 * without asynchronous I/O) take turns. With it, writes inside the file's
 * size share the lock; appends and writes past the end still take it alone,
 * as do writes while the file has cached pages (the kernel's own rule). The
 * daemon already takes concurrent writes of one file from asynchronous
 * direct I/O. Only a reply made in the thread that noted its request (the
 * handler's own, as open replies are) is patched.
 */
#ifndef CFS_PROTO_EXT_H
#define CFS_PROTO_EXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct fuse_custom_io;

/* A raw request (fuse_in_header + op struct), before fuse_session_process_buf(). */
void cfs_proto_note(const void *msg, size_t bytes);

/* For the handler of the request noted last in this thread: the kernel asked
 * to clear suid/sgid (a WRITE's or an OPEN's flag). */
bool cfs_proto_kill_suidgid(void);

/* A reply about to be written (iov[0] its fuse_out_header): the INIT reply
 * gains the flags above the kernel offered, an OPEN's or CREATE's reply of
 * an FOPEN_DIRECT_IO handle FOPEN_PARALLEL_DIRECT_WRITES. */
void cfs_proto_reply(struct iovec *iov, int count);

/* The /dev/fuse transport's custom I/O: plain read(), writev() through cfs_proto_reply(). */
extern const struct fuse_custom_io cfs_proto_dev_io;

#endif
