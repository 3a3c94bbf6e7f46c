// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * backend_uring.c — the "uring" backend: a block device or an image file,
 * opened with O_DIRECT, driven by one io_uring per queue.
 *
 * Per queue: one ring (SQ = depth entries, CQ = 2 x depth), the backing fd
 * registered as fixed file 0, the queue's arena registered as fixed buffers
 * (one iovec per GiB: buddy blocks never straddle one, see buf.c), and, on
 * request, an eventfd for cfs_ioq_event_fd().
 *
 * Threads. queue() and submit() run under q->submit_lock (the core takes it):
 * the queue's owner submits, and the thread that reaps may submit too (done()
 * callbacks queue follow-up I/O, short transfers are resubmitted from reap).
 * reap() runs in one thread at a time per queue (iopath.h); it is the only
 * reader of the completion ring, and every done() runs in that thread. A
 * reap that has to sleep first submits whatever is staged, under the lock.
 *
 * Ring flags, and why not the others:
 *   SUBMIT_ALL  one bad SQE must not hold back the rest of a batch.
 *   CQSIZE      2 x depth: requests resumed after a range lock may exceed
 *               depth briefly; the kernel keeps overflow anyway (NODROP).
 *   Default queues: no SINGLE_ISSUER / DEFER_TASKRUN, since two threads may
 *               submit (above); and no COOP_TASKRUN: the completion work of
 *               a read/write runs in the task that submitted it, and COOP
 *               stops the kernel from interrupting that task to run it, so
 *               a reaper in another thread would wait until the submitter
 *               happens to enter the kernel (or a timer tick).
 *   CFS_IOQ_SINGLE_THREAD queues: submitter == reaper, so the reaper's own
 *               wait is where completion work runs. SINGLE_ISSUER +
 *               DEFER_TASKRUN + TASKRUN_FLAG (the flag makes a
 *               non-sleeping reap enter the kernel when work is pending),
 *               falling back to COOP_TASKRUN, then to nothing, on older
 *               kernels. fio's io_uring engine uses the same set; measured
 *               in bench/README.md. A reap that must sleep submits and
 *               waits in one system call.
 *   no SQPOLL: a polling kernel thread costs a core; we have two.
 *   no registered ring fd: it is per thread, and default queues are used
 *               from two.
 *
 * Operations:
 *   READ/WRITE  read/write, or read_fixed/write_fixed when the buffer lies
 *               in the registered arena.
 *   FLUSH       fsync(DATASYNC) of the backing fd.
 *   DISCARD     file: fallocate(PUNCH_HOLE|KEEP_SIZE) (reads back zeros).
 *               block device: IORING_OP_URING_CMD BLOCK_URING_CMD_DISCARD
 *               (asynchronous, Linux 6.12+). fallocate(PUNCH_HOLE) on a
 *               block device is write-zeroes, not discard, and
 *               FALLOC_FL_NO_HIDE_STALE is gone (EOPNOTSUPP on 6.18). On
 *               an older kernel the command fails with EOPNOTSUPP once; from
 *               then on a NOP carries the request and the reaping thread
 *               issues BLKDISCARD synchronously when the NOP completes
 *               (documented stall; only on kernels without the command).
 *   ZERO        fallocate(ZERO_RANGE|KEEP_SIZE): block devices turn it into
 *               write-zeroes with a fallback to writing zeros; files get
 *               unwritten extents. A filesystem without ZERO_RANGE (tmpfs)
 *               gets PUNCH_HOLE instead, which also reads back zeros there.
 *
 * Retries (bounded by CFS_IO_RETRY_MAX per request): a short read/write
 * advances done_bytes and resubmits the rest; a read or write that makes no
 * progress (a read at the end of a file that shrank) counts as a short
 * attempt too, and when the budget runs out the request fails with -EIO and
 * stats->err_short (err_eio counts it as well: done() saw -EIO). -EAGAIN and
 * -EINTR are resubmitted as they are.
 *
 * Pools (iopath.h, "pools"): the target holds up to CFS_IO_STORES_MAX
 * stores (one fd each, or an RBD image reached through librbd: see "RBD
 * stores" below) and a route table from pool addresses to stores. A
 * request is routed when its SQE is prepared (again for each resubmission);
 * store 0 is the ring's registered file, other stores go by plain fd. A
 * FLUSH with more than one store open becomes one fsync per store that
 * needs it ("flush parts", each its own SQE), completed when the last one
 * is.
 *
 * What this file does not do: it does not validate requests (io.c did), it
 * does not touch statistics except short_retries/err_short, and it never
 * calls done() directly (cfs_ioq_complete() does).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <liburing.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fs/base/counter.h"
#include "iopath/backend.h"
#include "iopath/rbd.h"

#ifndef BLOCK_URING_CMD_DISCARD
#define BLOCK_URING_CMD_DISCARD _IO(0x12, 0) /* linux/fs.h, 6.12+ */
#endif

#define REAP_BATCH 64u
#define REG_BUF_SHIFT 30 /* the kernel caps one registered buffer at 1 GiB */

/* Low bits of user_data: what the SQE was, beyond req->op. */
#define TAG_DISCARD_IOCTL 1ull /* a NOP; the reaper issues BLKDISCARD */
#define TAG_ZERO_PUNCH 2ull    /* ZERO carried out as PUNCH_HOLE */
#define TAG_FLUSH_PART 4ull    /* user_data is a struct flush_part, not a request */
#define TAG_MASK 7ull
_Static_assert(_Alignof(struct cfs_io_req) > TAG_MASK, "user_data tags need alignment");

struct uring_store {
	atomic_int fd;			  /* -1: no file store at this index (atomic: stores come
					   * and go while other threads route requests) */
	_Atomic(struct rbd_target *) rbd; /* an RBD image: librbd, not the ring */
	bool is_blk;
	atomic_bool zero_by_punch;    /* ZERO_RANGE unsupported (tmpfs) */
	atomic_bool discard_by_ioctl; /* no BLOCK_URING_CMD_DISCARD (< 6.12) */
	atomic_bool dirty;	      /* a write, zero or discard completed since the
				       * store's last flush */
	atomic_ulong flushes;	      /* pool flush parts that reached it (tests) */
	struct cfs_io_geometry geo;   /* as opened (its own size) */
};

/* A published route table: immutable, freed at close. */
struct uring_routes {
	struct uring_routes *older; /* every table ever published */
	unsigned count;
	struct cfs_io_route route[]; /* sorted by pool_offset_bytes */
};

struct uring_target {
	struct uring_store store[CFS_IO_STORES_MAX];
	atomic_uint stores;		       /* highest store index + 1 */
	_Atomic(struct uring_routes *) routes; /* NULL: store 0 at its own offsets */
	pthread_mutex_t admin_lock;	       /* add/drop stores, publish routes */
	const struct cfs_io_config *cfg;       /* io->cfg: the first store's policy */
};

/* One fsync of a pool FLUSH (TAG_FLUSH_PART). */
struct flush_part {
	struct cfs_io_req *req;
	unsigned store;
	struct flush_part *next; /* the queue's free list; the RBD done list */
	struct cfs_ioq *q;	 /* an RBD part: the queue it finishes on */
	int rbd_err;		 /* an RBD part: 0 or a positive errno */
} __attribute__((aligned(8)));

#define FLUSH_PARTS (2 * CFS_IO_STORES_MAX)

struct uring_queue {
	struct io_uring ring;
	/* Written by the ring for every completion once registered (when the
	 * event loop asks for it, or an RBD store is used) and by librbd's
	 * completions: one fd for a loop to wait on. */
	int event_fd;
	bool event_fd_registered;
	/* Requests and flush parts librbd finished (LIFO, by iop_next and
	 * next), and how many are still with librbd. */
	_Atomic(struct cfs_io_req *) rbd_done;
	_Atomic(struct flush_part *) rbd_parts_done;
	atomic_uint rbd_inflight;
	bool file_registered;
	bool single_thread; /* CFS_IOQ_SINGLE_THREAD */
	struct flush_part parts[FLUSH_PARTS];
	struct flush_part *free_parts; /* under q->submit_lock */
};

/* ---- target ----------------------------------------------------------------- */

/* Punching a hole beyond EOF changes nothing visible but tells us whether
 * the filesystem can punch at all. */
static bool file_can_punch(int fd, uint64_t size_bytes)
{
	uint64_t beyond = (size_bytes + (2u << 20)) & ~((uint64_t)(1u << 20) - 1);

	return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)beyond, 4096) == 0;
}

