/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * iopath.h — the one public header of iopath: moves aligned blocks between
 * memory and a backing store.
 *
 * iopath knows nothing of files, chunks or FUSE. Callers (the chunkfs daemon,
 * mkchunkfs, tests, bench/) hand it requests for byte ranges of one backing
 * target and get a completion callback with the full length or -errno.
 *
 * Objects:
 *   struct cfs_io    one backing target (block device, image file, RAM, a
 *                    Ceph RBD image), shared by every thread. Opened once,
 *                    closed once.
 *   struct cfs_ioq   one submission/completion queue on that target (for
 *                    the uring backend: one io_uring). A queue is owned by
 *                    one thread at a time for submission and by one thread
 *                    at a time for reaping (these may be two different
 *                    threads: the submission side takes the queue's own
 *                    lock, never a lock shared with other queues).
 *   struct cfs_io_req  one request; caller-owned memory that must stay valid
 *                    until its done() callback has run.
 *
 * Threading contract:
 *   - done() runs in the thread that called cfs_ioq_reap() on the queue the
 *     request finished on, never inside cfs_ioq_queue(); except for a
 *     request marked CFS_IO_REQ_DONE_ANY_THREAD, whose done() a backend with
 *     a completion thread of its own (rbd: librbd's) may run there, at once,
 *     concurrently with the queue's reaper.
 *   - A request queued on queue A finishes on queue A, except requests that
 *     wait for a range lock (read-modify-write): they are resumed on the queue
 *     of whoever released the lock. done() must therefore not assume a thread.
 *
 * Errors: every int-returning action returns >= 0 on success and -errno on
 * failure. Short transfers and -EAGAIN/-EINTR are retried inside iopath
 * (bounded by CFS_IO_RETRY_MAX), so done() sees either length_bytes or -errno.
 *
 * Alignment: iopath refuses (-EINVAL, counted as misaligned in the request's
 * statistics) any read/write/discard/zero whose offset or length is not a
 * multiple of the target's logical sector size, or whose buffer is not aligned
 * to mem_align_bytes. The kernel here (ext4 on virtio, tmpfs) accepts
 * misaligned O_DIRECT that an NVMe device rejects, so iopath checks itself.
 * Unaligned byte ranges go through cfs_io_rmw_write() / cfs_io_unaligned_read().
 */
#ifndef CFS_IOPATH_H
#define CFS_IOPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- limits ------------------------------------------------------------ */

#define CFS_IO_LENGTH_MAX (1u << 20) /* largest single request: FUSE max_write */
#define CFS_IO_SECTOR_MAX 4096u	     /* largest logical sector we support */
#define CFS_IO_RETRY_MAX 8u	     /* short transfer / EAGAIN resubmissions */
#define CFS_IO_DEPTH_DEFAULT 128u    /* requests in flight per queue */
#define CFS_IO_DEPTH_MAX 4096u

_Static_assert(CFS_IO_LENGTH_MAX % CFS_IO_SECTOR_MAX == 0,
	       "max request must be a whole number of the largest sector");

/* ---- statistics ---------------------------------------------------------
 * Per-chunk counters charged by iopath on completion. All fields are updated
 * with relaxed atomics by whichever thread completes a request; readers copy
 * with cfs_io_stats_snapshot() and never block I/O. The latency histogram is
 * log-linear: CFS_HIST_SUB linear sub-buckets per power of two of
 * nanoseconds, so a percentile is within 1/CFS_HIST_SUB (6.25%) of the truth.
 */
enum cfs_io_op {
	CFS_IO_READ = 0,
	CFS_IO_WRITE,
	CFS_IO_FLUSH,	/* data flush of the whole target (fdatasync) */
	CFS_IO_DISCARD, /* the range may read back as anything until rewritten */
	CFS_IO_ZERO,	/* the range reads back as zeros */
	CFS_IO_OP_COUNT
};

#define CFS_HIST_SUB_BITS 4
#define CFS_HIST_SUB (1u << CFS_HIST_SUB_BITS)
#define CFS_HIST_POW 40 /* 2^40 ns ~ 18 minutes: the last bucket is open-ended */
#define CFS_HIST_BUCKETS (CFS_HIST_POW * CFS_HIST_SUB)

struct cfs_latency_hist {
	uint64_t count;	 /* completions recorded */
	uint64_t sum_ns; /* sum of latencies */
	uint64_t min_ns; /* UINT64_MAX while count == 0 */
	uint64_t max_ns;
	uint64_t bucket[CFS_HIST_BUCKETS]; /* see cfs_hist_bucket() */
};

struct cfs_io_op_stats {
	uint64_t ops;			 /* completed requests, successful or not */
	uint64_t bytes;			 /* bytes transferred by successful requests */
	uint64_t errors;		 /* requests completed with -errno */
	struct cfs_latency_hist latency; /* queue to done(), successful or not */
};

struct cfs_io_stats {
	struct cfs_io_op_stats op[CFS_IO_OP_COUNT];
	uint64_t inflight_now; /* queued and not yet done */
	uint64_t inflight_max; /* high-water mark of inflight_now */
	uint64_t err_eio;      /* errors by kind */
	uint64_t err_enospc;
	uint64_t err_misaligned; /* refused by the alignment check */
	uint64_t err_short;	 /* short transfers that could not be completed */
	uint64_t err_other;
	uint64_t short_retries; /* short transfers requeued (not errors) */
	uint64_t rmw_ops;	/* unaligned requests done by read-modify-write */
	uint64_t reset_time_ns; /* CLOCK_REALTIME of the last reset */
};

/* Zero every counter and record the reset time. Safe against concurrent I/O
 * (a completion racing a reset may land on either side of it). */
void cfs_io_stats_reset(struct cfs_io_stats *stats);
/* Copy stats field by field with atomic loads (no torn 64-bit values). */
void cfs_io_stats_snapshot(const struct cfs_io_stats *stats, struct cfs_io_stats *copy);
/* Record one completion. Used by iopath itself; exported for the daemon's
 * own operations that do not pass through a backend (e.g. fsync on RAM). */
void cfs_io_stats_record(struct cfs_io_stats *stats, enum cfs_io_op op, int res,
			 uint64_t latency_ns);
void cfs_hist_record(struct cfs_latency_hist *hist, uint64_t latency_ns);
unsigned cfs_hist_bucket(uint64_t latency_ns);
uint64_t cfs_hist_bucket_upper_ns(unsigned bucket);
/* The latency at or below which `fraction` (0 < fraction <= 1) of the
 * recorded completions fall, as the upper bound of its bucket clamped to
 * max_ns; 0 when nothing was recorded. Works on a snapshot. */
uint64_t cfs_hist_percentile_ns(const struct cfs_latency_hist *hist, double fraction);

uint64_t cfs_now_ns(void); /* CLOCK_MONOTONIC */

/* ---- requests ---------------------------------------------------------- */

struct cfs_io;
struct cfs_ioq;

struct cfs_io_req {
	/* Set by the caller. */
	uint64_t offset_bytes;			       /* byte offset on the target */
	uint32_t length_bytes;			       /* READ/WRITE: <= CFS_IO_LENGTH_MAX;
							* DISCARD/ZERO: any (uint32_t); FLUSH: 0 */
	uint8_t op;				       /* enum cfs_io_op */
	void *buf;				       /* READ/WRITE only; aligned, see above */
	struct cfs_io_stats *stats;		       /* counters to charge; may be NULL */
	void (*done)(struct cfs_io_req *req, int res); /* res: length_bytes or -errno */
	void *cookie;				       /* the caller's (fuse_req_t, ...) */
	uint8_t flags;				       /* CFS_IO_REQ_* */

	/* Owned by iopath between queue and done; callers must not touch. */
	uint32_t done_bytes;	     /* progress across short transfers */
	uint16_t retries;	     /* resubmissions so far */
	uint16_t iop_flags;	     /* backend-private flags */
	uint64_t queued_ns;	     /* for the latency histogram */
	struct cfs_io_req *iop_next; /* intrusive link for iopath's lists */
	void *iop_private;	     /* backend-private (e.g. fault wrapper) */
};

/* done() may run on the backend's own completion thread instead of in a
 * reap. The "rbd" backend then runs it on librbd's completion thread as the
 * request finishes, saving the wakeup of the reaping thread (the eventfd and
 * its event loop) on the way to the caller's next step; the other backends
 * ignore it. Such a request leaves cfs_ioq_inflight() without waking the
 * queue's event fd, so a caller that marks requests must not need a reap to
 * learn of them; a blocking cfs_ioq_reap() still returns once they are done
 * (it looks every millisecond). */
#define CFS_IO_REQ_DONE_ANY_THREAD (1u << 0)

/* ---- targets ----------------------------------------------------------- */

/* Direct I/O is a policy, not a boolean (TigerBeetle): REQUIRED fails the
 * open when the target refuses O_DIRECT; OPTIONAL falls back to buffered I/O
 * with a warning on stderr; OFF never asks for it. */
enum cfs_dio_policy {
	CFS_DIO_REQUIRED = 0,
	CFS_DIO_OPTIONAL,
	CFS_DIO_OFF,
};

#define CFS_IO_RAM_MLOCK (1u << 0)     /* lock the RAM store's pages as they are touched */
#define CFS_IO_RAM_HUGEPAGES (1u << 1) /* ask for transparent huge pages */

/* Backend "rbd" (backend_rbd.c): how to reach the cluster, and the lock. */
struct cfs_io_ceph {
	const char *conf;    /* ceph.conf; NULL: Ceph's own search ($CEPH_CONF,
			      * /etc/ceph/$cluster.conf, ~/.ceph/$cluster.conf) */
	const char *id;	     /* cephx user without "client."; NULL: Ceph's
			      * default (admin, or --id in $CEPH_ARGS) */
	const char *cluster; /* cluster name; NULL: "ceph" */
	bool takeover;	     /* exclusive: break and blocklist the holder */
	unsigned wait_s;     /* exclusive: wait this long for a holder that
			      * is letting go (unmounting) */
};

struct cfs_io_config {
	const char *backend;	 /* "uring", "ram", "rbd", or "null"
				  * (benchmarks: completes every request,
				  * moves no data); cfs_io_config_source() */
	const char *path;	 /* uring: block device or image file;
				  * rbd: "rbd:POOL[/NAMESPACE]/IMAGE" */
	uint64_t size_bytes;	 /* ram, null: capacity (required); uring: 0 =
				  * whole target, else at most the target */
	uint32_t align_bytes;	 /* ram: advertised alignment, 0 = accept anything;
				  * uring: 0 = discover from the target */
	enum cfs_dio_policy dio; /* uring only */
	bool read_only;
	bool exclusive;		/* block devices: O_EXCL, refuse one in use;
				 * rbd: hold the image's exclusive lock */
	unsigned ram_flags;	/* CFS_IO_RAM_* */
	const char *fault_spec; /* non-NULL: wrap the backend in "fault"
				 * (tests only; syntax in backend_fault.c) */
	struct cfs_io_ceph ceph;
	/* Where a backend explains itself in words: why an open failed
	 * (rbd: who holds the image), and rare events at run time (rbd: this
	 * process was fenced). One line without a newline; NULL: stderr with
	 * a "chunkfs: " prefix. Never called per request. */
	void (*log)(void *arg, const char *line);
	void *log_arg;
};

/* ---- sources --------------------------------------------------------------
 * What a user writes where a store goes (chunkfs SOURCE, mkchunkfs TARGET,
 * fsck.chunkfs STORE): a block device or image path, or a Ceph RBD image
 * "rbd:POOL/IMAGE" or "rbd:POOL/NAMESPACE/IMAGE". */
#define CFS_RBD_PREFIX "rbd:"
#define CFS_RBD_NAME_BYTES 128 /* each of pool, namespace, image, with the NUL */

struct cfs_rbd_name {
	char pool[CFS_RBD_NAME_BYTES];
	char nspace[CFS_RBD_NAME_BYTES]; /* "" = the pool's default namespace */
	char image[CFS_RBD_NAME_BYTES];
};

/* True when source names an RBD image (it starts with "rbd:"). */
bool cfs_source_is_rbd(const char *source);
/* Split "rbd:POOL[/NAMESPACE]/IMAGE"; 0, or -EINVAL with *why set. */
int cfs_rbd_name_parse(const char *source, struct cfs_rbd_name *name, const char **why);
/* Point cfg at source: backend "rbd" and the name for an RBD image, else
 * backend "uring" and the path. Leaves every other field alone. */
void cfs_io_config_source(struct cfs_io_config *cfg, const char *source);

/* A pool's size_bytes and discard_supported change while it runs (stores
 * added and removed): read those two with atomics (cfs_io_can_discard). */
struct cfs_io_geometry {
	uint64_t size_bytes;		/* usable bytes of the target */
	uint32_t logical_sector_bytes;	/* offset/length alignment of every request */
	uint32_t physical_sector_bytes; /* atomic write unit (tearing granularity) */
	uint32_t mem_align_bytes;	/* buffer alignment for direct I/O */
	bool is_block_device;
	bool direct;		/* the target is open with O_DIRECT */
	bool discard_supported; /* DISCARD frees space on the target */
	const char *backend;	/* "uring", "ram", "fault(uring)", ... */
};

struct cfs_ioq_config {
	unsigned depth;		   /* requests in flight, 0 = CFS_IO_DEPTH_DEFAULT */
	size_t buffer_arena_bytes; /* aligned memory owned by the queue and
				    * registered with its ring; 0 = none */
	unsigned flags;		   /* CFS_IOQ_* */
};

/* One thread creates the queue and is the only one to queue, submit, reap,
 * resume on and destroy it (done() callbacks, which run in the reaping
 * thread, are that thread too). In exchange the uring backend lets the
 * kernel defer completion work until that thread reaps (SINGLE_ISSUER +
 * DEFER_TASKRUN), instead of interrupting it once per completion; the
 * shape of a per-core event loop. A call from another thread fails with
 * -EEXIST from the kernel. Without the flag any thread may submit. */
#define CFS_IOQ_SINGLE_THREAD (1u << 0)

int cfs_io_open(const struct cfs_io_config *cfg, struct cfs_io **out);
void cfs_io_close(struct cfs_io *io);
const struct cfs_io_geometry *cfs_io_geometry(const struct cfs_io *io);
/* Does DISCARD free space on the target now (every store of a pool)? */
bool cfs_io_can_discard(const struct cfs_io *io);
/* Discover the direct-I/O alignment of an open fd: STATX_DIOALIGN, then
 * BLKSSZGET/BLKPBSZGET for block devices, then 512. Fills the sector and
 * alignment fields of geo; returns 0 or -errno. mkchunkfs uses it too. */
int cfs_io_probe_alignment(int fd, struct cfs_io_geometry *geo);

/* ---- pools: several stores behind one target (fs/POOLS.md) --------------
 *
 * A "uring" target (also wrapped in "fault") can carry more stores than the
 * one it was opened on. Requests then address the pool address space, and a
 * route table sends each range of pool addresses to one store at an offset:
 * the data path, the queues, the arenas and the range locks stay the same
 * (one ring per queue drives every store). Until the first
 * cfs_io_set_routes() the first store (index 0) is reached at its own
 * offsets, as a target of one store always was.
 *
 * A request must lie inside one route (-EINVAL otherwise, from
 * cfs_ioq_queue). FLUSH flushes store 0 and every other store that completed
 * a write, zero or discard since its last flush. The geometry's size is the
 * end of the highest route; sectors and memory alignment are the first
 * store's (a store with another logical sector is refused); discard is
 * supported only when every store supports it.
 *
 * A store may be an RBD image (rbd:..., cfg->ceph of the target's config):
 * its requests go to librbd, not the ring (backend_uring.c, "RBD stores").
 *
 * Threads: any thread may add stores and publish routes while I/O runs; a
 * route table, once published, is never changed or freed before
 * cfs_io_close() (requests read it without a lock). Stores added after a
 * queue was created are reached through plain file descriptors on that
 * queue's ring (store 0 is a registered file, as before).
 */
#define CFS_IO_STORES_MAX 64u
#define CFS_IO_ROUTES_MAX 128u

struct cfs_io_route {
	uint64_t pool_offset_bytes;  /* start of the range in the pool address space */
	uint64_t length_bytes;	     /* > 0, a multiple of the logical sector */
	uint64_t store_offset_bytes; /* where the range starts on the store */
	uint32_t store;		     /* 0 = the store the target was opened on */
};

/* Open another store into io: cfg's path, dio policy, read_only and
 * exclusive are used (backend, size and fault spec are io's; for an RBD
 * image also ceph.takeover, ceph.wait_s and log when set, the cluster's
 * conf, id and name being io's). Returns the new
 * store's index (> 0), or -EOPNOTSUPP (a backend without pools), -EINVAL
 * (another logical sector than store 0's; message on stderr), -EMFILE
 * (CFS_IO_STORES_MAX stores), or the open's -errno. */
int cfs_io_add_store(struct cfs_io *io, const struct cfs_io_config *cfg);
/* The geometry of one store as opened (its own size); NULL for an unknown
 * index. */
const struct cfs_io_geometry *cfs_io_store_geometry(const struct cfs_io *io, unsigned store);
/* Publish a new route table (copied): count <= CFS_IO_ROUTES_MAX routes,
 * aligned to the logical sector, not overlapping, each inside its store.
 * 0 or -EINVAL (nothing changed). */
int cfs_io_set_routes(struct cfs_io *io, const struct cfs_io_route *routes, unsigned count);
/* The route table in force (sorted by pool address) into routes[0..max):
 * its count (0: none published, store 0 at its own offsets). */
unsigned cfs_io_get_routes(struct cfs_io *io, struct cfs_io_route *routes, unsigned max);
/* Close store `store` (> 0). The caller guarantees no route names it and no
 * request to it is in flight. 0 or -EINVAL. */
int cfs_io_drop_store(struct cfs_io *io, unsigned store);

/* ---- queues ------------------------------------------------------------ */

int cfs_ioq_create(struct cfs_io *io, const struct cfs_ioq_config *cfg, struct cfs_ioq **out);
void cfs_ioq_destroy(struct cfs_ioq *q); /* waits for everything in flight */

/* Queue a request; it reaches the device at the next cfs_ioq_submit().
 * Returns 0, or, without calling done():
 *   -EBUSY       q already has `depth` requests in flight (submit and reap,
 *                then retry);
 *   -EINVAL      misaligned (counted in stats->err_misaligned), or malformed:
 *                bad op, no done(), no buffer, too long, beyond the end of
 *                the target, FLUSH with a length (counted in err_other);
 *   -EROFS       anything but READ/FLUSH on a read-only target;
 *   -EOPNOTSUPP  DISCARD when geometry.discard_supported is false. */
int cfs_ioq_queue(struct cfs_ioq *q, struct cfs_io_req *req);
/* Hand everything queued to the device; returns how many were submitted. */
int cfs_ioq_submit(struct cfs_ioq *q);
/* How many cfs_ioq_submit() calls handed requests to the device, and how many
 * requests they carried (the uring backend: one system call per batch). */
void cfs_ioq_submit_counts(struct cfs_ioq *q, uint64_t *batches, uint64_t *requests);
/* Run done() for finished requests; waits until at least min_complete have
 * finished (0 = do not wait; clamped to cfs_ioq_inflight(), and staged but
 * unsubmitted requests are submitted before sleeping, so it cannot wait for
 * something that will never come). Returns how many done() calls ran, or
 * -errno (-EINTR: a signal arrived and nothing had completed). */
int cfs_ioq_reap(struct cfs_ioq *q, unsigned min_complete);
/* A file descriptor that becomes readable when completions are waiting, for
 * an event loop that polls it together with /dev/fuse; -1 if unsupported.
 * It is created on the first call (signalling costs a little per
 * completion, so queues that never poll do not pay): call it before queueing
 * the requests it should announce. Owned by q; do not close it. Read it
 * (8 bytes) to re-arm, then cfs_ioq_reap(q, 0). */
int cfs_ioq_event_fd(struct cfs_ioq *q);
/* Requests staged on q and not yet completed (a request parked behind a
 * range lock is counted on no queue until it is resumed). */
unsigned cfs_ioq_inflight(const struct cfs_ioq *q);

/* Convenience for metadata, mkchunkfs and tests: queue, submit and wait for
 * one request on q. Returns length or -errno. Not for the data path: it
 * reaps q (running other requests' done() too), so call it only from the
 * thread that reaps q, never from inside a done(). */
int cfs_ioq_sync(struct cfs_ioq *q, enum cfs_io_op op, uint64_t offset_bytes, uint32_t length_bytes,
		 void *buf, struct cfs_io_stats *stats);
/* cfs_ioq_sync() of a range of any length, in requests of at most
 * CFS_IO_LENGTH_MAX (buf NULL for ops without data). 0, or -errno of the
 * first request that failed (-EIO if one moved fewer bytes). */
int cfs_ioq_sync_range(struct cfs_ioq *q, enum cfs_io_op op, uint64_t offset_bytes,
		       uint64_t length_bytes, void *buf);

/* ---- buffers ----------------------------------------------------------- */

/* Aligned buffers from q's arena (registered with its ring, so the uring
 * backend uses fixed-buffer operations for them). Only the thread that owns
 * q's submission side may call these. Returns NULL when the arena is
 * exhausted. Any other buffer aligned to mem_align_bytes is accepted too,
 * with a non-fixed operation. */
void *cfs_ioq_buf_get(struct cfs_ioq *q, uint32_t length_bytes);
void cfs_ioq_buf_put(struct cfs_ioq *q, void *buf);
/* True when [buf, buf+length) lies inside q's registered arena. */
bool cfs_ioq_buf_is_fixed(const struct cfs_ioq *q, const void *buf, uint32_t length_bytes);

/* ---- unaligned byte ranges --------------------------------------------
 * Read-modify-write for ranges that are not sector-aligned. The covering
 * sectors are locked (a lock per range, striped over a hash table, never one
 * global lock), read, merged and written back; a request that overlaps a
 * locked range waits in a list (no thread blocks) and is resumed when the
 * range is released. Aligned writes that overlap a range under
 * read-modify-write wait for it too, so no update is ever lost. When no
 * read-modify-write is in flight the check costs one atomic load.
 */
struct cfs_io_rmw {
	struct cfs_io_req req; /* offset/length in bytes, any alignment; buf:
				* any alignment; op READ or WRITE; done/cookie
				* as for a plain request */
	/* Optional WRITE hooks (NULL = none). Both run under the range lock,
	 * on whichever thread drives the rmw at that point. */
	/* Is the partial edge sector at device offset sector_offset_bytes
	 * unwritten (allocated, never written)? Then it is merged as zeros
	 * instead of read, so a previous owner's data is not written back. */
	bool (*edge_unwritten)(struct cfs_io_rmw *rmw, uint64_t sector_offset_bytes);
	/* The merged cover is on the device (res = length_bytes) or its write
	 * failed (res < 0); called before the lock is released, so the caller
	 * can mark the cover written before any overlapping write proceeds.
	 * Not called when a read of an edge failed (nothing was written). */
	void (*written)(struct cfs_io_rmw *rmw, int res);
	/* Owned by iopath. */
	void *bounce; /* aligned cover buffer (rmw.c's per-target pool) */
	uint64_t cover_offset_bytes;
	uint32_t cover_length_bytes;
	uint8_t stage;
	struct cfs_io_req inner;      /* the sector-aligned I/O in flight */
	struct cfs_io_rmw *wait_next; /* range-lock table link while holding */
	struct cfs_ioq *q;	      /* the queue its I/O runs on now */
};

/* Start a read-modify-write (WRITE) or bounce read (READ) of rmw->req on q.
 * Returns 0 (done() will run once, from a reap, with length_bytes or -errno),
 * -EINVAL for a zero or over-long length, a range past the end or another op,
 * or -EBUSY when every bounce buffer is in use (reap, then retry). Unaligned
 * reads take no lock: each sector reads as before or after a concurrent write,
 * as an aligned read would. */
int cfs_io_rmw_start(struct cfs_ioq *q, struct cfs_io_rmw *rmw);

/* ---- RAM targets -------------------------------------------------------- */

/* Bytes of a "ram" target's store backed by memory now (pages touched and not
 * given back by DISCARD/ZERO; a read of a never-written page maps the shared
 * zero page and counts too), from mincore(). 0 if io is not a RAM target.
 * Scans the page table: for statfs and tests, not for the data path. */
uint64_t cfs_io_ram_resident_bytes(struct cfs_io *io);

/*
 * The bytes of a "ram" target's store at [offset_bytes, +length_bytes), for a
 * caller that moves them itself instead of queueing a request (the daemon
 * answers RAM reads straight from here and copies aligned writes in). NULL if
 * io is not a RAM target or the range leaves it. The store never moves while
 * io is open. Such a copy is a plain memcpy: it takes no range lock, so a
 * write through it must first see cfs_io_ranges_locked() false, as
 * cfs_ioq_queue() does for every write; and it is charged to no statistics.
 */
void *cfs_io_ram_ptr(struct cfs_io *io, uint64_t offset_bytes, uint64_t length_bytes);

/* True while some read-modify-write holds a range lock on io (one atomic
 * load). A write that bypasses cfs_ioq_queue() may go ahead only when this
 * is false; otherwise it must be queued (and wait for the lock). */
bool cfs_io_ranges_locked(struct cfs_io *io);

/* ---- fault injection (tests only) ----------------------------------------
 * For targets opened with cfg->fault_spec (syntax in backend_fault.c). */

/* Replace the rules (and seed/torn) at run time: 0 or -EINVAL with a message
 * on stderr. The counters of the new rules start from zero. */
int cfs_io_fault_arm(struct cfs_io *io, const char *spec);
/* Simulate power loss (spec volatile=1): drop every write not covered by a
 * completed FLUSH; with torn (or spec torn=1) first apply a random subset of
 * their physical sectors, so each unflushed sector reads back old or new and
 * never anything else. I/O may be in flight (a daemon pulling the plug): what
 * completes afterwards sees the store as the crash left it. Takes a mutex and
 * does I/O: call it from a thread, not from a signal handler. Returns the
 * number of physical sectors applied, or -EINVAL if io is not a volatile
 * fault target. */
int cfs_io_fault_crash(struct cfs_io *io, bool torn);

#endif /* CFS_IOPATH_H */
