// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_chunkstat.c — fs/stats/chunkstat.c and the pure parts of fs/stats/statcmd.c:
 * the field table (what getfattr -d lists, what is writable), the decimal
 * text of every kind of value, percentiles against known latencies, the
 * composite line and its parser, histogram text, the size-probe cache,
 * charging (kinds, flags, mount totals across threads, reset) and a reader
 * racing writers (no torn or decreasing values).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/stats/chunkstat.h"
#include "fs/stats/statcmd.h"

static struct cfs_cs_view *new_view(bool root)
{
	struct cfs_cs_view *v = calloc(1, sizeof(*v));

	cr_assert(v);
	cfs_cs_snapshot(NULL, &v->snap);
	v->root = root;
	v->page_size_bytes = 2048;
	v->now_ns = 1733061234123456789ull;
	return v;
}

static const char *render(const struct cfs_cs_view *v, const char *name)
{
	static char buf[CFS_CS_TEXT_MAX];
	const struct cfs_cs_field *f = cfs_cs_field_find(name, v->root);

	cr_assert_not_null(f, "no field %s (root %d)", name, v->root);
	cr_assert_lt(cfs_cs_render_field(v, f, buf, sizeof(buf)), sizeof(buf));
	return buf;
}

/* ---- the field table ------------------------------------------------------ */

static char *listed(bool root)
{
	static char buf[4096];
	size_t n = cfs_cs_list(root, false, buf, sizeof(buf));
	char *out = calloc(1, 4096);

	cr_assert_lt(n, sizeof(buf));
	for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
		cr_assert_eq(strncmp(buf + i, CFS_CS_PREFIX, CFS_CS_PREFIX_BYTES), 0);
		strcat(out, buf + i + CFS_CS_PREFIX_BYTES);
		strcat(out, " ");
	}
	return out;
}

Test(chunkstat, listed_names_are_the_dba_summary)
{
	char *chunk = listed(false), *root = listed(true);

	cr_assert_str_eq(chunk,
			 "pagesize reads read_bytes page_reads read_lat_avg_us read_lat_p99_us "
			 "writes write_bytes page_writes write_lat_avg_us write_lat_p99_us fsyncs "
			 "fsync_lat_avg_us opens inflight_max errors reset_time ");
	cr_assert_str_eq(root, "source backend store_bytes free_bytes block_bytes sector_bytes "
			       "dio_align_bytes readonly mount_time reads read_bytes "
			       "read_lat_avg_us writes write_bytes write_lat_avg_us fsyncs errors "
			       "reset_time ");
	free(chunk);
	free(root);
}

Test(chunkstat, list_probe_and_hidden)
{
	char small[8];
	size_t need = cfs_cs_list(false, false, NULL, 0);

	cr_assert_gt(need, 100);
	/* too small: the length, nothing copied */
	memset(small, 'x', sizeof(small));
	cr_assert_eq(cfs_cs_list(false, false, small, sizeof(small)), need);
	cr_assert_eq(small[0], 'x');
	cr_assert_eq(cfs_cs_list(false, true, NULL, 0), 0);
	cr_assert_eq(cfs_cs_list(true, true, NULL, 0), 0);
}

Test(chunkstat, scopes_and_writable_names)
{
	size_t count;
	const struct cfs_cs_field *t = cfs_cs_fields(&count);
	unsigned writable = 0;

	for (size_t i = 0; i < count; i++) {
		for (size_t j = i + 1; j < count; j++)
			cr_assert_str_neq(t[i].name, t[j].name, "duplicate %s", t[i].name);
		if (t[i].flags & CFS_CS_WRITABLE) {
			writable++;
			cr_assert(strcmp(t[i].name, "pagesize") == 0 ||
				  strcmp(t[i].name, "reset") == 0);
		}
		/* listed names are readable and in the composite line */
		if (t[i].flags & (CFS_CS_LISTED_CHUNK | CFS_CS_LISTED_ROOT)) {
			cr_assert(t[i].flags & CFS_CS_READABLE, "%s", t[i].name);
			cr_assert(t[i].flags & CFS_CS_IN_LINE, "%s", t[i].name);
		}
	}
	cr_assert_eq(writable, 2);
	cr_assert_null(cfs_cs_field_find("pagesize", true), "no page size on the root");
	cr_assert_null(cfs_cs_field_find("source", false), "no store facts on a chunk");
	cr_assert_null(cfs_cs_field_find("nonsense", false));
	cr_assert_not(cfs_cs_field_find("reset", false)->flags & CFS_CS_READABLE);
	cr_assert_not(cfs_cs_field_find("stat", false)->flags & CFS_CS_IN_LINE);
	cr_assert_not(cfs_cs_field_find("read_hist", true)->flags & CFS_CS_IN_LINE);
}

