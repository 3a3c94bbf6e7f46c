/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * movecmd.h — `chunkfs move`: starts, watches, pauses and cancels the move
 * of a chunk to another store of its pool (chunkfs(8), MOVING CHUNKS). A
 * client of the xattrs user.chunkfs.move and user.chunkfs.stores
 * (fs/fuse/store_xattr.c); it talks to the daemon no other way.
 */
#ifndef CFS_MOVECMD_H
#define CFS_MOVECMD_H

/* argv[0] is "move". Returns the exit code: 0 done (or started, with
 * --no-wait), 1 refused or failed (a message on stderr), 2 usage. */
int cfs_movecmd_main(int argc, char **argv);

#endif /* CFS_MOVECMD_H */
