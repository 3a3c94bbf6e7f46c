// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rmw.c — byte ranges that are not sector-aligned: read-modify-write for
 * writes, a bounce buffer for reads, and the range locks that keep
 * concurrent read-modify-writes from losing each other's updates.
 *
 * Why: FUSE hands the daemon writes at any offset and length from buffers at
 * any address (libfuse 3.14 puts the payload 80 bytes into a malloc'ed
 * buffer), and a database with 2 KiB pages on a 4 KiB-sector device writes
 * half sectors. The device only takes whole sectors, so a partial sector is
 * read, merged and written back whole; two such writers on the same sector
 * must take turns or one of them writes back the other's bytes stale.
 *
 * Range locks. A WRITE locks its cover rounded out to the lock unit (the
 * physical sector, at most CFS_IO_SECTOR_MAX): two writers on different
 * 512 B sectors of one 4 KiB physical sector still take turns, since the
 * device itself rewrites the whole physical sector. Locked ranges live in a
 * table of LOCK_STRIPES stripes (mutex + list of holders), each holder in
 * the stripe of the LOCK_GRANULE_BYTES granule its range starts in. A lock is
 * shorter than a granule, so a range [a, b) can only meet holders registered
 * in granules a/G - 1 .. (b-1)/G: checking and inserting under those stripes'
 * mutexes (taken in index order) is atomic against every other overlapping
 * range, with no global lock. A request that overlaps a holder is parked on
 * the holder's wait list (nothing blocks); when the holder releases, each
 * waiter is checked again and either parked on the next holder in its way or
 * restarted on the releasing queue (cfs_ioq_resume, from the releasing
 * thread, as iopath.h says). io->locked_ranges counts holders, so aligned
 * writes pay one atomic load when no read-modify-write is in flight.
 *
 * Reads take no lock: a read-modify-write rewrites the bytes around its
 * range with the values it read under the lock, so a concurrent reader sees
 * each sector before or after it, exactly as with an aligned write.
 *
 * Bounce buffers come from a pool owned by this file (per target, lock-free
 * bitmaps, memory reserved once with MAP_NORESERVE and touched only as used),
 * not from the queue's arena: the arena belongs to the queue's submitting
 * thread (buf.c takes no lock), while a read-modify-write finishes on a
 * reaping thread, possibly of another queue. When the pool is empty,
 * cfs_io_rmw_start() returns -EBUSY, like a full queue.
 *
 * Statistics: the caller's request is charged once, as one READ or WRITE of
 * its own length plus rmw_ops; the sector I/O underneath is not charged.
 *
 * What this file does not do: an aligned write already in flight when a
 * read-modify-write takes its lock is not waited for (aligned writes are not
 * tracked: that would cost every write a shared atomic). Such a write covers
 * the whole sector, so it overlaps the read-modify-write's own bytes: it is
 * the caller's race on the same bytes, as on a device. Every write queued
 * after the lock is taken waits for it.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "fs/base/counter.h"
#include "iopath/backend.h"

#define LOCK_STRIPES 64u
#define LOCK_GRANULE_BYTES (2ull * CFS_IO_LENGTH_MAX) /* hash unit of the table */
#define POOL_SMALL_SLOTS 64u
#define POOL_SMALL_BYTES (64u << 10) /* a cover up to 64 KiB: database pages */
#define POOL_BIG_SLOTS 8u
#define POOL_BIG_BYTES (CFS_IO_LENGTH_MAX + 2 * CFS_IO_SECTOR_MAX) /* largest cover */
#define POOL_ALIGN 4096u

/* The largest lock (a maximal cover rounded to the lock unit) is shorter
 * than a granule, so it touches at most two: see rmw_stripe_mask(). */
_Static_assert(CFS_IO_LENGTH_MAX + 2 * CFS_IO_SECTOR_MAX < LOCK_GRANULE_BYTES,
	       "a lock must be shorter than a hash granule");
