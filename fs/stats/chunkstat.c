// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * chunkstat.c — per-chunk statistics: charging (lock-free), mount-wide
 * totals, the field table of the user.chunkfs.* xattrs and their text, and
 * the size-probe cache. The contract is in chunkstat.h.
 *
 * Main invariant: the data path only ever does relaxed atomic adds, loads
 * and compare-exchanges on counters (no lock, no allocation, no log line);
 * a reader copies with atomic loads. Only the first request of a thread
 * allocates (its mount slot), and only the probe cache takes a mutex, on the
 * xattr path.
 *
 * Divisions: charging - mount totals - field table - rendering - parsing -
 * probe cache.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/base/counter.h"
#include "fs/base/hex.h"
#include "fs/stats/chunkstat.h"

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- mount-wide state ------------------------------------------------------ */

/* Gauges every loop touches: each on its own cache line. */
struct gauge {
	_Alignas(64) uint64_t now;
	uint64_t max;
};

struct cfs_cs_shard {
	_Alignas(64) struct cfs_io_op_stats op[2]; /* CFS_IO_READ, CFS_IO_WRITE */
	uint64_t err_eio;
	uint64_t err_enospc;
	uint64_t err_misaligned;
	uint64_t short_reads;
	uint64_t err_other;
	uint64_t rmw_ops;
};

_Static_assert(CFS_IO_READ == 0 && CFS_IO_WRITE == 1, "shards hold ops 0 and 1");

static struct gauge mount_inflight;
static struct gauge mount_opens;
static uint64_t mount_time;	  /* REALTIME ns, set once at mount */
static uint64_t mount_reset_time; /* start of the totals' period */
static struct cfs_chunk_stats *slots[CFS_CS_SLOTS];
static unsigned slot_next;
static __thread struct cfs_chunk_stats *tls_slot;
static __thread unsigned tls_index; /* this thread's slot number */

__attribute__((unused)) static void gauge_up(struct gauge *g)
{
	cfs_gauge_up(&g->now, &g->max);
}

__attribute__((unused)) static void gauge_down(struct gauge *g)
{
	cfs_gauge_down(&g->now);
}

/*
 * This thread's slot of the mount totals. Threads take slots round-robin
 * on their first request; the slot's memory is allocated then (once per
 * slot, never freed: the totals live as long as the process). NULL only if
 * that allocation failed, and then the totals miss this thread.
 */
