// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * backend_fault.c — backend "fault": a decorator for tests that wraps any
 * data backend (e2fsprogs' test_io, SQLite's countdown faults) and injects
 * errors, short transfers, latency and power loss, so the daemon's error
 * paths and crash recovery can be exercised on demand.
 *
 * Spec (cfg->fault_spec, or cfs_io_fault_arm() at run time): rules separated
 * by ';', each a list of key=value separated by ','. No spaces.
 *
 *   target keys (any rule may carry them; they apply to the whole target):
 *     inner=NAME     the wrapped backend: uring | ram | null (default:
 *                    cfg->backend); opened with cfs_io_open(), fault_spec
 *                    cleared
 *     volatile=0|1   power-loss mode: writes stay in an in-memory overlay
 *                    until a FLUSH completes (see below)
 *     torn=0|1       cfs_io_fault_crash() tears even when asked not to
 *                    (implies volatile=1)
 *     seed=N         seed of the torn-crash choice (default 1)
 *     overlay_mb=N   overlay capacity (default 64)
 *   rule keys (a rule fires on its Nth matching request, once, or on every
 *   Nth with every=1):
 *     op=read|write|flush|discard|zero|any    (default any)
 *     nth=N          N >= 1 (default 1)
 *     every=0|1      repeat on every Nth match (default 0: once)
 *     err=EIO|ENOSPC|EROFS|ENOMEM|EINVAL|EAGAIN|N   complete with -err;
 *                    the wrapped backend never sees the request
 *     short=BYTES    READ/WRITE: transfer only BYTES (rounded down to the
 *                    sector) on the first try; the rest is resubmitted and
 *                    counted in stats->short_retries, as a real backend does
 *     delay_us=N     complete no earlier than N µs after queueing (in
 *                    power-loss mode a delayed write enters the log only
 *                    then: until it completes, flushes and reads do not
 *                    see it, and delayed writes land in completion order)
 *
 *   e.g. "inner=uring,op=write,nth=3,err=EIO"
 *        "op=read,every=1,delay_us=200;op=flush,nth=2,err=EIO"
 *        "volatile=1,seed=7"
 *
 * Rules are checked in order for every request; the first error or short
 * that fires wins, delays add up. A rule's counter counts requests of its op,
 * resubmissions excluded, so "nth=3" hits exactly the third one.
 *
 * Power loss (volatile=1): a completed WRITE/ZERO/DISCARD is appended to a
 * redo log (data copied) instead of reaching the wrapped store; a READ goes
 * to the wrapped store and is patched with the log on completion. A FLUSH
 * applies the log to the wrapped store in order, flushes it, and only then
 * completes. cfs_io_fault_crash() drops the log (or, torn, first applies a
 * random subset of its physical sectors, each sector whole and newest), so
 * after a "crash" every unflushed sector reads back old or new. A DISCARD in
 * the log reads back as zeros. When the log is full it is written back early
 * (as a drive's cache may), which makes those writes survive a crash; if
 * reads in flight still pin it, the new write goes straight to the store.
 * Closing the target drops what was never flushed, like a power loss
 * without tearing (the daemon flushes before a clean unmount).
 *
 * Each outer request travels as a shadow request (stats = NULL) on an inner
 * queue, from a pool sized at queue_init (2 x depth: requests resumed from a
 * range lock may exceed depth); the outer request is charged once, by
 * cfs_ioq_complete() on the outer queue. No allocation per request.
 *
 * What this file is not: fast. Every request takes one mutex per target (the
 * rule counters), and a FLUSH in volatile mode writes the log back
 * synchronously on the submitting thread. It is for tests; the daemon never
 * opens it unless a test asks.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "fs/base/counter.h"
#include "iopath/backend.h"

#define FAULT_RULES_MAX 16u
#define FAULT_SPEC_MAX 1024u
#define FAULT_OVERLAY_MB 64u
#define FAULT_LOG_ALIGN 4096u /* log data is aligned for any inner target */
#define FAULT_POLL_NS 50000u  /* reap's sleep while a delay runs out */
#define FAULT_APPLY_DEPTH 4u

enum { OP_ANY = CFS_IO_OP_COUNT };

struct fault_rule {
	unsigned op; /* enum cfs_io_op or OP_ANY */
	uint64_t nth;
	bool every;
	int err; /* positive errno, 0 = none */
	uint32_t short_bytes;
	uint64_t delay_ns;
	uint64_t seen; /* matching requests so far */
	bool spent;    /* a once-rule that fired */
};

struct fault_spec {
	char inner[16];	     /* "" = cfg->backend */
	int volatile_mode;   /* -1 = not given */
	int torn;	     /* -1 = not given */
	int64_t seed;	     /* -1 = not given */
	unsigned overlay_mb; /* 0 = not given */
	unsigned nrules;
	struct fault_rule rule[FAULT_RULES_MAX];
};

/* One redo-log record: a completed write (data in the log) or zeroing. */
struct log_rec {
	uint64_t offset_bytes;
	uint32_t length_bytes;
	bool zero;	      /* ZERO/DISCARD: no data */
	size_t data_at;	      /* into log_data, aligned; for zero records,
			       * the fill level at append time rounded up
			       * (keeps it monotone; may exceed log_used) */
	uint64_t applied_gen; /* 0: only in the log; else the generation
			       * whose write-back put it in the store */
};

struct fault_target {
	struct cfs_io *inner;
	pthread_mutex_t lock; /* rules, overlay: every request takes it */
	struct fault_rule rule[FAULT_RULES_MAX];
	unsigned nrules;
	bool volatile_mode;
	bool torn;
	uint64_t seed;
	uint64_t crashes;
	char name[32]; /* "fault(ram)" */
	/* Power-loss overlay, allocated when volatile mode is first armed. */
	struct cfs_ioq *apply_q; /* private inner queue for write-back */
	struct log_rec *log;
	unsigned log_count, log_cap;
	uint8_t *log_data;
	size_t log_used, log_data_bytes;
	uint64_t gen;		   /* advances by 2 per write-back */
	struct shadow *reads_head; /* volatile reads between submit and patch, */
	struct shadow *reads_tail; /* oldest first: read_gen never decreases */
	uint8_t *sector_buf;	   /* one physical sector for torn crashes */
};

struct shadow {
	struct cfs_io_req inner; /* goes to the wrapped backend */
	struct cfs_io_req *outer;
	uint64_t deadline_ns; /* complete no earlier (0 = now) */
	uint64_t read_gen;    /* volatile READ: generation at submit */
	int res;
	bool patch;		      /* volatile READ: patch with the log */
	bool append_late;	      /* volatile delayed write: log it when it completes */
	struct shadow *next;	      /* free, ready or delayed list */
	struct shadow *rprev, *rnext; /* ft->reads_* while patch is set */
};

struct fault_queue {
	struct cfs_ioq *inner_q;
	pthread_mutex_t lock; /* the lists below: submitter vs reaper */
	struct shadow *shadows;
	unsigned nshadows;
	struct shadow *free;
	struct shadow *ready, **ready_tail; /* completed, in order */
	struct shadow *delayed;		    /* completed, waiting for their deadline */
	unsigned outstanding;		    /* handed out and not yet completed */
	atomic_uint staged;
};

/* ---- spec parsing ---------------------------------------------------------- */

static int parse_u64(const char *v, uint64_t *out)
{
	char *end;
	unsigned long long n;

	if (!*v || *v == '-')
		return -EINVAL;
	errno = 0;
	n = strtoull(v, &end, 0);
	if (errno || *end)
		return -EINVAL;
	*out = n;
	return 0;
}

static int parse_bool(const char *v, int *out)
{
	if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0) {
		*out = *v == '1';
		return 0;
	}
	return -EINVAL;
}

