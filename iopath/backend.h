/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backend.h — private to iopath/: the backend ops table and the objects the
 * core (io.c) shares with the backends (backend_uring.c, backend_ram.c,
 * backend_fault.c). Users of iopath include iopath.h only.
 *
 * The split follows fio's engines: queue() only stages a request, submit()
 * hands the staged batch to the device, reap() collects finished requests and
 * reports each through cfs_ioq_complete(). A backend fills only what it needs;
 * the core validates, charges statistics and calls done().
 */
#ifndef CFS_IOPATH_BACKEND_H
#define CFS_IOPATH_BACKEND_H

#include <pthread.h>
#include <stdatomic.h>

#include "iopath/iopath.h"

#define CFS_BACKEND_OPS_VERSION 1

struct cfs_backend_ops {
	const char *name;
	unsigned version;	/* CFS_BACKEND_OPS_VERSION */
	/* Open the target described by cfg; fill io->geo and io->priv. */
	int (*open)(struct cfs_io *io, const struct cfs_io_config *cfg);
	void (*close)(struct cfs_io *io);
	/* Set up q->priv (a ring, a completion list); the core has already
	 * allocated q->arena, which the backend may register. */
	int (*queue_init)(struct cfs_ioq *q, const struct cfs_ioq_config *cfg);
	void (*queue_fini)(struct cfs_ioq *q);
	/* Stage one validated request: 0, or -EBUSY when no slot is free. */
	int (*queue)(struct cfs_ioq *q, struct cfs_io_req *req);
	/* Hand staged requests to the device: count submitted or -errno. */
	int (*submit)(struct cfs_ioq *q);
	/* Collect finished requests, waiting for at least min_complete; calls
	 * cfs_ioq_complete() once per request, requeues short transfers
	 * itself. Returns the number completed or -errno. */
	int (*reap)(struct cfs_ioq *q, unsigned min_complete);
	/* Optional: an fd readable when completions wait (eventfd). */
	int (*event_fd)(struct cfs_ioq *q);
};

extern const struct cfs_backend_ops cfs_backend_uring;
extern const struct cfs_backend_ops cfs_backend_ram;
extern const struct cfs_backend_ops cfs_backend_fault;

struct cfs_range_locks;		/* rmw.c: striped table of locked sector ranges */

struct cfs_io {
	const struct cfs_backend_ops *ops;
	struct cfs_io_geometry geo;
	struct cfs_io_config cfg;	/* copy; strings owned by the backend or static */
	void *priv;			/* the backend's */
	struct cfs_range_locks *locks;	/* read-modify-write range locks */
	atomic_uint locked_ranges;	/* fast path: 0 means no range is locked */
};

struct cfs_ioq {
	struct cfs_io *io;
	void *priv;			/* the backend's */
	pthread_mutex_t submit_lock;	/* this queue's submission side only */
	atomic_uint inflight;		/* queued and not yet completed */
	unsigned depth;
	/* Aligned arena for cfs_ioq_buf_get(); registered by the uring backend. */
	void *arena;
	size_t arena_bytes;
	void *arena_state;		/* the core's allocator state */
};

/* Called by backends exactly once per request with its final result:
 * charges req->stats, drops inflight, runs req->done. */
void cfs_ioq_complete(struct cfs_ioq *q, struct cfs_io_req *req, int res);

#endif /* CFS_IOPATH_BACKEND_H */
