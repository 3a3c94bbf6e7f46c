// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * statcmd.c — `chunkfs stat`: the per-chunk statistics as a table shaped
 * like `onstat -g iof` and `iostat -x`, as JSON with the raw counters, or as
 * Prometheus text for node_exporter's textfile collector.
 *
 * It is a plain client of the xattrs: one getxattr of user.chunkfs.stat
 * per target and report (plus the read/write histograms in interval mode),
 * following symlinks, so it needs nothing but read permission on the chunk,
 * works with the daemon's own names (two symlinks to one chunk are one row:
 * targets are deduplicated by device and inode), and never slows the I/O it
 * watches (the daemon copies counters with atomic loads).
 *
 * Targets: a CHUNK (a file on a chunkfs mount, through any symlink); a
 * MOUNTPOINT or directory on one (every regular file below it, its own mount
 * only, plus a "(all)" row of the mount-wide totals when it is the mount
 * root); nothing: every chunkfs mount in /proc/self/mounts (one that cannot
 * be read is named on stderr and skipped). Files found by a walk that are
 * deleted before they are read are left out quietly.
 *
 * Reports: the first covers the time since each target's reset_time (since
 * the mount unless reset), like iostat's first report; with -i every further
 * report covers the interval, with p99 from the histograms' difference.
 * -c COUNT is the number of reports. -z resets the targets first (the owner
 * or root may; a refusal is reported and the rest goes on).
 *
 * Exit: 0; 1 usage; 2 some target could not be read or reset.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <mntent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "fs/stats/chunkstat.h"
#include "fs/stats/statcmd.h"

#define TARGETS_MAX 65536u
#define HIST_TEXT_MAX CFS_CS_TEXT_MAX

enum format { FMT_TABLE, FMT_JSON, FMT_PROM };

struct target {
	char *name;  /* as shown: the path given or found */
	char *mount; /* the mount point it belongs to (may be NULL) */
	dev_t dev;
	ino_t ino;
	bool root;   /* mount-wide totals */
	bool have;   /* cur holds a sample */
	bool failed; /* reported unreadable once */
	bool found;  /* found by a walk, not named: may vanish quietly */
	struct cfs_stat_sample *prev, *cur;
};

struct run {
	enum format format;
	double interval_s; /* 0: one report */
	unsigned long count;
	bool reset;
	struct target *t;
	size_t n, cap;
	int status;
	char *hist_text; /* scratch for *_hist values */
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: chunkfs stat [-i SECONDS [-c COUNT]] [-z] [--json | --prom]\n"
		   "                    [MOUNTPOINT | CHUNK ...]\n"
		   "\n"
		   "Per-chunk I/O statistics of chunkfs mounts, read from the user.chunkfs.*\n"
		   "xattrs (chunkfs(8), STATISTICS).\n"
		   "\n"
		   "  -i SECONDS  report every SECONDS (rates over each interval)\n"
		   "  -c COUNT    stop after COUNT reports (with -i)\n"
		   "  -z          reset the statistics of the targets first (owner or root)\n"
		   "  --json      one JSON object per report, with the raw counters\n"
		   "  --prom      Prometheus text exposition format (node_exporter textfile)\n"
		   "\n"
		   "Without targets: every chunkfs mount. A MOUNTPOINT shows each chunk\n"
		   "below it and the mount-wide totals.\n");
}

/* ---- targets ------------------------------------------------------------------- */

static int add_target(struct run *r, const char *name, const char *mount, const struct stat *st,
		      bool root, bool found)
{
	struct target *t;

	for (size_t i = 0; i < r->n; i++)
		if (r->t[i].dev == st->st_dev && r->t[i].ino == st->st_ino && r->t[i].root == root)
			return 0; /* the same chunk under another name */
	if (r->n == TARGETS_MAX)
		return -E2BIG;
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;
		struct target *bigger = realloc(r->t, cap * sizeof(*bigger));

		if (!bigger)
			return -ENOMEM;
		r->t = bigger;
		r->cap = cap;
	}
	t = &r->t[r->n];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	t->mount = mount ? strdup(mount) : NULL;
	t->prev = calloc(1, sizeof(*t->prev));
	t->cur = calloc(1, sizeof(*t->cur));
	if (!t->name || (mount && !t->mount) || !t->prev || !t->cur) {
		free(t->name);
		free(t->mount);
		free(t->prev);
		free(t->cur);
		return -ENOMEM;
	}
	t->dev = st->st_dev;
	t->ino = st->st_ino;
	t->root = root;
	t->found = found;
	r->n++;
	return 0;
}