__attribute__((unused)) static struct cfs_chunk_stats *my_slot(void)
{
	struct cfs_chunk_stats *s = tls_slot, *fresh, *expect = NULL;
	unsigned i;

	if (__builtin_expect(s != NULL, 1))
		return s;
	i = __atomic_fetch_add(&slot_next, 1, __ATOMIC_RELAXED) % CFS_CS_SLOTS;
	tls_index = i;
	s = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
	if (!s) {
		fresh = cfs_cs_new();
		if (!fresh)
			return NULL;
		if (__atomic_compare_exchange_n(&slots[i], &expect, fresh, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			s = fresh;
		} else {
			free(fresh);
			s = expect;
		}
	}
	tls_slot = s;
	return s;
}

/* ---- charging ----------------------------------------------------------------- */

#ifndef CFS_NO_STATS
static void inflight_up(struct cfs_io_stats *io)
{
	cfs_gauge_up(&io->inflight_now, &io->inflight_max);
}

void cfs_cs_request_begin(struct cfs_chunk_stats *cs)
{
	if (cs)
		inflight_up(&cs->io);
	gauge_up(&mount_inflight);
}

void cfs_cs_request_end(struct cfs_chunk_stats *cs)
{
	if (cs)
		cfs_gauge_down(&cs->io.inflight_now);
	gauge_down(&mount_inflight);
}

/* The counters one request moves: a chunk's io, a shard, or a slot. */
struct charge_to {
	struct cfs_io_op_stats *os;
	uint64_t *err_eio, *err_enospc, *err_misaligned, *short_reads, *err_other, *rmw_ops;
};

static void charge(const struct charge_to *to, int res, uint64_t bytes, uint64_t latency_ns,
		   unsigned flags)
{
	if (res < 0) {
		cfs_counter_add(&to->os->errors, 1);
		if (res == -EIO)
			cfs_counter_add(to->err_eio, 1);
		else if (res == -ENOSPC)
			cfs_counter_add(to->err_enospc, 1);
		else if (flags & CFS_CS_MISALIGNED)
			cfs_counter_add(to->err_misaligned, 1);
		else
			cfs_counter_add(to->err_other, 1);
	} else if (bytes) {
		cfs_counter_add(&to->os->bytes, bytes);
	}
	if (flags & CFS_CS_SHORT_READ)
		cfs_counter_add(to->short_reads, 1);
	if (flags & CFS_CS_RMW)
		cfs_counter_add(to->rmw_ops, 1);
	cfs_hist_record(&to->os->latency, latency_ns);
	cfs_counter_add(&to->os->ops, 1);
}

static void charge_io(struct cfs_chunk_stats *cs, enum cfs_io_op op, int res, uint64_t bytes,
		      uint64_t latency_ns, unsigned flags)
{
	struct cfs_io_stats *io = &cs->io;
	struct charge_to to = {
		.os = &io->op[op],
		.err_eio = &io->err_eio,
		.err_enospc = &io->err_enospc,
		.err_misaligned = &io->err_misaligned,
		.short_reads = &cs->short_reads,
		.err_other = &io->err_other,
		.rmw_ops = &io->rmw_ops,
	};

	charge(&to, res, bytes, latency_ns, flags);
}

/* This thread's shard of cs, allocated on its first request there (NULL:
 * no memory; the caller charges cs->io instead, just as exactly). */
static struct cfs_cs_shard *my_shard(struct cfs_chunk_stats *cs)
{
	struct cfs_cs_shard **slot = &cs->shard[tls_index % CFS_CS_SHARDS];
	struct cfs_cs_shard *sh = __atomic_load_n(slot, __ATOMIC_ACQUIRE), *expect = NULL;

	if (__builtin_expect(sh != NULL, 1))
		return sh;
	sh = aligned_alloc(_Alignof(struct cfs_cs_shard), sizeof(*sh));
	if (!sh)
		return NULL;
	memset(sh, 0, sizeof(*sh));
	sh->op[0].latency.min_ns = UINT64_MAX;
	sh->op[1].latency.min_ns = UINT64_MAX;
	if (__atomic_compare_exchange_n(slot, &expect, sh, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		return sh;
	free(sh);
	return expect;
}

void cfs_cs_request_done(struct cfs_chunk_stats *cs, enum cfs_io_op op, int res, uint64_t bytes,
			 uint64_t latency_ns, unsigned flags)
{
	struct cfs_chunk_stats *slot = my_slot(); /* first: it sets tls_index */
	struct cfs_cs_shard *sh;

	if ((unsigned)op >= CFS_IO_OP_COUNT)
		return;
	if (cs) {
		sh = op == CFS_IO_READ || op == CFS_IO_WRITE ? my_shard(cs) : NULL;
		if (sh) {
			struct charge_to to = {
				.os = &sh->op[op],
				.err_eio = &sh->err_eio,
				.err_enospc = &sh->err_enospc,
				.err_misaligned = &sh->err_misaligned,
				.short_reads = &sh->short_reads,
				.err_other = &sh->err_other,
				.rmw_ops = &sh->rmw_ops,
			};

			charge(&to, res, bytes, latency_ns, flags);
		} else {
			charge_io(cs, op, res, bytes, latency_ns, flags);
		}
		if (flags & CFS_CS_INFLIGHT)
			cfs_gauge_down(&cs->io.inflight_now);
	}
	/* The slot has no in-flight gauge of its own: the mount's is below. */
	if (slot)
		charge_io(slot, op, res, bytes, latency_ns, flags);
	if (flags & CFS_CS_INFLIGHT)
		gauge_down(&mount_inflight);
}

void cfs_cs_open(struct cfs_chunk_stats *cs, bool direct)
{
	struct cfs_chunk_stats *slot = my_slot();
	struct cfs_chunk_stats *set[2] = {cs, slot};

	for (int i = 0; i < 2; i++) {
		if (!set[i])
			continue;
		cfs_counter_add(&set[i]->opens_total, 1);
		cfs_counter_add(direct ? &set[i]->opens_direct : &set[i]->opens_buffered, 1);
	}
	gauge_up(&mount_opens);
}

void cfs_cs_close(void)
{
	gauge_down(&mount_opens);
}
#endif /* !CFS_NO_STATS */

/* ---- lifecycle -------------------------------------------------------------------- */

void cfs_cs_mount_start(uint64_t realtime)
{
	cfs_counter_store(&mount_time, realtime);
	cfs_cs_mount_reset();
	cfs_counter_store(&mount_reset_time, realtime);
}

uint64_t cfs_cs_mount_time_ns(void)
{
	return cfs_counter_load(&mount_time);
}

struct cfs_chunk_stats *cfs_cs_new(void)
{
	struct cfs_chunk_stats *cs = calloc(1, sizeof(*cs));
	uint64_t since = cfs_counter_load(&mount_time);

	if (!cs)
		return NULL;
	cfs_io_stats_reset(&cs->io);
	/* Counting began at the mount for every chunk: one that had no I/O
	 * before now counted nothing, and rates over the same period as the
	 * mount totals add up. (Unit tests have no mount: now.) */
	if (since)
		cs->io.reset_time_ns = since;
	return cs;
}

void cfs_cs_free(struct cfs_chunk_stats *cs)
{
	if (!cs)
		return;
	for (unsigned i = 0; i < CFS_CS_SHARDS; i++)
		free(cs->shard[i]);
	free(cs);
}

static void op_reset(struct cfs_io_op_stats *os)
{
	cfs_counter_store(&os->ops, 0);
	cfs_counter_store(&os->bytes, 0);
	cfs_counter_store(&os->errors, 0);
	cfs_counter_store(&os->latency.count, 0);
	cfs_counter_store(&os->latency.sum_ns, 0);
	cfs_counter_store(&os->latency.min_ns, UINT64_MAX);
	cfs_counter_store(&os->latency.max_ns, 0);
	for (unsigned b = 0; b < CFS_HIST_BUCKETS; b++)
		cfs_counter_store(&os->latency.bucket[b], 0);
}

void cfs_cs_reset(struct cfs_chunk_stats *cs)
{
	for (unsigned i = 0; i < CFS_CS_SHARDS; i++) {
		struct cfs_cs_shard *sh = __atomic_load_n(&cs->shard[i], __ATOMIC_ACQUIRE);

		if (!sh)
			continue;
		op_reset(&sh->op[0]);
		op_reset(&sh->op[1]);
		cfs_counter_store(&sh->err_eio, 0);
		cfs_counter_store(&sh->err_enospc, 0);
		cfs_counter_store(&sh->err_misaligned, 0);
		cfs_counter_store(&sh->short_reads, 0);
		cfs_counter_store(&sh->err_other, 0);
		cfs_counter_store(&sh->rmw_ops, 0);
	}
	cfs_counter_store(&cs->short_reads, 0);
	/* Last, so reset_time moves once everything is zero. */
	cfs_io_stats_reset(&cs->io);
	cfs_counter_store(&cs->opens_total, 0);
	cfs_counter_store(&cs->opens_direct, 0);
	cfs_counter_store(&cs->opens_buffered, 0);
}

void cfs_cs_mount_reset(void)
{
	for (unsigned i = 0; i < CFS_CS_SLOTS; i++) {
		struct cfs_chunk_stats *s = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);

		if (s)
			cfs_cs_reset(s);
	}
	/* Gauges keep their value; the high-water marks restart from it. */
	cfs_counter_store(&mount_inflight.max, cfs_counter_load(&mount_inflight.now));
	cfs_counter_store(&mount_opens.max, cfs_counter_load(&mount_opens.now));
	cfs_counter_store(&mount_reset_time, realtime_ns());
}

static void hist_merge(struct cfs_latency_hist *dst, const struct cfs_latency_hist *src)
{
	uint64_t count = cfs_counter_load(&src->count), min = cfs_counter_load(&src->min_ns),
		 max = cfs_counter_load(&src->max_ns);

	dst->count += count;
	dst->sum_ns += cfs_counter_load(&src->sum_ns);
	if (count && min < dst->min_ns)
		dst->min_ns = min;
	if (count && max > dst->max_ns)
		dst->max_ns = max;
	for (unsigned b = 0; b < CFS_HIST_BUCKETS; b++)
		dst->bucket[b] += cfs_counter_load(&src->bucket[b]);
}

static void op_merge(struct cfs_io_op_stats *dst, const struct cfs_io_op_stats *src)
{
	dst->ops += cfs_counter_load(&src->ops);
	dst->bytes += cfs_counter_load(&src->bytes);
	dst->errors += cfs_counter_load(&src->errors);
	hist_merge(&dst->latency, &src->latency);
}

void cfs_cs_snapshot(const struct cfs_chunk_stats *src, struct cfs_chunk_stats *dst)
{
	if (!src) {
		memset(dst, 0, sizeof(*dst));
		for (unsigned op = 0; op < CFS_IO_OP_COUNT; op++)
			dst->io.op[op].latency.min_ns = UINT64_MAX;
		dst->io.reset_time_ns = cfs_counter_load(&mount_time);
		return;
	}
	cfs_io_stats_snapshot(&src->io, &dst->io);
	dst->opens_total = cfs_counter_load(&src->opens_total);
	dst->opens_direct = cfs_counter_load(&src->opens_direct);
	dst->opens_buffered = cfs_counter_load(&src->opens_buffered);
	dst->short_reads = cfs_counter_load(&src->short_reads);
	for (unsigned i = 0; i < CFS_CS_SHARDS; i++) {
		const struct cfs_cs_shard *sh = __atomic_load_n(&src->shard[i], __ATOMIC_ACQUIRE);

		dst->shard[i] = NULL;
		if (!sh)
			continue;
		op_merge(&dst->io.op[CFS_IO_READ], &sh->op[0]);
		op_merge(&dst->io.op[CFS_IO_WRITE], &sh->op[1]);
		dst->io.err_eio += cfs_counter_load(&sh->err_eio);
		dst->io.err_enospc += cfs_counter_load(&sh->err_enospc);
		dst->io.err_misaligned += cfs_counter_load(&sh->err_misaligned);
		dst->short_reads += cfs_counter_load(&sh->short_reads);
		dst->io.err_other += cfs_counter_load(&sh->err_other);
		dst->io.rmw_ops += cfs_counter_load(&sh->rmw_ops);
	}
}

void cfs_cs_mount_snapshot(struct cfs_chunk_stats *dst)
{
	cfs_cs_snapshot(NULL, dst);
	for (unsigned i = 0; i < CFS_CS_SLOTS; i++) {
		const struct cfs_chunk_stats *s = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);

		if (!s)
			continue;
		for (unsigned op = 0; op < CFS_IO_OP_COUNT; op++)
			op_merge(&dst->io.op[op], &s->io.op[op]);
		dst->io.err_eio += cfs_counter_load(&s->io.err_eio);
		dst->io.err_enospc += cfs_counter_load(&s->io.err_enospc);
		dst->io.err_misaligned += cfs_counter_load(&s->io.err_misaligned);
		dst->short_reads += cfs_counter_load(&s->short_reads);
		dst->io.err_other += cfs_counter_load(&s->io.err_other);
		dst->io.rmw_ops += cfs_counter_load(&s->io.rmw_ops);
		dst->opens_total += cfs_counter_load(&s->opens_total);
		dst->opens_direct += cfs_counter_load(&s->opens_direct);
		dst->opens_buffered += cfs_counter_load(&s->opens_buffered);
	}
	dst->io.inflight_now = cfs_counter_load(&mount_inflight.now);
	dst->io.inflight_max = cfs_counter_load(&mount_inflight.max);
	dst->io.reset_time_ns = cfs_counter_load(&mount_reset_time);
}

uint64_t cfs_cs_mount_opens_now(void)
{
	return cfs_counter_load(&mount_opens.now);
}

/* ---- the field table ----------------------------------------------------------------
 * One row per user.chunkfs.<name>. Scopes: C chunk, R root, B both. LC/LR:
 * listed by listxattr (getfattr -d) for a chunk / the root: the summary a
 * DBA reads; everything else is read by name (getfattr -n) or in the
 * composite "stat" line. Table order is list order and line order.
 */
enum kind {
	K_STAT,
	K_RESET,
	K_PAGESIZE,
	K_SIZE,
	K_TIME,
	K_RESET_TIME,
	K_OPS,
	K_BYTES,
	K_PAGES,
	K_OP_ERRORS,
	K_LAT_COUNT,
	K_LAT_SUM,
	K_LAT_MIN,
	K_LAT_MAX,
	K_LAT_AVG,
	K_LAT_P50,
	K_LAT_P90,
	K_LAT_P99,
	K_LAT_P999,
	K_HIST,
	K_OPENS,
	K_OPENS_TOTAL,
	K_OPENS_DIRECT,
	K_OPENS_BUFFERED,
	K_INFLIGHT,
	K_INFLIGHT_MAX,
	K_ERRORS,
	K_ERR_EIO,
	K_ERR_ENOSPC,
	K_ERR_MISALIGNED,
	K_SHORT_READS,
	K_ERR_OTHER,
	K_RMW,
	K_SOURCE,
	K_BACKEND,
	K_STORE_BYTES,
	K_DATA_BYTES,
	K_FREE_BYTES,
	K_BLOCK_BYTES,
	K_SECTOR_BYTES,
	K_PSECTOR_BYTES,
	K_DIO_ALIGN,
	K_DIO_ENFORCED,
	K_READONLY,
	K_MOUNT_TIME,
};

#define C (CFS_CS_CHUNK | CFS_CS_READABLE | CFS_CS_IN_LINE)
#define R (CFS_CS_ROOT | CFS_CS_READABLE | CFS_CS_IN_LINE)
#define B (C | R)
#define LC CFS_CS_LISTED_CHUNK
#define LR CFS_CS_LISTED_ROOT
#define BYNAME (CFS_CS_CHUNK | CFS_CS_ROOT | CFS_CS_READABLE) /* not in the line */

/* The per-op latency rows, for op prefix P ("read") and operation O. */
#define LAT_ROWS(P, O, LIST_AVG, LIST_P99)                                                         \
	X(P "_lat_count", B, K_LAT_COUNT, O)                                                       \
	X(P "_lat_sum_us", B, K_LAT_SUM, O)                                                        \
	X(P "_lat_min_us", B, K_LAT_MIN, O)                                                        \
	X(P "_lat_max_us", B, K_LAT_MAX, O)                                                        \
	X(P "_lat_avg_us", B | (LIST_AVG), K_LAT_AVG, O)                                           \
	X(P "_lat_p50_us", B, K_LAT_P50, O)                                                        \
	X(P "_lat_p90_us", B, K_LAT_P90, O)                                                        \
	X(P "_lat_p99_us", B | (LIST_P99), K_LAT_P99, O)                                           \
	X(P "_lat_p999_us", B, K_LAT_P999, O)                                                      \
	X(P "_hist", BYNAME, K_HIST, O)

#define FIELDS                                                                                     \
	X("source", R | LR, K_SOURCE, 0)                                                           \
	X("backend", R | LR, K_BACKEND, 0)                                                         \
	X("store_bytes", R | LR, K_STORE_BYTES, 0)                                                 \
	X("data_bytes", R, K_DATA_BYTES, 0)                                                        \
	X("free_bytes", R | LR, K_FREE_BYTES, 0)                                                   \
	X("block_bytes", R | LR, K_BLOCK_BYTES, 0)                                                 \
	X("sector_bytes", R | LR, K_SECTOR_BYTES, 0)                                               \
	X("physical_sector_bytes", R, K_PSECTOR_BYTES, 0)                                          \
	X("dio_align_bytes", R | LR, K_DIO_ALIGN, 0)                                               \
	X("dio_align_enforced", R, K_DIO_ENFORCED, 0)                                              \
	X("readonly", R | LR, K_READONLY, 0)                                                       \
	X("mount_time", R | LR, K_MOUNT_TIME, 0)                                                   \
	X("pagesize", C | LC | CFS_CS_WRITABLE, K_PAGESIZE, 0)                                     \
	X("size", C, K_SIZE, 0)                                                                    \
	X("reads", B | LC | LR, K_OPS, CFS_IO_READ)                                                \
	X("read_bytes", B | LC | LR, K_BYTES, CFS_IO_READ)                                         \
	X("page_reads", C | LC, K_PAGES, CFS_IO_READ)                                              \
	X("read_errors", B, K_OP_ERRORS, CFS_IO_READ)                                              \
	LAT_ROWS("read", CFS_IO_READ, LC | LR, LC)                                                 \
	X("writes", B | LC | LR, K_OPS, CFS_IO_WRITE)                                              \
	X("write_bytes", B | LC | LR, K_BYTES, CFS_IO_WRITE)                                       \
	X("page_writes", C | LC, K_PAGES, CFS_IO_WRITE)                                            \
	X("write_errors", B, K_OP_ERRORS, CFS_IO_WRITE)                                            \
	LAT_ROWS("write", CFS_IO_WRITE, LC | LR, LC)                                               \
	X("fsyncs", B | LC | LR, K_OPS, CFS_IO_FLUSH)                                              \
	X("fsync_errors", B, K_OP_ERRORS, CFS_IO_FLUSH)                                            \
	LAT_ROWS("fsync", CFS_IO_FLUSH, LC, 0)                                                     \
	X("discards", B, K_OPS, CFS_IO_DISCARD)                                                    \
	X("discard_bytes", B, K_BYTES, CFS_IO_DISCARD)                                             \
	X("discard_errors", B, K_OP_ERRORS, CFS_IO_DISCARD)                                        \
	LAT_ROWS("discard", CFS_IO_DISCARD, 0, 0)                                                  \
	X("opens", B | LC, K_OPENS, 0)                                                             \
	X("opens_total", B, K_OPENS_TOTAL, 0)                                                      \
	X("opens_direct", B, K_OPENS_DIRECT, 0)                                                    \
	X("opens_buffered", B, K_OPENS_BUFFERED, 0)                                                \
	X("inflight", B, K_INFLIGHT, 0)                                                            \
	X("inflight_max", B | LC, K_INFLIGHT_MAX, 0)                                               \
	X("errors", B | LC | LR, K_ERRORS, 0)                                                      \
	X("err_eio", B, K_ERR_EIO, 0)                                                              \
	X("err_enospc", B, K_ERR_ENOSPC, 0)                                                        \
	X("err_misaligned", B, K_ERR_MISALIGNED, 0)                                                \
	X("short_reads", B, K_SHORT_READS, 0)                                                      \
	X("err_other", B, K_ERR_OTHER, 0)                                                          \
	X("rmw", B, K_RMW, 0)                                                                      \
	X("time", B, K_TIME, 0)                                                                    \
	X("reset_time", B | LC | LR, K_RESET_TIME, 0)                                              \
	X("stat", BYNAME, K_STAT, 0)                                                               \
	X("reset", CFS_CS_CHUNK | CFS_CS_ROOT | CFS_CS_WRITABLE, K_RESET, 0)

#define X(name, flags, kind, op) {name, flags},
static const struct cfs_cs_field field_table[] = {FIELDS};
#undef X
#define X(name, flags, kind, op) {kind, op},
static const struct {
	uint8_t kind;
	uint8_t op;
} field_info[] = {FIELDS};
#undef X

#define FIELD_COUNT (sizeof(field_table) / sizeof(field_table[0]))

static unsigned field_id(const struct cfs_cs_field *f)
{
	return (unsigned)(f - field_table);
}

const struct cfs_cs_field *cfs_cs_fields(size_t *count)
{
	*count = FIELD_COUNT;
	return field_table;
}

const struct cfs_cs_field *cfs_cs_field_find(const char *name, bool root)
{
	unsigned scope = root ? CFS_CS_ROOT : CFS_CS_CHUNK;

	for (unsigned i = 0; i < FIELD_COUNT; i++)
		if ((field_table[i].flags & scope) && strcmp(field_table[i].name, name) == 0)
			return &field_table[i];
	return NULL;
}

/* ---- rendering ---------------------------------------------------------------------- */

uint64_t cfs_cs_ns_to_us(uint64_t ns)
{
	return ns / 1000u + (ns % 1000u >= 500u);
}

size_t cfs_cs_format_time(uint64_t ns, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%" PRIu64 ".%06" PRIu64, ns / 1000000000u,
			 ns % 1000000000u / 1000u);

	return n < 0 ? 0 : (size_t)n;
}

