/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * namespace.c — inodes, directories, symlinks, user xattrs, lookup/open
 * counts and orphans, in memory; every mutation logged through the journal.
 *
 * Main invariants:
 *   - The inode table (under ns_lock) holds every live inode; an inode
 *     leaves it exactly once, when it is deleted (nlink == 0, nlookup == 0,
 *     open_count == 0), and its memory goes when refs drops to 0 (table,
 *     open files, the committer queue and temporary pins each hold one).
 *   - A directory's entries are in its hash table (name -> entry) and in its
 *     cookie-ordered array (readdir), both under ns_lock; cookies only grow.
 *   - Records are appended after the state changed, under the lock of what
 *     they describe, one transaction per operation, carrying absolute state.
 *   - Units unmapped while the inode has I/O references are freed only when
 *     the references taken before the unmap are gone (deferred list, two
 *     generations of references), so a late write never lands in a unit
 *     another file owns, and a file that is never idle still frees space.
 *
 * What it does not do: data I/O (zeroing partial sectors is reported to the
 * caller), permission checks (the kernel's default_permissions), FUSE.
 *
 * Divisions: helpers - table - directories - inode lifetime - lookups -
 * creation - removal - rename - setattr/space - data path - xattrs -
 * committer/snapshot - replay - mount - dump.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "fs/base/assert.h"
#include "fs/meta/alloc.h"
#include "fs/meta/fs.h"
#include "fs/meta/namespace.h"
#include "fs/meta/pool.h"

#define CFS_INODE_F_QUEUED (1u << 0)	 /* on the committer queue */
#define CFS_INODE_F_ATTR_DIRTY (1u << 1) /* size/times changed by writes, not logged */
#define CFS_INODE_F_SIZE_DIRTY (1u << 5) /* of those, the size grew ([lock]) */
#define CFS_INODE_F_DELETED (1u << 2)	 /* INODE_DELETE logged, out of the table */
#define CFS_INODE_F_DEFERRED (1u << 3)	 /* deferred frees or retired records wait */
/* Born without a name (O_TMPFILE without O_EXCL) and never linked: a link
 * may name it at nlink 0. Not persisted: no open survives a restart. */
#define CFS_INODE_F_LINKABLE (1u << 4)

#define FILE_SIZE_MAX (1ull << 60) /* sparse size limit (mapping has its own) */
#define MAP_RETRIES 4		   /* forced commits before -ENOSPC */
#define DIR_BUCKETS_MIN_BITS 3u	   /* 8 */
#define TABLE_BUCKETS_MIN_BITS 10u /* 1024 */

struct cfs_dirent {
	struct cfs_hlink hlink; /* in dir->names (hash: of the name) */
	uint64_t ino;
	uint64_t cookie;
	uint32_t mode; /* type bits of ino (d_type) */
	uint32_t name_length;
	char name[]; /* NUL-terminated */
};

struct dir_slot {
	uint64_t cookie;
	struct cfs_dirent *dirent; /* NULL: removed (a hole until compaction) */
};

struct cfs_dir {
	struct cfs_htable names; /* name -> entry */
	struct dir_slot *order;	 /* ascending cookies */
	uint64_t order_len;
	uint64_t order_cap;
	uint64_t order_holes;
	uint64_t next_cookie;
};

struct cfs_xattr {
	struct cfs_xattr *next;
	uint32_t name_length;
	uint32_t value_length;
	char data[]; /* name, NUL, value */
};

struct cfs_deferred {
	struct cfs_deferred *next;
	uint64_t first_unit;
	uint64_t count;
	uint64_t seq;
	uint32_t piece_offset_bytes; /* a piece of first_unit (count 1) */
	uint32_t piece_bytes;	     /* 0: whole units */
	uint8_t empty_seen;	     /* bit g: I/O generation g seen empty
				      * since the unmap; 3: free it */
};

struct cfs_ns {
	struct cfs_fs *fs;
	pthread_rwlock_t lock;			/* ns_lock */
	struct cfs_htable inodes;		/* ino -> inode */
	uint64_t next_ino;			/* [ns_lock write] */
	uint64_t next_generation;		/* [ns_lock write] */
	_Atomic(struct cfs_inode *) dirty_head; /* committer queue (Treiber stack) */
	/* Units (a piece counts as one) on the inodes' deferred lists: space
	 * that comes back once older I/O references end (space_coming). */
	_Atomic uint64_t deferred_units;
};

/* ---- helpers -------------------------------------------------------------------- */

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline bool is_dir(const struct cfs_inode *inode)
{
	return S_ISDIR(inode->mode);
}

static inline bool is_reg(const struct cfs_inode *inode)
{
	return S_ISREG(inode->mode);
}

/* 0, -EINVAL ("", ".", "..", '/'), -ENAMETOOLONG. */
static int name_check(const char *name, size_t *length)
{
	size_t n = strnlen(name, CFS_NAME_MAX + 1);

	if (n > CFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (n == 0 || memchr(name, '/', n))
		return -EINVAL;
	if ((n == 1 && name[0] == '.') || (n == 2 && name[0] == '.' && name[1] == '.'))
		return -EINVAL;
	*length = n;
	return 0;
}

_Static_assert(CFS_EXTENT_PIECE_MIN == CFS_PIECE_MIN_BYTES, "the map takes the format's pieces");

static inline struct cfs_ns *ns_of(struct cfs_fs *fs)
{
	return fs->ns;
}

static void fill_attr(struct cfs_fs *fs, struct cfs_inode *inode, struct cfs_attr *attr)
{
	attr->ino = inode->ino;
	attr->generation = inode->generation;
	attr->mode = inode->mode;
	attr->nlink = inode->nlink;
	attr->uid = inode->uid;
	attr->gid = inode->gid;
	attr->rdev = inode->rdev;
	attr->size_bytes = atomic_load(&inode->size_bytes);
	attr->blocks_512 = inode->map ? cfs_extent_mapped_bytes(inode->map) / 512 : 0;
	attr->blksize_bytes = fs->geom.unit_bytes;
	attr->atime_ns = atomic_load(&inode->atime_ns);
	attr->mtime_ns = atomic_load(&inode->mtime_ns);
	attr->ctime_ns = atomic_load(&inode->ctime_ns);
}

static void jrec_of(const struct cfs_inode *inode, struct cfs_jrec_inode *rec, bool with_target)
{
	memset(rec, 0, sizeof(*rec));
	rec->ino = inode->ino;
	rec->generation = inode->generation;
	rec->mode = inode->mode;
	rec->nlink = inode->nlink;
	rec->uid = inode->uid;
	rec->gid = inode->gid;
	rec->rdev = inode->rdev;
	rec->size_bytes = atomic_load(&inode->size_bytes);
	rec->atime_ns = atomic_load(&inode->atime_ns);
	rec->mtime_ns = atomic_load(&inode->mtime_ns);
	rec->ctime_ns = atomic_load(&inode->ctime_ns);
	rec->page_size_bytes = inode->page_size_bytes;
	rec->parent_ino = is_dir(inode) ? inode->parent_ino : 0;
	if (with_target && inode->symlink_target) {
		rec->target = inode->symlink_target;
		rec->target_length = (uint32_t)strlen(inode->symlink_target);
	}
}

/* Log an INODE_UPDATE (or CREATE) of inode into txn; caller holds its lock. */
static void txn_inode(struct cfs_txn *txn, uint16_t type, const struct cfs_inode *inode)
{
	struct cfs_jrec_inode rec;

	jrec_of(inode, &rec, type == CFS_LOG_INODE_CREATE);
	cfs_txn_inode(txn, type, &rec);
}

/* Lock up to four inodes in ascending number, skipping NULLs and repeats. */
static unsigned lock_inodes(struct cfs_inode **set, unsigned n)
{
	unsigned kept = 0;

	for (unsigned i = 0; i < n; i++) {
		bool dup = false;

		if (!set[i])
			continue;
		for (unsigned j = 0; j < kept; j++)
			dup |= set[j] == set[i];
		if (!dup)
			set[kept++] = set[i];
	}
	for (unsigned i = 1; i < kept; i++)
		for (unsigned j = i; j > 0 && set[j - 1]->ino > set[j]->ino; j--) {
			struct cfs_inode *t = set[j];

			set[j] = set[j - 1];
			set[j - 1] = t;
		}
	for (unsigned i = 0; i < kept; i++)
		pthread_mutex_lock(&set[i]->lock);
	return kept;
}

static void unlock_inodes(struct cfs_inode **set, unsigned kept)
{
	while (kept)
		pthread_mutex_unlock(&set[--kept]->lock);
}

/* ---- the inode table (ns_lock) --------------------------------------------------- */

static struct cfs_inode *table_find(struct cfs_ns *ns, uint64_t ino)
{
	struct cfs_hlink *link = cfs_htable_find(&ns->inodes, ino);

	return link ? cfs_container_of(link, struct cfs_inode, hlink) : NULL;
}

static void table_insert(struct cfs_ns *ns, struct cfs_inode *inode)
{
	cfs_htable_insert(&ns->inodes, &inode->hlink, inode->ino);
	if (inode->ino >= ns->next_ino)
		ns->next_ino = inode->ino + 1;
}

static void table_remove(struct cfs_ns *ns, struct cfs_inode *inode)
{
	cfs_htable_remove(&ns->inodes, &inode->hlink);
}

/* Every inode of the table in turn, from table_next(ns, NULL). */
static struct cfs_inode *table_next(struct cfs_ns *ns, struct cfs_inode *inode)
{
	struct cfs_hlink *link = cfs_htable_next(&ns->inodes, inode ? &inode->hlink : NULL);

	return link ? cfs_container_of(link, struct cfs_inode, hlink) : NULL;
}

/* ---- directories (ns_lock) -------------------------------------------------------- */

static uint64_t name_hash(const char *name, size_t length)
{
	return XXH3_64bits(name, length);
}

static struct cfs_dir *dir_new(void)
{
	struct cfs_dir *dir = calloc(1, sizeof(*dir));

	if (!dir)
		return NULL;
	if (cfs_htable_init(&dir->names, DIR_BUCKETS_MIN_BITS)) {
		free(dir);
		return NULL;
	}
	dir->next_cookie = CFS_READDIR_COOKIE_FIRST;
	return dir;
}

static void dir_free(struct cfs_dir *dir)
{
	if (!dir)
		return;
	for (struct cfs_hlink *link = cfs_htable_next(&dir->names, NULL), *next; link;
	     link = next) {
		next = cfs_htable_next(&dir->names, link);
		free(cfs_container_of(link, struct cfs_dirent, hlink));
	}
	cfs_htable_fini(&dir->names);
	free(dir->order);
	free(dir);
}

static struct cfs_dirent *dir_find(const struct cfs_dir *dir, const char *name, size_t length)
{
	struct cfs_hlink *link = cfs_htable_find(&dir->names, name_hash(name, length));

	for (; link; link = cfs_htable_find_next(link)) {
		struct cfs_dirent *d = cfs_container_of(link, struct cfs_dirent, hlink);

		if (d->name_length == length && !memcmp(d->name, name, length))
			return d;
	}
	return NULL;
}

/* Index in dir->order of the first slot with cookie > after. */
static uint64_t order_search(const struct cfs_dir *dir, uint64_t after)
{
	uint64_t lo = 0, hi = dir->order_len;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (dir->order[mid].cookie <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void order_compact(struct cfs_dir *dir)
{
	uint64_t kept = 0;

	for (uint64_t i = 0; i < dir->order_len; i++)
		if (dir->order[i].dirent)
			dir->order[kept++] = dir->order[i];
	dir->order_len = kept;
	dir->order_holes = 0;
}

/*
 * Add an entry with the given cookie (0: the next one). Cookies of replayed
 * entries may be lower than existing ones (an entry replaced during replay):
 * the order array then takes an insertion in the middle. 0 or -ENOMEM.
 */
static int dir_add(struct cfs_dir *dir, const char *name, size_t length, uint64_t ino,
		   uint32_t mode, uint64_t cookie, struct cfs_dirent **out)
{
	struct cfs_dirent *d;
	uint64_t at;

	if (dir->order_len == dir->order_cap) {
		if (dir->order_holes > dir->order_len / 2) {
			order_compact(dir);
		} else {
			uint64_t cap = dir->order_cap ? dir->order_cap * 2 : 16;
			struct dir_slot *grown = realloc(dir->order, cap * sizeof(*grown));

			if (!grown)
				return -ENOMEM;
			dir->order = grown;
			dir->order_cap = cap;
		}
	}
	d = malloc(sizeof(*d) + length + 1);
	if (!d)
		return -ENOMEM;
	if (cookie == 0)
		cookie = dir->next_cookie;
	if (cookie >= dir->next_cookie)
		dir->next_cookie = cookie + 1;
	d->ino = ino;
	d->cookie = cookie;
	d->mode = mode & S_IFMT;
	d->name_length = (uint32_t)length;
	memcpy(d->name, name, length);
	d->name[length] = '\0';
	cfs_htable_insert(&dir->names, &d->hlink, name_hash(name, length));

	at = order_search(dir, cookie);
	if (at > 0 && dir->order[at - 1].cookie == cookie && !dir->order[at - 1].dirent) {
		/* Replay re-adds an entry with the cookie its removal just left
		 * as a hole: take the hole back. */
		dir->order[at - 1].dirent = d;
		dir->order_holes--;
	} else {
		if (at < dir->order_len)
			memmove(&dir->order[at + 1], &dir->order[at],
				(dir->order_len - at) * sizeof(*dir->order));
		dir->order[at] = (struct dir_slot){cookie, d};
		dir->order_len++;
	}
	if (out)
		*out = d;
	return 0;
}

static void dir_remove(struct cfs_dir *dir, struct cfs_dirent *d)
{
	uint64_t at;

	cfs_htable_remove(&dir->names, &d->hlink);
	/* Cookies are unique among live entries, but a hole may share one. */
	at = order_search(dir, d->cookie - 1);
	while (at < dir->order_len && dir->order[at].cookie == d->cookie &&
	       dir->order[at].dirent != d)
		at++;
	CFS_ASSERT(at < dir->order_len && dir->order[at].dirent == d);
	dir->order[at].dirent = NULL;
	dir->order_holes++;
	free(d);
	if (dir->order_holes > 64 && dir->order_holes > dir->order_len / 2)
		order_compact(dir);
}

/* ---- inode lifetime ---------------------------------------------------------------- */

static void extent_notify(void *arg);

/* A new inode with one reference (the caller's), not in the table. */
static struct cfs_inode *inode_new(struct cfs_fs *fs, uint64_t ino, uint64_t generation,
				   uint32_t mode)
{
	struct cfs_inode *inode = calloc(1, sizeof(*inode));

	if (!inode)
		return NULL;
	inode->ino = ino;
	inode->generation = generation;
	inode->mode = mode;
	inode->ns = fs->ns;
	inode->place = (struct cfs_place){CFS_STORE_NONE, CFS_STORE_NONE, 0, 0};
	pthread_mutex_init(&inode->lock, NULL);
	atomic_init(&inode->life, 1);
	if (S_ISREG(mode) && cfs_extent_map_create(&fs->geom, extent_notify, inode, &inode->map))
		goto out_free;
	if (S_ISDIR(mode) && !(inode->dir = dir_new()))
		goto out_free;
	return inode;
out_free:
	pthread_mutex_destroy(&inode->lock);
	free(inode);
	return NULL;
}

static void inode_free(struct cfs_inode *inode)
{
	struct cfs_xattr *x = inode->xattrs;
	struct cfs_deferred *df = inode->deferred;

	while (x) {
		struct cfs_xattr *next = x->next;

		free(x);
		x = next;
	}
	while (df) {
		struct cfs_deferred *next = df->next;

		atomic_fetch_sub(&inode->ns->deferred_units, df->count);
		free(df);
		df = next;
	}
	cfs_extent_map_destroy(inode->map);
	dir_free(inode->dir);
	free(inode->symlink_target);
	cfs_cs_free(atomic_load(&inode->stats));
	free(inode->held);
	pthread_mutex_destroy(&inode->lock);
	free(inode);
}

/* inode->life: references in the low 32 bits, then two 16-bit counts of I/O
 * references, one per generation. */
#define LIFE_IO(gen) (1ull << (32 + 16 * (gen))) /* one I/O reference of gen */
#define LIFE_IO_MAX 0xffffu			 /* per generation */
#define LIFE_REFS_MASK (LIFE_IO(0) - 1)

static inline void inode_get(struct cfs_inode *inode)
{
	atomic_fetch_add(&inode->life, 1);
}

/* Whoever brings life to 0 (no reference, no I/O reference) frees. */
static void inode_put(struct cfs_inode *inode)
{
	uint64_t old = atomic_fetch_sub(&inode->life, 1);

	CFS_ASSERT(old & LIFE_REFS_MASK);
	if (old == 1)
		inode_free(inode); /* out of the table: the table holds a reference */
}

static inline uint32_t io_refs_of(uint64_t life, unsigned gen)
{
	return (uint32_t)(life >> (32 + 16 * gen)) & LIFE_IO_MAX;
}

/* Bit g set: generation g has no I/O reference now. Read with a
 * read-modify-write, not a load: a reference it does not see is added later
 * in life's order, and that add (acquire) then sees the caller's unmap
 * (released here), so it looks the map up after the unmap. */
static inline uint8_t io_gens_empty(struct cfs_inode *inode)
{
	uint64_t life = atomic_fetch_add(&inode->life, 0);

	return (uint8_t)((io_refs_of(life, 0) == 0 ? 1u : 0u) |
			 (io_refs_of(life, 1) == 0 ? 2u : 0u));
}

/* Queue the inode for the committer (any thread, lock-free). */
static void inode_queue(struct cfs_ns *ns, struct cfs_inode *inode)
{
	struct cfs_inode *head;

	if (atomic_fetch_or(&inode->flags, CFS_INODE_F_QUEUED) & CFS_INODE_F_QUEUED)
		return;
	inode_get(inode);
	head = atomic_load(&ns->dirty_head);
	do {
		inode->dirty_next = head;
	} while (!atomic_compare_exchange_weak(&ns->dirty_head, &head, inode));
}

static void extent_notify(void *arg)
{
	struct cfs_inode *inode = arg;

	inode_queue(inode->ns, inode);
}

/* Space unmapped from a file: whole units, or a piece of one. */
struct freed {
	uint64_t first_unit;
	uint64_t count;
	uint32_t piece_offset_bytes;
	uint32_t piece_bytes; /* 0: whole units */
};

/* Give it back: busy until seq is durable (units and pieces alike). */
static void freed_release(struct cfs_fs *fs, const struct freed *f, uint64_t seq)
{
	if (f->piece_bytes)
		cfs_pool_free_piece(fs->pool, f->first_unit, f->piece_offset_bytes, f->piece_bytes,
				    seq);
	else
		cfs_pool_free(fs->pool, f->first_unit, f->count, seq);
}

struct free_ctx {
	struct cfs_fs *fs;
	struct cfs_inode *inode;
	struct cfs_txn *txn;
	struct freed runs[64];
	unsigned run_count;
	bool overflow;
};

/* Remember f on the inode's deferred list (freed once the I/O references
 * older than its unmap are gone: inode_quiesce); empty: the generations seen
 * empty since the unmap. False without memory. */
static bool defer_freed(struct cfs_inode *inode, const struct freed *f, uint64_t seq, uint8_t empty)
{
	struct cfs_deferred *df = malloc(sizeof(*df));

	if (!df)
		return false;
	*df = (struct cfs_deferred){inode->deferred,	   f->first_unit,  f->count, seq,
				    f->piece_offset_bytes, f->piece_bytes, empty};
	inode->deferred = df;
	atomic_fetch_add(&inode->ns->deferred_units, f->count);
	return true;
}

/* Unmap callback: log and remember the run for freeing after txn_end. */
static void free_ctx_unmapped(void *arg, uint64_t file_unit, uint64_t store_unit, uint64_t count,
			      uint32_t piece_offset_bytes, uint32_t piece_bytes)
{
	struct free_ctx *c = arg;
	struct cfs_jrec_extent rec = {c->inode->ino, file_unit, 0, count};
	struct freed f = {store_unit, count, piece_offset_bytes, piece_bytes};

	if (c->txn)
		cfs_txn_extent(c->txn, CFS_LOG_EXTENT_UNMAP, &rec);
	if (c->run_count < 64) {
		c->runs[c->run_count++] = f;
		return;
	}
	c->overflow = true;
	/* More runs than the buffer: remember them on the deferred list with a
	 * seq filled in later (UINT64_MAX replaced in free_ctx_release). If
	 * that fails, leaked until remount rebuilds the allocator. */
	defer_freed(c->inode, &f, UINT64_MAX, 0); /* the unmap may not be done yet */
}

/* Under the inode lock, after txn_end returned seq: give the runs to the
 * allocator now (no I/O references) or defer them. */
static void free_ctx_release(struct free_ctx *c, uint64_t seq)
{
	struct cfs_inode *inode = c->inode;
	uint8_t empty = io_gens_empty(inode); /* after the unmap */
	bool defer = empty != 3;

	for (struct cfs_deferred *df = inode->deferred; df; df = df->next)
		if (df->seq == UINT64_MAX)
			df->seq = seq;
	for (unsigned i = 0; i < c->run_count; i++) {
		if (!defer)
			freed_release(c->fs, &c->runs[i], seq);
		else
			defer_freed(inode, &c->runs[i], seq, empty); /* else leaked until
								      * remount: never
								      * freed early */
	}
	if (defer || c->overflow) {
		atomic_fetch_or(&inode->flags, CFS_INODE_F_DEFERRED);
		/* If the last I/O reference is dropped before io_end sees the
		 * flag, the committer's next pass releases them. */
		inode_queue(inode->ns, inode);
	}
}

/*
 * [inode lock] Release the deferred units whose unmap every I/O reference
 * has outlived: each generation seen empty since the unmap (a reference
 * that looked up the old mapping was taken before the unmap, so it counted
 * in one of them until it ended). While some wait, new I/O joins the empty
 * generation, so the one they wait for drains even on a busy file; its last
 * io_end comes back here. Also frees retired map records (epochs, not I/O
 * references, guard those).
 */
static void inode_quiesce(struct cfs_fs *fs, struct cfs_inode *inode)
{
	uint8_t empty = io_gens_empty(inode);
	struct cfs_deferred **pp = &inode->deferred;
	bool more = false;

	atomic_fetch_and(&inode->flags, ~CFS_INODE_F_DEFERRED);
	while (*pp) {
		struct cfs_deferred *df = *pp;

		df->empty_seen |= empty;
		if (df->empty_seen != 3) {
			pp = &df->next;
			continue;
		}
		*pp = df->next;
		freed_release(fs,
			      &(struct freed){df->first_unit, df->count, df->piece_offset_bytes,
					      df->piece_bytes},
			      df->seq);
		atomic_fetch_sub(&inode->ns->deferred_units, df->count);
		free(df);
	}
	if (inode->deferred) {
		unsigned gen = atomic_load(&inode->io_gen);

		/* Those left wait for gen to drain: send new I/O to the other. */
		if (empty & (1u << (gen ^ 1u)))
			atomic_store(&inode->io_gen, gen ^ 1u);
		more = true;
	}
	if (inode->map && cfs_extent_quiesce(inode->map))
		more = true; /* the map frees the rest epochs later */
	if (more) {
		/* The next commit asks again, even if the file stays idle or
		 * the last io_end missed the flag. */
		atomic_fetch_or(&inode->flags, CFS_INODE_F_DEFERRED);
		inode_queue(inode->ns, inode);
	}
}

/*
 * [ns_lock write] Delete the inode if nothing refers to it any more:
 * log INODE_DELETE, free its units, take it out of the table.
 */
static void inode_maybe_delete(struct cfs_fs *fs, struct cfs_inode *inode)
{
	struct cfs_ns *ns = ns_of(fs);
	struct free_ctx c = {.fs = fs, .inode = inode};
	struct cfs_txn txn;
	uint64_t seq;

	pthread_mutex_lock(&inode->lock);
	if (inode->nlink != 0 || atomic_load(&inode->nlookup) != 0 ||
	    atomic_load(&inode->open_count) != 0 ||
	    (atomic_load(&inode->flags) & CFS_INODE_F_DELETED) || fs->mounted_ro) {
		pthread_mutex_unlock(&inode->lock);
		return;
	}
	CFS_ASSERT(inode->ino != CFS_ROOT_INO);
	CFS_ASSERT(!inode->dir || inode->dir->names.count == 0);
	atomic_fetch_or(&inode->flags, CFS_INODE_F_DELETED);
	cfs_txn_begin(&txn, fs->journal);
	cfs_txn_inode_delete(&txn, inode->ino);
	if (inode->map) {
		int64_t unmapped =
			cfs_extent_unmap(inode->map, 0, UINT64_MAX, free_ctx_unmapped, &c);

		CFS_ASSERT(unmapped >= 0); /* from unit 0 to the end: never allocates */
	}
	seq = cfs_txn_end(&txn);
	free_ctx_release(&c, seq);
	inode_quiesce(fs, inode);
	table_remove(ns, inode);
	pthread_mutex_unlock(&inode->lock);
	inode_put(inode); /* the table's reference */
}

/* ---- lookups ------------------------------------------------------------------------ */

int cfs_ns_create(struct cfs_fs *fs, struct cfs_ns **out)
{
	struct cfs_ns *ns = calloc(1, sizeof(*ns));

	*out = NULL;
	if (!ns)
		return -ENOMEM;
	if (cfs_htable_init(&ns->inodes, TABLE_BUCKETS_MIN_BITS)) {
		free(ns);
		return -ENOMEM;
	}
	ns->fs = fs;
	ns->next_ino = CFS_ROOT_INO + 1;
	ns->next_generation = 1;
	pthread_rwlock_init(&ns->lock, NULL);
	*out = ns;
	return 0;
}

void cfs_ns_destroy(struct cfs_ns *ns)
{
	struct cfs_inode *inode;

	if (!ns)
		return;
	/* Drop the committer queue's references first. */
	inode = atomic_exchange(&ns->dirty_head, NULL);
	while (inode) {
		struct cfs_inode *next = inode->dirty_next;

		atomic_fetch_and(&inode->flags, ~CFS_INODE_F_QUEUED);
		inode_put(inode);
		inode = next;
	}
	for (struct cfs_hlink *link = cfs_htable_next(&ns->inodes, NULL), *next; link;
	     link = next) {
		next = cfs_htable_next(&ns->inodes, link);
		/* Open handles and I/O are gone at unmount: free regardless. */
		inode_free(cfs_container_of(link, struct cfs_inode, hlink));
	}
	pthread_rwlock_destroy(&ns->lock);
	cfs_htable_fini(&ns->inodes);
	free(ns);
}

/* [ns_lock] The directory inode ino, or -ENOENT / -ENOTDIR. */
static int find_dir(struct cfs_ns *ns, uint64_t ino, struct cfs_inode **out)
{
	struct cfs_inode *dir = table_find(ns, ino);

	if (!dir)
		return -ENOENT;
	if (!is_dir(dir))
		return -ENOTDIR;
	*out = dir;
	return 0;
}

int cfs_ns_lookup(struct cfs_fs *fs, uint64_t parent, const char *name, struct cfs_attr *attr)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *dir, *inode;
	struct cfs_dirent *d;
	size_t length = strnlen(name, CFS_NAME_MAX + 1);
	int ret;

	if (length > CFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (length == 0 || memchr(name, '/', length))
		return -EINVAL;
	pthread_rwlock_rdlock(&ns->lock);
	ret = find_dir(ns, parent, &dir);
	if (ret)
		goto out_unlock;
	if (length == 1 && name[0] == '.') {
		inode = dir;
	} else if (length == 2 && name[0] == '.' && name[1] == '.') {
		inode = table_find(ns, dir->parent_ino);
	} else {
		d = dir_find(dir->dir, name, length);
		inode = d ? table_find(ns, d->ino) : NULL;
	}
	if (!inode) {
		ret = -ENOENT;
		goto out_unlock;
	}
	atomic_fetch_add(&inode->nlookup, 1);
	pthread_mutex_lock(&inode->lock);
	fill_attr(fs, inode, attr);
	pthread_mutex_unlock(&inode->lock);
out_unlock:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

void cfs_ns_forget(struct cfs_fs *fs, uint64_t ino, uint64_t count)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode;
	uint64_t old;
	bool last;

	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (!inode) {
		pthread_rwlock_unlock(&ns->lock);
		return;
	}
	if (ino == CFS_ROOT_INO) {
		/* The root is never deleted; the kernel's count on it is not
		 * tracked exactly (it never looks the root up). */
		pthread_rwlock_unlock(&ns->lock);
		return;
	}
	old = atomic_fetch_sub(&inode->nlookup, count);
	CFS_ASSERT(old >= count);
	last = old == count;
	if (last)
		inode_get(inode);
	pthread_rwlock_unlock(&ns->lock);
	if (!last)
		return;
	/* Possibly the end of an unlinked inode: needs the table exclusively. */
	pthread_rwlock_wrlock(&ns->lock);
	inode_maybe_delete(fs, inode);
	pthread_rwlock_unlock(&ns->lock);
	inode_put(inode);
}

int cfs_ns_getattr(struct cfs_fs *fs, uint64_t ino, struct cfs_attr *attr)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode;
	int ret = 0;

	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (!inode) {
		ret = -ENOENT;
		goto out_unlock;
	}
	pthread_mutex_lock(&inode->lock);
	fill_attr(fs, inode, attr);
	pthread_mutex_unlock(&inode->lock);
out_unlock:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

/* ---- creation ------------------------------------------------------------------------ */

struct create_args {
	uint64_t parent;
	const char *name; /* NULL: a regular file without a name (O_TMPFILE) */
	uint32_t mode;
	uint64_t rdev;
	uint32_t uid;
	uint32_t gid;
	const char *target;
	bool open;
	bool linkable; /* unnamed only: cfs_ns_tmpfile_open() */
};

static bool meta_room(struct cfs_fs *fs)
{
	return !cfs_journal_meta_full(fs->journal);
}

/* [inode lock] Log inode's placement. */
static void txn_place(struct cfs_txn *txn, const struct cfs_inode *inode)
{
	struct cfs_jrec_place rec = {inode->ino, inode->place.store, inode->place.from,
				     inode->place.flags, inode->place.rate_bytes};

	cfs_txn_place(txn, &rec);
}

static int create_common(struct cfs_fs *fs, const struct create_args *a, struct cfs_attr *attr,
			 struct cfs_inode **opened)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *dir, *inode = NULL;
	struct cfs_inode *set[2];
	struct cfs_dirent *d = NULL;
	struct cfs_jrec_dirent drec;
	struct cfs_txn txn;
	uint32_t mode = a->mode;
	uint32_t gid = a->gid;
	size_t length = 0;
	unsigned kept;
	int64_t now;
	int ret;

	ret = a->name ? name_check(a->name, &length) : 0;
	if (ret)
		return ret;
	if (cfs_fs_is_readonly(fs))
		return -EROFS;
	cfs_journal_throttle(fs);
	pthread_rwlock_wrlock(&ns->lock);
	ret = find_dir(ns, a->parent, &dir);
	if (ret)
		goto out_unlock;
	if (dir->nlink == 0) {
		ret = -ENOENT;
		goto out_unlock;
	}
	if (a->name && dir_find(dir->dir, a->name, length)) {
		ret = -EEXIST;
		goto out_unlock;
	}
	if (S_ISDIR(mode) && dir->nlink >= CFS_LINK_MAX) {
		ret = -EMLINK;
		goto out_unlock;
	}
	if (ns->inodes.count >= fs->inode_limit || !meta_room(fs)) {
		ret = -ENOSPC;
		goto out_unlock;
	}
	if (cfs_fs_is_readonly(fs)) {
		ret = -EROFS;
		goto out_unlock;
	}
	/* A setgid directory hands its group down (and its setgid bit to
	 * subdirectories), as every Linux filesystem does. */
	if (dir->mode & S_ISGID) {
		gid = dir->gid;
		if (S_ISDIR(mode))
			mode |= S_ISGID;
	}
	inode = inode_new(fs, ns->next_ino, ns->next_generation, mode);
	if (!inode) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	if (a->target && !(inode->symlink_target = strdup(a->target))) {
		ret = -ENOMEM;
		goto out_free;
	}
	if (a->name) {
		ret = dir_add(dir->dir, a->name, length, inode->ino, mode, 0, &d);
		if (ret)
			goto out_free;
		inode->nlink = S_ISDIR(mode) ? 2 : 1;
	} else if (a->linkable) {
		atomic_fetch_or(&inode->flags, CFS_INODE_F_LINKABLE);
	}
	ns->next_generation++;
	now = now_ns();
	inode->uid = a->uid;
	inode->gid = gid;
	inode->rdev = a->rdev;
	inode->parent_ino = S_ISDIR(mode) ? dir->ino : 0;
	if (a->target)
		atomic_store(&inode->size_bytes, strlen(a->target));
	atomic_store(&inode->atime_ns, now);
	atomic_store(&inode->mtime_ns, now);
	atomic_store(&inode->ctime_ns, now);
	atomic_store(&inode->nlookup, 1);
	if (a->open) {
		atomic_store(&inode->open_count, 1);
		inode_get(inode);
	}
	table_insert(ns, inode); /* takes the new inode's first reference */

	set[0] = dir;
	set[1] = inode;
	kept = lock_inodes(set, 2);
	if (S_ISDIR(mode))
		dir->nlink++;
	if (a->name) {
		atomic_store(&dir->mtime_ns, now);
		atomic_store(&dir->ctime_ns, now);
	}
	cfs_txn_begin(&txn, fs->journal);
	txn_inode(&txn, CFS_LOG_INODE_CREATE, inode);
	/* Files and directories inherit their directory's store. */
	if (dir->place.store != CFS_STORE_NONE && (S_ISREG(mode) || S_ISDIR(mode))) {
		inode->place = (struct cfs_place){dir->place.store, CFS_STORE_NONE, 0, 0};
		txn_place(&txn, inode);
	}
	/* Without a name the inode is an orphan from its first record: a
	 * crash before a link leaves it to cfs_ns_mount_finish(). */
	if (a->name) {
		drec = (struct cfs_jrec_dirent){dir->ino, inode->ino,	    d->cookie,
						mode,	  (uint32_t)length, a->name};
		cfs_txn_dirent_add(&txn, &drec);
		txn_inode(&txn, CFS_LOG_INODE_UPDATE, dir);
	}
	cfs_txn_end(&txn);
	fill_attr(fs, inode, attr);
	unlock_inodes(set, kept);
	if (opened)
		*opened = inode;
	pthread_rwlock_unlock(&ns->lock);
	return 0;

out_free:
	inode_free(inode);
out_unlock:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

int cfs_ns_mknod(struct cfs_fs *fs, uint64_t parent, const char *name, uint32_t mode, uint64_t rdev,
		 uint32_t uid, uint32_t gid, struct cfs_attr *attr)
{
	struct create_args a = {
		.parent = parent, .name = name, .mode = mode, .rdev = rdev, .uid = uid, .gid = gid};

	if ((mode & S_IFMT) == 0)
		a.mode |= S_IFREG;
	switch (a.mode & S_IFMT) {
	case S_IFREG:
	case S_IFIFO:
	case S_IFSOCK:
		a.rdev = 0;
		break;
	case S_IFCHR:
	case S_IFBLK:
		break;
	default:
		return -EINVAL;
	}
	return create_common(fs, &a, attr, NULL);
}

int cfs_ns_create_open(struct cfs_fs *fs, uint64_t parent, const char *name, uint32_t mode,
		       uint32_t uid, uint32_t gid, struct cfs_attr *attr, struct cfs_inode **opened)
{
	struct create_args a = {.parent = parent,
				.name = name,
				.mode = (mode & ~S_IFMT) | S_IFREG,
				.uid = uid,
				.gid = gid,
				.open = true};

	return create_common(fs, &a, attr, opened);
}

int cfs_ns_tmpfile_open(struct cfs_fs *fs, uint64_t parent, uint32_t mode, uint32_t uid,
			uint32_t gid, bool linkable, struct cfs_attr *attr,
			struct cfs_inode **opened)
{
	struct create_args a = {.parent = parent,
				.mode = (mode & ~S_IFMT) | S_IFREG,
				.uid = uid,
				.gid = gid,
				.open = true,
				.linkable = linkable};

	return create_common(fs, &a, attr, opened);
}

int cfs_ns_mkdir(struct cfs_fs *fs, uint64_t parent, const char *name, uint32_t mode, uint32_t uid,
		 uint32_t gid, struct cfs_attr *attr)
{
	struct create_args a = {.parent = parent,
				.name = name,
				.mode = (mode & 07777) | S_IFDIR,
				.uid = uid,
				.gid = gid};

	return create_common(fs, &a, attr, NULL);
}

int cfs_ns_symlink(struct cfs_fs *fs, uint64_t parent, const char *name, const char *target,
		   uint32_t uid, uint32_t gid, struct cfs_attr *attr)
{
	struct create_args a = {.parent = parent,
				.name = name,
				.mode = S_IFLNK | 0777,
				.uid = uid,
				.gid = gid,
				.target = target};
	size_t n = strnlen(target, CFS_SYMLINK_MAX + 1);

	if (n == 0)
		return -ENOENT;
	if (n > CFS_SYMLINK_MAX)
		return -ENAMETOOLONG;
	return create_common(fs, &a, attr, NULL);
}

ssize_t cfs_ns_readlink(struct cfs_fs *fs, uint64_t ino, char *buf, size_t buf_size)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode;
	ssize_t ret;

	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (!inode) {
		ret = -ENOENT;
	} else if (!S_ISLNK(inode->mode)) {
		ret = -EINVAL;
	} else {
		size_t n = strlen(inode->symlink_target);

		memcpy(buf, inode->symlink_target, n < buf_size ? n : buf_size);
		ret = (ssize_t)n;
	}
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

int cfs_ns_link(struct cfs_fs *fs, uint64_t ino, uint64_t new_parent, const char *new_name,
		struct cfs_attr *attr)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *dir, *inode, *set[2];
	struct cfs_dirent *d;
	struct cfs_jrec_dirent drec;
	struct cfs_txn txn;
	size_t length;
	unsigned kept;
	int64_t now;
	int ret;

	ret = name_check(new_name, &length);
	if (ret)
		return ret;
	if (cfs_fs_is_readonly(fs))
		return -EROFS;
	cfs_journal_throttle(fs);
	pthread_rwlock_wrlock(&ns->lock);
	inode = table_find(ns, ino);
	if (!inode) {
		ret = -ENOENT;
		goto out_unlock;
	}
	if (is_dir(inode)) {
		ret = -EPERM;
		goto out_unlock;
	}
	ret = find_dir(ns, new_parent, &dir);
	if (ret)
		goto out_unlock;
	/* An unlinked file stays unlinked (the kernel refuses too); a file
	 * born without a name may get its first one, once. */
	if (dir->nlink == 0 ||
	    (inode->nlink == 0 && !(atomic_load(&inode->flags) & CFS_INODE_F_LINKABLE))) {
		ret = -ENOENT;
		goto out_unlock;
	}
	if (inode->nlink >= CFS_LINK_MAX) {
		ret = -EMLINK;
		goto out_unlock;
	}
	if (dir_find(dir->dir, new_name, length)) {
		ret = -EEXIST;
		goto out_unlock;
	}
	if (!meta_room(fs)) {
		ret = -ENOSPC;
		goto out_unlock;
	}
	ret = dir_add(dir->dir, new_name, length, inode->ino, inode->mode, 0, &d);
	if (ret)
		goto out_unlock;
	set[0] = dir;
	set[1] = inode;
	kept = lock_inodes(set, 2);
	now = now_ns();
	inode->nlink++;
	atomic_fetch_and(&inode->flags, ~CFS_INODE_F_LINKABLE);
	atomic_store(&inode->ctime_ns, now);
	atomic_store(&dir->mtime_ns, now);
	atomic_store(&dir->ctime_ns, now);
	atomic_fetch_add(&inode->nlookup, 1);
	cfs_txn_begin(&txn, fs->journal);
	drec = (struct cfs_jrec_dirent){dir->ino,    inode->ino,       d->cookie,
					inode->mode, (uint32_t)length, new_name};
	cfs_txn_dirent_add(&txn, &drec);
	txn_inode(&txn, CFS_LOG_INODE_UPDATE, inode);
	txn_inode(&txn, CFS_LOG_INODE_UPDATE, dir);
	cfs_txn_end(&txn);
	fill_attr(fs, inode, attr);
	unlock_inodes(set, kept);
out_unlock:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

/* ---- removal ---------------------------------------------------------------------------- */

static int remove_common(struct cfs_fs *fs, uint64_t parent, const char *name, bool rmdir)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *dir, *inode, *set[2];
	struct cfs_dirent *d;
	struct cfs_txn txn;
	size_t length;
	unsigned kept;
	int64_t now;
	int ret;

	if (rmdir) {
		if (!strcmp(name, "."))
			return -EINVAL;
		if (!strcmp(name, ".."))
			return -ENOTEMPTY;
	}
	ret = name_check(name, &length);
	if (ret)
		return ret;
	if (cfs_fs_is_readonly(fs))
		return -EROFS;
	cfs_journal_throttle(fs);
	pthread_rwlock_wrlock(&ns->lock);
	ret = find_dir(ns, parent, &dir);
	if (ret)
		goto out_unlock;
	d = dir_find(dir->dir, name, length);
	inode = d ? table_find(ns, d->ino) : NULL;
	if (!inode) {
		ret = -ENOENT;
		goto out_unlock;
	}
	if (rmdir && !is_dir(inode)) {
		ret = -ENOTDIR;
		goto out_unlock;
	}
	if (!rmdir && is_dir(inode)) {
		ret = -EISDIR;
		goto out_unlock;
	}
	if (rmdir && inode->ino == CFS_ROOT_INO) {
		ret = -EBUSY;
		goto out_unlock;
	}
	if (rmdir && inode->dir->names.count) {
		ret = -ENOTEMPTY;
		goto out_unlock;
	}
	if (cfs_fs_is_readonly(fs)) {
		ret = -EROFS;
		goto out_unlock;
	}
	dir_remove(dir->dir, d);
	set[0] = dir;
	set[1] = inode;
	kept = lock_inodes(set, 2);
	now = now_ns();
	if (rmdir) {
		inode->nlink = 0;
		dir->nlink--;
	} else {
		CFS_ASSERT(inode->nlink > 0);
		inode->nlink--;
	}
	atomic_store(&inode->ctime_ns, now);
	atomic_store(&dir->mtime_ns, now);
	atomic_store(&dir->ctime_ns, now);
	cfs_txn_begin(&txn, fs->journal);
	cfs_txn_dirent_remove(&txn, dir->ino, name, (uint32_t)length);
	txn_inode(&txn, CFS_LOG_INODE_UPDATE, inode);
	txn_inode(&txn, CFS_LOG_INODE_UPDATE, dir);
	cfs_txn_end(&txn);
	unlock_inodes(set, kept);
	inode_maybe_delete(fs, inode);
out_unlock:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

int cfs_ns_unlink(struct cfs_fs *fs, uint64_t parent, const char *name)
{
	return remove_common(fs, parent, name, false);
}

int cfs_ns_rmdir(struct cfs_fs *fs, uint64_t parent, const char *name)
{
	return remove_common(fs, parent, name, true);
}

/* ---- rename --------------------------------------------------------------------------------- */

/* [ns_lock] True if dir is inside the tree of ancestor (or is it). */
static bool is_within(struct cfs_ns *ns, struct cfs_inode *dir, uint64_t ancestor)
{
	uint64_t ino = dir->ino;

	/* Bounded: a path can never be longer than the number of inodes. */
	for (uint64_t steps = 0; steps <= ns->inodes.count; steps++) {
		struct cfs_inode *at;

		if (ino == ancestor)
			return true;
		if (ino == CFS_ROOT_INO)
			return false;
		at = table_find(ns, ino);
		if (!at)
			return false;
		ino = at->parent_ino;
	}
	CFS_ASSERT(!"directory parent chain has a cycle");
	return true;
}

int cfs_ns_rename(struct cfs_fs *fs, uint64_t parent, const char *name, uint64_t new_parent,
		  const char *new_name, unsigned int flags)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *sp, *dp, *src, *dst = NULL, *set[4];
	struct cfs_dirent *se, *de;
	struct cfs_jrec_rename rec;
	struct cfs_txn txn;
	bool exchange = flags & RENAME_EXCHANGE;
	size_t slen, dlen;
	uint64_t dst_cookie, src_cookie = 0;
	unsigned kept;
	int64_t now;
	int ret;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	if ((flags & RENAME_NOREPLACE) && exchange)
		return -EINVAL;
	ret = name_check(name, &slen);
	if (!ret)
		ret = name_check(new_name, &dlen);
	if (ret)
		return ret;
	if (cfs_fs_is_readonly(fs))
		return -EROFS;
	cfs_journal_throttle(fs);
	pthread_rwlock_wrlock(&ns->lock);
	ret = find_dir(ns, parent, &sp);
	if (!ret)
		ret = find_dir(ns, new_parent, &dp);
	if (ret)
		goto out_unlock;
	se = dir_find(sp->dir, name, slen);
	src = se ? table_find(ns, se->ino) : NULL;
	if (!src) {
		ret = -ENOENT;
		goto out_unlock;
	}
	de = dir_find(dp->dir, new_name, dlen);
	if (de) {
		dst = table_find(ns, de->ino);
		CFS_ASSERT(dst);
	}
	if (exchange && !de) {
		ret = -ENOENT;
		goto out_unlock;
	}
	if ((flags & RENAME_NOREPLACE) && de) {
		ret = -EEXIST;
		goto out_unlock;
	}
	if (dst == src) {
		ret = 0; /* two names of one inode: POSIX says do nothing */
		goto out_unlock;
	}
	if (dst && !exchange) {
		if (is_dir(src) && !is_dir(dst)) {
			ret = -ENOTDIR;
			goto out_unlock;
		}
		if (!is_dir(src) && is_dir(dst)) {
			ret = -EISDIR;
			goto out_unlock;
		}
		if (is_dir(dst) && dst->dir->names.count) {
			ret = -ENOTEMPTY;
			goto out_unlock;
		}
	}
	/* A directory may not move into its own subtree. */
	if (is_dir(src) && sp != dp && is_within(ns, dp, src->ino)) {
		ret = -EINVAL;
		goto out_unlock;
	}
	if (exchange && is_dir(dst) && sp != dp && is_within(ns, sp, dst->ino)) {
		ret = -EINVAL;
		goto out_unlock;
	}
	if (sp != dp && is_dir(src) && !(dst && is_dir(dst)) && dp->nlink >= CFS_LINK_MAX) {
		ret = -EMLINK;
		goto out_unlock;
	}
	if (exchange && sp != dp && is_dir(dst) && !is_dir(src) && sp->nlink >= CFS_LINK_MAX) {
		ret = -EMLINK;
		goto out_unlock;
	}
	if (cfs_fs_is_readonly(fs)) {
		ret = -EROFS;
		goto out_unlock;
	}

	if (exchange) {
		/* Entries keep their cookies (readdir positions); only the
		 * inodes behind them swap. */
		se->ino = dst->ino;
		se->mode = dst->mode & S_IFMT;
		de->ino = src->ino;
		de->mode = src->mode & S_IFMT;
		src_cookie = se->cookie;
		dst_cookie = de->cookie;
	} else {
		struct cfs_dirent *added;

		/* Add first: the only step that can fail (memory). */
		if (de) {
			dst_cookie = de->cookie;
			de->ino = src->ino;
			de->mode = src->mode & S_IFMT;
		} else {
			ret = dir_add(dp->dir, new_name, dlen, src->ino, src->mode, 0, &added);
			if (ret)
				goto out_unlock;
			dst_cookie = added->cookie;
		}
		dir_remove(sp->dir, se);
	}

	set[0] = sp;
	set[1] = dp;
	set[2] = src;
	set[3] = dst;
	kept = lock_inodes(set, 4);
	now = now_ns();
	if (sp != dp) {
		if (is_dir(src)) {
			src->parent_ino = dp->ino;
			sp->nlink--;
			dp->nlink++;
		}
		if (exchange && is_dir(dst)) {
			dst->parent_ino = sp->ino;
			dp->nlink--;
			sp->nlink++;
		}
	}
	if (dst && !exchange) {
		if (is_dir(dst)) {
			dst->nlink = 0;
			dp->nlink--; /* its ".." */
		} else {
			dst->nlink--;
		}
	}
	atomic_store(&src->ctime_ns, now);
	if (dst)
		atomic_store(&dst->ctime_ns, now);
	atomic_store(&sp->mtime_ns, now);
	atomic_store(&sp->ctime_ns, now);
	atomic_store(&dp->mtime_ns, now);
	atomic_store(&dp->ctime_ns, now);

	rec = (struct cfs_jrec_rename){
		.src_dir = sp->ino,
		.dst_dir = dp->ino,
		.src_ino = src->ino,
		.dst_ino = exchange ? dst->ino : 0,
		.src_cookie = src_cookie,
		.dst_cookie = dst_cookie,
		.src_mode = src->mode,
		.dst_mode = exchange ? dst->mode : 0,
		.flags = exchange ? CFS_JREC_RENAME_EXCHANGE : 0,
		.src_name_length = (uint32_t)slen,
		.dst_name_length = (uint32_t)dlen,
		.src_name = name,
		.dst_name = new_name,
	};
	cfs_txn_begin(&txn, fs->journal);
	cfs_txn_rename(&txn, &rec);
	for (unsigned i = 0; i < kept; i++)
		txn_inode(&txn, CFS_LOG_INODE_UPDATE, set[i]);
	cfs_txn_end(&txn);
	unlock_inodes(set, kept);
	if (dst && !exchange)
		inode_maybe_delete(fs, dst);
out_unlock:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

/* ---- setattr, truncate, fallocate ------------------------------------------------------------ */

struct clear_ctx {
	struct cfs_txn *txn;
	uint64_t ino;
};

static void clear_logged(void *arg, uint64_t file_unit, uint64_t store_unit, uint32_t first,
			 uint32_t count)
{
	struct clear_ctx *c = arg;
	struct cfs_jrec_written rec = {c->ino, file_unit, store_unit, CFS_EXTENT_WS_OP_CLEAR,
				       first,  count,	  NULL};

	cfs_txn_written(c->txn, &rec);
}

/*
 * [inode lock] If the sector holding byte `at` is mapped and written and `at`
 * is not at its start, report [at, end of sector) — or [at, limit) if limit
 * ends inside that sector — for zeroing.
 */
static void zero_partial(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t at, uint64_t limit,
			 struct cfs_ns_zero *zero)
{
	uint64_t sector = fs->geom.sector_bytes;
	uint64_t start = at & ~(sector - 1);
	uint64_t end = start + sector;
	struct cfs_extent_run run;

	if (!zero || zero->count >= 2 || at == start || at >= limit)
		return;
	if (limit < end)
		end = limit;
	if (!cfs_extent_sector_written(inode->map, at))
		return;
	if (cfs_extent_lookup(inode->map, at, end - at, &run) || !run.mapped)
		return;
	zero->file_offset_bytes[zero->count] = at;
	zero->device_offset_bytes[zero->count] = run.device_offset_bytes;
	zero->length_bytes[zero->count] = (uint32_t)(end - at);
	zero->count++;
}

/* [inode lock] The written sectors that [offset, end) cuts at either end, in
 * *zero: the caller zeroes those bytes (punch, zero range). */
static void partial_sectors(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t offset,
			    uint64_t end, struct cfs_ns_zero *zero)
{
	uint64_t sector = fs->geom.sector_bytes;
	uint64_t tail = end & ~(sector - 1);
	struct cfs_extent_run run;

	zero_partial(fs, inode, offset, end, zero);
	if (!(end & (sector - 1)) || tail < offset || tail == (offset & ~(sector - 1)))
		return; /* no cut tail sector, or it is the head's (done above) */
	if (zero && zero->count < 2 && cfs_extent_sector_written(inode->map, tail) &&
	    !cfs_extent_lookup(inode->map, tail, end - tail, &run) && run.mapped) {
		zero->file_offset_bytes[zero->count] = tail;
		zero->device_offset_bytes[zero->count] = run.device_offset_bytes;
		zero->length_bytes[zero->count] = (uint32_t)(end - tail);
		zero->count++;
	}
}

/* [inode lock] Finish a zero report: pin the units with an I/O reference. */
static void zero_pin(struct cfs_inode *inode, struct cfs_ns_zero *zero)
{
	if (zero && zero->count) {
		zero->inode = inode;
		zero->io_gen = cfs_ns_io_begin(inode);
		/* Under the lock: a piece does not grow (copy) under the zeros. */
		atomic_fetch_add_explicit(&inode->store_writes, 1, memory_order_seq_cst);
	}
}

/*
 * [inode lock] Cut the file at new_size (below the current size): unmap the
 * units past it, mark the whole sectors after it in its unit unwritten, log
 * all of it in txn, and report the cut part of its sector. -ENOMEM with
 * nothing changed if the units could not be unmapped.
 */
static int truncate_down(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t new_size,
			 struct cfs_txn *txn, struct free_ctx *fc, struct cfs_ns_zero *zero)
{
	const struct cfs_extent_geom *g = &fs->geom;
	uint64_t keep_units = (new_size + g->unit_bytes - 1) >> g->unit_shift;
	uint64_t unit_end = keep_units << g->unit_shift;
	struct clear_ctx cc = {txn, inode->ino};
	int64_t unmapped;
	int ret = 0;

	unmapped = cfs_extent_unmap(inode->map, keep_units, UINT64_MAX, free_ctx_unmapped, fc);
	if (unmapped < 0)
		return (int)unmapped;
	if (new_size < unit_end)
		ret = cfs_extent_mark_unwritten(inode->map, new_size, unit_end - new_size,
						clear_logged, &cc);
	zero_partial(fs, inode, new_size, unit_end, zero);
	return ret;
}

/* CFS_SET_KILL_SUIDGID: suid always, sgid only with group execute (without
 * it, sgid means mandatory locking), as the kernel's VFS does. */
static uint32_t mode_without_suidgid(uint32_t mode)
{
	mode &= ~(uint32_t)S_ISUID;
	if (mode & S_IXGRP)
		mode &= ~(uint32_t)S_ISGID;
	return mode;
}

int cfs_ns_setattr(struct cfs_fs *fs, uint64_t ino, const struct cfs_setattr *set,
		   struct cfs_attr *attr, struct cfs_ns_zero *zero)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode;
	struct free_ctx fc = {.fs = fs};
	struct cfs_txn txn;
	uint64_t seq;
	int64_t now = now_ns();
	int ret = 0;

	if (zero)
		memset(zero, 0, sizeof(*zero));
	if (cfs_fs_is_readonly(fs))
		return -EROFS;
	cfs_journal_throttle(fs);
	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (!inode) {
		ret = -ENOENT;
		goto out_unlock_ns;
	}
	if (set->valid & CFS_SET_SIZE) {
		if (is_dir(inode)) {
			ret = -EISDIR;
			goto out_unlock_ns;
		}
		if (!is_reg(inode)) {
			ret = -EINVAL;
			goto out_unlock_ns;
		}
		if (set->size_bytes > FILE_SIZE_MAX) {
			ret = -EFBIG;
			goto out_unlock_ns;
		}
	}
	pthread_mutex_lock(&inode->lock);
	if (cfs_fs_is_readonly(fs)) {
		ret = -EROFS;
		goto out_unlock;
	}
	if (set->valid == CFS_SET_KILL_SUIDGID &&
	    (is_dir(inode) || mode_without_suidgid(inode->mode) == inode->mode)) {
		fill_attr(fs, inode, attr);
		goto out_unlock;
	}
	fc.inode = inode;
	fc.txn = &txn;
	cfs_txn_begin(&txn, fs->journal);
	if (set->valid & CFS_SET_SIZE) {
		uint64_t old = atomic_load(&inode->size_bytes);

		if (set->size_bytes < old) {
			ret = truncate_down(fs, inode, set->size_bytes, &txn, &fc, zero);
			if (ret) {
				/* Units already unmapped are logged; finish those. */
				seq = cfs_txn_end(&txn);
				free_ctx_release(&fc, seq);
				goto out_unlock;
			}
		}
		atomic_store(&inode->size_bytes, set->size_bytes);
		atomic_store(&inode->mtime_ns, now);
	}
	if (set->valid & CFS_SET_MODE)
		inode->mode = (inode->mode & S_IFMT) | (set->mode & 07777);
	if (set->valid & CFS_SET_UID)
		inode->uid = set->uid;
	if (set->valid & CFS_SET_GID)
		inode->gid = set->gid;
	if ((set->valid & CFS_SET_KILL_SUIDGID) && !is_dir(inode))
		inode->mode = mode_without_suidgid(inode->mode);
	if (set->valid & CFS_SET_ATIME)
		atomic_store(&inode->atime_ns, set->atime_ns);
	if (set->valid & CFS_SET_ATIME_NOW)
		atomic_store(&inode->atime_ns, now);
	if (set->valid & CFS_SET_MTIME)
		atomic_store(&inode->mtime_ns, set->mtime_ns);
	if (set->valid & CFS_SET_MTIME_NOW)
		atomic_store(&inode->mtime_ns, now);
	atomic_store(&inode->ctime_ns, (set->valid & CFS_SET_CTIME) ? set->ctime_ns : now);
	txn_inode(&txn, CFS_LOG_INODE_UPDATE, inode);
	seq = cfs_txn_end(&txn);
	free_ctx_release(&fc, seq);
	inode_quiesce(fs, inode);
	zero_pin(inode, zero);
	fill_attr(fs, inode, attr);
out_unlock:
	pthread_mutex_unlock(&inode->lock);
out_unlock_ns:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

/* Store unit to try first for file unit fu: after the previous unit's. */
static uint64_t alloc_hint(struct cfs_inode *inode, uint64_t fu)
{
	int64_t prev = fu ? cfs_extent_unit_get(inode->map, fu - 1) : -1;

	if (prev >= 0)
		return (uint64_t)prev + 1;
	return inode->alloc_hint ? inode->alloc_hint : CFS_ALLOC_NO_HINT;
}

/* [inode lock] Map file unit 0, a hole, to a piece of piece_bytes. */
static int map_piece(struct cfs_fs *fs, struct cfs_inode *inode, uint32_t piece_bytes,
		     bool writeback, struct cfs_txn *txn)
{
	struct cfs_extent_loc loc = {0, 0, piece_bytes};
	int ret = cfs_pool_get_piece(fs->pool, cfs_ns_store_for_units(fs, inode, 0), piece_bytes,
				     writeback, &loc.store_unit, &loc.piece_offset_bytes);

	if (ret)
		return ret;
	ret = cfs_extent_map_piece(inode->map, 0, &loc);
	if (ret) {
		cfs_pool_free_piece(fs->pool, loc.store_unit, loc.piece_offset_bytes, piece_bytes,
				    0); /* never logged */
		return ret;
	}
	cfs_txn_piece(txn, &(struct cfs_jrec_piece){inode->ino, 0, loc.store_unit,
						    loc.piece_offset_bytes, piece_bytes});
	return 0;
}

/*
 * [inode lock] Map every hole among file units [first, end); file unit 0 to
 * a piece of piece_bytes (0: a whole unit) if the file maps nothing else.
 * Only the kernel's write-back (writeback) may take the space the pool holds
 * back for it (cfs_pool_set_held_back; a piece, only if it needs a new unit).
 * Logs one transaction. Returns 0, -EAGAIN (space is busy: the caller drops
 * the lock, forces a commit and calls again), -ENOSPC, -EFBIG, -ENOMEM.
 */
static int map_holes(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t first, uint64_t end,
		     uint32_t piece_bytes, bool writeback)
{
	struct cfs_txn txn;
	uint64_t fu = first;
	int ret = 0;

	if (end > fs->geom.max_units)
		return -EFBIG;
	if (!meta_room(fs))
		return -ENOSPC;
	cfs_txn_begin(&txn, fs->journal);
	if (piece_bytes && first == 0 && cfs_extent_mapped_units(inode->map) == 0) {
		ret = map_piece(fs, inode, piece_bytes, writeback, &txn);
		if (ret) {
			cfs_txn_end(&txn);
			return ret;
		}
		fu = 1;
	}
	while (fu < end) {
		uint64_t got_first, got;
		struct cfs_jrec_extent rec;
		bool mapped;
		uint64_t span = cfs_extent_unit_span(inode->map, fu, end - fu, &mapped);

		if (mapped) {
			fu += span;
			continue;
		}
		ret = cfs_pool_get(fs->pool, cfs_ns_store_for_units(fs, inode, fu),
				   alloc_hint(inode, fu), span, writeback, &got_first, &got);
		if (ret)
			break;
		ret = cfs_extent_map_units(inode->map, fu, got_first, got);
		if (ret) {
			cfs_pool_free(fs->pool, got_first, got, 0); /* never logged */
			break;
		}
		rec = (struct cfs_jrec_extent){inode->ino, fu, got_first, got};
		cfs_txn_extent(&txn, CFS_LOG_EXTENT_MAP, &rec);
		inode->alloc_hint = got_first + got;
		fu += got;
	}
	cfs_txn_end(&txn);
	return ret;
}

/* Will units come back without anyone freeing more? Busy ones at the next
 * commit, deferred ones when the I/O references older than their unmap end
 * (which may be requests the caller's thread must first finish). */
static bool space_coming(struct cfs_fs *fs)
{
	struct cfs_alloc_stat st;

	if (atomic_load(&ns_of(fs)->deferred_units))
		return true;
	cfs_pool_stat(fs->pool, &st);
	return st.busy_units != 0;
}

/* Map [first, end) of an inode whose pointer the caller pins, forcing
 * commits while space is busy (piece_bytes, writeback: map_holes). Takes
 * and drops the inode lock. -EAGAIN: no space yet, but some is coming
 * (space_coming). */
static int map_range(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t first, uint64_t end,
		     uint32_t piece_bytes, bool writeback)
{
	int ret = -EAGAIN;

	for (unsigned attempt = 0; attempt < MAP_RETRIES && ret == -EAGAIN; attempt++) {
		if (attempt) {
			/* Busy units come back once their frees are durable. */
			ret = cfs_journal_commit_sync(fs);
			if (ret)
				return ret == -EIO ? -EROFS : ret;
		}
		pthread_mutex_lock(&inode->lock);
		ret = cfs_fs_is_readonly(fs)
			      ? -EROFS
			      : map_holes(fs, inode, first, end, piece_bytes, writeback);
		pthread_mutex_unlock(&inode->lock);
	}
	if (ret == -EAGAIN || ret == -ENOSPC)
		return space_coming(fs) ? -EAGAIN : -ENOSPC;
	return ret;
}

int cfs_ns_fallocate(struct cfs_fs *fs, uint64_t ino, int mode, uint64_t offset_bytes,
		     uint64_t length_bytes, struct cfs_ns_zero *zero)
{
	struct cfs_ns *ns = ns_of(fs);
	const struct cfs_extent_geom *g = &fs->geom;
	struct cfs_inode *inode;
	uint64_t end = offset_bytes + length_bytes;
	int ret = 0;

	if (zero)
		memset(zero, 0, sizeof(*zero));
	if (length_bytes == 0 || end < offset_bytes)
		return -EINVAL;
	if (mode != 0 && mode != FALLOC_FL_KEEP_SIZE &&
	    mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) && mode != FALLOC_FL_ZERO_RANGE &&
	    mode != (FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE))
		return -EOPNOTSUPP;
	if (end > FILE_SIZE_MAX)
		return -EFBIG;
	if (cfs_fs_is_readonly(fs))
		return -EROFS;
	cfs_journal_throttle(fs);
	/* Pin the inode so the forced commits of map_range need no ns_lock. */
	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (inode)
		inode_get(inode);
	pthread_rwlock_unlock(&ns->lock);
	if (!inode)
		return -ENOENT;
	if (is_dir(inode)) {
		ret = -EISDIR;
		goto out_put;
	}
	if (!is_reg(inode)) {
		ret = -ENODEV;
		goto out_put;
	}

	if (!(mode & FALLOC_FL_PUNCH_HOLE)) {
		uint64_t first = offset_bytes >> g->unit_shift;
		uint64_t last = (end + g->unit_bytes - 1) >> g->unit_shift;
		struct cfs_alloc_stat st;
		struct cfs_txn txn;

		/* More than all the stores hold can never be allocated: ENOSPC,
		 * as on ext4 and tmpfs, before the map's EFBIG (it addresses
		 * twice the stores) and without waiting for busy units. */
		cfs_pool_stat(fs->pool, &st);
		if (last - first > st.total_units) {
			ret = -ENOSPC;
			goto out_put;
		}
		ret = map_range(fs, inode, first, last, 0, false); /* never a piece */
		if (ret)
			goto out_put;
		pthread_mutex_lock(&inode->lock);
		if (mode & FALLOC_FL_ZERO_RANGE) {
			/* Every sector of the range now mapped: the whole ones
			 * become unwritten (zeros without a byte written), the
			 * cut ones at the ends are the caller's to zero. */
			struct clear_ctx cc = {&txn, inode->ino};
			int64_t now = now_ns();

			if (cfs_fs_is_readonly(fs)) {
				ret = -EROFS;
				pthread_mutex_unlock(&inode->lock);
				goto out_put;
			}
			cfs_txn_begin(&txn, fs->journal);
			ret = cfs_extent_mark_unwritten(inode->map, offset_bytes, length_bytes,
							clear_logged, &cc);
			if (!ret)
				partial_sectors(fs, inode, offset_bytes, end, zero);
			if (!ret && !(mode & FALLOC_FL_KEEP_SIZE) &&
			    end > atomic_load(&inode->size_bytes))
				atomic_store(&inode->size_bytes, end);
			atomic_store(&inode->mtime_ns, now);
			atomic_store(&inode->ctime_ns, now);
			txn_inode(&txn, CFS_LOG_INODE_UPDATE, inode);
			cfs_txn_end(&txn);
			zero_pin(inode, zero);
		} else if (!(mode & FALLOC_FL_KEEP_SIZE) && end > atomic_load(&inode->size_bytes)) {
			int64_t now = now_ns();

			atomic_store(&inode->size_bytes, end);
			atomic_store(&inode->ctime_ns, now);
			cfs_txn_begin(&txn, fs->journal);
			txn_inode(&txn, CFS_LOG_INODE_UPDATE, inode);
			cfs_txn_end(&txn);
		}
		pthread_mutex_unlock(&inode->lock);
		goto out_put;
	}

	/* Punch: whole units inside go, partial units get unwritten sectors. */
	{
		uint64_t unit_lo = (offset_bytes + g->unit_bytes - 1) >> g->unit_shift;
		uint64_t unit_hi = end >> g->unit_shift;
		struct free_ctx fc = {.fs = fs, .inode = inode};
		struct cfs_txn txn;
		struct clear_ctx cc = {&txn, inode->ino};
		int64_t now = now_ns();
		uint64_t seq;

		pthread_mutex_lock(&inode->lock);
		if (cfs_fs_is_readonly(fs)) {
			ret = -EROFS;
			goto out_unlock;
		}
		cfs_txn_begin(&txn, fs->journal);
		fc.txn = &txn;
		if (unit_hi > unit_lo) {
			int64_t unmapped = cfs_extent_unmap(inode->map, unit_lo, unit_hi - unit_lo,
							    free_ctx_unmapped, &fc);

			if (unmapped < 0) {
				/* Out of memory: nothing unmapped, nothing logged. */
				ret = (int)unmapped;
				seq = cfs_txn_end(&txn);
				free_ctx_release(&fc, seq);
				goto out_unlock;
			}
		}
		if (unit_hi > unit_lo) {
			uint64_t lo_bytes = unit_lo << g->unit_shift;
			uint64_t hi_bytes = unit_hi << g->unit_shift;

			if (offset_bytes < lo_bytes)
				ret = cfs_extent_mark_unwritten(inode->map, offset_bytes,
								lo_bytes - offset_bytes,
								clear_logged, &cc);
			if (!ret && hi_bytes < end)
				ret = cfs_extent_mark_unwritten(inode->map, hi_bytes,
								end - hi_bytes, clear_logged, &cc);
		} else {
			ret = cfs_extent_mark_unwritten(inode->map, offset_bytes, length_bytes,
							clear_logged, &cc);
		}
		partial_sectors(fs, inode, offset_bytes, end, zero);
		atomic_store(&inode->mtime_ns, now);
		atomic_store(&inode->ctime_ns, now);
		txn_inode(&txn, CFS_LOG_INODE_UPDATE, inode);
		seq = cfs_txn_end(&txn);
		free_ctx_release(&fc, seq);
		inode_quiesce(fs, inode);
		zero_pin(inode, zero);
	out_unlock:
		pthread_mutex_unlock(&inode->lock);
	}
out_put:
	inode_put(inode);
	return ret;
}

/* ---- the data path --------------------------------------------------------------------------- */

int cfs_ns_open(struct cfs_fs *fs, uint64_t ino, struct cfs_inode **out)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode;
	int ret = 0;

	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (!inode) {
		ret = -ENOENT;
	} else {
		inode_get(inode);
		atomic_fetch_add(&inode->open_count, 1);
		*out = inode;
	}
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

void cfs_ns_release(struct cfs_fs *fs, struct cfs_inode *inode)
{
	struct cfs_ns *ns = ns_of(fs);
	uint32_t old = atomic_fetch_sub(&inode->open_count, 1);

	CFS_ASSERT(old >= 1);
	if (old == 1) {
		pthread_rwlock_wrlock(&ns->lock);
		if (!(atomic_load(&inode->flags) & CFS_INODE_F_DELETED))
			inode_maybe_delete(fs, inode);
		pthread_rwlock_unlock(&ns->lock);
	}
	inode_put(inode);
}

unsigned cfs_ns_io_begin(struct cfs_inode *inode)
{
	/* A flip between the load and the add leaves this reference in the
	 * generation being drained: harmless, it is counted there, and it
	 * looks the map up only after the add. */
	unsigned gen = atomic_load(&inode->io_gen);
	uint64_t old = atomic_fetch_add(&inode->life, LIFE_IO(gen));

	CFS_ASSERT(io_refs_of(old, gen) < LIFE_IO_MAX);
	return gen;
}

void cfs_ns_io_end(struct cfs_fs *fs, struct cfs_inode *inode, unsigned io_gen)
{
	/* Deferred work needs the inode after our reference is gone: pin it
	 * first (the I/O reference keeps it alive until then). */
	bool pinned = atomic_load(&inode->flags) & CFS_INODE_F_DEFERRED;
	uint64_t old;

	if (pinned)
		inode_get(inode);
	old = atomic_fetch_sub(&inode->life, LIFE_IO(io_gen));
	CFS_ASSERT(io_refs_of(old, io_gen) > 0);
	if (old == LIFE_IO(io_gen)) {
		inode_free(inode); /* deleted while the last I/O flew */
		return;
	}
	if (!pinned)
		return;
	if (io_refs_of(old, io_gen) == 1) {
		pthread_mutex_lock(&inode->lock);
		inode_quiesce(fs, inode);
		pthread_mutex_unlock(&inode->lock);
	}
	inode_put(inode);
}

static uint32_t write_piece(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t end_bytes);

static int map_for_write(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t offset_bytes,
			 uint64_t length_bytes, bool writeback)
{
	const struct cfs_extent_geom *g = &fs->geom;
	uint64_t first = offset_bytes >> g->unit_shift;
	uint64_t end_bytes = offset_bytes + length_bytes;
	uint64_t last;
	bool missing = false;

	if (length_bytes == 0)
		return 0;
	if (end_bytes < offset_bytes || end_bytes > FILE_SIZE_MAX)
		return -EFBIG;
	CFS_ASSERT(inode->map);
	last = (end_bytes + g->unit_bytes - 1) >> g->unit_shift;
	/* Lock-free fast path: everything mapped already (the common case). */
	{
		bool mapped;

		missing = cfs_extent_unit_span(inode->map, first, last - first, &mapped) <
				  last - first ||
			  !mapped;
	}
	if (cfs_extent_piece_count(inode->map) &&
	    cfs_ns_pieces_must_grow(fs, inode, offset_bytes, length_bytes, false))
		return -EXDEV;
	if (!missing)
		return 0;
	if (cfs_fs_is_readonly(fs))
		return -EROFS;
	return map_range(fs, inode, first, last,
			 first == 0 && last == 1 ? write_piece(fs, inode, end_bytes) : 0,
			 writeback);
}

int cfs_ns_map_for_write(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t offset_bytes,
			 uint64_t length_bytes)
{
	return map_for_write(fs, inode, offset_bytes, length_bytes, false);
}

int cfs_ns_map_for_writeback(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t offset_bytes,
			     uint64_t length_bytes)
{
	return map_for_write(fs, inode, offset_bytes, length_bytes, true);
}

/* The piece a file's first write ending at end_bytes gets: small enough for
 * the write and the file's size (a file truncated up first is not written in
 * one small piece after another), 0 for a whole unit. */
static uint32_t write_piece(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t end_bytes)
{
	uint64_t size = atomic_load(&inode->size_bytes);

	return cfs_pool_piece_size(fs->pool, size > end_bytes ? size : end_bytes);
}

/* [lock-free] The bytes of file unit fu that a range ending at end_bytes
 * needs: from the unit's start to the range's end in it. */
static uint64_t unit_need(const struct cfs_extent_geom *g, uint64_t fu, uint64_t end_bytes)
{
	uint64_t start = fu << g->unit_shift;

	return (end_bytes < start + g->unit_bytes ? end_bytes : start + g->unit_bytes) - start;
}

bool cfs_ns_pieces_must_grow(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t offset_bytes,
			     uint64_t length_bytes, bool whole)
{
	const struct cfs_extent_geom *g = &fs->geom;
	uint64_t end_bytes = offset_bytes + length_bytes;

	if (!inode->map || length_bytes == 0 || !cfs_extent_piece_count(inode->map))
		return false;
	for (uint64_t fu = offset_bytes >> g->unit_shift; fu << g->unit_shift < end_bytes; fu++) {
		struct cfs_extent_loc loc;

		if (cfs_extent_unit_loc(inode->map, fu, &loc) || !loc.piece_bytes)
			continue;
		if (whole || unit_need(g, fu, end_bytes) > loc.piece_bytes)
			return true;
	}
	return false;
}

struct relocate_log {
	struct cfs_txn *txn;
	uint64_t ino;
	uint8_t *bits;
};

/* The new place's view after a relocate (a piece grown, a unit or piece
 * moved): log its mapping, then exactly the written-state it kept (replay
 * must not take the old sectors' state from an earlier record of the same
 * store unit; no record at all leaves it unwritten). */
static int relocate_logged(void *arg, const struct cfs_extent_unit_view *v)
{
	struct relocate_log *c = arg;
	struct cfs_jrec_written rec = {c->ino, v->file_unit,	v->store_unit, CFS_EXTENT_WS_OP_SET,
				       0,      v->sector_count, NULL};

	if (v->piece_bytes) {
		cfs_txn_piece(c->txn,
			      &(struct cfs_jrec_piece){c->ino, v->file_unit, v->store_unit,
						       v->piece_offset_bytes, v->piece_bytes});
	} else {
		struct cfs_jrec_extent map = {c->ino, v->file_unit, v->store_unit, 1};

		cfs_txn_extent(c->txn, CFS_LOG_EXTENT_MAP, &map);
	}
	if (v->state == CFS_EXTENT_WS_NONE)
		return 0;
	if (v->state == CFS_EXTENT_WS_BITMAP) {
		cfs_extent_view_bits(v, 0, v->sector_count, c->bits);
		rec.bits = c->bits;
	}
	cfs_txn_written(c->txn, &rec);
	return 0;
}

/* Device offset of a place. */
static uint64_t loc_device(const struct cfs_extent_geom *g, const struct cfs_extent_loc *loc)
{
	return g->data_offset_bytes + (loc->store_unit << g->unit_shift) + loc->piece_offset_bytes;
}

/* [inode lock] Grow file unit fu's piece *from to hold need bytes (a whole
 * unit with whole). 0, -EAGAIN (space busy), or an error; see
 * cfs_ns_grow_pieces. */
static int grow_piece(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t fu,
		      const struct cfs_extent_loc *from, uint64_t need, bool whole, bool writeback,
		      cfs_ns_copy_fn copy, void *arg)
{
	const struct cfs_extent_geom *g = &fs->geom;
	uint32_t store = cfs_ns_store_for_units(fs, inode, fu);
	uint64_t size = atomic_load(&inode->size_bytes), start = fu << g->unit_shift;
	struct cfs_extent_loc to = {0, 0, 0};
	struct free_ctx fc = {.fs = fs, .inode = inode};
	struct relocate_log gl = {NULL, inode->ino, NULL};
	struct cfs_txn txn;
	uint64_t got, seq;
	int ret;

	/* The file's size in this unit counts too: it says what is coming. */
	if (size > start + need)
		need = size - start < g->unit_bytes ? size - start : g->unit_bytes;
	to.piece_bytes = whole ? 0 : cfs_pool_piece_size(fs->pool, need);
	if (!meta_room(fs))
		return -ENOSPC;
	gl.bits = malloc(g->sectors_per_unit / 8 + 1);
	if (!gl.bits)
		return -ENOMEM;
	if (to.piece_bytes)
		ret = cfs_pool_get_piece(fs->pool, store, to.piece_bytes, writeback, &to.store_unit,
					 &to.piece_offset_bytes);
	else
		ret = cfs_pool_get(fs->pool, store, alloc_hint(inode, fu), 1, writeback,
				   &to.store_unit, &got);
	if (ret)
		goto out;
	ret = copy(arg, loc_device(g, from), loc_device(g, &to), from->piece_bytes);
	if (!ret) {
		cfs_txn_begin(&txn, fs->journal);
		gl.txn = &txn;
		ret = cfs_extent_relocate(inode->map, fu, from, &to, relocate_logged, &gl);
		fc.txn = NULL;
		if (!ret)
			free_ctx_unmapped(&fc, fu, from->store_unit, 1, from->piece_offset_bytes,
					  from->piece_bytes);
		seq = cfs_txn_end(&txn);
		if (!ret) {
			free_ctx_release(&fc, seq);
			if (!to.piece_bytes)
				inode->alloc_hint = to.store_unit + 1;
			goto out;
		}
	}
	/* Never logged: free at once. */
	if (to.piece_bytes)
		cfs_pool_free_piece(fs->pool, to.store_unit, to.piece_offset_bytes, to.piece_bytes,
				    0);
	else
		cfs_pool_free(fs->pool, to.store_unit, 1, 0);
out:
	free(gl.bits);
	return ret;
}

int cfs_ns_grow_pieces(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t offset_bytes,
		       uint64_t length_bytes, bool whole, bool writeback, cfs_ns_copy_fn copy,
		       void *arg)
{
	const struct cfs_extent_geom *g = &fs->geom;
	uint64_t end_bytes = offset_bytes + length_bytes;
	int ret = -EAGAIN;

	if (length_bytes == 0)
		return 0;
	if (end_bytes < offset_bytes || end_bytes > FILE_SIZE_MAX)
		return -EFBIG;
	for (unsigned attempt = 0; attempt < MAP_RETRIES && ret == -EAGAIN; attempt++) {
		if (attempt) {
			ret = cfs_journal_commit_sync(fs);
			if (ret)
				return ret == -EIO ? -EROFS : ret;
		}
		pthread_mutex_lock(&inode->lock);
		ret = cfs_fs_is_readonly(fs) ? -EROFS : 0;
		for (uint64_t fu = offset_bytes >> g->unit_shift;
		     !ret && fu << g->unit_shift < end_bytes; fu++) {
			struct cfs_extent_loc loc;
			uint64_t need = unit_need(g, fu, end_bytes);

			if (cfs_extent_unit_loc(inode->map, fu, &loc) || !loc.piece_bytes ||
			    (!whole && need <= loc.piece_bytes))
				continue;
			ret = grow_piece(fs, inode, fu, &loc, need, whole, writeback, copy, arg);
		}
		pthread_mutex_unlock(&inode->lock);
	}
	return ret == -EAGAIN ? -ENOSPC : ret;
}

void cfs_ns_write_done(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t offset_bytes,
		       uint64_t length_bytes)
{
	const uint32_t both = CFS_INODE_F_ATTR_DIRTY | CFS_INODE_F_QUEUED;
	uint64_t end = offset_bytes + length_bytes;
	struct timespec ts;
	int64_t now;

	/* Every completion passes here, from every loop thread: read-mostly,
	 * so concurrent writers of one chunk do not bounce its cache line. A
	 * coarse clock (the kernel's own granularity for mtime) changes a few
	 * hundred times a second. */
	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	if (atomic_load_explicit(&inode->mtime_ns, memory_order_relaxed) != now) {
		atomic_store(&inode->mtime_ns, now);
		atomic_store(&inode->ctime_ns, now);
	}
	if (end > atomic_load(&inode->size_bytes)) {
		pthread_mutex_lock(&inode->lock);
		if (end > atomic_load(&inode->size_bytes)) {
			atomic_store(&inode->size_bytes, end);
			atomic_fetch_or(&inode->flags, CFS_INODE_F_SIZE_DIRTY);
		}
		pthread_mutex_unlock(&inode->lock);
	}
	/* Logged by the committer after the flush that makes the data durable. */
	if ((atomic_load(&inode->flags) & both) != both) {
		atomic_fetch_or(&inode->flags, CFS_INODE_F_ATTR_DIRTY);
		inode_queue(ns_of(fs), inode);
	}
}

bool cfs_ns_datasync_flush_only(struct cfs_inode *inode)
{
	bool pending;

	pthread_mutex_lock(&inode->lock);
	pending = (atomic_load(&inode->flags) & CFS_INODE_F_SIZE_DIRTY) ||
		  (inode->map && cfs_extent_is_dirty(inode->map));
	pthread_mutex_unlock(&inode->lock);
	return !pending;
}

struct cfs_chunk_stats *cfs_ns_inode_stats(struct cfs_inode *inode)
{
	struct cfs_chunk_stats *stats = atomic_load(&inode->stats);
	struct cfs_chunk_stats *fresh, *expect = NULL;

	if (stats || !is_reg(inode))
		return stats;
	fresh = cfs_cs_new();
	if (!fresh)
		return NULL;
	if (atomic_compare_exchange_strong(&inode->stats, &expect, fresh))
		return fresh;
	cfs_cs_free(fresh);
	return expect;
}

int cfs_ns_stat_pin(struct cfs_fs *fs, uint64_t ino, struct cfs_ns_stat_view *view)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode;

	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (!inode) {
		pthread_rwlock_unlock(&ns->lock);
		return -ENOENT;
	}
	inode_get(inode);
	pthread_rwlock_unlock(&ns->lock);
	pthread_mutex_lock(&inode->lock);
	view->inode = inode;
	view->mode = inode->mode;
	view->uid = inode->uid;
	view->page_size_bytes = inode->page_size_bytes;
	pthread_mutex_unlock(&inode->lock);
	view->open_count = atomic_load(&inode->open_count);
	view->size_bytes = atomic_load(&inode->size_bytes);
	return 0;
}

void cfs_ns_pin(struct cfs_inode *inode)
{
	inode_get(inode);
}

void cfs_ns_unpin(struct cfs_fs *fs, struct cfs_inode *inode)
{
	(void)fs;
	inode_put(inode);
}

int cfs_ns_set_page_size(struct cfs_fs *fs, uint64_t ino, uint32_t page_size_bytes)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode;
	struct cfs_txn txn;
	int ret = 0;

	if (page_size_bytes && (page_size_bytes < 512 || page_size_bytes > (1u << 20) ||
				(page_size_bytes & (page_size_bytes - 1))))
		return -EINVAL;
	if (cfs_fs_is_readonly(fs))
		return -EROFS;
	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (!inode) {
		ret = -ENOENT;
		goto out_unlock;
	}
	pthread_mutex_lock(&inode->lock);
	inode->page_size_bytes = page_size_bytes;
	cfs_txn_begin(&txn, fs->journal);
	txn_inode(&txn, CFS_LOG_INODE_UPDATE, inode);
	cfs_txn_end(&txn);
	pthread_mutex_unlock(&inode->lock);
out_unlock:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

int64_t cfs_ns_seek(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t offset_bytes, int whence)
{
	uint64_t size = atomic_load(&inode->size_bytes);

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	if (!inode->map) {
		if (offset_bytes >= size)
			return -ENXIO;
		return whence == SEEK_DATA ? (int64_t)offset_bytes : (int64_t)size;
	}
	if (whence == SEEK_DATA)
		return cfs_extent_seek_data(inode->map, offset_bytes, size);
	return cfs_extent_seek_hole(inode->map, offset_bytes, size);
}

/* ---- user xattrs -------------------------------------------------------------------------------
 */

static bool xattr_user(const char *name)
{
	return !strncmp(name, "user.", 5);
}

static struct cfs_xattr **xattr_find(struct cfs_inode *inode, const char *name, size_t length)
{
	struct cfs_xattr **link = &inode->xattrs;

	for (; *link; link = &(*link)->next)
		if ((*link)->name_length == length && !memcmp((*link)->data, name, length))
			return link;
	return NULL;
}

static struct cfs_xattr *xattr_new(const char *name, size_t name_length, const void *value,
				   size_t value_length)
{
	struct cfs_xattr *x = malloc(sizeof(*x) + name_length + 1 + value_length);

	if (!x)
		return NULL;
	x->next = NULL;
	x->name_length = (uint32_t)name_length;
	x->value_length = (uint32_t)value_length;
	memcpy(x->data, name, name_length);
	x->data[name_length] = '\0';
	if (value_length && value)
		memcpy(x->data + name_length + 1, value, value_length);
	else if (value_length)
		memset(x->data + name_length + 1, 0, value_length);
	return x;
}

static inline void *xattr_value(struct cfs_xattr *x)
{
	return x->data + x->name_length + 1;
}

/* [inode lock] Replace or insert name's value. 0 or -ENOMEM. */
static int xattr_put(struct cfs_inode *inode, const char *name, size_t name_length,
		     const void *value, size_t value_length)
{
	struct cfs_xattr **link = xattr_find(inode, name, name_length);
	struct cfs_xattr *x = xattr_new(name, name_length, value, value_length);

	if (!x)
		return -ENOMEM;
	if (link) {
		struct cfs_xattr *old = *link;

		inode->xattr_bytes -= old->name_length + old->value_length;
		x->next = old->next;
		*link = x;
		free(old);
	} else {
		x->next = inode->xattrs;
		inode->xattrs = x;
		inode->xattr_count++;
	}
	inode->xattr_bytes += (uint32_t)(name_length + value_length);
	return 0;
}

static void xattr_drop(struct cfs_inode *inode, struct cfs_xattr **link)
{
	struct cfs_xattr *x = *link;

	*link = x->next;
	inode->xattr_count--;
	inode->xattr_bytes -= x->name_length + x->value_length;
	free(x);
}

/* Bytes of the name list (names + NULs) after setting name. */
static size_t xattr_list_bytes(struct cfs_inode *inode)
{
	size_t n = 0;

	for (struct cfs_xattr *x = inode->xattrs; x; x = x->next)
		n += x->name_length + 1;
	return n;
}

int cfs_ns_setxattr(struct cfs_fs *fs, uint64_t ino, const char *name, const void *value,
		    size_t size, int flags)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode;
	struct cfs_xattr **link;
	struct cfs_txn txn;
	size_t length = strnlen(name, CFS_XATTR_NAME_MAX + 1);
	int ret = 0;

	if (length > CFS_XATTR_NAME_MAX)
		return -ERANGE;
	if (!xattr_user(name))
		return -EOPNOTSUPP;
	if (length == 5)
		return -EINVAL; /* "user." alone */
	if (size > CFS_XATTR_VALUE_MAX)
		return -E2BIG;
	if (flags & ~(CFS_XATTR_CREATE | CFS_XATTR_REPLACE))
		return -EINVAL;
	if (cfs_fs_is_readonly(fs))
		return -EROFS;
	cfs_journal_throttle(fs);
	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (!inode) {
		ret = -ENOENT;
		goto out_unlock_ns;
	}
	if (!is_reg(inode) && !is_dir(inode)) {
		ret = -EPERM;
		goto out_unlock_ns;
	}
	pthread_mutex_lock(&inode->lock);
	link = xattr_find(inode, name, length);
	if ((flags & CFS_XATTR_CREATE) && link) {
		ret = -EEXIST;
		goto out_unlock;
	}
	if ((flags & CFS_XATTR_REPLACE) && !link) {
		ret = -ENODATA;
		goto out_unlock;
	}
	{
		size_t old_bytes = link ? (*link)->name_length + (*link)->value_length : 0;
		size_t list = xattr_list_bytes(inode) + (link ? 0 : length + 1);

		if (inode->xattr_bytes - old_bytes + length + size > CFS_XATTR_TOTAL_MAX ||
		    list > CFS_XATTR_LIST_MAX || !meta_room(fs)) {
			ret = -ENOSPC;
			goto out_unlock;
		}
	}
	ret = xattr_put(inode, name, length, value, size);
	if (ret)
		goto out_unlock;
	atomic_store(&inode->ctime_ns, now_ns());
	cfs_txn_begin(&txn, fs->journal);
	cfs_txn_xattr_set(&txn, inode->ino, name, (uint32_t)length, value, (uint32_t)size);
	txn_inode(&txn, CFS_LOG_INODE_UPDATE, inode);
	cfs_txn_end(&txn);
out_unlock:
	pthread_mutex_unlock(&inode->lock);
out_unlock_ns:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

ssize_t cfs_ns_getxattr(struct cfs_fs *fs, uint64_t ino, const char *name, void *buf,
			size_t buf_size)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode;
	struct cfs_xattr **link;
	size_t length = strnlen(name, CFS_XATTR_NAME_MAX + 1);
	ssize_t ret;

	if (length > CFS_XATTR_NAME_MAX)
		return -ERANGE;
	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (!inode) {
		ret = -ENOENT;
		goto out_unlock_ns;
	}
	if (!xattr_user(name)) {
		ret = -ENODATA;
		goto out_unlock_ns;
	}
	pthread_mutex_lock(&inode->lock);
	link = xattr_find(inode, name, length);
	if (!link) {
		ret = -ENODATA;
	} else {
		ret = (*link)->value_length;
		if (buf_size >= (*link)->value_length && (*link)->value_length)
			memcpy(buf, xattr_value(*link), (*link)->value_length);
	}
	pthread_mutex_unlock(&inode->lock);
out_unlock_ns:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

ssize_t cfs_ns_listxattr(struct cfs_fs *fs, uint64_t ino, char *buf, size_t buf_size)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode;
	ssize_t ret;

	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (!inode) {
		ret = -ENOENT;
		goto out_unlock_ns;
	}
	pthread_mutex_lock(&inode->lock);
	ret = (ssize_t)xattr_list_bytes(inode);
	if (buf_size >= (size_t)ret) {
		char *p = buf;

		for (struct cfs_xattr *x = inode->xattrs; x; x = x->next) {
			memcpy(p, x->data, x->name_length + 1);
			p += x->name_length + 1;
		}
	}
	pthread_mutex_unlock(&inode->lock);
out_unlock_ns:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

int cfs_ns_removexattr(struct cfs_fs *fs, uint64_t ino, const char *name)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode;
	struct cfs_xattr **link;
	struct cfs_txn txn;
	size_t length = strnlen(name, CFS_XATTR_NAME_MAX + 1);
	int ret = 0;

	if (length > CFS_XATTR_NAME_MAX)
		return -ERANGE;
	if (!xattr_user(name))
		return -EOPNOTSUPP;
	if (cfs_fs_is_readonly(fs))
		return -EROFS;
	cfs_journal_throttle(fs);
	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (!inode) {
		ret = -ENOENT;
		goto out_unlock_ns;
	}
	pthread_mutex_lock(&inode->lock);
	link = xattr_find(inode, name, length);
	if (!link) {
		ret = -ENODATA;
		goto out_unlock;
	}
	xattr_drop(inode, link);
	atomic_store(&inode->ctime_ns, now_ns());
	cfs_txn_begin(&txn, fs->journal);
	cfs_txn_xattr_remove(&txn, inode->ino, name, (uint32_t)length);
	txn_inode(&txn, CFS_LOG_INODE_UPDATE, inode);
	cfs_txn_end(&txn);
out_unlock:
	pthread_mutex_unlock(&inode->lock);
out_unlock_ns:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

/* ---- readdir and statfs
 * -------------------------------------------------------------------------- */

int cfs_ns_readdir(struct cfs_fs *fs, uint64_t ino, uint64_t offset, bool plus,
		   cfs_ns_readdir_fn fn, void *arg)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *dir;
	struct cfs_attr attr, *ap = plus ? &attr : NULL;
	int ret, count = 0;

	pthread_rwlock_rdlock(&ns->lock);
	ret = find_dir(ns, ino, &dir);
	if (ret)
		goto out_unlock;
	if (offset < 1) {
		if (plus) {
			pthread_mutex_lock(&dir->lock);
			fill_attr(fs, dir, &attr);
			pthread_mutex_unlock(&dir->lock);
		}
		if (fn(arg, ".", 1, dir->ino, dir->mode, 1, ap))
			goto out_done;
		count++;
		offset = 1;
	}
	if (offset < 2) {
		struct cfs_inode *parent = table_find(ns, dir->parent_ino);

		if (!parent)
			parent = dir;
		if (plus) {
			pthread_mutex_lock(&parent->lock);
			fill_attr(fs, parent, &attr);
			pthread_mutex_unlock(&parent->lock);
		}
		if (fn(arg, "..", 2, parent->ino, parent->mode, 2, ap))
			goto out_done;
		count++;
		offset = 2;
	}
	for (uint64_t i = order_search(dir->dir, offset); i < dir->dir->order_len; i++) {
		struct cfs_dirent *d = dir->dir->order[i].dirent;
		struct cfs_inode *inode;

		if (!d)
			continue;
		inode = table_find(ns, d->ino);
		if (!inode)
			continue;
		if (plus) {
			pthread_mutex_lock(&inode->lock);
			fill_attr(fs, inode, &attr);
			pthread_mutex_unlock(&inode->lock);
		}
		if (fn(arg, d->name, d->name_length, d->ino, d->mode | (inode->mode & 07777),
		       d->cookie, ap))
			break;
		if (plus)
			atomic_fetch_add(&inode->nlookup, 1);
		count++;
	}
out_done:
	ret = count;
out_unlock:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

/* ---- placement ----------------------------------------------------------------------------- */

uint32_t cfs_ns_store_for_units(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t file_unit)
{
	struct cfs_pool *pool = fs->pool;
	uint32_t st = inode->place.store;
	int64_t near;

	if (!cfs_pool_is_multi(pool))
		return cfs_pool_default_store(pool);
	if (st != CFS_STORE_NONE && cfs_pool_store_state(pool, st) == CFS_STORE_ACTIVE)
		return st;
	/* Not placed: where its units are (the one before, else the last
	 * allocated), so a chunk stays on one store. */
	near = file_unit ? cfs_extent_unit_get(inode->map, file_unit - 1) : -1;
	if (near < 0 && inode->alloc_hint)
		near = (int64_t)inode->alloc_hint - 1;
	if (near >= 0) {
		st = cfs_pool_store_of(pool, (uint64_t)near);
		if (st != CFS_STORE_NONE && cfs_pool_store_state(pool, st) == CFS_STORE_ACTIVE)
			return st;
	}
	return cfs_pool_default_store(pool);
}

int cfs_ns_for_each_unit(struct cfs_fs *fs, uint64_t ino, cfs_extent_unit_fn fn, void *arg)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode;
	int ret;

	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (inode)
		inode_get(inode);
	pthread_rwlock_unlock(&ns->lock);
	if (!inode)
		return -ENOENT;
	pthread_mutex_lock(&inode->lock);
	ret = inode->map ? cfs_extent_for_each(inode->map, fn, arg) : -EINVAL;
	pthread_mutex_unlock(&inode->lock);
	inode_put(inode);
	return ret;
}

int cfs_ns_place_get(struct cfs_fs *fs, uint64_t ino, struct cfs_place *place)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode;

	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (inode) {
		pthread_mutex_lock(&inode->lock);
		*place = inode->place;
		pthread_mutex_unlock(&inode->lock);
	}
	pthread_rwlock_unlock(&ns->lock);
	return inode ? 0 : -ENOENT;
}

