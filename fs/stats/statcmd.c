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
 * Pools (fs/POOLS.md): each chunk's user.chunkfs.store is read with its
 * line. JSON always carries it, and a "stores" array of per-store sums on
 * each mount; the table (a store column, a row of sums per store before the
 * "(all)" row) and Prometheus (a store label, chunkfs_store_* series) show
 * them for chunks of a pool of several stores only, so a single store's
 * table and series stay what they were. A chunk's mount is found by its
 * device: a mount point given or found, else the top of its path on the
 * same device.
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
/* Summable keys of a chunk's line (about 50 today). */
#define SUM_KEYS_MAX 128u

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
	bool rated;  /* rates holds this report's numbers */
	struct cfs_stat_sample *prev, *cur;
	struct cfs_stat_rates rates;
	struct store_sum *sums; /* a mount root: its chunks summed per store */
	size_t nsums;
};

/* The mount a target is on, by device. */
struct mount_info {
	dev_t dev;
	char *root;	/* its mount point */
	char *stores;	/* user.chunkfs.stores at this report (NULL: unread) */
	unsigned count; /* lines of stores: more than one for a pool */
};

/* The chunks of one mount on one store (or on the stores a half-done move
 * has them on: their label, as the chunk shows it), summed. */
struct store_sum {
	char label[CFS_STAT_STORE_TEXT];
	size_t chunks;
	struct cfs_stat_rates rates;
	unsigned nkeys;
	struct {
		char name[32];
		uint64_t value;
	} key[SUM_KEYS_MAX];
};

struct run {
	enum format format;
	double interval_s; /* 0: one report */
	unsigned long count;
	bool reset;
	struct target *t;
	size_t n, cap;
	struct mount_info *m;
	size_t nm;
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
		   "below it and the mount-wide totals; on a pool of several stores, each\n"
		   "chunk's store and, per store, the sums of its chunks.\n");
}

/* ---- targets ------------------------------------------------------------------- */

static int note_mount(struct run *r, const char *path, dev_t dev);

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
	return note_mount(r, name, st->st_dev);
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

static struct mount_info *mount_of(const struct run *r, dev_t dev)
{
	for (size_t i = 0; i < r->nm; i++)
		if (r->m[i].dev == dev)
			return &r->m[i];
	return NULL;
}

/* The top directory of path's own device: the mount point. NULL when it
 * cannot be resolved (then the chunk's mount is unknown: no pool columns). */
static char *mount_point_of(const char *path, dev_t dev)
{
	char *p = realpath(path, NULL);
	struct stat st;

	while (p) {
		char *slash = strrchr(p, '/');

		if (!slash || slash == p)
			break; /* the mount point is "/" or just below */
		*slash = '\0';
		if (stat(p, &st) || st.st_dev != dev) {
			*slash = '/';
			break;
		}
	}
	if (p && !is_chunkfs_root(p)) {
		free(p);
		p = NULL;
		errno = ENOENT;
	}
	return p;
}

/* Note the mount of a target on dev (found by walking up from path unless
 * known). Only -ENOMEM fails: an unknown mount just shows no stores. */
static int note_mount(struct run *r, const char *path, dev_t dev)
{
	struct mount_info *bigger;
	char *root;

	if (mount_of(r, dev))
		return 0;
	root = mount_point_of(path, dev);
	if (!root)
		return errno == ENOMEM ? -ENOMEM : 0;
	bigger = realloc(r->m, (r->nm + 1) * sizeof(*bigger));
	if (!bigger) {
		free(root);
		return -ENOMEM;
	}
	r->m = bigger;
	r->m[r->nm++] = (struct mount_info){.dev = dev, .root = root};
	return 0;
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
	s->store[0] = '\0';
	if (!t->root) {
		n = getxattr(t->name, CFS_CS_PREFIX "store", s->store, sizeof(s->store) - 1);
		s->store[n > 0 ? n : 0] = '\0';
	}
	if (r->interval_s > 0 &&
	    read_hist(t->name, CFS_CS_PREFIX "read_hist", r->hist_text, &s->hist[0]) == 0 &&
	    read_hist(t->name, CFS_CS_PREFIX "write_hist", r->hist_text, &s->hist[1]) == 0)
		s->have_hist = true;
	return 0;
}

