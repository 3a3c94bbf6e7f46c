/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pool.c — assembling a pool from its sources, and the stores of a mounted
 * pool: one allocator per store behind one unit space (fs/meta/pool.h,
 * fs/POOLS.md).
 *
 * Main invariant: a pool unit belongs to at most one store, and a run of
 * units passed to free/reserve never leaves its store (stores' unit ranges
 * never touch, so no extent run or busy range can span two).
 *
 * What it does not do: write superblocks (mount.c, the journal, store add
 * and remove do), choose a file's store (namespace.c), FUSE.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/base/assert.h"
#include "fs/base/text.h"
#include "fs/meta/piece.h"
#include "fs/meta/pool.h"

struct pool_store {
	uint32_t index;
	_Atomic uint32_t state;
	unsigned io_store; /* its index in the cfs_io */
	uint64_t unit_base;
	uint64_t unit_count;
	uint64_t size_bytes;
	uint8_t uuid[CFS_UUID_BYTES];
	char label[CFS_LABEL_BYTES];
	char source[256];
	struct cfs_alloc *alloc;
	_Atomic(struct cfs_pieces *) pieces; /* made on first use (pieces_of) */
};

struct cfs_pool {
	pthread_rwlock_t lock;
	unsigned count;
	struct pool_store *store[CFS_POOL_STORES_MAX]; /* in index order */
	_Atomic uint32_t default_store;		       /* CFS_STORE_NONE: most free */
	uint32_t unit_bytes;			       /* 0 on RAM mounts */
	uint32_t piece_min;			       /* 0: no pieces (piece.h) */
	_Atomic uint32_t discard_holds;		       /* cfs_pool_hold_discards() */
	_Atomic uint64_t held_back_units;	       /* cfs_pool_set_held_back() */
};

/* ---- assembling ------------------------------------------------------------------ */

int cfs_pool_split_sources(char *arg, const char **paths, unsigned max)
{
	struct stat st;
	unsigned n = 0;
	char *p = arg;

	if (!*arg)
		return -EINVAL;
	if (stat(arg, &st) == 0 || !strchr(arg, ',')) {
		paths[0] = arg;
		return 1;
	}
	for (;;) {
		char *comma = strchr(p, ',');

		if (n == max)
			return -E2BIG;
		if (comma)
			*comma = '\0';
		if (!*p)
			return -EINVAL;
		paths[n++] = p;
		if (!comma)
			return (int)n;
		p = comma + 1;
	}
}

int cfs_pool_check_distinct(const char *const *paths, unsigned n, char *err, size_t err_bytes)
{
	for (unsigned i = 0; i < n; i++) {
		struct stat a, b;

		for (unsigned j = 0; j < i && cfs_source_is_rbd(paths[i]); j++) {
			if (!strcmp(paths[i], paths[j])) {
				cfs_text_error(err, err_bytes, "%s: given twice", paths[i]);
				return -EINVAL;
			}
		}
		if (stat(paths[i], &a))
			continue; /* the open will say why (an RBD image: the cluster) */
		for (unsigned j = 0; j < i; j++) {
			if (stat(paths[j], &b))
				continue;
			if ((S_ISBLK(a.st_mode) && S_ISBLK(b.st_mode) && a.st_rdev == b.st_rdev) ||
			    (a.st_dev == b.st_dev && a.st_ino == b.st_ino)) {
				cfs_text_error(err, err_bytes, "%s: given twice (as %s too)",
					       paths[i], paths[j]);
				return -EINVAL;
			}
		}
	}
	return 0;
}

/* Both superblock slots of an RBD image, read through librbd without its
 * lock (as mkchunkfs -D does): cfg names the cluster. 0 or -errno (librbd
 * said why on cfg's log). */
static int probe_rbd(const char *path, const struct cfs_io_config *cfg, uint8_t *buf, size_t bytes)
{
	struct cfs_io_config c = *cfg;
	struct cfs_ioq_config qc = {.depth = 1};
	struct cfs_io *io = NULL;
	struct cfs_ioq *q = NULL;
	int ret;

	cfs_io_config_source(&c, path);
	c.read_only = true;
	c.exclusive = false;
	c.size_bytes = 0;
	c.fault_spec = NULL;
	ret = cfs_io_open(&c, &io);
	if (ret)
		return ret;
	ret = cfs_ioq_create(io, &qc, &q);
	if (ret == 0)
		ret = cfs_ioq_sync_range(q, CFS_IO_READ, 0, bytes, buf);
	if (q)
		cfs_ioq_destroy(q);
	cfs_io_close(io);
	return ret;
}