/* ---- values ---------------------------------------------------------------- */

Test(chunkstat, microseconds_round_half_up)
{
	cr_assert_eq(cfs_cs_ns_to_us(0), 0);
	cr_assert_eq(cfs_cs_ns_to_us(499), 0);
	cr_assert_eq(cfs_cs_ns_to_us(500), 1);
	cr_assert_eq(cfs_cs_ns_to_us(1499), 1);
	cr_assert_eq(cfs_cs_ns_to_us(1500), 2);
	cr_assert_eq(cfs_cs_ns_to_us(UINT64_MAX), UINT64_MAX / 1000 + 1);
}

Test(chunkstat, time_has_six_decimals)
{
	char buf[32];

	cr_assert_eq(cfs_cs_format_time(1733061234123456789ull, buf, sizeof(buf)), 17);
	cr_assert_str_eq(buf, "1733061234.123456");
	cfs_cs_format_time(5000000000ull, buf, sizeof(buf));
	cr_assert_str_eq(buf, "5.000000");
	cfs_cs_format_time(1000, buf, sizeof(buf));
	cr_assert_str_eq(buf, "0.000001");
}

Test(chunkstat, counts_bytes_pages_errors)
{
	struct cfs_cs_view *v = new_view(false);
	struct cfs_io_stats *io = &v->snap.io;

	io->op[CFS_IO_READ].ops = 1000;
	io->op[CFS_IO_READ].bytes = 4096000;
	io->op[CFS_IO_WRITE].bytes = 2047; /* less than a page */
	io->err_eio = 1;
	io->err_enospc = 2;
	io->err_misaligned = 3;
	v->snap.short_reads = 4;
	io->err_other = 5;
	v->size_bytes = 1ull << 40;
	v->opens_now = 7;
	cr_assert_str_eq(render(v, "reads"), "1000");
	cr_assert_str_eq(render(v, "read_bytes"), "4096000");
	cr_assert_str_eq(render(v, "page_reads"), "2000");
	cr_assert_str_eq(render(v, "page_writes"), "0");
	cr_assert_str_eq(render(v, "pagesize"), "2048");
	cr_assert_str_eq(render(v, "errors"), "11", "short reads are not errors");
	cr_assert_str_eq(render(v, "short_reads"), "4");
	cr_assert_str_eq(render(v, "size"), "1099511627776");
	cr_assert_str_eq(render(v, "opens"), "7");
	cr_assert_str_eq(render(v, "time"), "1733061234.123456");
	v->page_size_bytes = 16384;
	cr_assert_str_eq(render(v, "page_reads"), "250");
	free(v);
}

Test(chunkstat, empty_latency_reads_zero)
{
	struct cfs_cs_view *v = new_view(false);

	/* min_ns is UINT64_MAX while nothing was recorded: shown as 0 */
	cr_assert_str_eq(render(v, "read_lat_min_us"), "0");
	cr_assert_str_eq(render(v, "read_lat_max_us"), "0");
	cr_assert_str_eq(render(v, "read_lat_avg_us"), "0");
	cr_assert_str_eq(render(v, "read_lat_p99_us"), "0");
	cr_assert_str_eq(render(v, "read_hist"), "");
	free(v);
}

/* 1000 reads: 900 at 100 us, 90 at 1 ms, 9 at 10 ms, 1 at 100 ms. */
static void known_latencies(struct cfs_latency_hist *h)
{
	h->min_ns = UINT64_MAX;
	for (int i = 0; i < 900; i++)
		cfs_hist_record(h, 100000);
	for (int i = 0; i < 90; i++)
		cfs_hist_record(h, 1000000);
	for (int i = 0; i < 9; i++)
		cfs_hist_record(h, 10000000);
	cfs_hist_record(h, 100000000);
}

