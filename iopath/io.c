// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * io.c — the core of iopath: targets, queues, request validation, the
 * completion path, and the backend table.
 *
 * A request's life:
 *   cfs_ioq_queue()    validates (op, bounds, alignment; -EINVAL and
 *                      err_misaligned when the caller got it wrong), stamps
 *                      queued_ns, charges stats->inflight_now, lets rmw.c
 *                      park a write that overlaps a read-modify-write in
 *                      progress, and stages it with ops->queue under
 *                      q->submit_lock.
 *   cfs_ioq_submit()   ops->submit under q->submit_lock: one batch, one
 *                      system call for the uring backend.
 *   cfs_ioq_reap()     ops->reap: the backend handles short transfers and
 *                      retries and calls cfs_ioq_complete() once per request.
 *   cfs_ioq_complete() charges stats, drops inflight, runs done().
 *
 * Locking: the only lock is the queue's own submit_lock (queue/submit on one
 * queue may come from its owner and from a reaping thread running done()
 * callbacks that queue follow-up I/O). Nothing here is shared between queues
 * except the target's read-only geometry and the range-lock fast-path
 * counter. No allocation, no logging on the data path.
 *
 * What this file does not do: it moves no data (backends do), it knows no
 * range locks (rmw.c), and it never calls done() from inside
 * cfs_ioq_queue(): a refused request returns an error, an accepted one
 * completes from a reap.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fs/base/counter.h"
#include "iopath/backend.h"
#include "iopath/buf.h"

#define ARENA_HUGE_MIN_BYTES (2u << 20) /* THP size: below it madvise is moot */

/* ---- statistics helpers (relaxed atomics on the caller's counters) ------ */

static void stat_inflight_up(struct cfs_io_stats *stats)
{
	if (stats)
		cfs_gauge_up(&stats->inflight_now, &stats->inflight_max);
}

static void stat_inflight_down(struct cfs_io_stats *stats)
{
	if (stats)
		cfs_gauge_down(&stats->inflight_now);
}

/* ---- backends ------------------------------------------------------------ */

const struct cfs_backend_ops *cfs_backend_lookup(const char *name)
{
	static const struct cfs_backend_ops *const table[] = {
		&cfs_backend_uring,
		&cfs_backend_ram,
		&cfs_backend_null,
		&cfs_backend_rbd,
	};
	size_t i;

	if (!name)
		return NULL;
	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (strcmp(table[i]->name, name) == 0)
			return table[i];
	return NULL;
}

static bool is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* The backend must describe a target we can check requests against. */
static int geometry_valid(const struct cfs_io_geometry *geo)
{
	if (!is_pow2(geo->logical_sector_bytes) || geo->logical_sector_bytes > CFS_IO_SECTOR_MAX ||
	    !is_pow2(geo->mem_align_bytes) ||
	    geo->physical_sector_bytes < geo->logical_sector_bytes ||
	    geo->size_bytes % geo->logical_sector_bytes)
		return -EINVAL;
	return 0;
}

int cfs_io_open(const struct cfs_io_config *cfg, struct cfs_io **out)
{
	const struct cfs_backend_ops *data_ops, *ops;
	struct cfs_io *io;
	int ret;

	if (!cfg || !out)
		return -EINVAL;
	*out = NULL;
	/* With a fault spec the wrapped backend may come from the spec
	 * ("inner=..."), so cfg->backend may be absent, but not unknown. */
	data_ops = cfs_backend_lookup(cfg->backend);
	if (!data_ops && (cfg->backend || !cfg->fault_spec))
		return -EINVAL;
	ops = cfg->fault_spec ? &cfs_backend_fault : data_ops;
	if (ops->version != CFS_BACKEND_OPS_VERSION)
		return -EINVAL;

	io = calloc(1, sizeof(*io));
	if (!io)
		return -ENOMEM;
	io->ops = ops;
	io->cfg = *cfg;
	io->cfg.backend = data_ops ? data_ops->name : NULL; /* static: outlives the caller's */
	io->cfg.path = NULL;
	io->cfg.fault_spec = NULL;
	atomic_init(&io->locked_ranges, 0);
	if (cfg->path && !(io->cfg.path = strdup(cfg->path))) {
		ret = -ENOMEM;
		goto out_free;
	}
	if (cfg->fault_spec && !(io->cfg.fault_spec = strdup(cfg->fault_spec))) {
		ret = -ENOMEM;
		goto out_free;
	}

	ret = ops->open(io, &io->cfg);
	if (ret)
		goto out_free;
	if (io->geo.mem_align_bytes == 0)
		io->geo.mem_align_bytes = 1; /* "any buffer" */
	ret = geometry_valid(&io->geo);
	if (ret)
		goto out_close;
	ret = cfs_range_locks_init(io);
	if (ret)
		goto out_close;
	*out = io;
	return 0;

out_close:
	ops->close(io);
out_free:
	free((char *)io->cfg.fault_spec);
	free((char *)io->cfg.path);
	free(io);
	return ret;
}