int cfs_pool_probe(const char *path, const struct cfs_io_config *cfg, struct cfs_sb *sb, char *err,
		   size_t err_bytes)
{
	const size_t bytes = 2 * CFS_SB_BLOCK_BYTES;
	const char *why = NULL;
	uint8_t *buf = NULL;
	ssize_t got;
	int fd, ret, slot;

	if (cfs_source_is_rbd(path)) {
		if (posix_memalign((void **)&buf, 4096, bytes)) {
			cfs_text_error(err, err_bytes, "out of memory");
			return -ENOMEM;
		}
		ret = probe_rbd(path, cfg, buf, bytes);
		if (ret < 0) {
			cfs_text_error(err, err_bytes, "%s: cannot read the superblocks: %s", path,
				       strerror(-ret));
			free(buf);
			return ret;
		}
		fd = -1;
		goto pick;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
	if (fd < 0 && errno == EINVAL)
		fd = open(path, O_RDONLY | O_CLOEXEC); /* a filesystem without O_DIRECT */
	if (fd < 0) {
		ret = -errno;
		cfs_text_error(err, err_bytes, "%s: %s", path, strerror(errno));
		return ret;
	}
	if (posix_memalign((void **)&buf, 4096, bytes)) {
		close(fd);
		cfs_text_error(err, err_bytes, "out of memory");
		return -ENOMEM;
	}
	got = pread(fd, buf, bytes, 0);
	if (got != (ssize_t)bytes) {
		ret = got < 0 ? -errno : -EINVAL;
		cfs_text_error(err, err_bytes, "%s: cannot read the superblocks: %s", path,
			       got < 0 ? strerror(errno) : "too small to be a chunkfs store");
		goto out;
	}
pick:
	ret = cfs_sb_pick(buf, buf + CFS_SB_BLOCK_BYTES, sb, &slot, &why);
	if (ret < 0) {
		cfs_text_error(err, err_bytes, "%s: %s: %s", path,
			       ret == -EINVAL ? "not a chunkfs store"
					      : "cannot use the superblocks",
			       why ? why : strerror(-ret));
		goto out;
	}
	ret = cfs_sb_check_mountable(sb, &why);
	if (ret < 0)
		cfs_text_error(err, err_bytes, "%s: cannot mount: %s", path,
			       why ? why : strerror(-ret));
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return ret;
}

static const char *label_or(const char *label, const char *none)
{
	return label[0] ? label : none;
}

int cfs_pool_check(const struct cfs_pool_source *src, unsigned n, unsigned *store0, char *err,
		   size_t err_bytes)
{
	char u[CFS_UUID_STR_BYTES], pu[CFS_UUID_STR_BYTES];
	const struct cfs_sb *s0;
	bool seen[CFS_POOL_STORES_MAX] = {false};
	unsigned zero = n, i, j;

	for (i = 0; i < n; i++) {
		if (cfs_sb_is_data_store(&src[i].sb))
			continue;
		if (zero < n) {
			cfs_text_error(err, err_bytes,
				       "%s and %s are two separate stores (each holds its own "
				       "metadata): not stores of one pool",
				       src[zero].path, src[i].path);
			return -EINVAL;
		}
		zero = i;
	}
	if (zero == n) {
		cfs_uuid_unparse(src[0].sb.pool_uuid, pu);
		cfs_text_error(
			err, err_bytes,
			"store 0 of pool %s (the store holding its metadata) is missing: give every "
			"store of the pool, in any order",
			pu);
		return -ENOENT;
	}
	s0 = &src[zero].sb;
	cfs_uuid_unparse(s0->uuid, pu);
	if (!(s0->incompat & CFS_FEAT_INCOMPAT_POOL)) {
		if (n > 1) {
			j = zero ? 0 : 1;
			cfs_text_error(err, err_bytes,
				       "%s: not a store of %s's pool (%s is a single store)",
				       src[j].path, src[zero].path, src[zero].path);
			return -EINVAL;
		}
		*store0 = zero;
		return 0;
	}
	for (i = 0; i < n; i++) {
		const struct cfs_sb *sb = &src[i].sb;
		const struct cfs_store_entry *e = NULL;

		if (i == zero)
			continue;
		cfs_uuid_unparse(sb->uuid, u);
		if (memcmp(sb->pool_uuid, s0->uuid, CFS_UUID_BYTES)) {
			char other[CFS_UUID_STR_BYTES];

			cfs_uuid_unparse(sb->pool_uuid, other);
			cfs_text_error(err, err_bytes,
				       "%s: a store of another pool (%s), not of %s", src[i].path,
				       other, pu);
			return -EINVAL;
		}
		for (j = 1; j < s0->store_count; j++)
			if (!memcmp(s0->stores[j].uuid, sb->uuid, CFS_UUID_BYTES))
				e = &s0->stores[j];
		if (!e) {
			cfs_text_error(err, err_bytes,
				       "%s: store %" PRIu32
				       " (uuid %s) is not in pool %s's table: it was "
				       "removed, or its join was interrupted",
				       src[i].path, sb->store_index, u, pu);
			return -EINVAL;
		}
		if (seen[e - s0->stores]) {
			cfs_text_error(err, err_bytes, "%s: store %" PRIu32 " given twice",
				       src[i].path, e->index);
			return -EINVAL;
		}
		seen[e - s0->stores] = true;
		if (e->index != sb->store_index || e->unit_base != sb->unit_base ||
		    e->unit_count != sb->data_unit_count ||
		    sb->alloc_unit_bytes != s0->alloc_unit_bytes ||
		    sb->logical_sector_bytes != s0->logical_sector_bytes) {
			cfs_text_error(err, err_bytes,
				       "%s: store %" PRIu32
				       " does not match pool %s's table (index, units, "
				       "allocation unit or sector size differ)",
				       src[i].path, sb->store_index, pu);
			return -EINVAL;
		}
	}
	for (j = 1; j < s0->store_count; j++) {
		if (seen[j])
			continue;
		cfs_uuid_unparse(s0->stores[j].uuid, u);
		cfs_text_error(err, err_bytes,
			       "store %s (index %" PRIu32
			       ", uuid %s) of pool %s is missing: give every "
			       "store of the pool",
			       label_or(s0->stores[j].label, "without a label"),
			       s0->stores[j].index, u, pu);
		return -ENOENT;
	}
	*store0 = zero;
	return 0;
}

unsigned cfs_pool_routes(const struct cfs_pool_source *src, unsigned n, unsigned store0,
			 struct cfs_io_route *routes)
{
	const struct cfs_sb *s0 = &src[store0].sb;
	uint64_t lsec = s0->logical_sector_bytes, au = s0->alloc_unit_bytes;
	unsigned count = 0;

	routes[count++] = (struct cfs_io_route){0, s0->store_size_bytes & ~(lsec - 1), 0,
						src[store0].io_store};
	for (unsigned i = 0; i < n; i++) {
		const struct cfs_sb *sb = &src[i].sb;

		routes[count++] = (struct cfs_io_route){
			CFS_POOL_RAW_BASE + src[i].io_store * CFS_POOL_RAW_STRIDE,
			CFS_SB_AREA_BYTES, 0, src[i].io_store};
		if (i == store0)
			continue;
		routes[count++] = (struct cfs_io_route){s0->data_offset_bytes + sb->unit_base * au,
							sb->data_unit_count * au,
							sb->data_offset_bytes, src[i].io_store};
	}
	CFS_ASSERT(count <= CFS_IO_ROUTES_MAX);
	return count;
}

static enum cfs_dio_policy dio_for(const char *path, enum cfs_dio_policy dflt)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISBLK(st.st_mode) ? CFS_DIO_REQUIRED : dflt;
}

