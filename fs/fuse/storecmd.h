/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * storecmd.h — `chunkfs store`: adds a store to a mounted pool, removes one
 * (waiting while its chunks move off it), cancels a removal, lists them
 * (chunkfs(8), STORES).
 * A client of the xattrs user.chunkfs.stores and user.chunkfs.stores.why on
 * the mount root (fs/fuse/storeop.h); it talks to the daemon no other way.
 */
#ifndef CFS_STORECMD_H
#define CFS_STORECMD_H

/* argv[0] is "store". Returns the exit code: 0 done (or started, with
 * --no-wait), 1 refused or failed (the daemon's reason on stderr), 2 usage. */
int cfs_storecmd_main(int argc, char **argv);

#endif /* CFS_STORECMD_H */