int cfs_ns_place_set(struct cfs_fs *fs, uint64_t ino, const struct cfs_place *place)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode;
	struct cfs_txn txn;
	int ret = 0;

	if (cfs_fs_is_readonly(fs))
		return -EROFS;
	cfs_journal_throttle(fs);
	pthread_rwlock_rdlock(&ns->lock);
	inode = table_find(ns, ino);
	if (!inode) {
		ret = -ENOENT;
		goto out_unlock;
	}
	pthread_mutex_lock(&inode->lock);
	if (!S_ISREG(inode->mode) && !S_ISDIR(inode->mode)) {
		ret = -EINVAL;
	} else if (!meta_room(fs)) {
		ret = -ENOSPC;
	} else if (cfs_fs_is_readonly(fs)) {
		ret = -EROFS;
	} else {
		inode->place = *place;
		cfs_txn_begin(&txn, fs->journal);
		txn_place(&txn, inode);
		cfs_txn_end(&txn);
		if (ino == CFS_ROOT_INO)
			cfs_pool_set_default(fs->pool, place->store);
	}
	pthread_mutex_unlock(&inode->lock);
out_unlock:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

int cfs_ns_apply_place(struct cfs_fs *fs, const struct cfs_jrec_place *rec, const char **why)
{
	struct cfs_inode *inode = table_find(ns_of(fs), rec->ino);

	(void)why;
	if (!inode)
		return 0; /* deleted later in the log */
	inode->place = (struct cfs_place){rec->store, rec->from, rec->flags, rec->rate_bytes};
	if (rec->ino == CFS_ROOT_INO)
		cfs_pool_set_default(fs->pool, rec->store);
	return 0;
}

