/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dio_inval.h — the page cache after an O_DIRECT write through the kernel's
 * own direct path (an O_DIRECT open of a file that has cached opens:
 * fs/fuse/ops.c, "page cache"; fs/DAEMON.md, "The page cache").
 *
 * The kernel drops the written range from the page cache before it sends
 * such a write, and again after it only when the write was synchronous: an
 * asynchronous one (io_submit, io_uring) completes without it. A buffered
 * read between the first drop and the write landing re-caches the old bytes,
 * and they stay, older than the store, after the write has completed. So the
 * daemon drops the range itself once the write is on the store and answers
 * the write only then (a redundant drop for a synchronous write, which the
 * kernel repeats).
 *
 * Not on a loop thread: the kernel's drop waits for pages locked by reads
 * that the loops must answer. One worker thread does the drop and the reply;
 * a loop hands it the request and goes on (its context is free at once).
 */
#ifndef CFS_DIO_INVAL_H
#define CFS_DIO_INVAL_H

#include <stdint.h>

#include "fs/fuse/daemon.h"

/* Start the worker for session se. 0 or -errno. */
int cfs_dio_inval_start(struct fuse_session *se);
/* Answer what was handed over, then stop the worker (after the loops are
 * joined and the session is unmounted: a drop then no longer waits). */
void cfs_dio_inval_stop(void);
/* Drop [offset, offset + length) of node ino from the kernel's page cache,
 * then answer the WRITE req with length. Any thread. */
void cfs_dio_inval_reply_write(fuse_req_t req, uint64_t ino, uint64_t offset, uint32_t length);

#endif /* CFS_DIO_INVAL_H */
