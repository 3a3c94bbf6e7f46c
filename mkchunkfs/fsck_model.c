/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fsck_model.c — fsck.chunkfs's own model of a store's metadata: decode the
 * record payloads of the snapshot and the log (fs/format/FORMAT.md 5.3), apply them
 * with the replay rules of that section, then check what they add up to.
 *
 * Deliberately not the daemon's namespace: the replay rules are re-read
 * from FORMAT.md, so a bug in fs/meta/namespace.c's replay shows up as a
 * difference instead of being trusted twice. Records are applied as
 * tolerantly as the daemon applies them (a record about an object that no
 * longer exists is skipped), and what the daemon would refuse at mount
 * (a payload too short for its type, an invalid type, a mapping outside the
 * data region, a written-state range beyond its unit) is an error here.
 *
 * Main invariant of the check: every data unit has at most one owner (a
 * unit holding pieces: every byte of it, and no file maps it whole), every
 * directory entry names a live inode, every inode's link count equals the
 * entries naming it (directories: 2 + subdirectories), every directory but
 * the root has exactly one entry, and every directory is reachable from the
 * root (which rules out cycles).
 *
 * What it does not do: I/O, printing (fsck_problem() does), repairs.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "fs/base/hash.h"
#include "mkchunkfs/fsck.h"

/* Mirrors of the daemon's limits (fs/meta/namespace.h, fs/meta/journal.c); fsck does
 * not include the daemon's headers so that it reads the format, not code. */
#define M_NAME_MAX 255u
#define M_SYMLINK_MAX 4095u
#define M_XATTR_NAME_MAX 255u
#define M_XATTR_VALUE_MAX 65536u
#define M_TXN_RECORDS_MAX 4096u
#define M_ROOT_INO 1ull
#define M_TYPE_PRIVATE 0x8000u

/* Record flag: the transaction continues (fs/meta/journal.h CFS_JREC_MORE). */
#define M_JREC_MORE 0x0001u
#define M_RENAME_EXCHANGE 0x1u
#define M_WRITTEN_F_BITS 0x1u

/* Fixed payload sizes (FORMAT.md 5.3). */
#define P_FS_INFO 16u
#define P_INODE 88u
#define P_INODE_DELETE 16u
#define P_DIRENT 32u
#define P_DIRENT_RM 16u
#define P_RENAME 72u
#define P_EXTENT 32u
#define P_WRITTEN 40u
#define P_XATTR 24u
#define P_XATTR_RM 16u
#define P_PLACE 32u
#define P_PIECE 32u
#define M_PIECE_MIN 4096u /* the format's smallest piece */

/* The tables start at 1024 buckets and double as they fill (fs/base/hash.h). */
#define TABLE_BITS 10

/* ---- the objects ------------------------------------------------------------ */

enum { WS_NONE, WS_ALL, WS_BITMAP };

/* A run of mapped units of one inode: file units [fu, +count) -> store units
 * [su, +count), one state; a WS_BITMAP run is one unit, and so is a piece
 * (pbytes != 0: the file unit maps [poff, +pbytes) of store unit su; its
 * state covers the piece's sectors). The model keeps its memory
 * proportional to the runs, as the daemon does, so a 100 TB store of large
 * chunks is checked in seconds. */
struct mrun {
	uint64_t fu;
	uint64_t count;
	uint64_t su;
	int state;     /* WS_* */
	uint8_t *bits; /* WS_BITMAP: sectors_per_unit bits, LSB first */
	uint32_t poff; /* a piece: where in su */
	uint32_t pbytes;
};

struct minode {
	struct cfs_hlink link; /* hash: ino */
	uint64_t ino;
	uint64_t generation;
	uint32_t mode;
	uint32_t nlink;
	uint64_t size_bytes;
	uint64_t parent_ino;
	struct mrun *runs; /* sorted by fu, not overlapping */
	size_t nruns;
	size_t capruns;
	/* check */
	uint32_t entries;   /* directory entries naming it */
	uint32_t subdirs;   /* entries in it naming directories */
	uint64_t entry_dir; /* the directory of (one of) its entries */
	bool reached;	    /* from the root */
};

struct mdirent {
	struct cfs_hlink link; /* hash: XXH3(name, seed dir) */
	uint64_t dir;
	uint64_t ino;
	uint64_t cookie;
	uint32_t mode;
	uint32_t name_length;
	char name[];
};

struct fsck_model {
	struct fsck_geom g;
	uint32_t sectors_per_unit;
	struct fsck_report *r;
	struct cfs_htable inodes;
	struct cfs_htable dirents;
	bool in_snapshot;
	uint64_t seq; /* of the record being applied, for messages */
	/* the log's open transaction: [type u16][pad u16][len u32][payload] */
	uint8_t *txn;
	size_t txn_used;
	size_t txn_size;
	uint32_t txn_records;
	uint64_t txn_first_seq;
	bool txn_too_long;
};

static uint64_t name_key(uint64_t dir, const char *name, uint32_t length)
{
	return XXH3_64bits_withSeed(name, length, dir);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static struct minode *inode_find(struct fsck_model *m, uint64_t ino)
{
	struct cfs_hlink *link = cfs_htable_find(&m->inodes, ino);

	return link ? cfs_container_of(link, struct minode, link) : NULL;
}

static struct mdirent *dirent_find(struct fsck_model *m, uint64_t dir, const char *name,
				   uint32_t length)
{
	uint64_t key = name_key(dir, name, length);

	for (struct cfs_hlink *link = cfs_htable_find(&m->dirents, key); link;
	     link = cfs_htable_find_next(link)) {
		struct mdirent *d = cfs_container_of(link, struct mdirent, link);

		if (d->dir == dir && d->name_length == length && !memcmp(d->name, name, length))
			return d;
	}
	return NULL;
}

static void runs_free(struct minode *in)
{
	for (size_t i = 0; i < in->nruns; i++)
		free(in->runs[i].bits);
	free(in->runs);
	in->runs = NULL;
	in->nruns = in->capruns = 0;
}

static void inode_drop(struct fsck_model *m, struct minode *in)
{
	runs_free(in);
	cfs_htable_remove(&m->inodes, &in->link);
	free(in);
}

/* Report a problem with the record being applied. */
static void bad_record(struct fsck_model *m, const char *what)
{
	fsck_problem(m->r, FSCK_ERROR, "%s record %llu: %s", m->in_snapshot ? "snapshot" : "log",
		     (unsigned long long)m->seq, what);
}

/* ---- applying records --------------------------------------------------------- */

static bool valid_type(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFLNK:
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK:
		return true;
	default:
		return false;
	}
}

