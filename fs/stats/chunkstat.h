/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * chunkstat.h — per-chunk I/O statistics as the database sees them: what
 * is counted, how it is charged without locks, and how it is rendered as
 * the text values of the user.chunkfs.* xattrs.
 *
 * What is counted. One struct cfs_chunk_stats per inode (a chunk reached
 * through two symlinks or two names is one chunk), charged once per FUSE
 * request by the daemon (fs/fuse/data.c, fs/fuse/ops.c), not per device request: a
 * request's bytes are what the application asked for and got, its latency
 * runs from receiving the request to replying, and a request split into
 * several device I/Os (discontiguous units, read-modify-write edges) is one
 * operation, as in `onstat -g iof` and iostat. The embedded struct
 * cfs_io_stats (iopath/iopath.h) holds:
 *   op[CFS_IO_READ], op[CFS_IO_WRITE]   READ and WRITE requests
 *   op[CFS_IO_FLUSH]                    fsync/fdatasync (until durable)
 *   op[CFS_IO_DISCARD]                  fallocate(PUNCH_HOLE)
 *   inflight_now/max                    READ+WRITE requests being served
 *   err_eio/enospc/other                failed requests by errno
 *   err_misaligned                      O_DIRECT refused by the alignment policy
 *   rmw_ops                             requests that needed read-modify-write
 *   reset_time_ns                       start of the counting period (REALTIME)
 * The iopath-only fields (short_retries, err_short, op[CFS_IO_ZERO]) stay 0:
 * device requests carry no statistics pointer. Outside it, short_reads: the
 * O_DIRECT reads answered with fewer (but more than 0) bytes than asked
 * because the range crossed the end of the chunk (RocksDB reads past the end
 * of every SST file): normal, so not an error and not in errors.
 *
 * READ and WRITE, the hot ones, are charged into one of CFS_CS_SHARDS
 * shards of the chunk, chosen by the charging thread, and summed when read:
 * two event loops serving one chunk would otherwise bounce its counter and
 * histogram cache lines between cores on every request (fs/DAEMON.md,
 * "Statistics", has the numbers).
 * Mount-wide totals (the root directory's xattrs) are the same counters
 * charged a second time into per-thread slots, summed when read. The
 * in-flight gauges (chunk and mount) stay single atomics: the maximum of a
 * sum is not the sum of per-shard maxima.
 *
 * Reading never blocks I/O: readers copy with relaxed atomic loads; counters
 * are independent, so a copy taken during I/O may see a request's ops and not
 * yet its bytes (rates are unaffected; rendering clamps derived values).
 *
 * CFS_NO_STATS (make CFS_NO_STATS=1) compiles every charging call to nothing,
 * for measuring what counting costs (bench/stats-overhead.sh); the xattrs
 * then read as zeros.
 *
 * What this file does not do: FUSE (fs/fuse/xattr.c answers getxattr and friends),
 * namespace lookups, or printing tables (fs/stats/statcmd.c).
 */
#ifndef CFS_CHUNKSTAT_H
#define CFS_CHUNKSTAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "iopath/iopath.h"

#define CFS_CS_PREFIX "user.chunkfs."
#define CFS_CS_PREFIX_BYTES (sizeof(CFS_CS_PREFIX) - 1)
/* Page size for page_reads/page_writes until one is set per chunk. */
#define CFS_CS_PAGE_SIZE_DEFAULT 4096u
/* Every rendered value fits in this (the largest is a *_hist value with all
 * CFS_HIST_BUCKETS buckets used: under 27 KiB). XATTR_SIZE_MAX. */
#define CFS_CS_TEXT_MAX 65536u
/* Mount-wide slots: threads beyond this share slots (still exact: atomics). */
#define CFS_CS_SLOTS 32u
/* READ/WRITE shards per chunk (threads share them modulo: still exact). */
#define CFS_CS_SHARDS 4u

/* One thread's share of a chunk's READ and WRITE counters (private). */
struct cfs_cs_shard;

struct cfs_chunk_stats {
	struct cfs_io_stats io; /* see the top of this file; op[READ/WRITE]
				 * and their errors also live in the shards */
	uint64_t opens_total;	/* successful open/create of the chunk */
	uint64_t opens_direct;	/* ... with O_DIRECT */
	uint64_t opens_buffered;
	uint64_t short_reads;			   /* see the top of this file */
	struct cfs_cs_shard *shard[CFS_CS_SHARDS]; /* allocated by the first
						    * request of a thread that
						    * maps to it */
};

/* Flags of cfs_cs_request_done(). */
#define CFS_CS_INFLIGHT (1u << 0)   /* cfs_cs_request_begin() counted it */
#define CFS_CS_RMW (1u << 1)	    /* some part went through read-modify-write */
#define CFS_CS_SHORT_READ (1u << 2) /* an O_DIRECT read cut at the end of the chunk */
#define CFS_CS_MISALIGNED (1u << 3) /* refused (-EINVAL) by the O_DIRECT policy */

/* ---- charging (data path: lock-free, no allocation) ---------------------- */

#ifdef CFS_NO_STATS
/* Macros, not empty functions: the arguments (clock reads, the lazy
 * allocation in cfs_ns_inode_stats()) must not be evaluated either, or the
 * comparison would still pay for them. sizeof marks them used. */
#define CFS_STATS_ENABLED 0
#define cfs_cs_request_begin(cs) ((void)sizeof(cs))
#define cfs_cs_request_end(cs) ((void)sizeof(cs))
#define cfs_cs_request_done(cs, op, res, bytes, latency_ns, flags)                                 \
	((void)sizeof(cs), (void)sizeof(op), (void)sizeof(res), (void)sizeof(bytes),               \
	 (void)sizeof(latency_ns), (void)sizeof(flags))
#define cfs_cs_open(cs, direct) ((void)sizeof(cs), (void)sizeof(direct))
#define cfs_cs_close() ((void)0)
#else
#define CFS_STATS_ENABLED 1
/* A READ or WRITE request starts being served (in-flight gauges). */
void cfs_cs_request_begin(struct cfs_chunk_stats *cs);
/* It stops being served without an answer of its own (it starts over as
 * a new request, which is charged): the in-flight gauges only. */
void cfs_cs_request_end(struct cfs_chunk_stats *cs);
/* A request was answered: res 0 or -errno; bytes transferred (READ: what
 * the reply carries; WRITE: written; DISCARD: the punched length); latency
 * from receipt to reply. Charges cs (may be NULL: only the mount totals) and
 * this thread's mount slot. */
void cfs_cs_request_done(struct cfs_chunk_stats *cs, enum cfs_io_op op, int res, uint64_t bytes,
			 uint64_t latency_ns, unsigned flags);
/* A regular file was opened (cs may be NULL) / an open of one released. */
void cfs_cs_open(struct cfs_chunk_stats *cs, bool direct);
void cfs_cs_close(void);
#endif

/* ---- lifecycle -------------------------------------------------------------- */

/* The mount starts now (CLOCK_REALTIME ns): the counting period of every
 * chunk and of the totals begins here. Zeroes the mount totals. */
void cfs_cs_mount_start(uint64_t realtime_ns);
uint64_t cfs_cs_mount_time_ns(void);
/* A chunk's statistics: zeroed, counting since the mount (a chunk with no
 * I/O yet has simply counted nothing). NULL on -ENOMEM. cfs_cs_free() it. */
struct cfs_chunk_stats *cfs_cs_new(void);
void cfs_cs_free(struct cfs_chunk_stats *cs);
/* Zero the counters (not the gauges) and set reset_time to now. Safe
 * against concurrent I/O: a racing completion lands on either side. */
void cfs_cs_reset(struct cfs_chunk_stats *cs);
void cfs_cs_mount_reset(void);
/* Copy with atomic loads, shards summed into dst->io (dst->shard[] NULL).
 * src NULL: a chunk that never counted anything. */
void cfs_cs_snapshot(const struct cfs_chunk_stats *src, struct cfs_chunk_stats *dst);
/* The mount totals: every slot summed, gauges from the mount-wide atomics. */
void cfs_cs_mount_snapshot(struct cfs_chunk_stats *dst);
/* Mount-wide gauges. */
uint64_t cfs_cs_mount_opens_now(void);

/* ---- rendering ---------------------------------------------------------------
 * A view is a snapshot plus the facts the reader adds. Values are plain
 * decimal text: counts and bytes as integers, latencies in whole
 * microseconds (rounded), times as UNIX seconds with 6 decimals.
 */
struct cfs_cs_view {
	struct cfs_chunk_stats snap;
	bool root;	    /* mount-wide totals and store facts */
	uint64_t now_ns;    /* CLOCK_REALTIME of the sample ("time") */
	uint64_t opens_now; /* chunk: open handles; root: mount-wide */
	/* chunk */
	uint32_t page_size_bytes; /* effective (set or default) */
	uint64_t size_bytes;
	/* root */
	const char *source;  /* SOURCE as given to chunkfs (or fsname) */
	const char *backend; /* iopath's name: "uring", "ram", "fault(uring)" */
	uint64_t store_bytes;
	uint64_t data_bytes;
	uint64_t free_bytes;
	uint32_t block_bytes; /* allocation unit */
	uint32_t sector_bytes;
	uint32_t physical_sector_bytes;
	uint32_t dio_align_bytes; /* O_DIRECT without read-modify-write */
	bool dio_align_enforced;  /* RAM mounts refuse other alignments */
	bool readonly;
	uint64_t mount_time_ns;
};

/* Field scopes. */
#define CFS_CS_CHUNK (1u << 0)
#define CFS_CS_ROOT (1u << 1)
#define CFS_CS_LISTED_CHUNK (1u << 2) /* in getfattr -d of a chunk */
#define CFS_CS_LISTED_ROOT (1u << 3)  /* in getfattr -d of the root */
#define CFS_CS_WRITABLE (1u << 4)     /* setxattr does something */
#define CFS_CS_READABLE (1u << 5)     /* getxattr answers (reset: not) */
#define CFS_CS_IN_LINE (1u << 6)      /* part of the composite "stat" line */

struct cfs_cs_field {
	const char *name; /* without the "user.chunkfs." prefix */
	unsigned flags;	  /* CFS_CS_* scopes */
};

/* The field table (for tests and the documentation), in list order. */
const struct cfs_cs_field *cfs_cs_fields(size_t *count);
/* Find a field by its name without the prefix, for a chunk (root false) or
 * the root; NULL when there is no such field in that scope. */
const struct cfs_cs_field *cfs_cs_field_find(const char *name, bool root);

/* Render one field's value (not NUL-terminated in the xattr sense, but a NUL
 * is written when it fits). Returns the value's length; copies at most size
 * bytes (snprintf rules). */
size_t cfs_cs_render_field(const struct cfs_cs_view *v, const struct cfs_cs_field *f, char *buf,
			   size_t size);
/* The composite "stat" line: every CFS_CS_IN_LINE field of the scope, as
 * space-separated key=value, in table order. String values are
 * percent-escaped (space, '=', '%', and bytes outside 0x21..0x7e). */
size_t cfs_cs_render_line(const struct cfs_cs_view *v, char *buf, size_t size);
/* The names listxattr shows for the scope ("user.chunkfs.x\0..."), or none
 * when hidden. Returns the byte count; copies only when it fits. */
size_t cfs_cs_list(bool root, bool hidden, char *buf, size_t size);

/* Histogram text (the *_hist fields): "UPPER_NS:COUNT" for every non-empty
 * bucket, ascending, space-separated ("" when empty). UPPER_NS is the bucket's
 * inclusive upper bound (cfs_hist_bucket_upper_ns). */
size_t cfs_cs_render_hist(const struct cfs_latency_hist *h, char *buf, size_t size);
/* Parse it back into buckets and count (sum, min, max: 0; max_ns set to
 * UINT64_MAX so percentiles are bucket bounds). 0 or -EINVAL. */
int cfs_cs_parse_hist(const char *text, struct cfs_latency_hist *out);
/* after - before, bucket by bucket (an interval's histogram; buckets that
 * went backwards, e.g. after a reset, count as after). */
void cfs_cs_hist_delta(const struct cfs_latency_hist *after, const struct cfs_latency_hist *before,
		       struct cfs_latency_hist *delta);

/* ---- reading the composite line (chunkfs stat, tests) ------------------------ */

/* Copy key's value from a composite line into out (percent-decoded,
 * NUL-terminated). false when absent or out is too small. */
bool cfs_cs_line_get(const char *line, const char *key, char *out, size_t out_size);
bool cfs_cs_line_u64(const char *line, const char *key, uint64_t *out);
/* Times ("1733061234.123456") and other decimals. */
bool cfs_cs_line_double(const char *line, const char *key, double *out);

/* Formatting helpers shared with fs/stats/statcmd.c and tested on their own. */
/* Nanoseconds as whole microseconds, rounded half up. */
uint64_t cfs_cs_ns_to_us(uint64_t ns);
/* REALTIME ns as "SECONDS.MICROSECONDS" (6 decimals). Returns the length. */
size_t cfs_cs_format_time(uint64_t realtime_ns, char *buf, size_t size);
/* Percent-escape s (see cfs_cs_render_line). Returns the escaped length. */
size_t cfs_cs_escape(const char *s, char *buf, size_t size);

/* ---- the size-probe cache (fs/fuse/xattr.c) ----------------------------------------
 * getxattr(size 0) answers the length of a value rendered now; the
 * following getxattr(size N) of the same thread renders again, and a counter
 * that gained a digit in between would make a buffer sized from the probe
 * too small (ERANGE for a correct caller). So a probe's text is remembered
 * for the requesting thread (FUSE passes the caller's thread id), the inode
 * and the field, for CFS_CS_PROBE_TTL_NS, and the read that follows gets
 * exactly that text if it fits; any other read renders fresh. A bounded
 * table (sets of 4 entries): when more than 4 probes wait for their read in
 * one set, the oldest is dropped and its read renders fresh (then a value
 * that grew meanwhile gets ERANGE, as getxattr(2) allows).
 */
#define CFS_CS_PROBE_SLOTS 256u
#define CFS_CS_PROBE_TTL_NS 2000000000ull

struct cfs_cs_probe_key {
	uint64_t tid; /* caller's thread (fuse_req_ctx()->pid) */
	uint64_t ino;
	uint64_t field; /* which value: a field id, or anything stable */
};

/* Remember text (length bytes) for key. -ENOMEM (nothing remembered). */
int cfs_cs_probe_put(const struct cfs_cs_probe_key *key, const char *text, size_t length,
		     uint64_t now_ns);
/* If key has a live entry whose text fits in size, copy it into buf, forget
 * it and return its length; else -1 (and keep it only if it is still live). */
ssize_t cfs_cs_probe_take(const struct cfs_cs_probe_key *key, char *buf, size_t size,
			  uint64_t now_ns);
/* Free the table's buffers (unmount, tests). */
void cfs_cs_probe_clear(void);

#endif /* CFS_CHUNKSTAT_H */