static int open_target(const struct cfs_io_config *cfg, bool *direct)
{
	int flags = (cfg->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	struct stat st;
	int fd;

	if (cfg->exclusive && stat(cfg->path, &st) == 0 && S_ISBLK(st.st_mode))
		flags |= O_EXCL; /* a mounted or opened-exclusive device refuses */
	*direct = cfg->dio != CFS_DIO_OFF;
	fd = open(cfg->path, flags | (*direct ? O_DIRECT : 0));
	if (fd >= 0 || errno != EINVAL || !*direct)
		return fd < 0 ? -errno : fd;

	if (cfg->dio == CFS_DIO_REQUIRED) {
		fprintf(stderr,
			"chunkfs: %s: the filesystem refuses O_DIRECT and direct I/O is "
			"required; put the image on a filesystem with direct I/O or allow "
			"buffered I/O (dio=optional)\n",
			cfg->path);
		return -EINVAL;
	}
	fprintf(stderr,
		"chunkfs: %s: the filesystem refuses O_DIRECT; falling back to buffered "
		"I/O (dio=optional): data is cached twice and flushes cost more\n",
		cfg->path);
	*direct = false;
	fd = open(cfg->path, flags);
	return fd < 0 ? -errno : fd;
}

/* A store at this index: a file or an RBD image. */
static bool store_used(const struct uring_store *st)
{
	return atomic_load_explicit(&st->fd, memory_order_relaxed) >= 0 ||
	       atomic_load_explicit(&st->rbd, memory_order_relaxed);
}

static void close_store(struct uring_store *st)
{
	struct rbd_target *rbd = atomic_exchange(&st->rbd, NULL);

	if (rbd)
		cfs_rbd_store_close(rbd);
	if (st->fd >= 0)
		close(st->fd);
	atomic_store(&st->fd, -1);
}

/* Open one store into st (its fd, or its RBD image, and geometry). 0 or
 * -errno. */
static int open_store(const struct cfs_io_config *cfg, struct uring_store *st)
{
	struct cfs_io_geometry *geo = &st->geo;
	uint64_t size_bytes;
	struct stat sb;
	bool direct;
	int ret;

	memset(geo, 0, sizeof(*geo));
	atomic_init(&st->zero_by_punch, false);
	atomic_init(&st->discard_by_ioctl, false);
	atomic_init(&st->dirty, false);
	atomic_init(&st->flushes, 0);
	if (cfs_source_is_rbd(cfg->path)) {
		/* librbd says why it failed; its lock fences the image as a
		 * store of its own (rbd_lock.c). */
		struct rbd_target *rbd;

		ret = cfs_rbd_store_open(cfg, geo, &rbd);
		if (ret)
			return ret;
		st->is_blk = false;
		atomic_store(&st->rbd, rbd);
		return 0;
	}
	ret = open_target(cfg, &direct);
	if (ret < 0)
		return ret;
	atomic_store(&st->fd, ret);
	if (fstat(st->fd, &sb) < 0) {
		ret = -errno;
		goto out_close;
	}
	if (S_ISBLK(sb.st_mode)) {
		if (ioctl(st->fd, BLKGETSIZE64, &size_bytes) < 0) {
			ret = -errno;
			goto out_close;
		}
	} else if (S_ISREG(sb.st_mode)) {
		size_bytes = (uint64_t)sb.st_size;
	} else {
		ret = -ENODEV; /* a directory, a pipe, a character device */
		goto out_close;
	}
	st->is_blk = S_ISBLK(sb.st_mode);

	ret = cfs_io_probe_alignment(st->fd, geo);
	if (ret)
		goto out_close;
	if (cfg->align_bytes) {
		uint32_t a = cfg->align_bytes;

		/* Stricter than the target is fine (a database tested here then
		 * works on a 4Kn device); looser would be refused by it. */
		if ((a & (a - 1)) || a < geo->logical_sector_bytes || a > CFS_IO_SECTOR_MAX) {
			ret = -EINVAL;
			goto out_close;
		}
		geo->logical_sector_bytes = a;
		if (geo->mem_align_bytes < a)
			geo->mem_align_bytes = a;
		if (geo->physical_sector_bytes < a)
			geo->physical_sector_bytes = a;
	}
	if (geo->logical_sector_bytes > CFS_IO_SECTOR_MAX) {
		fprintf(stderr, "chunkfs: %s: %u-byte sectors are not supported (max %u)\n",
			cfg->path, geo->logical_sector_bytes, CFS_IO_SECTOR_MAX);
		ret = -EOPNOTSUPP;
		goto out_close;
	}
	if (cfg->size_bytes) {
		if (cfg->size_bytes > size_bytes) {
			ret = -EINVAL; /* never address bytes the target does not have */
			goto out_close;
		}
		size_bytes = cfg->size_bytes;
	}
	geo->size_bytes = size_bytes & ~(uint64_t)(geo->logical_sector_bytes - 1);
	geo->direct = direct;
	geo->is_block_device = st->is_blk;
	geo->backend = "uring";
	if (cfg->read_only)
		geo->discard_supported = false;
	else if (st->is_blk)
		geo->discard_supported =
			cfs_io_sysfs_queue_attr(sb.st_rdev, "discard_max_bytes") > 0;
	else
		geo->discard_supported = file_can_punch(st->fd, (uint64_t)sb.st_size);
	return 0;

out_close:
	close(st->fd);
	st->fd = -1;
	return ret;
}

static int uring_open(struct cfs_io *io, const struct cfs_io_config *cfg)
{
	struct uring_target *t;
	int ret;

	if (!cfg->path)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (unsigned i = 0; i < CFS_IO_STORES_MAX; i++) {
		atomic_init(&t->store[i].fd, -1);
		atomic_init(&t->store[i].rbd, NULL);
	}
	ret = pthread_mutex_init(&t->admin_lock, NULL);
	if (ret) {
		free(t);
		return -ret;
	}
	ret = open_store(cfg, &t->store[0]);
	if (ret) {
		pthread_mutex_destroy(&t->admin_lock);
		free(t);
		return ret;
	}
	atomic_init(&t->stores, 1);
	atomic_init(&t->routes, NULL);
	t->cfg = &io->cfg;
	io->geo = t->store[0].geo;
	io->priv = t;
	return 0;
}

static void uring_close(struct cfs_io *io)
{
	struct uring_target *t = io->priv;
	struct uring_routes *r = atomic_load(&t->routes);

	for (unsigned i = 0; i < CFS_IO_STORES_MAX; i++)
		if (store_used(&t->store[i]))
			close_store(&t->store[i]);
	while (r) {
		struct uring_routes *older = r->older;

		free(r);
		r = older;
	}
	pthread_mutex_destroy(&t->admin_lock);
	free(t);
	io->priv = NULL;
}

/* ---- pools: stores and routes -------------------------------------------------- */

/* The store and store offset of [offset, +length), or -EINVAL when no route
 * holds all of it. Lock-free: the table is immutable once published. */
static int route(const struct uring_target *t, uint64_t offset, uint64_t length, unsigned *store,
		 uint64_t *store_offset)
{
	const struct uring_routes *r =
		atomic_load_explicit(&((struct uring_target *)t)->routes, memory_order_acquire);
	unsigned lo = 0, hi;

	if (!r) {
		*store = 0;
		*store_offset = offset;
		return 0;
	}
	hi = r->count;
	while (lo < hi) { /* the last route starting at or before offset */
		unsigned mid = (lo + hi) / 2;

		if (r->route[mid].pool_offset_bytes <= offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -EINVAL;
	{
		const struct cfs_io_route *x = &r->route[lo - 1];
		uint64_t in = offset - x->pool_offset_bytes;

		if (in >= x->length_bytes || length > x->length_bytes - in)
			return -EINVAL;
		*store = x->store;
		*store_offset = x->store_offset_bytes + in;
	}
	return 0;
}

/* The pool's geometry after a change of stores or routes: size = end of
 * the highest route, discard only when every store has it. Under
 * admin_lock. */
static void update_geometry(struct cfs_io *io)
{
	struct uring_target *t = io->priv;
	const struct uring_routes *r = atomic_load(&t->routes);
	uint64_t size = t->store[0].geo.size_bytes;
	bool discard = true;

	if (r && r->count) {
		const struct cfs_io_route *last = &r->route[r->count - 1];

		size = last->pool_offset_bytes + last->length_bytes;
	}
	for (unsigned i = 0; i < atomic_load(&t->stores); i++)
		if (store_used(&t->store[i]) && !t->store[i].geo.discard_supported)
			discard = false;
	__atomic_store_n(&io->geo.discard_supported, discard, __ATOMIC_RELAXED);
	__atomic_store_n(&io->geo.size_bytes, size, __ATOMIC_RELEASE);
}

static int uring_add_store(struct cfs_io *io, const struct cfs_io_config *cfg)
{
	struct uring_target *t = io->priv;
	struct cfs_io_config c = *t->cfg;
	unsigned index;
	int ret;

	c.path = cfg->path;
	c.dio = cfg->dio;
	c.read_only = cfg->read_only || t->cfg->read_only;
	c.exclusive = cfg->exclusive;
	c.size_bytes = 0;
	/* An RBD store: the cluster is the target's (conf, id, name); whether
	 * to break a holder's lock, and where to explain, are the caller's. */
	c.ceph.takeover = cfg->ceph.takeover;
	c.ceph.wait_s = cfg->ceph.wait_s;
	if (cfg->log) {
		c.log = cfg->log;
		c.log_arg = cfg->log_arg;
	}
	pthread_mutex_lock(&t->admin_lock);
	for (index = 1; index < CFS_IO_STORES_MAX && store_used(&t->store[index]); index++)
		;
	if (index == CFS_IO_STORES_MAX) {
		ret = -EMFILE;
		goto out;
	}
	ret = open_store(&c, &t->store[index]);
	if (ret)
		goto out;
	if (t->store[index].geo.logical_sector_bytes != io->geo.logical_sector_bytes) {
		fprintf(stderr,
			"chunkfs: %s: %u-byte logical sectors, the pool's first store has %u\n",
			cfg->path, t->store[index].geo.logical_sector_bytes,
			io->geo.logical_sector_bytes);
		close_store(&t->store[index]);
		ret = -EINVAL;
		goto out;
	}
	if (t->store[index].geo.mem_align_bytes > io->geo.mem_align_bytes) {
		/* The queues' buffers are aligned for the first store. */
		fprintf(stderr,
			"chunkfs: %s: needs %u-byte aligned buffers, the pool's first store %u\n",
			cfg->path, t->store[index].geo.mem_align_bytes, io->geo.mem_align_bytes);
		close_store(&t->store[index]);
		ret = -EINVAL;
		goto out;
	}
	if (index + 1 > atomic_load(&t->stores))
		atomic_store(&t->stores, index + 1);
	update_geometry(io);
	ret = (int)index;
out:
	pthread_mutex_unlock(&t->admin_lock);
	return ret;
}

uint64_t cfs_uring_store_flushes(const struct cfs_io *io, unsigned store)
{
	const struct uring_target *t = io->priv;

	return atomic_load(&t->store[store].flushes);
}

static const struct cfs_io_geometry *uring_store_geometry(const struct cfs_io *io, unsigned store)
{
	const struct uring_target *t = io->priv;

	if (store >= CFS_IO_STORES_MAX || !store_used(&t->store[store]))
		return NULL;
	return &t->store[store].geo;
}

static int uring_set_routes(struct cfs_io *io, const struct cfs_io_route *routes, unsigned count)
{
	struct uring_target *t = io->priv;
	struct uring_routes *r = malloc(sizeof(*r) + count * sizeof(r->route[0]));

	if (!r)
		return -ENOMEM;
	r->count = count;
	memcpy(r->route, routes, count * sizeof(r->route[0]));
	pthread_mutex_lock(&t->admin_lock);
	r->older = atomic_load(&t->routes);
	atomic_store_explicit(&t->routes, r, memory_order_release);
	update_geometry(io);
	pthread_mutex_unlock(&t->admin_lock);
	return 0;
}

static unsigned uring_get_routes(struct cfs_io *io, struct cfs_io_route *routes, unsigned max)
{
	struct uring_target *t = io->priv;
	const struct uring_routes *r;
	unsigned n = 0;

	pthread_mutex_lock(&t->admin_lock);
	r = atomic_load(&t->routes);
	if (r) {
		n = r->count < max ? r->count : max;
		memcpy(routes, r->route, n * sizeof(*routes));
	}
	pthread_mutex_unlock(&t->admin_lock);
	return n;
}

static int uring_drop_store(struct cfs_io *io, unsigned store)
{
	struct uring_target *t = io->priv;
	int ret = 0;

	pthread_mutex_lock(&t->admin_lock);
	if (store >= CFS_IO_STORES_MAX || !store_used(&t->store[store])) {
		ret = -EINVAL;
	} else {
		close_store(&t->store[store]);
		update_geometry(io);
	}
	pthread_mutex_unlock(&t->admin_lock);
	return ret;
}

/* ---- queue set-up ------------------------------------------------------------ */

static int register_arena(struct cfs_ioq *q, struct uring_queue *uq)
{
	size_t chunk = (size_t)1 << REG_BUF_SHIFT;
	unsigned n = (unsigned)((q->arena_bytes + chunk - 1) >> REG_BUF_SHIFT), i;
	struct iovec *iov;
	int ret;

	iov = calloc(n, sizeof(*iov));
	if (!iov)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		size_t offset = (size_t)i << REG_BUF_SHIFT;

		iov[i].iov_base = (char *)q->arena + offset;
		iov[i].iov_len = q->arena_bytes - offset < chunk ? q->arena_bytes - offset : chunk;
	}
	ret = io_uring_register_buffers(&uq->ring, iov, n);
	free(iov);
	return ret;
}

/* io_uring_setup flag sets to try, best first (CQSIZE|CLAMP always). */
static const unsigned setup_flags[] = {
	/* CFS_IOQ_SINGLE_THREAD: Linux 6.1, then 5.19 */
	IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		IORING_SETUP_TASKRUN_FLAG,
	IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
	/* every queue: Linux 5.18, then anything */
	IORING_SETUP_SUBMIT_ALL,
	0,
};
#define SETUP_SHARED 2u /* first entry for queues used from two threads */
#define SETUP_TRIES (sizeof(setup_flags) / sizeof(setup_flags[0]))

static int uring_queue_init(struct cfs_ioq *q, const struct cfs_ioq_config *cfg)
{
	struct uring_target *t = q->io->priv;
	struct io_uring_params params;
	struct uring_queue *uq;
	unsigned i;
	int ret = -EINVAL;

	uq = calloc(1, sizeof(*uq));
	if (!uq)
		return -ENOMEM;
	atomic_init(&uq->rbd_done, NULL);
	atomic_init(&uq->rbd_parts_done, NULL);
	atomic_init(&uq->rbd_inflight, 0);
	/* Made now: librbd's completions may need it before anyone asks. */
	uq->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (uq->event_fd < 0) {
		ret = -errno;
		free(uq);
		return ret;
	}

	/* Most wanted first; each older kernel refuses with -EINVAL what it
	 * does not know, and we try the next. */
	uq->single_thread = cfg->flags & CFS_IOQ_SINGLE_THREAD;
	for (i = uq->single_thread ? 0 : SETUP_SHARED; i < SETUP_TRIES; i++) {
		memset(&params, 0, sizeof(params));
		params.flags = setup_flags[i] | IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
		params.cq_entries = 2 * q->depth;
		ret = io_uring_queue_init_params(q->depth, &uq->ring, &params);
		if (ret != -EINVAL)
			break;
	}
	if (ret)
		goto out_free;

	/* A registered file skips the fd table lookup and reference counting
	 * on every request; without it (old kernel) plain fds still work. */
	{
		int fd0 = atomic_load(&t->store[0].fd);

		uq->file_registered = io_uring_register_files(&uq->ring, &fd0, 1) == 0;
	}
	for (i = 0; i < FLUSH_PARTS; i++) {
		uq->parts[i].next = uq->free_parts;
		uq->free_parts = &uq->parts[i];
	}

	/* Registering pins the arena and saves the page walk per request. It
	 * can fail for an unprivileged user over RLIMIT_MEMLOCK: then the
	 * arena still works, with plain read/write. */
	q->arena_registered = false;
	if (q->arena && q->arena_bytes)
		q->arena_registered = register_arena(q, uq) == 0;

	q->priv = uq;
	return 0;

out_free:
	close(uq->event_fd);
	free(uq);
	return ret;
}

static void uring_queue_fini(struct cfs_ioq *q)
{
	struct uring_queue *uq = q->priv;

	/* The kernel tears a closed ring down later, in a worker, and a
	 * registered file stays open until then: an exclusively opened device
	 * would still be busy when this process has exited (fsck right after a
	 * refused mount said "device is busy"). Unregistering is synchronous. */
	if (uq->file_registered)
		io_uring_unregister_files(&uq->ring);
	io_uring_queue_exit(&uq->ring); /* drops the other registrations */
	close(uq->event_fd);
	free(uq);
	q->priv = NULL;
	q->arena_registered = false;
}

/* From now on the ring writes the event fd for every completion. Only when
 * asked: the write costs the ring's users who never wait on it. From the
 * queue's owner (a single-issuer ring refuses other threads); a failure
 * leaves the reaper polling the ring's own fd as well. */
static void register_event_fd(struct uring_queue *uq)
{
	if (!uq->event_fd_registered)
		uq->event_fd_registered = io_uring_register_eventfd(&uq->ring, uq->event_fd) == 0;
}

static int uring_event_fd(struct cfs_ioq *q)
{
	struct uring_queue *uq = q->priv;

	register_event_fd(uq);
	return uq->event_fd_registered ? uq->event_fd : -1;
}

/* ---- RBD stores ------------------------------------------------------------------
 *
 * A store of the pool may be an RBD image (rbd:...): a request routed there
 * goes to librbd (cfs_rbd_aio) instead of the ring. librbd finishes it on
 * its completion thread, which puts it on the queue's RBD done list (no
 * lock, no allocation) and writes the queue's event fd when the list was
 * empty; reap() takes the lists whole and completes them as CQEs, through
 * cqe_result() and flush_part_done(). rbd_inflight counts what librbd holds,
 * so a reap that must sleep knows to wait on the event fd, and a queue that
 * never used an RBD store pays one atomic load per reap.
 */
static void rbd_wake(struct uring_queue *uq)
{
	uint64_t one = 1;

	if (write(uq->event_fd, &one, sizeof(one)) != sizeof(one)) {
		/* the counter cannot overflow: the reaper reads it */
	}
}

static void rbd_push_req(struct uring_queue *uq, struct cfs_io_req *req, int err)
{
	struct cfs_io_req *head = atomic_load_explicit(&uq->rbd_done, memory_order_relaxed);

	req->iop_flags = (uint16_t)err;
	do
		req->iop_next = head;
	while (!atomic_compare_exchange_weak_explicit(&uq->rbd_done, &head, req,
						      memory_order_release, memory_order_relaxed));
	if (!head) /* else a wakeup is on its way already */
		rbd_wake(uq);
}

static void rbd_push_part(struct uring_queue *uq, struct flush_part *p, int err)
{
	struct flush_part *head = atomic_load_explicit(&uq->rbd_parts_done, memory_order_relaxed);

	p->rbd_err = err;
	do
		p->next = head;
	while (!atomic_compare_exchange_weak_explicit(&uq->rbd_parts_done, &head, p,
						      memory_order_release, memory_order_relaxed));
	if (!head)
		rbd_wake(uq);
}

/* librbd's completion thread: req->iop_flags holds its store until now. */
static void rbd_req_done(rbd_completion_t c, void *arg)
{
	struct cfs_io_req *req = arg;
	struct cfs_ioq *q = req->iop_private;
	struct uring_target *t = q->io->priv;
	struct rbd_target *rbd = atomic_load(&t->store[req->iop_flags].rbd);

	rbd_push_req(q->priv, req,
		     cfs_rbd_aio_result(rbd, c, req->op, req->length_bytes - req->done_bytes));
}

static void rbd_part_done(rbd_completion_t c, void *arg)
{
	struct flush_part *p = arg;
	struct uring_target *t = p->q->io->priv;

	rbd_push_part(p->q->priv, p,
		      cfs_rbd_aio_result(atomic_load(&t->store[p->store].rbd), c, CFS_IO_FLUSH, 0));
}

/* Hand what is left of req to store st's librbd at offset. Called with
 * q->submit_lock held. */
static int prep_rbd(struct cfs_ioq *q, struct cfs_io_req *req, unsigned st, uint64_t offset)
{
	struct uring_queue *uq = q->priv;
	struct uring_target *t = q->io->priv;
	uint64_t length = req->length_bytes - req->done_bytes;
	int ret;

	register_event_fd(uq);
	req->iop_private = q;
	req->iop_flags = (uint16_t)st;
	atomic_fetch_add_explicit(&uq->rbd_inflight, 1, memory_order_relaxed);
	ret = cfs_rbd_aio(atomic_load(&t->store[st].rbd), req->op, offset, length,
			  req->buf ? (char *)req->buf + req->done_bytes : NULL, rbd_req_done, req);
	if (ret == -ESHUTDOWN) { /* fenced: EIO without asking librbd */
		rbd_push_req(uq, req, EIO);
		return 0;
	}
	if (ret < 0)
		atomic_fetch_sub_explicit(&uq->rbd_inflight, 1, memory_order_relaxed);
	return ret;
}

/* One pool FLUSH part on an RBD store. Under q->submit_lock. */
static void prep_rbd_part(struct cfs_ioq *q, struct flush_part *p)
{
	struct uring_queue *uq = q->priv;
	struct uring_target *t = q->io->priv;
	int ret;

	register_event_fd(uq);
	p->q = q;
	atomic_fetch_add_explicit(&uq->rbd_inflight, 1, memory_order_relaxed);
	ret = cfs_rbd_aio(atomic_load(&t->store[p->store].rbd), CFS_IO_FLUSH, 0, 0, NULL,
			  rbd_part_done, p);
	if (ret < 0) /* fenced, or refused: the part fails, the others go on */
		rbd_push_part(uq, p, ret == -ESHUTDOWN ? EIO : -ret);
}

/* ---- staging ----------------------------------------------------------------- */

/* buf_index of [buf, buf+length) in the registered arena, or -1. */
static int fixed_index(const struct cfs_ioq *q, const char *buf, uint32_t length_bytes)
{
	uintptr_t offset;

	if (!cfs_ioq_buf_is_fixed(q, buf, length_bytes))
		return -1;
	offset = (uintptr_t)buf - (uintptr_t)q->arena;
	if (offset >> REG_BUF_SHIFT != (offset + length_bytes - 1) >> REG_BUF_SHIFT)
		return -1; /* straddles two registered iovecs */
	return (int)(offset >> REG_BUF_SHIFT);
}

/* The fd to name in an SQE for store st: the registered file 0 for store 0
 * where the ring has it, else the store's plain fd. */
static int sqe_fd(const struct uring_queue *uq, const struct uring_target *t, unsigned st,
		  bool *fixed)
{
	*fixed = st == 0 && uq->file_registered;
	return *fixed ? 0 : atomic_load_explicit(&t->store[st].fd, memory_order_relaxed);
}

/* Stores a pool FLUSH must reach: store 0 always (the metadata is there),
 * every other one that completed a write since its last flush. */
static bool flush_needed(struct uring_target *t, unsigned st)
{
	if (!store_used(&t->store[st]))
		return false;
	return st == 0 || atomic_load_explicit(&t->store[st].dirty, memory_order_acquire);
}

/*
 * A FLUSH of a pool: one fsync SQE per store that needs it, each carried by
 * a flush part; the request completes when the last part does
 * (req->iop_flags counts them, req->done_bytes keeps the first error).
 * -EBUSY, with nothing staged and no dirty mark taken, when the ring or the
 * part pool lacks room. Called with q->submit_lock held.
 */
static int prep_pool_flush(struct cfs_ioq *q, struct cfs_io_req *req)
{
	struct uring_queue *uq = q->priv;
	struct uring_target *t = q->io->priv;
	unsigned stores = atomic_load(&t->stores), need = 0, need_sqes = 0, st;
	uint64_t which = 0; /* decided once: a write may mark a store meanwhile */
	struct flush_part *p;

	_Static_assert(CFS_IO_STORES_MAX <= 64, "one bit per store");
	for (st = 0; st < stores; st++) {
		if (!flush_needed(t, st))
			continue;
		which |= 1ull << st;
		need++;
		need_sqes += !atomic_load(&t->store[st].rbd);
	}
	for (p = uq->free_parts, st = 0; p && st < need; p = p->next)
		st++;
	if (st < need || io_uring_sq_space_left(&uq->ring) < need_sqes)
		return -EBUSY;
	/* Every part counted before any is issued: an RBD part may finish,
	 * and another thread reap it, while the rest are still being set up. */
	CFS_ASSERT(need > 0); /* store 0 is always flushed */
	req->iop_flags = (uint16_t)need;
	req->done_bytes = 0;
	for (st = 0; st < stores; st++) {
		struct io_uring_sqe *sqe;
		bool fixed;

		if (!(which & (1ull << st)))
			continue;
		/* Cleared before the fsync is issued: a write completing from
		 * now on marks the store again for the next flush. */
		atomic_store_explicit(&t->store[st].dirty, false, memory_order_release);
		p = uq->free_parts;
		uq->free_parts = p->next;
		p->req = req;
		p->store = st;
		if (atomic_load(&t->store[st].rbd)) {
			prep_rbd_part(q, p);
			continue;
		}
		sqe = io_uring_get_sqe(&uq->ring);
		CFS_ASSERT(sqe); /* room checked above */
		io_uring_prep_fsync(sqe, sqe_fd(uq, t, st, &fixed), IORING_FSYNC_DATASYNC);
		if (fixed)
			sqe->flags |= IOSQE_FIXED_FILE;
		io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)p | TAG_FLUSH_PART);
	}
	return 0;
}

