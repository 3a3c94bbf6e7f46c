// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * move.c — the mover (fs/fuse/move.h, fs/POOLS.md "Moving a chunk online").
 *
 * One thread, one move at a time, one unit at a time. Per unit:
 *   1. guard: cfs_data_guard_set over [first unit switched but not yet
 *      durable, this unit's end), then cfs_data_guard_drain: from here no
 *      device write of the unit is in flight and new ones wait;
 *   2. copy the written sectors (cfs_extent_written_span: holes and
 *      unwritten sectors are not copied, and stay so) from the old unit to a
 *      reserved one through the mover's own queue, MOVE_PIECES pieces in
 *      flight, every one finished before the switch;
 *   3. switch (cfs_ns_move_switch: relocate + one transaction, old unit
 *      freed as unmapped units are); every MOVE_COMMIT_UNITS switches, or
 *      when a write waited for the guard, ask for a commit without waiting;
 *   4. the guard leaves each switched unit once the durable sequence has
 *      passed its switch (the next unit's step 1 looks), oldest first.
 * Reads never wait: until the switch they read the old unit, which holds
 * the same bytes and stays allocated while any I/O reference exists.
 *
 * A small file's piece (a part of a unit shared with other small files,
 * fs/meta/piece.h) moves the same way, as its file unit: guarded, copied
 * into a piece of the same size on the target (taken when its turn comes,
 * not reserved with the units), switched in one transaction.
 *
 * A crash before a switch is durable leaves the chunk on the old unit,
 * whole (writes were kept away); after, on the new one (the commit flushed
 * every store first). Reserved units are in no map: mount frees them. The
 * placement record (store = target, from = source) makes the next mount
 * queue the move again (cfs_mover_start). A cancel logs the walk back
 * (store = source, from = target) when it is asked for, before the thread
 * turns round, so a crash after it resumes the walk back.
 *
 * While a move is queued or running, the committer's discards wait
 * (hold_discards).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/base/assert.h"
#include "fs/fuse/data.h"
#include "fs/fuse/move.h"
#include "fs/meta/fs.h"
#include "fs/meta/journal.h"
#include "fs/meta/namespace.h"
#include "fs/meta/pool.h"
#include "iopath/iopath.h"

/* The copy goes in pieces of this size, up to MOVE_PIECES of them in flight
 * at once, all inside the one unit the guard holds: a piece's write
 * overlaps the next pieces' reads, where one piece at a time left each
 * store idle half the time. */
#define MOVE_IO_BYTES (256u << 10)
#define MOVE_PIECES 4u
/* The mover's queue: one request per piece in flight. */
#define MOVE_QUEUE_DEPTH 8u
_Static_assert(MOVE_PIECES <= MOVE_QUEUE_DEPTH, "a piece never waits for a queue slot");
/* Switched units whose transaction is not durable yet, remembered in
 * order: the guard starts at the oldest of them. Past this many the mover
 * waits for a commit. */
#define MOVE_PENDING_MAX 64u
/* The mover asks for a commit after this many switches: every commit
 * flushes the stores twice, and one per switched unit kept them flushing
 * for as long as the copy ran (bench/README.md, pool-move). A write that
 * waits for a switched unit asks at once (inode->guard_refused). */
#define MOVE_COMMIT_UNITS 16u
_Static_assert(MOVE_COMMIT_UNITS < MOVE_PENDING_MAX, "asked for before the mover must wait");
/* A rate-limited or paused mover looks at its requests this often. */
#define MOVE_NAP_NS 50000000ull

enum move_state {
	MS_QUEUED = 1,
	MS_MOVING,
	MS_PAUSED,
	MS_NOSPACE,
	MS_CANCELLING,
	MS_DONE,
	MS_ERROR,
};

static const char *const state_names[] = {
	[MS_QUEUED] = "queued",	  [MS_MOVING] = "moving",	  [MS_PAUSED] = "paused",
	[MS_NOSPACE] = "nospace", [MS_CANCELLING] = "cancelling", [MS_DONE] = "done",
	[MS_ERROR] = "error",
};

struct move {
	uint64_t ino;
	uint32_t to;		     /* where the units go */
	uint32_t from;		     /* where they came from: a cancel returns there */
	_Atomic uint64_t rate_bytes; /* read by the copy without the lock */
	enum move_state state;
	bool cancelling; /* the run in progress takes units back (a cancel) */
	bool want_pause;
	bool want_cancel;
	uint64_t done_bytes;
	uint64_t total_bytes;
	uint64_t moving_ns; /* time spent moving: the rate shown */
	int error;
	/* Units reserved on `to`, taken in order. */
	struct cfs_unit_run *runs;
	unsigned run_count;
	unsigned run_next;
	uint64_t run_used; /* of runs[run_next] */
	struct move *next;
};

/* One piece of a unit's copy: its read, then its write, from one buffer. */
struct piece {
	struct cfs_io_req req;
	uint8_t *buf;	/* MOVE_IO_BYTES of the mover's buffer */
	uint64_t dst;	/* the write's device offset */
	bool busy;	/* a read or write in flight, or a read done and its write due */
	bool write_due; /* the read finished: the write goes next */
	int res;	/* -errno of its read or write */
};

/* A switched unit whose transaction is not durable yet. */
struct pending_switch {
	uint64_t seq;	   /* the switch's transaction */
	uint64_t lo_bytes; /* the unit's first file byte */
};

/* A file unit to move and the place it maps now: a whole store unit or a
 * piece of one. */
struct unit_ref {
	uint64_t file_unit;
	struct cfs_extent_loc from;
};

static struct mover {
	struct cfs_daemon *d;
	pthread_t thread;
	_Atomic bool started; /* read by the loops' requests */
	/* Taken around reading a move's record under `lock` and logging it,
	 * so that two changes of one move are logged in the order they were
	 * made (a pause after a cancel must not log the direction before it).
	 * Before `lock`. */
	pthread_mutex_t persist_lock;
	pthread_mutex_t lock; /* everything below */
	pthread_cond_t wake;
	bool stop;
	struct move *moves;   /* this mount's moves, finished ones too */
	uint32_t count_store; /* cfs_mover_count_off: bytes switched off it */
	uint64_t count_bytes;
	/* The mover thread's own. */
	struct cfs_ioq *q;
	uint8_t *buf; /* MOVE_PIECES * MOVE_IO_BYTES */
	struct piece pieces[MOVE_PIECES];
	uint64_t bucket_start_ns; /* the rate's token bucket */
	uint64_t bucket_bytes;
	bool holding_discards; /* hold_discards() */
} mv = {.lock = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
	.persist_lock = PTHREAD_MUTEX_INITIALIZER,
	.count_store = CFS_STORE_NONE};

#define FS() (mv.d->fs)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool active(const struct move *m)
{
	return m->state == MS_QUEUED || m->state == MS_MOVING || m->state == MS_PAUSED ||
	       m->state == MS_CANCELLING;
}

/* [lock] */
static struct move *find(uint64_t ino)
{
	for (struct move *m = mv.moves; m; m = m->next)
		if (m->ino == ino)
			return m;
	return NULL;
}

static void store_name(uint32_t store, char *buf, size_t bytes)
{
	if (store == CFS_STORE_NONE)
		snprintf(buf, bytes, "-");
	else
		cfs_pool_store_name(FS()->pool, store, buf, bytes);
}

/* ---- reservations ----------------------------------------------------------------------- */

static bool take_reserved(struct move *m, uint64_t *unit)
{
	while (m->run_next < m->run_count && m->run_used == m->runs[m->run_next].count) {
		m->run_next++;
		m->run_used = 0;
	}
	if (m->run_next == m->run_count)
		return false;
	*unit = m->runs[m->run_next].first_unit + m->run_used++;
	return true;
}

/* Give back what the move did not use. */
static void release_reserved(struct move *m)
{
	for (unsigned i = m->run_next; i < m->run_count; i++) {
		uint64_t skip = i == m->run_next ? m->run_used : 0;

		if (m->runs[i].count > skip)
			cfs_ns_move_unreserve(FS(), m->runs[i].first_unit + skip,
					      m->runs[i].count - skip);
	}
	free(m->runs);
	m->runs = NULL;
	m->run_count = m->run_next = 0;
	m->run_used = 0;
}

/* The place on m->to that ref moves into: a new piece for a piece, else the
 * next reserved unit (with more reserved for units mapped on the old store
 * after the census: writes before the placement was logged). 0, -ENOSPC,
 * or another error. */
static int take_place(struct move *m, const struct unit_ref *ref, uint64_t units_left,
		      struct cfs_extent_loc *to)
{
	struct cfs_unit_run *more;
	unsigned n;
	int ret;

	*to = (struct cfs_extent_loc){0, 0, 0};
	if (ref->from.piece_bytes)
		return cfs_ns_move_reserve_piece(FS(), m->to, ref->from.piece_bytes, to);
	if (take_reserved(m, &to->store_unit))
		return 0;
	ret = cfs_ns_move_reserve(FS(), m->to, units_left, &more, &n);
	if (ret)
		return ret;
	release_reserved(m);
	m->runs = more;
	m->run_count = n;
	take_reserved(m, &to->store_unit);
	return 0;
}

static void give_back_place(const struct cfs_extent_loc *to)
{
	if (to->piece_bytes)
		cfs_ns_move_unreserve_piece(FS(), to);
	else
		cfs_ns_move_unreserve(FS(), to->store_unit, 1);
}

static void log_nospace(uint64_t ino, uint32_t to, uint64_t bytes)
{
	struct cfs_pool_store_info info;
	char label[CFS_LABEL_BYTES + 16];
	uint64_t unit = FS()->geom.unit_bytes;

	store_name(to, label, sizeof(label));
	if (cfs_pool_store_info(FS()->pool, to, &info))
		memset(&info, 0, sizeof(info));
	cfs_fs_log(FS(),
		   "move of inode %" PRIu64 " refused: store %s has %.1f GiB free, the chunk needs "
		   "%.1f GiB",
		   ino, label, (double)(info.room_units * unit) / (1u << 30),
		   (double)bytes / (1u << 30));
}

/* ---- what a chunk has where ------------------------------------------------------------- */

struct census {
	struct cfs_pool *pool;
	uint32_t to;
	uint64_t away;	       /* whole units not on `to` */
	uint64_t pieces;       /* pieces not on `to` */
	uint64_t piece_bytes;  /* their bytes */
	uint32_t piece_max;    /* the largest of them */
	uint32_t from;	       /* the store of the first unit or piece away */
	struct unit_ref *list; /* NULL: count only; else away + pieces of them */
	uint64_t list_cap;
	int error;
};

static int census_unit(void *arg, const struct cfs_extent_unit_view *v)
{
	struct census *c = arg;

	for (uint64_t i = 0; i < v->unit_count; i++) {
		uint32_t st = cfs_pool_store_of(c->pool, v->store_unit + i);
		uint64_t n = c->away + c->pieces;

		if (st == c->to)
			continue;
		if (n == 0)
			c->from = st;
		if (c->list) {
			if (n == c->list_cap) {
				struct unit_ref *more =
					realloc(c->list, 2 * c->list_cap * sizeof(*more));

				if (!more)
					return -ENOMEM;
				c->list = more;
				c->list_cap *= 2;
			}
			c->list[n] = (struct unit_ref){
				v->file_unit + i,
				{v->store_unit + i, v->piece_offset_bytes, v->piece_bytes}};
		}
		if (v->piece_bytes) {
			c->pieces++;
			c->piece_bytes += v->piece_bytes;
			if (v->piece_bytes > c->piece_max)
				c->piece_max = v->piece_bytes;
		} else {
			c->away++;
		}
	}
	return 0;
}

/* Bytes a census's units and pieces hold on the store. */
static uint64_t census_bytes(const struct census *c)
{
	return c->away * FS()->geom.unit_bytes + c->piece_bytes;
}

/* Count (and with list, list) the units and pieces of ino not on `to`. */
static int take_census(uint64_t ino, struct census *c, bool list)
{
	int ret;

	c->pool = FS()->pool;
	c->away = c->pieces = c->piece_bytes = 0;
	c->piece_max = 0;
	c->from = CFS_STORE_NONE;
	c->list = NULL;
	if (list) {
		c->list_cap = 64;
		c->list = malloc(c->list_cap * sizeof(*c->list));
		if (!c->list)
			return -ENOMEM;
	}
	ret = cfs_ns_for_each_unit(FS(), ino, census_unit, c);
	if (ret) {
		free(c->list);
		c->list = NULL;
	}
	return ret;
}

/* What a move's placement record says (fields read under mv.lock). */
struct move_place {
	uint64_t ino;
	uint32_t to;
	uint32_t from;
	bool paused;
	uint64_t rate_bytes;
};

/* [lock] A cancel the thread has not turned into a walk back yet is
 * recorded as that walk already: a crash then resumes the walk back. */
static struct move_place place_of(const struct move *m)
{
	bool back = m->want_cancel && !m->cancelling;

	return (struct move_place){m->ino, back ? m->from : m->to, back ? m->to : m->from,
				   m->want_pause,
				   atomic_load_explicit(&m->rate_bytes, memory_order_relaxed)};
}

/* Log the placement: store `to`, a move from `from` to finish
 * (CFS_STORE_NONE: none). */
static int persist(const struct move_place *p)
{
	struct cfs_place place = {p->to, p->from, p->paused ? CFS_JREC_PLACE_PAUSED : 0,
				  p->from == CFS_STORE_NONE ? 0 : p->rate_bytes};

	return cfs_ns_place_set(FS(), p->ino, &place);
}

/* Log the record of ino's move as it is now, if it is still going. */
static int log_move(uint64_t ino)
{
	struct move_place p;
	struct move *m;
	bool going;
	int ret = 0;

	pthread_mutex_lock(&mv.persist_lock);
	pthread_mutex_lock(&mv.lock);
	m = find(ino);
	going = m && active(m);
	if (going)
		p = place_of(m);
	pthread_mutex_unlock(&mv.lock);
	if (going)
		ret = persist(&p);
	pthread_mutex_unlock(&mv.persist_lock);
	return ret;
}

/* ---- the copy ---------------------------------------------------------------------------- */

/* Sleep so that the bytes copied since the bucket started stay within the
 * rate; wakes for requests every MOVE_NAP_NS. */
static void throttle(struct move *m, uint64_t bytes)
{
	uint64_t rate = atomic_load_explicit(&m->rate_bytes, memory_order_relaxed);

	mv.bucket_bytes += bytes;
	if (!rate)
		return;
	for (;;) {
		uint64_t due = mv.bucket_start_ns +
			       (uint64_t)((double)mv.bucket_bytes * 1e9 / (double)rate);
		uint64_t now = now_ns();
		bool stop;

		if (now >= due)
			return;
		pthread_mutex_lock(&mv.lock);
		stop = mv.stop || m->want_pause || m->want_cancel;
		pthread_mutex_unlock(&mv.lock);
		if (stop)
			return;
		usleep((useconds_t)((due - now < MOVE_NAP_NS ? due - now : MOVE_NAP_NS) / 1000));
	}
}

/* Where the copy of one unit is: the written span it is in. */
struct copy_cursor {
	const struct cfs_extent_map *map;
	uint64_t base;	   /* the unit's first file byte */
	uint64_t bytes;	   /* what its place holds: the unit, or its piece */
	uint64_t off;	   /* the next byte of the unit to look at */
	uint64_t span_end; /* the end of the span off is in */
	bool written;	   /* that span's sectors are written */
};

/* The next piece of written sectors of the unit: 1 with [*off, +*n)
 * relative to the unit, 0 at its end, -EIO on a map that answers nothing. */
static int next_piece(struct copy_cursor *c, uint64_t *off, uint32_t *n)
{
	uint64_t unit = c->bytes;

	while (c->off < unit) {
		if (c->off == c->span_end) {
			uint64_t span = cfs_extent_written_span(c->map, c->base + c->off,
								unit - c->off, &c->written);

			if (span == 0)
				return -EIO;
			c->span_end = c->off + span;
		}
		if (!c->written) {
			c->off = c->span_end; /* holes and unwritten sectors stay so */
			continue;
		}
		*off = c->off;
		*n = (uint32_t)(c->span_end - c->off < MOVE_IO_BYTES ? c->span_end - c->off
								     : MOVE_IO_BYTES);
		c->off += *n;
		return 1;
	}
	return 0;
}

/* Runs in the mover's thread (it reaps its own queue). */
static void piece_done(struct cfs_io_req *req, int res)
{
	struct piece *p = req->cookie;

	if (res < 0 || (uint32_t)res != req->length_bytes) {
		p->res = res < 0 ? res : -EIO;
		p->busy = false;
	} else if (req->op == CFS_IO_READ) {
		p->write_due = true;
	} else {
		p->busy = false;
	}
}

static int queue_piece(struct piece *p, enum cfs_io_op op, uint64_t offset, uint32_t bytes)
{
	p->req = (struct cfs_io_req){.offset_bytes = offset,
				     .length_bytes = bytes,
				     .op = (uint8_t)op,
				     .buf = p->buf,
				     .done = piece_done,
				     .cookie = p};
	return cfs_ioq_queue(mv.q, &p->req);
}

/* Device offset of a place. */
static uint64_t place_offset(const struct cfs_extent_loc *loc)
{
	return cfs_fs_unit_offset_bytes(FS(), loc->store_unit) + loc->piece_offset_bytes;
}

static bool same_place(const struct cfs_extent_loc *a, const struct cfs_extent_loc *b)
{
	return a->store_unit == b->store_unit && a->piece_offset_bytes == b->piece_offset_bytes &&
	       a->piece_bytes == b->piece_bytes;
}

/* Copy the written sectors of file unit fu from its place *from to *to, up
 * to MOVE_PIECES pieces in flight. -ESTALE when fu no longer maps exactly
 * *from. */
static int copy_unit(struct move *m, struct cfs_inode *inode, uint64_t fu,
		     const struct cfs_extent_loc *from, const struct cfs_extent_loc *to)
{
	const struct cfs_extent_geom *g = &FS()->geom;
	uint64_t src = place_offset(from), dst = place_offset(to);
	struct copy_cursor cur = {.map = inode->map,
				  .base = fu << g->unit_shift,
				  .bytes = cfs_extent_loc_bytes(g, from)};
	struct cfs_extent_loc now;
	bool more = true;
	int err = 0;

	if (cfs_extent_unit_loc(inode->map, fu, &now) || !same_place(&now, from))
		return -ESTALE;
	for (;;) {
		unsigned busy = 0;
		int ret;

		for (unsigned i = 0; i < MOVE_PIECES; i++) {
			struct piece *p = &mv.pieces[i];
			uint64_t off;
			uint32_t n;

			if (p->res) { /* it finished with an error */
				if (!err)
					err = p->res;
				p->res = 0;
			}
			if (p->write_due) {
				p->write_due = false;
				ret = err ? -ECANCELED
					  : queue_piece(p, CFS_IO_WRITE, p->dst,
							p->req.length_bytes);
				if (ret) {
					p->busy = false;
					if (!err)
						err = ret;
				}
			}
			if (!p->busy && more && !err) {
				ret = next_piece(&cur, &off, &n);
				if (ret <= 0) {
					more = false;
					err = ret;
				} else {
					throttle(m, n);
					p->dst = dst + off;
					ret = queue_piece(p, CFS_IO_READ, src + off, n);
					if (ret)
						err = ret;
					else
						p->busy = true;
				}
			}
			busy += p->busy;
		}
		if (!busy)
			return err; /* nothing of this unit in flight any more */
		cfs_ioq_submit(mv.q);
		ret = cfs_ioq_reap(mv.q, 1);
		/* Returning with a piece in flight would let the device
		 * write into a buffer the next unit reuses. */
		CFS_ASSERT(ret >= 0 || ret == -EINTR);
	}
}

/* ---- one run of a move --------------------------------------------------------------------- */

static void set_state(struct move *m, enum move_state state, int error)
{
	pthread_mutex_lock(&mv.lock);
	m->state = state;
	if (error)
		m->error = error;
	pthread_mutex_unlock(&mv.lock);
}

/* Why the run should stop between units: 0 (go on), or what asked. */
enum stop_why { GO_ON, STOPPING, PAUSING, CANCELLING };

static enum stop_why should_stop(struct move *m)
{
	enum stop_why why = GO_ON;

	pthread_mutex_lock(&mv.lock);
	if (mv.stop)
		why = STOPPING;
	else if (m->want_cancel && !m->cancelling)
		why = CANCELLING;
	else if (m->want_pause)
		why = PAUSING;
	pthread_mutex_unlock(&mv.lock);
	return why;
}

/* Move every unit of m's chunk not on m->to. Returns why it stopped; *err
 * is -ENOSPC or another error that ended it (0: none). */
static enum stop_why run_units(struct move *m, struct cfs_inode *inode, const struct census *c,
			       int *err)
{
	const struct cfs_extent_geom *g = &FS()->geom;
	struct pending_switch pending[MOVE_PENDING_MAX]; /* a ring, oldest first */
	unsigned pending_head = 0, pending_count = 0;
	unsigned unasked = 0; /* switches no commit was asked for yet */
	uint64_t units_left = c->away, bytes_left = census_bytes(c);
	bool guarded = false;
	enum stop_why why = GO_ON;
	uint64_t started = now_ns();

	atomic_store(&inode->guard_refused, false);
	/* The placement record durable soon, not 16 units later: a crash
	 * from then on resumes the move instead of forgetting it. */
	cfs_journal_kick(FS());
	mv.bucket_start_ns = started;
	mv.bucket_bytes = 0;
	for (uint64_t i = 0; i < c->away + c->pieces; i++) {
		const struct unit_ref *ref = &c->list[i];
		uint64_t fu = ref->file_unit, seq;
		uint64_t bytes = cfs_extent_loc_bytes(g, &ref->from);
		struct cfs_extent_loc to;
		uint32_t src;
		int ret;

		why = should_stop(m);
		if (why != GO_ON)
			break;
		ret = take_place(m, ref, units_left, &to);
		if (ret) {
			if (ret == -ENOSPC)
				log_nospace(m->ino, m->to, bytes_left);
			*err = ret;
			break;
		}
		if (!ref->from.piece_bytes)
			units_left--;
		bytes_left -= bytes;
		if (pending_count == MOVE_PENDING_MAX)
			cfs_journal_commit_sync(FS()); /* commits lag: hold no more */
		/* Durable switches leave the guard, oldest first: a commit
		 * that lags one unit behind must not keep every moved unit
		 * guarded until the end. */
		for (uint64_t durable = cfs_journal_durable_seq(FS()->journal);
		     pending_count && pending[pending_head].seq <= durable; pending_count--)
			pending_head = (pending_head + 1) % MOVE_PENDING_MAX;
		cfs_data_guard_set(
			inode, pending_count ? pending[pending_head].lo_bytes : fu << g->unit_shift,
			(fu + 1) << g->unit_shift);
		guarded = true;
		cfs_data_guard_drain(inode);
		ret = copy_unit(m, inode, fu, &ref->from, &to);
		if (!ret)
			ret = cfs_ns_move_switch(FS(), inode, fu, &ref->from, &to, &seq);
		if (ret == -ESTALE) {
			/* Punched, truncated or grown meanwhile: nothing to
			 * move (a piece grows onto the target). */
			give_back_place(&to);
			pthread_mutex_lock(&mv.lock);
			m->total_bytes -= bytes;
			pthread_mutex_unlock(&mv.lock);
			continue;
		}
		if (ret) {
			give_back_place(&to);
			cfs_fs_log(FS(), "move of inode %" PRIu64 ": file unit %" PRIu64 ": %s",
				   m->ino, fu, strerror(-ret));
			*err = ret;
			break;
		}
		pending[(pending_head + pending_count++) % MOVE_PENDING_MAX] =
			(struct pending_switch){seq, fu << g->unit_shift};
		/* A commit every MOVE_COMMIT_UNITS switches, not waited for
		 * here; at once when a write waits for the guard. */
		if (++unasked >= MOVE_COMMIT_UNITS ||
		    atomic_exchange(&inode->guard_refused, false)) {
			cfs_journal_kick(FS());
			unasked = 0;
		}
		src = cfs_pool_store_of(FS()->pool, ref->from.store_unit);
		pthread_mutex_lock(&mv.lock);
		m->done_bytes += bytes;
		if (src == mv.count_store)
			mv.count_bytes += bytes;
		m->moving_ns += now_ns() - started;
		started = now_ns();
		pthread_mutex_unlock(&mv.lock);
	}
	if (guarded) {
		/* A write acknowledged into a switched unit must not be undone
		 * by a crash that replays the old mapping: durable first. */
		if (pending_count)
			cfs_journal_commit_sync(FS());
		cfs_data_guard_clear(inode);
	}
	pthread_mutex_lock(&mv.lock);
	m->moving_ns += now_ns() - started;
	pthread_mutex_unlock(&mv.lock);
	return why;
}

/* A cancel: back where it came from, the same walk the other way. */
static void turn_back(struct move *m)
{
	release_reserved(m);
	pthread_mutex_lock(&mv.lock);
	m->cancelling = true;
	m->want_cancel = false;
	{
		uint32_t t = m->to;

		m->to = m->from;
		m->from = t;
	}
	m->done_bytes = 0;
	m->state = MS_CANCELLING;
	pthread_mutex_unlock(&mv.lock);
	log_move(m->ino);
}

/* Every unit is on `to`: the move is logged finished and ends, unless a
 * cancel came as the last unit switched (its record, logged, says back:
 * false, and the move turns back). */
static bool finish(struct move *m)
{
	struct move_place p;
	bool back;
	int ret;

	pthread_mutex_lock(&mv.persist_lock);
	pthread_mutex_lock(&mv.lock);
	back = m->want_cancel && !m->cancelling;
	p = place_of(m);
	pthread_mutex_unlock(&mv.lock);
	if (back) {
		pthread_mutex_unlock(&mv.persist_lock);
		return false;
	}
	p.from = CFS_STORE_NONE; /* placed on `to`, nothing left to finish */
	ret = persist(&p);
	if (ret && ret != -ENOENT) {
		set_state(m, MS_ERROR, ret);
	} else {
		set_state(m, MS_DONE, 0);
	}
	/* Ended before a cancel can look: it finds nothing to cancel. */
	pthread_mutex_unlock(&mv.persist_lock);
	return true;
}

static void run_move(struct move *m)
{
	struct cfs_ns_stat_view nv;
	struct census c = {.to = m->to};
	enum stop_why why;
	bool back;
	int ret;

	ret = cfs_ns_stat_pin(FS(), m->ino, &nv);
	if (ret) {
		release_reserved(m);
		set_state(m, MS_DONE, 0); /* deleted: nothing left to move */
		return;
	}
	pthread_mutex_lock(&mv.lock);
	back = m->want_cancel && !m->cancelling;
	pthread_mutex_unlock(&mv.lock);
	if (back) {
		/* Cancelled before it ran: no room on `to` needed. */
		turn_back(m);
		goto out;
	}
	ret = take_census(m->ino, &c, true);
	if (ret) {
		release_reserved(m);
		set_state(m, MS_ERROR, ret);
		goto out;
	}
	if (!m->runs && c.away) {
		ret = cfs_ns_move_reserve(FS(), m->to, c.away, &m->runs, &m->run_count);
		if (ret) {
			if (ret == -ENOSPC)
				log_nospace(m->ino, m->to, census_bytes(&c));
			set_state(m, ret == -ENOSPC ? MS_NOSPACE : MS_ERROR, ret);
			goto out;
		}
		m->run_next = 0;
		m->run_used = 0;
	}
	pthread_mutex_lock(&mv.lock);
	m->total_bytes = m->done_bytes + census_bytes(&c);
	m->state = m->cancelling ? MS_CANCELLING : MS_MOVING;
	pthread_mutex_unlock(&mv.lock);

	why = run_units(m, nv.inode, &c, &ret);
	if (ret) {
		/* Reservations go first: once the state says it ended, a new
		 * request may take the entry over. */
		release_reserved(m);
		set_state(m, ret == -ENOSPC ? MS_NOSPACE : MS_ERROR, ret);
		goto out;
	}
	switch (why) {
	case STOPPING:
		set_state(m, MS_QUEUED, 0); /* the next mount resumes it */
		break;
	case PAUSING:
		/* A resume or cancel that came while this unit finished saw the
		 * move running and left it to us: go on instead of pausing. */
		pthread_mutex_lock(&mv.lock);
		m->state = m->want_pause && !m->want_cancel ? MS_PAUSED : MS_QUEUED;
		pthread_mutex_unlock(&mv.lock);
		break;
	case GO_ON:
		release_reserved(m);
		if (!finish(m))
			turn_back(m); /* cancelled as its last unit switched */
		break;
	case CANCELLING:
		turn_back(m);
		break;
	}
out:
	free(c.list);
	cfs_ns_unpin(FS(), nv.inode);
}

/* Discards wait while moves run: a move frees on its source as much as it
 * copies, and the discards of those units (hole punches that the host may
 * turn into device discards) took the disk from the copy. They run when the
 * last queued move has ended (or is paused). */
static void hold_discards(bool hold)
{
	if (hold == mv.holding_discards)
		return;
	mv.holding_discards = hold;
	if (hold) {
		cfs_pool_hold_discards(FS()->pool);
	} else {
		cfs_pool_release_discards(FS()->pool);
		cfs_journal_kick(FS()); /* the committer's passes go on */
	}
}

static void *mover_thread(void *arg)
{
	struct cfs_ioq_config cfg = {.depth = MOVE_QUEUE_DEPTH};

	(void)arg;
	if (cfs_ioq_create(mv.d->io, &cfg, &mv.q) ||
	    posix_memalign((void **)&mv.buf, 4096, MOVE_PIECES * MOVE_IO_BYTES)) {
		cfs_fs_log(FS(), "mover: cannot set up its queue: moves do not run");
		pthread_mutex_lock(&mv.lock);
		for (struct move *m = mv.moves; m; m = m->next)
			if (active(m))
				m->state = MS_ERROR;
		mv.stop = true;
		pthread_mutex_unlock(&mv.lock);
		return NULL;
	}
	for (unsigned i = 0; i < MOVE_PIECES; i++)
		mv.pieces[i] = (struct piece){.buf = mv.buf + (size_t)i * MOVE_IO_BYTES};
	pthread_mutex_lock(&mv.lock);
	while (!mv.stop) {
		struct move *next = NULL;

		for (struct move *m = mv.moves; m && !next; m = m->next)
			if (m->state == MS_QUEUED || m->state == MS_CANCELLING)
				next = m;
		if (!next) {
			hold_discards(false);
			pthread_cond_wait(&mv.wake, &mv.lock);
			continue;
		}
		hold_discards(true);
		next->state = next->cancelling ? MS_CANCELLING : MS_MOVING;
		pthread_mutex_unlock(&mv.lock);
		run_move(next);
		pthread_mutex_lock(&mv.lock);
		if (next->cancelling && next->state == MS_DONE) {
			/* A finished cancel leaves no move behind. */
			struct move **pp = &mv.moves;

			while (*pp != next)
				pp = &(*pp)->next;
			*pp = next->next;
			free(next);
		}
	}
	hold_discards(false);
	pthread_mutex_unlock(&mv.lock);
	return NULL;
}

/* ---- the API ------------------------------------------------------------------------------ */

int cfs_mover_start(struct cfs_daemon *d)
{
	uint64_t *inos = NULL;
	unsigned count = 0;
	int ret;

	mv.d = d;
	if (d->ram || d->read_only)
		return 0;
	ret = cfs_ns_moves_pending(d->fs, &inos, &count);
	if (ret)
		return ret;
	for (unsigned i = 0; i < count; i++) {
		struct cfs_place place;
		struct move *m;

		if (cfs_ns_place_get(d->fs, inos[i], &place))
			continue;
		m = calloc(1, sizeof(*m));
		if (!m) {
			ret = -ENOMEM;
			break;
		}
		m->ino = inos[i];
		m->to = place.store;
		m->from = place.from;
		m->rate_bytes = place.rate_bytes;
		m->want_pause = place.flags & CFS_JREC_PLACE_PAUSED;
		m->state = m->want_pause ? MS_PAUSED : MS_QUEUED;
		m->next = mv.moves;
		mv.moves = m;
	}
	free(inos);
	if (count)
		cfs_fs_log(d->fs, "mover: %u move%s to finish", count, count == 1 ? "" : "s");
	if (ret)
		return ret;
	ret = pthread_create(&mv.thread, NULL, mover_thread, NULL);
	if (ret)
		return -ret;
	atomic_store(&mv.started, true);
	return 0;
}

void cfs_mover_stop(void)
{
	if (atomic_load(&mv.started)) {
		pthread_mutex_lock(&mv.lock);
		mv.stop = true;
		pthread_cond_broadcast(&mv.wake);
		pthread_mutex_unlock(&mv.lock);
		pthread_join(mv.thread, NULL);
		atomic_store(&mv.started, false);
	}
	while (mv.moves) {
		struct move *m = mv.moves;

		mv.moves = m->next;
		release_reserved(m);
		free(m);
	}
	if (mv.q)
		cfs_ioq_destroy(mv.q);
	mv.q = NULL;
	free(mv.buf);
	mv.buf = NULL;
}

int cfs_mover_request(uint64_t ino, uint32_t to, uint64_t rate_bytes)
{
	struct census c = {.to = to};
	struct move *m;
	struct cfs_place place;
	struct cfs_unit_run *runs = NULL;
	unsigned run_count = 0;
	int ret;

	/* Joining (not yet in the durable table) or being removed: no unit
	 * may go there. */
	if (cfs_pool_store_state(FS()->pool, to) != CFS_STORE_ACTIVE)
		return -EINVAL;

	pthread_mutex_lock(&mv.lock);
	m = find(ino);
	if (m && active(m)) {
		ret = m->to == to && !m->cancelling && !m->want_cancel ? 0 : -EBUSY;
		if (!ret && rate_bytes)
			atomic_store_explicit(&m->rate_bytes, rate_bytes, memory_order_relaxed);
		pthread_mutex_unlock(&mv.lock);
		/* A new rate is kept for the next mount too. */
		return ret || !rate_bytes ? ret : log_move(ino);
	}
	pthread_mutex_unlock(&mv.lock);

	ret = take_census(ino, &c, false);
	if (ret)
		return ret;
	if (c.away + c.pieces == 0) {
		/* Nothing to move: only placed (new units go there). */
		place = (struct cfs_place){to, CFS_STORE_NONE, 0, 0};
		return cfs_ns_place_set(FS(), ino, &place);
	}
	if (!atomic_load(&mv.started))
		return -EROFS; /* a read-only or RAM mount: nothing moves */
	/* Whole units now (ENOSPC before anything moves); pieces are taken
	 * one at a time as they move, so a piece as large as the largest is
	 * only looked for (a store removal stops at once when none fits). */
	ret = c.away ? cfs_ns_move_reserve(FS(), to, c.away, &runs, &run_count) : 0;
	if (!ret && c.pieces) {
		struct cfs_extent_loc probe;

		ret = cfs_ns_move_reserve_piece(FS(), to, c.piece_max, &probe);
		if (!ret)
			cfs_ns_move_unreserve_piece(FS(), &probe);
	}
	if (ret) {
		if (ret == -ENOSPC)
			log_nospace(ino, to, census_bytes(&c));
		return ret;
	}
	place = (struct cfs_place){to, c.from, 0, rate_bytes};
	ret = cfs_ns_place_set(FS(), ino, &place);
	if (ret)
		goto out_unreserve;

	pthread_mutex_lock(&mv.lock);
	m = find(ino);
	if (m && active(m)) {
		/* Another request of the same chunk won the race. */
		ret = m->to == to ? 0 : -EBUSY;
		pthread_mutex_unlock(&mv.lock);
		goto out_unreserve;
	}
	if (!m) {
		m = calloc(1, sizeof(*m));
		if (!m) {
			pthread_mutex_unlock(&mv.lock);
			ret = -ENOMEM;
			goto out_unreserve;
		}
		m->next = mv.moves;
		mv.moves = m;
	} else {
		release_reserved(m);
	}
	*m = (struct move){.ino = ino,
			   .to = to,
			   .from = c.from,
			   .rate_bytes = rate_bytes,
			   .state = MS_QUEUED,
			   .total_bytes = census_bytes(&c),
			   .runs = runs,
			   .run_count = run_count,
			   .next = m->next};
	pthread_cond_broadcast(&mv.wake);
	pthread_mutex_unlock(&mv.lock);
	return 0;

out_unreserve:
	for (unsigned i = 0; i < run_count; i++)
		cfs_ns_move_unreserve(FS(), runs[i].first_unit, runs[i].count);
	free(runs);
	return ret;
}

int cfs_mover_pause(uint64_t ino, bool pause)
{
	struct move *m;

	pthread_mutex_lock(&mv.lock);
	m = find(ino);
	if (!m || !active(m)) {
		pthread_mutex_unlock(&mv.lock);
		return -ENOENT;
	}
	m->want_pause = pause;
	if (!pause && m->state == MS_PAUSED) {
		m->state = m->cancelling ? MS_CANCELLING : MS_QUEUED;
		pthread_cond_broadcast(&mv.wake);
	}
	pthread_mutex_unlock(&mv.lock);
	return log_move(ino);
}

/* [lock] Ask m (NULL: none) to go back where it came from: 1 asked, 0
 * going back already, -ENOENT no move or a finished one, -EBUSY. */
static int ask_cancel(struct move *m)
{
	if (!m || !(active(m) || m->state == MS_NOSPACE || m->state == MS_ERROR))
		return -ENOENT;
	if (m->cancelling || m->want_cancel)
		return 0;
	/* A cancel takes the units back where they came from: not onto a
	 * store being removed (its evacuation started this move). */
	if (cfs_pool_store_state(FS()->pool, m->from) != CFS_STORE_ACTIVE)
		return -EBUSY;
	m->want_cancel = true;
	m->want_pause = false;
	if (m->state != MS_MOVING)
		m->state = MS_QUEUED; /* not running: the thread takes it up as a cancel */
	pthread_cond_broadcast(&mv.wake);
	return 1;
}

int cfs_mover_cancel(uint64_t ino)
{
	int ret;

	pthread_mutex_lock(&mv.lock);
	ret = ask_cancel(find(ino));
	pthread_mutex_unlock(&mv.lock);
	/* Logged now: a crash before the thread turns it back resumes the
	 * walk back, not the move. */
	return ret == 1 ? log_move(ino) : ret;
}

int cfs_mover_cancel_from(uint32_t store, unsigned *cancelled)
{
	uint64_t *inos = NULL;
	unsigned n = 0, cap = 0;
	int ret = 0;

	*cancelled = 0;
	pthread_mutex_lock(&mv.lock);
	for (struct move *m = mv.moves; m; m = m->next) {
		if (m->from != store || m->cancelling)
			continue;
		if (n == cap) {
			uint64_t *more = realloc(inos, (cap ? 2 * cap : 16) * sizeof(*inos));

			if (!more) {
				ret = -ENOMEM;
				break;
			}
			inos = more;
			cap = cap ? 2 * cap : 16;
		}
		if (ask_cancel(m) == 1)
			inos[n++] = m->ino;
	}
	pthread_mutex_unlock(&mv.lock);
	for (unsigned i = 0; i < n; i++) {
		int err = log_move(inos[i]);

		if (err && !ret)
			ret = err;
	}
	free(inos);
	*cancelled = n;
	return ret;
}

void cfs_mover_count_off(uint32_t store)
{
	pthread_mutex_lock(&mv.lock);
	mv.count_store = store;
	mv.count_bytes = 0;
	pthread_mutex_unlock(&mv.lock);
}

uint64_t cfs_mover_counted_off(void)
{
	uint64_t bytes;

	pthread_mutex_lock(&mv.lock);
	bytes = mv.count_bytes;
	pthread_mutex_unlock(&mv.lock);
	return bytes;
}

bool cfs_mover_moving_to(uint64_t ino, uint32_t *to)
{
	struct move *m;
	bool moving;

	pthread_mutex_lock(&mv.lock);
	m = find(ino);
	moving = m && active(m);
	if (moving)
		*to = place_of(m).to; /* a cancel not yet turned back: its source */
	pthread_mutex_unlock(&mv.lock);
	return moving;
}

size_t cfs_mover_render(uint64_t ino, char *text, size_t max)
{
	char from[CFS_LABEL_BYTES + 16], to[CFS_LABEL_BYTES + 16];
	struct move_place p;
	struct move *found;
	enum move_state state = 0;
	uint64_t done = 0, total = 0, moving_ns = 0, rate;

	pthread_mutex_lock(&mv.lock);
	found = find(ino);
	if (found) {
		p = place_of(found);
		state = found->state;
		done = found->done_bytes;
		total = found->total_bytes;
		moving_ns = found->moving_ns;
	}
	pthread_mutex_unlock(&mv.lock);
	if (!found)
		return (size_t)snprintf(text, max, "state=none");
	store_name(p.from, from, sizeof(from));
	store_name(p.to, to, sizeof(to));
	rate = moving_ns ? (uint64_t)((double)done * 1e9 / (double)moving_ns) : 0;
	return (size_t)snprintf(text, max,
				"state=%s from=%s to=%s done=%" PRIu64 " total=%" PRIu64
				" rate=%" PRIu64 " limit=%" PRIu64,
				state_names[state], from, to, done, total, rate, p.rate_bytes);
}