/* The mount's user.chunkfs.stores, one line per store; count 0 when it
 * cannot be read (a daemon without pools). */
static void read_stores(struct mount_info *m)
{
	ssize_t n = getxattr(m->root, CFS_CS_PREFIX "stores", NULL, 0);
	char *text;

	m->count = 0;
	if (m->stores)
		m->stores[0] = '\0'; /* nothing left of the last report's */
	if (n < 0)
		return;
	text = realloc(m->stores, (size_t)n + 1);
	if (!text)
		return;
	m->stores = text;
	/* The probe's text is kept for the read after it (chunkstat.h). */
	n = getxattr(m->root, CFS_CS_PREFIX "stores", text, (size_t)n);
	text[n > 0 ? n : 0] = '\0';
	for (const char *p = text; *p; p++)
		m->count += *p == '\n';
}

/* A chunk is shown with its store in the table and Prometheus when its
 * mount has several stores. */
static bool on_pool(const struct run *r, const struct target *t)
{
	const struct mount_info *m = mount_of(r, t->dev);

	return m && m->count > 1;
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
	out->r_lat_n = d[2];
	out->w_lat_n = d[6];
	out->f_lat_n = d[9];
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

/* The mean of two means of na and nb values. */
static double mean_of(double a, uint64_t na, double b, uint64_t nb)
{
	return na + nb ? (a * (double)na + b * (double)nb) / (double)(na + nb) : 0;
}

void cfs_stat_rates_add(struct cfs_stat_rates *sum, const struct cfs_stat_rates *r)
{
	sum->r_await_ms = mean_of(sum->r_await_ms, sum->r_lat_n, r->r_await_ms, r->r_lat_n);
	sum->w_await_ms = mean_of(sum->w_await_ms, sum->w_lat_n, r->w_await_ms, r->w_lat_n);
	sum->f_await_ms = mean_of(sum->f_await_ms, sum->f_lat_n, r->f_await_ms, r->f_lat_n);
	sum->r_lat_n += r->r_lat_n;
	sum->w_lat_n += r->w_lat_n;
	sum->f_lat_n += r->f_lat_n;
	sum->r_s += r->r_s;
	sum->w_s += r->w_s;
	sum->f_s += r->f_s;
	sum->r_mb_s += r->r_mb_s;
	sum->w_mb_s += r->w_mb_s;
	sum->inflight += r->inflight;
	sum->errors += r->errors;
	sum->size_bytes += r->size_bytes;
	sum->sum = true;
}

static bool ends_with(const char *s, const char *end)
{
	size_t n = strlen(s), e = strlen(end);

	return n >= e && !strcmp(s + n - e, end);
}

bool cfs_stat_summable(const char *key)
{
	static const char *const whole[] = {"pagesize", "time", "reset_time", "inflight_max"};
	static const char *const ends[] = {"_min_us", "_max_us", "_avg_us", "_p50_us",
					   "_p90_us", "_p99_us", "_p999_us"};

	for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++)
		if (!strcmp(key, whole[i]))
			return false;
	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
		if (ends_with(key, ends[i]))
			return false;
	return true;
}

/* ---- per-store sums ---------------------------------------------------------------------- */

/* The next key=value pair of a line from *p: its key into key, *p moved
 * past it. Returns where the pair starts, NULL when none is left; a key
 * too long for key is passed over. */
static const char *next_pair(const char **p, char *key, size_t size)
{
	while (**p) {
		const char *at = *p, *eq = strchr(at, '='), *end;

		if (!eq)
			return NULL;
		end = strchr(eq, ' ');
		*p = end ? end + 1 : eq + strlen(eq);
		if ((size_t)(eq - at) < size) {
			memcpy(key, at, (size_t)(eq - at));
			key[eq - at] = '\0';
			return at;
		}
	}
	return NULL;
}