/* Fill one SQE for what is left of req. Called with q->submit_lock held. */
static int prep(struct cfs_ioq *q, struct cfs_io_req *req)
{
	struct uring_queue *uq = q->priv;
	struct uring_target *t = q->io->priv;
	struct io_uring_sqe *sqe;
	uint64_t tag = 0, offset;
	unsigned st = 0;
	bool use_file = true, fixed;
	int fd;

	if (req->op == CFS_IO_FLUSH && atomic_load(&t->stores) > 1)
		return prep_pool_flush(q, req);
	/* Route what is left of it (requests were checked against the routes
	 * when queued; a resubmission stays in the same route). */
	if (req->op == CFS_IO_READ || req->op == CFS_IO_WRITE) {
		if (route(t, req->offset_bytes + req->done_bytes,
			  req->length_bytes - req->done_bytes, &st, &offset))
			return -EINVAL;
	} else if (req->op != CFS_IO_FLUSH) {
		if (route(t, req->offset_bytes, req->length_bytes, &st, &offset))
			return -EINVAL;
	}
	if (atomic_load_explicit(&t->store[st].rbd, memory_order_relaxed))
		return prep_rbd(q, req, st, offset);
	fd = sqe_fd(uq, t, st, &fixed);
	sqe = io_uring_get_sqe(&uq->ring);
	if (!sqe)
		return -EBUSY;

	switch (req->op) {
	case CFS_IO_READ:
	case CFS_IO_WRITE: {
		uint32_t remaining = req->length_bytes - req->done_bytes;
		char *buf = (char *)req->buf + req->done_bytes;
		int idx = fixed_index(q, buf, remaining);

		if (req->op == CFS_IO_READ && idx >= 0)
			io_uring_prep_read_fixed(sqe, fd, buf, remaining, offset, idx);
		else if (req->op == CFS_IO_READ)
			io_uring_prep_read(sqe, fd, buf, remaining, offset);
		else if (idx >= 0)
			io_uring_prep_write_fixed(sqe, fd, buf, remaining, offset, idx);
		else
			io_uring_prep_write(sqe, fd, buf, remaining, offset);
		break;
	}
	case CFS_IO_FLUSH:
		io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
		break;
	case CFS_IO_DISCARD:
		if (!t->store[st].is_blk) {
			io_uring_prep_fallocate(sqe, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
						(off_t)offset, (off_t)req->length_bytes);
		} else if (atomic_load_explicit(&t->store[st].discard_by_ioctl,
						memory_order_relaxed)) {
			io_uring_prep_nop(sqe);
			use_file = false;
			tag = TAG_DISCARD_IOCTL;
		} else {
			io_uring_prep_rw(IORING_OP_URING_CMD, sqe, fd, NULL, 0, 0);
			sqe->cmd_op = BLOCK_URING_CMD_DISCARD;
			sqe->__pad1 = 0;
			sqe->addr = offset;
			sqe->addr3 = req->length_bytes;
		}
		break;
	case CFS_IO_ZERO:
		if (atomic_load_explicit(&t->store[st].zero_by_punch, memory_order_relaxed)) {
			io_uring_prep_fallocate(sqe, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
						(off_t)offset, (off_t)req->length_bytes);
			tag = TAG_ZERO_PUNCH;
		} else {
			io_uring_prep_fallocate(sqe, fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
						(off_t)offset, (off_t)req->length_bytes);
		}
		break;
	default:
		CFS_ASSERT(!"op validated by cfs_ioq_queue");
	}
	if (use_file && fixed)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)req | tag);
	return 0;
}