Test(chunkstat, percentiles_of_known_latencies)
{
	struct cfs_cs_view *v = new_view(false);
	struct cfs_latency_hist *h = &v->snap.io.op[CFS_IO_READ].latency;
	char want[32];

	known_latencies(h);
	/* A percentile is its bucket's upper bound: within 1/16 above. */
	snprintf(want, sizeof(want), "%" PRIu64,
		 cfs_cs_ns_to_us(cfs_hist_bucket_upper_ns(cfs_hist_bucket(100000))));
	cr_assert_str_eq(render(v, "read_lat_p50_us"), want);
	cr_assert_str_eq(render(v, "read_lat_p90_us"), want);
	cr_assert_str_eq(want, "102"); /* 100 us, bucket [98304, 102399] ns */
	cr_assert_str_eq(render(v, "read_lat_p99_us"), "1016"); /* [983040, 1015807] */
	cr_assert_str_eq(render(v, "read_lat_p999_us"), "10486");
	cr_assert_str_eq(render(v, "read_lat_min_us"), "100");
	cr_assert_str_eq(render(v, "read_lat_max_us"), "100000");
	cr_assert_str_eq(render(v, "read_lat_count"), "1000");
	/* (900*100 + 90*1000 + 9*10000 + 100000) us / 1000 = 370 us */
	cr_assert_str_eq(render(v, "read_lat_sum_us"), "370000");
	cr_assert_str_eq(render(v, "read_lat_avg_us"), "370");
	free(v);
}

Test(chunkstat, average_stays_within_min_max)
{
	struct cfs_cs_view *v = new_view(false);
	struct cfs_latency_hist *h = &v->snap.io.op[CFS_IO_WRITE].latency;

	/* A copy taken while a completion was half-recorded: the sum has it,
	 * max does not yet. */
	h->count = 2;
	h->sum_ns = 10000000;
	h->min_ns = 1000;
	h->max_ns = 2000;
	cr_assert_str_eq(render(v, "write_lat_avg_us"), "2");
	free(v);
}

/* ---- the composite line ---------------------------------------------------------- */

Test(chunkstat, line_holds_every_in_line_field_and_parses_back)
{
	struct cfs_cs_view *v = new_view(false);
	char *line = malloc(CFS_CS_TEXT_MAX), value[256];
	size_t count, n;
	const struct cfs_cs_field *t = cfs_cs_fields(&count);

	known_latencies(&v->snap.io.op[CFS_IO_READ].latency);
	v->snap.io.op[CFS_IO_WRITE].ops = 12345678901ull;
	v->snap.io.reset_time_ns = 1700000000000000000ull;
	n = cfs_cs_render_line(v, line, CFS_CS_TEXT_MAX);
	cr_assert_eq(n, strlen(line));
	for (size_t i = 0; i < count; i++) {
		bool in = (t[i].flags & CFS_CS_CHUNK) && (t[i].flags & CFS_CS_IN_LINE);

		cr_assert_eq(cfs_cs_line_get(line, t[i].name, value, sizeof(value)), in, "%s",
			     t[i].name);
		if (in)
			cr_assert_str_eq(value, render(v, t[i].name), "%s", t[i].name);
	}
	/* a prefix of a key is not the key */
	cr_assert_not(cfs_cs_line_get(line, "read", value, sizeof(value)));
	cr_assert_not(cfs_cs_line_get(line, "_bytes", value, sizeof(value)));
	{
		uint64_t w;
		double t0;

		cr_assert(cfs_cs_line_u64(line, "writes", &w));
		cr_assert_eq(w, 12345678901ull);
		cr_assert(cfs_cs_line_double(line, "reset_time", &t0));
		cr_assert_float_eq(t0, 1700000000.0, 1e-6);
	}
	/* a truncated render reports the full length */
	cr_assert_eq(cfs_cs_render_line(v, value, 10), n);
	cr_assert_eq(strlen(value), 9);
	free(line);
	free(v);
}

