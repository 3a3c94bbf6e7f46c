/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * movecmd.h — `chunkfs move`: starts, watches, pauses and cancels the move
 * of a chunk to another store of its pool (chunkfs(8), MOVING CHUNKS). A
 * client of the xattrs user.chunkfs.move and user.chunkfs.stores
 * (fs/fuse/store_xattr.c); it talks to the daemon no other way.
 */
#ifndef CFS_MOVECMD_H
#define CFS_MOVECMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* argv[0] is "move". Returns the exit code: 0 done (or started, with
 * --no-wait), 1 refused or failed (a message on stderr), 2 usage. */
int cfs_movecmd_main(int argc, char **argv);

/* Shared with `chunkfs store` (storecmd.c), a client of the same xattrs. */
/* The value of "name=value" in the first line of text ("" if absent). */
void cfs_cmd_field(const char *text, const char *name, char *out, size_t out_bytes);
/* bytes as "1.5 GiB". */
void cfs_cmd_human(uint64_t bytes, char *out, size_t out_bytes);
/* The root of the mount holding path (where user.chunkfs.stores is). */
bool cfs_cmd_mount_root(const char *path, char *root, size_t root_bytes);

#endif /* CFS_MOVECMD_H */