/* ---- moves ------------------------------------------------------------------------------------
 */

int cfs_ns_move_reserve(struct cfs_fs *fs, uint32_t store, uint64_t units,
			struct cfs_unit_run **runs_out, unsigned *run_count)
{
	struct cfs_unit_run *runs = NULL;
	unsigned n = 0, cap = 0, busy_commits = 0;
	uint64_t have = 0, hint = CFS_ALLOC_NO_HINT;
	int ret = 0;

	if (!cfs_pool_has_room(fs->pool, store, units))
		return -ENOSPC; /* the space held back is the kernel's write-back's */
	while (have < units) {
		uint64_t first, got;

		if (cfs_fs_is_readonly(fs)) {
			ret = -EROFS;
			break;
		}
		ret = cfs_pool_get(fs->pool, store, hint, units - have, false, &first, &got);
		if (ret == -EAGAIN && busy_commits++ < MAP_RETRIES) {
			/* Busy units come back once their frees are durable. */
			ret = cfs_journal_commit_sync(fs);
			if (ret)
				break;
			continue;
		}
		if (ret) {
			ret = ret == -EAGAIN ? -ENOSPC : ret;
			break;
		}
		if (n == cap) {
			unsigned more_cap = cap ? 2 * cap : 8;
			struct cfs_unit_run *more = realloc(runs, more_cap * sizeof(*runs));

			if (!more) {
				cfs_pool_free(fs->pool, first, got, 0);
				ret = -ENOMEM;
				break;
			}
			runs = more;
			cap = more_cap;
		}
		runs[n++] = (struct cfs_unit_run){first, got};
		have += got;
		hint = first + got;
	}
	if (ret) {
		for (unsigned i = 0; i < n; i++)
			cfs_pool_free(fs->pool, runs[i].first_unit, runs[i].count, 0);
		free(runs);
		return ret;
	}
	*runs_out = runs;
	*run_count = n;
	return 0;
}

