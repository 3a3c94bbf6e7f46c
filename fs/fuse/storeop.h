/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * storeop.h — stores added to and removed from a mounted pool (fs/POOLS.md,
 * "Adding and removing stores online"; chunkfs(8), STORES).
 *
 * Asked for by setting user.chunkfs.stores on the mount root (`chunkfs
 * store` is the client): "add [label=LABEL] SOURCE", "remove [rate=BYTES]
 * STORE" or "cancel-remove STORE". An add is done when the setxattr returns: SOURCE opened and
 * locked, checked, its superblocks written as a data store of the pool,
 * routed, then store 0's table written (next generation) with it, active.
 * A remove returns once the store is *removing* in store 0's table; a
 * thread then moves every chunk with units on it to another store (the
 * mover), drops placements naming it, takes it out of the table, wipes its
 * superblocks and closes it. A crash resumes the removal at the next mount
 * (the table says removing). A cancel returns once the removal thread has
 * ended, the moves off the store are cancelled and the store is active in
 * store 0's table again.
 *
 * Refusals come back as an errno; the sentence that explains one is kept
 * for the process that asked (user.chunkfs.stores.why), and logged.
 *
 * Threads: requests come from the event loops (one at a time: a mutex), the
 * removal runs in its own thread; nothing here is on the data path.
 */
#ifndef CFS_STOREOP_H
#define CFS_STOREOP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fs/fuse/daemon.h"

/* Hand over the store lock of the store the cfs_io knows as io_store (the
 * flock fds main.c took on its path and a loop device's backing file; -1:
 * none): released when that store is removed, else by cfs_storeop_unlock. */
void cfs_storeop_adopt_lock(unsigned io_store, int path_fd, int backing_fd);

/* After cfs_mover_start: resume a removal store 0's table left (a store in
 * state removing). 0 or -errno. Nothing on RAM or read-only mounts. */
int cfs_storeop_start(struct cfs_daemon *d);
/* Stop the removal thread between two steps (the table resumes it) and
 * join it. Before cfs_mover_stop. */
void cfs_storeop_stop(void);
/* Release every store lock held here (main.c: last, after the checkpoint). */
void cfs_storeop_unlock(void);

/* setxattr user.chunkfs.stores = value, asked by process pid: 0 or -errno
 * (-EINVAL a bad request, -ENOENT no such store, or for a cancel no removal
 * of it (finished, or never started), -EPERM store 0, -EEXIST
 * SOURCE holds something, -EBUSY in use or another removal running,
 * -ENOSPC no room for what the store holds, -EOPNOTSUPP, -EROFS, -EIO). */
int cfs_storeop_request(pid_t pid, const char *value, size_t size);
/* Why pid's last request was refused (or how its removal stopped or was
 * cancelled, or what its cancel did): the sentence into text (snprintf's
 * length; 0: nothing to say). */
size_t cfs_storeop_why(pid_t pid, char *text, size_t max);
/* What user.chunkfs.stores adds to the line of a store being removed:
 * " left=BYTES" (its units still used) and " stopped=REASON" when the
 * removal stopped (nospace, error). snprintf's length. */
size_t cfs_storeop_render(uint32_t store, char *text, size_t max);

#endif /* CFS_STOREOP_H */