_Static_assert(LOCK_STRIPES == 64, "stripe sets are 64-bit masks");
_Static_assert(POOL_SMALL_SLOTS <= 64 && POOL_BIG_SLOTS <= 64, "pool maps are 64-bit");
_Static_assert(POOL_BIG_BYTES % POOL_ALIGN == 0 && POOL_SMALL_BYTES % POOL_ALIGN == 0,
	       "pool slots must stay aligned");

enum rmw_stage {
	STAGE_IDLE = 0,
	STAGE_PARKED,	 /* waiting for a holder to release */
	STAGE_READ_HEAD, /* write: partial first sector (or both edges in one read) */
	STAGE_READ_TAIL, /* write: partial last sector */
	STAGE_WRITE,	 /* write: the merged cover, in pieces <= CFS_IO_LENGTH_MAX */
	STAGE_READ,	 /* read: the cover, in pieces */
};

/* rmw->req.iop_flags (the caller's request never reaches a backend). */
#define RMW_F_TAIL_NEXT (1u << 0) /* the head read is followed by a tail read */

/* A waiter's iop_private says what it is: NULL for a plain request parked by
 * cfs_range_wait_if_locked(), this address for a read-modify-write. */
static char rmw_waiter_tag;
#define RMW_WAITER ((void *)&rmw_waiter_tag)

struct lock_stripe {
	pthread_mutex_t mutex;
	struct cfs_io_rmw *holders; /* linked by wait_next */
} __attribute__((aligned(64)));	    /* one cache line each: no false sharing */

struct cfs_range_locks {
	struct lock_stripe stripe[LOCK_STRIPES];
	uint32_t unit_bytes; /* lock granularity: physical sector, clamped */
	uint8_t *pool;	     /* POOL_SMALL_SLOTS small slots, then big ones */
	size_t pool_bytes;
	_Atomic uint64_t small_free; /* bit set = slot free */
	_Atomic uint64_t big_free;
};

static void rmw_inner_done(struct cfs_io_req *inner, int res);

static inline uint64_t align_down(uint64_t v, uint64_t a)
{
	return v / a * a;
}

static inline uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static inline struct cfs_io_rmw *rmw_of_req(struct cfs_io_req *req)
{
	return (struct cfs_io_rmw *)((char *)req - offsetof(struct cfs_io_rmw, req));
}

/* ---- bounce pool ---------------------------------------------------------- */

static void *slot_take(_Atomic uint64_t *map, uint8_t *base, size_t slot_bytes)
{
	uint64_t v = atomic_load_explicit(map, memory_order_relaxed);

	while (v) {
		unsigned bit = (unsigned)__builtin_ctzll(v);

		if (atomic_compare_exchange_weak_explicit(map, &v, v & ~(1ull << bit),
							  memory_order_acquire,
							  memory_order_relaxed))
			return base + (size_t)bit * slot_bytes;
	}
	return NULL;
}

static void *pool_get(struct cfs_range_locks *l, uint32_t length_bytes)
{
	uint8_t *big = l->pool + (size_t)POOL_SMALL_SLOTS * POOL_SMALL_BYTES;
	void *buf = NULL;

	if (length_bytes <= POOL_SMALL_BYTES)
		buf = slot_take(&l->small_free, l->pool, POOL_SMALL_BYTES);
	if (!buf)
		buf = slot_take(&l->big_free, big, POOL_BIG_BYTES);
	return buf;
}

static void pool_put(struct cfs_range_locks *l, void *buf)
{
	uint8_t *p = buf, *big = l->pool + (size_t)POOL_SMALL_SLOTS * POOL_SMALL_BYTES;
	_Atomic uint64_t *map;
	uint64_t bit, before;

	if (p < big) {
		CFS_ASSERT(p >= l->pool && (size_t)(p - l->pool) % POOL_SMALL_BYTES == 0);
		map = &l->small_free;
		bit = 1ull << ((size_t)(p - l->pool) / POOL_SMALL_BYTES);
	} else {
		CFS_ASSERT(p < l->pool + l->pool_bytes && (size_t)(p - big) % POOL_BIG_BYTES == 0);
		map = &l->big_free;
		bit = 1ull << ((size_t)(p - big) / POOL_BIG_BYTES);
	}
	before = atomic_fetch_or_explicit(map, bit, memory_order_release);
	/* A slot freed twice would be handed to two requests at once. */
	CFS_ASSERT(!(before & bit));
}