void cfs_ns_move_unreserve(struct cfs_fs *fs, uint64_t first_unit, uint64_t count)
{
	cfs_pool_free(fs->pool, first_unit, count, 0); /* never logged */
}

int cfs_ns_move_reserve_piece(struct cfs_fs *fs, uint32_t store, uint32_t bytes,
			      struct cfs_extent_loc *to)
{
	uint32_t piece = cfs_pool_piece_size(fs->pool, bytes);
	int ret = -EAGAIN;

	if (!piece)
		return -EINVAL;
	for (unsigned attempt = 0; attempt < MAP_RETRIES && ret == -EAGAIN; attempt++) {
		if (attempt) {
			/* Busy pieces come back once their frees are durable. */
			ret = cfs_journal_commit_sync(fs);
			if (ret)
				return ret == -EIO ? -EROFS : ret;
		}
		if (cfs_fs_is_readonly(fs))
			return -EROFS;
		ret = cfs_pool_get_piece(fs->pool, store, piece, false, &to->store_unit,
					 &to->piece_offset_bytes);
	}
	if (ret)
		return ret == -EAGAIN ? -ENOSPC : ret;
	to->piece_bytes = piece;
	return 0;
}

void cfs_ns_move_unreserve_piece(struct cfs_fs *fs, const struct cfs_extent_loc *loc)
{
	cfs_pool_free_piece(fs->pool, loc->store_unit, loc->piece_offset_bytes, loc->piece_bytes,
			    0); /* never logged */
}