void cfs_io_close(struct cfs_io *io)
{
	if (!io)
		return;
	cfs_range_locks_fini(io);
	io->ops->close(io);
	free((char *)io->cfg.fault_spec);
	free((char *)io->cfg.path);
	free(io);
}

const struct cfs_io_geometry *cfs_io_geometry(const struct cfs_io *io)
{
	return &io->geo;
}

bool cfs_io_can_discard(const struct cfs_io *io)
{
	return __atomic_load_n(&io->geo.discard_supported, __ATOMIC_RELAXED);
}

/* ---- pools ---------------------------------------------------------------- */

int cfs_io_add_store(struct cfs_io *io, const struct cfs_io_config *cfg)
{
	if (!io || !cfg || !cfg->path)
		return -EINVAL;
	if (!io->ops->add_store)
		return -EOPNOTSUPP;
	return io->ops->add_store(io, cfg);
}

const struct cfs_io_geometry *cfs_io_store_geometry(const struct cfs_io *io, unsigned store)
{
	if (!io->ops->store_geometry)
		return store == 0 ? &io->geo : NULL;
	return io->ops->store_geometry(io, store);
}

static int route_cmp(const void *a, const void *b)
{
	const struct cfs_io_route *x = a, *y = b;

	return x->pool_offset_bytes < y->pool_offset_bytes   ? -1
	       : x->pool_offset_bytes > y->pool_offset_bytes ? 1
							     : 0;
}

int cfs_io_set_routes(struct cfs_io *io, const struct cfs_io_route *routes, unsigned count)
{
	uint64_t lsec = io->geo.logical_sector_bytes;
	struct cfs_io_route *sorted;
	int ret = 0;

	if (!io->ops->set_routes)
		return -EOPNOTSUPP;
	if (count == 0 || count > CFS_IO_ROUTES_MAX)
		return -EINVAL;
	sorted = malloc(count * sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, routes, count * sizeof(*sorted));
	qsort(sorted, count, sizeof(*sorted), route_cmp);
	for (unsigned i = 0; i < count && !ret; i++) {
		const struct cfs_io_route *r = &sorted[i];
		const struct cfs_io_geometry *sg = cfs_io_store_geometry(io, r->store);

		if (!sg || r->length_bytes == 0 ||
		    (r->pool_offset_bytes | r->length_bytes | r->store_offset_bytes) % lsec ||
		    r->pool_offset_bytes + r->length_bytes < r->pool_offset_bytes ||
		    r->store_offset_bytes > sg->size_bytes ||
		    r->length_bytes > sg->size_bytes - r->store_offset_bytes)
			ret = -EINVAL;
		else if (i && sorted[i - 1].pool_offset_bytes + sorted[i - 1].length_bytes >
				      r->pool_offset_bytes)
			ret = -EINVAL; /* overlaps the previous one */
	}
	if (!ret)
		ret = io->ops->set_routes(io, sorted, count);
	free(sorted);
	return ret;
}

unsigned cfs_io_get_routes(struct cfs_io *io, struct cfs_io_route *routes, unsigned max)
{
	return io->ops->get_routes ? io->ops->get_routes(io, routes, max) : 0;
}

