/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * data.h — the asynchronous data path (fs/DAEMON.md, "Threads and the data
 * path"): per event-loop state (struct cfs_loop: one iopath queue with its
 * buffer arena, a fixed pool of request contexts, cross-thread completions)
 * and the READ/WRITE handlers ops.c calls.
 *
 * Contract with the event loop (main.c):
 *   - cfs_loop_enter() once, in the thread that owns the loop;
 *   - before receiving a request, cfs_loop_can_receive() must be true: a
 *     request may need a context, and contexts are never allocated on demand;
 *   - after every batch of requests and every wakeup, cfs_loop_work(): it
 *     submits what was queued, reaps completions without waiting, finishes
 *     requests other threads completed for us, and retries requests that
 *     found the queue or the bounce pool full; after a large READ reply it
 *     may return with replies still waiting, and cfs_loop_poll_timeout_ms()
 *     is then 0: the loop receives what came in and calls it again;
 *   - cfs_loop_idle(): nothing of this loop is in flight (exit may proceed).
 *
 * The handlers reply to the FUSE request themselves, now or from a
 * completion. They return 0 once they own the reply, or -errno when the
 * caller (ops.c) must reply with that error.
 */
#ifndef CFS_DATA_H
#define CFS_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/fuse/daemon.h"

struct cfs_attr;
struct cfs_inode;
struct cfs_loop;
struct cfs_ns_zero;

/* Request contexts per loop: the most FUSE data requests one loop has in
 * flight. The kernel keeps at most CFS_MAX_BACKGROUND asynchronous requests
 * per mount, spread over the loops. */
#define CFS_LOOP_CONTEXTS 128u
/* The loops' registered buffer arenas, together: 32 full-size requests at
 * once, split evenly, but at least 8 per loop; past its arena a request
 * falls back to an aligned heap buffer (counted). Registering pins the
 * arena, so it is resident from the mount on: the budget is most of an
 * empty daemon's memory. */
#define CFS_ARENA_BUDGET_BYTES (32u << 20)
#define CFS_LOOP_ARENA_MIN_BYTES (8u << 20)
#define CFS_LOOP_QUEUE_DEPTH 512u

/* Create d->loop_count = count loops (queues, arenas, contexts). 0 or -errno;
 * on failure nothing is left allocated. */
int cfs_loops_create(struct cfs_daemon *d, unsigned count);
/* Destroy every loop; none may be running. */
void cfs_loops_destroy(struct cfs_daemon *d);
/* Device submissions of all loops: batches (system calls) and requests. */
void cfs_loops_submit_counts(struct cfs_daemon *d, uint64_t *batches, uint64_t *requests);
/* READs answered on the store's completion thread (round_done), all loops. */
uint64_t cfs_loops_reads_answered_elsewhere(struct cfs_daemon *d);

void cfs_loop_enter(struct cfs_loop *l);
unsigned cfs_loop_index(const struct cfs_loop *l);
struct fuse_buf *cfs_loop_fuse_buf(struct cfs_loop *l);
/* The queue's completion eventfd, or -1 when the backend has none (then the
 * loop must not sleep while cfs_loop_busy()). */
int cfs_loop_queue_fd(const struct cfs_loop *l);
/* Readable when another thread finished one of this loop's requests. */
int cfs_loop_remote_fd(const struct cfs_loop *l);
bool cfs_loop_can_receive(const struct cfs_loop *l);
void cfs_loop_work(struct cfs_loop *l);
/* While held, the device I/O of newly dispatched requests is queued but not
 * submitted; releasing submits it in one system call. */
void cfs_loop_hold_submit(struct cfs_loop *l, bool hold);
bool cfs_loop_idle(const struct cfs_loop *l);
/* The loop is exiting: held blocks go to the store now (cfs_loop_idle is
 * false until they are there). */
void cfs_loop_stopping(struct cfs_loop *l);
/* epoll_wait timeout: -1, or 1 ms while parts wait for room in the queue
 * or the bounce pool, requests are parked behind a write-behind, or I/O is
 * in flight on a backend without an eventfd; 0 when there is work. Called
 * right before sleeping: it also asks for a wakeup when contexts answered
 * on other threads are needed back. */
int cfs_loop_poll_timeout_ms(struct cfs_loop *l);

/*
 * The transport's offer of a reply buffer: fn returns the payload buffer of
 * the request this thread is handling right now (inside
 * fuse_session_process_buf), or NULL (a /dev/fuse request). A READ may read
 * the data straight into it: it is the request's own until its reply, and a
 * reply whose data already sits at the start of the buffer goes without a
 * copy; a WRITE whose payload sits there may write from it. Page aligned.
 * Set before the loops start, cleared (NULL) after they stopped: FUSE over
 * io_uring (transport_uring.c) registers one; /dev/fuse has none.
 */
typedef void *(*cfs_reply_buf_fn)(size_t *bytes);
void cfs_data_set_reply_buf_hook(cfs_reply_buf_fn fn);

/* ---- handlers (called from ops.c, in a loop thread) ------------------------ */

/* Open-file flags data.c cares about (ops.c keeps them in fi->fh). */
#define CFS_FILE_DIRECT (1u << 0)   /* opened with O_DIRECT */
#define CFS_FILE_UNCACHED (1u << 1) /* FOPEN_DIRECT_IO: writes bypass the page cache */
/* Of one WRITE, not of the handle: an O_DIRECT write through the kernel's own
 * direct path (the handle is cached); its range is dropped from the page
 * cache once it is on the store, before the reply (fs/fuse/dio_inval.h). */
