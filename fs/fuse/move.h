/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * move.h — the mover: one thread per mount that moves chunks between the
 * stores of a pool while they are read and written (fs/POOLS.md, "Moving a
 * chunk online"; chunkfs(8), MOVING CHUNKS).
 *
 * A move is "every unit of this chunk onto store T" (a small file's piece
 * of a unit too). Asked for by setting user.chunkfs.store on a chunk (or
 * user.chunkfs.move, which also takes a rate, pause, resume and cancel);
 * the whole units it needs on T are reserved at once (ENOSPC refuses it,
 * the chunk untouched; pieces are taken as they move), and the placement record
 * (INODE_PLACE: store T, from the source) is logged, so a mount after a
 * crash or an unmount resumes it. The thread then takes the chunk's units in
 * file order, one at a time: guard (fs/fuse/data.h: writes to the unit
 * wait), copy of the written sectors only, switch (one transaction:
 * cfs_ns_move_switch), and the guard keeps the switched units until their
 * transaction is durable.
 *
 * Threads: the cfs_mover_* calls below come from the event loops (xattrs)
 * and main.c; the progress and the requests are under the mover's own mutex,
 * never taken on the data path.
 */
#ifndef CFS_MOVE_H
#define CFS_MOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/fuse/daemon.h"

/* Start the thread (after the loops: it wakes them) and queue the moves the
 * log left unfinished. 0 or -errno. Nothing on a RAM mount or a read-only
 * one. */
int cfs_mover_start(struct cfs_daemon *d);
/* Stop between two steps of the move in progress (its guard lifted; the
 * placement record resumes it at the next mount) and join the thread.
 * Harmless when not started. */
void cfs_mover_stop(void);

/*
 * Move chunk ino onto store `to` at up to rate_bytes per second (0: as fast
 * as it goes). 0 (queued; or nothing to move: only placed), -EBUSY (a move
 * of it to another store is running), -EINVAL (`to` is joining or being
 * removed: no units go there), -ENOSPC (not enough free units on
 * `to`: logged with the numbers; nothing changed), -EROFS, -ENOENT,
 * -ENOMEM. The same target again: 0 (the rate changes if given).
 */
int cfs_mover_request(uint64_t ino, uint32_t to, uint64_t rate_bytes);
/* Pause (stops between units, nothing held) or resume a move; persisted.
 * -ENOENT: no move of ino. */
int cfs_mover_pause(uint64_t ino, bool pause);
/* Cancel: the units moved so far go back where the chunk came from (a
 * move stopped by nospace or an error too). The walk back is logged before
 * this returns (durable with the next commit), so a crash resumes the walk
 * back, not the move. 0, -ENOENT: no move of ino (or it has finished);
 * -EBUSY: it came from a store being removed; or logging it failed. */
int cfs_mover_cancel(uint64_t ino);
/* Cancel every move off `store` (the removal of the store was cancelled):
 * *cancelled of them. 0 or the first -errno of logging one. */
int cfs_mover_cancel_from(uint32_t store, unsigned *cancelled);
/* True while a move of ino is queued, running, paused or cancelling; *to
 * is where its units are going now. */
bool cfs_mover_moving_to(uint64_t ino, uint32_t *to);
/* Count the bytes moves switch off `store` from now on (the removal of
 * `store`; one store at a time), and read the count. */
void cfs_mover_count_off(uint32_t store);
uint64_t cfs_mover_counted_off(void);

/* The value of user.chunkfs.move for ino: "state=S from=A to=B done=BYTES
 * total=BYTES rate=BYTES/s" (state=none without a move). Returns the
 * length (snprintf's). */
size_t cfs_mover_render(uint64_t ino, char *text, size_t max);

#endif /* CFS_MOVE_H */