int cfs_io_drop_store(struct cfs_io *io, unsigned store)
{
	if (!io->ops->drop_store)
		return -EOPNOTSUPP;
	if (store == 0)
		return -EINVAL;
	return io->ops->drop_store(io, store);
}

/* ---- queues -------------------------------------------------------------- */

static int arena_map(struct cfs_ioq *q, size_t bytes)
{
	long page = sysconf(_SC_PAGESIZE);
	void *mem;

	if (!bytes)
		return 0;
	if (page <= 0)
		page = 4096;
	bytes = (bytes + (size_t)page - 1) & ~((size_t)page - 1);
	mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return -errno;
	/* Huge pages mean fewer segments for the kernel to map per fixed I/O;
	 * populating now keeps page faults off the data path. Both are
	 * best-effort: neither changes behaviour, only speed. */
	if (bytes >= ARENA_HUGE_MIN_BYTES)
		(void)madvise(mem, bytes, MADV_HUGEPAGE);
	(void)madvise(mem, bytes, MADV_POPULATE_WRITE);
	q->arena = mem;
	q->arena_bytes = bytes;
	return 0;
}

int cfs_ioq_create(struct cfs_io *io, const struct cfs_ioq_config *cfg, struct cfs_ioq **out)
{
	struct cfs_ioq_config local = {0};
	struct cfs_ioq *q;
	int ret;

	if (!io || !out)
		return -EINVAL;
	*out = NULL;
	if (cfg)
		local = *cfg;
	if (!local.depth)
		local.depth = CFS_IO_DEPTH_DEFAULT;
	if (local.depth > CFS_IO_DEPTH_MAX || (local.flags & ~CFS_IOQ_SINGLE_THREAD))
		return -EINVAL;

	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->io = io;
	q->depth = local.depth;
	atomic_init(&q->inflight, 0);
	ret = pthread_mutex_init(&q->submit_lock, NULL);
	if (ret) {
		ret = -ret;
		goto out_free;
	}
	ret = arena_map(q, local.buffer_arena_bytes);
	if (ret)
		goto out_mutex;
	ret = cfs_buf_arena_init(q);
	if (ret)
		goto out_unmap;
	ret = io->ops->queue_init(q, &local);
	if (ret)
		goto out_arena;
	*out = q;
	return 0;

out_arena:
	cfs_buf_arena_fini(q);
out_unmap:
	if (q->arena)
		munmap(q->arena, q->arena_bytes);
out_mutex:
	pthread_mutex_destroy(&q->submit_lock);
out_free:
	free(q);
	return ret;
}

void cfs_ioq_destroy(struct cfs_ioq *q)
{
	if (!q)
		return;
	/* Drain: the kernel may still write into callers' buffers and the
	 * arena, and done() must run for every request. */
	while (atomic_load(&q->inflight) > 0) {
		int ret;

		cfs_ioq_submit(q);
		ret = cfs_ioq_reap(q, 1);
		if (ret < 0 && ret != -EINTR)
			break; /* the backend is broken; nothing more will come */
	}
	q->io->ops->queue_fini(q);
	cfs_buf_arena_fini(q);
	if (q->arena)
		munmap(q->arena, q->arena_bytes);
	pthread_mutex_destroy(&q->submit_lock);
	free(q);
}

/* Request validation: 0, or -errno and the counter to charge. */
static int req_check(const struct cfs_io *io, const struct cfs_io_req *req)
{
	const struct cfs_io_geometry *geo = &io->geo;
	uint64_t size;

	if (req->op >= CFS_IO_OP_COUNT || !req->done)
		return -EINVAL;
	if (req->op == CFS_IO_FLUSH)
		return req->length_bytes == 0 ? 0 : -EINVAL;
	if (io->cfg.read_only && req->op != CFS_IO_READ)
		return -EROFS;
	if (req->length_bytes == 0)
		return -EINVAL;
	if (req->op == CFS_IO_READ || req->op == CFS_IO_WRITE) {
		if (req->length_bytes > CFS_IO_LENGTH_MAX || !req->buf)
			return -EINVAL;
	} else if (req->op == CFS_IO_DISCARD && !cfs_io_can_discard(io)) {
		return -EOPNOTSUPP;
	}
	/* The size grows when a store is added (pools): read it atomically. */
	size = __atomic_load_n(&geo->size_bytes, __ATOMIC_ACQUIRE);
	if (req->offset_bytes > size || req->length_bytes > size - req->offset_bytes)
		return -EINVAL;
	return 0;
}