int cfs_pool_open_io(const char *const *paths, unsigned n, const struct cfs_io_config *cfg,
		     struct cfs_pool_source *src, struct cfs_io **io_out, char *err,
		     size_t err_bytes)
{
	struct cfs_io_route routes[CFS_IO_ROUTES_MAX];
	struct cfs_io_config c = *cfg;
	struct cfs_io *io = NULL;
	unsigned store0, i;
	int ret;

	*io_out = NULL;
	for (i = 0; i < n; i++) {
		src[i].path = paths[i];
		src[i].io_store = 0;
		ret = cfs_pool_probe(paths[i], cfg, &src[i].sb, err, err_bytes);
		if (ret < 0)
			return ret;
	}
	ret = cfs_pool_check(src, n, &store0, err, err_bytes);
	if (ret)
		return ret;
	if (n > 1 && cfs_source_is_rbd(src[store0].path)) {
		/* Untried: store 0 through librbd under the uring backend. */
		cfs_text_error(err, err_bytes,
			       "%s: the pool's first store (it holds the metadata) must be a local "
			       "device or image file; an RBD image can be one of its other stores",
			       src[store0].path);
		return -EINVAL;
	}
	c.path = src[store0].path;
	c.dio = dio_for(c.path, cfg->dio);
	ret = cfs_io_open(&c, &io);
	if (ret) {
		cfs_text_error(err, err_bytes, "%s: cannot open: %s", c.path, strerror(-ret));
		return ret;
	}
	for (i = 0; i < n; i++) {
		const struct cfs_io_geometry *g;

		if (i != store0) {
			c.path = src[i].path;
			c.dio = dio_for(c.path, cfg->dio);
			ret = cfs_io_add_store(io, &c);
			if (ret < 0) {
				cfs_text_error(err, err_bytes, "%s: cannot open: %s", c.path,
					       strerror(-ret));
				goto out_close;
			}
			src[i].io_store = (unsigned)ret;
		}
		g = cfs_io_store_geometry(io, src[i].io_store);
		/* Store 0's size is checked by whoever reads it (mount, fsck:
		 * fsck reports a truncated store as a problem, not a failure). */
		if (i != store0 && src[i].sb.store_size_bytes > g->size_bytes) {
			ret = -EUCLEAN;
			cfs_text_error(err, err_bytes,
				       "%s: the target holds %" PRIu64
				       " bytes but the store was formatted "
				       "for %" PRIu64,
				       src[i].path, g->size_bytes, src[i].sb.store_size_bytes);
			goto out_close;
		}
	}
	if (src[store0].sb.incompat & CFS_FEAT_INCOMPAT_POOL) {
		ret = cfs_io_set_routes(io, routes, cfs_pool_routes(src, n, store0, routes));
		if (ret) {
			cfs_text_error(err, err_bytes, "cannot route the pool's stores: %s",
				       strerror(-ret));
			goto out_close;
		}
	}
	/* Store 0 first: the mount reads its superblock at offset 0. */
	if (store0) {
		struct cfs_pool_source t = src[0];

		src[0] = src[store0];
		src[store0] = t;
	}
	*io_out = io;
	return 0;

out_close:
	cfs_io_close(io);
	return ret;
}