static int parse_errno(const char *v, int *out)
{
	static const struct {
		const char *name;
		int err;
	} names[] = {
		{"EIO", EIO},	    {"ENOSPC", ENOSPC}, {"EROFS", EROFS},
		{"ENOMEM", ENOMEM}, {"EINVAL", EINVAL}, {"EAGAIN", EAGAIN},
	};
	uint64_t n;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(v, names[i].name) == 0) {
			*out = names[i].err;
			return 0;
		}
	if (parse_u64(v, &n) || n == 0 || n > 4095)
		return -EINVAL;
	*out = (int)n;
	return 0;
}

static int parse_op(const char *v, unsigned *out)
{
	static const char *const names[] = {
		[CFS_IO_READ] = "read",	      [CFS_IO_WRITE] = "write", [CFS_IO_FLUSH] = "flush",
		[CFS_IO_DISCARD] = "discard", [CFS_IO_ZERO] = "zero",	[OP_ANY] = "any",
	};
	unsigned i;

	for (i = 0; i <= OP_ANY; i++)
		if (strcmp(v, names[i]) == 0) {
			*out = i;
			return 0;
		}
	return -EINVAL;
}

/* One key=value into spec / rule. */
static int parse_item(const char *key, const char *v, struct fault_spec *spec,
		      struct fault_rule *rule, bool *is_rule)
{
	uint64_t n;
	int b;

	if (strcmp(key, "inner") == 0) {
		if (!*v || strlen(v) >= sizeof(spec->inner))
			return -EINVAL;
		strcpy(spec->inner, v);
	} else if (strcmp(key, "volatile") == 0) {
		if (parse_bool(v, &b))
			return -EINVAL;
		spec->volatile_mode = b;
	} else if (strcmp(key, "torn") == 0) {
		if (parse_bool(v, &b))
			return -EINVAL;
		spec->torn = b;
	} else if (strcmp(key, "seed") == 0) {
		if (parse_u64(v, &n) || n > INT64_MAX)
			return -EINVAL;
		spec->seed = (int64_t)n;
	} else if (strcmp(key, "overlay_mb") == 0) {
		if (parse_u64(v, &n) || n == 0 || n > 65536)
			return -EINVAL;
		spec->overlay_mb = (unsigned)n;
	} else if (strcmp(key, "op") == 0) {
		*is_rule = true;
		return parse_op(v, &rule->op);
	} else if (strcmp(key, "nth") == 0) {
		*is_rule = true;
		if (parse_u64(v, &n) || n == 0)
			return -EINVAL;
		rule->nth = n;
	} else if (strcmp(key, "every") == 0) {
		*is_rule = true;
		if (parse_bool(v, &b))
			return -EINVAL;
		rule->every = b;
	} else if (strcmp(key, "err") == 0) {
		*is_rule = true;
		return parse_errno(v, &rule->err);
	} else if (strcmp(key, "short") == 0) {
		*is_rule = true;
		if (parse_u64(v, &n) || n == 0 || n >= CFS_IO_LENGTH_MAX)
			return -EINVAL;
		rule->short_bytes = (uint32_t)n;
	} else if (strcmp(key, "delay_us") == 0) {
		*is_rule = true;
		if (parse_u64(v, &n) || n > 60000000)
			return -EINVAL;
		rule->delay_ns = n * 1000;
	} else {
		return -EINVAL;
	}
	return 0;
}