static bool plain_byte(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '=' && c != '%';
}

size_t cfs_cs_escape(const char *s, char *buf, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (plain_byte(c)) {
			if (n + 1 < size)
				buf[n] = (char)c;
			n++;
			continue;
		}
		if (n + 3 < size) {
			buf[n] = '%';
			buf[n + 1] = hex[c >> 4];
			buf[n + 2] = hex[c & 15];
		}
		n += 3;
	}
	if (size)
		buf[n < size ? n : size - 1] = '\0';
	return n;
}

/* Percentile of a live or copied histogram, 0 when empty. */
static uint64_t pct_us(const struct cfs_latency_hist *h, double fraction)
{
	return cfs_cs_ns_to_us(cfs_hist_percentile_ns(h, fraction));
}

/* The average, kept within [min, max]: sum and count are copied apart. */
static uint64_t avg_us(const struct cfs_latency_hist *h)
{
	uint64_t avg;

	if (!h->count)
		return 0;
	avg = h->sum_ns / h->count;
	if (avg > h->max_ns)
		avg = h->max_ns;
	if (avg < h->min_ns)
		avg = h->min_ns;
	return cfs_cs_ns_to_us(avg);
}

size_t cfs_cs_render_hist(const struct cfs_latency_hist *h, char *buf, size_t size)
{
	size_t n = 0;

	if (size)
		buf[0] = '\0';
	for (unsigned b = 0; b < CFS_HIST_BUCKETS; b++) {
		uint64_t count = cfs_counter_load(&h->bucket[b]);
		int w;

		if (!count)
			continue;
		w = snprintf(n < size ? buf + n : NULL, n < size ? size - n : 0,
			     "%s%" PRIu64 ":%" PRIu64, n ? " " : "", cfs_hist_bucket_upper_ns(b),
			     count);
		n += (size_t)w;
	}
	return n;
}