static void sum_keys(struct store_sum *g, const char *line)
{
	const char *p = line, *pair;
	char key[sizeof(g->key[0].name)];
	uint64_t v;

	while ((pair = next_pair(&p, key, sizeof(key)))) {
		unsigned k;

		if (!cfs_stat_summable(key) || !cfs_cs_line_u64(pair, key, &v))
			continue;
		for (k = 0; k < g->nkeys && strcmp(g->key[k].name, key); k++)
			;
		if (k == g->nkeys) {
			if (k == SUM_KEYS_MAX)
				continue;
			memcpy(g->key[k].name, key, sizeof(key));
			g->key[k].value = 0;
			g->nkeys++;
		}
		g->key[k].value += v;
	}
}

/* A summed key's value; false when no chunk had it. */
static bool sum_get(const struct store_sum *g, const char *key, uint64_t *v)
{
	for (unsigned k = 0; k < g->nkeys; k++)
		if (!strcmp(g->key[k].name, key)) {
			*v = g->key[k].value;
			return true;
		}
	return false;
}

static struct store_sum *sum_group(struct target *root, const char *label)
{
	struct store_sum *bigger;

	for (size_t i = 0; i < root->nsums; i++)
		if (!strcmp(root->sums[i].label, label))
			return &root->sums[i];
	bigger = realloc(root->sums, (root->nsums + 1) * sizeof(*bigger));
	if (!bigger)
		return NULL;
	root->sums = bigger;
	bigger = &root->sums[root->nsums++];
	memset(bigger, 0, sizeof(*bigger));
	snprintf(bigger->label, sizeof(bigger->label), "%s", label);
	return bigger;
}

/*
 * root's chunks in this report (every target on its device) summed per
 * store: one group per store of user.chunkfs.stores, in its order (empty
 * ones too), then one per other label a chunk shows (a half-done move's
 * "ssd0,hdd0", a store added since). Out of memory: fewer groups.
 */
static void sum_stores(struct run *r, struct target *root)
{
	const struct mount_info *m = mount_of(r, root->dev);
	const char *line = m && m->stores ? m->stores : "";

	while (*line) {
		char label[CFS_STAT_STORE_TEXT];

		/* "LABEL index=... state=..." */
		snprintf(label, sizeof(label), "%.*s", (int)strcspn(line, " \n"), line);
		sum_group(root, label);
		line += strcspn(line, "\n");
		line += *line == '\n';
	}
	for (size_t i = 0; i < r->n; i++) {
		const struct target *t = &r->t[i];
		struct store_sum *g;

		if (t->root || !t->rated || t->dev != root->dev || !t->cur->store[0])
			continue;
		g = sum_group(root, t->cur->store);
		if (!g)
			continue;
		g->chunks++;
		cfs_stat_rates_add(&g->rates, &t->rates);
		sum_keys(g, t->cur->line);
	}
}

/* This report's rates of every target, and the sums of every mount root. */
static void rate_all(struct run *r, bool first)
{
	for (size_t i = 0; i < r->n; i++) {
		struct target *t = &r->t[i];

		t->rated = t->have && !cfs_stat_rates(t->cur, first ? NULL : t->prev, &t->rates);
		free(t->sums);
		t->sums = NULL;
		t->nsums = 0;
	}
	for (size_t i = 0; i < r->n; i++)
		if (r->t[i].root && r->t[i].rated)
			sum_stores(r, &r->t[i]);
}

/* ---- the table --------------------------------------------------------------------------- */

/* The chunk column: as wide as the longest name, within these bounds; a
 * longer name keeps its end (the chunk's own name) after "...". The store
 * column likewise, when there is one. */
#define NAME_WIDTH_MIN 24
#define NAME_WIDTH_MAX 60
#define STORE_WIDTH_MIN 5
#define STORE_WIDTH_MAX 24

