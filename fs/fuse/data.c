/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * data.c — the asynchronous data path: FUSE READ and WRITE (and the zeroing
 * of cut sectors for truncate and punch) become iopath requests on the
 * calling event loop's queue; the completions reply. No thread waits for the
 * device, and a request takes no lock when its units are mapped.
 *
 * One request = one context from the loop's fixed pool (never malloc'ed per
 * request) with up to PARTS_PER_ROUND iopath requests ("parts"). A request
 * that needs more parts (a read over many discontiguous runs) goes in rounds:
 * the next round is prepared when the previous one completed.
 *
 * READ: the range (clipped at EOF) is widened to the I/O granule (logical
 * sector and memory alignment of the target) and read into one buffer from
 * the queue's arena. Holes and unwritten sectors are recorded in the
 * context's zero map and zero-filled at the end, without I/O; mapped runs
 * with written sectors are read from the device in one part per run (the
 * unwritten sectors inside a run are read too, then zeroed: the zero map is
 * a snapshot of the written-state taken before the read, so a sector that
 * was unwritten then is never shown with whatever the device holds).
 *
 * WRITE: missing units are allocated first (cfs_ns_map_for_write: the inode
 * mutex, once per unit), the payload is copied from libfuse's receive buffer
 * (80 bytes into a malloc'ed block: unaligned for O_DIRECT) into an arena
 * buffer at the same offset modulo the granule, and each mapped run becomes
 * up to three parts: a read-modify-write for a partial head granule, plain
 * aligned writes for the middle, a read-modify-write for a partial tail. The
 * RMW asks, under its range lock, whether an edge sector was ever written,
 * and starts from zeros instead of reading it if not (the device may hold a
 * previous owner's bytes); it marks the sectors written before it releases
 * the lock, so a waiting RMW of the same sector sees them written. Plain
 * parts mark their sectors written on completion. Then the size and mtime
 * change in memory (cfs_ns_write_done; logged by the next commit) and the
 * reply goes out.
 *
 * Statistics (fs/stats/chunkstat.h): a READ or WRITE is charged to its chunk once,
 * when it is answered (ctx_finish, or where it is refused before a context
 * exists), with the bytes the application asked for and got and the time
 * from receipt to reply. Device requests carry no statistics pointer: a
 * request split into several device I/Os is still one operation.
 *
 * Held blocks (held_absorb, fs/fuse/held.h): a small buffered write lands in
 * the daemon's copy of its 4 KiB block and is answered at once; the block
 * goes to the store later, whole; see there.
 *
 * RAM mounts (ram_read, ram_write): the store is memory of this process, so
 * a request over one mapped, contiguous, written run is answered straight
 * from it (READ) or copied straight into it (aligned WRITE), without a
 * buffer or an iopath request; see there.
 *
 * Lifetime: every request holds an I/O reference on its inode
 * (cfs_ns_io_begin before the first map lookup, cfs_ns_io_end after the last
 * mark), so units are not freed and handed to another file while our I/O is
 * in flight (fs/meta/extent.h).
 *
 * Threads: a context belongs to the loop that received its request; only
 * that loop touches its arena and its pool. A part can complete on another
 * loop (a write parked behind a range lock is resumed by whoever released
 * it): the last part's completion then hands the context back through the
 * owner's lock-free remote list and eventfd.
 *
 * Reads answered where they finish: when replies may go out from any thread
 * (/dev/fuse, cfs_daemon.reply_any_thread), a READ's device parts are marked
 * CFS_IO_REQ_DONE_ANY_THREAD, and a backend with a completion thread of its
 * own (rbd: librbd's) completes them there. The last part of the last round
 * then charges the statistics, drops the I/O reference and replies on that
 * thread (read_answer), and only the context goes back to the owner, on its
 * recycle list, without waking it: the owner takes the list at its next
 * pass, and asks for a wakeup (recycle_wake) only when it would sleep
 * needing contexts (none free to receive with, or exiting). That saves the
 * owner's wake-up between the store's completion and the reply: on an RBD
 * store at queue depth 1 it was the one hop fio's rbd engine does not have.
 *
 * What this file does not do: metadata commits (fsync is ops.c + journal),
 * allocation policy (namespace), alignment of the device (iopath checks it).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fs/base/assert.h"
#include "fs/fuse/data.h"
#include "fs/fuse/held.h"
#include "fs/fuse/dio_inval.h"
#include "fs/meta/fs.h"
#include "fs/meta/namespace.h"
#include "iopath/iopath.h"

#define PARTS_PER_ROUND 8u
/* Granularity of the read zero map: every logical sector size is a multiple. */
#define ZMAP_GRAIN_BYTES 512u
#define BUF_MAX_BYTES (CFS_IO_LENGTH_MAX + 2u * CFS_IO_SECTOR_MAX)
#define ZMAP_WORDS ((BUF_MAX_BYTES / ZMAP_GRAIN_BYTES + 63u) / 64u)
#define WORK_ROUNDS_MAX 8
/* A batch's device I/O is submitted at once while fewer than this many of the
 * loop's device requests are in flight (ctx_continue). */
#define SUBMIT_NOW_BELOW 4u
/* ... and always for requests of this size or more: receiving the next one
 * costs a copy of up to 1 MiB, too long to hold this one back. */
#define SUBMIT_NOW_FROM_BYTES (64u << 10)

_Static_assert(CFS_MAX_WRITE_BYTES <= CFS_IO_LENGTH_MAX,
	       "a FUSE request must fit one iopath buffer");

enum ctx_op {
	OP_READ = 1,
	OP_WRITE,
	OP_ZERO,
	OP_THEN,  /* cfs_data_after_writes(): a parked call of ops.c */
	OP_FLUSH, /* a held block goes to the store (no FUSE request) */
	OP_FILL,  /* a WRITE to be absorbed reads its blocks first */
	OP_SPACE, /* a WRITE or a call of ops.c waits for space (space_park) */
};

struct ctx;

struct part {
	struct cfs_io_rmw rmw; /* rmw.req is also the plain request */
	struct ctx *ctx;
	uint64_t file_offset_bytes; /* file offset of rmw.req.offset_bytes */
	bool is_rmw;
	struct part *retry_next;
};

struct ctx {
	struct cfs_loop *owner;
	fuse_req_t req;
	struct cfs_inode *inode; /* holds an I/O reference while set (OP_SPACE: a pin) */
	unsigned io_gen;	 /* that reference's generation (cfs_ns_io_end) */
	struct cfs_extent_map *map;
	struct cfs_chunk_stats *stats;
	uint8_t op;
	bool device_io;	      /* some part went to the device */
	bool rmw;	      /* some part is a read-modify-write (statistics) */
	bool direct;	      /* OP_READ: an O_DIRECT open (short reads are counted) */
	bool behind;	      /* OP_WRITE: may be answered once queued (write-behind) */
	bool answered;	      /* OP_WRITE: answered, not yet on the store */
	uint8_t drop_cache;   /* OP_WRITE: CFS_FILE_DROP_CACHE_* */
	int8_t behind_slot;   /* OP_WRITE: its inode->behind slot, or -1 */
	uint64_t behind_seq;  /* OP_ZERO, OP_THEN: wait for write-behinds up to this */
	uint32_t asked_bytes; /* OP_READ: the length the kernel asked for */
	bool buf_heap;
	bool buf_ring;	       /* buf is the FUSE-over-io_uring reply payload (not ours to free) */
	uint64_t offset_bytes; /* the FUSE request */
	uint32_t length_bytes;
	uint64_t base_bytes;   /* file offset that buf[0] stands for */
	uint64_t cursor_bytes; /* next file offset to prepare */
	uint64_t end_bytes;    /* end of the range to prepare */
	uint8_t *buf;
	uint32_t buf_bytes;
	const void *ram_reply; /* OP_READ on a RAM mount: the bytes, in the store */
	uint64_t start_ns;
	unsigned nparts;	  /* parts of this round */
	atomic_uint pending;	  /* parts not yet completed (+1 while queueing) */
	atomic_int error;	  /* first -errno of any part */
	struct cfs_attr attr;	  /* OP_ZERO for setattr: the reply; ino 0: none */
	cfs_data_then_fn then_fn; /* OP_THEN, OP_SPACE: what to run, with then_args */
	uint64_t then_args[CFS_DATA_THEN_ARGS_MAX / 8];
	uint64_t zmap[ZMAP_WORDS];  /* OP_READ: grains that read as zeros */
	uint64_t space_retry_ns;    /* OP_SPACE: try again from then */
	uint64_t space_deadline_ns; /* OP_SPACE: ENOSPC after then */
	struct ctx *next;	    /* free list, ready list, remote list */

	/* Held blocks (held.h). held_seq: OP_FLUSH, the change it carries;
	 * the others, the changes they wait for (set by the first admit()). */
	bool held_noted;
	bool direct_counted;	    /* OP_WRITE: counted in inode->direct_writes */
	bool store_counted;	    /* OP_WRITE, OP_ZERO, OP_FLUSH: in inode->store_writes */
	bool grow;		    /* OP_WRITE, OP_THEN: a piece must grow first */
	bool grow_whole;	    /* ... into a whole unit (fallocate) */
	bool grow_noted;	    /* counted in inode->piece_growers */
	bool grow_absorb;	    /* OP_WRITE: grown, then into held blocks (grown_absorb) */
	unsigned file_flags;	    /* OP_WRITE: its CFS_FILE_* (grow_absorb, map_write) */
	uint64_t grow_offset_bytes; /* the range the piece must hold */
	uint64_t grow_length_bytes;
	bool guard_counted; /* counted in inode->guard_writers[guard_gen] */
	uint8_t guard_gen;
	uint64_t held_seq;
	/* OP_FLUSH: its block, [0]. OP_FILL: the write's held_n blocks, the
	 * taken ones' cfs_held_block.taken, those read (bits), the read's
	 * bytes at the start of buf (the payload after them). */
	struct cfs_held_block *held_blk[CFS_HELD_WRITE_BLOCKS];
	uint64_t fill_taken[CFS_HELD_WRITE_BLOCKS];
	uint8_t held_n;
	uint8_t fill_mask;
	uint32_t fill_bytes;
	/* OP_READ: copies of the held blocks it overlaps, taken when it
	 * started (read_snap), in buf after its buf_bytes; laid over the
	 * store's bytes before the reply. */
	uint8_t snap_n;
	uint64_t snap_offset_bytes[CFS_HELD_SLOTS];
	struct part parts[PARTS_PER_ROUND];
};

struct cfs_loop {
	struct cfs_daemon *d;
	unsigned index;
	struct cfs_ioq *q;
	int queue_fd;
	int remote_fd;
	struct fuse_buf fbuf; /* libfuse's receive buffer, reused */
	struct ctx *pool;
	struct ctx *free;
	unsigned free_count;
	struct ctx *ready;		  /* rounds completed on this thread */
	_Atomic(struct ctx *) remote;	  /* rounds completed on other threads */
	_Atomic(struct ctx *) recycle;	  /* reads answered on other threads, to put */
	atomic_bool recycle_wake;	  /* the loop sleeps until recycle fills */
	atomic_uint answering;		  /* reads being answered on other threads */
	atomic_ullong answered_elsewhere; /* how many were (the exit line) */
	struct part *retry_head;	  /* parts that found the queue or bounce pool full */
	struct part *retry_tail;
	struct ctx *parked_head; /* waiting for their file's write-behind */
	struct ctx *parked_tail;
	uint32_t granule_bytes; /* I/O alignment: sector and memory */
	uint64_t heap_buffers;	/* arena exhausted: aligned heap buffer used */
	bool ram;		/* the store is our memory: ram_read(), ram_write() */
	bool hold_submit;	/* a batch is being dispatched (cfs_loop_hold_submit) */
	unsigned batched_parts; /* queued during the hold and not yet submitted */

	bool absorb;			    /* small buffered writes go to held blocks */
	bool stopping;			    /* exiting: held blocks go to the store now */
	struct cfs_held_block *held_timers; /* blocks this loop flushes when due */
	uint64_t held_due_ns;		    /* the earliest due of them */

	struct cfs_ioq *grow_q; /* a piece's copy when it grows (made on first use) */
	uint8_t *grow_buf;
	uint32_t grow_buf_bytes;
};

static __thread struct cfs_loop *tls_loop;
static const uint8_t zero_sector[CFS_IO_SECTOR_MAX] __attribute__((aligned(4096)));
/* Set before the loops start, cleared after they stopped (data.h). */
static cfs_reply_buf_fn reply_buf_hook;

void cfs_data_set_reply_buf_hook(cfs_reply_buf_fn fn)
{
	reply_buf_hook = fn;
}

static void *reply_buf(size_t *bytes)
{
	return reply_buf_hook ? reply_buf_hook(bytes) : NULL;
}

static inline uint64_t align_down(uint64_t v, uint64_t a)
{
	return v / a * a;
}

static inline uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* ---- contexts and buffers -------------------------------------------------- */

static struct ctx *ctx_get(struct cfs_loop *l)
{
	struct ctx *c = l->free;

	if (!c)
		return NULL;
	l->free = c->next;
	l->free_count--;
	c->next = NULL;
	return c;
}

/* Give c's buffer back to where it came from: the arena, the heap, or (a
 * FUSE-over-io_uring reply payload) nobody, the ring entry keeps it. */
static void ctx_buf_release(struct cfs_loop *l, struct ctx *c)
{
	if (c->buf) {
		if (c->buf_ring)
			; /* the ring entry's, until the reply is committed */
		else if (c->buf_heap)
			free(c->buf);
		else
			cfs_ioq_buf_put(l->q, c->buf);
		c->buf = NULL;
	}
	c->buf_heap = false;
	c->buf_ring = false;
}

static void ctx_put(struct cfs_loop *l, struct ctx *c)
{
	ctx_buf_release(l, c);
	c->inode = NULL;
	c->req = NULL;
	c->ram_reply = NULL;
	c->next = l->free;
	l->free = c;
	l->free_count++;
}

static int ctx_buf(struct cfs_loop *l, struct ctx *c, uint32_t bytes)
{
	c->buf_bytes = bytes;
	c->buf_heap = false;
	c->buf_ring = false;
	c->buf = cfs_ioq_buf_get(l->q, bytes);
	if (c->buf)
		return 0;
	/* More large requests in flight than the arena holds: an aligned heap
	 * buffer keeps the request going (a non-fixed operation, slower). */
	if (posix_memalign((void **)&c->buf, 4096, bytes)) {
		c->buf = NULL;
		return -ENOMEM;
	}
	c->buf_heap = true;
	l->heap_buffers++;
	return 0;
}

/* Start a context for a request on inode: I/O reference taken. */
static struct ctx *ctx_start(struct cfs_loop *l, fuse_req_t req, struct cfs_inode *inode,
			     uint8_t op)
{
	struct ctx *c = ctx_get(l);

	/* main.c only receives a request when a context is free, and every
	 * request takes at most one. */
	CFS_ASSERT(c);
	c->owner = l;
	c->req = req;
	c->inode = inode;
	c->map = inode ? inode->map : NULL;
	c->stats = inode ? cfs_ns_inode_stats(inode) : NULL;
	c->op = op;
	c->device_io = false;
	c->rmw = false;
	c->direct = false;
	c->behind = false;
	c->answered = false;
	c->drop_cache = 0;
	c->behind_slot = -1;
	c->held_noted = false;
	c->snap_n = 0;
	c->direct_counted = false;
	c->store_counted = false;
	c->grow = false;
	c->grow_whole = false;
	c->grow_noted = false;
	c->grow_absorb = false;
	c->guard_counted = false;
	/* A context's buffer flags describe its last request's buffer until
	 * reset: a held flush that sets buf by hand must not inherit them. */
	c->buf = NULL;
	c->buf_heap = false;
	c->buf_ring = false;
	c->nparts = 0;
	atomic_store_explicit(&c->error, 0, memory_order_relaxed);
	c->attr.ino = 0;
	/* Only the statistics use the start time. */
	c->start_ns = CFS_STATS_ENABLED ? cfs_now_ns() : 0;
	if (inode)
		c->io_gen = cfs_ns_io_begin(inode);
	if (op == OP_READ || op == OP_WRITE)
		cfs_cs_request_begin(c->stats);
	return c;
}

/* ---- write-behind ------------------------------------------------------------
 *
 * A buffered WRITE through a cached open (the page cache already holds its
 * bytes) is answered as soon as its units are allocated, its payload is in
 * our buffer and its device writes are queued: the writer does not wait for
 * the store, as on a kernel filesystem's page cache. ENOSPC still fails the
 * write() itself (allocation comes first); a device error is kept for the
 * file's next fsync, as Linux keeps a writeback error.
 *
 * Ordering. A write-behind takes a slot of its inode (its byte range, rounded
 * out to CFS_IO_SECTOR_MAX so that no sector, read-modify-write or
 * written-state bit is shared with a neighbour, and a sequence number) before
 * it is queued, and gives it back when it is on the store (ctx_finish).
 * Until then a READ or WRITE of the file that overlaps it waits on its loop's
 * parked list (no thread blocks), so nothing overtakes it on the device and
 * no read sees the written-state from before it. fsync, SEEK_DATA/SEEK_HOLE
 * (cfs_data_after_writes) and the zeros of truncate and punch
 * (cfs_data_zero) wait for every write-behind the file had when they
 * arrived: by sequence number, so new writes neither wait for them nor
 * starve them. A write-behind with all slots taken waits for one. Requests
 * of a file with no write-behind pay one atomic load.
 */
static void ctx_continue(struct cfs_loop *l, struct ctx *c);
static void ctx_finish(struct cfs_loop *l, struct ctx *c);
static void read_go(struct cfs_loop *l, struct ctx *c);
static bool read_snap(struct cfs_loop *l, struct ctx *c);
static void park(struct cfs_loop *l, struct ctx *c);
static void space_retry(struct cfs_loop *l, struct ctx *c);
static void grown_absorb(struct cfs_loop *l, struct ctx *c);

#define BEHIND_ROUND CFS_IO_SECTOR_MAX

/* The bytes c covers, rounded out: a READ the length asked, a WRITE its. */
static void ctx_range(const struct ctx *c, uint64_t *a, uint64_t *b)
{
	uint64_t len = c->op == OP_READ ? c->asked_bytes : c->length_bytes;

	*a = align_down(c->offset_bytes, BEHIND_ROUND);
	*b = align_up(c->offset_bytes + len, BEHIND_ROUND);
}

/* ---- the mover's guard (fs/fuse/move.h, inode->guard_*) --------------------------
 *
 * While the mover copies a unit (and until its switch is durable) no device
 * write of the file may touch it: a WRITE, a held block's flush or the zeros
 * of truncate and punch whose file range meets [guard_lo, guard_hi) waits
 * (parked like a request behind a write-behind; a flush goes back on its
 * timer). Every such write counts itself in guard_writers[guard_gen] before
 * it reads the guard and stays counted until its sectors are marked; the
 * mover publishes the guard, then flips the generation twice, each time
 * waiting for the old one to drain (cfs_data_guard_drain): a write counted
 * after the mover looked at its generation has seen the guard. A file
 * without a move pays one atomic add and subtract per device write and one
 * load of guard_hi.
 */
#define GUARD_RETRY_NS 1000000ull /* a guarded held block tries again after */

static bool guard_overlaps(struct cfs_inode *inode, uint64_t a, uint64_t b)
{
	uint64_t hi = atomic_load(&inode->guard_hi_bytes);

	return hi && a < hi && atomic_load(&inode->guard_lo_bytes) < b;
}

/* Count a device write of file bytes [a, b) in flight, unless the guard
 * covers them (then nothing is counted: false). */
static bool guard_pass(struct cfs_inode *inode, uint64_t a, uint64_t b, uint8_t *gen)
{
	uint32_t g = atomic_load(&inode->guard_gen);

	atomic_fetch_add(&inode->guard_writers[g], 1);
	if (guard_overlaps(inode, a, b)) {
		atomic_fetch_sub(&inode->guard_writers[g], 1);
		atomic_store(&inode->guard_refused, true);
		return false;
	}
	*gen = (uint8_t)g;
	return true;
}

static bool guard_enter(struct ctx *c, uint64_t a, uint64_t b)
{
	if (c->guard_counted)
		return true;
	c->guard_counted = guard_pass(c->inode, a, b, &c->guard_gen);
	return c->guard_counted;
}

/* The write is on the store (its sectors marked) or gave up. */
static void guard_leave(struct ctx *c)
{
	if (!c->guard_counted)
		return;
	atomic_fetch_sub(&c->inode->guard_writers[c->guard_gen], 1);
	c->guard_counted = false;
}

/* The file bytes a WRITE or a zeroing writes. */
static void guard_range(const struct ctx *c, uint64_t *a, uint64_t *b)
{
	if (c->op != OP_ZERO) {
		*a = c->offset_bytes;
		*b = c->offset_bytes + c->length_bytes;
		return;
	}
	*a = UINT64_MAX;
	*b = 0;
	for (unsigned i = 0; i < c->nparts; i++) {
		const struct part *p = &c->parts[i];

		*a = p->file_offset_bytes < *a ? p->file_offset_bytes : *a;
		if (p->file_offset_bytes + p->rmw.req.length_bytes > *b)
			*b = p->file_offset_bytes + p->rmw.req.length_bytes;
	}
}

/* A zeroing admitted: its device offsets were looked up when the truncate
 * or punch ran, and the mover may have moved those units since (it cannot
 * from now on: the zeroing is counted). Look them up again; a sector no
 * longer mapped needs no zeros. */
static void zero_relocate(struct ctx *c)
{
	unsigned kept = 0;

	for (unsigned i = 0; i < c->nparts; i++) {
		struct part *p = &c->parts[i];
		struct cfs_extent_run run;

		if (cfs_extent_lookup(c->map, p->file_offset_bytes, p->rmw.req.length_bytes,
				      &run) ||
		    !run.mapped || run.length_bytes < p->rmw.req.length_bytes)
			continue;
		p->rmw.req.offset_bytes = run.device_offset_bytes;
		if (kept != i) {
			c->parts[kept] = *p;
			c->parts[kept].rmw.req.cookie = &c->parts[kept];
		}
		kept++;
	}
	c->nparts = kept;
}

/* ---- held blocks: small writes absorbed (fs/fuse/held.h) -------------------------
 *
 * A buffered WRITE of a cached open that touches at most
 * CFS_HELD_WRITE_BLOCKS blocks, one of them partly, is absorbed: its bytes
 * go into the file's held copy of each block and it is answered at once,
 * with no device I/O and no read of the block (held_absorb). A block's copy
 * is made once: zeros when none of its sectors was ever written, the write's
 * own bytes when it covers the block, else read from the store by the first
 * write (OP_FILL, answered when the read is in). Allocation still comes
 * first (cfs_ns_map_for_write), so ENOSPC fails the write() itself.
 *
 * A changed block goes to the store whole, by one aligned write from a copy
 * (OP_FLUSH; writes may go on changing the block meanwhile): when a write
 * reaches its end (an appender moved on), after CFS_HELD_DELAY_NS (the loop
 * that listed it keeps a timer list), before an unabsorbed write of its
 * bytes goes to the store, and for every fsync, SEEK_DATA/HOLE, truncate or
 * punch: admit() waits for the changes each of these must see (by sequence
 * number, held.h). A READ of its bytes does not wait: it takes a copy of
 * the block and lays it over what the store gives (read_snap). A flush's
 * failure is the file's next fsync's error, as for a write-behind.
 * A truncate that cuts, a punch, a zeroed range and O_TRUNC drop the file's
 * held blocks
 * (their bytes would be old); the last close drops those with nothing to
 * write.
 *
 * Contexts. A flush needs one, besides the request that asked for it; a loop
 * receives a request only while CFS_HELD_SLOTS + 1 are free, so the flushes
 * one request starts always find one. A flush that finds none (the timer,
 * a request resumed later) is left to the timer, due now.
 *
 * What stays as it was: O_DIRECT writes, uncached opens, RAM mounts (their
 * writes are copies already) and -o writethrough do not absorb; a write in
 * flight from the store (O_DIRECT through a cached open) keeps its file from
 * taking new blocks until it is done, since its bytes are in no held copy.
 */
#define HB CFS_HELD_BLOCK_BYTES

/* Flushes started under the inode lock, submitted after it (held_launch). */
struct held_launch {
	struct ctx *c[CFS_HELD_SLOTS];
	unsigned n;
};

static void parts_go(struct cfs_loop *l, struct ctx *c);
static struct part *part_new(struct ctx *c, uint8_t op, uint64_t file_offset_bytes,
			     uint64_t device_offset_bytes, uint32_t length_bytes, void *buf,
			     bool rmw);

/* Under the lock: the counts lock-free checks read (admit's fast path). */
static void held_mirror(struct cfs_inode *inode)
{
	uint32_t blocks = 0, pending = 0;

	if (inode->held)
		cfs_held_counts(inode->held, &blocks, &pending);
	atomic_store_explicit(&inode->held_blocks, blocks, memory_order_release);
	atomic_store_explicit(&inode->held_pending, pending, memory_order_release);
}

/* Requests of inode parked on other loops may go now: wake those loops. */
static void wake_parked(struct cfs_loop *l, struct cfs_inode *inode)
{
	uint64_t one = 1;

	if (!atomic_load_explicit(&inode->behind_waiters, memory_order_acquire))
		return;
	for (unsigned i = 0; i < l->d->loop_count; i++) {
		struct cfs_loop *o = l->d->loops[i];

		if (o != l && write(o->remote_fd, &one, sizeof(one)) != sizeof(one)) {
			/* the counter is far from overflowing */
		}
	}
}

/* Under the lock: l's timer flushes blk when it is due (a pin keeps the
 * inode while it is listed). A pin, not an I/O reference: a listed block
 * holds no device offset (flush_arm looks it up under its own context's
 * reference), and a listing can outlive many requests (its loop busy, or
 * blocked in an allocation that waits for the very units such a reference
 * would hold back: a punch or truncate of the file frees them only when the
 * references older than it are gone). */
static void held_list(struct cfs_loop *l, struct cfs_inode *inode, struct cfs_held_block *blk)
{
	if (blk->listed)
		return;
	blk->listed = true;
	blk->timer_loop = l;
	blk->timer_inode = inode;
	blk->timer_next = l->held_timers;
	l->held_timers = blk;
	cfs_ns_pin(inode);
	if (blk->due_ns < l->held_due_ns)
		l->held_due_ns = blk->due_ns;
}

/* Under the lock: c becomes the flush of blk (LIVE, not flushing). The
 * device offset is looked up here, under the lock, so a truncate cannot
 * slip in between and send the old bytes to a unit mapped again since.
 * A block no longer mapped (its range was cut) is written nowhere. */
static void flush_arm(struct cfs_loop *l, struct ctx *c, struct cfs_inode *inode,
		      struct cfs_held_block *blk)
{
	struct cfs_extent_run run;
	uint64_t off = blk->file_offset_bytes;
	uint32_t start, end;

	c->held_seq = cfs_held_flush_begin(blk, c->buf, &start, &end);
	if (!c->store_counted) {
		/* Under the lock, as a piece's growth checks it. */
		atomic_fetch_add_explicit(&inode->store_writes, 1, memory_order_seq_cst);
		c->store_counted = true;
	}
	/* Only the sectors changed since the last flush: the written-state
	 * stays exact (SEEK_HOLE), and a record a second is a sector write. */
	start = (uint32_t)align_down(start, l->granule_bytes);
	end = (uint32_t)align_up(end, l->granule_bytes);
	c->held_blk[0] = blk;
	c->offset_bytes = c->base_bytes = off;
	c->length_bytes = HB;
	c->cursor_bytes = c->end_bytes = off + HB; /* nothing to prepare */
	c->nparts = 0;
	atomic_store_explicit(&c->error, 0, memory_order_relaxed);
	if (start < end && !cfs_extent_lookup(inode->map, off, HB, &run) && run.mapped &&
	    run.length_bytes >= HB)
		part_new(c, CFS_IO_WRITE, off + start, run.device_offset_bytes + start, end - start,
			 c->buf + start, false);
}

/* Under the lock: start a flush of blk on l, to be submitted by
 * held_launch(). False when l has no free context or buffer. */
static bool held_flush_prepare(struct cfs_loop *l, struct cfs_inode *inode,
			       struct cfs_held_block *blk, struct held_launch *go)
{
	uint64_t off = blk->file_offset_bytes;
	struct ctx *c;
	uint8_t *buf;
	uint8_t gen;

	if (!l->free || go->n == CFS_HELD_SLOTS)
		return false;
	if (!guard_pass(inode, off, off + HB, &gen)) {
		blk->due_ns = cfs_now_ns() + GUARD_RETRY_NS;
		return false;
	}
	buf = cfs_ioq_buf_get(l->q, HB);
	if (!buf) {
		atomic_fetch_sub(&inode->guard_writers[gen], 1);
		return false;
	}
	c = ctx_start(l, NULL, inode, OP_FLUSH);
	c->guard_counted = true;
	c->guard_gen = gen;
	c->buf = buf;
	c->buf_bytes = HB;
	c->answered = true; /* no FUSE request behind it */
	flush_arm(l, c, inode, blk);
	go->c[go->n++] = c;
	return true;
}

static void held_launch(struct cfs_loop *l, struct held_launch *go)
{
	for (unsigned i = 0; i < go->n; i++)
		parts_go(l, go->c[i]);
	go->n = 0;
}

/* Under the lock: blk's changes are wanted on the store now. */
static void held_kick(struct cfs_loop *l, struct cfs_inode *inode, struct cfs_held_block *blk,
		      struct held_launch *go)
{
	if (blk->state != CFS_HELD_LIVE || !cfs_held_dirty(blk))
		return;
	if (blk->flushing) {
		blk->want = true; /* the flush in flight starts the next */
		return;
	}
	if (held_flush_prepare(l, inode, blk, go))
		return;
	/* No context, or the mover's guard: the timer of the loop that listed
	 * it does it (now, or when the guard has likely moved on). */
	if (!guard_overlaps(inode, blk->file_offset_bytes, blk->file_offset_bytes + HB))
		blk->due_ns = 0;
	held_list(l, inode, blk);
	if (blk->timer_loop == l && blk->due_ns < l->held_due_ns)
		l->held_due_ns = blk->due_ns;
}

/*
 * Under the lock, from admit(): may c start as far as the held blocks of its
 * file are concerned? [a, b): c's range (not used by drains, which look at
 * every block). Kicks the flushes c waits for.
 */
static bool held_admit(struct cfs_loop *l, struct ctx *c, uint64_t a, uint64_t b, bool drain,
		       struct held_launch *go)
{
	struct cfs_inode *inode = c->inode;
	struct cfs_held *h = inode->held;
	bool ok = true;

	if (!c->held_noted) {
		/* What it must see: every change made before it arrived. */
		c->held_seq = h->seq;
		c->held_noted = true;
	}
	for (unsigned i = 0; i < CFS_HELD_SLOTS; i++) {
		struct cfs_held_block *blk = &h->block[i];

		if (blk->state == CFS_HELD_FREE || (!drain && !cfs_held_overlaps(blk, a, b)))
			continue;
		if (c->op == OP_FILL) {
			/* An older flush of these bytes must land before the
			 * store is read for them. */
			if (blk->state == CFS_HELD_DEAD || blk->flushing)
				ok = false;
			continue;
		}
		if (blk->state == CFS_HELD_FILLING) {
			/* A write not yet answered: a READ need not see it, a
			 * drain waits (a truncate must not cut under it). */
			if (c->op != OP_READ)
				ok = false;
			continue;
		}
		if (c->op == OP_READ && blk->state == CFS_HELD_LIVE)
			continue; /* read_go copies it (read_snap): no flush to wait for */
		if (c->op != OP_WRITE) {
			/* READ, fsync, seek, truncate, punch. */
			if (cfs_held_needs_flush(blk, c->held_seq))
				held_kick(l, inode, blk, go);
			if (cfs_held_unstored(blk, c->held_seq))
				ok = false;
			continue;
		}
		/* A WRITE not absorbed: the held copy goes to the store first
		 * and is forgotten (its bytes would be old after this write). */
		if (blk->state == CFS_HELD_LIVE && cfs_held_dirty(blk)) {
			held_kick(l, inode, blk, go);
			if (cfs_held_dirty(blk)) {
				ok = false; /* wanted, or left to the timer */
				continue;
			}
		}
		if (blk->state == CFS_HELD_LIVE)
			cfs_held_forget(blk);
		if (blk->state == CFS_HELD_DEAD)
			ok = false;
	}
	return ok;
}

/* ---- a piece grows (fs/meta/namespace.h, cfs_ns_grow_pieces) -----------------
 *
 * A write that needs more of a unit than the file's piece holds first moves
 * the piece's bytes to a bigger place. No device write of the file may be in
 * flight meanwhile (its bytes would land in the old place after the copy):
 * every device write of a file's data is counted in inode->store_writes from
 * its admission to its end, a grower counts itself in inode->piece_growers
 * and waits (parked) until no write is counted, and a write that finds a
 * grower waits behind it (parked). Both sides increment first and look at
 * the other's count after (sequentially consistent), so one of them always
 * sees the other. A held block's flush is counted when it is armed, under the
 * inode lock, and the copy checks the count again under that lock. The copy
 * itself is synchronous, on the loop's own small queue: a file grows out of
 * its piece a few times in its life (a power of two each time), not per
 * request.
 */
static bool counts_as_store_write(const struct ctx *c)
{
	return c->inode && (c->op == OP_WRITE || c->op == OP_ZERO);
}

/* c's device writes are done (or were never queued). */
static void store_write_end(struct cfs_loop *l, struct ctx *c)
{
	struct cfs_inode *inode = c->inode;

	if (!c->store_counted)
		return;
	c->store_counted = false;
	if (atomic_fetch_sub_explicit(&inode->store_writes, 1, memory_order_seq_cst) == 1 &&
	    atomic_load_explicit(&inode->piece_growers, memory_order_seq_cst))
		wake_parked(l, inode);
}

/* May c's device writes start as far as growing pieces are concerned? */
static bool store_write_begin(struct cfs_loop *l, struct ctx *c)
{
	struct cfs_inode *inode = c->inode;

	if (c->store_counted || !counts_as_store_write(c))
		return true;
	atomic_fetch_add_explicit(&inode->store_writes, 1, memory_order_seq_cst);
	c->store_counted = true;
	if (!atomic_load_explicit(&inode->piece_growers, memory_order_seq_cst))
		return true;
	store_write_end(l, c);
	return false;
}

/* Who copies a growing piece: the loop (its queue) and the file. */
struct grow_src {
	struct cfs_loop *l;
	struct cfs_inode *inode;
};

/* Under the inode lock: the bytes of [file_offset, +n) the file's LIVE held
 * blocks cover (whole blocks inside the range), copied into buf (file
 * offset file_offset at buf[0]) when copy. */
static uint32_t grow_overlay(struct cfs_inode *inode, uint64_t file_offset_bytes, uint32_t n,
			     uint8_t *buf, bool copy)
{
	uint32_t covered = 0;

	for (unsigned i = 0; inode->held && i < CFS_HELD_SLOTS; i++) {
		const struct cfs_held_block *blk = &inode->held->block[i];

		if (blk->state != CFS_HELD_LIVE || blk->file_offset_bytes < file_offset_bytes ||
		    blk->file_offset_bytes + HB > file_offset_bytes + n)
			continue;
		if (copy)
			memcpy(buf + (blk->file_offset_bytes - file_offset_bytes), blk->bytes, HB);
		covered += HB;
	}
	return covered;
}

/* Under the inode lock (cfs_ns_grow_pieces): copy a piece's bytes. */
static int grow_copy(void *arg, uint64_t from_bytes, uint64_t to_bytes, uint32_t bytes)
{
	struct grow_src *src = arg;
	struct cfs_loop *l = src->l;
	int ret = 0;

	/* A held block's flush armed since the grower looked. */
	if (atomic_load_explicit(&src->inode->store_writes, memory_order_seq_cst))
		return -EBUSY;
	if (!l->grow_q) {
		struct cfs_ioq_config qcfg = {.depth = 2};
		/* The largest piece (half a unit), in requests iopath takes. */
		uint32_t n = l->d->fs->geom.unit_bytes / 2;
		size_t align =
			l->d->geo->mem_align_bytes > 4096 ? l->d->geo->mem_align_bytes : 4096;

		if (n > CFS_IO_LENGTH_MAX)
			n = CFS_IO_LENGTH_MAX;
		l->grow_buf = aligned_alloc(align, n);
		if (!l->grow_buf)
			return -ENOMEM;
		l->grow_buf_bytes = n;
		ret = cfs_ioq_create(l->d->io, &qcfg, &l->grow_q);
		if (ret) {
			free(l->grow_buf);
			l->grow_buf = NULL;
			return ret;
		}
	}
	for (uint32_t done = 0; !ret && done < bytes;) {
		uint32_t n = bytes - done < l->grow_buf_bytes ? bytes - done : l->grow_buf_bytes;
		int r = (int)n;

		/* A piece is the file's first unit: file offset done. Blocks
		 * held LIVE are the newest bytes; when they cover the part, the
		 * store need not be read. */
		if (grow_overlay(src->inode, done, n, l->grow_buf, false) < n)
			r = cfs_ioq_sync(l->grow_q, CFS_IO_READ, from_bytes + done, n, l->grow_buf,
					 NULL);
		if (r >= 0) {
			grow_overlay(src->inode, done, n, l->grow_buf, true);
			r = cfs_ioq_sync(l->grow_q, CFS_IO_WRITE, to_bytes + done, n, l->grow_buf,
					 NULL);
		}
		ret = r < 0 ? r : r != (int)n ? -EIO : 0;
		done += n;
	}
	return ret;
}

/* Map a WRITE's range before it goes to the store: the kernel's write-back
 * may take the space held back for it (cfs_ns_map_for_writeback). */
static int map_write(struct cfs_loop *l, struct cfs_inode *inode, unsigned file_flags,
		     uint64_t offset_bytes, uint64_t length_bytes)
{
	if (file_flags & CFS_FILE_WRITEBACK)
		return cfs_ns_map_for_writeback(l->d->fs, inode, offset_bytes, length_bytes);
	return cfs_ns_map_for_write(l->d->fs, inode, offset_bytes, length_bytes);
}

/* The grower c: grow now if no device write of its file is in flight. False:
 * park (and try again when the last one ends). */
static bool grow_try(struct cfs_loop *l, struct ctx *c)
{
	struct cfs_inode *inode = c->inode;
	int ret;

	if (!c->grow_noted) {
		atomic_fetch_add_explicit(&inode->piece_growers, 1, memory_order_seq_cst);
		c->grow_noted = true;
	}
	if (atomic_load_explicit(&inode->store_writes, memory_order_seq_cst))
		return false;
	ret = cfs_ns_grow_pieces(l->d->fs, inode, c->grow_offset_bytes, c->grow_length_bytes,
				 c->grow_whole, c->file_flags & CFS_FILE_WRITEBACK, grow_copy,
				 &(struct grow_src){l, inode});
	if (ret == -EBUSY)
		return false;
	/* A WRITE's other units (a grown piece is the first unit only). */
	if (!ret && c->op == OP_WRITE)
		ret = map_write(l, inode, c->file_flags, c->offset_bytes, c->length_bytes);
	if (ret == -EAGAIN)
		ret = -ENOSPC; /* no wait here: this context holds an I/O reference */
	if (ret)
		atomic_store_explicit(&c->error, ret == -EXDEV ? -EIO : ret, memory_order_release);
	c->grow = false;
	c->grow_noted = false;
	atomic_fetch_sub_explicit(&inode->piece_growers, 1, memory_order_seq_cst);
	wake_parked(l, inode);
	return true;
}

/*
 * A small buffered WRITE whose file must grow out of its piece first, from
 * cfs_data_write: grow it now, on this loop, when no device write of the
 * file is in flight (as grow_try would at once), so that the write can
 * still be absorbed into held blocks. Through a context it would become a
 * write-behind with read-modify-writes, and the small writes after it
 * would each wait for the one before on the store (a rollback journal,
 * new in every transaction, grows three times in one). 0: grown and
 * mapped; -EBUSY: not now (the context path parks and grows); other
 * -errno: the write fails.
 */
static int grow_inline(struct cfs_loop *l, struct cfs_inode *inode, unsigned file_flags,
		       uint64_t offset_bytes, uint64_t length_bytes)
{
	uint8_t gen;
	int ret = -EBUSY;

	/* The mover's guard, as for any write to these bytes. */
	if (!guard_pass(inode, offset_bytes, offset_bytes + length_bytes, &gen))
		return -EBUSY;
	atomic_fetch_add_explicit(&inode->piece_growers, 1, memory_order_seq_cst);
	if (!atomic_load_explicit(&inode->store_writes, memory_order_seq_cst))
		ret = cfs_ns_grow_pieces(l->d->fs, inode, offset_bytes, length_bytes, false,
					 file_flags & CFS_FILE_WRITEBACK, grow_copy,
					 &(struct grow_src){l, inode});
	if (!ret)
		ret = map_write(l, inode, file_flags, offset_bytes, length_bytes);
	if (ret == -EAGAIN)
		ret = -ENOSPC; /* rare: a piece grown, the rest of the write not */
	atomic_fetch_sub_explicit(&inode->piece_growers, 1, memory_order_seq_cst);
	wake_parked(l, inode);
	atomic_fetch_sub(&inode->guard_writers[gen], 1);
	return ret == -EXDEV ? -EBUSY : ret;
}

/*
 * May c start now? A READ or WRITE when no write-behind of its file overlaps
 * it (a write-behind also needs a free slot, which it takes) and the held
 * blocks it overlaps let it (held_admit); an fsync, seek or zeroing (first
 * call: !parked) when every write-behind of the file that was there at its
 * first call is done, and so are the changes of its held blocks.
 */
static bool admit_behind_held(struct cfs_loop *l, struct ctx *c, bool parked)
{
	struct cfs_inode *inode = c->inode;
	struct cfs_behind *slot = NULL;
	struct held_launch go = {.n = 0};
	uint64_t a = 0, b = 0;
	bool drain = c->op != OP_READ && c->op != OP_WRITE && c->op != OP_FILL;
	bool writes = c->op == OP_WRITE || c->op == OP_FILL;
	bool ok = true;

	if (c->grow) {
		if (!grow_try(l, c))
			return false;
		if (atomic_load_explicit(&c->error, memory_order_acquire))
			return true; /* it fails: nothing to wait for */
	}
	if (c->grow_absorb)
		return true; /* grown: grown_absorb() takes it from here */
	/* Counted while it waits below too: what it waits for never waits for
	 * a grower. */
	if (!store_write_begin(l, c))
		return false;
	if (!c->behind && !atomic_load_explicit(&inode->behind_writes, memory_order_acquire) &&
	    !atomic_load_explicit(writes ? &inode->held_blocks : &inode->held_pending,
				  memory_order_acquire))
		return true;
	if (!drain)
		ctx_range(c, &a, &b);
	pthread_mutex_lock(&inode->lock);
	if (drain && !parked)
		c->behind_seq = inode->behind_seq;
	for (int i = 0; i < CFS_BEHIND_N; i++) {
		struct cfs_behind *r = &inode->behind[i];

		if (r->end_bytes == 0)
			slot = slot ? slot : r;
		else if (drain ? r->seq <= c->behind_seq : r->start_bytes < b && a < r->end_bytes)
			ok = false;
	}
	if (inode->held) {
		if (!held_admit(l, c, a, b, drain, &go))
			ok = false;
		held_mirror(inode);
	}
	if (ok && c->behind) {
		if (!slot) {
			ok = false;
		} else {
			slot->start_bytes = a;
			slot->end_bytes = b;
			slot->seq = ++inode->behind_seq;
			c->behind_slot = (int8_t)(slot - inode->behind);
			atomic_fetch_add_explicit(&inode->behind_writes, 1, memory_order_acq_rel);
		}
	}
	pthread_mutex_unlock(&inode->lock);
	held_launch(l, &go);
	return ok;
}

/* admit_behind_held(), and for a device write the mover's guard: counted
 * first, so a write waiting for anything else is never counted. */
static bool admit(struct cfs_loop *l, struct ctx *c, bool parked)
{
	bool writes = c->op == OP_WRITE || c->op == OP_ZERO;
	uint64_t a, b;

	if (c->op == OP_SPACE)
		return cfs_now_ns() >= c->space_retry_ns;

	if (writes) {
		guard_range(c, &a, &b);
		if (!guard_enter(c, a, b))
			return false;
	}
	if (!admit_behind_held(l, c, parked)) {
		guard_leave(c);
		return false;
	}
	if (c->op == OP_ZERO)
		zero_relocate(c);
	return true;
}

/* Start c now, or park it until admit() lets it. */
static void admit_or_park(struct cfs_loop *l, struct ctx *c,
			  void (*go)(struct cfs_loop *, struct ctx *))
{
	if (admit(l, c, false)) {
		go(l, c);
		return;
	}
	park(l, c);
}

/* c waits on l's parked list until admit() lets it (run_parked). */
static void park(struct cfs_loop *l, struct ctx *c)
{
	atomic_fetch_add_explicit(&c->inode->behind_waiters, 1, memory_order_acq_rel);
	c->next = NULL;
	if (l->parked_tail)
		l->parked_tail->next = c;
	else
		l->parked_head = c;
	l->parked_tail = c;
}

static void then_go(struct cfs_loop *l, struct ctx *c)
{
	struct cfs_inode *inode = c->inode;
	int err = atomic_load_explicit(&c->error, memory_order_acquire);
	fuse_req_t req = c->req;
	cfs_data_then_fn fn = c->then_fn;
	uint64_t args[CFS_DATA_THEN_ARGS_MAX / 8];

	/* The call holds no device offset (what it writes goes through a
	 * context of its own): a pin keeps the inode, not the I/O reference.
	 * That reference would hold back the units a truncate or punch of the
	 * call frees, and a fallocate's allocation would wait for them in
	 * vain (ENOSPC with the space free a moment later). */
	cfs_ns_pin(inode);
	cfs_ns_io_end(l->d->fs, inode, c->io_gen);
	/* The context goes back first: the call may need one (a zeroing, a
	 * wait for space). */
	memcpy(args, c->then_args, sizeof(args));
	ctx_put(l, c);
	if (err)
		cfs_reply_err(req, err); /* its piece could not grow */
	else
		fn(req, inode, args);
	cfs_ns_unpin(l->d->fs, inode);
}

static void resume(struct cfs_loop *l, struct ctx *c)
{
	switch (c->op) {
	case OP_READ:
		read_go(l, c);
		break;
	case OP_WRITE:
		if (c->grow_absorb)
			grown_absorb(l, c);
		else
			ctx_continue(l, c);
		break;
	case OP_ZERO:
		parts_go(l, c);
		break;
	case OP_THEN:
		then_go(l, c);
		break;
	case OP_FILL:
		ctx_continue(l, c);
		break;
	case OP_SPACE:
		space_retry(l, c);
		break;
	default:
		CFS_ASSERT(!"parked request of no kind");
	}
}

/* Start the parked requests admit() now lets go, in arrival order. */
static bool run_parked(struct cfs_loop *l)
{
	struct ctx *c = l->parked_head, *prev = NULL;
	bool progress = false;

	while (c) {
		struct ctx *next = c->next;

		if (!admit(l, c, true)) {
			prev = c;
			c = next;
			continue;
		}
		if (prev)
			prev->next = next;
		else
			l->parked_head = next;
		if (l->parked_tail == c)
			l->parked_tail = prev;
		c->next = NULL;
		atomic_fetch_sub_explicit(&c->inode->behind_waiters, 1, memory_order_acq_rel);
		resume(l, c);
		progress = true;
		c = next;
	}
	return progress;
}

/* The write is queued in full: answer it now. */
static void behind_answer(struct cfs_loop *l, struct ctx *c)
{
	cfs_ns_write_done(l->d->fs, c->inode, c->offset_bytes, c->length_bytes);
	c->answered = true;
	fuse_reply_write(c->req, c->length_bytes);
	c->req = NULL;
}

/* A write-behind reached the store (or failed, or was refused before its
 * answer): free its slot and let its file's requests go, on whichever loop
 * parked them. */
static void behind_done(struct cfs_loop *l, struct ctx *c)
{
	struct cfs_inode *inode = c->inode;

	pthread_mutex_lock(&inode->lock);
	inode->behind[c->behind_slot].end_bytes = 0;
	atomic_fetch_sub_explicit(&inode->behind_writes, 1, memory_order_acq_rel);
	pthread_mutex_unlock(&inode->lock);
	c->behind_slot = -1;
	wake_parked(l, inode);
}

/* ---- waiting for space ------------------------------------------------------
 *
 * An allocation that finds no free unit while units are on their way back
 * (the namespace's -EAGAIN: freed but busy until a commit, or freed under
 * I/O and deferred until the references older than the unmap end) waits
 * rather than fails: a database that punches holes or truncates while it
 * writes would otherwise see ENOSPC with the space free a moment later. The
 * request waits parked, holding a pin, not an I/O reference: the references
 * it waits for may be this loop's own requests, which finish only while the
 * loop runs. It tries again every SPACE_RETRY_NS, and after SPACE_WAIT_NS
 * from its first try it gets ENOSPC.
 */
#define SPACE_RETRY_NS (1000u * 1000u)		/* 1 ms */
#define SPACE_WAIT_NS (1000ull * 1000u * 1000u) /* 1 s */

/* The deadline of the request this loop is trying again (0: none), so that
 * a retry that has to wait once more keeps its first deadline. */
static __thread uint64_t tls_space_deadline_ns;

/* Park req until space may have come: fn(req, inode, args) then runs again,
 * or (fn NULL) the WRITE of data. False: the wait is over (ENOSPC) or no
 * context or memory for it; the caller answers ENOSPC. */
static bool space_park(struct cfs_loop *l, fuse_req_t req, struct cfs_inode *inode,
		       cfs_data_then_fn fn, const void *data, size_t bytes, unsigned file_flags,
		       uint64_t offset)
{
	uint64_t now = cfs_now_ns();
	uint64_t deadline = tls_space_deadline_ns ? tls_space_deadline_ns : now + SPACE_WAIT_NS;
	uint8_t *copy = NULL;
	struct ctx *c;

	if (!l || !inode || now >= deadline || !l->free)
		return false;
	if (!fn) {
		/* A rare wait (the store out of free units): the heap. */
		copy = malloc(bytes);
		if (!copy)
			return false;
		memcpy(copy, data, bytes);
	}
	c = ctx_start(l, req, inode, OP_SPACE);
	cfs_ns_pin(inode);
	cfs_ns_io_end(l->d->fs, inode, c->io_gen);
	c->then_fn = fn;
	if (fn)
		memcpy(c->then_args, data, bytes);
	c->buf = copy;
	c->buf_heap = copy != NULL;
	c->buf_bytes = (uint32_t)bytes;
	c->length_bytes = (uint32_t)bytes;
	c->offset_bytes = offset;
	c->file_flags = file_flags;
	c->space_retry_ns = now + SPACE_RETRY_NS;
	c->space_deadline_ns = deadline;
	park(l, c);
	return true;
}

/* From run_parked: c's request runs again as it first did. */
static void space_retry(struct cfs_loop *l, struct ctx *c)
{
	struct cfs_inode *inode = c->inode;
	fuse_req_t req = c->req;
	cfs_data_then_fn fn = c->then_fn;
	uint64_t args[CFS_DATA_THEN_ARGS_MAX / 8];
	uint8_t *data = c->buf;
	uint32_t bytes = c->length_bytes;
	unsigned file_flags = c->file_flags;
	uint64_t offset = c->offset_bytes;
	uint64_t outer = tls_space_deadline_ns;

	tls_space_deadline_ns = c->space_deadline_ns;
	memcpy(args, c->then_args, sizeof(args));
	c->buf = NULL; /* ours until the write has copied it */
	c->buf_heap = false;
	ctx_put(l, c);
	if (fn) {
		fn(req, inode, args);
	} else {
		int ret = cfs_data_write(req, inode, file_flags, data, bytes, offset);

		if (ret)
			cfs_reply_err(req, ret);
	}
	tls_space_deadline_ns = outer;
	free(data);
	cfs_ns_unpin(l->d->fs, inode);
}

bool cfs_data_space_wait(fuse_req_t req, struct cfs_inode *inode, cfs_data_then_fn fn,
			 const void *args, size_t args_bytes)
{
	CFS_ASSERT(fn && args_bytes <= CFS_DATA_THEN_ARGS_MAX);
	return space_park(tls_loop, req, inode, fn, args, args_bytes, 0, 0);
}

void cfs_data_after_writes(fuse_req_t req, struct cfs_inode *inode, cfs_data_then_fn fn,
			   const void *args, size_t args_bytes)
{
	struct cfs_loop *l = tls_loop;
	struct ctx *c;

	CFS_ASSERT(args_bytes <= CFS_DATA_THEN_ARGS_MAX);
	if (!l || !inode ||
	    (!atomic_load_explicit(&inode->behind_writes, memory_order_acquire) &&
	     !atomic_load_explicit(&inode->held_pending, memory_order_acquire))) {
		fn(req, inode, args);
		return;
	}
	c = ctx_start(l, req, inode, OP_THEN);
	c->then_fn = fn;
	memcpy(c->then_args, args, args_bytes);
	admit_or_park(l, c, then_go);
}

void cfs_data_grow_then(fuse_req_t req, struct cfs_inode *inode, uint64_t offset_bytes,
			uint64_t length_bytes, cfs_data_then_fn fn, const void *args,
			size_t args_bytes)
{
	struct cfs_loop *l = tls_loop;
	struct ctx *c;

	CFS_ASSERT(args_bytes <= CFS_DATA_THEN_ARGS_MAX);
	if (!l || !inode ||
	    !cfs_ns_pieces_must_grow(l->d->fs, inode, offset_bytes, length_bytes, true)) {
		cfs_data_after_writes(req, inode, fn, args, args_bytes);
		return;
	}
	c = ctx_start(l, req, inode, OP_THEN);
	c->then_fn = fn;
	memcpy(c->then_args, args, args_bytes);
	c->grow = true;
	c->grow_whole = true;
	c->grow_offset_bytes = offset_bytes;
	c->grow_length_bytes = length_bytes;
	admit_or_park(l, c, then_go);
}

/* ---- completion ------------------------------------------------------------- */

static void zmap_set(struct ctx *c, uint64_t offset_bytes, uint64_t length_bytes)
{
	uint64_t first = (offset_bytes - c->base_bytes) / ZMAP_GRAIN_BYTES;
	uint64_t last = (offset_bytes + length_bytes - c->base_bytes + ZMAP_GRAIN_BYTES - 1) /
			ZMAP_GRAIN_BYTES;

	CFS_ASSERT(offset_bytes >= c->base_bytes && last <= ZMAP_WORDS * 64u);
	for (uint64_t g = first; g < last; g++)
		c->zmap[g / 64] |= 1ull << (g % 64);
}

static void zmap_apply(struct ctx *c)
{
	uint64_t grains = c->buf_bytes / ZMAP_GRAIN_BYTES;
	uint64_t g = 0;

	while (g < grains) {
		uint64_t run;

		if (!(c->zmap[g / 64] & (1ull << (g % 64)))) {
			g++;
			continue;
		}
		for (run = 1;
		     g + run < grains && (c->zmap[(g + run) / 64] & (1ull << ((g + run) % 64)));
		     run++)
			;
		memset(c->buf + g * ZMAP_GRAIN_BYTES, 0, run * ZMAP_GRAIN_BYTES);
		g += run;
	}
}

/* OP_READ: the held blocks' copies over what the store gave (read_snap). */
static void snap_apply(struct ctx *c)
{
	const uint8_t *snap = c->buf + c->buf_bytes;
	uint64_t end = c->base_bytes + c->buf_bytes;

	for (unsigned i = 0; i < c->snap_n; i++) {
		uint64_t b = c->snap_offset_bytes[i];
		uint64_t lo = b > c->base_bytes ? b : c->base_bytes;
		uint64_t hi = b + HB < end ? b + HB : end;

		memcpy(c->buf + (lo - c->base_bytes), snap + (size_t)i * HB + (lo - b), hi - lo);
	}
}

/* A write the store failed is also the next fsync's answer: an application
 * that only checks fsync (PostgreSQL) must not be told the data is safe.
 * Refusals of the request itself (EINVAL, EFBIG, EROFS) are not kept;
 * ENOSPC is, as Linux reports it to fsync. */
static void keep_write_error(struct cfs_inode *inode, int err)
{
	int none = 0;

	if (inode && err && err != -EINVAL && err != -EFBIG && err != -EROFS)
		atomic_compare_exchange_strong(&inode->write_error, &none, err);
}

/* A flush landed (or failed). Another flush of the block, if one is wanted,
 * goes at once in the same context. */
static void held_flushed(struct cfs_loop *l, struct ctx *c, int err)
{
	struct cfs_inode *inode = c->inode;
	struct cfs_held_block *blk = c->held_blk[0];
	bool again;

	keep_write_error(inode, err);
	pthread_mutex_lock(&inode->lock);
	again = cfs_held_flush_end(blk, c->held_seq);
	if (again && !guard_enter(c, blk->file_offset_bytes, blk->file_offset_bytes + HB)) {
		/* The mover's guard came: the timer flushes it later. */
		again = false;
		blk->due_ns = cfs_now_ns() + GUARD_RETRY_NS;
		held_list(l, inode, blk);
	}
	if (again)
		flush_arm(l, c, inode, blk);
	held_mirror(inode);
	pthread_mutex_unlock(&inode->lock);
	/* blk may be taken or freed from here on, unless again. */
	wake_parked(l, inode);
	if (again) {
		parts_go(l, c);
		return;
	}
	store_write_end(l, c);
	cfs_ns_io_end(l->d->fs, inode, c->io_gen);
	ctx_put(l, c);
}

/*
 * Under the lock: the write [offset, +size) goes into its blocks blk[0..n)
 * (all LIVE). A block the write fills to its end is flushed now (an appender
 * has moved on); another waits for the delay on l's timer list.
 */
static void held_apply(struct cfs_loop *l, struct cfs_inode *inode, struct cfs_held_block **blk,
		       unsigned n, uint64_t offset, const uint8_t *data, uint32_t size,
		       struct held_launch *go)
{
	uint64_t first = align_down(offset, HB), end = offset + size;
	uint64_t now = cfs_now_ns();

	for (unsigned i = 0; i < n; i++) {
		uint64_t b = first + (uint64_t)i * HB;
		uint64_t lo = offset > b ? offset : b, hi = min_u64(end, b + HB);
		bool was_clean = !cfs_held_dirty(blk[i]);

		cfs_held_write(inode->held, blk[i], (uint32_t)(lo - b), data + (lo - offset),
			       (uint32_t)(hi - lo));
		if (hi == b + HB) {
			held_kick(l, inode, blk[i], go);
			continue;
		}
		if (was_clean)
			blk[i]->due_ns = now + CFS_HELD_DELAY_NS;
		held_list(l, inode, blk[i]);
	}
}

/* The bytes an absorbed write brought: in c's buffer after the blocks read
 * (OP_FILL), laid out as a write-behind's buffer (held_filled's fallback). */
static uint8_t *fill_payload(const struct cfs_loop *l, const struct ctx *c)
{
	return c->buf + c->fill_bytes +
	       (c->offset_bytes - align_down(c->offset_bytes, l->granule_bytes));
}

/* The blocks of an OP_FILL write read in (or failed): make them LIVE, apply
 * the write and answer it. If a block was dropped meanwhile (O_TRUNC), the
 * write goes the write-behind way instead. */
static void held_filled(struct cfs_loop *l, struct ctx *c, int err)
{
	struct cfs_inode *inode = c->inode;
	struct cfs_held *h;
	struct cfs_held_block *blk[CFS_HELD_WRITE_BLOCKS];
	struct held_launch go = {.n = 0};
	uint64_t first = align_down(c->offset_bytes, HB);
	uint64_t fill_start = c->base_bytes;
	bool lost = false;

	if (!err)
		zmap_apply(c);
	pthread_mutex_lock(&inode->lock);
	h = inode->held;
	for (unsigned i = 0; i < c->held_n; i++) {
		uint64_t b = first + (uint64_t)i * HB;

		blk[i] = c->held_blk[i];
		if (c->fill_taken[i]) {
			if (blk[i]->state != CFS_HELD_FILLING || blk[i]->taken != c->fill_taken[i])
				lost = true;
		} else if (!(blk[i] = cfs_held_find(h, b)) || blk[i]->state != CFS_HELD_LIVE) {
			lost = true; /* held before, dropped meanwhile */
		}
	}
	if (err || lost) {
		for (unsigned i = 0; i < c->held_n; i++)
			if (c->fill_taken[i] && c->held_blk[i]->state == CFS_HELD_FILLING &&
			    c->held_blk[i]->taken == c->fill_taken[i])
				cfs_held_forget(c->held_blk[i]);
		held_mirror(inode);
		pthread_mutex_unlock(&inode->lock);
		wake_parked(l, inode);
		if (err) {
			cfs_cs_request_done(c->stats, CFS_IO_WRITE, err, 0,
					    cfs_now_ns() - c->start_ns, CFS_CS_RMW);
			cfs_reply_err(c->req, err);
			cfs_ns_io_end(l->d->fs, inode, c->io_gen);
			ctx_put(l, c);
			return;
		}
		/* Move the payload where a write-behind wants it. */
		c->buf_bytes -= c->fill_bytes;
		memmove(c->buf, c->buf + c->fill_bytes, c->buf_bytes);
		c->op = OP_WRITE;
		c->behind = true;
		c->held_noted = false;
		c->base_bytes = align_down(c->offset_bytes, l->granule_bytes);
		c->cursor_bytes = c->offset_bytes;
		c->end_bytes = c->offset_bytes + c->length_bytes;
		cfs_cs_request_begin(c->stats);
		admit_or_park(l, c, ctx_continue);
		return;
	}
	for (unsigned i = 0; i < c->held_n; i++) {
		if (!c->fill_taken[i])
			continue;
		if (c->fill_mask & (1u << i))
			memcpy(blk[i]->bytes, c->buf + (blk[i]->file_offset_bytes - fill_start),
			       HB);
		blk[i]->state = CFS_HELD_LIVE;
	}
	held_apply(l, inode, blk, c->held_n, c->offset_bytes, fill_payload(l, c), c->length_bytes,
		   &go);
	held_mirror(inode);
	pthread_mutex_unlock(&inode->lock);
	held_launch(l, &go);
	cfs_ns_write_done(l->d->fs, inode, c->offset_bytes, c->length_bytes);
	cfs_cs_request_done(c->stats, CFS_IO_WRITE, 0, c->length_bytes, cfs_now_ns() - c->start_ns,
			    CFS_CS_RMW);
	fuse_reply_write(c->req, c->length_bytes);
	cfs_ns_io_end(l->d->fs, inode, c->io_gen);
	ctx_put(l, c);
}

/* Charge a READ or WRITE to its chunk, once, as it is answered. */
static void charge(struct ctx *c, int err)
{
	unsigned flags = CFS_CS_INFLIGHT | (c->rmw ? CFS_CS_RMW : 0);

	/* A direct read that crossed the end of the chunk: the database asked
	 * for a page that is not (all) there. */
	if (c->op == OP_READ && !err && c->direct && c->length_bytes < c->asked_bytes)
		flags |= CFS_CS_SHORT_READ;
	cfs_cs_request_done(c->stats, c->op == OP_READ ? CFS_IO_READ : CFS_IO_WRITE, err,
			    err ? 0 : c->length_bytes, cfs_now_ns() - c->start_ns, flags);
}

/* The end of a READ from the device: charged, the I/O reference dropped
 * (the last zero-map snapshot is taken), answered. Any thread (round_done);
 * c itself is left for its owner to put. */
static void read_answer(struct cfs_fs *fs, struct ctx *c)
{
	int err = atomic_load_explicit(&c->error, memory_order_acquire);

	charge(c, err);
	cfs_ns_io_end(fs, c->inode, c->io_gen);
	if (err) {
		cfs_reply_err(c->req, err);
		return;
	}
	zmap_apply(c);
	snap_apply(c);
	fuse_reply_buf(c->req, (char *)c->buf + (c->offset_bytes - c->base_bytes), c->length_bytes);
}

static void ctx_finish(struct cfs_loop *l, struct ctx *c)
{
	struct cfs_fs *fs = l->d->fs;
	int err = atomic_load_explicit(&c->error, memory_order_acquire);

	if (c->direct_counted) {
		/* Its sectors are marked: the file may take held blocks again. */
		atomic_fetch_sub_explicit(&c->inode->direct_writes, 1, memory_order_seq_cst);
		c->direct_counted = false;
	}
	if (c->op != OP_FLUSH)
		store_write_end(l, c);
	guard_leave(c); /* its sectors are marked: the mover may copy them */
	if (c->op == OP_FLUSH) {
		held_flushed(l, c, err);
		return;
	}
	if (c->op == OP_FILL) {
		held_filled(l, c, err);
		return;
	}
	if (c->op == OP_READ && !c->ram_reply) {
		read_answer(fs, c);
		ctx_put(l, c);
		return;
	}
	if (c->op == OP_WRITE && !err && !c->answered)
		cfs_ns_write_done(fs, c->inode, c->offset_bytes, c->length_bytes);
	if (c->op == OP_READ || c->op == OP_WRITE)
		charge(c, err);
	if (c->ram_reply && !err) {
		/* From the store itself: the units must stay this file's until
		 * the kernel has copied them, so io_end after the reply. */
		fuse_reply_buf(c->req, c->ram_reply, c->length_bytes);
		cfs_ns_io_end(fs, c->inode, c->io_gen);
		ctx_put(l, c);
		return;
	}
	if (c->op == OP_WRITE)
		keep_write_error(c->inode, err);
	if (c->behind_slot >= 0)
		behind_done(l, c);
	if (c->answered) {
		/* Write-behind: answered when queued; now it is on the store
		 * (or its error is the next fsync's). */
		cfs_ns_io_end(fs, c->inode, c->io_gen);
		ctx_put(l, c);
		return;
	}
	/* The last mark_written is done: the units may go. */
	if (c->inode)
		cfs_ns_io_end(fs, c->inode, c->io_gen);

	if (err) {
		cfs_reply_err(c->req, err);
	} else if (c->op == OP_WRITE && ((c->drop_cache & CFS_FILE_DROP_CACHE_AFTER) ||
					 ((c->drop_cache & CFS_FILE_DROP_CACHE_IF_MAPPED) &&
					  atomic_load(&c->inode->uncached_mapped)))) {
		cfs_dio_inval_reply_write(c->req, c->inode->ino, c->offset_bytes, c->length_bytes);
	} else if (c->op == OP_WRITE) {
		fuse_reply_write(c->req, c->length_bytes);
	} else if (c->attr.ino) {
		cfs_reply_attr(c->req, &c->attr);
	} else {
		fuse_reply_err(c->req, 0);
	}
	ctx_put(l, c);
}

/* c answered on another thread: back to its owner's pool at the owner's next
 * pass; woken only if it sleeps needing contexts (cfs_loop_poll_timeout_ms).
 * c is the owner's from the push on. */
static void recycle_push(struct cfs_loop *owner, struct ctx *c)
{
	struct ctx *head = atomic_load_explicit(&owner->recycle, memory_order_relaxed);
	uint64_t one = 1;

	do
		c->next = head;
	while (!atomic_compare_exchange_weak_explicit(&owner->recycle, &head, c,
						      memory_order_seq_cst, memory_order_relaxed));
	/* Sequentially consistent with the owner's store of the flag and its
	 * load of the list: one of the two sees the other. */
	if (atomic_load(&owner->recycle_wake) && atomic_exchange(&owner->recycle_wake, false) &&
	    write(owner->remote_fd, &one, sizeof(one)) != sizeof(one)) {
		/* the counter is far from overflowing; nothing else can fail */
	}
}

static void recycle_drain(struct cfs_loop *l)
{
	struct ctx *c = atomic_exchange_explicit(&l->recycle, NULL, memory_order_acquire);

	while (c) {
		struct ctx *next = c->next;

		ctx_put(l, c);
		c = next;
	}
}

static void round_done(struct ctx *c)
{
	struct cfs_loop *owner = c->owner;

	if (tls_loop == owner) {
		c->next = owner->ready;
		owner->ready = c;
		return;
	}
	/* A READ whose last part finished on the store's completion thread
	 * (part_new marks them only when replies may go out from any thread):
	 * answer it here; ctx_continue would finish it at once anyway. */
	if (c->op == OP_READ && owner->d->reply_any_thread && !c->buf_ring &&
	    (atomic_load_explicit(&c->error, memory_order_acquire) ||
	     c->cursor_bytes >= c->end_bytes)) {
		/* Counted until the push is done: the owner may not exit and
		 * free itself under it (cfs_loop_idle). */
		atomic_fetch_add_explicit(&owner->answering, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&owner->answered_elsewhere, 1, memory_order_relaxed);
		read_answer(owner->d->fs, c);
		recycle_push(owner, c);
		atomic_fetch_sub_explicit(&owner->answering, 1, memory_order_release);
		return;
	}
	/* Another loop ran our last completion (a write resumed from a range
	 * lock): hand the context back; only the owner touches its arena. */
	struct ctx *head = atomic_load_explicit(&owner->remote, memory_order_relaxed);
	uint64_t one = 1;

	do
		c->next = head;
	while (!atomic_compare_exchange_weak_explicit(&owner->remote, &head, c,
						      memory_order_release, memory_order_relaxed));
	if (write(owner->remote_fd, &one, sizeof(one)) != sizeof(one)) {
		/* the counter is far from overflowing; nothing else can fail */
	}
}

static void part_end(struct part *p, int res)
{
	struct ctx *c = p->ctx;

	if (res < 0) {
		int zero = 0;

		atomic_compare_exchange_strong(&c->error, &zero, res);
	}
	if (atomic_fetch_sub_explicit(&c->pending, 1, memory_order_acq_rel) == 1)
		round_done(c);
}

/* Mark a written device range [device_offset, +length) of part p written. */
static int part_mark(struct part *p, uint64_t device_offset_bytes, uint64_t length_bytes)
{
	uint64_t file_offset =
		p->file_offset_bytes + (device_offset_bytes - p->rmw.req.offset_bytes);
	int ret = cfs_extent_mark_written(p->ctx->map, file_offset, length_bytes,
					  device_offset_bytes);

	return ret < 0 ? ret : 0;
}

static void part_done(struct cfs_io_req *req, int res)
{
	struct part *p = req->cookie;

	/* Plain writes mark their sectors here; read-modify-writes did it in
	 * part_rmw_written(), under their range lock. */
	if (res >= 0 && (p->ctx->op == OP_WRITE || p->ctx->op == OP_FLUSH) && !p->is_rmw)
		res = part_mark(p, req->offset_bytes, req->length_bytes);
	part_end(p, res);
}

/* RMW hook: is the edge sector at device offset sector_offset_bytes unwritten?
 * Asked under the range lock, before it would be read. */
static bool part_rmw_unwritten(struct cfs_io_rmw *rmw, uint64_t sector_offset_bytes)
{
	struct part *p = (struct part *)rmw;
	uint64_t file_offset = p->file_offset_bytes + (sector_offset_bytes - rmw->req.offset_bytes);

	return !cfs_extent_sector_written(p->ctx->map, file_offset);
}

/* RMW hook: the merged cover was written back; still under the range lock. */
static void part_rmw_written(struct cfs_io_rmw *rmw, int res)
{
	struct part *p = (struct part *)rmw;

	if (res >= 0 && p->ctx->op == OP_WRITE) {
		res = part_mark(p, rmw->cover_offset_bytes, rmw->cover_length_bytes);
		if (res < 0) {
			int zero = 0;

			atomic_compare_exchange_strong(&p->ctx->error, &zero, res);
		}
	}
}

/* ---- queueing ----------------------------------------------------------------- */

static int part_queue(struct cfs_loop *l, struct part *p)
{
	return p->is_rmw ? cfs_io_rmw_start(l->q, &p->rmw) : cfs_ioq_queue(l->q, &p->rmw.req);
}

static void part_submit(struct cfs_loop *l, struct part *p)
{
	int ret;

	p->retry_next = NULL;
	if (l->retry_head) { /* keep order behind earlier retries */
		l->retry_tail->retry_next = p;
		l->retry_tail = p;
		return;
	}
	ret = part_queue(l, p);
	if (ret == -EBUSY) {
		l->retry_head = l->retry_tail = p;
		return;
	}
	if (ret < 0)
		part_end(p, ret);
}

static void retry_parts(struct cfs_loop *l)
{
	while (l->retry_head) {
		struct part *p = l->retry_head;
		int ret = part_queue(l, p);

		if (ret == -EBUSY)
			return;
		l->retry_head = p->retry_next;
		if (!l->retry_head)
			l->retry_tail = NULL;
		if (ret < 0)
			part_end(p, ret);
	}
}

static struct part *part_new(struct ctx *c, uint8_t op, uint64_t file_offset_bytes,
			     uint64_t device_offset_bytes, uint32_t length_bytes, void *buf,
			     bool rmw)
{
	struct part *p = &c->parts[c->nparts++];

	CFS_ASSERT(c->nparts <= PARTS_PER_ROUND);
	memset(&p->rmw, 0, sizeof(p->rmw));
	p->ctx = c;
	p->is_rmw = rmw;
	p->file_offset_bytes = file_offset_bytes;
	p->rmw.req.offset_bytes = device_offset_bytes;
	p->rmw.req.length_bytes = length_bytes;
	p->rmw.req.op = op;
	p->rmw.req.buf = buf;
	p->rmw.req.stats = NULL; /* the FUSE request is charged, once */
	p->rmw.req.done = part_done;
	p->rmw.req.cookie = p;
	c->rmw |= rmw;
	if (rmw && op == CFS_IO_WRITE && c->op == OP_WRITE) {
		p->rmw.edge_unwritten = part_rmw_unwritten;
		p->rmw.written = part_rmw_written;
	}
	c->device_io = true;
	return p;
}

/* ---- preparing rounds ------------------------------------------------------------ */

static int prepare_read(struct cfs_loop *l, struct ctx *c)
{
	uint32_t g = l->granule_bytes;

	while (c->cursor_bytes < c->end_bytes && c->nparts < PARTS_PER_ROUND) {
		struct cfs_extent_run run;
		uint64_t pos, run_end, first = UINT64_MAX, last = 0, start, stop;
		int ret;

		ret = cfs_extent_lookup(c->map, c->cursor_bytes, c->end_bytes - c->cursor_bytes,
					&run);
		if (ret)
			return ret;
		run_end = c->cursor_bytes + run.length_bytes;
		if (!run.mapped) {
			zmap_set(c, c->cursor_bytes, run.length_bytes);
			c->cursor_bytes = run_end;
			continue;
		}
		/* Snapshot the written-state of the run into the zero map. */
		for (pos = c->cursor_bytes; pos < run_end;) {
			bool written;
			uint64_t n = cfs_extent_written_span(c->map, pos, run_end - pos, &written);

			CFS_ASSERT(n > 0);
			if (written) {
				if (first == UINT64_MAX)
					first = pos;
				last = pos + n;
			} else {
				zmap_set(c, pos, n);
			}
			pos += n;
		}
		if (first == UINT64_MAX) {
			c->cursor_bytes = run_end;
			continue;
		}
		/* One device read from the first to the last written byte. */
		start = align_down(first, g);
		stop = min_u64(align_up(last, g), run_end);
		if (start < c->cursor_bytes)
			start = c->cursor_bytes;
		while (start < stop && c->nparts < PARTS_PER_ROUND) {
			uint32_t n = (uint32_t)min_u64(stop - start, CFS_IO_LENGTH_MAX);
			struct part *p =
				part_new(c, CFS_IO_READ, start,
					 run.device_offset_bytes + (start - c->cursor_bytes), n,
					 c->buf + (start - c->base_bytes), false);

			/* round_done() answers it on the store's thread */
			if (c->op == OP_READ && l->d->reply_any_thread)
				p->rmw.req.flags = CFS_IO_REQ_DONE_ANY_THREAD;
			start += n;
		}
		c->cursor_bytes = start < stop ? start : run_end;
	}
	return 0;
}

static int prepare_write(struct cfs_loop *l, struct ctx *c)
{
	uint32_t g = l->granule_bytes;
	bool remapped = false;

	/* Up to three parts per run: keep room for a head, a middle, a tail. */
	while (c->cursor_bytes < c->end_bytes && c->nparts + 3 <= PARTS_PER_ROUND) {
		struct cfs_extent_run run;
		uint64_t a = c->cursor_bytes, b, mid_end, dev;
		int ret;

		ret = cfs_extent_lookup(c->map, a, c->end_bytes - a, &run);
		if (ret)
			return ret;
		if (!run.mapped) {
			/* Unmapped since cfs_ns_map_for_write (a concurrent punch
			 * or truncate of the same range): map it again, once. */
			if (remapped)
				return -EIO;
			ret = map_write(l, c->inode, c->file_flags, a, c->end_bytes - a);
			if (ret)
				return ret == -EAGAIN ? -ENOSPC : ret;
			remapped = true;
			continue;
		}
		b = a + run.length_bytes;
		dev = run.device_offset_bytes;
#define DEV(x) (dev + ((x)-c->cursor_bytes))
#define BUF(x) (c->buf + ((x)-c->base_bytes))
		if (a % g) {
			uint64_t head_end = min_u64(align_up(a, g), b);

			part_new(c, CFS_IO_WRITE, a, DEV(a), (uint32_t)(head_end - a), BUF(a),
				 true);
			a = head_end;
		}
		mid_end = align_down(b, g);
		while (a < mid_end && c->nparts + 1 < PARTS_PER_ROUND) {
			uint32_t n = (uint32_t)min_u64(mid_end - a, CFS_IO_LENGTH_MAX);

			part_new(c, CFS_IO_WRITE, a, DEV(a), n, BUF(a), false);
			a += n;
		}
		if (a < mid_end) { /* out of parts: continue next round */
			c->cursor_bytes = a;
			break;
		}
		if (a < b) {
			part_new(c, CFS_IO_WRITE, a, DEV(a), (uint32_t)(b - a), BUF(a), true);
			a = b;
		}
#undef DEV
#undef BUF
		c->cursor_bytes = b;
	}
	return 0;
}

/*
 * Prepare and queue the next round of c, or finish it. Runs on the owner
 * loop only. On an error before anything was queued, the error finishes the
 * context.
 */
static void ctx_continue(struct cfs_loop *l, struct ctx *c)
{
	int ret = 0;

	if (atomic_load_explicit(&c->error, memory_order_acquire) ||
	    c->cursor_bytes >= c->end_bytes) {
		ctx_finish(l, c);
		return;
	}
	c->nparts = 0;
	if (c->op == OP_READ || c->op == OP_FILL)
		ret = prepare_read(l, c);
	else if (c->op == OP_WRITE)
		ret = prepare_write(l, c);
	if (ret < 0) {
		atomic_store_explicit(&c->error, ret, memory_order_release);
		/* parts prepared but not queued are dropped: nothing in flight */
		c->nparts = 0;
	}
	if (c->nparts == 0) {
		/* All holes (the prepare loops stop only at the end or when
		 * parts ran out), or an error. */
		CFS_ASSERT(ret < 0 || c->cursor_bytes >= c->end_bytes);
		ctx_finish(l, c);
		return;
	}
	/* +1 while queueing, so a part failing at once cannot finish the
	 * round under our feet. */
	atomic_store_explicit(&c->pending, c->nparts + 1, memory_order_relaxed);
	for (unsigned i = 0; i < c->nparts; i++)
		part_submit(l, &c->parts[i]);
	/* Write-behind: the last round is queued and nothing failed yet.
	 * Answered before the submit: telling the device (a virtio kick is a
	 * VM exit) is not the writer's to wait for. */
	if (c->behind && !c->answered && c->cursor_bytes >= c->end_bytes &&
	    !atomic_load_explicit(&c->error, memory_order_acquire))
		behind_answer(l, c);
	/* Submit now while the device has little to do, or for a large
	 * request: the device starts on it while the loop receives the next
	 * one (bench/README.md, "The data path"). Small requests while
	 * it is busy, if a batch is being dispatched: once at the batch's end,
	 * one submit tells the device about all of them (a virtio notify is a
	 * VM exit). */
	if (l->hold_submit && c->length_bytes < SUBMIT_NOW_FROM_BYTES &&
	    cfs_ioq_inflight(l->q) >= l->batched_parts + c->nparts + SUBMIT_NOW_BELOW) {
		l->batched_parts += c->nparts;
	} else {
		cfs_ioq_submit(l->q);
		l->batched_parts = 0;
	}
	if (atomic_fetch_sub_explicit(&c->pending, 1, memory_order_acq_rel) == 1)
		round_done(c);
}

/* ---- RAM mounts: the store is our own memory ----------------------------------------
 *
 * A RAM store is one mapping of this process (iopath/backend_ram.c). A
 * request over one mapped, physically contiguous run needs no buffer and no
 * iopath request: a READ of written sectors is answered straight from the
 * store (the kernel copies from the mapping into the reader's pages), and an
 * aligned WRITE is copied from libfuse's receive buffer into the store. One
 * memory copy per request instead of two, and no queue/reap round: on 1 MiB
 * requests the copy is most of the daemon's work, on 4 KiB ones the round.
 * The context is finished from the loop's ready list like any completion,
 * so replies still go out after the loop's batch of receives (replying
 * inline wakes the application in the middle of the batch: measured slower
 * at QD32 on two CPUs).
 *
 * Everything else takes the general path: holes and unwritten sectors (the
 * zero map), unaligned edges (read-modify-write), discontiguous units, and a
 * write while any read-modify-write holds a range lock (iopath would park
 * it behind the lock; a memcpy cannot wait). The guarantees stay those of
 * the general path: the I/O reference is held until the kernel has copied
 * the reply, so the units are not freed and given to another file under it;
 * a write checks the range locks as cfs_ioq_queue() does, so one that is
 * copying when a read-modify-write locks the same sector is the caller's
 * race on the same bytes, as on a device; written bits are set after the
 * copy and before the reply. True when c was taken over (it is on the ready
 * list); false leaves c as it was.
 */
static bool ram_read(struct cfs_loop *l, struct ctx *c)
{
	struct cfs_extent_run run;
	bool written;
	void *p;

	if (cfs_extent_lookup(c->map, c->offset_bytes, c->length_bytes, &run) || !run.mapped ||
	    run.length_bytes < c->length_bytes ||
	    cfs_extent_written_span(c->map, c->offset_bytes, c->length_bytes, &written) <
		    c->length_bytes ||
	    !written)
		return false;
	p = cfs_io_ram_ptr(l->d->io, run.device_offset_bytes, c->length_bytes);
	if (!p)
		return false;
	c->ram_reply = p;
	c->cursor_bytes = c->end_bytes = c->offset_bytes;
	c->next = l->ready;
	l->ready = c;
	return true;
}

/* c->offset_bytes and length_bytes are set and mapped (cfs_ns_map_for_write). */
static bool ram_write(struct cfs_loop *l, struct ctx *c, const void *data)
{
	struct cfs_extent_run run;
	void *p;
	int ret;

	if (c->offset_bytes % l->granule_bytes || c->length_bytes % l->granule_bytes ||
	    cfs_io_ranges_locked(l->d->io) ||
	    cfs_extent_lookup(c->map, c->offset_bytes, c->length_bytes, &run) || !run.mapped ||
	    run.length_bytes < c->length_bytes)
		return false;
	p = cfs_io_ram_ptr(l->d->io, run.device_offset_bytes, c->length_bytes);
	if (!p)
		return false;
	memcpy(p, data, c->length_bytes);
	ret = cfs_extent_mark_written(c->map, c->offset_bytes, c->length_bytes,
				      run.device_offset_bytes);
	if (ret < 0)
		atomic_store_explicit(&c->error, ret, memory_order_relaxed);
	c->cursor_bytes = c->end_bytes = c->offset_bytes;
	c->next = l->ready;
	l->ready = c;
	return true;
}

/* ---- handlers ----------------------------------------------------------------------- */

int cfs_data_check_direct(struct cfs_inode *inode, unsigned file_flags, size_t size,
			  uint64_t offset)
{
	uint32_t align = cfs_daemon.dio_align_bytes;

	if (!(file_flags & CFS_FILE_DIRECT) || !align)
		return 0;
	if (offset % align == 0 && size % align == 0)
		return 0;
	/* The caller charges the refused request (it knows READ or WRITE). */
	return -EINVAL;
}

int cfs_data_read(fuse_req_t req, struct cfs_inode *inode, unsigned file_flags, size_t size,
		  uint64_t offset)
{
	struct cfs_loop *l = tls_loop;
	struct ctx *c;
	int ret;

	if (!inode->map)
		return -EISDIR;
	ret = cfs_data_check_direct(inode, file_flags, size, offset);
	if (ret) {
		cfs_cs_request_done(cfs_ns_inode_stats(inode), CFS_IO_READ, ret, 0, 0,
				    CFS_CS_MISALIGNED);
		return ret;
	}
	if (size > CFS_MAX_WRITE_BYTES)
		size = CFS_MAX_WRITE_BYTES;
	c = ctx_start(l, req, inode, OP_READ);
	c->direct = file_flags & CFS_FILE_DIRECT;
	c->asked_bytes = (uint32_t)size;
	c->offset_bytes = offset;
	if (l->ram)
		read_go(l, c); /* RAM mounts have no write-behind */
	else
		admit_or_park(l, c, read_go);
	return 0;
}

/* The rest of a READ, once no write-behind of its file is in flight. */
static void read_go(struct cfs_loop *l, struct ctx *c)
{
	struct cfs_inode *inode = c->inode;
	fuse_req_t req = c->req;
	uint64_t offset = c->offset_bytes, file_size;
	size_t size = c->asked_bytes;
	uint32_t snap_room;
	int ret;

	/* The size after the I/O reference: a truncate that unmapped units we
	 * are about to look up has already made the size smaller. */
	file_size = atomic_load_explicit(&inode->size_bytes, memory_order_acquire);
	if (offset >= file_size || size == 0) {
		/* At or past the end: an empty reply (the EOF of a sequential
		 * reader, not a short read). */
		cfs_ns_io_end(l->d->fs, inode, c->io_gen);
		cfs_cs_request_done(c->stats, CFS_IO_READ, 0, 0, cfs_now_ns() - c->start_ns,
				    CFS_CS_INFLIGHT);
		c->inode = NULL;
		ctx_put(l, c);
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > file_size - offset)
		size = file_size - offset;
	c->length_bytes = (uint32_t)size;
	if (l->ram && ram_read(l, c))
		return;
	c->base_bytes = align_down(offset, l->granule_bytes);
	c->end_bytes = align_up(offset + size, l->granule_bytes);
	c->cursor_bytes = c->base_bytes;
	memset(c->zmap, 0, sizeof(c->zmap));
	/* Room for copies of held blocks after the range (read_snap). */
	snap_room = atomic_load_explicit(&inode->held_blocks, memory_order_acquire)
			    ? CFS_HELD_SLOTS * HB
			    : 0;
	{
		size_t rb_bytes = 0;
		void *rb = c->base_bytes == offset && !snap_room ? reply_buf(&rb_bytes) : NULL;

		if (rb && c->end_bytes - c->base_bytes <= rb_bytes) {
			/* FUSE over io_uring: the device reads straight into
			 * the reply's payload buffer (page aligned), and the
			 * reply copies nothing (the /dev/fuse reply's copy is
			 * the kernel's, from the buffer to the reader). */
			c->buf = rb;
			c->buf_bytes = (uint32_t)(c->end_bytes - c->base_bytes);
			c->buf_heap = false;
			c->buf_ring = true;
		} else {
			ret = ctx_buf(l, c, (uint32_t)(c->end_bytes - c->base_bytes) + snap_room);
			c->buf_bytes = (uint32_t)(c->end_bytes - c->base_bytes);
			if (ret) {
				atomic_store(&c->error, ret);
				c->end_bytes = c->cursor_bytes;
				ctx_finish(l, c);
				return;
			}
		}
	}
	if (snap_room && !read_snap(l, c))
		return; /* parked again */
	ctx_continue(l, c);
}

/*
 * A READ of a file with held blocks, from read_go: copy the LIVE blocks its
 * range overlaps to the room after its range (snap_apply lays them over the
 * store's bytes before the reply), so it need not wait for their flush: a
 * LIVE block's bytes are the block's newest, every write answered before
 * the READ arrived included. When they cover the range, no device read at
 * all. A block dropped while its flush is in flight (DEAD) with changes
 * the READ must see: the READ goes back to admit(), which waits for that
 * flush. False when parked so.
 */
static bool read_snap(struct cfs_loop *l, struct ctx *c)
{
	struct cfs_inode *inode = c->inode;
	uint8_t *snap = c->buf + c->buf_bytes;
	uint64_t a = c->base_bytes, b = c->end_bytes, covered = 0;
	bool wait = false;

	pthread_mutex_lock(&inode->lock);
	for (unsigned i = 0; inode->held && i < CFS_HELD_SLOTS; i++) {
		struct cfs_held_block *blk = &inode->held->block[i];

		if (blk->state == CFS_HELD_FREE || !cfs_held_overlaps(blk, a, b))
			continue;
		if (blk->state == CFS_HELD_LIVE) {
			memcpy(snap + (size_t)c->snap_n * HB, blk->bytes, HB);
			c->snap_offset_bytes[c->snap_n++] = blk->file_offset_bytes;
			covered += min_u64(blk->file_offset_bytes + HB, b) -
				   (blk->file_offset_bytes > a ? blk->file_offset_bytes : a);
		} else if (blk->state == CFS_HELD_DEAD && c->held_noted &&
			   cfs_held_unstored(blk, c->held_seq)) {
			wait = true;
		}
	}
	pthread_mutex_unlock(&inode->lock);
	if (wait) {
		/* Start over from admit(), which waits for that flush. */
		c->snap_n = 0;
		ctx_buf_release(l, c);
		park(l, c);
		return false;
	}
	if (covered == b - a)
		c->cursor_bytes = c->end_bytes; /* all of it from the copies */
	return true;
}

/* Under the lock: nothing in flight may still write block b of inode (not
 * held): no old flush of it (a DEAD block), no write-behind over it. A copy
 * of the block made now, and later flushed, must not race an older write of
 * the same sectors: the store may apply the two in either order. */
static bool block_quiet(struct cfs_inode *inode, uint64_t b)
{
	if (cfs_held_any(inode->held, b, b + HB))
		return false;
	for (int i = 0; i < CFS_BEHIND_N; i++)
		if (inode->behind[i].end_bytes && inode->behind[i].start_bytes < b + HB &&
		    b < inode->behind[i].end_bytes)
			return false;
	return true;
}

/* Under the lock: block b of inode (not held) reads as zeros: none of its
 * sectors was ever written, and nothing in flight may write it. */
static bool block_zero(struct cfs_inode *inode, uint64_t b)
{
	bool written = true;

	return block_quiet(inode, b) &&
	       cfs_extent_written_span(inode->map, b, HB, &written) >= HB && !written;
}

/*
 * Absorb the buffered WRITE [offset, +size) of inode (mapped already) into
 * held blocks. 1: answered; 2: its blocks are being read (OP_FILL), the
 * fill answers it; 0: not absorbed (the write-behind path takes it).
 */
static int held_absorb(struct cfs_loop *l, fuse_req_t req, struct cfs_inode *inode,
		       const void *data, uint32_t size, uint64_t offset)
{
	uint64_t start_ns = CFS_STATS_ENABLED ? cfs_now_ns() : 0;
	uint64_t first = align_down(offset, HB), end = offset + size;
	unsigned n = (unsigned)((align_up(end, HB) - first) / HB), fill_mask = 0, lo = 0, hi = 0;
	bool partial = offset % HB || end % HB;
	struct cfs_held_block *blk[CFS_HELD_WRITE_BLOCKS] = {NULL};
	uint64_t taken[CFS_HELD_WRITE_BLOCKS] = {0};
	struct held_launch go = {.n = 0};
	struct cfs_held *h;
	uint32_t area;
	struct ctx *c;

	/* Whole blocks only join blocks already held (their copy would be
	 * old); alone they are plain aligned write-behinds. */
	if (n > CFS_HELD_WRITE_BLOCKS ||
	    (!partial && !atomic_load_explicit(&inode->held_blocks, memory_order_acquire)))
		return 0;
	pthread_mutex_lock(&inode->lock);
	h = inode->held;
	if (!h && (!partial || !(h = inode->held = cfs_held_new())))
		goto out_unlock;
	/* A write answered from the store is in flight: its bytes are in no
	 * held copy, and the written-state is not final. */
	if (atomic_load(&inode->direct_writes))
		goto out_unlock;
	for (unsigned i = 0; i < n; i++) {
		uint64_t b = first + (uint64_t)i * HB;

		blk[i] = cfs_held_find(h, b);
		if (blk[i]) {
			if (blk[i]->state != CFS_HELD_LIVE)
				goto out_undo; /* another write is reading it */
			continue;
		}
		if (offset <= b && b + HB <= end) {
			/* Covered whole: the write's bytes are the copy, once
			 * no older write of the block can land after its flush. */
			if (!block_quiet(inode, b))
				goto out_undo;
		} else if (!block_zero(inode, b)) {
			fill_mask |= 1u << i;
		}
		blk[i] = cfs_held_take(h, b, first, first + (uint64_t)n * HB);
		if (!blk[i])
			goto out_undo;
		taken[i] = blk[i]->taken;
	}
	if (!fill_mask) {
		for (unsigned i = 0; i < n; i++)
			if (taken[i])
				blk[i]->state = CFS_HELD_LIVE;
		held_apply(l, inode, blk, n, offset, data, size, &go);
		held_mirror(inode);
		pthread_mutex_unlock(&inode->lock);
		held_launch(l, &go);
		cfs_ns_write_done(l->d->fs, inode, offset, size);
		cfs_cs_request_done(cfs_ns_inode_stats(inode), CFS_IO_WRITE, 0, size,
				    CFS_STATS_ENABLED ? cfs_now_ns() - start_ns : 0, 0);
		fuse_reply_write(req, size);
		return 1;
	}
	held_mirror(inode);
	pthread_mutex_unlock(&inode->lock);

	/* Read the blocks that need it (lo..hi), the payload after them. */
	lo = (unsigned)__builtin_ctz(fill_mask);
	hi = 31u - (unsigned)__builtin_clz(fill_mask);
	area = (uint32_t)(align_up(end, l->granule_bytes) - align_down(offset, l->granule_bytes));
	c = ctx_start(l, req, inode, OP_FILL);
	c->offset_bytes = offset;
	c->length_bytes = size;
	c->held_n = (uint8_t)n;
	c->fill_mask = (uint8_t)fill_mask;
	for (unsigned i = 0; i < n; i++) {
		c->held_blk[i] = blk[i];
		c->fill_taken[i] = taken[i];
	}
	c->base_bytes = c->cursor_bytes = first + (uint64_t)lo * HB;
	c->end_bytes = first + (uint64_t)(hi + 1) * HB;
	c->fill_bytes = (uint32_t)(c->end_bytes - c->base_bytes);
	memset(c->zmap, 0, sizeof(c->zmap));
	if (ctx_buf(l, c, c->fill_bytes + area)) {
		held_filled(l, c, -ENOMEM);
		return 2;
	}
	memcpy(fill_payload(l, c), data, size);
	admit_or_park(l, c, ctx_continue);
	return 2;

out_undo:
	for (unsigned i = 0; i < n; i++)
		if (taken[i])
			cfs_held_forget(blk[i]);
out_unlock:
	held_mirror(inode);
	pthread_mutex_unlock(&inode->lock);
	return 0;
}

int cfs_data_write(fuse_req_t req, struct cfs_inode *inode, unsigned file_flags, const void *data,
		   size_t size, uint64_t offset)
{
	struct cfs_loop *l = tls_loop;
	struct ctx *c;
	bool grow, absorb;
	int ret;

	if (!inode->map)
		return -EISDIR;
	if (cfs_fs_is_readonly(l->d->fs)) {
		ret = -EROFS;
		goto out_refused;
	}
	ret = cfs_data_check_direct(inode, file_flags, size, offset);
	if (ret) {
		cfs_cs_request_done(cfs_ns_inode_stats(inode), CFS_IO_WRITE, ret, 0, 0,
				    CFS_CS_MISALIGNED);
		return ret;
	}
	if (size == 0) {
		cfs_cs_request_done(cfs_ns_inode_stats(inode), CFS_IO_WRITE, 0, 0, 0, 0);
		fuse_reply_write(req, 0);
		return 0;
	}
	if (size > CFS_MAX_WRITE_BYTES) {
		ret = -EINVAL; /* the kernel never sends more than max_write */
		goto out_refused;
	}
	if (offset + size < offset) {
		ret = -EFBIG;
		goto out_refused;
	}
	/* Pages a cached open kept (keep_cache) would now be old: the next
	 * cached open drops them (ops.c, "page cache"). Set before the write
	 * lands, so before the reply and the handle's release. */
	if ((file_flags & CFS_FILE_UNCACHED) &&
	    !atomic_load_explicit(&inode->cache_stale, memory_order_relaxed))
		atomic_store(&inode->cache_stale, true);
	ret = map_write(l, inode, file_flags, offset, size);
	if (ret == -EAGAIN) {
		if (space_park(l, req, inode, NULL, data, size, file_flags, offset))
			return 0;
		ret = -ENOSPC;
	}
	grow = ret == -EXDEV; /* its piece grows first (admit) */
	if (ret && !grow)
		goto out_refused; /* ENOSPC is the DBA's most likely error */
	absorb = l->absorb && l->d->write_behind &&
		 !(file_flags & (CFS_FILE_DIRECT | CFS_FILE_UNCACHED)) &&
		 size <= (CFS_HELD_WRITE_BLOCKS - 1) * HB;
	if (grow && absorb) {
		ret = grow_inline(l, inode, file_flags, offset, size);
		if (ret && ret != -EBUSY) {
			ret = ret == -EXDEV ? -EIO : ret;
			goto out_refused;
		}
		grow = ret == -EBUSY;
	}
	/* Small buffered writes of cached opens: into held blocks. */
	if (!grow && absorb && held_absorb(l, req, inode, data, (uint32_t)size, offset))
		return 0;
	c = ctx_start(l, req, inode, OP_WRITE);
	c->offset_bytes = offset;
	c->length_bytes = (uint32_t)size;
	c->grow = grow;
	c->grow_offset_bytes = offset;
	c->grow_length_bytes = size;
	/* A small write that could not grow its piece at once: it waits in
	 * admit() for the file's device writes, grows, and is absorbed
	 * (grown_absorb) rather than written behind. */
	c->grow_absorb = grow && absorb;
	c->file_flags = file_flags;
	c->drop_cache = file_flags & (CFS_FILE_DROP_CACHE_AFTER | CFS_FILE_DROP_CACHE_IF_MAPPED);
	if (l->ram && ram_write(l, c, data))
		return 0;
	c->base_bytes = align_down(offset, l->granule_bytes);
	c->cursor_bytes = offset;
	c->end_bytes = offset + size;
	/* Write-behind for buffered writes of cached opens: the page cache has
	 * the bytes, the writer need not wait for the store. O_DIRECT writes
	 * and uncached opens are answered from the store. */
	c->behind = !l->ram && l->d->write_behind &&
		    !(file_flags & (CFS_FILE_DIRECT | CFS_FILE_UNCACHED));
	if (l->absorb && (file_flags & (CFS_FILE_DIRECT | CFS_FILE_UNCACHED)) == CFS_FILE_DIRECT) {
		/* O_DIRECT through the kernel's direct path (the file has
		 * cached opens, which absorb): until it is on the store, no
		 * new held block of this file (held_absorb). */
		atomic_fetch_add_explicit(&inode->direct_writes, 1, memory_order_seq_cst);
		c->direct_counted = true;
	}
	if (!c->behind && !grow &&
	    !atomic_load_explicit(&inode->behind_writes, memory_order_acquire) &&
	    !atomic_load_explicit(&inode->held_blocks, memory_order_acquire)) {
		size_t rb_bytes = 0;
		void *rb = reply_buf(&rb_bytes);

		if (rb && data == rb && offset % l->granule_bytes == 0 &&
		    size % l->granule_bytes == 0 && store_write_begin(l, c) &&
		    guard_enter(c, offset, offset + size)) {
			/* FUSE over io_uring: the payload sits page aligned in
			 * the ring entry, which is this request's until the
			 * reply: write it to the device from there, no copy. */
			c->buf = rb;
			c->buf_bytes = (uint32_t)size;
			c->buf_heap = false;
			c->buf_ring = true;
			ctx_continue(l, c);
			return 0;
		}
	}
	ret = ctx_buf(l, c, (uint32_t)(align_up(offset + size, l->granule_bytes) - c->base_bytes));
	if (ret) {
		atomic_store(&c->error, ret);
		c->end_bytes = c->cursor_bytes;
		ctx_finish(l, c);
		return 0;
	}
	memcpy(c->buf + (offset - c->base_bytes), data, size);
	admit_or_park(l, c, c->grow_absorb ? grown_absorb : ctx_continue);
	return 0;

out_refused:
	/* Answered before a context existed: charge the chunk here. */
	cfs_cs_request_done(cfs_ns_inode_stats(inode), CFS_IO_WRITE, ret, 0, 0, 0);
	return ret;
}

/*
 * A small buffered WRITE whose piece has grown in admit() (grow_absorb):
 * its context goes back and the write starts over as a new request would,
 * now finding its units mapped, so it is absorbed into held blocks (or
 * takes the context path after all, when it cannot be).
 */
static void grown_absorb(struct cfs_loop *l, struct ctx *c)
{
	uint8_t data[(CFS_HELD_WRITE_BLOCKS - 1) * HB];
	struct cfs_inode *inode = c->inode;
	fuse_req_t req = c->req;
	uint64_t offset = c->offset_bytes;
	uint32_t size = c->length_bytes;
	unsigned file_flags = c->file_flags;
	int err = atomic_load_explicit(&c->error, memory_order_acquire);
	int ret;

	if (err) {
		/* Its piece could not grow. */
		guard_leave(c);
		c->end_bytes = c->cursor_bytes;
		ctx_finish(l, c);
		return;
	}
	CFS_ASSERT(size <= sizeof(data));
	memcpy(data, c->buf + (offset - c->base_bytes), size);
	guard_leave(c);
	cfs_cs_request_end(c->stats);
	cfs_ns_io_end(l->d->fs, inode, c->io_gen);
	ctx_put(l, c);
	ret = cfs_data_write(req, inode, file_flags, data, size, offset);
	if (ret)
		cfs_reply_err(req, ret);
}

void cfs_data_drop_held(struct cfs_inode *inode)
{
	if (!atomic_load_explicit(&inode->held_blocks, memory_order_acquire))
		return;
	pthread_mutex_lock(&inode->lock);
	if (inode->held)
		cfs_held_drop(inode->held);
	held_mirror(inode);
	pthread_mutex_unlock(&inode->lock);
	if (tls_loop)
		wake_parked(tls_loop, inode);
}

void cfs_data_closed(struct cfs_inode *inode)
{
	pthread_mutex_lock(&inode->lock);
	if (inode->held && inode->cached_opens == 0) {
		cfs_held_drop_clean(inode->held);
		if (cfs_held_unused(inode->held)) {
			free(inode->held);
			inode->held = NULL;
		}
		held_mirror(inode);
	}
	pthread_mutex_unlock(&inode->lock);
}

int cfs_data_zero(fuse_req_t req, const struct cfs_ns_zero *zero, const struct cfs_attr *attr)
{
	struct cfs_loop *l = tls_loop;
	struct ctx *c;

	/* The namespace raised zero->inode's I/O reference for us: ctx_start
	 * must not take another; ctx_finish drops this one. */
	c = ctx_start(l, req, NULL, OP_ZERO);
	c->inode = zero->inode;
	c->io_gen = zero->io_gen;
	/* Counted since the namespace computed where the zeros go. */
	c->store_counted = zero->inode != NULL;
	c->map = zero->inode ? zero->inode->map : NULL;
	if (attr)
		c->attr = *attr;
	c->offset_bytes = c->base_bytes = c->cursor_bytes = c->end_bytes = 0;
	c->length_bytes = 0;
	if (zero->count == 0) {
		ctx_finish(l, c);
		return 0;
	}
	for (unsigned i = 0; i < zero->count && i < 2; i++)
		part_new(c, CFS_IO_WRITE, zero->file_offset_bytes[i], zero->device_offset_bytes[i],
			 zero->length_bytes[i], (void *)zero_sector, true);
	if (c->inode)
		admit_or_park(l, c, parts_go); /* after the file's write-behind */
	else
		parts_go(l, c);
	return 0;
}

static void parts_go(struct cfs_loop *l, struct ctx *c)
{
	atomic_store_explicit(&c->pending, c->nparts + 1, memory_order_relaxed);
	for (unsigned i = 0; i < c->nparts; i++)
		part_submit(l, &c->parts[i]);
	if (atomic_fetch_sub_explicit(&c->pending, 1, memory_order_acq_rel) == 1)
		round_done(c);
}

/* ---- the loops ------------------------------------------------------------------------ */

void cfs_loop_enter(struct cfs_loop *l)
{
	tls_loop = l;
}

unsigned cfs_loop_index(const struct cfs_loop *l)
{
	return l->index;
}

struct fuse_buf *cfs_loop_fuse_buf(struct cfs_loop *l)
{
	return &l->fbuf;
}

int cfs_loop_queue_fd(const struct cfs_loop *l)
{
	return l->queue_fd;
}

int cfs_loop_remote_fd(const struct cfs_loop *l)
{
	return l->remote_fd;
}

bool cfs_loop_can_receive(const struct cfs_loop *l)
{
	/* Room for the request and for the flushes it may start (held_kick). */
	return l->free_count > (l->absorb ? CFS_HELD_SLOTS : 0);
}

bool cfs_loop_idle(const struct cfs_loop *l)
{
	return l->free_count == CFS_LOOP_CONTEXTS && cfs_ioq_inflight(l->q) == 0 &&
	       !l->held_timers && !atomic_load_explicit(&l->answering, memory_order_acquire);
}

void cfs_loop_stopping(struct cfs_loop *l)
{
	l->stopping = true;
	l->held_due_ns = 0;
}

int cfs_loop_poll_timeout_ms(struct cfs_loop *l)
{
	/* Parts waiting for room (the bounce pool is shared by every loop, so
	 * room may come from another loop's completion), requests parked
	 * behind a write-behind (it may finish on another loop), or a backend
	 * without an eventfd: look again soon. */
	if (l->ready)
		return 0; /* replies waiting: cfs_loop_work yielded to receive */
	/* Contexts answered on other threads come back without a wakeup,
	 * unless the loop cannot go on without them: ask for one, then look
	 * (sequentially consistent with recycle_push). */
	if (l->free_count < CFS_LOOP_CONTEXTS && (l->stopping || !cfs_loop_can_receive(l))) {
		atomic_store(&l->recycle_wake, true);
		if (atomic_load(&l->recycle))
			return 0;
	}
	if (l->stopping && atomic_load_explicit(&l->answering, memory_order_acquire))
		return 1; /* a reply's thread is still pushing its context */
	if (l->retry_head || l->parked_head)
		return 1;
	if (l->held_timers) {
		/* Held blocks to flush when due (at least 1 ms while no
		 * context is free to flush them). */
		uint64_t now = cfs_now_ns();

		if (l->held_due_ns <= now)
			return l->free ? 0 : 1;
		return (int)((l->held_due_ns - now + 999999u) / 1000000u);
	}
	if (l->queue_fd < 0 && (cfs_ioq_inflight(l->q) || l->free_count != CFS_LOOP_CONTEXTS))
		return 1;
	return -1;
}

void cfs_loop_hold_submit(struct cfs_loop *l, bool hold)
{
	l->hold_submit = hold;
	if (!hold && l->batched_parts) {
		cfs_ioq_submit(l->q);
		l->batched_parts = 0;
	}
}

/* The held blocks listed on l that are due: flush them (held_list). Blocks
 * with nothing left to flush leave the list. */
static void held_timers_run(struct cfs_loop *l)
{
	struct cfs_held_block **pp = &l->held_timers, *blk;
	uint64_t now = cfs_now_ns(), next = UINT64_MAX;

	if (l->held_due_ns > now)
		return;
	while ((blk = *pp)) {
		struct cfs_inode *inode = blk->timer_inode;
		struct held_launch go = {.n = 0};
		bool keep = false;

		pthread_mutex_lock(&inode->lock);
		if (blk->state == CFS_HELD_LIVE && cfs_held_dirty(blk)) {
			if (blk->due_ns > now && !l->stopping)
				keep = true;
			else if (blk->flushing)
				blk->want = true; /* that flush starts the next */
			else if (!held_flush_prepare(l, inode, blk, &go))
				keep = true; /* no context free: again soon */
		}
		if (keep) {
			if (blk->due_ns < next)
				next = blk->due_ns;
			pp = &blk->timer_next;
		} else {
			*pp = blk->timer_next;
			blk->listed = false;
			blk->timer_next = NULL;
		}
		held_mirror(inode);
		pthread_mutex_unlock(&inode->lock);
		held_launch(l, &go);
		if (!keep)
			cfs_ns_unpin(l->d->fs, inode); /* held_list's pin */
	}
	l->held_due_ns = next;
}

#define YIELD_AFTER_READ_BYTES (256u << 10)

void cfs_loop_work(struct cfs_loop *l)
{
	for (int round = 0; round < WORK_ROUNDS_MAX; round++) {
		struct ctx *c, *remote;
		bool progress = false;

		atomic_store_explicit(&l->recycle_wake, false, memory_order_relaxed);
		recycle_drain(l);
		remote = atomic_exchange_explicit(&l->remote, NULL, memory_order_acquire);
		while (remote) {
			c = remote;
			remote = c->next;
			ctx_continue(l, c);
			progress = true;
		}
		retry_parts(l);
		cfs_ioq_submit(l->q);
		if (cfs_ioq_reap(l->q, 0) > 0)
			progress = true;
		while ((c = l->ready)) {
			bool large = c->op == OP_READ && c->length_bytes >= YIELD_AFTER_READ_BYTES;

			l->ready = c->next;
			ctx_continue(l, c);
			progress = true;
			/* A large READ reply is a long kernel copy (~70-100 us
			 * per MiB): before the next one, let the loop take the
			 * requests that came in meanwhile, so their device I/O
			 * starts now (cfs_loop_poll_timeout_ms is 0 while
			 * replies wait). 1 MiB reads +5% (bench/README.md). */
			if (large && l->ready) {
				cfs_ioq_submit(l->q);
				return;
			}
		}
		if (l->parked_head && run_parked(l))
			progress = true;
		if (l->held_timers)
			held_timers_run(l);
		cfs_ioq_submit(l->q);
		if (!progress)
			break;
	}
}

static void loop_destroy(struct cfs_loop *l)
{
	if (!l)
		return;
	if (l->q)
		cfs_ioq_destroy(l->q);
	if (l->grow_q)
		cfs_ioq_destroy(l->grow_q);
	free(l->grow_buf);
	if (l->remote_fd >= 0)
		close(l->remote_fd);
	free(l->fbuf.mem);
	free(l->pool);
	free(l);
}

static size_t loop_arena_bytes(unsigned loop_count)
{
	size_t share = (CFS_ARENA_BUDGET_BYTES / loop_count) & ~(size_t)((1u << 20) - 1);

	return share > CFS_LOOP_ARENA_MIN_BYTES ? share : CFS_LOOP_ARENA_MIN_BYTES;
}

static int loop_create(struct cfs_daemon *d, unsigned index, unsigned count, struct cfs_loop **out)
{
	const struct cfs_io_geometry *geo = d->geo;
	struct cfs_ioq_config qcfg = {
		.depth = CFS_LOOP_QUEUE_DEPTH,
		.buffer_arena_bytes = loop_arena_bytes(count),
	};
	struct cfs_loop *l;
	int ret;

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->d = d;
	l->index = index;
	l->remote_fd = -1;
	l->queue_fd = -1;
	atomic_init(&l->remote, NULL);
	atomic_init(&l->recycle, NULL);
	atomic_init(&l->recycle_wake, false);
	atomic_init(&l->answering, 0);
	atomic_init(&l->answered_elsewhere, 0);
	l->granule_bytes = geo->logical_sector_bytes;
	l->ram = cfs_io_ram_ptr(d->io, 0, 0) != NULL;
	if (geo->mem_align_bytes > l->granule_bytes)
		l->granule_bytes = geo->mem_align_bytes;
	/* Held blocks are flushed by aligned whole-block writes. */
	l->absorb = !l->ram && HB % l->granule_bytes == 0;
	l->held_due_ns = UINT64_MAX;

	ret = cfs_ioq_create(d->io, &qcfg, &l->q);
	if (ret)
		goto out_destroy;
	/* Created before anything is queued, as iopath asks. */
	l->queue_fd = cfs_ioq_event_fd(l->q);
	l->remote_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->remote_fd < 0) {
		ret = -errno;
		goto out_destroy;
	}
	l->pool = calloc(CFS_LOOP_CONTEXTS, sizeof(*l->pool));
	if (!l->pool) {
		ret = -ENOMEM;
		goto out_destroy;
	}
	for (unsigned i = 0; i < CFS_LOOP_CONTEXTS; i++) {
		l->pool[i].next = l->free;
		l->free = &l->pool[i];
	}
	l->free_count = CFS_LOOP_CONTEXTS;
	*out = l;
	return 0;

out_destroy:
	loop_destroy(l);
	return ret;
}

int cfs_loops_create(struct cfs_daemon *d, unsigned count)
{
	const struct cfs_extent_geom *geom = &d->fs->geom;
	int ret;

	/*
	 * The written-state is kept per logical sector of the store, and the
	 * read-modify-write works in the device's logical sectors: they must be
	 * the same size, or a partial write would mark bytes written that were
	 * never written (store sectors larger) or read stale bytes into a
	 * written sector (store sectors smaller).
	 */
	if (geom->sector_bytes != d->geo->logical_sector_bytes) {
		fuse_log(FUSE_LOG_ERR,
			 "chunkfs: the store's sectors (%u bytes) differ from the device's "
			 "(%u bytes); not supported\n",
			 geom->sector_bytes, d->geo->logical_sector_bytes);
		return -EINVAL;
	}
	d->loops = calloc(count, sizeof(*d->loops));
	if (!d->loops)
		return -ENOMEM;
	for (d->loop_count = 0; d->loop_count < count; d->loop_count++) {
		ret = loop_create(d, d->loop_count, count, &d->loops[d->loop_count]);
		if (ret) {
			cfs_loops_destroy(d);
			return ret;
		}
	}
	return 0;
}

void cfs_loops_submit_counts(struct cfs_daemon *d, uint64_t *batches, uint64_t *requests)
{
	*batches = *requests = 0;
	for (unsigned i = 0; i < d->loop_count; i++) {
		uint64_t b, r;

		cfs_ioq_submit_counts(d->loops[i]->q, &b, &r);
		*batches += b;
		*requests += r;
	}
}

uint64_t cfs_loops_reads_answered_elsewhere(struct cfs_daemon *d)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < d->loop_count; i++)
		n += atomic_load_explicit(&d->loops[i]->answered_elsewhere, memory_order_relaxed);
	return n;
}