static uint64_t errors_total(const struct cfs_io_stats *io)
{
	return io->err_eio + io->err_enospc + io->err_misaligned + io->err_other;
}

/* A numeric value, or UINT64_MAX with *text set for strings and times. */
static uint64_t field_number(const struct cfs_cs_view *v, unsigned id, const char **text,
			     bool *is_time)
{
	const struct cfs_io_stats *io = &v->snap.io;
	const struct cfs_io_op_stats *os = &io->op[field_info[id].op];
	const struct cfs_latency_hist *h = &os->latency;

	*text = NULL;
	*is_time = false;
	switch (field_info[id].kind) {
	case K_PAGESIZE:
		return v->page_size_bytes;
	case K_SIZE:
		return v->size_bytes;
	case K_TIME:
		*is_time = true;
		return v->now_ns;
	case K_RESET_TIME:
		*is_time = true;
		return io->reset_time_ns;
	case K_MOUNT_TIME:
		*is_time = true;
		return v->mount_time_ns;
	case K_OPS:
		return os->ops;
	case K_BYTES:
		return os->bytes;
	case K_PAGES:
		return v->page_size_bytes ? os->bytes / v->page_size_bytes : 0;
	case K_OP_ERRORS:
		return os->errors;
	case K_LAT_COUNT:
		return h->count;
	case K_LAT_SUM:
		return cfs_cs_ns_to_us(h->sum_ns);
	case K_LAT_MIN:
		return h->count ? cfs_cs_ns_to_us(h->min_ns) : 0;
	case K_LAT_MAX:
		return cfs_cs_ns_to_us(h->max_ns);
	case K_LAT_AVG:
		return avg_us(h);
	case K_LAT_P50:
		return pct_us(h, 0.50);
	case K_LAT_P90:
		return pct_us(h, 0.90);
	case K_LAT_P99:
		return pct_us(h, 0.99);
	case K_LAT_P999:
		return pct_us(h, 0.999);
	case K_OPENS:
		return v->opens_now;
	case K_OPENS_TOTAL:
		return v->snap.opens_total;
	case K_OPENS_DIRECT:
		return v->snap.opens_direct;
	case K_OPENS_BUFFERED:
		return v->snap.opens_buffered;
	case K_INFLIGHT:
		return io->inflight_now;
	case K_INFLIGHT_MAX:
		return io->inflight_max;
	case K_ERRORS:
		return errors_total(io);
	case K_ERR_EIO:
		return io->err_eio;
	case K_ERR_ENOSPC:
		return io->err_enospc;
	case K_ERR_MISALIGNED:
		return io->err_misaligned;
	case K_SHORT_READS:
		return v->snap.short_reads;
	case K_ERR_OTHER:
		return io->err_other;
	case K_RMW:
		return io->rmw_ops;
	case K_SOURCE:
		*text = v->source ? v->source : "";
		return UINT64_MAX;
	case K_BACKEND:
		*text = v->backend ? v->backend : "";
		return UINT64_MAX;
	case K_STORE_BYTES:
		return v->store_bytes;
	case K_DATA_BYTES:
		return v->data_bytes;
	case K_FREE_BYTES:
		return v->free_bytes;
	case K_BLOCK_BYTES:
		return v->block_bytes;
	case K_SECTOR_BYTES:
		return v->sector_bytes;
	case K_PSECTOR_BYTES:
		return v->physical_sector_bytes;
	case K_DIO_ALIGN:
		return v->dio_align_bytes;
	case K_DIO_ENFORCED:
		return v->dio_align_enforced;
	case K_READONLY:
		return v->readonly;
	default:
		*text = "";
		return UINT64_MAX;
	}
}