/* ---- the pool of a mount ----------------------------------------------------------- */

static struct pool_store *store_new(uint32_t index, uint64_t base, uint64_t count)
{
	struct pool_store *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	if (cfs_alloc_create(count, &s->alloc)) {
		free(s);
		return NULL;
	}
	s->index = index;
	atomic_init(&s->state, CFS_STORE_ACTIVE);
	s->unit_base = base;
	s->unit_count = count;
	return s;
}

static void store_free(struct pool_store *s)
{
	if (!s)
		return;
	cfs_pieces_destroy(atomic_load(&s->pieces));
	cfs_alloc_destroy(s->alloc);
	free(s);
}

static struct cfs_pool *pool_new(void)
{
	struct cfs_pool *pool = calloc(1, sizeof(*pool));

	if (!pool)
		return NULL;
	if (pthread_rwlock_init(&pool->lock, NULL)) {
		free(pool);
		return NULL;
	}
	atomic_init(&pool->default_store, CFS_STORE_NONE);
	return pool;
}

int cfs_pool_create(const struct cfs_sb *sb0, const struct cfs_pool_source *sources, unsigned n,
		    struct cfs_pool **out)
{
	struct cfs_pool *pool = pool_new();
	struct cfs_store_entry self = {0};
	const struct cfs_store_entry *table = sb0->stores;
	unsigned count = sb0->store_count;

	*out = NULL;
	if (!pool)
		return -ENOMEM;
	pool->unit_bytes = sb0->alloc_unit_bytes;
	if (sb0->incompat & CFS_FEAT_INCOMPAT_PIECES)
		pool->piece_min = cfs_pieces_min_bytes(
			sb0->alloc_unit_bytes, sb0->physical_sector_bytes > CFS_PIECE_MIN_BYTES
						       ? sb0->physical_sector_bytes
						       : CFS_PIECE_MIN_BYTES);
	if (!(sb0->incompat & CFS_FEAT_INCOMPAT_POOL)) {
		/* A pool of one: store 0 is the store itself. */
		memcpy(self.uuid, sb0->uuid, CFS_UUID_BYTES);
		self.state = CFS_STORE_ACTIVE;
		self.unit_count = sb0->data_unit_count;
		memcpy(self.label, sb0->label, CFS_LABEL_BYTES);
		table = &self;
		count = 1;
	}
	for (unsigned i = 0; i < count; i++) {
		const struct cfs_store_entry *e = &table[i];
		struct pool_store *s = store_new(e->index, e->unit_base, e->unit_count);

		if (!s) {
			cfs_pool_destroy(pool);
			return -ENOMEM;
		}
		atomic_store(&s->state, e->state);
		memcpy(s->uuid, e->uuid, CFS_UUID_BYTES);
		memcpy(s->label, e->label, CFS_LABEL_BYTES);
		if (i == 0)
			s->size_bytes = sb0->store_size_bytes;
		for (unsigned j = 0; sources && j < n; j++) {
			if (memcmp(sources[j].sb.uuid, e->uuid, CFS_UUID_BYTES))
				continue;
			s->size_bytes = sources[j].sb.store_size_bytes;
			s->io_store = sources[j].io_store;
			snprintf(s->source, sizeof(s->source), "%s", sources[j].path);
		}
		pool->store[pool->count++] = s;
	}
	*out = pool;
	return 0;
}

int cfs_pool_create_ram(uint64_t unit_count, struct cfs_pool **out)
{
	struct cfs_pool *pool = pool_new();
	struct pool_store *s;

	*out = NULL;
	if (!pool)
		return -ENOMEM;
	s = store_new(0, 0, unit_count);
	if (!s) {
		cfs_pool_destroy(pool);
		return -ENOMEM;
	}
	strcpy(s->label, "ram");
	pool->store[pool->count++] = s;
	*out = pool;
	return 0;
}

void cfs_pool_destroy(struct cfs_pool *pool)
{
	if (!pool)
		return;
	for (unsigned i = 0; i < pool->count; i++)
		store_free(pool->store[i]);
	pthread_rwlock_destroy(&pool->lock);
	free(pool);
}