struct widths {
	int name;
	int store; /* 0: no store column */
};

/* Terminal columns of a name: one per UTF-8 character (a continuation byte
 * takes none). */
static int name_columns(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* text in exactly width columns: padded, or its last columns after "..."
 * (cut on a character boundary); control characters (a newline in a file
 * name) as '?', so a row stays one line. */
static void print_cell(FILE *f, const char *text, int width)
{
	int cols = name_columns(text), pad = width - cols;

	if (cols > width) {
		int skip = cols - (width - 3);

		fputs("...", f);
		while (skip > 0) { /* past one byte; a lead byte ends a character */
			text++;
			skip -= ((unsigned char)*text & 0xc0) != 0x80;
		}
		pad = 0;
	}
	for (; *text; text++)
		fputc((unsigned char)*text < 0x20 || *text == 0x7f ? '?' : *text, f);
	fprintf(f, "%*s", pad, "");
}

static void print_header(FILE *f, const struct widths *w)
{
	print_cell(f, "chunk", w->name);
	if (w->store) {
		fputc(' ', f);
		print_cell(f, "store", w->store);
	}
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

/* A row; store is ignored without a store column. A sum has no
 * percentiles and no maximum queue: "-". */
static void print_row(FILE *f, const struct widths *w, const char *name, const char *store,
		      const struct cfs_stat_rates *r)
{
	char size[16], r_p99[24] = "-", w_p99[24] = "-", maxq[24] = "-";

	if (r->root)
		snprintf(size, sizeof(size), "-");
	else
		human_size(r->size_bytes, size, sizeof(size));
	if (!r->sum) {
		snprintf(r_p99, sizeof(r_p99), "%.2f", r->r_p99_ms);
		snprintf(w_p99, sizeof(w_p99), "%.2f", r->w_p99_ms);
		snprintf(maxq, sizeof(maxq), "%" PRIu64, r->inflight_max);
	}
	print_cell(f, name, w->name);
	if (w->store) {
		fputc(' ', f);
		print_cell(f, store, w->store);
	}
	fprintf(f,
		" %9.1f %8.2f %8.2f %8s %9.1f %8.2f %8.2f %8s %8.1f %8.2f %6" PRIu64
		" %6s %5" PRIu64 " %7s\n",
		r->r_s, r->r_mb_s, r->r_await_ms, r_p99, r->w_s, r->w_mb_s, r->w_await_ms, w_p99,
		r->f_s, r->f_await_ms, r->inflight, maxq, r->errors, size);
}

static void widen(int *width, const char *text, int min, int max)
{
	int cols = name_columns(text);

	if (*width < min)
		*width = min;
	if (cols > *width)
		*width = cols > max ? max : cols;
}

/* One row: its widths into measure, or printed in w's when measure is NULL. */
static void table_row(const struct widths *w, struct widths *measure, const char *name,
		      const char *store, const struct cfs_stat_rates *rates)
{
	if (!measure) {
		print_row(stdout, w, name, store, rates);
		return;
	}
	widen(&measure->name, name, NAME_WIDTH_MIN, NAME_WIDTH_MAX);
	if (measure->store)
		widen(&measure->store, store, STORE_WIDTH_MIN, STORE_WIDTH_MAX);
}

/*
 * The rows of a report in target order: each chunk, and for a mount point
 * of a pool its chunks' sums per store ("MOUNT (N chunks)") before its
 * "MOUNT (all)" row. With measure, the widths the rows need instead.
 */
static void table_rows(const struct run *r, const struct widths *w, struct widths *measure)
{
	char name[PATH_MAX + 32];

	for (size_t i = 0; i < r->n; i++) {
		const struct target *t = &r->t[i];

		if (!t->rated)
			continue;
		if (!t->root) {
			table_row(w, measure, t->name, t->cur->store[0] ? t->cur->store : "-",
				  &t->rates);
			continue;
		}
		for (size_t g = 0; on_pool(r, t) && g < t->nsums; g++) {
			const struct store_sum *sum = &t->sums[g];

			snprintf(name, sizeof(name), "%s (%zu chunk%s)", t->name, sum->chunks,
				 sum->chunks == 1 ? "" : "s");
			table_row(w, measure, name, sum->label, &sum->rates);
		}
		snprintf(name, sizeof(name), "%s (all)", t->name);
		table_row(w, measure, name, "-", &t->rates);
	}
}

static void print_table(struct run *r, bool first, double interval_s)
{
	struct widths w = {NAME_WIDTH_MIN, 0};
	char when[64];
	time_t now = time(NULL);
	struct tm tm;

	for (size_t i = 0; i < r->n; i++)
		if (r->t[i].rated && on_pool(r, &r->t[i]))
			w.store = STORE_WIDTH_MIN;
	table_rows(r, NULL, &w);
	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	if (first)
		printf("%s  since reset\n", when);
	else
		printf("%s  interval %.2f s\n", when, interval_s);
	print_header(stdout, &w);
	table_rows(r, &w, NULL);
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
	const char *p = line, *pair;
	char key[64], value[CFS_CS_TEXT_MAX / 4];
	bool first = true;

	fputc('{', f);
	while ((pair = next_pair(&p, key, sizeof(key)))) {
		if (!cfs_cs_line_get(pair, key, value, sizeof(value)))
			continue;
		fprintf(f, "%s", first ? "" : ",");
		json_string(f, key);
		fputc(':', f);
		if (is_decimal(value))
			fputs(value, f);
		else
			json_string(f, value);
		first = false;
	}
	fputc('}', f);
}

/* A sum's percentiles and period do not exist: null. */
static void json_rates(FILE *f, const struct cfs_stat_rates *x)
{
	char seconds[32] = "null", r_p99[32] = "null", w_p99[32] = "null";

	if (!x->sum) {
		snprintf(seconds, sizeof(seconds), "%.6f", x->seconds);
		snprintf(r_p99, sizeof(r_p99), "%.3f", x->r_p99_ms);
		snprintf(w_p99, sizeof(w_p99), "%.3f", x->w_p99_ms);
	}
	fprintf(f,
		"{\"seconds\":%s,\"r_s\":%.3f,\"r_mb_s\":%.6f,\"r_await_ms\":%.3f,"
		"\"r_p99_ms\":%s,\"w_s\":%.3f,\"w_mb_s\":%.6f,\"w_await_ms\":%.3f,"
		"\"w_p99_ms\":%s,\"fsync_s\":%.3f,\"f_await_ms\":%.3f,\"errors\":%" PRIu64 "}",
		seconds, x->r_s, x->r_mb_s, x->r_await_ms, r_p99, x->w_s, x->w_mb_s, x->w_await_ms,
		w_p99, x->f_s, x->f_await_ms, x->errors);
}

/* A mount's "stores": its chunks' sums per store. */
static void json_stores(FILE *f, const struct target *t)
{
	fputs(",\"stores\":[", f);
	for (size_t g = 0; g < t->nsums; g++) {
		const struct store_sum *sum = &t->sums[g];

		fprintf(f, "%s{\"label\":", g ? "," : "");
		json_string(f, sum->label);
		fprintf(f, ",\"chunks\":%zu,\"counters\":{", sum->chunks);
		for (unsigned k = 0; k < sum->nkeys; k++) {
			fputs(k ? "," : "", f);
			json_string(f, sum->key[k].name);
			fprintf(f, ":%" PRIu64, sum->key[k].value);
		}
		fputs("},\"rates\":", f);
		json_rates(f, &sum->rates);
		fputc('}', f);
	}
	fputc(']', f);
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

		if (!t->rated)
			continue;
		printf("%s{\"path\":", any ? "," : "");
		json_string(stdout, t->name);
		printf(",\"kind\":\"%s\",\"mount\":", t->root ? "mount" : "chunk");
		if (t->mount)
			json_string(stdout, t->mount);
		else
			printf("null");
		if (!t->root) {
			printf(",\"store\":");
			if (t->cur->store[0])
				json_string(stdout, t->cur->store);
			else
				printf("null");
		}
		printf(",\"counters\":");
		json_counters(stdout, t->cur->line);
		printf(",\"rates\":");
		json_rates(stdout, &t->rates);
		if (t->root)
			json_stores(stdout, t);
		printf("}");
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

/* Room for a sample's labels: path, mount and store escaped (each byte
 * at most two), and the fixed ones. */
#define PROM_LABELS_MAX (PATH_MAX * 4 + CFS_STAT_STORE_TEXT * 2 + 256)

/* path, kind, mount, and a chunk of a pool's store. */
static void prom_labels(const struct run *r, const struct target *t, const char *extra, char *buf,
			size_t size)
{
	char path[PATH_MAX * 2], mount[PATH_MAX * 2], store[CFS_STAT_STORE_TEXT * 2];
	bool with_store = !t->root && on_pool(r, t);

	cfs_stat_prom_escape(t->name, path, sizeof(path));
	cfs_stat_prom_escape(t->mount ? t->mount : "", mount, sizeof(mount));
	cfs_stat_prom_escape(with_store ? t->cur->store : "", store, sizeof(store));
	snprintf(buf, size, "path=\"%s\",kind=\"%s\",mount=\"%s\"%s%s%s%s%s", path,
		 t->root ? "mount" : "chunk", mount, with_store ? ",store=\"" : "", store,
		 with_store ? "\"" : "", extra ? "," : "", extra ? extra : "");
}

/* A store's series: the mount point and the store. */
static void prom_store_labels(const struct target *root, const struct store_sum *g,
			      const char *extra, char *buf, size_t size)
{
	char mount[PATH_MAX * 2], store[CFS_STAT_STORE_TEXT * 2];

	cfs_stat_prom_escape(root->name, mount, sizeof(mount));
	cfs_stat_prom_escape(g->label, store, sizeof(store));
	snprintf(buf, size, "mount=\"%s\",store=\"%s\"%s%s", mount, store, extra ? "," : "",
		 extra ? extra : "");
}

static bool prom_pool_root(const struct run *r, const struct target *t)
{
	return t->root && t->rated && on_pool(r, t);
}

/* Whether some store of a pool in the report has key summed. */
static bool prom_store_has(const struct run *r, const char *key)
{
	uint64_t v;

	for (size_t i = 0; i < r->n; i++)
		for (size_t g = 0; prom_pool_root(r, &r->t[i]) && g < r->t[i].nsums; g++)
			if (sum_get(&r->t[i].sums[g], key, &v))
				return true;
	return false;
}

/*
 * chunkfs_store_*: per store of each pool mount, the sums of its chunks'
 * series of every chunk metric that adds up (chunkfs_X as
 * chunkfs_store_X; summaries with _sum and _count only), and
 * chunkfs_store_chunks.
 */
static void print_prom_stores(const struct run *r)
{
	char labels[PROM_LABELS_MAX], name[96], key[64];
	const char *last = "";
	bool pool = false;
	uint64_t v;

	for (size_t i = 0; i < r->n; i++)
		pool |= prom_pool_root(r, &r->t[i]) && r->t[i].nsums;
	if (!pool)
		return;
	printf("# HELP chunkfs_store_chunks Chunks on the store.\n"
	       "# TYPE chunkfs_store_chunks gauge\n");
	for (size_t i = 0; i < r->n; i++)
		for (size_t g = 0; prom_pool_root(r, &r->t[i]) && g < r->t[i].nsums; g++) {
			prom_store_labels(&r->t[i], &r->t[i].sums[g], NULL, labels, sizeof(labels));
			printf("chunkfs_store_chunks{%s} %zu\n", labels, r->t[i].sums[g].chunks);
		}
	for (size_t m = 0; m < sizeof(prom_metrics) / sizeof(prom_metrics[0]); m++) {
		const struct prom_metric *pm = &prom_metrics[m];
		bool summary = pm->kind == P_SUMMARY;

		snprintf(key, sizeof(key), summary ? "%s_lat_count" : "%s", pm->key);
		if (pm->kind == P_TIME || !cfs_stat_summable(key) || !prom_store_has(r, key))
			continue;
		snprintf(name, sizeof(name), "chunkfs_store_%s", pm->name + strlen("chunkfs_"));
		if (strcmp(last, pm->name) != 0) {
			printf("# HELP %s %s Summed over the store's chunks.\n# TYPE %s %s\n", name,
			       pm->help ? pm->help : "", name,
			       pm->kind == P_COUNTER   ? "counter"
			       : pm->kind == P_SUMMARY ? "summary"
						       : "gauge");
			last = pm->name;
		}
		for (size_t i = 0; i < r->n; i++)
			for (size_t g = 0; prom_pool_root(r, &r->t[i]) && g < r->t[i].nsums; g++) {
				const struct store_sum *sum = &r->t[i].sums[g];

				prom_store_labels(&r->t[i], sum, pm->label, labels, sizeof(labels));
				if (!summary) {
					if (sum_get(sum, key, &v))
						printf("%s{%s} %" PRIu64 "\n", name, labels, v);
					continue;
				}
				snprintf(key, sizeof(key), "%s_lat_sum_us", pm->key);
				if (sum_get(sum, key, &v))
					printf("%s_sum{%s} %.6f\n", name, labels, (double)v / 1e6);
				snprintf(key, sizeof(key), "%s_lat_count", pm->key);
				if (sum_get(sum, key, &v))
					printf("%s_count{%s} %" PRIu64 "\n", name, labels, v);
			}
	}
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
			char labels[PROM_LABELS_MAX], key[64], ql[32];
			uint64_t v;
			double d;

			if (!t->have)
				continue;
			prom_labels(r, t, pm->label, labels, sizeof(labels));
			if (pm->kind == P_SUMMARY) {
				for (size_t q = 0; q < 4; q++) {
					snprintf(key, sizeof(key), "%s%s", pm->key,
						 quantiles[q].key);
					if (!cfs_cs_line_u64(t->cur->line, key, &v))
						continue;
					snprintf(ql, sizeof(ql), "quantile=\"%s\"", quantiles[q].q);
					prom_labels(r, t, ql, labels, sizeof(labels));
					printf("%s{%s} %.6f\n", pm->name, labels, (double)v / 1e6);
				}
				prom_labels(r, t, NULL, labels, sizeof(labels));
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
		char source[PATH_MAX], backend[64], es[PATH_MAX * 2], eb[128],
			labels[PROM_LABELS_MAX];

		if (!t->have || !t->root ||
		    !cfs_cs_line_get(t->cur->line, "source", source, sizeof(source)) ||
		    !cfs_cs_line_get(t->cur->line, "backend", backend, sizeof(backend)))
			continue;
		cfs_stat_prom_escape(source, es, sizeof(es));
		cfs_stat_prom_escape(backend, eb, sizeof(eb));
		prom_labels(r, t, NULL, labels, sizeof(labels));
		printf("chunkfs_info{%s,source=\"%s\",backend=\"%s\"} 1\n", labels, es, eb);
	}
	print_prom_stores(r);
}

/* ---- main ---------------------------------------------------------------------------------- */

static void sample_all(struct run *r)
{
	for (size_t i = 0; i < r->nm; i++)
		read_stores(&r->m[i]);
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
		rate_all(&r, reports == 0);
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
		free(r.t[i].sums);
	}
	for (size_t i = 0; i < r.nm; i++) {
		free(r.m[i].root);
		free(r.m[i].stores);
	}
	free(r.t);
	free(r.m);
	free(r.hist_text);
	return r.status;
}