static int uring_queue_req(struct cfs_ioq *q, struct cfs_io_req *req)
{
	const struct cfs_io_geometry *geo = &q->io->geo;
	struct uring_target *t = q->io->priv;
	uint64_t offset;
	unsigned st;

	/* Paired with the check in cfs_ioq_queue(): nothing misaligned may
	 * reach the device, whatever path staged it. */
	CFS_ASSERT(req->op == CFS_IO_FLUSH ||
		   !((req->offset_bytes | req->length_bytes) & (geo->logical_sector_bytes - 1)));
	/* A request that leaves its route is the caller's bug: refuse it
	 * before anything is staged. */
	if (req->op != CFS_IO_FLUSH && route(t, req->offset_bytes, req->length_bytes, &st, &offset))
		return -EINVAL;
	return prep(q, req);
}

static int uring_submit(struct cfs_ioq *q)
{
	struct uring_queue *uq = q->priv;

	return io_uring_submit(&uq->ring);
}

/* ---- completion ---------------------------------------------------------------- */

static void stat_bump(struct cfs_io_stats *stats, uint64_t *field)
{
	if (stats)
		cfs_counter_add(field, 1);
}

/* Count one more attempt; false when the budget is spent. */
static bool retry_allowed(struct cfs_io_req *req)
{
	return ++req->retries <= CFS_IO_RETRY_MAX;
}