static bool is_chunkfs_root(const char *path)
{
	char v[8];

	/* Only the root carries the store facts. */
	return getxattr(path, CFS_CS_PREFIX "backend", v, sizeof(v)) >= 0 || errno == ERANGE;
}

/* 0 when path carries chunk statistics, else -errno (ENODATA, ENOTSUP:
 * not on chunkfs, or not a chunk; EACCES: not readable by us). */
static int chunk_stats_readable(const char *path)
{
	char v[32];

	return getxattr(path, CFS_CS_PREFIX "reads", v, sizeof(v)) >= 0 ? 0 : -errno;
}

struct walk {
	char **paths;
	size_t count, cap;
};

static int walk_keep(struct walk *w, const char *path)
{
	if (w->count == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		char **bigger = realloc(w->paths, cap * sizeof(*bigger));

		if (!bigger)
			return -ENOMEM;
		w->paths = bigger;
		w->cap = cap;
	}
	w->paths[w->count] = strdup(path);
	if (!w->paths[w->count])
		return -ENOMEM;
	w->count++;
	return 0;
}

/*
 * Every regular file below dir on device dev, symlinks not followed. Not
 * nftw: a database or another program may delete files and directories
 * while we walk, and nftw gives up on the whole walk when a directory
 * vanishes between its listing and its opening. What vanishes is skipped.
 */
static int walk_dir(struct walk *w, const char *dir, dev_t dev)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int ret = 0;

	if (!d)
		return errno == ENOENT || errno == EACCES ? 0 : -errno;
	while (!ret && (e = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || st.st_dev != dev)
			continue;
		if (S_ISDIR(st.st_mode))
			ret = walk_dir(w, path, dev);
		else if (S_ISREG(st.st_mode))
			ret = walk_keep(w, path);
	}
	closedir(d);
	return ret;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file below dir (its own filesystem only), sorted by path. */
static int add_tree(struct run *r, const char *dir, const char *mount)
{
	struct walk w = {0};
	struct stat st;
	int ret;

	if (stat(dir, &st))
		return -errno;
	ret = walk_dir(&w, dir, st.st_dev);
	qsort(w.paths, w.count, sizeof(*w.paths), cmp_str);
	for (size_t i = 0; i < w.count; i++) {
		if (!ret && lstat(w.paths[i], &st) == 0 && S_ISREG(st.st_mode))
			ret = add_target(r, w.paths[i], mount, &st, false, true);
		free(w.paths[i]);
	}
	free(w.paths);
	return ret;
}

static int add_mount(struct run *r, const char *dir)
{
	struct stat st;
	int ret;

	if (stat(dir, &st))
		return -errno;
	ret = add_tree(r, dir, dir);
	if (!ret)
		ret = add_target(r, dir, dir, &st, true, false);
	return ret;
}

static int add_arg(struct run *r, const char *arg)
{
	struct stat st;
	int ret;

	if (stat(arg, &st)) {
		fprintf(stderr, "chunkfs stat: %s: %s\n", arg, strerror(errno));
		return -errno;
	}
	if (S_ISDIR(st.st_mode)) {
		ret = is_chunkfs_root(arg) ? add_mount(r, arg) : add_tree(r, arg, NULL);
		if (ret && ret != -ENOMEM && ret != -E2BIG)
			fprintf(stderr, "chunkfs stat: %s: %s\n", arg, strerror(-ret));
		return ret;
	}
	ret = S_ISREG(st.st_mode) ? chunk_stats_readable(arg) : -ENODATA;
	if (ret == -ENODATA || ret == -ENOTSUP) {
		fprintf(stderr, "chunkfs stat: %s: not a chunk on a chunkfs mount\n", arg);
		return -EINVAL;
	}
	if (ret) {
		fprintf(stderr, "chunkfs stat: %s: %s\n", arg, strerror(-ret));
		return ret;
	}
	return add_target(r, arg, NULL, &st, false, false);
}

/*
 * Like df: a mount that cannot be read (its daemon killed and the mount not
 * yet cleaned up: ENOTCONN) is named on stderr and the others are reported;
 * the exit status says something was missing.
 */