/* ---- the lock table --------------------------------------------------------- */

static inline unsigned stripe_of_granule(uint64_t granule)
{
	return (unsigned)((granule * 0x9e3779b97f4a7c15ull) >> 58);
}

/* The stripes that can hold a lock overlapping [a, b): see the file comment. */
static uint64_t rmw_stripe_mask(uint64_t a, uint64_t b)
{
	uint64_t first = a / LOCK_GRANULE_BYTES, last = (b - 1) / LOCK_GRANULE_BYTES, g, mask = 0;

	if (first > 0)
		first--;
	if (last - first >= LOCK_STRIPES)
		return UINT64_MAX;
	for (g = first; g <= last; g++)
		mask |= 1ull << stripe_of_granule(g);
	return mask;
}

static void stripes_lock(struct cfs_range_locks *l, uint64_t mask)
{
	for (uint64_t m = mask; m; m &= m - 1)
		pthread_mutex_lock(&l->stripe[__builtin_ctzll(m)].mutex);
}

static void stripes_unlock(struct cfs_range_locks *l, uint64_t mask)
{
	for (uint64_t m = mask; m; m &= m - 1)
		pthread_mutex_unlock(&l->stripe[__builtin_ctzll(m)].mutex);
}

/* The range an rmw locks: its cover rounded out to the lock unit. */
static void lock_range(const struct cfs_range_locks *l, const struct cfs_io_rmw *rmw, uint64_t *a,
		       uint64_t *b)
{
	*a = align_down(rmw->cover_offset_bytes, l->unit_bytes);
	*b = align_up(rmw->cover_offset_bytes + rmw->cover_length_bytes, l->unit_bytes);
}

/* A holder overlapping [a, b) in the stripes of mask (all locked), or NULL. */
static struct cfs_io_rmw *find_holder(struct cfs_range_locks *l, uint64_t mask, uint64_t a,
				      uint64_t b)
{
	for (uint64_t m = mask; m; m &= m - 1) {
		struct cfs_io_rmw *h = l->stripe[__builtin_ctzll(m)].holders;

		for (; h; h = h->wait_next) {
			uint64_t ha, hb;

			lock_range(l, h, &ha, &hb);
			if (ha < b && a < hb)
				return h;
		}
	}
	return NULL;
}

/* Park req on holder h (stripes locked). Waiters are kept newest first and
 * reversed on release, so they restart in arrival order. */
static void park(struct cfs_io_rmw *h, struct cfs_io_req *req)
{
	req->iop_next = h->req.iop_private;
	h->req.iop_private = req;
}

/* Lock rmw's range, or park it on the holder in its way. True if locked. */
static bool rmw_lock(struct cfs_io *io, struct cfs_io_rmw *rmw)
{
	struct cfs_range_locks *l = io->locks;
	struct cfs_io_rmw *h;
	uint64_t a, b, mask;
	unsigned home;

	lock_range(l, rmw, &a, &b);
	mask = rmw_stripe_mask(a, b);
	home = stripe_of_granule(a / LOCK_GRANULE_BYTES);
	CFS_ASSERT(mask & (1ull << home));
	stripes_lock(l, mask);
	h = find_holder(l, mask, a, b);
	if (h) {
		rmw->stage = STAGE_PARKED;
		rmw->req.iop_private = RMW_WAITER;
		park(h, &rmw->req);
	} else {
		rmw->req.iop_private = NULL; /* now: this holder's waiters */
		rmw->wait_next = l->stripe[home].holders;
		l->stripe[home].holders = rmw;
		atomic_fetch_add_explicit(&io->locked_ranges, 1, memory_order_release);
	}
	stripes_unlock(l, mask);
	return !h;
}

