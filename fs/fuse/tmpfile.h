/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tmpfile.h — open(O_TMPFILE) for libfuse 3.14 (fs/DAEMON.md, "O_TMPFILE").
 *
 * The kernel (FUSE 7.37, Linux 6.1+) sends FUSE_TMPFILE for open(O_TMPFILE):
 * a CREATE without a name. The request is CREATE's (struct fuse_create_in,
 * then a name, "/": the kernel's name for the new dentry), and so is the
 * reply it expects (fuse_entry_out + fuse_open_out). libfuse 3.14 has no
 * handler and answers ENOSYS, after which the kernel answers EOPNOTSUPP for
 * the rest of the mount without asking again. So cfs_tmpfile_note() reads
 * each raw request just before libfuse dispatches it (both transports, as
 * proto_ext.h does) and turns a FUSE_TMPFILE into a FUSE_CREATE in place,
 * keeping for this thread that it was one: libfuse's CREATE handler runs
 * next, in the same thread, and ops.c asks cfs_tmpfile_requested() to
 * create the file without a name (cfs_ns_tmpfile_open(), fs/meta/namespace.h).
 */
#ifndef CFS_TMPFILE_H
#define CFS_TMPFILE_H

#include <stdbool.h>
#include <stddef.h>

/* A raw request (fuse_in_header + op struct + name), before
 * fuse_session_process_buf(); may rewrite its opcode. */
void cfs_tmpfile_note(void *msg, size_t bytes);

/* For the CREATE handler of the request noted last in this thread: it came
 * as FUSE_TMPFILE (its name is not a name). */
bool cfs_tmpfile_requested(void);

#endif