/* The synchronous fallback for kernels without async block discard. */
static int discard_ioctl(int fd, uint64_t offset_bytes, const struct cfs_io_req *req)
{
	uint64_t range[2] = {offset_bytes, req->length_bytes};

	return ioctl(fd, BLKDISCARD, range) < 0 ? -errno : 0;
}

/* A write, zero or discard of req finished on its store: a pool FLUSH must
 * reach that store. (With one store, FLUSH always flushes it.) */
static void mark_dirty(struct uring_target *t, const struct cfs_io_req *req)
{
	uint64_t offset;
	unsigned st;

	if (atomic_load_explicit(&t->stores, memory_order_relaxed) > 1 &&
	    !route(t, req->offset_bytes, req->length_bytes, &st, &offset) && st != 0)
		atomic_store_explicit(&t->store[st].dirty, true, memory_order_release);
}

/*
 * Decide the fate of one CQE: return its final result (>= 0 or -errno) and
 * set *again = false, or set *again = true when it must be resubmitted.
 */
static int cqe_result(struct cfs_ioq *q, struct cfs_io_req *req, uint64_t tag, int res, bool *again)
{
	struct uring_target *t = q->io->priv;
	uint64_t offset = req->offset_bytes;
	unsigned st = 0;

	*again = false;
	if (req->op == CFS_IO_DISCARD || req->op == CFS_IO_ZERO)
		(void)route(t, req->offset_bytes, req->length_bytes, &st, &offset);
	switch (req->op) {
	case CFS_IO_READ:
	case CFS_IO_WRITE: {
		uint32_t remaining = req->length_bytes - req->done_bytes;

		if (res > 0) {
			/* More than asked for would mean we lost track of
			 * where the data went. */
			CFS_ASSERT((uint32_t)res <= remaining);
			req->done_bytes += (uint32_t)res;
			if (req->done_bytes == req->length_bytes) {
				if (req->op == CFS_IO_WRITE)
					mark_dirty(t, req);
				return (int)req->length_bytes;
			}
		}
		if (res >= 0) {
			/* Short, or no progress at all (read at EOF). */
			if (!retry_allowed(req)) {
				stat_bump(req->stats, &req->stats->err_short);
				return -EIO;
			}
			stat_bump(req->stats, &req->stats->short_retries);
			*again = true;
			return 0;
		}
		break;
	}
	case CFS_IO_DISCARD:
		if (tag & TAG_DISCARD_IOCTL) {
			res = discard_ioctl(atomic_load(&t->store[st].fd), offset, req);
		} else if (res == -EOPNOTSUPP && t->store[st].is_blk && retry_allowed(req)) {
			atomic_store_explicit(&t->store[st].discard_by_ioctl, true,
					      memory_order_relaxed);
			*again = true;
			return 0;
		}
		break;
	case CFS_IO_ZERO:
		if (res == -EOPNOTSUPP && !t->store[st].is_blk && !(tag & TAG_ZERO_PUNCH) &&
		    retry_allowed(req)) {
			atomic_store_explicit(&t->store[st].zero_by_punch, true,
					      memory_order_relaxed);
			*again = true;
			return 0;
		}
		break;
	default:
		break;
	}
	if ((res == -EAGAIN || res == -EINTR) && retry_allowed(req)) {
		*again = true;
		return 0;
	}
	if (res < 0)
		return res;
	if (req->op == CFS_IO_FLUSH)
		return 0;
	mark_dirty(t, req); /* a discard or a zero */
	return (int)req->length_bytes;
}