Test(chunkstat, root_line_escapes_source)
{
	struct cfs_cs_view *v = new_view(true);
	char line[4096], value[256];

	v->source = "/srv/my chunks/a=b%c\xc3\xa9.img";
	v->backend = "fault(uring)";
	v->store_bytes = 1ull << 30;
	cfs_cs_render_line(v, line, sizeof(line));
	cr_assert_not_null(strstr(line, "source=/srv/my%20chunks/a%3Db%25c%C3%A9.img "), "%s",
			   line);
	cr_assert(cfs_cs_line_get(line, "source", value, sizeof(value)));
	cr_assert_str_eq(value, v->source);
	cr_assert(cfs_cs_line_get(line, "backend", value, sizeof(value)));
	cr_assert_str_eq(value, "fault(uring)");
	cr_assert_null(strstr(line, "pagesize="));
	cr_assert_null(strstr(line, "page_reads="));
	/* getfattr -n shows the source as it is */
	cr_assert_str_eq(render(v, "source"), v->source);
	free(v);
}

Test(chunkstat, escape_plain_and_special)
{
	char buf[64];

	cr_assert_eq(cfs_cs_escape("abc", buf, sizeof(buf)), 3);
	cr_assert_str_eq(buf, "abc");
	cr_assert_eq(cfs_cs_escape("a b\n", buf, sizeof(buf)), 8);
	cr_assert_str_eq(buf, "a%20b%0A");
	cr_assert_eq(cfs_cs_escape("", buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "");
}

/* ---- histograms ---------------------------------------------------------------------- */

Test(chunkstat, hist_text_round_trip_and_delta)
{
	struct cfs_latency_hist *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	struct cfs_latency_hist *d = calloc(1, sizeof(*d)), *p = calloc(1, sizeof(*p));
	char *text = malloc(CFS_CS_TEXT_MAX);

	known_latencies(a);
	cfs_cs_render_hist(a, text, CFS_CS_TEXT_MAX);
	cr_assert_str_eq(text, "102399:900 1015807:90 10485759:9 100663295:1");
	cr_assert_eq(cfs_cs_parse_hist(text, p), 0);
	cr_assert_eq(p->count, 1000);
	for (unsigned i = 0; i < CFS_HIST_BUCKETS; i++)
		cr_assert_eq(p->bucket[i], a->bucket[i]);
	cr_assert_eq(cfs_hist_percentile_ns(p, 0.99), 1015807);
	/* the interval: 100 more slow ones */
	*b = *a;
	for (int i = 0; i < 100; i++)
		cfs_hist_record(b, 10000000);
	cfs_cs_hist_delta(b, a, d);
	cr_assert_eq(d->count, 100);
	cr_assert_eq(cfs_hist_percentile_ns(d, 0.5), 10485759);
	/* garbage is refused */
	cr_assert_eq(cfs_cs_parse_hist("12:3", p), 0); /* below 16 ns every value is a bucket */
	cr_assert_eq(cfs_cs_parse_hist("1000:3", p), -EINVAL); /* not a bucket bound */
	cr_assert_eq(cfs_cs_parse_hist("102399", p), -EINVAL);
	cr_assert_eq(cfs_cs_parse_hist("102399:x", p), -EINVAL);
	cr_assert_eq(cfs_cs_parse_hist("", p), 0);
	cr_assert_eq(p->count, 0);
	free(a);
	free(b);
	free(d);
	free(p);
	free(text);
}

/* ---- the size-probe cache ---------------------------------------------------------------- */

Test(chunkstat, probe_then_read_gets_the_probed_text)
{
	struct cfs_cs_probe_key k = {.tid = 42, .ino = 7, .field = 3}, other = k;
	char buf[64];

	cr_assert_eq(cfs_cs_probe_put(&k, "12345", 5, 1000), 0);
	other.tid = 43;
	cr_assert_eq(cfs_cs_probe_take(&other, buf, sizeof(buf), 1001), -1, "another thread");
	cr_assert_eq(cfs_cs_probe_take(&k, buf, 4, 1001), -1, "too small: render fresh");
	cr_assert_eq(cfs_cs_probe_take(&k, buf, 5, 1002), 5, "still there after a miss");
	cr_assert_eq(memcmp(buf, "12345", 5), 0);
	cr_assert_eq(cfs_cs_probe_take(&k, buf, 5, 1003), -1, "taken once");
	/* expired */
	cfs_cs_probe_put(&k, "1", 1, 1000);
	cr_assert_eq(cfs_cs_probe_take(&k, buf, 5, 1000 + CFS_CS_PROBE_TTL_NS), -1);
	/* a longer value reuses the slot */
	cfs_cs_probe_put(&k, "1234567890123456789012345678901234567890", 40, 5000);
	cr_assert_eq(cfs_cs_probe_take(&k, buf, sizeof(buf), 5001), 40);
	/* an empty value is a value */
	cfs_cs_probe_put(&k, "", 0, 6000);
	cr_assert_eq(cfs_cs_probe_take(&k, buf, 1, 6001), 0);
	cfs_cs_probe_clear();
}

/* Four probes waiting for their reads never evict one another, whatever
 * sets they hash to (sets have four entries). */
Test(chunkstat, probe_cache_keeps_four_concurrent_probes)
{
	for (uint64_t base = 0; base < 2000; base += 4) {
		struct cfs_cs_probe_key k[4];
		char buf[8];

		for (int i = 0; i < 4; i++) {
			k[i] = (struct cfs_cs_probe_key){
				.tid = base + (uint64_t)i, .ino = 2, .field = 9};
			cr_assert_eq(cfs_cs_probe_put(&k[i], "abc", 3, 100), 0);
		}
		for (int i = 0; i < 4; i++)
			cr_assert_eq(cfs_cs_probe_take(&k[i], buf, sizeof(buf), 101), 3, "tid %lu",
				     (unsigned long)k[i].tid);
	}
	cfs_cs_probe_clear();
}

/* ---- charging -------------------------------------------------------------------------------- */

Test(chunkstat, charging_by_kind_and_flags)
{
	struct cfs_chunk_stats *cs = cfs_cs_new(), snap;

	cr_assert(cs);
	cfs_cs_request_begin(cs);
	cfs_cs_request_begin(cs);
	cr_assert_eq(cs->io.inflight_now, 2);
	cfs_cs_request_done(cs, CFS_IO_READ, 0, 4096, 1000, CFS_CS_INFLIGHT);
	cfs_cs_request_done(cs, CFS_IO_READ, 0, 1000, 1000, CFS_CS_INFLIGHT | CFS_CS_SHORT_READ);
	cfs_cs_request_done(cs, CFS_IO_WRITE, -EIO, 4096, 1000, CFS_CS_RMW);
	cfs_cs_request_done(cs, CFS_IO_WRITE, -ENOSPC, 0, 0, 0);
	cfs_cs_request_done(cs, CFS_IO_WRITE, -EINVAL, 0, 0, CFS_CS_MISALIGNED);
	cfs_cs_request_done(cs, CFS_IO_WRITE, -EROFS, 0, 0, 0);
	cfs_cs_request_done(cs, CFS_IO_FLUSH, 0, 0, 5000000, 0);
	cfs_cs_request_done(cs, CFS_IO_DISCARD, 0, 1 << 20, 10, 0);
	cfs_cs_open(cs, true);
	cfs_cs_open(cs, false);
	cfs_cs_open(cs, true);
	cfs_cs_snapshot(cs, &snap);
	cr_assert_eq(snap.io.op[CFS_IO_READ].ops, 2);
	cr_assert_eq(snap.io.op[CFS_IO_READ].bytes, 5096);
	cr_assert_eq(snap.io.op[CFS_IO_WRITE].ops, 4);
	cr_assert_eq(snap.io.op[CFS_IO_WRITE].bytes, 0, "failed requests move no bytes");
	cr_assert_eq(snap.io.op[CFS_IO_WRITE].errors, 4);
	cr_assert_eq(snap.io.err_eio, 1);
	cr_assert_eq(snap.io.err_enospc, 1);
	cr_assert_eq(snap.io.err_misaligned, 1);
	cr_assert_eq(snap.io.err_other, 1);
	cr_assert_eq(snap.short_reads, 1);
	cr_assert_eq(snap.io.rmw_ops, 1);
	cr_assert_eq(snap.io.inflight_now, 0);
	cr_assert_eq(snap.io.inflight_max, 2);
	cr_assert_eq(snap.io.op[CFS_IO_FLUSH].latency.max_ns, 5000000);
	cr_assert_eq(snap.io.op[CFS_IO_DISCARD].bytes, 1 << 20);
	cr_assert_eq(snap.opens_total, 3);
	cr_assert_eq(snap.opens_direct, 2);
	cr_assert_eq(snap.opens_buffered, 1);
	/* reset: counters to zero, the gauge stays, reset_time moves */
	cfs_cs_request_begin(cs);
	cfs_cs_reset(cs);
	cfs_cs_snapshot(cs, &snap);
	cr_assert_eq(snap.io.op[CFS_IO_READ].ops, 0);
	cr_assert_eq(snap.opens_total, 0);
	cr_assert_eq(snap.io.inflight_now, 1);
	cr_assert_eq(snap.io.inflight_max, 1);
	cr_assert_gt(snap.io.reset_time_ns, 1700000000ull * 1000000000u);
	cfs_cs_request_done(cs, CFS_IO_READ, 0, 512, 1, CFS_CS_INFLIGHT);
	cfs_cs_snapshot(cs, &snap);
	cr_assert_eq(snap.io.inflight_now, 0);
	cfs_cs_free(cs);
}

struct worker {
	struct cfs_chunk_stats *cs;
	unsigned n;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (unsigned i = 0; i < w->n; i++) {
		cfs_cs_request_begin(w->cs);
		cfs_cs_request_done(w->cs, i % 2 ? CFS_IO_WRITE : CFS_IO_READ, 0, 4096,
				    1000 + i % 5000, CFS_CS_INFLIGHT);
	}
	return NULL;
}

/* Four writers on one chunk: the chunk and the mount totals (summed over
 * the writers' slots) come out exact. */
Test(chunkstat, concurrent_writers_exact_and_mount_totals)
{
	struct cfs_chunk_stats *cs = cfs_cs_new(), *total = malloc(sizeof(*total)), snap;
	struct worker w = {.cs = NULL, .n = 100000};
	pthread_t th[4];
	uint64_t reads0, writes0;

	cr_assert(cs && total);
	cfs_cs_mount_start(1700000000ull * 1000000000u);
	cfs_cs_mount_snapshot(total);
	reads0 = total->io.op[CFS_IO_READ].ops;
	writes0 = total->io.op[CFS_IO_WRITE].ops;
	cr_assert_eq(reads0 + writes0, 0, "mount_start zeroes the totals");
	w.cs = cs;
	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, worker_main, &w), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	cfs_cs_snapshot(cs, &snap);
	cr_assert_eq(snap.io.op[CFS_IO_READ].ops, 200000);
	cr_assert_eq(snap.io.op[CFS_IO_WRITE].ops, 200000);
	cr_assert_eq(snap.io.op[CFS_IO_READ].bytes, 200000ull * 4096);
	cr_assert_eq(snap.io.op[CFS_IO_READ].latency.count, 200000);
	cr_assert_eq(snap.io.inflight_now, 0);
	cr_assert_geq(snap.io.inflight_max, 1);
	cr_assert_leq(snap.io.inflight_max, 4);
	cfs_cs_mount_snapshot(total);
	cr_assert_eq(total->io.op[CFS_IO_READ].ops, 200000);
	cr_assert_eq(total->io.op[CFS_IO_WRITE].ops, 200000);
	cr_assert_eq(total->io.op[CFS_IO_WRITE].latency.count, 200000);
	cr_assert_eq(total->io.inflight_now, 0);
	cr_assert_eq(total->io.reset_time_ns, 1700000000ull * 1000000000u);
	cfs_cs_mount_reset();
	cfs_cs_mount_snapshot(total);
	cr_assert_eq(total->io.op[CFS_IO_READ].ops, 0);
	cr_assert_gt(total->io.reset_time_ns, 1700000000ull * 1000000000u);
	cfs_cs_free(cs);
	free(total);
}

