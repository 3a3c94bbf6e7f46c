/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rbd.h — private to iopath/: what the RBD backend (backend_rbd.c: the
 * cluster connection and the data path) shares with its fencing
 * (rbd_lock.c: the image's exclusive lock, who holds it, takeover).
 */
#ifndef CFS_IOPATH_RBD_H
#define CFS_IOPATH_RBD_H

#include <rados/librados.h>
#include <rbd/librbd.h>
#include <stdatomic.h>

#include "iopath/backend.h"

/* The image metadata key where the lock holder describes itself. */
#define CFS_RBD_HOLDER_KEY "chunkfs.holder"

struct rbd_target {
	rados_t cluster;
	rados_ioctx_t ioctx;
	rbd_image_t image;
	struct cfs_rbd_name name;
	/* "rbd:POOL/[NAMESPACE/]IMAGE", for messages (a copy: a store added
	 * online is named by a request that does not outlive the open) */
	char source[sizeof(CFS_RBD_PREFIX) + 3 * CFS_RBD_NAME_BYTES];
	char user[96];	    /* "client.ID" */
	bool locked;	    /* this process holds the exclusive lock */
	atomic_bool fenced; /* blocklisted, or the lock went to another
			     * client: every request fails with -EIO */
	void (*log)(void *arg, const char *line);
	void *log_arg;
};

/* Open the image cfg->path names ("rbd:..."): connect as cfg->ceph says,
 * open it, take its lock when cfg->exclusive; *geo describes it. 0, or
 * -errno after saying why. The "rbd" backend's target, and an RBD store of
 * a "uring" pool (backend_uring.c). */
int cfs_rbd_store_open(const struct cfs_io_config *cfg, struct cfs_io_geometry *geo,
		       struct rbd_target **out);
/* Give the lock back (when held) and disconnect. */
void cfs_rbd_store_close(struct rbd_target *t);
/* Start one request (enum cfs_io_op) on the image; librbd runs cb(c, arg)
 * on its completion thread, where cfs_rbd_aio_result() reads it. 0, or
 * -errno when it did not start (cb will not run): -ESHUTDOWN for a fenced
 * target, which never reaches librbd again. */
int cfs_rbd_aio(struct rbd_target *t, uint8_t op, uint64_t offset_bytes, uint64_t length_bytes,
		void *buf, rbd_callback_t cb, void *arg);
/* The result of a finished request, and the completion released: 0, or a
 * positive errno (ENOSPC for a full cluster or pool quota, else EIO). An
 * error that says another client took the image over fences the target
 * (one log line). */
int cfs_rbd_aio_result(struct rbd_target *t, rbd_completion_t c, uint8_t op, uint64_t length_bytes);

/* printf-style, through cfg->log (or stderr): one line, no newline. */
void cfs_rbd_say(const struct rbd_target *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* rbd_lock.c: take the image's exclusive lock as cfg->ceph asks (waiting,
 * breaking a holder that is gone, taking over), and write the holder
 * record. 0, or -errno after saying why (naming the holder). */
int cfs_rbd_lock_take(struct rbd_target *t, const struct cfs_io_ceph *ceph);
/* Remove the holder record and release the lock (unmount). */
void cfs_rbd_lock_give(struct rbd_target *t);

#endif /* CFS_IOPATH_RBD_H */
