/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store_xattr.h — the pool's names among the user.chunkfs.* xattrs
 * (fs/POOLS.md): where a chunk is and where new files go
 * (user.chunkfs.store), the stores of the pool (user.chunkfs.stores on the
 * mount root; setting it adds or removes a store: fs/fuse/storeop.h), a
 * chunk's move (user.chunkfs.move). xattr.c hands these
 * names here before it looks at the statistics.
 *
 * Called from loop threads. Reading takes the namespace's locks as getattr
 * does and walks the chunk's map under its inode lock (a move or a
 * statistics reader, never the data path).
 */
#ifndef CFS_STORE_XATTR_H
#define CFS_STORE_XATTR_H

#include <stdbool.h>
#include <stddef.h>

#include "fs/fuse/daemon.h"

/* True for user.chunkfs.store, .stores, .stores.why and .move. */
bool cfs_store_xattr_is(const char *name);
/* getxattr: always replies (size probe, ERANGE, ENODATA as xattr.c). */
void cfs_store_xattr_get(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
/* setxattr / removexattr: 0 or -errno for ops.c to reply. */
int cfs_store_xattr_set(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size);
int cfs_store_xattr_remove(fuse_req_t req, fuse_ino_t ino, const char *name);
/* The names listxattr shows for ino: none for a pool of one store (a
 * single store's listing stays what it was). Byte count; copied into buf
 * only if it fits. */
size_t cfs_store_xattr_list(fuse_ino_t ino, char *buf, size_t size);

#endif /* CFS_STORE_XATTR_H */