int cfs_pool_add_store(struct cfs_pool *pool, const struct cfs_store_entry *e, uint32_t state,
		       unsigned io_store, uint64_t size_bytes, const char *source)
{
	struct pool_store *s;
	int ret = 0;

	pthread_rwlock_wrlock(&pool->lock);
	if (pool->count == CFS_POOL_STORES_MAX) {
		ret = -ENOSPC;
		goto out;
	}
	for (unsigned i = 0; i < pool->count; i++) {
		const struct pool_store *o = pool->store[i];

		if (o->index == e->index || !memcmp(o->uuid, e->uuid, CFS_UUID_BYTES) ||
		    (e->label[0] && !strcmp(o->label, e->label)) ||
		    (e->unit_base <= o->unit_base + o->unit_count &&
		     o->unit_base <= e->unit_base + e->unit_count)) {
			ret = -EEXIST;
			goto out;
		}
	}
	s = store_new(e->index, e->unit_base, e->unit_count);
	if (!s) {
		ret = -ENOMEM;
		goto out;
	}
	atomic_store(&s->state, state);
	s->io_store = io_store;
	s->size_bytes = size_bytes;
	memcpy(s->uuid, e->uuid, CFS_UUID_BYTES);
	memcpy(s->label, e->label, CFS_LABEL_BYTES);
	snprintf(s->source, sizeof(s->source), "%s", source ? source : "");
	/* Index order, as listings expect. */
	{
		unsigned at = pool->count;

		while (at > 0 && pool->store[at - 1]->index > s->index) {
			pool->store[at] = pool->store[at - 1];
			at--;
		}
		pool->store[at] = s;
		pool->count++;
	}
out:
	pthread_rwlock_unlock(&pool->lock);
	return ret;
}

/* [pool lock] */
static struct pool_store *by_index(struct cfs_pool *pool, uint32_t index);

int cfs_pool_set_state(struct cfs_pool *pool, uint32_t store, uint32_t state)
{
	struct pool_store *s;

	pthread_rwlock_rdlock(&pool->lock);
	s = by_index(pool, store);
	if (s)
		atomic_store(&s->state, state);
	pthread_rwlock_unlock(&pool->lock);
	return s ? 0 : -ENOENT;
}

int cfs_pool_drop_store(struct cfs_pool *pool, uint32_t store)
{
	struct pool_store *s = NULL;
	struct cfs_alloc_stat st;
	unsigned i;
	int ret = 0;

	if (store == 0)
		return -EINVAL;
	pthread_rwlock_wrlock(&pool->lock);
	for (i = 0; i < pool->count; i++)
		if (pool->store[i]->index == store)
			s = pool->store[i];
	if (!s) {
		ret = -ENOENT;
		goto out;
	}
	cfs_alloc_stat(s->alloc, &st);
	if (st.used_units || st.busy_units) {
		ret = -EBUSY;
		goto out;
	}
	for (i = 0; pool->store[i] != s; i++)
		;
	memmove(&pool->store[i], &pool->store[i + 1], (pool->count - i - 1) * sizeof(s));
	pool->count--;
	if (atomic_load(&pool->default_store) == store)
		atomic_store(&pool->default_store, CFS_STORE_NONE);
	store_free(s);
out:
	pthread_rwlock_unlock(&pool->lock);
	return ret;
}

unsigned cfs_pool_count(struct cfs_pool *pool)
{
	unsigned n;

	pthread_rwlock_rdlock(&pool->lock);
	n = pool->count;
	pthread_rwlock_unlock(&pool->lock);
	return n;
}

bool cfs_pool_is_multi(struct cfs_pool *pool)
{
	return cfs_pool_count(pool) > 1;
}

uint64_t cfs_pool_size_bytes(struct cfs_pool *pool)
{
	uint64_t sum = 0;

	pthread_rwlock_rdlock(&pool->lock);
	for (unsigned i = 0; i < pool->count; i++)
		sum += pool->store[i]->size_bytes;
	pthread_rwlock_unlock(&pool->lock);
	return sum;
}

/* [pool lock] */
static struct pool_store *by_index(struct cfs_pool *pool, uint32_t index)
{
	for (unsigned i = 0; i < pool->count; i++)
		if (pool->store[i]->index == index)
			return pool->store[i];
	return NULL;
}

/* [pool lock] The store holding [unit, +count), or NULL. */
static struct pool_store *by_unit(struct cfs_pool *pool, uint64_t unit, uint64_t count)
{
	for (unsigned i = 0; i < pool->count; i++) {
		struct pool_store *s = pool->store[i];

		if (unit >= s->unit_base && unit - s->unit_base < s->unit_count)
			return count <= s->unit_count - (unit - s->unit_base) ? s : NULL;
	}
	return NULL;
}

/* [pool lock] The units store s holds back: cfs_pool_set_held_back(), at most a
 * quarter of the store (a small store keeps most of its space usable). */
static uint64_t held_back_of(struct cfs_pool *pool, const struct pool_store *s)
{
	uint64_t units = atomic_load(&pool->held_back_units);

	return units < s->unit_count / 4 ? units : s->unit_count / 4;
}

