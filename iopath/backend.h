/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backend.h — private to iopath/: the backend ops table and the objects the
 * core (io.c) shares with the backends (backend_uring.c, backend_ram.c,
 * backend_fault.c, backend_null.c, backend_rbd.c). Users of iopath include
 * iopath.h only.
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
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "fs/base/assert.h"
#include "iopath/iopath.h"

#define CFS_BACKEND_OPS_VERSION 1

struct cfs_backend_ops {
	const char *name;
	unsigned version; /* CFS_BACKEND_OPS_VERSION */
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
	/* Optional, pools (iopath.h): open one more store, return its index;
	 * publish a validated route table (the core checked it); close a
	 * store. The backend updates io->geo (size, discard). */
	int (*add_store)(struct cfs_io *io, const struct cfs_io_config *cfg);
	const struct cfs_io_geometry *(*store_geometry)(const struct cfs_io *io, unsigned store);
	int (*set_routes)(struct cfs_io *io, const struct cfs_io_route *routes, unsigned count);
	int (*drop_store)(struct cfs_io *io, unsigned store);
	unsigned (*get_routes)(struct cfs_io *io, struct cfs_io_route *routes, unsigned max);
};

extern const struct cfs_backend_ops cfs_backend_uring;
extern const struct cfs_backend_ops cfs_backend_ram;
extern const struct cfs_backend_ops cfs_backend_fault;
extern const struct cfs_backend_ops cfs_backend_null; /* bench -N: no data moves */
extern const struct cfs_backend_ops cfs_backend_rbd;  /* Ceph RBD through librbd */

/* Tests: how many pool FLUSH parts reached store `store` of a "uring"
 * target (one with a single store flushes without parts). */
uint64_t cfs_uring_store_flushes(const struct cfs_io *io, unsigned store);

/* The data backends by name ("uring", "ram", "null", "rbd"); NULL if unknown. Never
 * returns "fault": the fault wrapper uses it to find the backend it wraps. */
const struct cfs_backend_ops *cfs_backend_lookup(const char *name);

/* align.c: a /sys/dev/block/MAJ:MIN/queue/<attr> number of the block device
 * dev (or of its parent disk when dev is a partition); 0 when unknown. */
uint64_t cfs_io_sysfs_queue_attr(dev_t dev, const char *attr);

struct cfs_range_locks; /* rmw.c: striped table of locked sector ranges */

struct cfs_io {
	const struct cfs_backend_ops *ops;
	struct cfs_io_geometry geo;
	struct cfs_io_config cfg;      /* copy; the core owns copies of the strings
					* (path, fault_spec) until cfs_io_close() */
	void *priv;		       /* the backend's */
	struct cfs_range_locks *locks; /* read-modify-write range locks */
	atomic_uint locked_ranges;     /* fast path: 0 means no range is locked */
};

struct cfs_ioq {
	struct cfs_io *io;
	void *priv;		     /* the backend's */
	pthread_mutex_t submit_lock; /* this queue's submission side only */
	atomic_uint inflight;	     /* staged on this queue's backend and not
				      * yet completed (parked requests excluded) */
	uint64_t submit_batches;     /* cfs_ioq_submit() calls that handed over
				      * requests, and how many: under submit_lock */
	uint64_t submit_requests;
	unsigned depth;
	/* Aligned arena for cfs_ioq_buf_get(); registered by the uring backend. */
	void *arena;
	size_t arena_bytes;
	void *arena_state;     /* the core's allocator state */
	bool arena_registered; /* set by a backend that registered the
				* arena (fixed-buffer I/O possible) */
};

/* Called by backends exactly once per request with its final result:
 * charges req->stats, drops inflight, runs req->done. */
void cfs_ioq_complete(struct cfs_ioq *q, struct cfs_io_req *req, int res);

/* ---- range locks (rmw.c) <-> core (io.c) ---------------------------------
 *
 * cfs_io_open() calls cfs_range_locks_init() after the backend opened (so
 * io->geo is known) and cfs_io_close() calls cfs_range_locks_fini() before
 * the backend closes. io->locked_ranges is 0 whenever no range is locked.
 *
 * cfs_ioq_queue() validates a WRITE, ZERO or DISCARD, charges it to
 * stats->inflight_now, and then, only if atomic_load(&io->locked_ranges) is
 * nonzero, calls cfs_range_wait_if_locked(). True means the request overlaps
 * a locked range and was parked (cfs_ioq_queue() returns 0; it is not counted
 * in any queue's inflight while parked). False means go ahead.
 *
 * When the range is released, rmw.c hands each parked request to
 * cfs_ioq_resume() on the releasing queue, from the releasing thread (usually
 * inside a done() run by cfs_ioq_reap()). cfs_ioq_resume() does not check the
 * range locks again; it counts req in q's inflight, stages it under
 * q->submit_lock and submits it at once (the owner may be asleep in reap). It
 * returns 0, or -errno after completing req with that error (done() runs in
 * the calling thread). Neither function may be called with q->submit_lock held.
 */
int cfs_range_locks_init(struct cfs_io *io);
void cfs_range_locks_fini(struct cfs_io *io);
bool cfs_range_wait_if_locked(struct cfs_ioq *q, struct cfs_io_req *req);
int cfs_ioq_resume(struct cfs_ioq *q, struct cfs_io_req *req);

#endif /* CFS_IOPATH_BACKEND_H */
