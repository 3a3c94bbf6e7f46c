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
 * What this file does not do: it does not validate requests (io.c did), it
 * does not touch statistics except short_retries/err_short, and it never
 * calls done() directly (cfs_ioq_complete() does).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <liburing.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "iopath/backend.h"

#ifndef BLOCK_URING_CMD_DISCARD
#define BLOCK_URING_CMD_DISCARD _IO(0x12, 0) /* linux/fs.h, 6.12+ */
#endif

#define REAP_BATCH 64u
#define REG_BUF_SHIFT 30 /* the kernel caps one registered buffer at 1 GiB */

/* Low bits of user_data: what the SQE was, beyond req->op. */
#define TAG_DISCARD_IOCTL 1ull /* a NOP; the reaper issues BLKDISCARD */
#define TAG_ZERO_PUNCH 2ull    /* ZERO carried out as PUNCH_HOLE */
#define TAG_MASK 7ull
_Static_assert(_Alignof(struct cfs_io_req) > TAG_MASK, "user_data tags need alignment");

struct uring_target {
	int fd;
	bool is_blk;
	atomic_bool zero_by_punch;    /* ZERO_RANGE unsupported (tmpfs) */
	atomic_bool discard_by_ioctl; /* no BLOCK_URING_CMD_DISCARD (< 6.12) */
};

struct uring_queue {
	struct io_uring ring;
	int event_fd; /* -1 until asked for */
	bool file_registered;
	bool single_thread; /* CFS_IOQ_SINGLE_THREAD */
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

static int uring_open(struct cfs_io *io, const struct cfs_io_config *cfg)
{
	struct cfs_io_geometry *geo = &io->geo;
	struct uring_target *t;
	uint64_t size_bytes;
	struct stat st;
	bool direct;
	int ret;

	if (!cfg->path)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	atomic_init(&t->zero_by_punch, false);
	atomic_init(&t->discard_by_ioctl, false);

	ret = open_target(cfg, &direct);
	if (ret < 0)
		goto out_free;
	t->fd = ret;
	if (fstat(t->fd, &st) < 0) {
		ret = -errno;
		goto out_close;
	}
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(t->fd, BLKGETSIZE64, &size_bytes) < 0) {
			ret = -errno;
			goto out_close;
		}
	} else if (S_ISREG(st.st_mode)) {
		size_bytes = (uint64_t)st.st_size;
	} else {
		ret = -ENODEV; /* a directory, a pipe, a character device */
		goto out_close;
	}
	t->is_blk = S_ISBLK(st.st_mode);

	ret = cfs_io_probe_alignment(t->fd, geo);
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
	geo->backend = "uring";
	if (cfg->read_only)
		geo->discard_supported = false;
	else if (t->is_blk)
		geo->discard_supported =
			cfs_io_sysfs_queue_attr(st.st_rdev, "discard_max_bytes") > 0;
	else
		geo->discard_supported = file_can_punch(t->fd, (uint64_t)st.st_size);
	io->priv = t;
	return 0;

out_close:
	close(t->fd);
out_free:
	free(t);
	return ret;
}

static void uring_close(struct cfs_io *io)
{
	struct uring_target *t = io->priv;

	close(t->fd);
	free(t);
	io->priv = NULL;
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
	uq->event_fd = -1;

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
	uq->file_registered = io_uring_register_files(&uq->ring, &t->fd, 1) == 0;

	/* Registering pins the arena and saves the page walk per request. It
	 * can fail for an unprivileged user over RLIMIT_MEMLOCK: then the
	 * arena still works, with plain read/write. */
	q->arena_registered = false;
	if (q->arena && q->arena_bytes)
		q->arena_registered = register_arena(q, uq) == 0;

	q->priv = uq;
	return 0;

out_free:
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
	if (uq->event_fd >= 0)
		close(uq->event_fd);
	free(uq);
	q->priv = NULL;
	q->arena_registered = false;
}

static int uring_event_fd(struct cfs_ioq *q)
{
	struct uring_queue *uq = q->priv;
	int fd;

	if (uq->event_fd >= 0)
		return uq->event_fd;
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0)
		return -1;
	if (io_uring_register_eventfd(&uq->ring, fd) < 0) {
		close(fd);
		return -1;
	}
	uq->event_fd = fd;
	return fd;
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