int cfs_pool_get(struct cfs_pool *pool, uint32_t store, uint64_t hint_unit, uint64_t want_units,
		 bool writeback, uint64_t *first_out, uint64_t *count_out)
{
	struct pool_store *s;
	uint64_t hint = CFS_ALLOC_NO_HINT;
	int ret;

	pthread_rwlock_rdlock(&pool->lock);
	s = by_index(pool, store);
	if (!s) {
		pthread_rwlock_unlock(&pool->lock);
		return -ENOENT;
	}
	if (hint_unit != CFS_ALLOC_NO_HINT && hint_unit >= s->unit_base &&
	    hint_unit - s->unit_base < s->unit_count)
		hint = hint_unit - s->unit_base;
	ret = cfs_alloc_get_keeping(s->alloc, hint, want_units,
				    writeback ? 0 : held_back_of(pool, s), first_out, count_out);
	if (!ret)
		*first_out += s->unit_base;
	pthread_rwlock_unlock(&pool->lock);
	return ret;
}

void cfs_pool_set_held_back(struct cfs_pool *pool, uint64_t units)
{
	atomic_store(&pool->held_back_units, units);
}

/* [pool lock] Free and busy units of s above what it holds back. */
static uint64_t room_of(struct cfs_pool *pool, const struct pool_store *s)
{
	struct cfs_alloc_stat st;
	uint64_t have, keep = held_back_of(pool, s);

	cfs_alloc_stat(s->alloc, &st);
	have = st.free_units + st.busy_units;
	return have > keep ? have - keep : 0;
}

bool cfs_pool_has_room(struct cfs_pool *pool, uint32_t store, uint64_t units)
{
	struct pool_store *s;
	bool room;

	if (!atomic_load(&pool->held_back_units))
		return true; /* nothing held back: the allocator alone says */
	pthread_rwlock_rdlock(&pool->lock);
	s = by_index(pool, store);
	room = !s || room_of(pool, s) >= units;
	pthread_rwlock_unlock(&pool->lock);
	return room;
}

uint64_t cfs_pool_avail_units(struct cfs_pool *pool)
{
	uint64_t sum = 0;

	pthread_rwlock_rdlock(&pool->lock);
	for (unsigned i = 0; i < pool->count; i++)
		sum += room_of(pool, pool->store[i]);
	pthread_rwlock_unlock(&pool->lock);
	return sum;
}

int cfs_pool_reserve(struct cfs_pool *pool, uint64_t first_unit, uint64_t count)
{
	struct pool_store *s;
	int ret;

	pthread_rwlock_rdlock(&pool->lock);
	s = by_unit(pool, first_unit, count);
	ret = s ? cfs_alloc_reserve(s->alloc, first_unit - s->unit_base, count) : -ERANGE;
	pthread_rwlock_unlock(&pool->lock);
	return ret;
}

void cfs_pool_free(struct cfs_pool *pool, uint64_t first_unit, uint64_t count, uint64_t seq)
{
	struct pool_store *s;

	pthread_rwlock_rdlock(&pool->lock);
	s = by_unit(pool, first_unit, count);
	CFS_ASSERT(s); /* a unit outside every store was never handed out */
	cfs_alloc_free(s->alloc, first_unit - s->unit_base, count, seq);
	pthread_rwlock_unlock(&pool->lock);
}

/* ---- pieces (piece.h) ------------------------------------------------------------- */

/* [pool lock] Store s's pieces in *out, made on first use: 0, `missing`
 * without s, -EINVAL on a pool without pieces, -ENOMEM. */
static int pieces_of(struct cfs_pool *pool, struct pool_store *s, int missing,
		     struct cfs_pieces **out)
{
	struct cfs_pieces *p, *none = NULL;

	if (!s)
		return missing;
	p = atomic_load(&s->pieces);
	if (!p && !pool->piece_min)
		return -EINVAL;
	if (!p && cfs_pieces_create(s->alloc, pool->unit_bytes, pool->piece_min, &p))
		return -ENOMEM;
	if (p != atomic_load(&s->pieces) && !atomic_compare_exchange_strong(&s->pieces, &none, p)) {
		cfs_pieces_destroy(p); /* another thread made it first */
		p = none;
	}
	*out = p;
	return 0;
}

uint32_t cfs_pool_piece_size(struct cfs_pool *pool, uint64_t bytes)
{
	return cfs_pieces_size(pool->piece_min, pool->unit_bytes, bytes);
}

int cfs_pool_get_piece(struct cfs_pool *pool, uint32_t store, uint32_t bytes, bool writeback,
		       uint64_t *unit_out, uint32_t *offset_out)
{
	struct pool_store *s;
	struct cfs_pieces *p;
	int ret;

	pthread_rwlock_rdlock(&pool->lock);
	s = by_index(pool, store);
	ret = pieces_of(pool, s, -ENOENT, &p);
	if (!ret)
		ret = cfs_pieces_get_keeping(p, bytes, writeback ? 0 : held_back_of(pool, s),
					     unit_out, offset_out);
	if (!ret)
		*unit_out += s->unit_base;
	pthread_rwlock_unlock(&pool->lock);
	return ret;
}

int cfs_pool_reserve_piece(struct cfs_pool *pool, uint64_t unit, uint32_t offset, uint32_t bytes)
{
	struct pool_store *s;
	struct cfs_pieces *p;
	int ret;

	pthread_rwlock_rdlock(&pool->lock);
	s = by_unit(pool, unit, 1);
	ret = pieces_of(pool, s, -ERANGE, &p);
	if (!ret)
		ret = cfs_pieces_reserve(p, unit - s->unit_base, offset, bytes);
	pthread_rwlock_unlock(&pool->lock);
	return ret;
}

