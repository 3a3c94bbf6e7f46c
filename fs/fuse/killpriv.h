/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * killpriv.h — the daemon clears suid/sgid itself (FUSE_HANDLE_KILLPRIV_V2),
 * so the kernel stops asking for security.capability before every buffered
 * write (fs/DAEMON.md, "suid, sgid and buffered writes").
 *
 * Without the flag, each buffered write() first costs a GETXATTR round trip
 * (the kernel's file_remove_privs() probe), under the file's inode lock.
 * With it the kernel marks a file without suid/sgid as such and skips the
 * probe; in exchange it tells the daemon when a write, a truncate, an
 * open(O_TRUNC) or a chown must clear the bits: FUSE_WRITE_KILL_SUIDGID,
 * FUSE_OPEN_KILL_SUIDGID and FATTR_KILL_SUIDGID (uapi linux/fuse.h, 7.33).
 * libfuse 3.14 neither offers the flag nor passes the write and open flags
 * to handlers, so:
 *   - cfs_killpriv_note() reads each raw request just before libfuse
 *     dispatches it (both transports) and keeps, for this thread, whether
 *     the kernel asked to clear the bits: the handler runs next, in the same
 *     thread, and asks cfs_killpriv_requested();
 *   - cfs_killpriv_init_reply() adds the flag to the INIT reply, from a
 *     custom-I/O writev hook (cfs_killpriv_dev_io on /dev/fuse; the io_uring
 *     transport's own hook calls it too).
 * The same INIT hook adds FUSE_DIRECT_IO_ALLOW_MMAP (7.39, Linux 6.6) when the
 * kernel offers it: shared mmap of FOPEN_DIRECT_IO handles (fs/fuse/ops.c,
 * "page cache").
 * SETATTR's FATTR_KILL_SUIDGID reaches handlers as FUSE_SET_ATTR_KILL_SUID
 * (the same bit). chunkfs stores no security.* xattrs, so there are no
 * capabilities to clear.
 */
#ifndef CFS_KILLPRIV_H
#define CFS_KILLPRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct fuse_custom_io;

/* A raw request (fuse_in_header + op struct), before fuse_session_process_buf(). */
void cfs_killpriv_note(const void *msg, size_t bytes);

/* For the handler of the request noted last in this thread. */
bool cfs_killpriv_requested(void);

/* A reply about to be written: adds the flag if it answers the INIT noted. */
void cfs_killpriv_init_reply(struct iovec *iov, int count);

/* The /dev/fuse transport's custom I/O: plain read(), writev() with the INIT reply hook. */
extern const struct fuse_custom_io cfs_killpriv_dev_io;

#endif