/*
 * Parse a spec (syntax at the top of this file). Every mistake is printed
 * with the offending item; returns 0 or -EINVAL.
 */
static int fault_parse(const char *text, struct fault_spec *spec)
{
	char buf[FAULT_SPEC_MAX], *rule_save, *item_save, *rule_text, *item;
	int bad = 0;

	memset(spec, 0, sizeof(*spec));
	spec->volatile_mode = -1;
	spec->torn = -1;
	spec->seed = -1;
	if (!text || strlen(text) >= sizeof(buf)) {
		fprintf(stderr, "chunkfs: fault spec: missing or longer than %u bytes\n",
			FAULT_SPEC_MAX - 1);
		return -EINVAL;
	}
	strcpy(buf, text);
	for (rule_text = strtok_r(buf, ";", &rule_save); rule_text;
	     rule_text = strtok_r(NULL, ";", &rule_save)) {
		struct fault_rule rule = {.op = OP_ANY, .nth = 1};
		bool is_rule = false;

		for (item = strtok_r(rule_text, ",", &item_save); item;
		     item = strtok_r(NULL, ",", &item_save)) {
			char *eq = strchr(item, '=');

			if (!eq) {
				fprintf(stderr, "chunkfs: fault spec: '%s' is not key=value\n",
					item);
				bad = 1;
				continue;
			}
			*eq = '\0';
			if (parse_item(item, eq + 1, spec, &rule, &is_rule)) {
				fprintf(stderr, "chunkfs: fault spec: bad item '%s=%s'\n", item,
					eq + 1);
				bad = 1;
			}
		}
		if (!is_rule)
			continue;
		if (!rule.err && !rule.short_bytes && !rule.delay_ns) {
			fprintf(stderr,
				"chunkfs: fault spec: a rule needs err=, short= or delay_us=\n");
			bad = 1;
			continue;
		}
		if (spec->nrules == FAULT_RULES_MAX) {
			fprintf(stderr, "chunkfs: fault spec: more than %u rules\n",
				FAULT_RULES_MAX);
			bad = 1;
			continue;
		}
		spec->rule[spec->nrules++] = rule;
	}
	if (spec->torn == 1)
		spec->volatile_mode = 1;
	return bad ? -EINVAL : 0;
}

/* ---- rules ----------------------------------------------------------------- */

struct verdict {
	int err;
	uint32_t short_bytes;
	uint64_t delay_ns;
};

/* Count req against every rule (ft->lock held) and say what to do to it. */
static struct verdict rules_apply(struct fault_target *ft, const struct cfs_io_req *req)
{
	struct verdict v = {0};
	unsigned i;

	for (i = 0; i < ft->nrules; i++) {
		struct fault_rule *r = &ft->rule[i];
		bool fire;

		if (r->spent || (r->op != OP_ANY && r->op != req->op))
			continue;
		r->seen++;
		fire = r->every ? r->seen % r->nth == 0 : r->seen == r->nth;
		if (!fire)
			continue;
		if (!r->every)
			r->spent = true;
		v.delay_ns += r->delay_ns;
		if (v.err || v.short_bytes)
			continue;
		if (r->err)
			v.err = r->err;
		else if (r->short_bytes && (req->op == CFS_IO_READ || req->op == CFS_IO_WRITE))
			v.short_bytes = r->short_bytes;
	}
	return v;
}

/* ---- the power-loss overlay (ft->lock held throughout) ----------------------- */

static int overlay_alloc(struct fault_target *ft, unsigned overlay_mb)
{
	struct cfs_ioq_config qcfg = {.depth = FAULT_APPLY_DEPTH};
	uint32_t psec = ft->inner->geo.physical_sector_bytes;
	void *mem;
	int ret;

	if (ft->log_data)
		return 0;
	ft->log_data_bytes = (size_t)overlay_mb << 20;
	ft->log_cap = (unsigned)(ft->log_data_bytes / 512);
	ft->log = calloc(ft->log_cap, sizeof(*ft->log));
	if (!ft->log)
		return -ENOMEM;
	mem = mmap(NULL, ft->log_data_bytes, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED) {
		ret = -errno;
		goto out_log;
	}
	ft->log_data = mem;
	ret = posix_memalign(&mem, FAULT_LOG_ALIGN, psec);
	if (ret) {
		ret = -ret;
		goto out_unmap;
	}
	ft->sector_buf = mem;
	ret = cfs_ioq_create(ft->inner, &qcfg, &ft->apply_q);
	if (ret)
		goto out_sector;
	return 0;

out_sector:
	free(ft->sector_buf);
	ft->sector_buf = NULL;
out_unmap:
	munmap(ft->log_data, ft->log_data_bytes);
	ft->log_data = NULL;
out_log:
	free(ft->log);
	ft->log = NULL;
	return ret;
}