bool cfs_range_wait_if_locked(struct cfs_ioq *q, struct cfs_io_req *req)
{
	struct cfs_range_locks *l = q->io->locks;
	struct cfs_io_rmw *h;
	uint64_t a, b, mask;

	/* A holder's own sector I/O must pass its own lock. */
	if (req->done == rmw_inner_done || req->length_bytes == 0)
		return false;
	a = align_down(req->offset_bytes, l->unit_bytes);
	b = align_up(req->offset_bytes + req->length_bytes, l->unit_bytes);
	mask = rmw_stripe_mask(a, b);
	stripes_lock(l, mask);
	h = find_holder(l, mask, a, b);
	if (h) {
		req->iop_private = NULL;
		park(h, req);
	}
	stripes_unlock(l, mask);
	return h != NULL;
}

static int rmw_run(struct cfs_io_rmw *rmw, bool from_caller);

/*
 * Drop rmw's lock and restart its waiters on q, from this thread. Each waiter
 * is checked again: another holder may still be in its way.
 */
static void rmw_unlock(struct cfs_io *io, struct cfs_io_rmw *rmw, struct cfs_ioq *q)
{
	struct cfs_range_locks *l = io->locks;
	struct cfs_io_rmw **pp;
	struct cfs_io_req *w, *next, *fifo = NULL;
	uint64_t a, b, mask;
	unsigned before;

	lock_range(l, rmw, &a, &b);
	mask = rmw_stripe_mask(a, b);
	stripes_lock(l, mask);
	for (pp = &l->stripe[stripe_of_granule(a / LOCK_GRANULE_BYTES)].holders; *pp != rmw;
	     pp = &(*pp)->wait_next)
		CFS_ASSERT(*pp); /* a holder must be in its home stripe */
	*pp = rmw->wait_next;
	rmw->wait_next = NULL;
	before = atomic_fetch_sub_explicit(&io->locked_ranges, 1, memory_order_release);
	CFS_ASSERT(before > 0);
	w = rmw->req.iop_private;
	rmw->req.iop_private = NULL;
	stripes_unlock(l, mask);

	for (; w; w = next) { /* newest first -> arrival order */
		next = w->iop_next;
		w->iop_next = fifo;
		fifo = w;
	}
	for (w = fifo; w; w = next) {
		next = w->iop_next;
		w->iop_next = NULL;
		if (w->iop_private == RMW_WAITER) {
			struct cfs_io_rmw *r = rmw_of_req(w);

			if (rmw_lock(io, r)) {
				r->q = q;
				rmw_run(r, false);
			}
		} else if (!cfs_range_wait_if_locked(q, w)) {
			cfs_ioq_resume(q, w);
		}
	}
}

/* ---- the read-modify-write state machine ------------------------------------ */

static void rmw_finish(struct cfs_io_rmw *rmw, int res)
{
	struct cfs_io *io = rmw->q->io;
	struct cfs_io_stats *stats = rmw->req.stats;

	if (res >= 0 && rmw->req.op == CFS_IO_READ)
		memcpy(rmw->req.buf,
		       (uint8_t *)rmw->bounce + (rmw->req.offset_bytes - rmw->cover_offset_bytes),
		       rmw->req.length_bytes);
	if (res >= 0)
		res = (int)rmw->req.length_bytes;
	/* The caller publishes what it wrote while overlapping writes still
	 * wait; then release, so the waiters' I/O starts before our done(). */
	if (rmw->req.op == CFS_IO_WRITE && rmw->written && rmw->stage == STAGE_WRITE)
		rmw->written(rmw, res);
	if (rmw->req.op == CFS_IO_WRITE)
		rmw_unlock(io, rmw, rmw->q);
	pool_put(io->locks, rmw->bounce);
	rmw->bounce = NULL;
	rmw->stage = STAGE_IDLE;
	if (stats) {
		cfs_io_stats_record(stats, (enum cfs_io_op)rmw->req.op, res,
				    cfs_now_ns() - rmw->req.queued_ns);
		cfs_counter_add(&stats->rmw_ops, 1);
		cfs_gauge_down(&stats->inflight_now);
	}
	rmw->req.done(&rmw->req, res);
}