int cfs_ns_move_switch(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t file_unit,
		       const struct cfs_extent_loc *from, const struct cfs_extent_loc *to,
		       uint64_t *seq)
{
	struct free_ctx fc = {.fs = fs, .inode = inode};
	struct cfs_txn txn;
	struct relocate_log gl = {&txn, inode->ino, malloc(fs->geom.sectors_per_unit / 8 + 1)};
	int ret;

	*seq = 0;
	if (!gl.bits)
		return -ENOMEM;
	pthread_mutex_lock(&inode->lock);
	if (cfs_fs_is_readonly(fs)) {
		ret = -EROFS;
		goto out;
	}
	cfs_txn_begin(&txn, fs->journal);
	ret = cfs_extent_relocate(inode->map, file_unit, from, to, relocate_logged, &gl);
	if (ret) {
		cfs_txn_end(&txn); /* empty: nothing was logged */
		goto out;
	}
	/* The old place goes as an unmapped one: after every read that looked
	 * it up, and only once the switch is durable. */
	fc.runs[fc.run_count++] =
		(struct freed){from->store_unit, 1, from->piece_offset_bytes, from->piece_bytes};
	*seq = cfs_txn_end(&txn);
	free_ctx_release(&fc, *seq);
	inode_quiesce(fs, inode);
out:
	pthread_mutex_unlock(&inode->lock);
	free(gl.bits);
	return ret;
}