static bool req_misaligned(const struct cfs_io *io, const struct cfs_io_req *req)
{
	const struct cfs_io_geometry *geo = &io->geo;
	uint32_t lsec = geo->logical_sector_bytes;

	if (req->op == CFS_IO_FLUSH)
		return false;
	if ((req->offset_bytes | req->length_bytes) & (lsec - 1))
		return true;
	if ((req->op == CFS_IO_READ || req->op == CFS_IO_WRITE) &&
	    ((uintptr_t)req->buf & (geo->mem_align_bytes - 1)))
		return true;
	return false;
}

/* Stage on the backend, counted in q's inflight. Caller holds no lock. */
static int stage(struct cfs_ioq *q, struct cfs_io_req *req)
{
	int ret;

	atomic_fetch_add_explicit(&q->inflight, 1, memory_order_relaxed);
	pthread_mutex_lock(&q->submit_lock);
	ret = q->io->ops->queue(q, req);
	pthread_mutex_unlock(&q->submit_lock);
	if (ret)
		atomic_fetch_sub_explicit(&q->inflight, 1, memory_order_relaxed);
	return ret;
}

int cfs_ioq_queue(struct cfs_ioq *q, struct cfs_io_req *req)
{
	struct cfs_io *io = q->io;
	int ret;

	if (req_misaligned(io, req)) {
		/* Checked first: misalignment is the bug a real device
		 * reports, whatever else is wrong with the request. */
		if (req->stats)
			cfs_counter_add(&req->stats->err_misaligned, 1);
		return -EINVAL;
	}
	ret = req_check(io, req);
	if (ret) {
		if (req->stats && ret == -EINVAL)
			cfs_counter_add(&req->stats->err_other, 1);
		return ret;
	}
	if (atomic_load_explicit(&q->inflight, memory_order_relaxed) >= q->depth)
		return -EBUSY;

	req->done_bytes = 0;
	req->retries = 0;
	req->iop_flags = 0;
	req->iop_next = NULL;
	req->queued_ns = cfs_now_ns();
	stat_inflight_up(req->stats);

	/* Writes of any kind must not overtake a read-modify-write of the
	 * same sectors; one relaxed load when nothing is locked. */
	if (req->op != CFS_IO_READ && req->op != CFS_IO_FLUSH &&
	    atomic_load_explicit(&io->locked_ranges, memory_order_acquire) &&
	    cfs_range_wait_if_locked(q, req))
		return 0;

	ret = stage(q, req);
	if (ret)
		stat_inflight_down(req->stats);
	return ret;
}

int cfs_ioq_resume(struct cfs_ioq *q, struct cfs_io_req *req)
{
	int ret;

	ret = stage(q, req);
	if (ret == -EBUSY) {
		/* The ring is full of staged requests: push them out, then
		 * there is room (submission consumes every staged entry). */
		cfs_ioq_submit(q);
		ret = stage(q, req);
	}
	if (ret) {
		atomic_fetch_add_explicit(&q->inflight, 1, memory_order_relaxed);
		cfs_ioq_complete(q, req, ret);
		return ret;
	}
	cfs_ioq_submit(q);
	return 0;
}

int cfs_ioq_submit(struct cfs_ioq *q)
{
	int ret;

	pthread_mutex_lock(&q->submit_lock);
	ret = q->io->ops->submit(q);
	if (ret > 0) {
		q->submit_batches++;
		q->submit_requests += (unsigned)ret;
	}
	pthread_mutex_unlock(&q->submit_lock);
	return ret;
}

void cfs_ioq_submit_counts(struct cfs_ioq *q, uint64_t *batches, uint64_t *requests)
{
	pthread_mutex_lock(&q->submit_lock);
	*batches = q->submit_batches;
	*requests = q->submit_requests;
	pthread_mutex_unlock(&q->submit_lock);
}