/*
 * Issue the sector I/O [cover + at, cover + at + length) for the current
 * stage. From cfs_io_rmw_start() (from_caller) it is only queued, like any
 * request, and an error comes back to the caller; from a done() callback it
 * is resumed (staged and submitted at once), and an error completes it, which
 * re-enters rmw_inner_done(): the caller must not touch rmw afterwards.
 */
static int rmw_issue(struct cfs_io_rmw *rmw, uint8_t op, uint32_t at, uint32_t length,
		     bool from_caller)
{
	struct cfs_io_req *inner = &rmw->inner;
	uint32_t sector = rmw->q->io->geo.logical_sector_bytes;

	CFS_ASSERT(at % sector == 0 && length % sector == 0);
	CFS_ASSERT(length > 0 && length <= CFS_IO_LENGTH_MAX);
	CFS_ASSERT((uint64_t)at + length <= rmw->cover_length_bytes);
	memset(inner, 0, sizeof(*inner));
	inner->offset_bytes = rmw->cover_offset_bytes + at;
	inner->length_bytes = length;
	inner->op = op;
	inner->buf = (uint8_t *)rmw->bounce + at;
	inner->stats = NULL; /* the caller's request is charged once, at the end */
	inner->done = rmw_inner_done;
	inner->cookie = rmw;
	if (from_caller)
		return cfs_ioq_queue(rmw->q, inner);
	cfs_ioq_resume(rmw->q, inner);
	return 0;
}

static uint32_t piece(const struct cfs_io_rmw *rmw)
{
	uint32_t left = rmw->cover_length_bytes - rmw->req.done_bytes;

	return left < CFS_IO_LENGTH_MAX ? left : CFS_IO_LENGTH_MAX;
}

static bool head_partial(const struct cfs_io_rmw *rmw)
{
	return rmw->req.offset_bytes != rmw->cover_offset_bytes;
}

static bool tail_partial(const struct cfs_io_rmw *rmw)
{
	return rmw->req.offset_bytes + rmw->req.length_bytes !=
	       rmw->cover_offset_bytes + rmw->cover_length_bytes;
}

/* Merge the caller's bytes over the cover and start writing it back. */
static int rmw_merge_and_write(struct cfs_io_rmw *rmw, bool from_caller)
{
	memcpy((uint8_t *)rmw->bounce + (rmw->req.offset_bytes - rmw->cover_offset_bytes),
	       rmw->req.buf, rmw->req.length_bytes);
	rmw->stage = STAGE_WRITE;
	rmw->req.done_bytes = 0;
	return rmw_issue(rmw, CFS_IO_WRITE, 0, piece(rmw), from_caller);
}

/* Does the partial edge sector at cover + at need reading? An unwritten one
 * (the caller's hook says so) is merged as zeros instead. */
static bool edge_needs_read(struct cfs_io_rmw *rmw, uint32_t at, uint32_t sector)
{
	if (!rmw->edge_unwritten || !rmw->edge_unwritten(rmw, rmw->cover_offset_bytes + at))
		return true;
	memset((uint8_t *)rmw->bounce + at, 0, sector);
	return false;
}