int cfs_ns_moves_pending(struct cfs_fs *fs, uint64_t **inos_out, unsigned *count)
{
	struct cfs_ns *ns = ns_of(fs);
	uint64_t *inos = NULL;
	unsigned n = 0, cap = 0;
	int ret = 0;

	pthread_rwlock_rdlock(&ns->lock);
	for (struct cfs_inode *inode = table_next(ns, NULL); inode; inode = table_next(ns, inode)) {
		bool moving;

		if (!is_reg(inode))
			continue;
		pthread_mutex_lock(&inode->lock);
		moving =
			inode->place.store != CFS_STORE_NONE && inode->place.from != CFS_STORE_NONE;
		pthread_mutex_unlock(&inode->lock);
		if (!moving)
			continue;
		if (n == cap) {
			unsigned more_cap = cap ? 2 * cap : 16;
			uint64_t *more = realloc(inos, more_cap * sizeof(*inos));

			if (!more) {
				ret = -ENOMEM;
				break;
			}
			inos = more;
			cap = more_cap;
		}
		inos[n++] = inode->ino;
	}
	pthread_rwlock_unlock(&ns->lock);
	if (ret) {
		free(inos);
		return ret;
	}
	*inos_out = inos;
	*count = n;
	return 0;
}

struct units_in {
	uint64_t base;
	uint64_t count;
	uint64_t units; /* units and pieces of the file in [base, +count) */
};

static int units_in_range(void *arg, const struct cfs_extent_unit_view *v)
{
	struct units_in *c = arg;

	for (uint64_t i = 0; i < v->unit_count; i++) {
		uint64_t u = v->store_unit + i;

		if (u >= c->base && u - c->base < c->count)
			c->units++;
	}
	return 0;
}