void cfs_loops_destroy(struct cfs_daemon *d)
{
	for (unsigned i = 0; i < d->loop_count; i++)
		loop_destroy(d->loops[i]);
	free(d->loops);
	d->loops = NULL;
	d->loop_count = 0;
}

/* ---- the mover's side of the guard (data.h) ------------------------------------------- */

/* Loops with requests of inode parked: look again now. */
static void wake_all_parked(struct cfs_inode *inode)
{
	struct cfs_daemon *d = &cfs_daemon;
	uint64_t one = 1;

	if (!atomic_load_explicit(&inode->behind_waiters, memory_order_acquire))
		return;
	for (unsigned i = 0; i < d->loop_count; i++)
		if (write(d->loops[i]->remote_fd, &one, sizeof(one)) != sizeof(one)) {
			/* the counter is far from overflowing */
		}
}

void cfs_data_guard_set(struct cfs_inode *inode, uint64_t lo_bytes, uint64_t hi_bytes)
{
	uint64_t old_hi = atomic_load(&inode->guard_hi_bytes);
	uint64_t old_lo = atomic_load(&inode->guard_lo_bytes);

	CFS_ASSERT(lo_bytes < hi_bytes);
	if (!old_hi) {
		/* A reader that sees hi sees this lo (guard_overlaps loads hi
		 * first). */
		atomic_store(&inode->guard_lo_bytes, lo_bytes);
		atomic_store(&inode->guard_hi_bytes, hi_bytes);
		return;
	}
	/* Only ever forwards: hi first, so every state in between covers
	 * both the old range and the new. */
	CFS_ASSERT(lo_bytes >= old_lo && hi_bytes >= old_hi);
	atomic_store(&inode->guard_hi_bytes, hi_bytes);
	atomic_store(&inode->guard_lo_bytes, lo_bytes);
	if (lo_bytes > old_lo)
		wake_all_parked(inode);
}

void cfs_data_guard_drain(struct cfs_inode *inode)
{
	for (int round = 0; round < 2; round++) {
		uint32_t old = atomic_load(&inode->guard_gen);

		atomic_store(&inode->guard_gen, old ^ 1u);
		while (atomic_load(&inode->guard_writers[old]))
			usleep(50);
	}
}

void cfs_data_guard_clear(struct cfs_inode *inode)
{
	atomic_store(&inode->guard_hi_bytes, 0);
	wake_all_parked(inode);
}