static int apply_inode(struct fsck_model *m, const uint8_t *p, uint32_t n)
{
	uint64_t ino = get64(p);
	uint32_t mode = get32(p + 16);
	uint32_t target_length = get32(p + 76);
	struct minode *in;

	if (ino == 0)
		return bad_record(m, "inode record with inode number 0"), 0;
	if (!valid_type(mode))
		return bad_record(m, "inode record with an invalid file type"), 0;
	if (target_length > M_SYMLINK_MAX || target_length > n - P_INODE)
		return bad_record(m, "symlink target too long for the record or the limit"), 0;
	in = inode_find(m, ino);
	/* The number now names an object of another type: the old one is gone. */
	if (in && (in->mode & S_IFMT) != (mode & S_IFMT)) {
		inode_drop(m, in);
		in = NULL;
	}
	if (!in) {
		in = calloc(1, sizeof(*in));
		if (!in)
			return -ENOMEM;
		in->ino = ino;
		cfs_htable_insert(&m->inodes, &in->link, ino);
	}
	in->generation = get64(p + 8);
	in->mode = mode;
	in->nlink = get32(p + 20);
	in->size_bytes = get64(p + 40);
	if (S_ISDIR(mode))
		in->parent_ino = get64(p + 80);
	return 0;
}

/* Name `name` in dir becomes ino (replacing what it named). */
static int set_entry(struct fsck_model *m, uint64_t dir_ino, const char *name, uint32_t length,
		     uint64_t ino, uint32_t mode, uint64_t cookie)
{
	struct minode *dir = inode_find(m, dir_ino);
	struct minode *child;
	struct mdirent *d;

	if (!dir || !S_ISDIR(dir->mode))
		return 0;
	if (length == 0 || length > M_NAME_MAX)
		return bad_record(m, "directory entry with an invalid name length"), 0;
	if (memchr(name, '/', length) || memchr(name, '\0', length) ||
	    (length == 1 && name[0] == '.') || (length == 2 && !memcmp(name, "..", 2)))
		bad_record(m, "directory entry with an invalid name");
	d = dirent_find(m, dir_ino, name, length);
	if (d) {
		cfs_htable_remove(&m->dirents, &d->link);
		free(d);
	}
	child = inode_find(m, ino);
	if (child && S_ISDIR(child->mode))
		child->parent_ino = dir_ino;
	d = malloc(sizeof(*d) + length);
	if (!d)
		return -ENOMEM;
	d->dir = dir_ino;
	d->ino = ino;
	d->cookie = cookie;
	d->mode = mode;
	d->name_length = length;
	memcpy(d->name, name, length);
	cfs_htable_insert(&m->dirents, &d->link, name_key(dir_ino, name, length));
	return 0;
}

static void remove_entry(struct fsck_model *m, uint64_t dir_ino, const char *name, uint32_t length)
{
	struct mdirent *d = dirent_find(m, dir_ino, name, length);

	if (d) {
		cfs_htable_remove(&m->dirents, &d->link);
		free(d);
	}
}