size_t cfs_cs_render_field(const struct cfs_cs_view *v, const struct cfs_cs_field *f, char *buf,
			   size_t size)
{
	const char *text;
	bool is_time;
	uint64_t value;
	int n;

	switch (field_info[field_id(f)].kind) {
	case K_STAT:
		return cfs_cs_render_line(v, buf, size);
	case K_HIST:
		return cfs_cs_render_hist(&v->snap.io.op[field_info[field_id(f)].op].latency, buf,
					  size);
	default:
		break;
	}
	value = field_number(v, field_id(f), &text, &is_time);
	if (is_time)
		return cfs_cs_format_time(value, buf, size);
	if (text)
		n = snprintf(buf, size, "%s", text); /* getfattr -n shows it raw */
	else
		n = snprintf(buf, size, "%" PRIu64, value);
	return n < 0 ? 0 : (size_t)n;
}

size_t cfs_cs_render_line(const struct cfs_cs_view *v, char *buf, size_t size)
{
	unsigned scope = v->root ? CFS_CS_ROOT : CFS_CS_CHUNK;
	size_t n = 0;

	if (size)
		buf[0] = '\0';
	for (unsigned i = 0; i < FIELD_COUNT; i++) {
		const struct cfs_cs_field *f = &field_table[i];
		const char *text;
		bool is_time;
		uint64_t value;
		char num[32];
		size_t room;
		int w;

		if (!(f->flags & scope) || !(f->flags & CFS_CS_IN_LINE))
			continue;
		value = field_number(v, i, &text, &is_time);
		if (is_time)
			cfs_cs_format_time(value, num, sizeof(num));
		else if (!text)
			snprintf(num, sizeof(num), "%" PRIu64, value);
		room = n < size ? size - n : 0;
		w = snprintf(room ? buf + n : NULL, room, "%s%s=", n ? " " : "", f->name);
		n += (size_t)w;
		room = n < size ? size - n : 0;
		if (text)
			n += cfs_cs_escape(text, room ? buf + n : NULL, room);
		else
			n += (size_t)snprintf(room ? buf + n : NULL, room, "%s", num);
	}
	return n;
}

