/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * statcmd.h — `chunkfs stat`: per-chunk statistics as a table (the shape of
 * `onstat -g iof` and `iostat -x`), JSON or Prometheus text, read from the
 * user.chunkfs.* xattrs like any other program would (getxattr, following
 * symlinks), so any user who can read a chunk can run it. main.c dispatches
 * `chunkfs stat ...` here.
 *
 *   chunkfs stat [-i SECONDS [-c COUNT]] [-z] [--json | --prom]
 *                [MOUNTPOINT | CHUNK ...]
 *
 * The sample, rate and sum helpers are exported for
 * tests/unit/test_chunkstat.c.
 */
#ifndef CFS_STATCMD_H
#define CFS_STATCMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "iopath/iopath.h"

/* argv[0] is "stat". Returns the process exit code: 0, 1 for usage errors,
 * 2 when some target could not be read (the others are still shown). */
int cfs_statcmd_main(int argc, char **argv);

/* A chunk's user.chunkfs.store: its store's label, or every store it is on
 * (comma-separated) while a move is half done: up to 32 labels of 63
 * bytes. */
#define CFS_STAT_STORE_TEXT 2048

/* One reading of one target's composite user.chunkfs.stat line, with the
 * read and write histograms (for interval percentiles) and, for a chunk,
 * its store. */
struct cfs_stat_sample {
	char line[8192];
	struct cfs_latency_hist hist[2]; /* 0 read, 1 write */
	bool have_hist;
	char store[CFS_STAT_STORE_TEXT]; /* "" when unknown (the root, an
					  * older daemon) */
};

/* The numbers of one table row or JSON object: rates over an interval
 * (or since the reset for the first report), in the units shown. */
struct cfs_stat_rates {
	double seconds;	       /* length of the interval */
	double r_s, w_s, f_s;  /* operations per second */
	double r_mb_s, w_mb_s; /* MB/s (10^6 bytes, as iostat -m) */
	double r_await_ms, w_await_ms, f_await_ms;
	double r_p99_ms, w_p99_ms;
	uint64_t inflight, inflight_max, errors, size_bytes;
	/* Latencies recorded in the period: they weigh the awaits when rows
	 * are summed (cfs_stat_rates_add). */
	uint64_t r_lat_n, w_lat_n, f_lat_n;
	bool root;
	bool sum; /* a sum of chunks: no percentiles, no maximum queue, no
		   * single period (seconds 0) */
};

/* Rates between two samples of the same target (before NULL: since its
 * reset_time). 0, or -EINVAL when a line lacks a needed key. */
int cfs_stat_rates(const struct cfs_stat_sample *after, const struct cfs_stat_sample *before,
		   struct cfs_stat_rates *out);

/* Add one chunk's rates to a store's sum (sum zeroed first): rates,
 * sizes, in-flight requests and errors add up; awaits are averaged,
 * weighed by their latency counts. Marks sum->sum. */
void cfs_stat_rates_add(struct cfs_stat_rates *sum, const struct cfs_stat_rates *r);
/* True for the keys of a chunk's line whose values add up over chunks
 * (counts, bytes, sizes, gauges of now); false for page sizes, times,
 * maxima, minima, averages and percentiles. */
bool cfs_stat_summable(const char *key);
/* Prometheus label value escaping (\\, \", \n). Returns the length. */
size_t cfs_stat_prom_escape(const char *s, char *buf, size_t size);

#endif /* CFS_STATCMD_H */