static void overlay_free(struct fault_target *ft)
{
	if (!ft->log_data)
		return;
	cfs_ioq_destroy(ft->apply_q);
	free(ft->sector_buf);
	munmap(ft->log_data, ft->log_data_bytes);
	free(ft->log);
	ft->log_data = NULL;
	ft->log = NULL;
}

/* Write every record not yet in the store back, in order (no flush). */
static int overlay_writeback(struct fault_target *ft)
{
	unsigned i;
	int ret;

	ft->gen++;
	for (i = 0; i < ft->log_count; i++) {
		struct log_rec *r = &ft->log[i];

		if (r->applied_gen)
			continue;
		if (r->zero)
			ret = cfs_ioq_sync(ft->apply_q, CFS_IO_ZERO, r->offset_bytes,
					   r->length_bytes, NULL, NULL);
		else
			ret = cfs_ioq_sync(ft->apply_q, CFS_IO_WRITE, r->offset_bytes,
					   r->length_bytes, ft->log_data + r->data_at, NULL);
		if (ret < 0)
			return ret;
		/* Reads submitted from now on find it in the store. */
		r->applied_gen = ft->gen;
	}
	ft->gen++;
	return 0;
}

/*
 * Forget records that are in the store, once no read still needs them: a
 * read submitted before a record's write-back may have fetched the store
 * before it and is patched with the record (overlay_patch), so the record
 * stays until the oldest such read is done. Written-back records are a
 * prefix of the log, their generations non-decreasing.
 */
static void overlay_trim(struct fault_target *ft)
{
	uint64_t oldest = ft->reads_head ? ft->reads_head->read_gen : UINT64_MAX;
	unsigned k = 0, i;
	size_t shift;

	while (k < ft->log_count && ft->log[k].applied_gen && ft->log[k].applied_gen < oldest)
		k++;
	if (!k)
		return;
	if (k == ft->log_count) {
		ft->log_count = 0;
		ft->log_used = 0;
		return;
	}
	/*
	 * A zero record's data_at is the fill level rounded up to the
	 * alignment and may lie past log_used; then every record kept is a
	 * zero record (a data record after it would have raised log_used past
	 * it) and no data is kept. Shifting by an aligned amount keeps the
	 * data aligned for the inner target.
	 */
	shift = ft->log[k].data_at;
	if (shift >= ft->log_used) {
		shift = 0;
		ft->log_used = 0;
	} else {
		memmove(ft->log_data, ft->log_data + shift, ft->log_used - shift);
		ft->log_used -= shift;
	}
	memmove(ft->log, ft->log + k, (ft->log_count - k) * sizeof(*ft->log));
	ft->log_count -= k;
	for (i = 0; i < ft->log_count; i++)
		ft->log[i].data_at = ft->log_used ? ft->log[i].data_at - shift : 0;
}

static bool overlay_fits(const struct fault_target *ft, uint32_t length_bytes)
{
	size_t at = (ft->log_used + FAULT_LOG_ALIGN - 1) & ~(size_t)(FAULT_LOG_ALIGN - 1);

	return ft->log_count < ft->log_cap && at + length_bytes <= ft->log_data_bytes;
}

/* A WRITE, ZERO or DISCARD goes into the log: 0 or -errno. */
static int overlay_append(struct fault_target *ft, const struct cfs_io_req *req)
{
	bool zero = req->op != CFS_IO_WRITE;
	uint32_t data_bytes = zero ? 0 : req->length_bytes;
	struct log_rec *r;
	int ret;

	if (!overlay_fits(ft, data_bytes)) {
		/* Full: write back early, as a drive's cache may. */
		ret = overlay_writeback(ft);
		if (ret < 0)
			return ret;
		overlay_trim(ft);
	}
	if (!overlay_fits(ft, data_bytes)) {
		/*
		 * Still full: a read in flight since before a write-back pins
		 * the log. Everything logged is in the store now, so this one
		 * goes straight there too (durable at once, as the cache
		 * would have it); reads in flight were concurrent with it and
		 * may see it or not, later reads see the store.
		 */
		ret = cfs_ioq_sync(
			ft->apply_q, req->op == CFS_IO_WRITE ? CFS_IO_WRITE : CFS_IO_ZERO,
			req->offset_bytes, req->length_bytes, zero ? NULL : req->buf, NULL);
		return ret < 0 ? ret : 0;
	}
	r = &ft->log[ft->log_count++];
	r->offset_bytes = req->offset_bytes;
	r->length_bytes = req->length_bytes;
	r->zero = zero;
	r->applied_gen = 0;
	r->data_at = (ft->log_used + FAULT_LOG_ALIGN - 1) & ~(size_t)(FAULT_LOG_ALIGN - 1);
	if (!zero) {
		memcpy(ft->log_data + r->data_at, req->buf, data_bytes);
		ft->log_used = r->data_at + data_bytes;
	}
	return 0;
}

/* Copy what the log says over [offset, offset+length) of buf, oldest first.
 * Records written back before the read was submitted are in what it read. */
