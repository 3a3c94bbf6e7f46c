// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * backend_rbd.c — backend "rbd": a store on a Ceph RBD image, reached with
 * librbd's asynchronous API (no kernel module: librbd is how QEMU and fio
 * reach RBD). The exclusive lock that fences other hosts is rbd_lock.c's.
 *
 * Target: one librados connection, one pool context and one open image per
 * struct cfs_io, shared by every queue: librbd's image handle is
 * thread-safe, and a second handle in the same process would be a second
 * lock client that the first one (holding the lock in exclusive mode)
 * refuses writes to.
 *
 * Requests. queue() hands the request to librbd at once (rbd_aio_read,
 * _write, _flush, _discard, _write_zeroes with a completion whose argument
 * is the request); librbd has no batch to submit, so submit() only counts.
 * Reads land in the caller's buffer and writes are taken from it: the only
 * copies are librbd's own. A completion allocated by librbd per request is
 * the one allocation on this path, and it is librbd's (its C API has no
 * reusable completion).
 *
 * Completions. librbd runs the completion callback on its own completion
 * thread (one for the process, never one per request). The callback reads
 * the result, releases the completion, pushes the request on its queue's
 * lock-free done list and, when the list was empty, writes that queue's
 * eventfd: the loop that owns the queue wakes as it does for io_uring, and
 * done() runs there, in reap(). Why not rbd_set_image_notification() and
 * rbd_poll_io_events(): librbd's notification is one eventfd per image, and
 * every queue shares the image; each loop would wake for every completion
 * and hand the others' on. The callback sorts them where they finish, with
 * the same single eventfd write librbd's notification makes.
 *
 * A request marked CFS_IO_REQ_DONE_ANY_THREAD skips the list: the callback
 * runs done() itself (through cfs_ioq_complete), so the caller's next step
 * (the daemon's reply to a READ) starts on librbd's thread instead of after
 * the eventfd has woken the queue's loop, one thread wake-up less per
 * request. Nothing
 * of the queue is touched after it: once cfs_ioq_inflight() drops, the
 * queue may be destroyed. Such requests write no eventfd, so a reap that
 * must wait (queue destruction, cfs_ioq_sync) looks at the in-flight count
 * every millisecond once a queue has seen one.
 *
 * Results: librbd gives the byte count for a read, 0 for a write, flush,
 * discard or zeroing. A read that returns fewer bytes than asked (cannot
 * happen inside the image) fails with -EIO. Errors reach done() as -EIO,
 * except -ENOSPC/-EDQUOT (a full cluster or a pool quota) as -ENOSPC; the
 * caller counts them (the chunk's statistics). An OSD that dies is not an
 * error here: librados resends to the new primary and the request only
 * takes longer.
 *
 * Fencing. -ESHUTDOWN (Ceph's EBLOCKLISTED: another host took the store
 * over and blocklisted this client) or -EROFS on a write (the exclusive lock
 * went to another client) marks the target fenced: one line is logged, and
 * from then on every request fails with -EIO without reaching librbd. The
 * cluster already refuses this client's writes; stopping here keeps the
 * daemon from retrying into it.
 *
 * Configuration chunkfs sets over the user's ceph.conf: rbd_cache=false
 * (chunkfs is O_DIRECT storage for databases that cache for themselves:
 * librbd's writeback cache would add a copy and make every flush a write)
 * and client_mount_timeout=10 (an unreachable cluster is an error in
 * seconds, not in five minutes). librbd's copy of each write buffer stays
 * (rbd_disable_zero_copy_writes keeps its default, true): with zero-copy
 * writes, librbd (Ceph 16) holds a write's completion until the last
 * reference to the caller's buffer is gone, and a write it fails in its
 * exclusive-lock layer (this client blocklisted) never completed: the fenced
 * daemon's write hung instead of failing with EIO (ceph_takeover.sh, 3 runs
 * of 6).
 *
 * Geometry: 512-byte logical sectors (librbd takes any byte range; 512 is
 * what a database's O_DIRECT expects of a disk), 4096-byte physical sectors
 * (the unit chunkfs assumes a crash cannot tear; a RADOS object write is
 * atomic as a whole), discard supported.
 *
 * What this file does not do: parse names (source.c), decide who may hold
 * the image (rbd_lock.c), retry what librbd failed (librados retries what
 * can be retried).
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "iopath/rbd.h"

#define RBD_LOGICAL_SECTOR 512u
#define RBD_PHYSICAL_SECTOR 4096u
#define RBD_MOUNT_TIMEOUT "10" /* seconds: client_mount_timeout */
#define RBD_LINE_BYTES 768u

/* req->iop_flags while the request is with librbd or on a done list. */
#define RBD_DONE_ERROR 1u /* done_bytes holds a positive errno */

struct rbd_queue {
	_Atomic(struct cfs_io_req *) done_head; /* finished, LIFO, by iop_next */
	int event_fd;				/* written when done_head fills */
	unsigned staged;			/* handed to librbd since the last submit */
	atomic_bool direct_seen; /* a CFS_IO_REQ_DONE_ANY_THREAD request was queued */
};

void cfs_rbd_say(const struct rbd_target *t, const char *fmt, ...)
{
	char line[RBD_LINE_BYTES];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (t->log)
		t->log(t->log_arg, line);
	else
		fprintf(stderr, "chunkfs: %s\n", line);
}

/* ---- target ------------------------------------------------------------------ */

static void conf_value(rados_t cluster, const char *option, char *out, size_t out_bytes)
{
	if (rados_conf_get(cluster, option, out, out_bytes) < 0 || !out[0])
		snprintf(out, out_bytes, "(not set)");
}

/* Connect as cfg->ceph says; 0 or -errno after saying why. */
static int connect_cluster(struct rbd_target *t, const struct cfs_io_ceph *ceph)
{
	const char *cluster_name = ceph->cluster ? ceph->cluster : "ceph";
	char mons[256], keyring[512];
	int ret;

	snprintf(t->user, sizeof(t->user), "client.%s", ceph->id ? ceph->id : "admin");
	ret = rados_create2(&t->cluster, cluster_name, t->user, 0);
	if (ret < 0) {
		t->cluster = NULL;
		cfs_rbd_say(t, "%s: cannot set up a Ceph client: %s", t->source, strerror(-ret));
		return ret;
	}
	ret = rados_conf_read_file(t->cluster, ceph->conf);
	if (ret < 0) {
		if (ceph->conf)
			cfs_rbd_say(t, "%s: cannot read the Ceph configuration %s: %s", t->source,
				    ceph->conf, strerror(-ret));
		else
			cfs_rbd_say(t,
				    "%s: no Ceph configuration found ($CEPH_CONF, "
				    "/etc/ceph/%s.conf, ~/.ceph/%s.conf, ./%s.conf): name one "
				    "(chunkfs -o ceph_conf=PATH, mkchunkfs and fsck.chunkfs "
				    "--ceph-conf PATH)",
				    t->source, cluster_name, cluster_name, cluster_name);
		return ret;
	}
	ret = rados_conf_parse_env(t->cluster, NULL);
	if (ret == 0)
		ret = rados_conf_set(t->cluster, "rbd_cache", "false");
	if (ret == 0)
		ret = rados_conf_set(t->cluster, "client_mount_timeout", RBD_MOUNT_TIMEOUT);
	if (ret < 0) {
		cfs_rbd_say(t, "%s: bad Ceph configuration ($CEPH_ARGS): %s", t->source,
			    strerror(-ret));
		return ret;
	}
	ret = rados_connect(t->cluster);
	if (ret == 0)
		return 0;
	conf_value(t->cluster, "mon_host", mons, sizeof(mons));
	conf_value(t->cluster, "keyring", keyring, sizeof(keyring));
	switch (ret) {
	case -ETIMEDOUT:
		cfs_rbd_say(t,
			    "%s: no Ceph monitor answered within %s s (mon_host %s): is the "
			    "cluster up and reachable from here?",
			    t->source, RBD_MOUNT_TIMEOUT, mons);
		break;
	case -EACCES:
	case -EPERM:
		cfs_rbd_say(t,
			    "%s: the cluster refused %s: wrong key, or no such user (keyring "
			    "%s)",
			    t->source, t->user, keyring);
		break;
	case -ENOENT:
		cfs_rbd_say(t, "%s: no key for %s in the keyring (%s)", t->source, t->user,
			    keyring);
		break;
	default:
		cfs_rbd_say(t, "%s: cannot connect to the Ceph cluster (mon_host %s) as %s: %s",
			    t->source, mons, t->user, strerror(-ret));
	}
	return ret;
}

static void target_free(struct rbd_target *t)
{
	if (t->image)
		rbd_close(t->image);
	if (t->ioctx)
		rados_ioctx_destroy(t->ioctx);
	if (t->cluster)
		rados_shutdown(t->cluster);
	free(t);
}

/* "pool P", "namespace N of pool P": where an image was looked for. */
static void where(const struct rbd_target *t, char *out, size_t out_bytes)
{
	if (t->name.nspace[0])
		snprintf(out, out_bytes, "namespace %s of pool %s", t->name.nspace, t->name.pool);
	else
		snprintf(out, out_bytes, "pool %s", t->name.pool);
}

static int open_image(struct rbd_target *t, const struct cfs_io_config *cfg)
{
	char place[2 * CFS_RBD_NAME_BYTES + 32];
	uint64_t features = 0;
	int ret;

	ret = rados_ioctx_create(t->cluster, t->name.pool, &t->ioctx);
	if (ret < 0) {
		t->ioctx = NULL;
		if (ret == -ENOENT)
			cfs_rbd_say(t, "%s: the cluster has no pool %s", t->source, t->name.pool);
		else
			cfs_rbd_say(t, "%s: pool %s: %s", t->source, t->name.pool, strerror(-ret));
		return ret;
	}
	rados_ioctx_set_namespace(t->ioctx, t->name.nspace);
	where(t, place, sizeof(place));
	/* Read-only handles take no lock (mkchunkfs -D and -n read a live
	 * store's superblock); every other open holds the lock. */
	if (cfg->exclusive)
		ret = rbd_open(t->ioctx, t->name.image, &t->image, NULL);
	else
		ret = rbd_open_read_only(t->ioctx, t->name.image, &t->image, NULL);
	if (ret < 0) {
		t->image = NULL;
		if (ret == -ENOENT)
			cfs_rbd_say(t, "%s: no image %s in %s (rbd create --size SIZE %s/%s%s%s)",
				    t->source, t->name.image, place, t->name.pool, t->name.nspace,
				    t->name.nspace[0] ? "/" : "", t->name.image);
		else if (ret == -EACCES || ret == -EPERM)
			cfs_rbd_say(t, "%s: %s may not open images in %s (its caps)", t->source,
				    t->user, place);
		else
			cfs_rbd_say(t, "%s: cannot open image %s in %s: %s", t->source,
				    t->name.image, place, strerror(-ret));
		return ret;
	}
	if (!cfg->exclusive)
		return 0;
	ret = rbd_get_features(t->image, &features);
	if (ret == 0 && !(features & RBD_FEATURE_EXCLUSIVE_LOCK)) {
		cfs_rbd_say(t,
			    "%s: the image has no exclusive-lock feature, which chunkfs needs "
			    "to keep other hosts from writing to it (rbd feature enable %s/%s%s%s "
			    "exclusive-lock)",
			    t->source, t->name.pool, t->name.nspace, t->name.nspace[0] ? "/" : "",
			    t->name.image);
		return -EOPNOTSUPP;
	}
	return ret;
}

int cfs_rbd_store_open(const struct cfs_io_config *cfg, struct cfs_io_geometry *geo,
		       struct rbd_target **out)
{
	struct rbd_target *t;
	uint64_t size_bytes;
	const char *why;
	int ret;

	t = calloc(1, sizeof(*t));
	if (!t) {
		fprintf(stderr, "chunkfs: %s: out of memory\n", cfg->path ? cfg->path : "rbd");
		return -ENOMEM;
	}
	atomic_init(&t->fenced, false);
	snprintf(t->source, sizeof(t->source), "%s", cfg->path ? cfg->path : "rbd");
	t->log = cfg->log;
	t->log_arg = cfg->log_arg;
	ret = cfg->path ? cfs_rbd_name_parse(cfg->path, &t->name, &why) : -EINVAL;
	if (ret < 0) {
		if (cfg->path)
			cfs_rbd_say(t, "%s: %s", cfg->path, why);
		goto out_free;
	}
	ret = connect_cluster(t, &cfg->ceph);
	if (ret < 0)
		goto out_free;
	ret = open_image(t, cfg);
	if (ret < 0)
		goto out_free;
	ret = rbd_get_size(t->image, &size_bytes);
	if (ret < 0) {
		cfs_rbd_say(t, "%s: cannot read the image size: %s", t->source, strerror(-ret));
		goto out_free;
	}
	if (cfg->size_bytes) {
		if (cfg->size_bytes > size_bytes) {
			/* never address bytes the image does not have */
			cfs_rbd_say(t, "%s: the image has %llu bytes, %llu were asked for",
				    t->source, (unsigned long long)size_bytes,
				    (unsigned long long)cfg->size_bytes);
			ret = -EINVAL;
			goto out_free;
		}
		size_bytes = cfg->size_bytes;
	}
	if (cfg->align_bytes && cfg->align_bytes != RBD_LOGICAL_SECTOR) {
		cfs_rbd_say(t, "%s: an RBD image has %u-byte sectors, not %u", t->source,
			    RBD_LOGICAL_SECTOR, cfg->align_bytes);
		ret = -EINVAL;
		goto out_free;
	}
	if (cfg->exclusive) {
		ret = cfs_rbd_lock_take(t, &cfg->ceph);
		if (ret < 0)
			goto out_free;
	}
	geo->size_bytes = size_bytes & ~(uint64_t)(RBD_LOGICAL_SECTOR - 1);
	geo->logical_sector_bytes = RBD_LOGICAL_SECTOR;
	geo->physical_sector_bytes = RBD_PHYSICAL_SECTOR;
	geo->mem_align_bytes = RBD_LOGICAL_SECTOR;
	geo->is_block_device = false;
	geo->direct = true; /* no cache between us and the OSDs */
	geo->discard_supported = !cfg->read_only;
	geo->backend = "rbd";
	*out = t;
	return 0;

out_free:
	target_free(t);
	return ret;
}

void cfs_rbd_store_close(struct rbd_target *t)
{
	if (t->locked)
		cfs_rbd_lock_give(t);
	target_free(t);
}

static int rbd_target_open(struct cfs_io *io, const struct cfs_io_config *cfg)
{
	struct rbd_target *t;
	int ret = cfs_rbd_store_open(cfg, &io->geo, &t);

	if (ret == 0)
		io->priv = t;
	return ret;
}

static void rbd_target_close(struct cfs_io *io)
{
	cfs_rbd_store_close(io->priv);
	io->priv = NULL;
}

/* ---- queues ------------------------------------------------------------------ */

static int rbd_queue_init(struct cfs_ioq *q, const struct cfs_ioq_config *cfg)
{
	struct rbd_queue *rq;

	(void)cfg;
	rq = calloc(1, sizeof(*rq));
	if (!rq)
		return -ENOMEM;
	atomic_init(&rq->done_head, NULL);
	atomic_init(&rq->direct_seen, false);
	/* Made now, not on demand: reap() sleeps on it too. */
	rq->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (rq->event_fd < 0) {
		free(rq);
		return -errno;
	}
	q->priv = rq;
	return 0;
}

static void rbd_queue_fini(struct cfs_ioq *q)
{
	struct rbd_queue *rq = q->priv;

	close(rq->event_fd);
	free(rq);
	q->priv = NULL;
}

static int rbd_event_fd(struct cfs_ioq *q)
{
	return ((struct rbd_queue *)q->priv)->event_fd;
}

/* Record a result in the request and put it on its queue's done list; any
 * thread (librbd's completion thread, or queue() for a fenced target). */
static void finish(struct cfs_ioq *q, struct cfs_io_req *req, int err)
{
	struct rbd_queue *rq = q->priv;
	struct cfs_io_req *head;
	uint64_t one = 1;

	req->iop_flags = err ? RBD_DONE_ERROR : 0;
	req->done_bytes = (uint32_t)err;
	head = atomic_load_explicit(&rq->done_head, memory_order_relaxed);
	do
		req->iop_next = head;
	while (!atomic_compare_exchange_weak_explicit(&rq->done_head, &head, req,
						      memory_order_release, memory_order_relaxed));
	/* A non-empty list already has a wakeup on its way (whoever made it
	 * non-empty wrote), and the reaper takes the whole list at once. */
	if (!head && write(rq->event_fd, &one, sizeof(one)) != sizeof(one)) {
		/* the counter cannot overflow: the reaper reads it */
	}
}

static void fence(struct rbd_target *t, int err)
{
	if (atomic_exchange(&t->fenced, true))
		return;
	cfs_rbd_say(t,
		    "%s: %s: this client was fenced (another host took the store over, or "
		    "its lock was broken); no more I/O: applications get EIO",
		    t->source,
		    err == -ESHUTDOWN ? "blocklisted by the cluster"
				      : "lost the image's exclusive lock");
}

int cfs_rbd_aio_result(struct rbd_target *t, rbd_completion_t c, uint8_t op, uint64_t length_bytes)
{
	ssize_t r = rbd_aio_get_return_value(c);

	rbd_aio_release(c);
	if (r < 0) {
		if (r == -ESHUTDOWN || (r == -EROFS && op != CFS_IO_READ))
			fence(t, (int)r);
		return r == -ENOSPC || r == -EDQUOT ? ENOSPC : EIO;
	}
	if (op == CFS_IO_READ && (uint64_t)r != length_bytes)
		return EIO;
	return 0;
}

int cfs_rbd_aio(struct rbd_target *t, uint8_t op, uint64_t offset_bytes, uint64_t length_bytes,
		void *buf, rbd_callback_t cb, void *arg)
{
	rbd_completion_t c;
	int ret;

	if (atomic_load_explicit(&t->fenced, memory_order_relaxed))
		return -ESHUTDOWN;
	ret = rbd_aio_create_completion(arg, cb, &c);
	if (ret < 0)
		return ret;
	switch (op) {
	case CFS_IO_READ:
		ret = rbd_aio_read(t->image, offset_bytes, length_bytes, buf, c);
		break;
	case CFS_IO_WRITE:
		ret = rbd_aio_write(t->image, offset_bytes, length_bytes, buf, c);
		break;
	case CFS_IO_FLUSH:
		ret = rbd_aio_flush(t->image, c);
		break;
	case CFS_IO_DISCARD:
		ret = rbd_aio_discard(t->image, offset_bytes, length_bytes, c);
		break;
	case CFS_IO_ZERO:
		ret = rbd_aio_write_zeroes(t->image, offset_bytes, length_bytes, c, 0, 0);
		break;
	default:
		CFS_ASSERT(!"op validated by cfs_ioq_queue");
	}
	if (ret < 0) {
		/* Refused before it started: the callback will not run. */
		rbd_aio_release(c);
		return ret;
	}
	return 0;
}

/* The result done() gets for a request librbd finished with err (0 or a
 * positive errno); done_bytes set to match. */
static int final_result(struct cfs_io_req *req, int err)
{
	int res = err ? -err : req->op == CFS_IO_FLUSH ? 0 : (int)req->length_bytes;

	req->done_bytes = res < 0 ? 0 : req->length_bytes;
	return res;
}

/* librbd's completion thread. */
static void rbd_complete(rbd_completion_t c, void *arg)
{
	struct cfs_io_req *req = arg;
	struct cfs_ioq *q = req->iop_private;
	int err = cfs_rbd_aio_result(q->io->priv, c, req->op, req->length_bytes);

	if (req->flags & CFS_IO_REQ_DONE_ANY_THREAD)
		cfs_ioq_complete(q, req, final_result(req, err)); /* last use of q */
	else
		finish(q, req, err);
}

static int rbd_queue_req(struct cfs_ioq *q, struct cfs_io_req *req)
{
	struct rbd_queue *rq = q->priv;
	int ret;

	req->iop_private = q;
	if ((req->flags & CFS_IO_REQ_DONE_ANY_THREAD) &&
	    !atomic_load_explicit(&rq->direct_seen, memory_order_relaxed))
		atomic_store_explicit(&rq->direct_seen, true, memory_order_relaxed);
	ret = cfs_rbd_aio(q->io->priv, req->op, req->offset_bytes, req->length_bytes, req->buf,
			  rbd_complete, req);
	if (ret == -ESHUTDOWN) { /* fenced: never reaches librbd */
		finish(q, req, EIO);
		ret = 0;
	}
	if (ret < 0)
		return ret;
	rq->staged++;
	return 0;
}

static int rbd_submit(struct cfs_ioq *q)
{
	struct rbd_queue *rq = q->priv;
	int n = (int)rq->staged;

	rq->staged = 0;
	return n;
}

/* Run done() for everything on the done list, oldest first; how many. */
static unsigned complete_list(struct cfs_ioq *q)
{
	struct rbd_queue *rq = q->priv;
	struct cfs_io_req *list, *fifo = NULL, *req;
	unsigned n = 0;

	list = atomic_exchange_explicit(&rq->done_head, NULL, memory_order_acquire);
	while (list) { /* reverse: the list is LIFO */
		req = list;
		list = req->iop_next;
		req->iop_next = fifo;
		fifo = req;
	}
	while (fifo) {
		req = fifo;
		fifo = req->iop_next;
		req->iop_next = NULL;
		cfs_ioq_complete(q, req,
				 final_result(req, req->iop_flags & RBD_DONE_ERROR
							   ? (int)req->done_bytes
							   : 0));
		n++;
	}
	return n;
}

static int rbd_reap(struct cfs_ioq *q, unsigned min_complete)
{
	struct rbd_queue *rq = q->priv;
	unsigned completed = 0, inflight_before = cfs_ioq_inflight(q);

	for (;;) {
		struct pollfd p = {.fd = rq->event_fd, .events = POLLIN};
		bool direct = atomic_load_explicit(&rq->direct_seen, memory_order_relaxed);
		uint64_t v;

		completed += complete_list(q);
		if (completed >= min_complete)
			break;
		/* Requests done on librbd's thread wrote no eventfd: they
		 * count as they leave the in-flight count. */
		if (direct && cfs_ioq_inflight(q) + min_complete <= inflight_before)
			break;
		if (poll(&p, 1, direct ? 1 : -1) < 0 && errno != EINTR)
			return completed ? (int)completed : -errno;
		if (read(rq->event_fd, &v, sizeof(v)) < 0) {
			/* EAGAIN: the event loop read it first; the list tells */
		}
	}
	return (int)completed;
}

const struct cfs_backend_ops cfs_backend_rbd = {
	.name = "rbd",
	.version = CFS_BACKEND_OPS_VERSION,
	.open = rbd_target_open,
	.close = rbd_target_close,
	.queue_init = rbd_queue_init,
	.queue_fini = rbd_queue_fini,
	.queue = rbd_queue_req,
	.submit = rbd_submit,
	.reap = rbd_reap,
	.event_fd = rbd_event_fd,
};