size_t cfs_cs_list(bool root, bool hidden, char *buf, size_t size)
{
	unsigned listed = root ? CFS_CS_LISTED_ROOT : CFS_CS_LISTED_CHUNK;
	size_t n = 0;

	if (hidden)
		return 0;
	for (unsigned i = 0; i < FIELD_COUNT; i++) {
		size_t len;

		if (!(field_table[i].flags & listed))
			continue;
		len = CFS_CS_PREFIX_BYTES + strlen(field_table[i].name) + 1;
		if (n + len <= size) {
			memcpy(buf + n, CFS_CS_PREFIX, CFS_CS_PREFIX_BYTES);
			memcpy(buf + n + CFS_CS_PREFIX_BYTES, field_table[i].name,
			       len - CFS_CS_PREFIX_BYTES);
		}
		n += len;
	}
	return n;
}

/* ---- parsing ------------------------------------------------------------------------ */

int cfs_cs_parse_hist(const char *text, struct cfs_latency_hist *out)
{
	const char *p = text;

	memset(out, 0, sizeof(*out));
	out->max_ns = UINT64_MAX;
	while (*p) {
		unsigned long long upper, count;
		unsigned b;
		char *end;

		while (*p == ' ')
			p++;
		if (!*p)
			break;
		errno = 0;
		upper = strtoull(p, &end, 10);
		if (errno || end == p || *end != ':')
			return -EINVAL;
		p = end + 1;
		count = strtoull(p, &end, 10);
		if (errno || end == p || (*end && *end != ' '))
			return -EINVAL;
		p = end;
		b = cfs_hist_bucket(upper);
		if (cfs_hist_bucket_upper_ns(b) != upper)
			return -EINVAL;
		out->bucket[b] += count;
		out->count += count;
	}
	return 0;
}