static void overlay_patch(struct fault_target *ft, uint64_t offset, uint32_t length, uint8_t *buf,
			  uint64_t read_gen)
{
	uint64_t end = offset + length;
	unsigned i;

	for (i = 0; i < ft->log_count; i++) {
		const struct log_rec *r = &ft->log[i];
		uint64_t a = r->offset_bytes, b = r->offset_bytes + r->length_bytes;

		if (r->applied_gen && r->applied_gen < read_gen)
			continue;
		if (b <= offset || a >= end)
			continue;
		if (a < offset)
			a = offset;
		if (b > end)
			b = end;
		if (r->zero)
			memset(buf + (a - offset), 0, b - a);
		else
			memcpy(buf + (a - offset),
			       ft->log_data + r->data_at + (a - r->offset_bytes), b - a);
	}
}

static int overlay_flush(struct fault_target *ft)
{
	int ret = overlay_writeback(ft);

	if (ret < 0)
		return ret;
	ret = cfs_ioq_sync(ft->apply_q, CFS_IO_FLUSH, 0, 0, NULL, NULL);
	if (ret < 0)
		return ret;
	overlay_trim(ft);
	return 0;
}

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Does an unflushed record before index `before` cover physical sector p? */
static bool sector_seen(const struct fault_target *ft, unsigned before, uint64_t p, uint32_t psec)
{
	unsigned i;

	for (i = 0; i < before; i++) {
		const struct log_rec *r = &ft->log[i];

		if (!r->applied_gen && r->offset_bytes / psec <= p &&
		    (r->offset_bytes + r->length_bytes - 1) / psec >= p)
			return true;
	}
	return false;
}

/* Bring physical sector p of the store to its newest logged content. */
static int sector_apply(struct fault_target *ft, uint64_t p, uint32_t psec)
{
	uint64_t offset = p * psec;
	uint32_t length = psec;
	int ret;

	uint64_t size = __atomic_load_n(&ft->inner->geo.size_bytes, __ATOMIC_ACQUIRE);

	if (offset + length > size)
		length = (uint32_t)(size - offset);
	ret = cfs_ioq_sync(ft->apply_q, CFS_IO_READ, offset, length, ft->sector_buf, NULL);
	if (ret < 0)
		return ret;
	overlay_patch(ft, offset, length, ft->sector_buf, UINT64_MAX);
	ret = cfs_ioq_sync(ft->apply_q, CFS_IO_WRITE, offset, length, ft->sector_buf, NULL);
	return ret < 0 ? ret : 0;
}

int cfs_io_fault_crash(struct cfs_io *io, bool torn)
{
	struct fault_target *ft;
	uint32_t psec;
	unsigned i;
	int applied = 0, ret = 0;

	if (!io || io->ops != &cfs_backend_fault)
		return -EINVAL;
	ft = io->priv;
	psec = ft->inner->geo.physical_sector_bytes;
	pthread_mutex_lock(&ft->lock);
	if (!ft->volatile_mode || !ft->log_data) {
		ret = -EINVAL;
		goto out_unlock;
	}
	ft->crashes++;
	if (torn || ft->torn) {
		for (i = 0; i < ft->log_count && ret == 0; i++) {
			const struct log_rec *r = &ft->log[i];
			uint64_t p, last;

			if (r->applied_gen)
				continue;
			last = (r->offset_bytes + r->length_bytes - 1) / psec;
			for (p = r->offset_bytes / psec; p <= last && ret == 0; p++) {
				if (sector_seen(ft, i, p, psec))
					continue;
				if (!(mix64(ft->seed ^ mix64(p ^ (ft->crashes << 48))) & 1))
					continue;
				ret = sector_apply(ft, p, psec);
				applied++;
			}
		}
	}
	ft->log_count = 0;
	ft->log_used = 0;
out_unlock:
	pthread_mutex_unlock(&ft->lock);
	return ret < 0 ? ret : applied;
}

/* ---- arming ------------------------------------------------------------------- */

/* Install spec's target settings and rules (ft->lock held, or at open). */
static int fault_install(struct fault_target *ft, const struct fault_spec *spec)
{
	int ret;

	if (spec->volatile_mode == 1 && !ft->volatile_mode) {
		ret = overlay_alloc(ft, spec->overlay_mb ? spec->overlay_mb : FAULT_OVERLAY_MB);
		if (ret)
			return ret;
	} else if (spec->volatile_mode == 0 && ft->volatile_mode) {
		/* Leaving power-loss mode: what was logged reaches the store. */
		ret = overlay_writeback(ft);
		if (ret)
			return ret;
		overlay_trim(ft);
	}
	if (spec->volatile_mode >= 0)
		ft->volatile_mode = spec->volatile_mode;
	if (spec->torn >= 0)
		ft->torn = spec->torn;
	if (spec->seed >= 0)
		ft->seed = (uint64_t)spec->seed;
	memcpy(ft->rule, spec->rule, sizeof(ft->rule));
	ft->nrules = spec->nrules;
	return 0;
}

int cfs_io_fault_arm(struct cfs_io *io, const char *text)
{
	struct fault_spec spec;
	struct fault_target *ft;
	int ret;

	if (!io || io->ops != &cfs_backend_fault)
		return -EINVAL;
	ft = io->priv;
	ret = fault_parse(text, &spec);
	if (ret)
		return ret;
	if (spec.inner[0] && strcmp(spec.inner, ft->inner->cfg.backend) != 0) {
		fprintf(stderr, "chunkfs: fault spec: inner=%s, but the target wraps %s\n",
			spec.inner, ft->inner->cfg.backend);
		return -EINVAL;
	}
	pthread_mutex_lock(&ft->lock);
	ret = fault_install(ft, &spec);
	pthread_mutex_unlock(&ft->lock);
	return ret;
}