static int add_all_mounts(struct run *r)
{
	FILE *f = setmntent("/proc/self/mounts", "re");
	struct mntent *m;
	int ret = 0, found = 0, read = 0;

	if (!f)
		return -errno;
	while ((m = getmntent(f)) && ret != -ENOMEM && ret != -E2BIG) {
		/* fuseblk.chunkfs: a block-device store mounted with -o blkdev */
		if (strcmp(m->mnt_type, "fuse.chunkfs") != 0 &&
		    strcmp(m->mnt_type, "fuseblk.chunkfs") != 0)
			continue;
		found++;
		ret = add_mount(r, m->mnt_dir);
		if (!ret)
			read++;
		else if (ret != -ENOMEM && ret != -E2BIG) {
			fprintf(stderr, "chunkfs stat: %s: %s%s\n", m->mnt_dir, strerror(-ret),
				ret == -ENOTCONN ? " (its daemon is gone: umount it)" : "");
			r->status = 2;
		}
	}
	endmntent(f);
	if (ret == -ENOMEM || ret == -E2BIG)
		return ret;
	if (!found) {
		fprintf(stderr, "chunkfs stat: no chunkfs mounts\n");
		return -ENOENT;
	}
	return read ? 0 : -EIO;
}

/* ---- samples --------------------------------------------------------------------- */

static int read_hist(const char *path, const char *name, char *text, struct cfs_latency_hist *out)
{
	ssize_t n = getxattr(path, name, text, HIST_TEXT_MAX - 1);

	if (n < 0)
		return -errno;
	text[n] = '\0';
	return cfs_cs_parse_hist(text, out);
}

static int take_sample(struct run *r, struct target *t)
{
	struct cfs_stat_sample *s = t->cur;
	ssize_t n;

	n = getxattr(t->name, CFS_CS_PREFIX "stat", s->line, sizeof(s->line) - 1);
	if (n < 0)
		return -errno;
	s->line[n] = '\0';
	s->have_hist = false;
	if (r->interval_s > 0 &&
	    read_hist(t->name, CFS_CS_PREFIX "read_hist", r->hist_text, &s->hist[0]) == 0 &&
	    read_hist(t->name, CFS_CS_PREFIX "write_hist", r->hist_text, &s->hist[1]) == 0)
		s->have_hist = true;
	return 0;
}

/* ---- rates --------------------------------------------------------------------------- */

static bool get_u64(const struct cfs_stat_sample *s, const char *key, uint64_t *v)
{
	return cfs_cs_line_u64(s->line, key, v);
}

/* after - before of a counter; a counter that went backwards was reset. */
static uint64_t delta(uint64_t after, uint64_t before, bool since_reset)
{
	if (since_reset || after < before)
		return after;
	return after - before;
}

int cfs_stat_rates(const struct cfs_stat_sample *after, const struct cfs_stat_sample *before,
		   struct cfs_stat_rates *out)
{
	static const char *const keys[] = {
		"reads",	   "read_bytes",       "read_lat_count",   "read_lat_sum_us",
		"writes",	   "write_bytes",      "write_lat_count",  "write_lat_sum_us",
		"fsyncs",	   "fsync_lat_count",  "fsync_lat_sum_us", "errors",
		"read_lat_p99_us", "write_lat_p99_us",
	};
	enum { N = sizeof(keys) / sizeof(keys[0]) };
	uint64_t a[N], b[N] = {0}, d[N];
	double t_after, t_before, reset_after, reset_before = 0;
	bool since_reset;

	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < N; i++)
		if (!get_u64(after, keys[i], &a[i]))
			return -EINVAL;
	if (!cfs_cs_line_double(after->line, "time", &t_after) ||
	    !cfs_cs_line_double(after->line, "reset_time", &reset_after))
		return -EINVAL;
	since_reset = before == NULL;
	if (before) {
		for (unsigned i = 0; i < N; i++)
			if (!get_u64(before, keys[i], &b[i]))
				return -EINVAL;
		if (!cfs_cs_line_double(before->line, "time", &t_before) ||
		    !cfs_cs_line_double(before->line, "reset_time", &reset_before))
			return -EINVAL;
		/* Reset in between: what we have is since that reset. */
		if (reset_after != reset_before)
			since_reset = true;
	}
	out->seconds = since_reset ? t_after - reset_after : t_after - t_before;
	for (unsigned i = 0; i < N; i++)
		d[i] = delta(a[i], b[i], since_reset);
	if (out->seconds > 0) {
		out->r_s = (double)d[0] / out->seconds;
		out->r_mb_s = (double)d[1] / 1e6 / out->seconds;
		out->w_s = (double)d[4] / out->seconds;
		out->w_mb_s = (double)d[5] / 1e6 / out->seconds;
		out->f_s = (double)d[8] / out->seconds;
	}
	out->r_await_ms = d[2] ? (double)d[3] / (double)d[2] / 1000.0 : 0;
	out->w_await_ms = d[6] ? (double)d[7] / (double)d[6] / 1000.0 : 0;
	out->f_await_ms = d[9] ? (double)d[10] / (double)d[9] / 1000.0 : 0;
	out->errors = d[11];
	if (!since_reset && after->have_hist && before->have_hist) {
		struct cfs_latency_hist *h = malloc(sizeof(*h));

		if (h) {
			cfs_cs_hist_delta(&after->hist[0], &before->hist[0], h);
			out->r_p99_ms = (double)cfs_hist_percentile_ns(h, 0.99) / 1e6;
			cfs_cs_hist_delta(&after->hist[1], &before->hist[1], h);
			out->w_p99_ms = (double)cfs_hist_percentile_ns(h, 0.99) / 1e6;
			free(h);
		}
	} else {
		out->r_p99_ms = (double)a[12] / 1000.0;
		out->w_p99_ms = (double)a[13] / 1000.0;
	}
	get_u64(after, "inflight", &out->inflight);
	get_u64(after, "inflight_max", &out->inflight_max);
	out->root = !get_u64(after, "size", &out->size_bytes);
	return 0;
}