/* The first I/O of an rmw that holds what it needs (lock for a write). */
static int rmw_run(struct cfs_io_rmw *rmw, bool from_caller)
{
	uint32_t sector = rmw->q->io->geo.logical_sector_bytes;
	uint32_t tail_at = rmw->cover_length_bytes - sector;
	bool head, tail;

	rmw->req.done_bytes = 0;
	if (rmw->req.op == CFS_IO_READ) {
		rmw->stage = STAGE_READ;
		return rmw_issue(rmw, CFS_IO_READ, 0, piece(rmw), from_caller);
	}
	/* Only partial edges are read; a one-sector cover has one edge. */
	head = head_partial(rmw) && edge_needs_read(rmw, 0, sector);
	tail = tail_partial(rmw) && (tail_at > 0 || !head_partial(rmw)) &&
	       edge_needs_read(rmw, tail_at, sector);
	if (!head && !tail)
		return rmw_merge_and_write(rmw, from_caller);
	rmw->req.iop_flags = 0;
	if (head && tail && rmw->cover_length_bytes == 2 * sector) {
		/* The two edges are the whole cover: one read. */
		rmw->stage = STAGE_READ_HEAD;
		return rmw_issue(rmw, CFS_IO_READ, 0, rmw->cover_length_bytes, from_caller);
	}
	if (head) {
		rmw->stage = STAGE_READ_HEAD;
		if (tail)
			rmw->req.iop_flags = RMW_F_TAIL_NEXT;
		return rmw_issue(rmw, CFS_IO_READ, 0, sector, from_caller);
	}
	rmw->stage = STAGE_READ_TAIL;
	return rmw_issue(rmw, CFS_IO_READ, tail_at, sector, from_caller);
}

static void rmw_inner_done(struct cfs_io_req *inner, int res)
{
	struct cfs_io_rmw *rmw = inner->cookie;
	uint32_t sector = rmw->q->io->geo.logical_sector_bytes;

	CFS_ASSERT(inner == &rmw->inner);
	if (res < 0) {
		rmw_finish(rmw, res);
		return;
	}
	switch (rmw->stage) {
	case STAGE_READ_HEAD:
		if (rmw->req.iop_flags & RMW_F_TAIL_NEXT) {
			rmw->stage = STAGE_READ_TAIL;
			rmw_issue(rmw, CFS_IO_READ, rmw->cover_length_bytes - sector, sector,
				  false);
			return;
		}
		rmw_merge_and_write(rmw, false);
		return;
	case STAGE_READ_TAIL:
		rmw_merge_and_write(rmw, false);
		return;
	case STAGE_WRITE:
	case STAGE_READ:
		rmw->req.done_bytes += inner->length_bytes;
		if (rmw->req.done_bytes < rmw->cover_length_bytes) {
			rmw_issue(rmw, inner->op, rmw->req.done_bytes, piece(rmw), false);
			return;
		}
		rmw_finish(rmw, 0);
		return;
	default:
		CFS_ASSERT(!"rmw completion in an impossible stage");
	}
}

int cfs_io_rmw_start(struct cfs_ioq *q, struct cfs_io_rmw *rmw)
{
	struct cfs_io *io = q->io;
	struct cfs_io_req *req = &rmw->req;
	uint32_t sector = io->geo.logical_sector_bytes;
	uint64_t end;
	int ret;

	if ((req->op != CFS_IO_READ && req->op != CFS_IO_WRITE) || !req->done || !req->buf ||
	    req->length_bytes == 0 || req->length_bytes > CFS_IO_LENGTH_MAX ||
	    req->offset_bytes > __atomic_load_n(&io->geo.size_bytes, __ATOMIC_ACQUIRE) ||
	    req->length_bytes >
		    __atomic_load_n(&io->geo.size_bytes, __ATOMIC_ACQUIRE) - req->offset_bytes)
		return -EINVAL;
	if (req->op == CFS_IO_WRITE && io->cfg.read_only)
		return -EROFS;
	end = req->offset_bytes + req->length_bytes;
	rmw->cover_offset_bytes = align_down(req->offset_bytes, sector);
	rmw->cover_length_bytes = (uint32_t)(align_up(end, sector) - rmw->cover_offset_bytes);
	CFS_ASSERT(rmw->cover_length_bytes <= POOL_BIG_BYTES);
	rmw->bounce = pool_get(io->locks, rmw->cover_length_bytes);
	if (!rmw->bounce)
		return -EBUSY;
	rmw->q = q;
	rmw->wait_next = NULL;
	req->iop_next = NULL;
	req->iop_private = NULL;
	req->done_bytes = 0;
	req->retries = 0;
	req->queued_ns = cfs_now_ns();
	if (req->stats)
		cfs_gauge_up(&req->stats->inflight_now, &req->stats->inflight_max);

	if (req->op == CFS_IO_WRITE && !rmw_lock(io, rmw))
		return 0; /* parked: the holder's release runs it */
	ret = rmw_run(rmw, true);
	if (ret == 0)
		return 0;
	/* Nothing was staged (the queue is full): undo, and let anyone who
	 * queued up behind our lock in the meantime go ahead. Should one of
	 * them fail to restart, its done() runs here, in the caller's thread:
	 * the one exception to "done() from a reap", and only on a full
	 * queue racing a lock. */
	if (req->op == CFS_IO_WRITE)
		rmw_unlock(io, rmw, q);
	pool_put(io->locks, rmw->bounce);
	rmw->bounce = NULL;
	rmw->stage = STAGE_IDLE;
	if (req->stats)
		cfs_gauge_down(&req->stats->inflight_now);
	return ret;
}