struct reader {
	struct cfs_chunk_stats *cs;
	volatile bool stop;
	unsigned samples;
	bool bad;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	struct cfs_cs_view *v = calloc(1, sizeof(*v));
	char *line = malloc(CFS_CS_TEXT_MAX);
	uint64_t last_ops = 0, last_bytes = 0;

	while (!r->stop) {
		uint64_t ops = 0, bytes = 0, p50 = 0, p99 = 0, max = 0;

		cfs_cs_snapshot(r->cs, &v->snap);
		v->page_size_bytes = 4096;
		cfs_cs_render_line(v, line, CFS_CS_TEXT_MAX);
		if (!cfs_cs_line_u64(line, "reads", &ops) ||
		    !cfs_cs_line_u64(line, "read_bytes", &bytes) ||
		    !cfs_cs_line_u64(line, "read_lat_p50_us", &p50) ||
		    !cfs_cs_line_u64(line, "read_lat_p99_us", &p99) ||
		    !cfs_cs_line_u64(line, "read_lat_max_us", &max)) {
			r->bad = true;
			break;
		}
		/* never backwards, whole 4 KiB requests only, percentiles ordered */
		if (ops < last_ops || bytes < last_bytes || bytes % 4096 || p50 > p99 || p99 > max)
			r->bad = true;
		last_ops = ops;
		last_bytes = bytes;
		r->samples++;
	}
	free(line);
	free(v);
	return NULL;
}