/*
 * One fsync of a pool FLUSH finished. Returns the request when it was the
 * last part (its result in *res), else NULL. A part the kernel interrupted
 * (EAGAIN/EINTR) is redone here, synchronously: rare, and a flush part has
 * no request of its own to resubmit.
 */
static struct cfs_io_req *flush_part_done(struct cfs_ioq *q, struct flush_part *p, int r, int *res)
{
	struct uring_queue *uq = q->priv;
	struct uring_target *t = q->io->priv;
	struct cfs_io_req *req = p->req;

	if (r == -EAGAIN || r == -EINTR)
		r = fdatasync(atomic_load(&t->store[p->store].fd)) ? -errno : 0;
	if (r < 0 && req->done_bytes == 0)
		req->done_bytes = (uint32_t)-r;
	if (r == 0)
		atomic_fetch_add_explicit(&t->store[p->store].flushes, 1, memory_order_relaxed);
	pthread_mutex_lock(&q->submit_lock);
	p->next = uq->free_parts;
	uq->free_parts = p;
	pthread_mutex_unlock(&q->submit_lock);
	if (--req->iop_flags)
		return NULL;
	*res = req->done_bytes ? -(int)req->done_bytes : 0;
	req->done_bytes = 0;
	return req;
}

/*
 * Resubmit the requests in `list`. Staging fails only if the ring refuses
 * even right after a submit (a broken ring); those requests complete with
 * -EAGAIN. Returns how many completed here.
 */