/* Index of the first run of in that ends after fu. */
static size_t run_index(const struct minode *in, uint64_t fu)
{
	size_t lo = 0, hi = in->nruns;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (in->runs[mid].fu + in->runs[mid].count <= fu)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Runs being built for a span of an inode (merged as they are added). */
struct runlist {
	struct mrun *e;
	size_t n, cap;
};

static int runlist_add(struct runlist *l, struct mrun r)
{
	if (r.count == 0)
		return 0;
	if (l->n && r.state != WS_BITMAP && !r.pbytes) {
		struct mrun *last = &l->e[l->n - 1];

		if (last->state == r.state && last->fu + last->count == r.fu &&
		    last->su + last->count == r.su && !last->pbytes) {
			last->count += r.count;
			return 0;
		}
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		struct mrun *g = realloc(l->e, cap * sizeof(*g));

		if (!g)
			return -ENOMEM;
		l->e = g;
		l->cap = cap;
	}
	l->e[l->n++] = r;
	return 0;
}

/* The part [a, b) of run r (bits and a piece move with a one-unit run). */
static struct mrun run_piece(const struct mrun *r, uint64_t a, uint64_t b)
{
	return (struct mrun){a, b - a, r->su + (a - r->fu), r->state, r->bits, r->poff, r->pbytes};
}

/* Sectors a run's unit holds: the unit's, or its piece's. */
static uint32_t run_sectors(const struct fsck_model *m, const struct mrun *r)
{
	return r->pbytes ? r->pbytes / m->g.sector_bytes : m->sectors_per_unit;
}

/* Replace runs [lo, hi) of in by l's (which takes their place, in order). */
static int runs_splice(struct minode *in, size_t lo, size_t hi, struct runlist *l)
{
	size_t n = in->nruns - (hi - lo) + l->n;

	if (n > in->capruns) {
		size_t cap = in->capruns ? in->capruns : 8;
		struct mrun *g;

		while (cap < n)
			cap *= 2;
		g = realloc(in->runs, cap * sizeof(*g));
		if (!g)
			return -ENOMEM;
		in->runs = g;
		in->capruns = cap;
	}
	/* An inode without runs that gets none: runs and l->e may be NULL. */
	if (in->runs) {
		memmove(in->runs + lo + l->n, in->runs + hi, (in->nruns - hi) * sizeof(*in->runs));
		if (l->n)
			memcpy(in->runs + lo, l->e, l->n * sizeof(*l->e));
	}
	in->nruns = n;
	return 0;
}

enum span_op { SPAN_MAP, SPAN_UNMAP, SPAN_ALL, SPAN_PIECE };

/*
 * Apply one range operation to in's runs over file units [fu, fu + count):
 *   SPAN_MAP   map store units [su, +count): units already mapping su + offset
 *              (whole) keep their written-state, the rest become unwritten
 *              mappings;
 *   SPAN_UNMAP the range becomes holes;
 *   SPAN_ALL   units mapping su + offset (whole or a piece of it) become
 *              wholly written;
 *   SPAN_PIECE (count 1) map the piece [poff, +pbytes) of su: kept if it is
 *              the mapping already, else an unwritten mapping.
 */
static int apply_span(struct minode *in, enum span_op op, uint64_t fu, uint64_t su, uint64_t count,
		      uint32_t poff, uint32_t pbytes)
{
	uint64_t end = fu + count, pos = fu;
	size_t lo = run_index(in, fu), core_end = lo, first, last;
	struct runlist l = {0};
	int ret = 0;

	while (core_end < in->nruns && in->runs[core_end].fu < end)
		core_end++;
	/* One neighbour on each side, to merge with. */
	first = lo > 0 ? lo - 1 : 0;
	last = core_end < in->nruns ? core_end + 1 : core_end;
	for (size_t i = first; i < lo && !ret; i++)
		ret = runlist_add(&l, in->runs[i]);
	for (size_t i = lo; i < core_end && !ret; i++) {
		struct mrun *r = &in->runs[i];
		uint64_t a = r->fu > fu ? r->fu : fu;
		uint64_t b = r->fu + r->count < end ? r->fu + r->count : end;
		struct mrun part = run_piece(r, a, b);
		bool mapping = op == SPAN_MAP || op == SPAN_PIECE;
		bool same = part.su == su + (a - fu) &&
			    (op == SPAN_ALL || (part.poff == poff && part.pbytes == pbytes));

		if (r->fu < fu)
			ret = runlist_add(&l, run_piece(r, r->fu, fu));
		if (mapping && a > pos)
			ret = ret
				      ?: runlist_add(&l,
						     (struct mrun){pos, a - pos, su + (pos - fu),
								   WS_NONE, NULL, poff, pbytes});
		if (op == SPAN_UNMAP || (mapping && !same)) {
			free(part.bits);
			part = (struct mrun){a, b - a, su + (a - fu), WS_NONE, NULL, poff, pbytes};
		} else if (op == SPAN_ALL && same) {
			free(part.bits);
			part.bits = NULL;
			part.state = WS_ALL;
		}
		if (op != SPAN_UNMAP)
			ret = ret ?: runlist_add(&l, part);
		pos = b;
		if (r->fu + r->count > end)
			ret = ret ?: runlist_add(&l, run_piece(r, end, r->fu + r->count));
	}
	if ((op == SPAN_MAP || op == SPAN_PIECE) && pos < end && !ret)
		ret = runlist_add(&l, (struct mrun){pos, end - pos, su + (pos - fu), WS_NONE, NULL,
						    poff, pbytes});
	for (size_t i = core_end; i < last && !ret; i++)
		ret = runlist_add(&l, in->runs[i]);
	if (!ret)
		ret = runs_splice(in, first, last, &l);
	free(l.e);
	return ret;
}

/* A pool: [unit, +count) lies inside one store's units (fs/POOLS.md). */
static bool in_one_store(const struct fsck_geom *g, uint64_t unit, uint64_t count)
{
	if (!g->store_count)
		return true;
	for (uint32_t i = 0; i < g->store_count; i++) {
		const struct cfs_store_entry *e = &g->stores[i];

		if (unit >= e->unit_base && unit - e->unit_base < e->unit_count)
			return count <= e->unit_count - (unit - e->unit_base);
	}
	return false;
}

static int apply_extent(struct fsck_model *m, uint16_t type, const uint8_t *p)
{
	uint64_t ino = get64(p), file_unit = get64(p + 8);
	uint64_t store_unit = get64(p + 16), count = get64(p + 24);
	struct minode *in = inode_find(m, ino);

	if (type == CFS_LOG_EXTENT_UNMAP) {
		if (!in || count == 0 || file_unit >= m->g.max_file_units)
			return 0;
		if (count > m->g.max_file_units - file_unit)
			count = m->g.max_file_units - file_unit;
		return apply_span(in, SPAN_UNMAP, file_unit, 0, count, 0, 0);
	}
	/* Checked before the inode: these records can never be valid. */
	if (count == 0 || count > m->g.unit_count || store_unit > m->g.unit_count - count ||
	    !in_one_store(&m->g, store_unit, count))
		return bad_record(m, "mapping to a unit beyond the data region"), 0;
	if (file_unit > m->g.max_file_units || count > m->g.max_file_units - file_unit)
		return bad_record(m, "mapping beyond the largest file"), 0;
	if (!in || !S_ISREG(in->mode))
		return 0;
	return apply_span(in, SPAN_MAP, file_unit, store_unit, count, 0, 0);
}

static bool pow2(uint32_t x)
{
	return x && !(x & (x - 1));
}

static int apply_piece(struct fsck_model *m, const uint8_t *p)
{
	uint64_t ino = get64(p), file_unit = get64(p + 8), store_unit = get64(p + 16);
	uint32_t poff = get32(p + 24), pbytes = get32(p + 28);
	struct minode *in;

	if (!(m->g.incompat & CFS_FEAT_INCOMPAT_PIECES))
		return bad_record(m, "piece record on a store without the pieces feature"), 0;
	if (store_unit >= m->g.unit_count || !in_one_store(&m->g, store_unit, 1))
		return bad_record(m, "mapping to a unit beyond the data region"), 0;
	if (file_unit >= m->g.max_file_units)
		return bad_record(m, "mapping beyond the largest file"), 0;
	if (!pow2(pbytes) || pbytes < M_PIECE_MIN || pbytes < m->g.sector_bytes ||
	    pbytes < m->g.physical_sector_bytes || pbytes > m->g.unit_bytes / 2 || poff % pbytes ||
	    poff > m->g.unit_bytes - pbytes)
		return bad_record(m, "piece record with a piece it cannot hold (size or place)"), 0;
	in = inode_find(m, ino);
	if (!in || !S_ISREG(in->mode))
		return 0;
	return apply_span(in, SPAN_PIECE, file_unit, store_unit, 1, poff, pbytes);
}

static int apply_written_run(struct fsck_model *m, const uint8_t *p)
{
	uint64_t ino = get64(p), file_unit = get64(p + 8);
	uint64_t store_unit = get64(p + 16), count = get64(p + 24);
	struct minode *in;

	if (!(m->g.incompat & CFS_FEAT_INCOMPAT_WRITTEN_RUNS))
		return bad_record(m, "written-run record on a store without the written_runs "
				     "feature"),
		       0;
	if (count == 0 || file_unit > m->g.max_file_units ||
	    count > m->g.max_file_units - file_unit)
		return bad_record(m, "written run beyond the largest file"), 0;
	in = inode_find(m, ino);
	if (!in || !S_ISREG(in->mode))
		return 0;
	return apply_span(in, SPAN_ALL, file_unit, store_unit, count, 0, 0);
}

static bool bit_get(const uint8_t *b, uint32_t i)
{
	return b[i / 8] >> (i % 8) & 1;
}

static void bit_put(uint8_t *b, uint32_t i, bool v)
{
	if (v)
		b[i / 8] |= (uint8_t)(1u << (i % 8));
	else
		b[i / 8] &= (uint8_t) ~(1u << (i % 8));
}

/* NONE/ALL with every bit the same, else a bitmap. */
static void ws_normalize(struct fsck_model *m, struct mrun *u)
{
	uint32_t set = 0, n = run_sectors(m, u);

	if (u->state != WS_BITMAP)
		return;
	for (uint32_t i = 0; i < n; i++)
		set += bit_get(u->bits, i);
	if (set == 0 || set == n) {
		u->state = set ? WS_ALL : WS_NONE;
		free(u->bits);
		u->bits = NULL;
	}
}

static int apply_written(struct fsck_model *m, const uint8_t *p, uint32_t n)
{
	uint64_t ino = get64(p), file_unit = get64(p + 8), store_unit = get64(p + 16);
	uint32_t op = get32(p + 24), first = get32(p + 28), count = get32(p + 32);
	const uint8_t *bits = (get32(p + 36) & M_WRITTEN_F_BITS) ? p + P_WRITTEN : NULL;
	struct minode *in;
	struct mrun *r, u;
	struct runlist l = {0};
	size_t i;
	int ret = 0;

	if (op > 2)
		return bad_record(m, "written-state record with an unknown operation"), 0;
	if (first > m->sectors_per_unit || count > m->sectors_per_unit - first)
		return bad_record(m, "written-state record beyond its unit"), 0;
	if (bits && (count + 7u) / 8 > n - P_WRITTEN)
		return bad_record(m, "record payload too short for its type"), 0;
	in = inode_find(m, ino);
	if (!in)
		return 0;
	i = run_index(in, file_unit);
	if (i >= in->nruns)
		return 0;
	r = &in->runs[i];
	if (r->fu > file_unit || r->su + (file_unit - r->fu) != store_unit)
		return 0; /* about a mapping that is gone */
	/* A piece of the unit counts as it; sectors past the piece are
	 * ignored (a record of an earlier, larger mapping of the unit). */
	if (first >= run_sectors(m, r))
		return 0;
	if (count > run_sectors(m, r) - first)
		count = run_sectors(m, r) - first;
	u = run_piece(r, file_unit, file_unit + 1);
	u.bits = r->state == WS_BITMAP ? r->bits : NULL;
	if (u.state != WS_BITMAP) {
		uint8_t fill = u.state == WS_ALL ? 0xff : 0;

		u.bits = malloc((m->sectors_per_unit + 7) / 8);
		if (!u.bits)
			return -ENOMEM;
		memset(u.bits, fill, (m->sectors_per_unit + 7) / 8);
		u.state = WS_BITMAP;
	}
	for (uint32_t k = 0; k < count; k++) {
		bool b = bits ? bit_get(bits, k) : true;

		if (op == 1)
			bit_put(u.bits, first + k, false);
		else if (op == 2)
			bit_put(u.bits, first + k, b);
		else if (b)
			bit_put(u.bits, first + k, true);
	}
	ws_normalize(m, &u);
	/* The run split around the unit, neighbours merged again. */
	{
		size_t lo = i > 0 ? i - 1 : 0, hi = i + 2 < in->nruns ? i + 2 : in->nruns;

		for (size_t k = lo; k < hi && !ret; k++) {
			struct mrun *q = &in->runs[k];

			if (k != i) {
				ret = runlist_add(&l, *q);
				continue;
			}
			ret = runlist_add(&l, run_piece(q, q->fu, file_unit));
			ret = ret ?: runlist_add(&l, u);
			ret = ret ?: runlist_add(&l, run_piece(q, file_unit + 1, q->fu + q->count));
		}
		if (!ret)
			ret = runs_splice(in, lo, hi, &l);
		else if (u.bits != r->bits)
			free(u.bits);
	}
	free(l.e);
	return ret;
}

static int apply_xattr(struct fsck_model *m, uint16_t type, const uint8_t *p, uint32_t n)
{
	uint32_t name_length = get32(p + 8);

	if (name_length == 0 || name_length > M_XATTR_NAME_MAX)
		return bad_record(m, "xattr record with an invalid name length"), 0;
	if (type == CFS_LOG_XATTR_REMOVE) {
		if (name_length > n - P_XATTR_RM)
			bad_record(m, "record payload too short for its type");
		return 0;
	}
	uint32_t value_length = get32(p + 12), offset = get32(p + 16), chunk = get32(p + 20);

	if ((uint64_t)name_length + chunk > n - P_XATTR)
		return bad_record(m, "record payload too short for its type"), 0;
	if (value_length > M_XATTR_VALUE_MAX || offset > value_length ||
	    chunk > value_length - offset)
		bad_record(m, "xattr record with a piece outside its value");
	return 0;
}

/* Decode one payload and apply it. Mirrors the record table of FORMAT.md
 * 5.3; a payload longer than its fixed part is accepted (room for growth). */
static int apply(struct fsck_model *m, uint16_t type, const uint8_t *p, uint32_t n)
{
	static const uint32_t fixed[] = {
		[CFS_LOG_FS_INFO] = P_FS_INFO,		 [CFS_LOG_INODE_CREATE] = P_INODE,
		[CFS_LOG_INODE_UPDATE] = P_INODE,	 [CFS_LOG_INODE_DELETE] = P_INODE_DELETE,
		[CFS_LOG_DIRENT_ADD] = P_DIRENT,	 [CFS_LOG_DIRENT_REMOVE] = P_DIRENT_RM,
		[CFS_LOG_DIRENT_RENAME] = P_RENAME,	 [CFS_LOG_XATTR_SET] = P_XATTR,
		[CFS_LOG_XATTR_REMOVE] = P_XATTR_RM,	 [CFS_LOG_EXTENT_MAP] = P_EXTENT,
		[CFS_LOG_EXTENT_UNMAP] = P_EXTENT,	 [CFS_LOG_EXTENT_WRITTEN] = P_WRITTEN,
		[CFS_LOG_EXTENT_WRITTEN_RUN] = P_EXTENT, [CFS_LOG_INODE_PLACE] = P_PLACE,
		[CFS_LOG_EXTENT_MAP_PIECE] = P_PIECE,
	};

	if (type == CFS_LOG_NOOP || type == CFS_LOG_COMMIT || type >= M_TYPE_PRIVATE)
		return 0;
	if (type >= sizeof(fixed) / sizeof(fixed[0]) || fixed[type] == 0)
		return bad_record(m, "unknown log record type"), 0;
	if (n < fixed[type])
		return bad_record(m, "record payload too short for its type"), 0;
	switch (type) {
	case CFS_LOG_FS_INFO:
		return 0;
	case CFS_LOG_INODE_CREATE:
	case CFS_LOG_INODE_UPDATE:
		return apply_inode(m, p, n);
	case CFS_LOG_INODE_DELETE: {
		struct minode *in = inode_find(m, get64(p));

		if (in)
			inode_drop(m, in);
		return 0;
	}
	case CFS_LOG_DIRENT_ADD: {
		uint32_t length = get32(p + 28);

		if (length > n - P_DIRENT)
			return bad_record(m, "record payload too short for its type"), 0;
		return set_entry(m, get64(p), (const char *)p + P_DIRENT, length, get64(p + 8),
				 get32(p + 24), get64(p + 16));
	}
	case CFS_LOG_DIRENT_REMOVE: {
		uint32_t length = get32(p + 8);

		if (length > n - P_DIRENT_RM)
			return bad_record(m, "record payload too short for its type"), 0;
		remove_entry(m, get64(p), (const char *)p + P_DIRENT_RM, length);
		return 0;
	}
	case CFS_LOG_DIRENT_RENAME: {
		uint64_t src_dir = get64(p), dst_dir = get64(p + 8);
		uint64_t src_ino = get64(p + 16), dst_ino = get64(p + 24);
		uint32_t src_length = get32(p + 60), dst_length = get32(p + 64);
		const char *src_name = (const char *)p + P_RENAME;
		const char *dst_name = src_name + src_length;
		int ret;

		if ((uint64_t)src_length + dst_length > n - P_RENAME)
			return bad_record(m, "record payload too short for its type"), 0;
		if (get32(p + 56) & M_RENAME_EXCHANGE) {
			ret = set_entry(m, dst_dir, dst_name, dst_length, src_ino, get32(p + 48),
					get64(p + 40));
			if (!ret)
				ret = set_entry(m, src_dir, src_name, src_length, dst_ino,
						get32(p + 52), get64(p + 32));
			return ret;
		}
		remove_entry(m, src_dir, src_name, src_length);
		return set_entry(m, dst_dir, dst_name, dst_length, src_ino, get32(p + 48),
				 get64(p + 40));
	}
	case CFS_LOG_EXTENT_MAP:
	case CFS_LOG_EXTENT_UNMAP:
		return apply_extent(m, type, p);
	case CFS_LOG_EXTENT_WRITTEN:
		return apply_written(m, p, n);
	case CFS_LOG_EXTENT_WRITTEN_RUN:
		return apply_written_run(m, p);
	case CFS_LOG_EXTENT_MAP_PIECE:
		return apply_piece(m, p);
	case CFS_LOG_INODE_PLACE:
		/* Placement only steers where new units go (a file mid-move has
		 * units on two stores, which is valid); a store that left the
		 * pool is the daemon's to ignore. Nothing to check here. */
		return 0;
	default: /* CFS_LOG_XATTR_SET, CFS_LOG_XATTR_REMOVE */
		return apply_xattr(m, type, p, n);
	}
}

int fsck_model_snapshot_record(struct fsck_model *m, const struct cfs_log_record *rec)
{
	m->in_snapshot = true;
	m->seq = rec->seq;
	return apply(m, rec->type, rec->payload, rec->payload_length_bytes);
}

#define TXN_HEADER 8u

int fsck_model_log_record(struct fsck_model *m, const struct cfs_log_record *rec)
{
	size_t need = (TXN_HEADER + rec->payload_length_bytes + 7) & ~(size_t)7;

	m->in_snapshot = false;
	if (m->txn_records == 0) {
		m->txn_first_seq = rec->seq;
		m->txn_too_long = false;
	}
	if (m->txn_records >= M_TXN_RECORDS_MAX) {
		/* The daemon refuses the mount; report once, keep walking. */
		if (!m->txn_too_long) {
			m->seq = rec->seq;
			bad_record(m, "a transaction longer than the limit");
		}
		m->txn_too_long = true;
	} else {
		if (m->txn_used + need > m->txn_size) {
			size_t size = m->txn_size ? m->txn_size * 2 : 64u * 1024;
			uint8_t *grown;

			while (size < m->txn_used + need)
				size *= 2;
			grown = realloc(m->txn, size);
			if (!grown)
				return -ENOMEM;
			m->txn = grown;
			m->txn_size = size;
		}
		m->txn[m->txn_used] = (uint8_t)rec->type;
		m->txn[m->txn_used + 1] = (uint8_t)(rec->type >> 8);
		memcpy(m->txn + m->txn_used + 4, &rec->payload_length_bytes, 4);
		memcpy(m->txn + m->txn_used + TXN_HEADER, rec->payload, rec->payload_length_bytes);
		m->txn_used += need;
	}
	m->txn_records++;
	if (rec->flags & M_JREC_MORE)
		return 0;
	/* Complete: apply it whole. */
	m->seq = m->txn_first_seq;
	for (size_t off = 0; off < m->txn_used && !m->txn_too_long;) {
		uint16_t type = (uint16_t)(m->txn[off] | m->txn[off + 1] << 8);
		uint32_t length;
		int ret;

		memcpy(&length, m->txn + off + 4, 4);
		ret = apply(m, type, m->txn + off + TXN_HEADER, length);
		if (ret)
			return ret;
		off += (TXN_HEADER + length + 7) & ~(size_t)7;
		m->seq++;
	}
	m->txn_used = 0;
	m->txn_records = 0;
	return 0;
}

uint32_t fsck_model_pending_records(const struct fsck_model *m)
{
	return m->txn_records;
}

/* ---- the check ------------------------------------------------------------------ */

static int inode_cmp(const void *a, const void *b)
{
	const struct minode *x = *(struct minode *const *)a, *y = *(struct minode *const *)b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static int dirent_cmp(const void *a, const void *b)
{
	const struct mdirent *x = *(struct mdirent *const *)a, *y = *(struct mdirent *const *)b;

	if (x->dir != y->dir)
		return x->dir < y->dir ? -1 : 1;
	if (x->cookie != y->cookie)
		return x->cookie < y->cookie ? -1 : 1;
	return 0;
}

/* Every object of a table, as an array (caller frees); link_offset is
 * where the object holds its struct cfs_hlink. */
static void **table_list(const struct cfs_htable *t, size_t link_offset)
{
	void **list = malloc((t->count + 1) * sizeof(*list));
	size_t n = 0;

	if (!list)
		return NULL;
	for (struct cfs_hlink *link = cfs_htable_next(t, NULL); link;
	     link = cfs_htable_next(t, link))
		list[n++] = (char *)link - link_offset;
	return list;
}

/* Highest written sector of a one-unit run, or -1. */
static int64_t last_written(const struct fsck_model *m, const struct mrun *u)
{
	if (u->state == WS_ALL)
		return (int64_t)run_sectors(m, u) - 1;
	if (u->state == WS_NONE)
		return -1;
	for (int64_t i = (int64_t)run_sectors(m, u) - 1; i >= 0; i--)
		if (bit_get(u->bits, (uint32_t)i))
			return i;
	return -1;
}

/* Every run of every inode as bytes of the unit space [start, end) (pool
 * addresses of units stay below 2^62: FORMAT.md 3.4), sorted: overlaps are
 * bytes with two owners. */
struct owned {
	uint64_t start, end, ino, fu;
};

static int owned_cmp(const void *a, const void *b)
{
	const struct owned *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int check_units(struct fsck_model *m, struct minode **inodes, size_t count)
{
	struct owned *all;
	size_t n = 0, total = 0;

	for (size_t i = 0; i < count; i++)
		total += inodes[i]->nruns;
	all = malloc((total ? total : 1) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		struct minode *in = inodes[i];
		uint64_t eof = (in->size_bytes + m->g.sector_bytes - 1) / m->g.sector_bytes *
			       m->g.sector_bytes;

		for (size_t k = 0; k < in->nruns; k++) {
			struct mrun *u = &in->runs[k];
			int64_t last = last_written(m, u);
			uint64_t start = u->su * m->g.unit_bytes + u->poff;
			uint64_t last_fu = u->fu + u->count - 1;

			if (u->su >= m->g.unit_count || u->count > m->g.unit_count - u->su ||
			    !in_one_store(&m->g, u->su, u->count)) {
				fsck_problem(m->r, FSCK_ERROR,
					     "inode %llu maps unit %llu beyond the data region",
					     (unsigned long long)in->ino,
					     (unsigned long long)u->su);
				continue;
			}
			all[n++] = (struct owned){
				start, start + (u->pbytes ? u->pbytes : u->count * m->g.unit_bytes),
				in->ino, u->fu};
			/* Written sectors past EOF would come back as data if
			 * the file grew again; truncate clears them. */
			if (last >= 0 &&
			    last_fu * m->g.unit_bytes + ((uint64_t)last + 1) * m->g.sector_bytes >
				    eof) {
				uint64_t at = u->fu;

				/* The first unit of an ALL run that passes EOF. */
				if (u->state == WS_ALL && eof / m->g.unit_bytes > at)
					at = eof / m->g.unit_bytes;
				fsck_problem(m->r, FSCK_WARN,
					     "inode %llu has written sectors past its size "
					     "(file unit %llu)",
					     (unsigned long long)in->ino, (unsigned long long)at);
			}
		}
	}
	qsort(all, n, sizeof(*all), owned_cmp);
	{
		uint64_t reach = 0, owner = 0; /* end of the runs so far, and whose */
		uint64_t next_unit = 0;	       /* units below are counted as used */
		uint64_t ub = m->g.unit_bytes;

		for (size_t i = 0; i < n; i++) {
			uint64_t first = all[i].start / ub, last = (all[i].end - 1) / ub;

			if (i && all[i].start < reach)
				fsck_problem(m->r, FSCK_ERROR,
					     "data unit %llu is mapped by inode %llu and by inode "
					     "%llu (file unit %llu)",
					     (unsigned long long)(all[i].start / ub),
					     (unsigned long long)owner,
					     (unsigned long long)all[i].ino,
					     (unsigned long long)all[i].fu);
			if (first < next_unit)
				first = next_unit;
			if (last >= first) {
				m->r->units_used += last - first + 1;
				next_unit = last + 1;
			}
			if (all[i].end > reach) {
				reach = all[i].end;
				owner = all[i].ino;
			}
		}
	}
	free(all);
	return 0;
}

/* Breadth-first from the root over the directory entries sorted by dir. */
static int check_reach(struct fsck_model *m, struct mdirent **ents, size_t n, struct minode *root)
{
	uint64_t *queue = malloc((m->inodes.count + 1) * sizeof(*queue));
	size_t head = 0, tail = 0;

	if (!queue)
		return -ENOMEM;
	root->reached = true;
	queue[tail++] = root->ino;
	while (head < tail) {
		uint64_t dir = queue[head++];
		size_t lo = 0, hi = n;

		while (lo < hi) { /* first entry of dir */
			size_t mid = lo + (hi - lo) / 2;

			if (ents[mid]->dir < dir)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (size_t i = lo; i < n && ents[i]->dir == dir; i++) {
			struct minode *c = inode_find(m, ents[i]->ino);

			if (!c || c->reached)
				continue;
			c->reached = true;
			if (S_ISDIR(c->mode) && tail <= m->inodes.count)
				queue[tail++] = c->ino;
		}
	}
	free(queue);
	return 0;
}

static void check_links(struct fsck_model *m, struct minode *in)
{
	unsigned long long ino = (unsigned long long)in->ino;
	int ret = 0;

	if (S_ISDIR(in->mode)) {
		uint32_t want = 2 + in->subdirs;

		if (in->ino == M_ROOT_INO) {
			if (in->entries)
				fsck_problem(m->r, FSCK_ERROR, "the root directory has an entry");
		} else if (in->entries == 0) {
			if (in->nlink == 0) {
				fsck_problem(m->r, FSCK_NOTE,
					     "orphan directory %llu (removed while open): freed "
					     "at the next read-write mount",
					     ino);
				m->r->need_mount = true;
				return;
			}
			fsck_problem(m->r, FSCK_ERROR, "directory %llu has no entry", ino);
			return;
		} else if (in->entries > 1) {
			fsck_problem(m->r, FSCK_ERROR, "directory %llu has %u entries", ino,
				     in->entries);
			return;
		} else if (!in->reached) {
			fsck_problem(m->r, FSCK_ERROR,
				     "directory %llu is not reachable from the root (a cycle)",
				     ino);
			return;
		} else if (in->parent_ino != in->entry_dir) {
			fsck_problem(m->r, FSCK_REPAIRABLE,
				     "directory %llu: \"..\" is %llu, its entry is in %llu", ino,
				     (unsigned long long)in->parent_ino,
				     (unsigned long long)in->entry_dir);
			ret = fsck_add_fix(m->r, FSCK_FIX_PARENT, in->ino, in->entry_dir);
		}
		if (!ret && in->nlink != want) {
			fsck_problem(m->r, FSCK_REPAIRABLE,
				     "directory %llu has link count %u, should be %u", ino,
				     in->nlink, want);
			ret = fsck_add_fix(m->r, FSCK_FIX_NLINK, in->ino, want);
		}
	} else if (in->entries == 0 && in->nlink == 0) {
		fsck_problem(m->r, FSCK_NOTE,
			     "orphan inode %llu (unlinked while open, or an O_TMPFILE file "
			     "never linked): freed at the next read-write mount",
			     ino);
		m->r->need_mount = true;
	} else if (in->entries == 0) {
		fsck_problem(m->r, FSCK_REPAIRABLE,
			     "inode %llu has link count %u but no directory entry: "
			     "reconnect it to /lost+found",
			     ino, in->nlink);
		ret = fsck_add_fix(m->r, FSCK_FIX_LOST, in->ino, 1);
	} else if (in->nlink != in->entries) {
		fsck_problem(m->r, FSCK_REPAIRABLE, "inode %llu has link count %u, should be %u",
			     ino, in->nlink, in->entries);
		ret = fsck_add_fix(m->r, FSCK_FIX_NLINK, in->ino, in->entries);
	}
	if (ret)
		fsck_problem(m->r, FSCK_ERROR, "out of memory recording a repair");
}

int fsck_model_check(struct fsck_model *m)
{
	struct minode **inodes =
		(struct minode **)table_list(&m->inodes, offsetof(struct minode, link));
	struct mdirent **ents =
		(struct mdirent **)table_list(&m->dirents, offsetof(struct mdirent, link));
	size_t ni = m->inodes.count, nd = m->dirents.count;
	struct minode *root = inode_find(m, M_ROOT_INO);
	int ret = -ENOMEM;

	if (!inodes || !ents)
		goto out_free;
	/* In a fixed order (by inode; by directory and cookie), not the
	 * tables': the report lists its problems in the same order every run. */
	qsort(inodes, ni, sizeof(*inodes), inode_cmp);
	qsort(ents, nd, sizeof(*ents), dirent_cmp);
	m->r->inodes = ni;
	m->r->units_total = m->g.unit_count;
	if (m->g.store_count) { /* a pool: its stores' units, not the gaps */
		m->r->units_total = 0;
		for (uint32_t i = 0; i < m->g.store_count; i++)
			m->r->units_total += m->g.stores[i].unit_count;
	}
	for (size_t i = 0; i < ni; i++) {
		m->r->dirs += S_ISDIR(inodes[i]->mode);
		m->r->files += S_ISREG(inodes[i]->mode);
	}
	ret = check_units(m, inodes, ni);
	if (ret)
		goto out_free;
	if (!root) {
		/* mkchunkfs writes an empty snapshot; the first mount creates
		 * the root. Anything else without a root is lost. */
		if (ni)
			fsck_problem(m->r, FSCK_ERROR, "no root directory (%zu inodes)", ni);
		else
			fsck_problem(m->r, FSCK_NOTE,
				     "no root directory yet: never mounted (the first mount "
				     "creates it)");
		ret = 0;
		goto out_free;
	}
	if (!S_ISDIR(root->mode)) {
		fsck_problem(m->r, FSCK_ERROR, "the root inode is not a directory");
		ret = 0;
		goto out_free;
	}
	for (size_t i = 0; i < nd; i++) {
		struct mdirent *d = ents[i];
		struct minode *t = inode_find(m, d->ino);
		struct minode *dir = inode_find(m, d->dir);

		if (!t) {
			fsck_problem(m->r, FSCK_REPAIRABLE,
				     "entry \"%.*s\" in directory %llu names missing inode %llu: "
				     "remove it",
				     (int)d->name_length, d->name, (unsigned long long)d->dir,
				     (unsigned long long)d->ino);
			m->r->need_mount = true;
			continue;
		}
		if ((d->mode & S_IFMT) != (t->mode & S_IFMT))
			fsck_problem(m->r, FSCK_ERROR,
				     "entry \"%.*s\" in directory %llu gives inode %llu the type "
				     "%o, the inode has %o",
				     (int)d->name_length, d->name, (unsigned long long)d->dir,
				     (unsigned long long)d->ino, d->mode & S_IFMT,
				     t->mode & S_IFMT);
		t->entries++;
		t->entry_dir = d->dir;
		if (S_ISDIR(t->mode) && dir)
			dir->subdirs++;
	}
	ret = check_reach(m, ents, nd, root);
	if (ret)
		goto out_free;
	for (size_t i = 0; i < ni; i++)
		check_links(m, inodes[i]);
out_free:
	free(inodes);
	free(ents);
	return ret;
}

/* ---- lifecycle -------------------------------------------------------------------- */

int fsck_model_create(const struct fsck_geom *geom, struct fsck_report *report,
		      struct fsck_model **out)
{
	struct fsck_model *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return -ENOMEM;
	m->g = *geom;
	m->r = report;
	m->sectors_per_unit = geom->unit_bytes / geom->sector_bytes;
	if (cfs_htable_init(&m->inodes, TABLE_BITS) || cfs_htable_init(&m->dirents, TABLE_BITS)) {
		fsck_model_destroy(m);
		return -ENOMEM;
	}
	*out = m;
	return 0;
}

/* Free every object of a table (see table_list) and the table. */
static void free_table(struct cfs_htable *t, size_t link_offset)
{
	struct cfs_hlink *link = t->buckets ? cfs_htable_next(t, NULL) : NULL;

	while (link) {
		struct cfs_hlink *next = cfs_htable_next(t, link);

		free((char *)link - link_offset);
		link = next;
	}
	cfs_htable_fini(t);
}

void fsck_model_destroy(struct fsck_model *m)
{
	if (!m)
		return;
	/* Inodes own their runs and those their bitmaps. */
	for (struct cfs_hlink *link = m->inodes.buckets ? cfs_htable_next(&m->inodes, NULL) : NULL;
	     link; link = cfs_htable_next(&m->inodes, link))
		runs_free(cfs_container_of(link, struct minode, link));
	free_table(&m->inodes, offsetof(struct minode, link));
	free_table(&m->dirents, offsetof(struct mdirent, link));
	free(m->txn);
	free(m);
}

/* ---- the report ------------------------------------------------------------------- */

void fsck_problem(struct fsck_report *r, enum fsck_severity sev, const char *fmt, ...)
{
	static const char *const label[] = {"note", "warning", "repairable", "error"};
	va_list ap;

	r->counts[sev]++;
	if (!r->out || (sev == FSCK_NOTE && !r->verbose))
		return;
	fprintf(r->out, "%s: ", label[sev]);
	va_start(ap, fmt);
	vfprintf(r->out, fmt, ap);
	va_end(ap);
	fputc('\n', r->out);
}

int fsck_add_fix(struct fsck_report *r, enum fsck_fix_kind kind, uint64_t ino, uint64_t value)
{
	if (r->fix_count == r->fix_size) {
		size_t size = r->fix_size ? r->fix_size * 2 : 64;
		struct fsck_fix *grown = realloc(r->fixes, size * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		r->fixes = grown;
		r->fix_size = size;
	}
	r->fixes[r->fix_count++] = (struct fsck_fix){kind, ino, value};
	return 0;
}

void fsck_report_reset(struct fsck_report *r)
{
	FILE *out = r->out;
	bool verbose = r->verbose;

	free(r->fixes);
	memset(r, 0, sizeof(*r));
	r->out = out;
	r->verbose = verbose;
}