int cfs_ns_files_on(struct cfs_fs *fs, uint64_t unit_base, uint64_t unit_count, uint64_t **inos_out,
		    unsigned *count)
{
	struct cfs_ns *ns = ns_of(fs);
	uint64_t *inos = NULL;
	unsigned n = 0, cap = 0;
	int ret = 0;

	pthread_rwlock_rdlock(&ns->lock);
	for (struct cfs_inode *inode = table_next(ns, NULL); inode && !ret;
	     inode = table_next(ns, inode)) {
		struct units_in c = {unit_base, unit_count, 0};

		if (!is_reg(inode))
			continue;
		pthread_mutex_lock(&inode->lock);
		if (inode->map)
			ret = cfs_extent_for_each(inode->map, units_in_range, &c);
		pthread_mutex_unlock(&inode->lock);
		if (ret || !c.units)
			continue;
		if (n == cap) {
			unsigned more_cap = cap ? 2 * cap : 16;
			uint64_t *more = realloc(inos, more_cap * sizeof(*inos));

			if (!more) {
				ret = -ENOMEM;
				break;
			}
			inos = more;
			cap = more_cap;
		}
		inos[n++] = inode->ino;
	}
	pthread_rwlock_unlock(&ns->lock);
	if (ret) {
		free(inos);
		return ret;
	}
	*inos_out = inos;
	*count = n;
	return 0;
}

int cfs_ns_places_on(struct cfs_fs *fs, uint32_t store, uint64_t **inos_out, unsigned *count)
{
	struct cfs_ns *ns = ns_of(fs);
	uint64_t *inos = NULL;
	unsigned n = 0, cap = 0;
	int ret = 0;

	pthread_rwlock_rdlock(&ns->lock);
	for (struct cfs_inode *inode = table_next(ns, NULL); inode; inode = table_next(ns, inode)) {
		bool placed;

		pthread_mutex_lock(&inode->lock);
		placed = inode->place.store == store && inode->place.from == CFS_STORE_NONE;
		pthread_mutex_unlock(&inode->lock);
		if (!placed)
			continue;
		if (n == cap) {
			unsigned more_cap = cap ? 2 * cap : 16;
			uint64_t *more = realloc(inos, more_cap * sizeof(*inos));

			if (!more) {
				ret = -ENOMEM;
				break;
			}
			inos = more;
			cap = more_cap;
		}
		inos[n++] = inode->ino;
	}
	pthread_rwlock_unlock(&ns->lock);
	if (ret) {
		free(inos);
		return ret;
	}
	*inos_out = inos;
	*count = n;
	return 0;
}

void cfs_ns_statfs(struct cfs_fs *fs, struct cfs_ns_statfs *st)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_alloc_stat as;
	uint64_t count;

	cfs_pool_stat(fs->pool, &as);
	pthread_rwlock_rdlock(&ns->lock);
	count = ns->inodes.count;
	pthread_rwlock_unlock(&ns->lock);
	st->block_bytes = fs->geom.unit_bytes;
	st->blocks = as.total_units;
	st->blocks_free = as.free_units + as.busy_units;
	st->blocks_avail = cfs_pool_avail_units(fs->pool);
	st->files = fs->inode_limit;
	st->files_free = fs->inode_limit > count ? fs->inode_limit - count : 0;
	st->name_max = CFS_NAME_MAX;
}

uint64_t cfs_ns_inode_count(struct cfs_fs *fs)
{
	struct cfs_ns *ns = ns_of(fs);
	uint64_t count;

	pthread_rwlock_rdlock(&ns->lock);
	count = ns->inodes.count;
	pthread_rwlock_unlock(&ns->lock);
	return count;
}

/* ---- committer and snapshot
 * ----------------------------------------------------------------------- */

/* The store takes a run of written units in one record (incompat
 * WRITTEN_RUNS; RAM mounts log nothing). */
static bool written_runs(const struct cfs_fs *fs)
{
	return fs->sb.incompat & CFS_FEAT_INCOMPAT_WRITTEN_RUNS;
}

struct capture_ctx {
	struct cfs_txn *txn;
	bool runs;
	uint64_t ino;
	uint8_t *bits; /* sectors_per_unit bits */
};

/* Log a dirty unit's written sectors as an OR: bits only ever get set
 * outside the inode lock, and clears are logged by their own records. */
static int capture_unit(void *arg, const struct cfs_extent_unit_view *v)
{
	struct capture_ctx *c = arg;
	struct cfs_jrec_written rec = {c->ino, v->file_unit,	v->store_unit, CFS_EXTENT_WS_OP_OR,
				       0,      v->sector_count, NULL};

	if (v->state == CFS_EXTENT_WS_NONE)
		return 0;
	if (v->state == CFS_EXTENT_WS_ALL && c->runs) {
		struct cfs_jrec_extent run = {c->ino, v->file_unit, v->store_unit, v->unit_count};

		cfs_txn_extent(c->txn, CFS_LOG_EXTENT_WRITTEN_RUN, &run);
		return 0;
	}
	if (v->state == CFS_EXTENT_WS_BITMAP) {
		cfs_extent_view_bits(v, 0, v->sector_count, c->bits);
		rec.bits = c->bits;
	}
	for (uint64_t i = 0; i < v->unit_count; i++) {
		rec.file_unit = v->file_unit + i;
		rec.store_unit = v->store_unit + i;
		cfs_txn_written(c->txn, &rec);
	}
	return 0;
}

int cfs_ns_commit_capture(struct cfs_fs *fs)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode = atomic_exchange(&ns->dirty_head, NULL);
	uint8_t *bits = malloc(fs->geom.sectors_per_unit / 8 + 1);

	while (inode) {
		struct cfs_inode *next = inode->dirty_next;
		struct cfs_txn txn;
		struct capture_ctx c = {&txn, written_runs(fs), inode->ino, bits};

		/* Unqueue before capturing: what changes from now on queues again. */
		atomic_fetch_and(&inode->flags, ~CFS_INODE_F_QUEUED);
		pthread_mutex_lock(&inode->lock);
		if (!(atomic_load(&inode->flags) & CFS_INODE_F_DELETED)) {
			cfs_txn_begin(&txn, fs->journal);
			if (inode->map && bits)
				cfs_extent_collect_dirty(inode->map, capture_unit, &c);
			else if (inode->map)
				inode_queue(ns, inode); /* no memory now: next commit */
			if (atomic_fetch_and(&inode->flags,
					     ~(CFS_INODE_F_ATTR_DIRTY | CFS_INODE_F_SIZE_DIRTY)) &
			    CFS_INODE_F_ATTR_DIRTY)
				txn_inode(&txn, CFS_LOG_INODE_UPDATE, inode);
			cfs_txn_end(&txn);
		}
		inode_quiesce(fs, inode);
		pthread_mutex_unlock(&inode->lock);
		inode_put(inode);
		inode = next;
	}
	free(bits);
	return bits ? 0 : -ENOMEM;
}

struct snap_ctx {
	struct cfs_snap_builder *sb;
	bool runs; /* the store takes EXTENT_WRITTEN_RUN records */
	uint64_t ino;
	uint8_t *bits;
	struct cfs_jrec_extent run; /* pending EXTENT_MAP run */
	int ret;
};

static int snap_map_unit(void *arg, const struct cfs_extent_unit_view *v)
{
	struct snap_ctx *c = arg;

	if (v->piece_bytes) {
		struct cfs_jrec_piece piece = {c->ino, v->file_unit, v->store_unit,
					       v->piece_offset_bytes, v->piece_bytes};

		if (c->run.count)
			c->ret = cfs_snap_extent(c->sb, &c->run);
		c->run.count = 0;
		c->ret = c->ret ?: cfs_snap_piece(c->sb, &piece);
		return c->ret;
	}
	if (c->run.count && c->run.file_unit + c->run.count == v->file_unit &&
	    c->run.store_unit + c->run.count == v->store_unit) {
		c->run.count += v->unit_count;
		return 0;
	}
	if (c->run.count) {
		c->ret = cfs_snap_extent(c->sb, &c->run);
		if (c->ret)
			return c->ret;
	}
	c->run = (struct cfs_jrec_extent){c->ino, v->file_unit, v->store_unit, v->unit_count};
	return 0;
}

static int snap_written_unit(void *arg, const struct cfs_extent_unit_view *v)
{
	struct snap_ctx *c = arg;
	struct cfs_jrec_written rec = {c->ino, v->file_unit,	v->store_unit, CFS_EXTENT_WS_OP_SET,
				       0,      v->sector_count, NULL};

	if (v->state == CFS_EXTENT_WS_NONE)
		return 0; /* a fresh mapping is unwritten */
	if (v->state == CFS_EXTENT_WS_ALL && c->runs) {
		struct cfs_jrec_extent run = {c->ino, v->file_unit, v->store_unit, v->unit_count};

		return cfs_snap_written_run(c->sb, &run);
	}
	if (v->state == CFS_EXTENT_WS_BITMAP) {
		cfs_extent_view_bits(v, 0, v->sector_count, c->bits);
		rec.bits = c->bits;
	}
	for (uint64_t i = 0; i < v->unit_count; i++) {
		int ret;

		rec.file_unit = v->file_unit + i;
		rec.store_unit = v->store_unit + i;
		ret = cfs_snap_written(c->sb, &rec);
		if (ret)
			return ret;
	}
	return 0;
}

/* [ns_lock shared, inode lock] One inode's records: attributes, xattrs,
 * mappings (runs), then written-state (after the mappings it refers to). */
static int snap_inode(struct cfs_fs *fs, struct cfs_inode *inode, struct snap_ctx *c)
{
	struct cfs_jrec_inode rec;
	int ret;

	jrec_of(inode, &rec, true);
	ret = cfs_snap_inode(c->sb, &rec);
	if (!ret && inode->place.store != CFS_STORE_NONE) {
		struct cfs_jrec_place place = {inode->ino, inode->place.store, inode->place.from,
					       inode->place.flags, inode->place.rate_bytes};

		ret = cfs_snap_place(c->sb, &place);
	}
	for (struct cfs_xattr *x = inode->xattrs; x && !ret; x = x->next)
		ret = cfs_snap_xattr(c->sb, inode->ino, x->data, x->name_length, xattr_value(x),
				     x->value_length);
	if (ret || !inode->map)
		return ret;
	c->ino = inode->ino;
	c->run.count = 0;
	c->ret = 0;
	ret = cfs_extent_for_each(inode->map, snap_map_unit, c);
	if (!ret && c->run.count)
		ret = cfs_snap_extent(c->sb, &c->run);
	if (!ret)
		ret = cfs_extent_for_each(inode->map, snap_written_unit, c);
	return ret;
}

int cfs_ns_snapshot(struct cfs_fs *fs, struct cfs_snap_builder *sb)
{
	struct cfs_ns *ns = ns_of(fs);
	struct snap_ctx c = {.sb = sb, .runs = written_runs(fs)};
	struct cfs_jrec_fs_info info;
	int ret;

	c.bits = malloc(fs->geom.sectors_per_unit / 8 + 1);
	if (!c.bits)
		return -ENOMEM;
	/* Shared: no entry moves while the tree is written out; attributes
	 * and maps are consistent per inode under its lock. */
	pthread_rwlock_rdlock(&ns->lock);
	info = (struct cfs_jrec_fs_info){ns->next_ino, ns->next_generation};
	ret = cfs_snap_fs_info(sb, &info);
	for (struct cfs_inode *inode = table_next(ns, NULL); inode && !ret;
	     inode = table_next(ns, inode)) {
		pthread_mutex_lock(&inode->lock);
		ret = snap_inode(fs, inode, &c);
		pthread_mutex_unlock(&inode->lock);
	}
	/* Entries after every inode they name. */
	for (struct cfs_inode *inode = table_next(ns, NULL); inode && !ret;
	     inode = table_next(ns, inode)) {
		if (!inode->dir)
			continue;
		for (uint64_t i = 0; i < inode->dir->order_len && !ret; i++) {
			struct cfs_dirent *d = inode->dir->order[i].dirent;
			struct cfs_jrec_dirent rec;

			if (!d)
				continue;
			rec = (struct cfs_jrec_dirent){inode->ino, d->ino,	   d->cookie,
						       d->mode,	   d->name_length, d->name};
			ret = cfs_snap_dirent_add(sb, &rec);
		}
	}
	pthread_rwlock_unlock(&ns->lock);
	free(c.bits);
	return ret;
}

/* ---- replay
 * ----------------------------------------------------------------------------------------- */

int cfs_ns_apply_fs_info(struct cfs_fs *fs, const struct cfs_jrec_fs_info *rec)
{
	struct cfs_ns *ns = ns_of(fs);

	if (rec->next_ino > ns->next_ino)
		ns->next_ino = rec->next_ino;
	if (rec->next_generation > ns->next_generation)
		ns->next_generation = rec->next_generation;
	return 0;
}

/* Take an inode out of the table and free it (replay and mount only). */
static void replay_drop(struct cfs_ns *ns, struct cfs_inode *inode)
{
	table_remove(ns, inode);
	atomic_fetch_or(&inode->flags, CFS_INODE_F_DELETED);
	inode_put(inode);
}

int cfs_ns_apply_inode(struct cfs_fs *fs, const struct cfs_jrec_inode *rec, const char **why)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode = table_find(ns, rec->ino);
	uint32_t type = rec->mode & S_IFMT;

	if (rec->ino == 0) {
		*why = "inode record with an invalid inode number";
		return -EUCLEAN;
	}
	if (type != S_IFREG && type != S_IFDIR && type != S_IFLNK && type != S_IFIFO &&
	    type != S_IFSOCK && type != S_IFCHR && type != S_IFBLK) {
		*why = "inode record with an invalid file type";
		return -EUCLEAN;
	}
	if (rec->target_length > CFS_SYMLINK_MAX) {
		*why = "symlink target longer than the maximum";
		return -EUCLEAN;
	}
	/* Targets are C strings (the kernel passes them so, snapshots store
	 * strlen): a NUL inside would shorten the target at the next snapshot. */
	if (rec->target_length && memchr(rec->target, '\0', rec->target_length)) {
		*why = "symlink target with a NUL byte";
		return -EUCLEAN;
	}
	/* The number was reused for another type: the old inode is gone. */
	if (inode && (inode->mode & S_IFMT) != type) {
		replay_drop(ns, inode);
		inode = NULL;
	}
	if (!inode) {
		inode = inode_new(fs, rec->ino, rec->generation, rec->mode);
		if (!inode)
			return -ENOMEM;
		table_insert(ns, inode);
	}
	if (rec->target_length && !inode->symlink_target) {
		inode->symlink_target = strndup(rec->target, rec->target_length);
		if (!inode->symlink_target)
			return -ENOMEM;
	}
	inode->generation = rec->generation;
	inode->mode = rec->mode;
	inode->nlink = rec->nlink;
	inode->uid = rec->uid;
	inode->gid = rec->gid;
	inode->rdev = rec->rdev;
	atomic_store(&inode->size_bytes, rec->size_bytes);
	atomic_store(&inode->atime_ns, rec->atime_ns);
	atomic_store(&inode->mtime_ns, rec->mtime_ns);
	atomic_store(&inode->ctime_ns, rec->ctime_ns);
	inode->page_size_bytes = rec->page_size_bytes;
	if (type == S_IFDIR)
		inode->parent_ino = rec->parent_ino;
	if (rec->generation >= ns->next_generation)
		ns->next_generation = rec->generation + 1;
	return 0;
}

int cfs_ns_apply_inode_delete(struct cfs_fs *fs, uint64_t ino)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode *inode = table_find(ns, ino);

	if (inode)
		replay_drop(ns, inode);
	return 0;
}

/* Set name in dir to ino (replacing whatever it named). */
static int replay_set_entry(struct cfs_ns *ns, uint64_t dir_ino, const char *name, uint32_t length,
			    uint64_t ino, uint32_t mode, uint64_t cookie)
{
	struct cfs_inode *dir = table_find(ns, dir_ino);
	struct cfs_inode *child;
	struct cfs_dirent *d;

	if (!dir || !dir->dir || length == 0 || length > CFS_NAME_MAX)
		return 0;
	d = dir_find(dir->dir, name, length);
	if (d)
		dir_remove(dir->dir, d);
	child = table_find(ns, ino);
	if (child && is_dir(child))
		child->parent_ino = dir_ino;
	return dir_add(dir->dir, name, length, ino, mode, cookie, NULL);
}

static void replay_remove_entry(struct cfs_ns *ns, uint64_t dir_ino, const char *name,
				uint32_t length)
{
	struct cfs_inode *dir = table_find(ns, dir_ino);
	struct cfs_dirent *d;

	if (!dir || !dir->dir || length == 0 || length > CFS_NAME_MAX)
		return;
	d = dir_find(dir->dir, name, length);
	if (d)
		dir_remove(dir->dir, d);
}

int cfs_ns_apply_dirent_add(struct cfs_fs *fs, const struct cfs_jrec_dirent *rec)
{
	return replay_set_entry(ns_of(fs), rec->dir_ino, rec->name, rec->name_length, rec->ino,
				rec->mode, rec->cookie ? rec->cookie : 0);
}

int cfs_ns_apply_dirent_remove(struct cfs_fs *fs, const struct cfs_jrec_dirent *rec)
{
	replay_remove_entry(ns_of(fs), rec->dir_ino, rec->name, rec->name_length);
	return 0;
}

int cfs_ns_apply_rename(struct cfs_fs *fs, const struct cfs_jrec_rename *rec)
{
	struct cfs_ns *ns = ns_of(fs);
	int ret;

	if (rec->flags & CFS_JREC_RENAME_EXCHANGE) {
		ret = replay_set_entry(ns, rec->dst_dir, rec->dst_name, rec->dst_name_length,
				       rec->src_ino, rec->src_mode, rec->dst_cookie);
		if (!ret)
			ret = replay_set_entry(ns, rec->src_dir, rec->src_name,
					       rec->src_name_length, rec->dst_ino, rec->dst_mode,
					       rec->src_cookie);
		return ret;
	}
	replay_remove_entry(ns, rec->src_dir, rec->src_name, rec->src_name_length);
	return replay_set_entry(ns, rec->dst_dir, rec->dst_name, rec->dst_name_length, rec->src_ino,
				rec->src_mode, rec->dst_cookie);
}