/* ---- the backend ops ------------------------------------------------------------ */

static int fault_open(struct cfs_io *io, const struct cfs_io_config *cfg)
{
	struct cfs_io_config inner_cfg = *cfg;
	struct fault_spec spec;
	struct fault_target *ft;
	int ret;

	ret = fault_parse(cfg->fault_spec, &spec);
	if (ret)
		return ret;
	if (spec.inner[0]) {
		if (!cfs_backend_lookup(spec.inner)) {
			fprintf(stderr, "chunkfs: fault spec: unknown inner backend '%s'\n",
				spec.inner);
			return -EINVAL;
		}
		inner_cfg.backend = spec.inner;
	}
	inner_cfg.fault_spec = NULL;

	ft = calloc(1, sizeof(*ft));
	if (!ft)
		return -ENOMEM;
	ft->seed = 1;
	ret = -pthread_mutex_init(&ft->lock, NULL);
	if (ret)
		goto out_free;
	ret = cfs_io_open(&inner_cfg, &ft->inner);
	if (ret)
		goto out_mutex;
	ret = fault_install(ft, &spec);
	if (ret)
		goto out_close;
	snprintf(ft->name, sizeof(ft->name), "fault(%s)", ft->inner->geo.backend);
	io->priv = ft;
	io->geo = ft->inner->geo;
	io->geo.backend = ft->name;
	return 0;

out_close:
	cfs_io_close(ft->inner);
out_mutex:
	pthread_mutex_destroy(&ft->lock);
out_free:
	free(ft);
	return ret;
}

static void fault_close(struct cfs_io *io)
{
	struct fault_target *ft = io->priv;

	if (!ft)
		return;
	overlay_free(ft);
	cfs_io_close(ft->inner);
	pthread_mutex_destroy(&ft->lock);
	free(ft);
	io->priv = NULL;
}

static int fault_queue_init(struct cfs_ioq *q, const struct cfs_ioq_config *cfg)
{
	struct fault_target *ft = q->io->priv;
	/* The inner queue is driven only from the outer queue's calls, so it
	 * can make the same threading promise. */
	struct cfs_ioq_config inner_cfg = {.depth = 2 * q->depth, .flags = cfg->flags};
	struct fault_queue *fq;
	unsigned i;
	int ret;

	if (inner_cfg.depth > CFS_IO_DEPTH_MAX)
		inner_cfg.depth = CFS_IO_DEPTH_MAX;
	fq = calloc(1, sizeof(*fq));
	if (!fq)
		return -ENOMEM;
	fq->nshadows = inner_cfg.depth;
	fq->shadows = calloc(fq->nshadows, sizeof(*fq->shadows));
	if (!fq->shadows) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (i = 0; i < fq->nshadows; i++) {
		fq->shadows[i].next = fq->free;
		fq->free = &fq->shadows[i];
	}
	fq->ready_tail = &fq->ready;
	atomic_init(&fq->staged, 0);
	ret = -pthread_mutex_init(&fq->lock, NULL);
	if (ret)
		goto out_shadows;
	ret = cfs_ioq_create(ft->inner, &inner_cfg, &fq->inner_q);
	if (ret)
		goto out_mutex;
	q->priv = fq;
	return 0;

out_mutex:
	pthread_mutex_destroy(&fq->lock);
out_shadows:
	free(fq->shadows);
out_free:
	free(fq);
	return ret;
}

static void fault_queue_fini(struct cfs_ioq *q)
{
	struct fault_queue *fq = q->priv;

	if (!fq)
		return;
	CFS_ASSERT(fq->outstanding == 0);
	cfs_ioq_destroy(fq->inner_q);
	pthread_mutex_destroy(&fq->lock);
	free(fq->shadows);
	free(fq);
	q->priv = NULL;
}

/* Volatile reads in flight, in submission order (ft->lock held). */
static void reads_add(struct fault_target *ft, struct shadow *sh)
{
	sh->rnext = NULL;
	sh->rprev = ft->reads_tail;
	if (ft->reads_tail)
		ft->reads_tail->rnext = sh;
	else
		ft->reads_head = sh;
	ft->reads_tail = sh;
}

static void reads_remove(struct fault_target *ft, struct shadow *sh)
{
	if (sh->rprev)
		sh->rprev->rnext = sh->rnext;
	else
		ft->reads_head = sh->rnext;
	if (sh->rnext)
		sh->rnext->rprev = sh->rprev;
	else
		ft->reads_tail = sh->rprev;
	sh->rprev = sh->rnext = NULL;
}

/* A finished shadow waits for reap on the ready or delayed list. */
static void shadow_finished(struct fault_queue *fq, struct shadow *sh)
{
	pthread_mutex_lock(&fq->lock);
	if (sh->deadline_ns && cfs_now_ns() < sh->deadline_ns) {
		sh->next = fq->delayed;
		fq->delayed = sh;
	} else {
		sh->next = NULL;
		*fq->ready_tail = sh;
		fq->ready_tail = &sh->next;
	}
	pthread_mutex_unlock(&fq->lock);
}