void cfs_pool_free_piece(struct cfs_pool *pool, uint64_t unit, uint32_t offset, uint32_t bytes,
			 uint64_t seq)
{
	struct pool_store *s;

	pthread_rwlock_rdlock(&pool->lock);
	s = by_unit(pool, unit, 1);
	/* A piece outside every store, or on a store without pieces, was
	 * never handed out. */
	CFS_ASSERT(s && atomic_load(&s->pieces));
	cfs_pieces_free(atomic_load(&s->pieces), unit - s->unit_base, offset, bytes, seq);
	pthread_rwlock_unlock(&pool->lock);
}

void cfs_pool_piece_stat(struct cfs_pool *pool, struct cfs_pieces_stat *st)
{
	memset(st, 0, sizeof(*st));
	pthread_rwlock_rdlock(&pool->lock);
	for (unsigned i = 0; i < pool->count; i++) {
		struct cfs_pieces *p = atomic_load(&pool->store[i]->pieces);
		struct cfs_pieces_stat one;

		if (!p)
			continue;
		cfs_pieces_stat(p, &one);
		st->units += one.units;
		st->used_bytes += one.used_bytes;
		st->busy_bytes += one.busy_bytes;
		st->free_bytes += one.free_bytes;
		st->pieces += one.pieces;
	}
	pthread_rwlock_unlock(&pool->lock);
}

struct discard_shift {
	void (*discard)(void *arg, uint64_t first_unit, uint64_t count);
	void *arg;
	uint64_t base;
};

static void discard_shifted(void *arg, uint64_t first_unit, uint64_t count)
{
	struct discard_shift *d = arg;

	d->discard(d->arg, d->base + first_unit, count);
}

uint64_t cfs_pool_commit_done(struct cfs_pool *pool, uint64_t durable_seq, bool queue_discards)
{
	uint64_t released = 0;

	pthread_rwlock_rdlock(&pool->lock);
	for (unsigned i = 0; i < pool->count; i++) {
		struct cfs_pieces *p = atomic_load(&pool->store[i]->pieces);

		/* First: units its released pieces leave empty go back busy,
		 * and the allocator releases them now. */
		if (p)
			cfs_pieces_commit_done(p, durable_seq);
		released +=
			cfs_alloc_commit_done(pool->store[i]->alloc, durable_seq, queue_discards);
	}
	pthread_rwlock_unlock(&pool->lock);
	return released;
}

uint64_t cfs_pool_discard_some(struct cfs_pool *pool, uint64_t budget_units,
			       void (*discard)(void *arg, uint64_t first_unit, uint64_t count),
			       void *arg)
{
	uint64_t left = 0;

	if (atomic_load(&pool->discard_holds))
		return 0; /* the queue waits for cfs_pool_release_discards() */
	pthread_rwlock_rdlock(&pool->lock);
	for (unsigned i = 0; i < pool->count; i++) {
		struct discard_shift d = {discard, arg, pool->store[i]->unit_base};

		/* The budget is per store: a pool has a handful. */
		left += cfs_alloc_discard_some(pool->store[i]->alloc, budget_units, discard_shifted,
					       &d);
	}
	pthread_rwlock_unlock(&pool->lock);
	return left;
}

void cfs_pool_hold_discards(struct cfs_pool *pool)
{
	atomic_fetch_add(&pool->discard_holds, 1);
}

void cfs_pool_release_discards(struct cfs_pool *pool)
{
	uint32_t was = atomic_fetch_sub(&pool->discard_holds, 1);

	CFS_ASSERT(was > 0);
}

void cfs_pool_stat(struct cfs_pool *pool, struct cfs_alloc_stat *st)
{
	memset(st, 0, sizeof(*st));
	pthread_rwlock_rdlock(&pool->lock);
	for (unsigned i = 0; i < pool->count; i++) {
		struct cfs_alloc_stat one;

		cfs_alloc_stat(pool->store[i]->alloc, &one);
		st->total_units += one.total_units;
		st->free_units += one.free_units;
		st->busy_units += one.busy_units;
		st->used_units += one.used_units;
	}
	pthread_rwlock_unlock(&pool->lock);
}

int cfs_pool_unit_state(struct cfs_pool *pool, uint64_t unit)
{
	struct pool_store *s;
	int ret;

	pthread_rwlock_rdlock(&pool->lock);
	s = by_unit(pool, unit, 1);
	ret = s ? cfs_alloc_unit_state(s->alloc, unit - s->unit_base) : -ERANGE;
	pthread_rwlock_unlock(&pool->lock);
	return ret;
}

unsigned cfs_pool_ranges(struct cfs_pool *pool, struct cfs_pool_range *out)
{
	unsigned n;

	pthread_rwlock_rdlock(&pool->lock);
	for (n = 0; n < pool->count; n++)
		out[n] = (struct cfs_pool_range){pool->store[n]->index, pool->store[n]->unit_base,
						 pool->store[n]->unit_count};
	pthread_rwlock_unlock(&pool->lock);
	return n;
}