#define CFS_FILE_DROP_CACHE_AFTER (1u << 2)
/* Of one WRITE: through an FOPEN_DIRECT_IO handle; dropped like the above if
 * the file's pages were mapped (inode->uncached_mapped) when it landed. */
#define CFS_FILE_DROP_CACHE_IF_MAPPED (1u << 3)
/* Of one WRITE: the kernel's write-back of its dirty pages (writeback cache
 * or mmap), which may take the space held back for it (fs/meta/pool.h). */
#define CFS_FILE_WRITEBACK (1u << 4)

int cfs_data_read(fuse_req_t req, struct cfs_inode *inode, unsigned file_flags, size_t size,
		  uint64_t offset);
int cfs_data_write(fuse_req_t req, struct cfs_inode *inode, unsigned file_flags, const void *buf,
		   size_t size, uint64_t offset);

/*
 * The alignment policy for O_DIRECT. A store
 * mount accepts any alignment (unaligned ranges go through read-modify-
 * write): databases that probe with odd sizes keep working. A RAM mount
 * enforces dio_align on offset and length like a device with sectors of that
 * size would, so a database that works there works on the device. (The
 * application's buffer address never reaches a FUSE daemon, so memory
 * alignment cannot be checked.) 0, or -EINVAL (counted in the inode's
 * err_misaligned).
 */
int cfs_data_check_direct(struct cfs_inode *inode, unsigned file_flags, size_t size,
			  uint64_t offset);

/*
 * Run fn(req, inode, args) once every write of inode answered before it
 * reached the store (write-behind, data.c) is on the store: at once when
 * none is in flight (args is the caller's), else later on this loop (args is
 * a copy of args_bytes <= CFS_DATA_THEN_ARGS_MAX bytes). For what must see
 * those writes on the store: fsync (the device flush must come after them),
 * SEEK_DATA/SEEK_HOLE, truncate and punch (they read and change the
 * written-state, which a write sets when it is on the store). inode NULL:
 * at once.
 */
#define CFS_DATA_THEN_ARGS_MAX 192u
typedef void (*cfs_data_then_fn)(fuse_req_t req, struct cfs_inode *inode, const void *args);
void cfs_data_after_writes(fuse_req_t req, struct cfs_inode *inode, cfs_data_then_fn fn,
			   const void *args, size_t args_bytes);
/*
 * cfs_data_after_writes() for fallocate: first every piece of inode that
 * [offset_bytes, +length_bytes) touches becomes a whole unit (the file's
 * writes are stopped meanwhile: data.c, "a piece grows"), so a chunk
 * fallocated over its first unit gets it whole. If that fails, the request
 * gets the error and fn does not run.
 */
void cfs_data_grow_then(fuse_req_t req, struct cfs_inode *inode, uint64_t offset_bytes,
			uint64_t length_bytes, cfs_data_then_fn fn, const void *args,
			size_t args_bytes);
/*
 * For a call of ops.c that got -EAGAIN from the namespace (no free unit yet,
 * but units are coming back: cfs_ns_fallocate): run fn(req, inode, args)
 * again later on this loop, with a copy of args_bytes <=
 * CFS_DATA_THEN_ARGS_MAX bytes, up to about a second after the first try
 * (data.c, "waiting for space"). False: that second is over, or no loop or
 * context: the caller answers ENOSPC.
 */
bool cfs_data_space_wait(fuse_req_t req, struct cfs_inode *inode, cfs_data_then_fn fn,
			 const void *args, size_t args_bytes);
/*
 * Held blocks (data.c, "held blocks"; fs/fuse/held.h). Drop inode's: before a
 * truncate cuts or a punch changes its bytes (after cfs_data_after_writes, so
 * what they held is on the store) and for O_TRUNC (what they held is cut
 * anyway).
 */
void cfs_data_drop_held(struct cfs_inode *inode);
/* A handle of inode was released: with no cached open left, forget the held
 * blocks that have nothing to write, and their memory if none is left. */
void cfs_data_closed(struct cfs_inode *inode);

/*
 * Write zeros over the cut sectors a truncate or punch reported (struct
 * cfs_ns_zero: 0..2 partial sectors, with an I/O reference on zero->inode
 * that this drops when done), then reply: with attr (setattr) if non-NULL,
 * else with success (fallocate). Always owns the reply; returns 0.
 */
int cfs_data_zero(fuse_req_t req, const struct cfs_ns_zero *zero, const struct cfs_attr *attr);

/*
 * The mover's guard (fs/fuse/move.h; data.c, "the mover's guard"): device
 * writes of inode touching file bytes [lo_bytes, hi_bytes) wait until the
 * guard moves past them. cfs_data_guard_set publishes a guard, or moves the
 * one there forward (neither end goes back); cfs_data_guard_drain then
 * waits (sleeping: the mover's thread only) until every device write of
 * the file that may not have seen it is on the store; cfs_data_guard_clear
 * lifts it and lets the waiting writes go.
 */
void cfs_data_guard_set(struct cfs_inode *inode, uint64_t lo_bytes, uint64_t hi_bytes);
void cfs_data_guard_drain(struct cfs_inode *inode);
void cfs_data_guard_clear(struct cfs_inode *inode);

#endif /* CFS_DATA_H */