/* Inner completion of a shadow: runs inside our reap, in the reaping thread. */
static void shadow_done(struct cfs_io_req *inner, int res)
{
	struct shadow *sh = (struct shadow *)inner;
	struct cfs_io_req *outer = sh->outer;
	struct cfs_ioq *q = inner->cookie;
	struct fault_queue *fq = q->priv;
	struct fault_target *ft = q->io->priv;

	if (res >= 0 && outer->done_bytes + (uint32_t)res < outer->length_bytes) {
		/* An injected short transfer: resubmit the rest. */
		outer->done_bytes += (uint32_t)res;
		if (outer->stats)
			cfs_counter_add(&outer->stats->short_retries, 1);
		inner->offset_bytes = outer->offset_bytes + outer->done_bytes;
		inner->buf = (uint8_t *)outer->buf + outer->done_bytes;
		inner->length_bytes = outer->length_bytes - outer->done_bytes;
		res = cfs_ioq_queue(fq->inner_q, inner);
		if (res == 0) {
			cfs_ioq_submit(fq->inner_q);
			return;
		}
	}
	if (sh->patch) {
		pthread_mutex_lock(&ft->lock);
		if (res >= 0)
			overlay_patch(ft, outer->offset_bytes, outer->length_bytes, outer->buf,
				      sh->read_gen);
		reads_remove(ft, sh);
		overlay_trim(ft);
		pthread_mutex_unlock(&ft->lock);
	}
	sh->res = res < 0 ? res : (int)outer->length_bytes;
	shadow_finished(fq, sh);
}

static struct shadow *shadow_get(struct fault_queue *fq)
{
	struct shadow *sh;

	pthread_mutex_lock(&fq->lock);
	sh = fq->free;
	if (sh) {
		fq->free = sh->next;
		fq->outstanding++;
	}
	pthread_mutex_unlock(&fq->lock);
	return sh;
}

static void shadow_put(struct fault_queue *fq, struct shadow *sh)
{
	pthread_mutex_lock(&fq->lock);
	sh->next = fq->free;
	fq->free = sh;
	fq->outstanding--;
	pthread_mutex_unlock(&fq->lock);
}

static int fault_queue(struct cfs_ioq *q, struct cfs_io_req *req)
{
	struct fault_target *ft = q->io->priv;
	struct fault_queue *fq = q->priv;
	uint32_t sector = q->io->geo.logical_sector_bytes;
	struct verdict v;
	struct shadow *sh;
	int ret;

	sh = shadow_get(fq);
	if (!sh)
		return -EBUSY;
	memset(&sh->inner, 0, sizeof(sh->inner));
	sh->outer = req;
	sh->patch = false;
	sh->append_late = false;
	sh->res = 0;

	pthread_mutex_lock(&ft->lock);
	v = rules_apply(ft, req);
	sh->deadline_ns = v.delay_ns ? cfs_now_ns() + v.delay_ns : 0;
	if (v.err) {
		pthread_mutex_unlock(&ft->lock);
		sh->res = -v.err;
		goto finished;
	}
	if (ft->volatile_mode && req->op != CFS_IO_READ && req->op != CFS_IO_FLUSH &&
	    sh->deadline_ns) {
		/* A delayed write reaches the log when it completes, as a
		 * device's write is in its cache only once done: a flush or a
		 * read before then does not see it, and writes in flight
		 * together land in the order they complete. */
		pthread_mutex_unlock(&ft->lock);
		sh->append_late = true;
		sh->res = (int)req->length_bytes;
		goto finished;
	}
	if (ft->volatile_mode && req->op != CFS_IO_READ) {
		ret = req->op == CFS_IO_FLUSH ? overlay_flush(ft) : overlay_append(ft, req);
		pthread_mutex_unlock(&ft->lock);
		sh->res = ret < 0 ? ret : (int)req->length_bytes;
		goto finished;
	}
	if (ft->volatile_mode) {
		sh->patch = true;
		sh->read_gen = ft->gen;
		reads_add(ft, sh);
	}
	pthread_mutex_unlock(&ft->lock);

	sh->inner.offset_bytes = req->offset_bytes;
	sh->inner.length_bytes = req->length_bytes;
	sh->inner.op = req->op;
	sh->inner.buf = req->buf;
	sh->inner.stats = NULL; /* the outer request is the one charged */
	sh->inner.done = shadow_done;
	sh->inner.cookie = q;
	v.short_bytes -= v.short_bytes % sector;
	if (v.short_bytes && v.short_bytes < req->length_bytes)
		sh->inner.length_bytes = v.short_bytes;
	ret = cfs_ioq_queue(fq->inner_q, &sh->inner);
	if (ret) {
		if (sh->patch) {
			pthread_mutex_lock(&ft->lock);
			reads_remove(ft, sh);
			pthread_mutex_unlock(&ft->lock);
		}
		shadow_put(fq, sh);
		return ret;
	}
	atomic_fetch_add_explicit(&fq->staged, 1, memory_order_relaxed);
	return 0;

finished:
	shadow_finished(fq, sh);
	atomic_fetch_add_explicit(&fq->staged, 1, memory_order_relaxed);
	return 0;
}