/* ---- set-up ----------------------------------------------------------------- */

bool cfs_io_ranges_locked(struct cfs_io *io)
{
	return atomic_load_explicit(&io->locked_ranges, memory_order_acquire) != 0;
}

int cfs_range_locks_init(struct cfs_io *io)
{
	struct cfs_range_locks *l;
	uint32_t unit = io->geo.physical_sector_bytes;
	unsigned i;
	void *mem;
	int ret;

	/* A physical sector beyond the largest logical one (or none at all)
	 * is locked in CFS_IO_SECTOR_MAX units: it only makes locks finer. */
	if (unit < io->geo.logical_sector_bytes)
		unit = io->geo.logical_sector_bytes;
	if (unit > CFS_IO_SECTOR_MAX)
		unit = CFS_IO_SECTOR_MAX;
	if (io->geo.mem_align_bytes > POOL_ALIGN)
		return -EINVAL; /* pool slots are only page-aligned */

	ret = posix_memalign(&mem, 64, sizeof(*l));
	if (ret)
		return -ret;
	l = mem;
	memset(l, 0, sizeof(*l));
	l->unit_bytes = unit;
	/* Address space only: slots are backed by memory once used. */
	l->pool_bytes = (size_t)POOL_SMALL_SLOTS * POOL_SMALL_BYTES +
			(size_t)POOL_BIG_SLOTS * POOL_BIG_BYTES;
	l->pool = mmap(NULL, l->pool_bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (l->pool == MAP_FAILED) {
		ret = -errno;
		goto out_free;
	}
	atomic_init(&l->small_free,
		    POOL_SMALL_SLOTS == 64 ? UINT64_MAX : (1ull << POOL_SMALL_SLOTS) - 1);
	atomic_init(&l->big_free, POOL_BIG_SLOTS == 64 ? UINT64_MAX : (1ull << POOL_BIG_SLOTS) - 1);
	for (i = 0; i < LOCK_STRIPES; i++) {
		ret = -pthread_mutex_init(&l->stripe[i].mutex, NULL);
		if (ret)
			goto out_mutexes;
	}
	io->locks = l;
	atomic_store(&io->locked_ranges, 0);
	return 0;

out_mutexes:
	while (i--)
		pthread_mutex_destroy(&l->stripe[i].mutex);
	munmap(l->pool, l->pool_bytes);
out_free:
	free(l);
	return ret;
}

void cfs_range_locks_fini(struct cfs_io *io)
{
	struct cfs_range_locks *l = io->locks;
	unsigned i;

	if (!l)
		return;
	/* Closing with a read-modify-write in flight would free its lock
	 * and bounce buffer under it. */
	CFS_ASSERT(atomic_load(&io->locked_ranges) == 0);
	for (i = 0; i < LOCK_STRIPES; i++) {
		CFS_ASSERT(l->stripe[i].holders == NULL);
		pthread_mutex_destroy(&l->stripe[i].mutex);
	}
	munmap(l->pool, l->pool_bytes);
	free(l);
	io->locks = NULL;
}