Test(chunkstat, reader_racing_writers_sees_consistent_values)
{
	struct cfs_chunk_stats *cs = cfs_cs_new();
	struct worker w = {.cs = cs, .n = 200000};
	struct reader r = {.cs = cs};
	pthread_t th[3], rd;

	cr_assert_eq(pthread_create(&rd, NULL, reader_main, &r), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, worker_main, &w), 0);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	r.stop = true;
	pthread_join(rd, NULL);
	cr_assert_not(r.bad);
	cr_assert_gt(r.samples, 1);
	cfs_cs_free(cs);
}

/* ---- chunkfs stat's rates ---------------------------------------------------------------- */

static void sample_line(struct cfs_stat_sample *s, double t, uint64_t reads, uint64_t lat_sum_us,
			uint64_t errors, const char *reset)
{
	snprintf(s->line, sizeof(s->line),
		 "pagesize=4096 size=1048576 reads=%" PRIu64 " read_bytes=%" PRIu64
		 " read_lat_count=%" PRIu64 " read_lat_sum_us=%" PRIu64 " read_lat_p99_us=900"
		 " writes=10 write_bytes=40960 write_lat_count=10 write_lat_sum_us=1000"
		 " write_lat_p99_us=200 fsyncs=2 fsync_lat_count=2 fsync_lat_sum_us=4000"
		 " inflight=3 inflight_max=32 errors=%" PRIu64 " time=%.6f reset_time=%s",
		 reads, reads * 4096, reads, lat_sum_us, errors, t, reset);
	s->have_hist = false;
}

