/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * xattr.h — the user.chunkfs.* names: per-chunk statistics and the chunk's
 * page size on regular files, mount-wide totals and store facts on the root
 * directory (fs/stats/chunkstat.h has the fields and their text). ops.c hands
 * every getxattr/setxattr/removexattr of a user.chunkfs.* name here and asks
 * for the names to list; other user.* names stay the namespace's.
 *
 * Called from loop threads; none of these takes a lock the data path takes
 * (a statistics reader copies counters with atomic loads).
 */
#ifndef CFS_XATTR_H
#define CFS_XATTR_H

#include <stdbool.h>
#include <stddef.h>

#include "fs/fuse/daemon.h"

/* True when name is in the reserved user.chunkfs. namespace. */
bool cfs_xattr_is_stats(const char *name);

/* Answer a getxattr of a user.chunkfs.* name (always replies): the size
 * probe (size 0) and the read that follows agree (chunkstat.h, "the
 * size-probe cache"); ERANGE when size is too small; ENODATA for a name
 * that does not exist for this inode (subdirectories, symlinks, devices
 * have none). */
void cfs_xattr_stats_get(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);

/* setxattr / removexattr of a user.chunkfs.* name: 0 or -errno for ops.c
 * to reply. pagesize: set (removexattr: back to the default); reset: "1",
 * by the owner or root (-EPERM otherwise); anything else -EOPNOTSUPP. */
int cfs_xattr_stats_set(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size);
int cfs_xattr_stats_remove(fuse_req_t req, fuse_ino_t ino, const char *name);

/* The user.chunkfs.* names listxattr shows for ino (none with -o
 * hide_stats): their byte count, copied into buf only if it fits. */
size_t cfs_xattr_stats_list(fuse_ino_t ino, char *buf, size_t size);

#endif /* CFS_XATTR_H */