/* ---- the table --------------------------------------------------------------------------- */

/* The chunk column: as wide as the longest name, within these bounds; a
 * longer name keeps its end (the chunk's own name) after "...". */
#define NAME_WIDTH_MIN 24
#define NAME_WIDTH_MAX 60

static int name_width = NAME_WIDTH_MIN;

/* Terminal columns of a name: one per UTF-8 character (a continuation byte
 * takes none). */
static int name_columns(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* The name in exactly name_width columns: padded, or its last columns after
 * "..." (cut on a character boundary); control characters (a newline in a
 * file name) as '?', so a row stays one line. */
static void print_name(FILE *f, const char *name)
{
	int cols = name_columns(name), pad = name_width - cols;

	if (cols > name_width) {
		int skip = cols - (name_width - 3);

		fputs("...", f);
		while (skip > 0) { /* past one byte; a lead byte ends a character */
			name++;
			skip -= ((unsigned char)*name & 0xc0) != 0x80;
		}
		pad = 0;
	}
	for (; *name; name++)
		fputc((unsigned char)*name < 0x20 || *name == 0x7f ? '?' : *name, f);
	fprintf(f, "%*s", pad, "");
}

void cfs_stat_print_header(FILE *f)
{
	print_name(f, "chunk");
	fprintf(f, " %9s %8s %8s %8s %9s %8s %8s %8s %8s %8s %6s %6s %5s %7s\n", "r/s", "rMB/s",
		"r_await", "r_p99", "w/s", "wMB/s", "w_await", "w_p99", "fsync/s", "f_await",
		"inflt", "maxq", "err", "size");
}

static void human_size(uint64_t bytes, char *buf, size_t size)
{
	static const char units[] = "BKMGTPE";
	double v = (double)bytes;
	unsigned u = 0;

	while (v >= 1024 && u + 1 < sizeof(units) - 1) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%" PRIu64 "B", bytes);
	else
		snprintf(buf, size, v < 10 ? "%.1f%c" : "%.0f%c", v, units[u]);
}

void cfs_stat_print_row(FILE *f, const char *name, const struct cfs_stat_rates *r)
{
	char size[16];

	if (r->root)
		snprintf(size, sizeof(size), "-");
	else
		human_size(r->size_bytes, size, sizeof(size));
	print_name(f, name);
	fprintf(f,
		" %9.1f %8.2f %8.2f %8.2f %9.1f %8.2f %8.2f %8.2f %8.1f %8.2f %6" PRIu64
		" %6" PRIu64 " %5" PRIu64 " %7s\n",
		r->r_s, r->r_mb_s, r->r_await_ms, r->r_p99_ms, r->w_s, r->w_mb_s, r->w_await_ms,
		r->w_p99_ms, r->f_s, r->f_await_ms, r->inflight, r->inflight_max, r->errors, size);
}

static const char *row_name(const struct target *t, char *buf, size_t size)
{
	if (!t->root)
		return t->name;
	snprintf(buf, size, "%s (all)", t->name);
	return buf;
}

static void print_table(struct run *r, bool first, double interval_s)
{
	char when[64], name[PATH_MAX + 8];
	time_t now = time(NULL);
	struct tm tm;
	int width = NAME_WIDTH_MIN;

	for (size_t i = 0; i < r->n; i++) {
		int len = name_columns(row_name(&r->t[i], name, sizeof(name)));

		if (len > width)
			width = len > NAME_WIDTH_MAX ? NAME_WIDTH_MAX : len;
	}
	name_width = width;
	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	if (first)
		printf("%s  since reset\n", when);
	else
		printf("%s  interval %.2f s\n", when, interval_s);
	cfs_stat_print_header(stdout);
	for (size_t i = 0; i < r->n; i++) {
		struct target *t = &r->t[i];
		struct cfs_stat_rates rates;

		if (!t->have || cfs_stat_rates(t->cur, first ? NULL : t->prev, &rates))
			continue;
		cfs_stat_print_row(stdout, row_name(t, name, sizeof(name)), &rates);
	}
	printf("\n");
}

/* ---- JSON --------------------------------------------------------------------------------- */

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static bool is_decimal(const char *s)
{
	bool dot = false;

	if (!*s || *s == '.')
		return false;
	for (; *s; s++) {
		if (*s == '.' && !dot)
			dot = true;
		else if (*s < '0' || *s > '9')
			return false;
	}
	return true;
}

/* Every key=value of the line: numbers as JSON numbers, text as strings. */
static void json_counters(FILE *f, const char *line)
{
	const char *p = line;
	bool first = true;

	fputc('{', f);
	while (*p) {
		const char *eq = strchr(p, '='), *end;
		char key[64], value[CFS_CS_TEXT_MAX / 4];

		if (!eq)
			break;
		end = strchr(eq, ' ');
		if (!end)
			end = eq + strlen(eq);
		if ((size_t)(eq - p) < sizeof(key)) {
			memcpy(key, p, (size_t)(eq - p));
			key[eq - p] = '\0';
			if (cfs_cs_line_get(p, key, value, sizeof(value))) {
				fprintf(f, "%s", first ? "" : ",");
				json_string(f, key);
				fputc(':', f);
				if (is_decimal(value))
					fputs(value, f);
				else
					json_string(f, value);
				first = false;
			}
		}
		p = *end ? end + 1 : end;
	}
	fputc('}', f);
}

static void print_json(struct run *r, bool first)
{
	struct timespec now;
	bool any = false;

	clock_gettime(CLOCK_REALTIME, &now);
	printf("{\"time\":%lld.%06ld,\"since_reset\":%s,\"targets\":[", (long long)now.tv_sec,
	       now.tv_nsec / 1000, first ? "true" : "false");
	for (size_t i = 0; i < r->n; i++) {
		struct target *t = &r->t[i];
		struct cfs_stat_rates x;

		if (!t->have || cfs_stat_rates(t->cur, first ? NULL : t->prev, &x))
			continue;
		printf("%s{\"path\":", any ? "," : "");
		json_string(stdout, t->name);
		printf(",\"kind\":\"%s\",\"mount\":", t->root ? "mount" : "chunk");
		if (t->mount)
			json_string(stdout, t->mount);
		else
			printf("null");
		printf(",\"counters\":");
		json_counters(stdout, t->cur->line);
		printf(",\"rates\":{\"seconds\":%.6f,\"r_s\":%.3f,\"r_mb_s\":%.6f,\"r_await_ms\":%."
		       "3f,"
		       "\"r_p99_ms\":%.3f,\"w_s\":%.3f,\"w_mb_s\":%.6f,\"w_await_ms\":%.3f,"
		       "\"w_p99_ms\":%.3f,\"fsync_s\":%.3f,\"f_await_ms\":%.3f,\"errors\":%" PRIu64
		       "}}",
		       x.seconds, x.r_s, x.r_mb_s, x.r_await_ms, x.r_p99_ms, x.w_s, x.w_mb_s,
		       x.w_await_ms, x.w_p99_ms, x.f_s, x.f_await_ms, x.errors);
		any = true;
	}
	printf("]}\n");
}

/* ---- Prometheus ------------------------------------------------------------------------------ */

size_t cfs_stat_prom_escape(const char *s, char *buf, size_t size)
{
	size_t n = 0;

	for (; *s; s++) {
		const char *rep = NULL;
		char one[2] = {*s, '\0'};

		if (*s == '\\')
			rep = "\\\\";
		else if (*s == '"')
			rep = "\\\"";
		else if (*s == '\n')
			rep = "\\n";
		else
			rep = one;
		for (; *rep; rep++, n++)
			if (n + 1 < size)
				buf[n] = *rep;
	}
	if (size)
		buf[n < size ? n : size - 1] = '\0';
	return n;
}

enum prom_kind { P_COUNTER, P_GAUGE, P_SUMMARY, P_TIME };

struct prom_metric {
	const char *name;
	enum prom_kind kind;
	const char *key;   /* line key (summary: the op prefix, "read") */
	const char *label; /* extra label (error="eio": not "kind", every
			    * sample has that one), or NULL */
	const char *help;
};

static const struct prom_metric prom_metrics[] = {
	{"chunkfs_reads_total", P_COUNTER, "reads", NULL, "READ requests answered."},
	{"chunkfs_read_bytes_total", P_COUNTER, "read_bytes", NULL, "Bytes read."},
	{"chunkfs_page_reads_total", P_COUNTER, "page_reads", NULL,
	 "Bytes read divided by the chunk's page size."},
	{"chunkfs_read_errors_total", P_COUNTER, "read_errors", NULL, "READ requests failed."},
	{"chunkfs_read_latency_seconds", P_SUMMARY, "read", NULL,
	 "READ latency from request to reply."},
	{"chunkfs_writes_total", P_COUNTER, "writes", NULL, "WRITE requests answered."},
	{"chunkfs_write_bytes_total", P_COUNTER, "write_bytes", NULL, "Bytes written."},
	{"chunkfs_page_writes_total", P_COUNTER, "page_writes", NULL,
	 "Bytes written divided by the chunk's page size."},
	{"chunkfs_write_errors_total", P_COUNTER, "write_errors", NULL, "WRITE requests failed."},
	{"chunkfs_write_latency_seconds", P_SUMMARY, "write", NULL,
	 "WRITE latency from request to reply."},
	{"chunkfs_fsyncs_total", P_COUNTER, "fsyncs", NULL, "fsync/fdatasync answered."},
	{"chunkfs_fsync_errors_total", P_COUNTER, "fsync_errors", NULL, "fsync failed."},
	{"chunkfs_fsync_latency_seconds", P_SUMMARY, "fsync", NULL,
	 "fsync latency until the commit was durable."},
	{"chunkfs_discards_total", P_COUNTER, "discards", NULL, "Punch-hole requests."},
	{"chunkfs_discard_bytes_total", P_COUNTER, "discard_bytes", NULL, "Bytes punched."},
	{"chunkfs_errors_total", P_COUNTER, "err_eio", "error=\"eio\"",
	 "Failed requests by cause (error label)."},
	{"chunkfs_errors_total", P_COUNTER, "err_enospc", "error=\"enospc\"", NULL},
	{"chunkfs_errors_total", P_COUNTER, "err_misaligned", "error=\"misaligned\"", NULL},
	{"chunkfs_errors_total", P_COUNTER, "err_other", "error=\"other\"", NULL},
	{"chunkfs_short_reads_total", P_COUNTER, "short_reads", NULL,
	 "O_DIRECT reads cut at the end of the chunk (not errors)."},
	{"chunkfs_rmw_total", P_COUNTER, "rmw", NULL, "Requests done by read-modify-write."},
	{"chunkfs_opens", P_GAUGE, "opens", NULL, "Open file handles now."},
	{"chunkfs_opens_total", P_COUNTER, "opens_total", NULL, "Opens."},
	{"chunkfs_opens_direct_total", P_COUNTER, "opens_direct", NULL, "Opens with O_DIRECT."},
	{"chunkfs_opens_buffered_total", P_COUNTER, "opens_buffered", NULL,
	 "Opens without O_DIRECT."},
	{"chunkfs_inflight", P_GAUGE, "inflight", NULL, "READ/WRITE requests being served."},
	{"chunkfs_inflight_max", P_GAUGE, "inflight_max", NULL,
	 "Most requests in flight at once since the reset."},
	{"chunkfs_size_bytes", P_GAUGE, "size", NULL, "Chunk size."},
	{"chunkfs_page_size_bytes", P_GAUGE, "pagesize", NULL, "Chunk page size."},
	{"chunkfs_reset_time_seconds", P_TIME, "reset_time", NULL,
	 "UNIX time the counting period began."},
	{"chunkfs_store_bytes", P_GAUGE, "store_bytes", NULL, "Size of the store."},
	{"chunkfs_free_bytes", P_GAUGE, "free_bytes", NULL, "Free space in the store."},
	{"chunkfs_readonly", P_GAUGE, "readonly", NULL,
	 "1 when the mount refuses changes (read-only, or a metadata write failed)."},
	{"chunkfs_mount_time_seconds", P_TIME, "mount_time", NULL, "UNIX time of the mount."},
};

static void prom_labels(const struct target *t, const char *extra, char *buf, size_t size)
{
	char path[PATH_MAX * 2], mount[PATH_MAX * 2];

	cfs_stat_prom_escape(t->name, path, sizeof(path));
	cfs_stat_prom_escape(t->mount ? t->mount : "", mount, sizeof(mount));
	snprintf(buf, size, "path=\"%s\",kind=\"%s\",mount=\"%s\"%s%s", path,
		 t->root ? "mount" : "chunk", mount, extra ? "," : "", extra ? extra : "");
}

static void print_prom(struct run *r)
{
	static const struct {
		const char *q, *key;
	} quantiles[] = {
		{"0.5", "_lat_p50_us"},
		{"0.9", "_lat_p90_us"},
		{"0.99", "_lat_p99_us"},
		{"0.999", "_lat_p999_us"},
	};
	const char *last = "";

	for (size_t m = 0; m < sizeof(prom_metrics) / sizeof(prom_metrics[0]); m++) {
		const struct prom_metric *pm = &prom_metrics[m];

		if (strcmp(last, pm->name) != 0) {
			printf("# HELP %s %s\n# TYPE %s %s\n", pm->name, pm->help, pm->name,
			       pm->kind == P_COUNTER   ? "counter"
			       : pm->kind == P_SUMMARY ? "summary"
						       : "gauge");
			last = pm->name;
		}
		for (size_t i = 0; i < r->n; i++) {
			const struct target *t = &r->t[i];
			char labels[PATH_MAX * 5], key[64], ql[32];
			uint64_t v;
			double d;

			if (!t->have)
				continue;
			prom_labels(t, pm->label, labels, sizeof(labels));
			if (pm->kind == P_SUMMARY) {
				for (size_t q = 0; q < 4; q++) {
					snprintf(key, sizeof(key), "%s%s", pm->key,
						 quantiles[q].key);
					if (!cfs_cs_line_u64(t->cur->line, key, &v))
						continue;
					snprintf(ql, sizeof(ql), "quantile=\"%s\"", quantiles[q].q);
					prom_labels(t, ql, labels, sizeof(labels));
					printf("%s{%s} %.6f\n", pm->name, labels, (double)v / 1e6);
				}
				prom_labels(t, NULL, labels, sizeof(labels));
				snprintf(key, sizeof(key), "%s_lat_sum_us", pm->key);
				if (cfs_cs_line_u64(t->cur->line, key, &v))
					printf("%s_sum{%s} %.6f\n", pm->name, labels,
					       (double)v / 1e6);
				snprintf(key, sizeof(key), "%s_lat_count", pm->key);
				if (cfs_cs_line_u64(t->cur->line, key, &v))
					printf("%s_count{%s} %" PRIu64 "\n", pm->name, labels, v);
			} else if (pm->kind == P_TIME) {
				if (cfs_cs_line_double(t->cur->line, pm->key, &d))
					printf("%s{%s} %.6f\n", pm->name, labels, d);
			} else if (cfs_cs_line_u64(t->cur->line, pm->key, &v)) {
				printf("%s{%s} %" PRIu64 "\n", pm->name, labels, v);
			}
		}
	}
	/* The store's identity as labels of a constant. */
	printf("# HELP chunkfs_info Store of a chunkfs mount.\n# TYPE chunkfs_info gauge\n");
	for (size_t i = 0; i < r->n; i++) {
		const struct target *t = &r->t[i];
		char source[PATH_MAX], backend[64], es[PATH_MAX * 2], eb[128], labels[PATH_MAX * 5];

		if (!t->have || !t->root ||
		    !cfs_cs_line_get(t->cur->line, "source", source, sizeof(source)) ||
		    !cfs_cs_line_get(t->cur->line, "backend", backend, sizeof(backend)))
			continue;
		cfs_stat_prom_escape(source, es, sizeof(es));
		cfs_stat_prom_escape(backend, eb, sizeof(eb));
		prom_labels(t, NULL, labels, sizeof(labels));
		printf("chunkfs_info{%s,source=\"%s\",backend=\"%s\"} 1\n", labels, es, eb);
	}
}

/* ---- main ---------------------------------------------------------------------------------- */

static void sample_all(struct run *r)
{
	for (size_t i = 0; i < r->n; i++) {
		struct target *t = &r->t[i];
		struct cfs_stat_sample *swap = t->prev;
		int ret;

		t->prev = t->cur;
		t->cur = swap;
		ret = take_sample(r, t);
		if (ret == -ENOENT && t->found) {
			t->have = false; /* deleted since the walk: not an error */
			continue;
		}
		if (ret) {
			if (!t->failed)
				fprintf(stderr, "chunkfs stat: %s: %s\n", t->name, strerror(-ret));
			t->failed = true;
			t->have = false;
			r->status = 2;
			continue;
		}
		t->have = true;
	}
}

static void reset_all(struct run *r)
{
	for (size_t i = 0; i < r->n; i++) {
		if (setxattr(r->t[i].name, CFS_CS_PREFIX "reset", "1", 1, 0) == 0)
			continue;
		fprintf(stderr, "chunkfs stat: %s: cannot reset: %s\n", r->t[i].name,
			strerror(errno));
		r->status = 2;
	}
}

/* Options may come anywhere (GNU style); targets are collected in order
 * into targets[] (argv pointers). */
static int parse_options(struct run *r, int argc, char **argv, char **targets, int *ntargets)
{
	bool only_targets = false;
	int i;

	*ntargets = 0;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		char *end;

		if (only_targets || a[0] != '-' || !a[1]) {
			targets[(*ntargets)++] = argv[i];
			continue;
		}
		if (strcmp(a, "--") == 0) {
			only_targets = true;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		} else if (strcmp(a, "--json") == 0) {
			r->format = FMT_JSON;
		} else if (strcmp(a, "--prom") == 0) {
			r->format = FMT_PROM;
		} else if (strcmp(a, "-z") == 0) {
			r->reset = true;
		} else if (strcmp(a, "-i") == 0 && i + 1 < argc) {
			r->interval_s = strtod(argv[++i], &end);
			if (*end || !(r->interval_s > 0) || r->interval_s > 86400) {
				fprintf(stderr, "chunkfs stat: bad interval '%s'\n", argv[i]);
				return -EINVAL;
			}
		} else if (strcmp(a, "-c") == 0 && i + 1 < argc) {
			errno = 0;
			r->count = strtoul(argv[++i], &end, 10);
			if (errno || *end || r->count == 0 || argv[i][0] == '-') {
				fprintf(stderr, "chunkfs stat: bad count '%s'\n", argv[i]);
				return -EINVAL;
			}
		} else {
			fprintf(stderr, "chunkfs stat: unknown option '%s'\n", a);
			usage(stderr);
			return -EINVAL;
		}
	}
	if (r->count && r->interval_s == 0) {
		fprintf(stderr, "chunkfs stat: -c needs -i\n");
		return -EINVAL;
	}
	return 0;
}