void cfs_cs_hist_delta(const struct cfs_latency_hist *after, const struct cfs_latency_hist *before,
		       struct cfs_latency_hist *delta)
{
	memset(delta, 0, sizeof(*delta));
	delta->max_ns = UINT64_MAX;
	for (unsigned b = 0; b < CFS_HIST_BUCKETS; b++) {
		uint64_t d = after->bucket[b] >= before->bucket[b]
				     ? after->bucket[b] - before->bucket[b]
				     : after->bucket[b];

		delta->bucket[b] = d;
		delta->count += d;
	}
}

bool cfs_cs_line_get(const char *line, const char *key, char *out, size_t out_size)
{
	size_t key_length = strlen(key);
	const char *p = line;

	while (p && *p) {
		if (strncmp(p, key, key_length) == 0 && p[key_length] == '=') {
			size_t n = 0;

			for (p += key_length + 1; *p && *p != ' '; p++) {
				char c = *p;

				if (c == '%' && cfs_hex_value(p[1]) >= 0 &&
				    cfs_hex_value(p[2]) >= 0) {
					c = (char)(cfs_hex_value(p[1]) << 4 | cfs_hex_value(p[2]));
					p += 2;
				}
				if (n + 1 >= out_size)
					return false;
				out[n++] = c;
			}
			if (!out_size)
				return false;
			out[n] = '\0';
			return true;
		}
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return false;
}

bool cfs_cs_line_u64(const char *line, const char *key, uint64_t *out)
{
	char value[32], *end;

	if (!cfs_cs_line_get(line, key, value, sizeof(value)) || !value[0])
		return false;
	errno = 0;
	*out = strtoull(value, &end, 10);
	return !errno && !*end;
}

bool cfs_cs_line_double(const char *line, const char *key, double *out)
{
	char value[48], *end;

	if (!cfs_cs_line_get(line, key, value, sizeof(value)) || !value[0])
		return false;
	*out = strtod(value, &end);
	return !*end;
}

/* ---- the size-probe cache ---------------------------------------------------------------
 * Set-associative: a key hashes to a set of PROBE_WAYS entries under one
 * mutex, and a probe takes the entry of the same key, else a free or expired
 * one, else the oldest. Entries live from a probe to the read right after
 * it, so a set is rarely full; a direct-mapped table lost one pair in twenty
 * to collisions with four concurrent readers (stats_race.sh).
 */
#define PROBE_WAYS 4u
#define PROBE_SETS (CFS_CS_PROBE_SLOTS / PROBE_WAYS)
_Static_assert(CFS_CS_PROBE_SLOTS % PROBE_WAYS == 0, "whole sets");

struct probe_entry {
	struct cfs_cs_probe_key key;
	uint64_t expires_ns; /* 0: empty */
	size_t length;
	size_t capacity;
	char *text; /* grows to the largest value cached here, then is reused */
};

struct probe_set {
	pthread_mutex_t lock;
	struct probe_entry way[PROBE_WAYS];
};

static struct probe_set probe_sets[PROBE_SETS] = {
	[0 ... PROBE_SETS - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER},
};

static struct probe_set *probe_set_of(const struct cfs_cs_probe_key *key)
{
	uint64_t h = key->tid * 0x9E3779B97F4A7C15ull ^ key->ino * 0xC2B2AE3D27D4EB4Full ^
		     key->field * 0x165667B19E3779F9ull;

	return &probe_sets[(h >> 32) % PROBE_SETS];
}

static bool probe_key_eq(const struct cfs_cs_probe_key *a, const struct cfs_cs_probe_key *b)
{
	return a->tid == b->tid && a->ino == b->ino && a->field == b->field;
}

/* [set lock] The live entry of key, or NULL; expired entries are emptied. */
static struct probe_entry *probe_find(struct probe_set *set, const struct cfs_cs_probe_key *key,
				      uint64_t now_ns)
{
	struct probe_entry *found = NULL;

	for (unsigned w = 0; w < PROBE_WAYS; w++) {
		struct probe_entry *e = &set->way[w];

		if (e->expires_ns && now_ns >= e->expires_ns)
			e->expires_ns = 0;
		if (e->expires_ns && probe_key_eq(&e->key, key))
			found = e;
	}
	return found;
}

int cfs_cs_probe_put(const struct cfs_cs_probe_key *key, const char *text, size_t length,
		     uint64_t now_ns)
{
	struct probe_set *set = probe_set_of(key);
	struct probe_entry *e;
	int ret = 0;

	pthread_mutex_lock(&set->lock);
	e = probe_find(set, key, now_ns);
	if (!e) {
		/* A free entry, else the oldest (all are live). */
		e = &set->way[0];
		for (unsigned w = 0; w < PROBE_WAYS; w++) {
			if (!set->way[w].expires_ns) {
				e = &set->way[w];
				break;
			}
			if (set->way[w].expires_ns < e->expires_ns)
				e = &set->way[w];
		}
	}
	if (length > e->capacity) {
		char *bigger = realloc(e->text, length);

		if (!bigger) {
			e->expires_ns = 0;
			ret = -ENOMEM;
			goto out_unlock;
		}
		e->text = bigger;
		e->capacity = length;
	}
	if (length)
		memcpy(e->text, text, length);
	e->length = length;
	e->key = *key;
	e->expires_ns = now_ns + CFS_CS_PROBE_TTL_NS;
out_unlock:
	pthread_mutex_unlock(&set->lock);
	return ret;
}

ssize_t cfs_cs_probe_take(const struct cfs_cs_probe_key *key, char *buf, size_t size,
			  uint64_t now_ns)
{
	struct probe_set *set = probe_set_of(key);
	struct probe_entry *e;
	ssize_t ret = -1;

	pthread_mutex_lock(&set->lock);
	e = probe_find(set, key, now_ns);
	if (e && e->length <= size) {
		if (e->length)
			memcpy(buf, e->text, e->length);
		ret = (ssize_t)e->length;
		e->expires_ns = 0;
	}
	pthread_mutex_unlock(&set->lock);
	return ret;
}

void cfs_cs_probe_clear(void)
{
	for (unsigned i = 0; i < PROBE_SETS; i++) {
		struct probe_set *set = &probe_sets[i];

		pthread_mutex_lock(&set->lock);
		for (unsigned w = 0; w < PROBE_WAYS; w++) {
			free(set->way[w].text);
			memset(&set->way[w], 0, sizeof(set->way[w]));
		}
		pthread_mutex_unlock(&set->lock);
	}
}