Test(chunkstat, stat_rates_since_reset_and_interval)
{
	struct cfs_stat_sample *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	struct cfs_stat_rates r;

	sample_line(a, 1010.0, 1000, 100000, 1, "1000.000000");
	cr_assert_eq(cfs_stat_rates(a, NULL, &r), 0);
	cr_assert_float_eq(r.seconds, 10.0, 1e-6);
	cr_assert_float_eq(r.r_s, 100.0, 1e-9);
	cr_assert_float_eq(r.r_mb_s, 1000 * 4096 / 1e6 / 10, 1e-9);
	cr_assert_float_eq(r.r_await_ms, 0.1, 1e-9);
	cr_assert_float_eq(r.r_p99_ms, 0.9, 1e-9);
	cr_assert_float_eq(r.f_s, 0.2, 1e-9);
	cr_assert_float_eq(r.f_await_ms, 2.0, 1e-9);
	cr_assert_eq(r.inflight, 3);
	cr_assert_eq(r.inflight_max, 32);
	cr_assert_eq(r.size_bytes, 1048576);
	cr_assert_not(r.root);
	/* two seconds later, 500 more reads at 1 ms each */
	sample_line(b, 1012.0, 1500, 600000, 3, "1000.000000");
	cr_assert_eq(cfs_stat_rates(b, a, &r), 0);
	cr_assert_float_eq(r.seconds, 2.0, 1e-6);
	cr_assert_float_eq(r.r_s, 250.0, 1e-9);
	cr_assert_float_eq(r.r_await_ms, 1.0, 1e-9);
	cr_assert_eq(r.errors, 2);
	cr_assert_float_eq(r.w_s, 0.0, 1e-9);
	/* reset in between: the interval is since that reset */
	sample_line(b, 1012.0, 40, 400, 0, "1011.000000");
	cr_assert_eq(cfs_stat_rates(b, a, &r), 0);
	cr_assert_float_eq(r.seconds, 1.0, 1e-6);
	cr_assert_float_eq(r.r_s, 40.0, 1e-9);
	/* a line without the keys */
	strcpy(b->line, "reads=1");
	cr_assert_eq(cfs_stat_rates(b, NULL, &r), -EINVAL);
	free(a);
	free(b);
}