/* Fill one SQE for what is left of req. Called with q->submit_lock held. */
static int prep(struct cfs_ioq *q, struct cfs_io_req *req)
{
	struct uring_queue *uq = q->priv;
	struct uring_target *t = q->io->priv;
	struct io_uring_sqe *sqe;
	uint64_t tag = 0;
	int fd = uq->file_registered ? 0 : t->fd;
	bool use_file = true;

	sqe = io_uring_get_sqe(&uq->ring);
	if (!sqe)
		return -EBUSY;

	switch (req->op) {
	case CFS_IO_READ:
	case CFS_IO_WRITE: {
		uint32_t remaining = req->length_bytes - req->done_bytes;
		uint64_t offset = req->offset_bytes + req->done_bytes;
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
		if (!t->is_blk) {
			io_uring_prep_fallocate(sqe, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
						(off_t)req->offset_bytes, (off_t)req->length_bytes);
		} else if (atomic_load_explicit(&t->discard_by_ioctl, memory_order_relaxed)) {
			io_uring_prep_nop(sqe);
			use_file = false;
			tag = TAG_DISCARD_IOCTL;
		} else {
			io_uring_prep_rw(IORING_OP_URING_CMD, sqe, fd, NULL, 0, 0);
			sqe->cmd_op = BLOCK_URING_CMD_DISCARD;
			sqe->__pad1 = 0;
			sqe->addr = req->offset_bytes;
			sqe->addr3 = req->length_bytes;
		}
		break;
	case CFS_IO_ZERO:
		if (atomic_load_explicit(&t->zero_by_punch, memory_order_relaxed)) {
			io_uring_prep_fallocate(sqe, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
						(off_t)req->offset_bytes, (off_t)req->length_bytes);
			tag = TAG_ZERO_PUNCH;
		} else {
			io_uring_prep_fallocate(sqe, fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
						(off_t)req->offset_bytes, (off_t)req->length_bytes);
		}
		break;
	default:
		CFS_ASSERT(!"op validated by cfs_ioq_queue");
	}
	if (use_file && uq->file_registered)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)req | tag);
	return 0;
}

static int uring_queue_req(struct cfs_ioq *q, struct cfs_io_req *req)
{
	const struct cfs_io_geometry *geo = &q->io->geo;

	/* Paired with the check in cfs_ioq_queue(): nothing misaligned may
	 * reach the device, whatever path staged it. */
	CFS_ASSERT(req->op == CFS_IO_FLUSH ||
		   !((req->offset_bytes | req->length_bytes) & (geo->logical_sector_bytes - 1)));
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
		__atomic_fetch_add(field, 1, __ATOMIC_RELAXED);
}

/* Count one more attempt; false when the budget is spent. */
static bool retry_allowed(struct cfs_io_req *req)
{
	return ++req->retries <= CFS_IO_RETRY_MAX;
}

/* The synchronous fallback for kernels without async block discard. */
static int discard_ioctl(int fd, const struct cfs_io_req *req)
{
	uint64_t range[2] = {req->offset_bytes, req->length_bytes};

	return ioctl(fd, BLKDISCARD, range) < 0 ? -errno : 0;
}

/*
 * Decide the fate of one CQE: return its final result (>= 0 or -errno) and
 * set *again = false, or set *again = true when it must be resubmitted.
 */
static int cqe_result(struct cfs_ioq *q, struct cfs_io_req *req, uint64_t tag, int res, bool *again)
{
	struct uring_target *t = q->io->priv;

	*again = false;
	switch (req->op) {
	case CFS_IO_READ:
	case CFS_IO_WRITE: {
		uint32_t remaining = req->length_bytes - req->done_bytes;

		if (res > 0) {
			/* More than asked for would mean we lost track of
			 * where the data went. */
			CFS_ASSERT((uint32_t)res <= remaining);
			req->done_bytes += (uint32_t)res;
			if (req->done_bytes == req->length_bytes)
				return (int)req->length_bytes;
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
			res = discard_ioctl(t->fd, req);
		} else if (res == -EOPNOTSUPP && t->is_blk && retry_allowed(req)) {
			atomic_store_explicit(&t->discard_by_ioctl, true, memory_order_relaxed);
			*again = true;
			return 0;
		}
		break;
	case CFS_IO_ZERO:
		if (res == -EOPNOTSUPP && !t->is_blk && !(tag & TAG_ZERO_PUNCH) &&
		    retry_allowed(req)) {
			atomic_store_explicit(&t->zero_by_punch, true, memory_order_relaxed);
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
	return req->op == CFS_IO_FLUSH ? 0 : (int)req->length_bytes;
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

		n = io_uring_peek_batch_cqe(&uq->ring, cqes, REAP_BATCH);
		if (n == 0) {
			struct io_uring_cqe *cqe;
			int ret;

			if (completed >= min_complete)
				break;
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
};