static void sleep_until(struct timespec *next, double interval_s)
{
	long long ns = (long long)(interval_s * 1e9);

	next->tv_sec += ns / 1000000000;
	next->tv_nsec += ns % 1000000000;
	if (next->tv_nsec >= 1000000000) {
		next->tv_sec++;
		next->tv_nsec -= 1000000000;
	}
	while (!stop_requested &&
	       clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, next, NULL) == EINTR)
		;
}

int cfs_statcmd_main(int argc, char **argv)
{
	struct run r = {.format = FMT_TABLE};
	struct timespec next, t0, t1;
	unsigned long reports = 0;
	char **targets;
	int ntargets, ret = 0;

	targets = calloc((size_t)argc, sizeof(*targets));
	if (!targets)
		return 2;
	if (parse_options(&r, argc, argv, targets, &ntargets)) {
		free(targets);
		return 1;
	}
	r.hist_text = malloc(HIST_TEXT_MAX);
	if (!r.hist_text) {
		free(targets);
		return 2;
	}
	if (ntargets == 0)
		ret = add_all_mounts(&r);
	for (int i = 0; i < ntargets && !ret; i++) {
		int err = add_arg(&r, targets[i]);

		if (err)
			r.status = 2;
		if (err == -ENOMEM || err == -E2BIG)
			ret = err;
	}
	free(targets);
	if (ret || r.n == 0) {
		if (ret == -ENOMEM)
			fprintf(stderr, "chunkfs stat: out of memory\n");
		else if (ret == -E2BIG)
			fprintf(stderr, "chunkfs stat: more than %u chunks: name fewer\n",
				TARGETS_MAX);
		r.status = 2;
		goto out_free;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (r.reset)
		reset_all(&r);
	clock_gettime(CLOCK_MONOTONIC, &next);
	t0 = next;
	for (;;) {
		sample_all(&r);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (r.format == FMT_TABLE)
			print_table(&r, reports == 0,
				    (double)(t1.tv_sec - t0.tv_sec) +
					    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
		else if (r.format == FMT_JSON)
			print_json(&r, reports == 0);
		else
			print_prom(&r);
		fflush(stdout);
		t0 = t1;
		reports++;
		if (r.interval_s == 0 || (r.count && reports >= r.count) || stop_requested)
			break;
		sleep_until(&next, r.interval_s);
		if (stop_requested)
			break;
	}
out_free:
	for (size_t i = 0; i < r.n; i++) {
		free(r.t[i].name);
		free(r.t[i].mount);
		free(r.t[i].prev);
		free(r.t[i].cur);
	}
	free(r.t);
	free(r.hist_text);
	return r.status;
}
