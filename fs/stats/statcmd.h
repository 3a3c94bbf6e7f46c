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
 * The sample and rate helpers are exported for tests/unit/test_statcmd.c.
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

/* One reading of one target's composite user.chunkfs.stat line, with the
 * read and write histograms (for interval percentiles). */
struct cfs_stat_sample {
	char line[8192];
	struct cfs_latency_hist hist[2]; /* 0 read, 1 write */
	bool have_hist;
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
	bool root;
};

/* Rates between two samples of the same target (before NULL: since its
 * reset_time). 0, or -EINVAL when a line lacks a needed key. */
int cfs_stat_rates(const struct cfs_stat_sample *after, const struct cfs_stat_sample *before,
		   struct cfs_stat_rates *out);

/* Output, one target per call (header/footer by the callers below). */
void cfs_stat_print_header(FILE *f);
void cfs_stat_print_row(FILE *f, const char *name, const struct cfs_stat_rates *r);
/* Prometheus label value escaping (\\, \", \n). Returns the length. */
size_t cfs_stat_prom_escape(const char *s, char *buf, size_t size);

#endif /* CFS_STATCMD_H */
