/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * buf.h — private to iopath/: set-up and tear-down of a queue's buffer arena
 * allocator (buf.c). cfs_ioq_buf_get/put/is_fixed are public (iopath.h).
 */
#ifndef CFS_IOPATH_BUF_H
#define CFS_IOPATH_BUF_H

#include <stddef.h>

struct cfs_ioq;

/* Build the allocator over q->arena / q->arena_bytes (nothing if no arena).
 * The only allocation the arena ever makes. 0 or -errno. */
int cfs_buf_arena_init(struct cfs_ioq *q);
void cfs_buf_arena_fini(struct cfs_ioq *q);
/* Bytes not handed out (tests and diagnostics). */
size_t cfs_buf_arena_free_bytes(const struct cfs_ioq *q);

#endif /* CFS_IOPATH_BUF_H */