static unsigned resubmit(struct cfs_ioq *q, struct cfs_io_req *list)
{
	struct uring_queue *uq = q->priv;
	struct cfs_io_req *failed = NULL, *req;
	unsigned completed = 0;

	pthread_mutex_lock(&q->submit_lock);
	while (list) {
		req = list;
		list = req->iop_next;
		req->iop_next = NULL;
		if (prep(q, req) == -EBUSY) {
			/* SQ full of the owner's staged requests: push them. */
			io_uring_submit(&uq->ring);
			if (prep(q, req)) {
				req->iop_next = failed;
				failed = req;
			}
		}
	}
	io_uring_submit(&uq->ring);
	pthread_mutex_unlock(&q->submit_lock);

	/* done() runs without the lock: it may queue more I/O on q. */
	while (failed) {
		req = failed;
		failed = req->iop_next;
		req->iop_next = NULL;
		cfs_ioq_complete(q, req, -EAGAIN);
		completed++;
	}
	return completed;
}

/* Complete what librbd finished (RBD stores), oldest first; how many. */
static unsigned rbd_reap(struct cfs_ioq *q)
{
	struct uring_queue *uq = q->priv;
	struct cfs_io_req *list, *fifo = NULL, *req;
	struct flush_part *parts, *p;
	unsigned completed = 0;

	if (!atomic_load_explicit(&uq->rbd_inflight, memory_order_acquire))
		return 0;
	list = atomic_exchange_explicit(&uq->rbd_done, NULL, memory_order_acquire);
	while (list) { /* the list is LIFO */
		req = list;
		list = req->iop_next;
		req->iop_next = fifo;
		fifo = req;
	}
	while (fifo) {
		int err, res;
		bool again;

		req = fifo;
		fifo = req->iop_next;
		req->iop_next = NULL;
		atomic_fetch_sub_explicit(&uq->rbd_inflight, 1, memory_order_relaxed);
		err = req->iop_flags;
		req->iop_flags = 0;
		/* As the ring would say it: all of what was left, or -errno. */
		if (err)
			res = -err;
		else if (req->op == CFS_IO_READ || req->op == CFS_IO_WRITE)
			res = (int)(req->length_bytes - req->done_bytes);
		else
			res = 0;
		res = cqe_result(q, req, 0, res, &again);
		CFS_ASSERT(!again); /* librbd does all or fails */
		cfs_ioq_complete(q, req, res);
		completed++;
	}
	parts = atomic_exchange_explicit(&uq->rbd_parts_done, NULL, memory_order_acquire);
	while (parts) {
		int res;

		p = parts;
		parts = p->next;
		atomic_fetch_sub_explicit(&uq->rbd_inflight, 1, memory_order_relaxed);
		req = flush_part_done(q, p, -p->rbd_err, &res);
		if (req) {
			cfs_ioq_complete(q, req, res);
			completed++;
		}
	}
	return completed;
}