int cfs_ns_apply_extent(struct cfs_fs *fs, uint16_t type, const struct cfs_jrec_extent *rec,
			const char **why)
{
	struct cfs_inode *inode = table_find(ns_of(fs), rec->ino);
	int ret;

	if (!inode || !inode->map)
		return 0;
	if (type == CFS_LOG_EXTENT_UNMAP) {
		int64_t unmapped =
			cfs_extent_unmap(inode->map, rec->file_unit, rec->count, NULL, NULL);

		cfs_extent_quiesce(inode->map);
		return unmapped < 0 ? (int)unmapped : 0;
	}
	/* Absolute: if the snapshot is newer than this record, this mapping
	 * wins now and later records restore the newer one. */
	ret = cfs_extent_remap_units(inode->map, rec->file_unit, rec->store_unit, rec->count);
	if (ret == -EFBIG || ret == -ERANGE) {
		*why = ret == -EFBIG ? "mapping beyond the largest file"
				     : "mapping to a unit beyond the data region";
		return -EUCLEAN;
	}
	return ret;
}

int cfs_ns_apply_written(struct cfs_fs *fs, const struct cfs_jrec_written *rec, const char **why)
{
	struct cfs_inode *inode = table_find(ns_of(fs), rec->ino);
	int ret;

	if (!inode || !inode->map)
		return 0;
	ret = cfs_extent_apply_ws(inode->map, rec->file_unit, rec->store_unit, rec->op,
				  rec->first_sector, rec->sector_count, rec->bits);
	if (ret == -EINVAL) {
		*why = "written-state record beyond its unit";
		return -EUCLEAN;
	}
	return ret;
}

int cfs_ns_apply_written_run(struct cfs_fs *fs, const struct cfs_jrec_extent *rec, const char **why)
{
	struct cfs_inode *inode = table_find(ns_of(fs), rec->ino);

	if (!written_runs(fs)) {
		*why = "written-run record on a store without the written_runs feature";
		return -EUCLEAN;
	}
	if (rec->count == 0 || rec->file_unit > fs->geom.max_units ||
	    rec->count > fs->geom.max_units - rec->file_unit) {
		*why = "written run beyond the largest file";
		return -EUCLEAN;
	}
	if (!inode || !inode->map)
		return 0;
	return cfs_extent_apply_written_run(inode->map, rec->file_unit, rec->store_unit,
					    rec->count);
}

int cfs_ns_apply_piece(struct cfs_fs *fs, const struct cfs_jrec_piece *rec, const char **why)
{
	struct cfs_inode *inode = table_find(ns_of(fs), rec->ino);
	struct cfs_extent_loc loc = {rec->store_unit, rec->offset_bytes, rec->bytes};
	struct cfs_extent_map *probe;
	int ret;

	if (!(fs->sb.incompat & CFS_FEAT_INCOMPAT_PIECES)) {
		*why = "piece record on a store without the pieces feature";
		return -EUCLEAN;
	}
	if (rec->file_unit >= fs->geom.max_units) {
		*why = "mapping beyond the largest file";
		return -EUCLEAN;
	}
	if (rec->store_unit >= fs->geom.store_units) {
		*why = "mapping to a unit beyond the data region";
		return -EUCLEAN;
	}
	if (rec->bytes < fs->sb.physical_sector_bytes) {
		*why = "piece record with a piece it cannot hold (size or place)";
		return -EUCLEAN;
	}
	if (inode && inode->map) {
		ret = cfs_extent_remap_piece(inode->map, rec->file_unit, &loc);
	} else {
		/* No file to map it (deleted later): the piece is checked all
		 * the same, as a record that can never be valid refuses. */
		ret = cfs_extent_map_create(&fs->geom, NULL, NULL, &probe);
		if (!ret)
			ret = cfs_extent_map_piece(probe, rec->file_unit, &loc);
		cfs_extent_map_destroy(probe);
	}
	if (ret == -EINVAL) {
		*why = "piece record with a piece it cannot hold (size or place)";
		return -EUCLEAN;
	}
	return ret;
}

int cfs_ns_apply_xattr(struct cfs_fs *fs, uint16_t type, const struct cfs_jrec_xattr *rec,
		       const char **why)
{
	struct cfs_inode *inode = table_find(ns_of(fs), rec->ino);
	struct cfs_xattr **link;

	if (rec->name_length == 0 || rec->name_length > CFS_XATTR_NAME_MAX) {
		*why = "xattr record with an invalid name length";
		return -EUCLEAN;
	}
	if (!inode)
		return 0;
	link = xattr_find(inode, rec->name, rec->name_length);
	if (type == CFS_LOG_XATTR_REMOVE) {
		if (link)
			xattr_drop(inode, link);
		return 0;
	}
	if (rec->value_length > CFS_XATTR_VALUE_MAX || rec->offset > rec->value_length ||
	    rec->chunk_length > rec->value_length - rec->offset) {
		*why = "xattr record piece outside its value";
		return -EUCLEAN;
	}
	if (rec->offset == 0) {
		int ret = xattr_put(inode, rec->name, rec->name_length, NULL, rec->value_length);

		if (ret)
			return ret;
		link = xattr_find(inode, rec->name, rec->name_length);
	}
	/* A later piece without its first: the transaction rules make that
	 * impossible; ignore rather than guess. */
	if (!link || (*link)->value_length != rec->value_length)
		return 0;
	if (rec->chunk_length)
		memcpy((char *)xattr_value(*link) + rec->offset, rec->chunk, rec->chunk_length);
	return 0;
}

/* ---- mount
 * --------------------------------------------------------------------------------------- */

struct reserve_ctx {
	struct cfs_fs *fs;
	uint64_t first;
	uint64_t count;
	int ret;
};

static int reserve_flush(struct reserve_ctx *c)
{
	int ret = 0;

	if (c->count)
		ret = cfs_pool_reserve(c->fs->pool, c->first, c->count);
	c->count = 0;
	return ret;
}

static int reserve_unit(void *arg, const struct cfs_extent_unit_view *v)
{
	struct reserve_ctx *c = arg;

	if (v->piece_bytes) {
		c->ret = reserve_flush(c);
		if (!c->ret)
			c->ret = cfs_pool_reserve_piece(c->fs->pool, v->store_unit,
							v->piece_offset_bytes, v->piece_bytes);
		if (c->ret == -EINVAL) /* the pool makes no such piece */
			c->ret = -EEXIST;
		return c->ret;
	}
	if (c->count && c->first + c->count == v->store_unit) {
		c->count += v->unit_count;
		return 0;
	}
	c->ret = reserve_flush(c);
	c->first = v->store_unit;
	c->count = v->unit_count;
	return c->ret;
}

/* Every inode of the table into a malloc'ed array (ns_lock held). */
static struct cfs_inode **table_list(struct cfs_ns *ns, uint64_t *count)
{
	struct cfs_inode **list = malloc((ns->inodes.count + 1) * sizeof(*list));
	uint64_t n = 0;

	if (!list)
		return NULL;
	for (struct cfs_inode *inode = table_next(ns, NULL); inode; inode = table_next(ns, inode))
		list[n++] = inode;
	*count = n;
	return list;
}

static int ino_cmp(const void *a, const void *b)
{
	const struct cfs_inode *x = *(struct cfs_inode *const *)a;
	const struct cfs_inode *y = *(struct cfs_inode *const *)b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Index of ino in list (sorted by ino_cmp; ino is in it). */
static uint64_t list_index(struct cfs_inode **list, uint64_t count, uint64_t ino)
{
	uint64_t lo = 0, hi = count;

	while (lo + 1 < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (list[mid]->ino <= ino)
			lo = mid;
		else
			hi = mid;
	}
	CFS_ASSERT(list[lo]->ino == ino);
	return lo;
}

int cfs_ns_mount_finish(struct cfs_fs *fs, const char **why)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode **list = NULL, *root;
	uint64_t count = 0, dangling = 0, orphans = 0;
	bool *named = NULL; /* by list index: some entry names it */
	struct cfs_txn txn;
	int ret = 0;

	pthread_rwlock_wrlock(&ns->lock);
	root = table_find(ns, CFS_ROOT_INO);
	if (root && !is_dir(root)) {
		*why = "the root inode is not a directory";
		ret = -EUCLEAN;
		goto out_unlock;
	}
	if (!root) {
		/* A fresh store: mkchunkfs writes an empty snapshot. */
		root = inode_new(fs, CFS_ROOT_INO, ns->next_generation++,
				 S_IFDIR |
					 (fs->opts.root_mode ? fs->opts.root_mode & 07777 : 0755));
		if (!root) {
			ret = -ENOMEM;
			goto out_unlock;
		}
		root->nlink = 2;
		root->uid = fs->opts.root_uid;
		root->gid = fs->opts.root_gid;
		root->parent_ino = CFS_ROOT_INO;
		atomic_store(&root->atime_ns, now_ns());
		atomic_store(&root->mtime_ns, atomic_load(&root->atime_ns));
		atomic_store(&root->ctime_ns, atomic_load(&root->atime_ns));
		table_insert(ns, root);
		cfs_txn_begin(&txn, fs->journal);
		txn_inode(&txn, CFS_LOG_INODE_CREATE, root);
		cfs_txn_end(&txn);
	}
	root->parent_ino = CFS_ROOT_INO;

	list = table_list(ns, &count);
	if (!list) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	qsort(list, count, sizeof(*list), ino_cmp);
	named = calloc(count ? count : 1, sizeof(*named));
	if (!named) {
		ret = -ENOMEM;
		goto out_free;
	}
	/* 1. Rebuild the allocator from the maps; a unit mapped twice is
	 *    corruption the mount must not paper over. */
	for (uint64_t i = 0; i < count; i++) {
		struct reserve_ctx c = {fs, 0, 0, 0};

		if (!list[i]->map)
			continue;
		ret = cfs_extent_for_each(list[i]->map, reserve_unit, &c);
		if (!ret)
			ret = reserve_flush(&c);
		if (ret == -EEXIST) {
			*why = "a data unit is mapped by two files (or twice by one, or holds "
			       "overlapping pieces)";
			ret = -EUCLEAN;
		} else if (ret == -ERANGE) {
			*why = "a file maps a unit beyond the data region";
			ret = -EUCLEAN;
		}
		if (ret)
			goto out_free;
	}
	/* 2. Entries naming inodes that do not exist (never expected: every
	 *    change is one transaction) are dropped, and the drop logged.
	 *    A directory's ".." is its entry's directory: the entries are the
	 *    truth, and an inode record replayed after the entry that moved
	 *    the directory must not leave a ".." that the next snapshot's
	 *    replay would set differently (found by tests/fuzz/fuzz_replay). */
	for (uint64_t i = 0; i < count; i++) {
		struct cfs_dir *dir = list[i]->dir;

		for (uint64_t k = 0; dir && k < dir->order_len; k++) {
			struct cfs_dirent *d = dir->order[k].dirent;
			struct cfs_inode *child = d ? table_find(ns, d->ino) : NULL;

			if (child && is_dir(child))
				child->parent_ino = list[i]->ino;
			if (child)
				named[list_index(list, count, child->ino)] = true;
			if (!d || child)
				continue;
			cfs_txn_begin(&txn, fs->journal);
			cfs_txn_dirent_remove(&txn, list[i]->ino, d->name, d->name_length);
			cfs_txn_end(&txn);
			dir_remove(dir, d);
			dangling++;
		}
	}
	if (dangling)
		cfs_fs_log(fs, "removed %llu directory entries naming missing inodes",
			   (unsigned long long)dangling);
	/* 3. Orphans: inodes without links left by a crash while they were
	 *    open (unlinked, or O_TMPFILE never linked). Read-only mounts keep them
	 * (inode_maybe_delete refuses). An inode with no links that an entry still names is not an
	 *    orphan but a wrong link count (a corrupt record): deleting it
	 *    would lose a reachable file and leave its entries dangling, so
	 *    it is kept for fsck.chunkfs to repair (found by fuzz_replay). */
	for (uint64_t i = 0; i < count; i++) {
		if (list[i]->nlink != 0 || list[i]->ino == CFS_ROOT_INO || fs->mounted_ro)
			continue;
		if (named[i]) {
			cfs_fs_log(fs,
				   "inode %llu has no links but is named: kept (run fsck.chunkfs)",
				   (unsigned long long)list[i]->ino);
			continue;
		}
		if (list[i]->dir && list[i]->dir->names.count) {
			/* A directory without links that still holds entries
			 * (a corrupt record, found by fuzz_replay): deleting it
			 * would orphan what it names. */
			cfs_fs_log(fs,
				   "directory inode %llu has no links but holds entries: kept "
				   "(run fsck.chunkfs)",
				   (unsigned long long)list[i]->ino);
			continue;
		}
		inode_maybe_delete(fs, list[i]);
		orphans++;
	}
	if (orphans)
		cfs_fs_log(fs, "freed %llu orphan inodes", (unsigned long long)orphans);
out_free:
	free(named);
	free(list);
out_unlock:
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

/* ---- dump
 * ------------------------------------------------------------------------------------------- */

/* One line per unit (a debugging and test format, not a scale one). */
static int dump_unit(void *arg, const struct cfs_extent_unit_view *v)
{
	FILE *f = arg;

	for (uint64_t i = 0; i < v->unit_count; i++) {
		fprintf(f, "  unit %llu -> %llu ", (unsigned long long)(v->file_unit + i),
			(unsigned long long)(v->store_unit + i));
		if (v->piece_bytes)
			fprintf(f, "piece %u+%u ", v->piece_offset_bytes, v->piece_bytes);
		if (v->state == CFS_EXTENT_WS_NONE) {
			fputs("none\n", f);
		} else if (v->state == CFS_EXTENT_WS_ALL) {
			fputs("all\n", f);
		} else {
			for (uint32_t w = 0; w < (v->sector_count + 63) / 64; w++)
				fprintf(f, "%016llx", (unsigned long long)atomic_load(&v->bits[w]));
			fputc('\n', f);
		}
	}
	return 0;
}

static int dirent_cmp(const void *a, const void *b)
{
	const struct cfs_dirent *x = *(struct cfs_dirent *const *)a;
	const struct cfs_dirent *y = *(struct cfs_dirent *const *)b;

	return strcmp(x->name, y->name);
}

static int xattr_cmp(const void *a, const void *b)
{
	const struct cfs_xattr *x = *(struct cfs_xattr *const *)a;
	const struct cfs_xattr *y = *(struct cfs_xattr *const *)b;

	return strcmp(x->data, y->data);
}

char *cfs_ns_dump(struct cfs_fs *fs)
{
	struct cfs_ns *ns = ns_of(fs);
	struct cfs_inode **list;
	uint64_t count = 0;
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);

	if (!f)
		return NULL;
	pthread_rwlock_rdlock(&ns->lock);
	list = table_list(ns, &count);
	if (!list)
		goto out_unlock;
	qsort(list, count, sizeof(*list), ino_cmp);
	for (uint64_t i = 0; i < count; i++) {
		struct cfs_inode *inode = list[i];

		pthread_mutex_lock(&inode->lock);
		fprintf(f,
			"inode %llu gen %llu mode %o nlink %u uid %u gid %u rdev %llu size %llu "
			"mtime %lld ctime %lld page %u parent %llu\n",
			(unsigned long long)inode->ino, (unsigned long long)inode->generation,
			inode->mode, inode->nlink, inode->uid, inode->gid,
			(unsigned long long)inode->rdev,
			(unsigned long long)atomic_load(&inode->size_bytes),
			(long long)atomic_load(&inode->mtime_ns),
			(long long)atomic_load(&inode->ctime_ns), inode->page_size_bytes,
			(unsigned long long)(is_dir(inode) ? inode->parent_ino : 0));
		if (inode->symlink_target)
			fprintf(f, "  target %s\n", inode->symlink_target);
		if (inode->xattr_count) {
			struct cfs_xattr **xs = malloc(inode->xattr_count * sizeof(*xs));
			uint32_t n = 0;

			for (struct cfs_xattr *x = inode->xattrs; xs && x; x = x->next)
				xs[n++] = x;
			if (xs)
				qsort(xs, n, sizeof(*xs), xattr_cmp);
			for (uint32_t k = 0; xs && k < n; k++) {
				fprintf(f, "  xattr %s length %u xxh3 %016llx\n", xs[k]->data,
					xs[k]->value_length,
					(unsigned long long)XXH3_64bits(xattr_value(xs[k]),
									xs[k]->value_length));
			}
			free(xs);
		}
		if (inode->map)
			cfs_extent_for_each(inode->map, dump_unit, f);
		if (inode->dir && inode->dir->names.count) {
			struct cfs_dirent **ds = malloc(inode->dir->names.count * sizeof(*ds));
			uint64_t n = 0;

			for (uint64_t k = 0; ds && k < inode->dir->order_len; k++)
				if (inode->dir->order[k].dirent)
					ds[n++] = inode->dir->order[k].dirent;
			if (ds)
				qsort(ds, n, sizeof(*ds), dirent_cmp);
			for (uint64_t k = 0; ds && k < n; k++)
				fprintf(f, "  entry %s -> %llu cookie %llu type %o\n", ds[k]->name,
					(unsigned long long)ds[k]->ino,
					(unsigned long long)ds[k]->cookie, ds[k]->mode);
			free(ds);
		}
		pthread_mutex_unlock(&inode->lock);
	}
	free(list);
out_unlock:
	pthread_rwlock_unlock(&ns->lock);
	fclose(f);
	return text;
}