uint32_t cfs_pool_store_of(struct cfs_pool *pool, uint64_t unit)
{
	struct pool_store *s;
	uint32_t index;

	pthread_rwlock_rdlock(&pool->lock);
	s = by_unit(pool, unit, 1);
	index = s ? s->index : CFS_STORE_NONE;
	pthread_rwlock_unlock(&pool->lock);
	return index;
}

uint32_t cfs_pool_find(struct cfs_pool *pool, const char *name, size_t length)
{
	uint32_t found = CFS_STORE_NONE;
	uint64_t v = 0;
	bool numeric = length > 0 && length <= 9;

	for (size_t i = 0; i < length && numeric; i++) {
		if (name[i] < '0' || name[i] > '9')
			numeric = false;
		else
			v = v * 10 + (uint64_t)(name[i] - '0');
	}
	pthread_rwlock_rdlock(&pool->lock);
	for (unsigned i = 0; i < pool->count && found == CFS_STORE_NONE; i++) {
		const struct pool_store *s = pool->store[i];

		if (length && strlen(s->label) == length && !memcmp(s->label, name, length))
			found = s->index;
	}
	if (found == CFS_STORE_NONE && numeric && by_index(pool, (uint32_t)v))
		found = (uint32_t)v;
	pthread_rwlock_unlock(&pool->lock);
	return found;
}

static void info_of(struct cfs_pool *pool, const struct pool_store *s,
		    struct cfs_pool_store_info *info)
{
	uint64_t have;

	info->index = s->index;
	info->state = atomic_load(&s->state);
	info->io_store = s->io_store;
	info->unit_base = s->unit_base;
	info->unit_count = s->unit_count;
	info->size_bytes = s->size_bytes;
	memcpy(info->label, s->label, sizeof(info->label));
	memcpy(info->source, s->source, sizeof(info->source));
	cfs_alloc_stat(s->alloc, &info->space);
	info->held_back_units = held_back_of(pool, s);
	have = info->space.free_units + info->space.busy_units;
	info->room_units = have > info->held_back_units ? have - info->held_back_units : 0;
}

int cfs_pool_store_info(struct cfs_pool *pool, uint32_t store, struct cfs_pool_store_info *info)
{
	struct pool_store *s;

	pthread_rwlock_rdlock(&pool->lock);
	s = by_index(pool, store);
	if (s)
		info_of(pool, s, info);
	pthread_rwlock_unlock(&pool->lock);
	return s ? 0 : -ENOENT;
}

int cfs_pool_store_at(struct cfs_pool *pool, unsigned i, struct cfs_pool_store_info *info)
{
	int ret = -ENOENT;

	pthread_rwlock_rdlock(&pool->lock);
	if (i < pool->count) {
		info_of(pool, pool->store[i], info);
		ret = 0;
	}
	pthread_rwlock_unlock(&pool->lock);
	return ret;
}

void cfs_pool_store_name(struct cfs_pool *pool, uint32_t store, char *buf, size_t buf_bytes)
{
	struct pool_store *s;

	pthread_rwlock_rdlock(&pool->lock);
	s = by_index(pool, store);
	if (s && s->label[0])
		snprintf(buf, buf_bytes, "%s", s->label);
	else
		snprintf(buf, buf_bytes, "%" PRIu32, store);
	pthread_rwlock_unlock(&pool->lock);
}

uint32_t cfs_pool_store_state(struct cfs_pool *pool, uint32_t store)
{
	struct pool_store *s;
	uint32_t state;

	pthread_rwlock_rdlock(&pool->lock);
	s = by_index(pool, store);
	state = s ? atomic_load(&s->state) : 0;
	pthread_rwlock_unlock(&pool->lock);
	return state;
}

uint32_t cfs_pool_default_store(struct cfs_pool *pool)
{
	uint32_t want = atomic_load(&pool->default_store), best = CFS_STORE_NONE;
	uint64_t most = 0;

	pthread_rwlock_rdlock(&pool->lock);
	if (want != CFS_STORE_NONE) {
		struct pool_store *s = by_index(pool, want);

		if (s && atomic_load(&s->state) == CFS_STORE_ACTIVE) {
			pthread_rwlock_unlock(&pool->lock);
			return want;
		}
	}
	for (unsigned i = 0; i < pool->count; i++) {
		struct pool_store *s = pool->store[i];
		struct cfs_alloc_stat st;

		if (atomic_load(&s->state) != CFS_STORE_ACTIVE)
			continue;
		cfs_alloc_stat(s->alloc, &st);
		if (best == CFS_STORE_NONE || st.free_units + st.busy_units > most) {
			best = s->index;
			most = st.free_units + st.busy_units;
		}
	}
	pthread_rwlock_unlock(&pool->lock);
	return best == CFS_STORE_NONE ? 0 : best;
}

void cfs_pool_set_default(struct cfs_pool *pool, uint32_t store)
{
	atomic_store(&pool->default_store, store);
}