int cfs_ioq_reap(struct cfs_ioq *q, unsigned min_complete)
{
	unsigned inflight = atomic_load_explicit(&q->inflight, memory_order_relaxed);

	/* Never wait for more than can come: that would sleep forever. */
	if (min_complete > inflight)
		min_complete = inflight;
	return q->io->ops->reap(q, min_complete);
}

int cfs_ioq_event_fd(struct cfs_ioq *q)
{
	if (!q->io->ops->event_fd)
		return -1;
	return q->io->ops->event_fd(q);
}

unsigned cfs_ioq_inflight(const struct cfs_ioq *q)
{
	return atomic_load_explicit(&q->inflight, memory_order_relaxed);
}

void cfs_ioq_complete(struct cfs_ioq *q, struct cfs_io_req *req, int res)
{
	uint64_t latency_ns = cfs_now_ns() - req->queued_ns;
	unsigned before;

	/* done() sees the whole length or an error, never a partial count. */
	CFS_ASSERT(res < 0 || (uint32_t)res == req->length_bytes);
	if (req->stats) {
		cfs_io_stats_record(req->stats, (enum cfs_io_op)req->op, res, latency_ns);
		stat_inflight_down(req->stats);
	}
	before = atomic_fetch_sub_explicit(&q->inflight, 1, memory_order_relaxed);
	CFS_ASSERT(before > 0);
	req->done(req, res);
}

/* ---- synchronous helper -------------------------------------------------- */

struct sync_wait {
	int res;
	atomic_bool finished; /* a resumed request may finish on another thread */
};

static void sync_done(struct cfs_io_req *req, int res)
{
	struct sync_wait *wait = req->cookie;

	wait->res = res;
	atomic_store_explicit(&wait->finished, true, memory_order_release);
}

int cfs_ioq_sync(struct cfs_ioq *q, enum cfs_io_op op, uint64_t offset_bytes, uint32_t length_bytes,
		 void *buf, struct cfs_io_stats *stats)
{
	struct sync_wait wait = {.res = 0};
	struct cfs_io_req req = {
		.offset_bytes = offset_bytes,
		.length_bytes = length_bytes,
		.op = (uint8_t)op,
		.buf = buf,
		.stats = stats,
		.done = sync_done,
		.cookie = &wait,
	};
	int ret;

	if ((unsigned)op >= CFS_IO_OP_COUNT)
		return -EINVAL;
	for (;;) {
		ret = cfs_ioq_queue(q, &req);
		if (ret != -EBUSY)
			break;
		cfs_ioq_submit(q);
		ret = cfs_ioq_reap(q, 1);
		if (ret < 0 && ret != -EINTR)
			return ret;
	}
	if (ret)
		return ret;
	cfs_ioq_submit(q);
	while (!atomic_load_explicit(&wait.finished, memory_order_acquire)) {
		/* 0 in flight here means req is parked behind a range lock
		 * and finishes on another queue: poll gently. */
		if (cfs_ioq_inflight(q) == 0) {
			usleep(100);
			continue;
		}
		ret = cfs_ioq_reap(q, 1);
		/* req lives on this stack frame: returning before its
		 * completion would let the kernel write into a dead frame. */
		CFS_ASSERT(ret >= 0 || ret == -EINTR);
	}
	return wait.res;
}

int cfs_ioq_sync_range(struct cfs_ioq *q, enum cfs_io_op op, uint64_t offset_bytes,
		       uint64_t length_bytes, void *buf)
{
	for (uint64_t done = 0; done < length_bytes;) {
		uint32_t n = length_bytes - done > CFS_IO_LENGTH_MAX
				     ? CFS_IO_LENGTH_MAX
				     : (uint32_t)(length_bytes - done);
		int ret = cfs_ioq_sync(q, op, offset_bytes + done, n,
				       buf ? (uint8_t *)buf + done : NULL, NULL);

		if (ret < 0)
			return ret;
		if ((uint32_t)ret != n)
			return -EIO;
		done += n;
	}
	return 0;
}