static int fault_submit(struct cfs_ioq *q)
{
	struct fault_queue *fq = q->priv;
	int ret = cfs_ioq_submit(fq->inner_q);

	if (ret < 0)
		return ret;
	return (int)atomic_exchange_explicit(&fq->staged, 0, memory_order_relaxed);
}

/* Move delayed shadows whose time has come to the ready list; returns the
 * earliest deadline still pending (0 if none). fq->lock held. */
static uint64_t promote_delayed(struct fault_queue *fq, uint64_t now)
{
	struct shadow **pp = &fq->delayed, *sh;
	uint64_t earliest = 0;

	while ((sh = *pp)) {
		if (sh->deadline_ns <= now) {
			*pp = sh->next;
			sh->next = NULL;
			*fq->ready_tail = sh;
			fq->ready_tail = &sh->next;
		} else {
			if (!earliest || sh->deadline_ns < earliest)
				earliest = sh->deadline_ns;
			pp = &sh->next;
		}
	}
	return earliest;
}

static int fault_reap(struct cfs_ioq *q, unsigned min_complete)
{
	struct fault_queue *fq = q->priv;
	unsigned n = 0;

	for (;;) {
		struct shadow *list, *sh;
		uint64_t earliest;
		int ret;

		ret = cfs_ioq_reap(fq->inner_q, 0);
		if (ret < 0 && ret != -EINTR)
			return n ? (int)n : ret;
		pthread_mutex_lock(&fq->lock);
		earliest = promote_delayed(fq, cfs_now_ns());
		list = fq->ready;
		fq->ready = NULL;
		fq->ready_tail = &fq->ready;
		pthread_mutex_unlock(&fq->lock);

		while ((sh = list)) {
			struct cfs_io_req *outer = sh->outer;
			int res = sh->res;

			list = sh->next;
			if (sh->append_late) {
				struct fault_target *ft = q->io->priv;

				pthread_mutex_lock(&ft->lock);
				ret = overlay_append(ft, outer);
				pthread_mutex_unlock(&ft->lock);
				if (ret < 0)
					res = ret;
			}
			shadow_put(fq, sh);
			cfs_ioq_complete(q, outer, res);
			n++;
		}
		if (n >= min_complete)
			break;
		if (earliest) {
			/* Bounded naps: inner completions keep coming meanwhile. */
			uint64_t wait = earliest - cfs_now_ns();
			struct timespec ts = {0, 0};

			if ((int64_t)wait > 0) {
				ts.tv_nsec = (long)(wait < FAULT_POLL_NS ? wait : FAULT_POLL_NS);
				nanosleep(&ts, NULL);
			}
		} else if (cfs_ioq_inflight(fq->inner_q)) {
			cfs_ioq_submit(fq->inner_q);
			ret = cfs_ioq_reap(fq->inner_q, 1);
			if (ret < 0 && ret != -EINTR)
				return n ? (int)n : ret;
		} else {
			pthread_mutex_lock(&fq->lock);
			list = fq->ready;
			pthread_mutex_unlock(&fq->lock);
			if (!list)
				break; /* nothing more can come */
		}
	}
	return (int)n;
}

/* Pools: the stores and routes are the wrapped target's; the overlay and
 * the rules work on pool addresses like on any other. */
static void fault_sync_geometry(struct cfs_io *io)
{
	struct fault_target *ft = io->priv;

	__atomic_store_n(&io->geo.discard_supported, cfs_io_can_discard(ft->inner),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&io->geo.size_bytes,
			 __atomic_load_n(&ft->inner->geo.size_bytes, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
}

static int fault_add_store(struct cfs_io *io, const struct cfs_io_config *cfg)
{
	struct fault_target *ft = io->priv;
	int ret = cfs_io_add_store(ft->inner, cfg);

	if (ret > 0)
		fault_sync_geometry(io);
	return ret;
}

static const struct cfs_io_geometry *fault_store_geometry(const struct cfs_io *io, unsigned store)
{
	const struct fault_target *ft = io->priv;

	return cfs_io_store_geometry(ft->inner, store);
}

static int fault_set_routes(struct cfs_io *io, const struct cfs_io_route *routes, unsigned count)
{
	struct fault_target *ft = io->priv;
	int ret = cfs_io_set_routes(ft->inner, routes, count);

	if (!ret)
		fault_sync_geometry(io);
	return ret;
}

static int fault_drop_store(struct cfs_io *io, unsigned store)
{
	struct fault_target *ft = io->priv;
	int ret = cfs_io_drop_store(ft->inner, store);

	if (!ret)
		fault_sync_geometry(io);
	return ret;
}

static unsigned fault_get_routes(struct cfs_io *io, struct cfs_io_route *routes, unsigned max)
{
	struct fault_target *ft = io->priv;

	return cfs_io_get_routes(ft->inner, routes, max);
}

const struct cfs_backend_ops cfs_backend_fault = {
	.name = "fault",
	.version = CFS_BACKEND_OPS_VERSION,
	.open = fault_open,
	.close = fault_close,
	.queue_init = fault_queue_init,
	.queue_fini = fault_queue_fini,
	.queue = fault_queue,
	.submit = fault_submit,
	.reap = fault_reap,
	.event_fd = NULL,
	.add_store = fault_add_store,
	.store_geometry = fault_store_geometry,
	.set_routes = fault_set_routes,
	.drop_store = fault_drop_store,
	.get_routes = fault_get_routes,
};