Test(chunkstat, stat_rates_summed_per_store)
{
	struct cfs_stat_sample *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	struct cfs_stat_rates ra, rb, sum = {0};

	/* 1000 reads at 0.1 ms over 10 s, and 100 at 1.1 ms over 2 s */
	sample_line(a, 1010.0, 1000, 100000, 1, "1000.000000");
	sample_line(b, 1002.0, 100, 110000, 2, "1000.000000");
	cr_assert_eq(cfs_stat_rates(a, NULL, &ra), 0);
	cr_assert_eq(cfs_stat_rates(b, NULL, &rb), 0);
	cr_assert_eq(ra.r_lat_n, 1000);
	cr_assert_eq(ra.w_lat_n, 10);
	cfs_stat_rates_add(&sum, &ra);
	cfs_stat_rates_add(&sum, &rb);
	cr_assert(sum.sum);
	cr_assert_float_eq(sum.r_s, 100.0 + 50.0, 1e-9);
	cr_assert_float_eq(sum.w_s, 1.0 + 5.0, 1e-9);
	/* the mean of all 1100 reads, not of the two means */
	cr_assert_float_eq(sum.r_await_ms, 210000.0 / 1100 / 1000, 1e-9);
	cr_assert_float_eq(sum.f_await_ms, 2.0, 1e-9);
	cr_assert_eq(sum.r_lat_n, 1100);
	cr_assert_eq(sum.errors, 3);
	cr_assert_eq(sum.inflight, 6);
	cr_assert_eq(sum.size_bytes, 2 * 1048576);
	free(a);
	free(b);
}

Test(chunkstat, stat_summable_keys)
{
	static const char *const sums[] = {
		"reads",	   "read_bytes", "page_reads",	 "read_lat_count",
		"read_lat_sum_us", "errors",	 "err_eio",	 "size",
		"opens",	   "inflight",	 "discard_bytes"};
	static const char *const not_sums[] = {"pagesize",	   "time",
					       "reset_time",	   "inflight_max",
					       "read_lat_min_us",  "read_lat_max_us",
					       "write_lat_avg_us", "read_lat_p50_us",
					       "fsync_lat_p999_us"};

	for (size_t i = 0; i < sizeof(sums) / sizeof(sums[0]); i++)
		cr_assert(cfs_stat_summable(sums[i]), "%s", sums[i]);
	for (size_t i = 0; i < sizeof(not_sums) / sizeof(not_sums[0]); i++)
		cr_assert_not(cfs_stat_summable(not_sums[i]), "%s", not_sums[i]);
}

Test(chunkstat, prom_label_escaping)
{
	char buf[64];

	cr_assert_eq(cfs_stat_prom_escape("a\"b\\c\nd", buf, sizeof(buf)), 10);
	cr_assert_str_eq(buf, "a\\\"b\\\\c\\nd");
	cr_assert_eq(cfs_stat_prom_escape("/srv/chunks/rootdbs", buf, sizeof(buf)), 19);
}