/* Sleep until the ring or librbd has something (RBD requests in flight):
 * the event fd, and the ring's fd in case it could not be registered. */
static int rbd_wait(struct cfs_ioq *q)
{
	struct uring_queue *uq = q->priv;
	struct pollfd p[2] = {{.fd = uq->event_fd, .events = POLLIN},
			      {.fd = uq->ring.ring_fd, .events = POLLIN}};
	uint64_t v;

	pthread_mutex_lock(&q->submit_lock);
	io_uring_submit(&uq->ring);
	pthread_mutex_unlock(&q->submit_lock);
	if (poll(p, uq->event_fd_registered ? 1 : 2, -1) < 0 && errno != EINTR)
		return -errno;
	if (read(uq->event_fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: the ring's fd woke us, or the event loop read it */
	}
	return 0;
}

static int uring_reap(struct cfs_ioq *q, unsigned min_complete)
{
	struct uring_queue *uq = q->priv;
	struct io_uring_cqe *cqes[REAP_BATCH];
	struct {
		uint64_t data;
		int res;
	} got[REAP_BATCH];
	unsigned completed = 0, n, i;

	/* Single thread: requests that done() queued in the last round go out
	 * in the same system call that runs the deferred completion work.
	 * Reaping first would let a stream of completions (each one flagged
	 * by TASKRUN_FLAG, each costing an enter) hold them back, and lower
	 * the depth the device sees. */
	if (uq->single_thread && io_uring_sq_ready(&uq->ring)) {
		pthread_mutex_lock(&q->submit_lock);
		io_uring_submit_and_get_events(&uq->ring);
		pthread_mutex_unlock(&q->submit_lock);
	}

	for (;;) {
		struct cfs_io_req *again_list = NULL;

		completed += rbd_reap(q);
		n = io_uring_peek_batch_cqe(&uq->ring, cqes, REAP_BATCH);
		if (n == 0) {
			struct io_uring_cqe *cqe;
			int ret;

			if (completed >= min_complete)
				break;
			if (atomic_load_explicit(&uq->rbd_inflight, memory_order_acquire)) {
				ret = rbd_wait(q);
				if (ret < 0)
					return completed ? (int)completed : ret;
				continue;
			}
			/* About to sleep: make sure what we wait for is on
			 * its way (another thread may have staged it). */
			if (uq->single_thread) {
				/* nobody else submits: one system call */
				pthread_mutex_lock(&q->submit_lock);
				ret = io_uring_submit_and_wait(&uq->ring, min_complete - completed);
				pthread_mutex_unlock(&q->submit_lock);
				if (ret < 0 && ret != -EAGAIN)
					return completed ? (int)completed : ret;
				continue;
			}
			pthread_mutex_lock(&q->submit_lock);
			io_uring_submit(&uq->ring);
			pthread_mutex_unlock(&q->submit_lock);
			ret = io_uring_wait_cqe_nr(&uq->ring, &cqe, min_complete - completed);
			if (ret < 0 && ret != -EAGAIN)
				return completed ? (int)completed : ret;
			continue;
		}
		/* Copy and release the CQEs before any done() runs: a done()
		 * may queue and submit, and must find the CQ ring free. */
		for (i = 0; i < n; i++) {
			got[i].data = io_uring_cqe_get_data64(cqes[i]);
			got[i].res = cqes[i]->res;
		}
		io_uring_cq_advance(&uq->ring, n);

		for (i = 0; i < n; i++) {
			struct cfs_io_req *req = (void *)(uintptr_t)(got[i].data & ~TAG_MASK);
			bool again;
			int res;

			CFS_ASSERT(req != NULL);
			if (got[i].data & TAG_FLUSH_PART) {
				req = flush_part_done(q, (struct flush_part *)req, got[i].res,
						      &res);
				if (req) {
					cfs_ioq_complete(q, req, res);
					completed++;
				}
				continue;
			}
			res = cqe_result(q, req, got[i].data & TAG_MASK, got[i].res, &again);
			if (again) {
				req->iop_next = again_list;
				again_list = req;
				continue;
			}
			cfs_ioq_complete(q, req, res);
			completed++;
		}
		if (again_list)
			completed += resubmit(q, again_list);
		/* Enough: return rather than chase completions that trickle
		 * in, so the caller submits what done() just queued. Greedy
		 * reaping starved submission (see bench/README.md). */
		if (completed >= min_complete && n < REAP_BATCH)
			break;
	}
	return (int)completed;
}

const struct cfs_backend_ops cfs_backend_uring = {
	.name = "uring",
	.version = CFS_BACKEND_OPS_VERSION,
	.open = uring_open,
	.close = uring_close,
	.queue_init = uring_queue_init,
	.queue_fini = uring_queue_fini,
	.queue = uring_queue_req,
	.submit = uring_submit,
	.reap = uring_reap,
	.event_fd = uring_event_fd,
	.add_store = uring_add_store,
	.store_geometry = uring_store_geometry,
	.set_routes = uring_set_routes,
	.drop_store = uring_drop_store,
	.get_routes = uring_get_routes,
};
