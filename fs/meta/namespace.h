/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * namespace.h — inodes, directories, symlinks, user xattrs, lookup/open
 * counts and orphans of a mounted chunkfs. All in memory; every mutation
 * appends its log records (fs/meta/journal.h) after changing the state, while
 * still holding the lock of what it changed. No FUSE and no data I/O here:
 * functions take inode numbers (FUSE node ids: root is CFS_ROOT_INO == 1 ==
 * FUSE_ROOT_ID) and return -errno; fs/fuse/ops.c converts to replies once.
 *
 * Locks (fs/DAEMON.md):
 *   ns_lock (rwlock, in struct cfs_ns): directory contents and the inode
 *     table. lookup, getattr, readdir, xattr reads take it shared; create,
 *     link, unlink, rename, forget of the last reference take it exclusive.
 *     The data path never takes it: it holds an inode pointer from open().
 *   inode->lock (mutex): attributes, map changes, xattrs, counts of links.
 *   Order: ns_lock, then inodes in ascending number, then the allocator,
 *     then the journal tail. Functions here take what they need and never
 *     return with a lock held.
 *
 * Permission checks are the kernel's (default_permissions); the namespace
 * enforces structure only (names, types, emptiness, cycles, link counts).
 *
 * Lifetime of an inode: it is deleted (INODE_DELETE logged, its units freed)
 * when nlink == 0 && nlookup == 0 && open_count == 0; the memory goes when the
 * last internal reference (table, open file, committer queue) is dropped.
 * Inodes with nlink == 0 found at mount (a crash while a file was open after
 * unlink, or an O_TMPFILE file never linked) are deleted then.
 *
 * Read-only: after a failed metadata write (cfs_fs_is_readonly()) or on a
 * read-only mount every mutation returns -EROFS.
 */
#ifndef CFS_NAMESPACE_H
#define CFS_NAMESPACE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fs/base/hash.h"
#include "fs/stats/chunkstat.h"
#include "fs/meta/extent.h"
#include "fs/meta/journal.h"
#include "iopath/iopath.h"

struct cfs_fs;
struct cfs_ns;
struct cfs_dir;	     /* private: a directory's hashed entries */
struct cfs_xattr;    /* private: one user xattr */
struct cfs_deferred; /* private: units freed while I/O was in flight */

/* ---- limits ------------------------------------------------------------- */

#define CFS_ROOT_INO 1ull	       /* == FUSE_ROOT_ID */
#define CFS_NAME_MAX 255u	       /* bytes per name (NAME_MAX) */
#define CFS_SYMLINK_MAX 4095u	       /* bytes of a symlink target (PATH_MAX - 1) */
#define CFS_LINK_MAX 65000u	       /* links per inode, subdirectories per dir */
#define CFS_XATTR_NAME_MAX 255u	       /* bytes per xattr name (XATTR_NAME_MAX) */
#define CFS_XATTR_VALUE_MAX 65536u     /* bytes per value (XATTR_SIZE_MAX, as ext4) */
#define CFS_XATTR_LIST_MAX 65536u      /* all names + NULs of one inode (XATTR_LIST_MAX) */
#define CFS_XATTR_TOTAL_MAX (1u << 20) /* all names + values of one inode */
#define CFS_READDIR_COOKIE_FIRST 3ull  /* 1 = ".", 2 = "..", entries from 3 */

struct cfs_held; /* fs/fuse/held.h */

/* A write-behind in flight (fs/fuse/data.c): answered, not yet on the store. */
#define CFS_BEHIND_N 8 /* slots per file */
struct cfs_behind {
	uint64_t start_bytes; /* its range, rounded out to whole sectors */
	uint64_t end_bytes;   /* 0: a free slot */
	uint64_t seq;	      /* inode->behind_seq when it was taken */
};

/* Placement (fs/POOLS.md): the store a file's new units go to (and, for a
 * file whose units are elsewhere, the move that brings them there), or the
 * store a directory's new files and subdirectories inherit. Persisted as
 * CFS_LOG_INODE_PLACE; the fields mean what struct cfs_jrec_place's do. */
struct cfs_place {
	uint32_t store; /* CFS_STORE_NONE: not placed */
	uint32_t from;	/* a move's source (a cancel goes back there) */
	uint32_t flags; /* CFS_JREC_PLACE_* */
	uint64_t rate_bytes;
};

/* ---- the inode ------------------------------------------------------------
 * Public so the data path reads what it needs without calls. Fields marked
 * [atomic] may be read without the lock (relaxed atomic loads); [lock] fields
 * are read and written under inode->lock; [const] never change after the
 * inode is published.
 */
struct cfs_inode {
	uint64_t ino;	      /* [const] inode number = FUSE node id */
	uint64_t generation;  /* [const] differs for every use of a number */
	pthread_mutex_t lock; /* attributes, map changes, xattrs */

	uint32_t mode;		     /* [lock] type bits [const] + permission bits */
	uint32_t nlink;		     /* [lock] */
	uint32_t uid;		     /* [lock] */
	uint32_t gid;		     /* [lock] */
	uint64_t rdev;		     /* [lock] devices: metadata only */
	_Atomic uint64_t size_bytes; /* [atomic] written under lock */
	_Atomic int64_t atime_ns;    /* [atomic] ns since the epoch */
	_Atomic int64_t mtime_ns;    /* [atomic] */
	_Atomic int64_t ctime_ns;    /* [atomic] */
	uint32_t page_size_bytes;    /* [lock] page size for statistics, 0 = unset;
				      * persisted */
	char *symlink_target;	     /* [const] symlinks only, NUL-terminated */
	struct cfs_xattr *xattrs;    /* [lock] user xattrs, a short list */
	uint32_t xattr_count;	     /* [lock] */
	uint32_t xattr_bytes;	     /* [lock] names + values */

	_Atomic uint64_t nlookup;		 /* [atomic] FUSE lookup count */
	_Atomic uint32_t open_count;		 /* [atomic] open file handles */
	_Atomic int write_error;		 /* [atomic] first -errno of a failed data
						  * write not yet reported by an fsync */
	uint32_t cached_opens;			 /* [lock] handles without FOPEN_DIRECT_IO:
						  * buffered, or O_DIRECT by the kernel's
						  * direct I/O path (ops.c, open_file()) */
	uint32_t uncached_opens;		 /* [lock] handles with FOPEN_DIRECT_IO */
	_Atomic bool uncached_mapped;		 /* [atomic] the page cache was filled
						  * through an FOPEN_DIRECT_IO handle (a
						  * shared mmap) since uncached_opens was
						  * last 0 (fs/fuse/ops.c, "page cache") */
	_Atomic bool cache_stale;		 /* [atomic] an FOPEN_DIRECT_IO write came
						  * since the last cached open: pages the
						  * kernel kept may be old */
	_Atomic uint32_t behind_writes;		 /* [atomic] write-behinds in flight
						  * (fs/fuse/data.c); changed under lock */
	_Atomic uint32_t behind_waiters;	 /* [atomic] requests parked behind them */
	uint64_t behind_seq;			 /* [lock] the last write-behind's number */
	struct cfs_behind behind[CFS_BEHIND_N];	 /* [lock] their slots */
	struct cfs_held *held;			 /* [lock] blocks held for small writes
						  * (fs/fuse/held.h): one allocation,
						  * freed with the inode if not before */
	_Atomic uint32_t held_blocks;		 /* [atomic] of them, not free */
	_Atomic uint32_t held_pending;		 /* [atomic] of them, with changes not
						  * yet on the store */
	_Atomic uint32_t direct_writes;		 /* [atomic] writes answered from the
						  * store (not write-behind) in flight */
	_Atomic uint32_t store_writes;		 /* [atomic] device writes of the file's
						  * data admitted and not done (fs/fuse/
						  * data.c): a piece grows only at 0 */
	_Atomic uint32_t piece_growers;		 /* [atomic] requests waiting to grow a
						  * piece: new device writes wait too */
	_Atomic(struct cfs_chunk_stats *) stats; /* [atomic] per-chunk statistics:
						  * allocated on first use
						  * (cfs_ns_inode_stats), freed with
						  * the inode; regular files only */
	struct cfs_extent_map *map;		 /* [const] regular files only, else NULL */
	struct cfs_dir *dir;			 /* [ns_lock] directories only, else NULL */
	uint64_t parent_ino;			 /* [ns_lock] directories: ".." */

	/* Private to namespace.c. */
	struct cfs_ns *ns;	       /* [const] the owning namespace */
	_Atomic uint64_t life;	       /* low 32 bits: references (table, open
					* handles, committer queue, pins); bits
					* 32-47 and 48-63: I/O references of
					* generation 0 and 1. The memory goes
					* when the whole word reaches 0. */
	_Atomic uint32_t io_gen;       /* the generation new I/O joins (0, 1) */
	_Atomic uint32_t flags;	       /* CFS_INODE_F_* in namespace.c */
	struct cfs_hlink hlink;	       /* [ns_lock] in the inode table (hash: ino) */
	struct cfs_inode *dirty_next;  /* committer queue link */
	struct cfs_deferred *deferred; /* [lock] units unmapped under I/O: freed
					* once the I/O before the unmap is done */
	uint64_t alloc_hint;	       /* [lock] next store unit to try */
	struct cfs_place place;	       /* [lock] fs/POOLS.md */

	/* The mover's guard (fs/fuse/move.h, fs/POOLS.md "Moving a chunk
	 * online"): a device write of the file (WRITE, a held block's flush,
	 * the zeros of truncate and punch) touching file bytes
	 * [guard_lo_bytes, guard_hi_bytes) waits; guard_hi_bytes 0: none.
	 * Writers count themselves in guard_writers[guard_gen] before they
	 * look at the guard, so the mover, after flipping the generation,
	 * waits only for the writes that may not have seen it. */
	_Atomic uint64_t guard_lo_bytes;   /* [atomic] set before hi */
	_Atomic uint64_t guard_hi_bytes;   /* [atomic] */
	_Atomic uint32_t guard_gen;	   /* [atomic] 0 or 1 */
	_Atomic uint32_t guard_writers[2]; /* [atomic] device writes in flight */
	/* A write found the guard in its way: the mover then asks for the
	 * commit its switched units wait for now, not a batch later. */
	_Atomic bool guard_refused; /* [atomic] */
};

/* Attributes as the FUSE layer needs them (it converts to struct stat). */
struct cfs_attr {
	uint64_t ino;
	uint64_t generation;
	uint32_t mode;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint64_t rdev;
	uint64_t size_bytes;
	uint64_t blocks_512;	/* allocated space in 512-byte blocks */
	uint32_t blksize_bytes; /* preferred I/O size: the alloc unit */
	int64_t atime_ns;
	int64_t mtime_ns;
	int64_t ctime_ns;
};

/* ---- lifecycle (used by mount.c; tests go through cfs_fs_open_*) ----------- */

int cfs_ns_create(struct cfs_fs *fs, struct cfs_ns **out);
void cfs_ns_destroy(struct cfs_ns *ns);

/* ---- lookups ---------------------------------------------------------------- */

/*
 * Look name up in directory parent. On success fills *attr and adds 1 to the
 * inode's nlookup (the FUSE lookup count; FORGET takes it back). Errors:
 * -ENOENT (no such parent or name), -ENOTDIR (parent not a directory),
 * -ENAMETOOLONG, -EINVAL ("" or a name with '/'). "." and ".." are resolved
 * (the kernel normally does that itself).
 */
int cfs_ns_lookup(struct cfs_fs *fs, uint64_t parent, const char *name, struct cfs_attr *attr);

/* FORGET: drop nlookup by count (never below 0: an assertion). May delete an
 * unlinked inode. For ino == CFS_ROOT_INO only the count changes. */
void cfs_ns_forget(struct cfs_fs *fs, uint64_t ino, uint64_t count);

/* getattr: -ENOENT if the inode does not exist. */
int cfs_ns_getattr(struct cfs_fs *fs, uint64_t ino, struct cfs_attr *attr);

/* ---- setattr ------------------------------------------------------------------ */

#define CFS_SET_MODE (1u << 0) /* permission bits only; type bits ignored */
#define CFS_SET_UID (1u << 1)
#define CFS_SET_GID (1u << 2)
#define CFS_SET_SIZE (1u << 3)
#define CFS_SET_ATIME (1u << 4) /* to atime_ns */
#define CFS_SET_MTIME (1u << 5) /* to mtime_ns */
#define CFS_SET_CTIME (1u << 6) /* to ctime_ns */
#define CFS_SET_ATIME_NOW (1u << 7)
#define CFS_SET_MTIME_NOW (1u << 8)
/* After the rest: clear suid, and sgid if group-executable (not directories).
 * Alone and with nothing to clear, it changes nothing (not even ctime). */
#define CFS_SET_KILL_SUIDGID (1u << 9)

struct cfs_setattr {
	uint32_t valid; /* CFS_SET_* */
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	uint64_t size_bytes;
	int64_t atime_ns;
	int64_t mtime_ns;
	int64_t ctime_ns;
};

/*
 * Byte ranges on the device that the caller must overwrite with zeros before
 * answering (truncate down and punch hole inside a sector: the bytes of a
 * written sector that are cut off must not come back when the file grows or
 * is read). Each lies within one logical sector of a written, mapped unit.
 * When count > 0 the inode's I/O reference was raised so the units stay put,
 * and its store_writes, so a piece is not copied before the zeros are in it:
 * the caller writes the zeros (read-modify-write), lowers store_writes and
 * calls cfs_ns_io_end(fs, inode, io_gen) with the inode and generation given
 * here.
 */
struct cfs_ns_zero {
	unsigned count;		       /* 0..2 */
	uint64_t file_offset_bytes[2]; /* where the device offsets were looked up */
	uint64_t device_offset_bytes[2];
	uint32_t length_bytes[2];
	struct cfs_inode *inode; /* set when count > 0 */
	unsigned io_gen;	 /* its I/O reference's, for cfs_ns_io_end */
};

/*
 * Change attributes; fills *attr with the result. ctime is set to now for
 * any change (unless CFS_SET_CTIME gives it). Size:
 *   down: whole units beyond the new end are unmapped (their space returns
 *         once the truncate is committed), the whole sectors between the new
 *         end and the end of its unit become unwritten (they read as zeros if
 *         the file grows again), and the cut part of the last written sector
 *         is reported in *zero (may be NULL: then nothing is reported; tests).
 *   up:   nothing is allocated (a sparse tail).
 *   only for regular files: -EISDIR for directories, -EINVAL otherwise;
 *   -EFBIG beyond the largest file.
 * Errors: -ENOENT, -EROFS, -ENOMEM.
 */
int cfs_ns_setattr(struct cfs_fs *fs, uint64_t ino, const struct cfs_setattr *set,
		   struct cfs_attr *attr, struct cfs_ns_zero *zero);

/* ---- creating names ------------------------------------------------------------ */

/*
 * Common to the creating calls: parent must be a directory (-ENOTDIR) that
 * exists (-ENOENT) and is not being removed (nlink 0: -ENOENT); the name must
 * be valid (-EINVAL for "", ".", "..", or a '/'; -ENAMETOOLONG above
 * CFS_NAME_MAX) and absent (-EEXIST); -EMLINK when the parent has
 * CFS_LINK_MAX subdirectories; -ENOSPC when the metadata region is full;
 * -EROFS. On success *attr describes the new inode and its nlookup is 1.
 * uid/gid are the caller's (the FUSE layer passes fuse_req_ctx; a setgid
 * parent directory gives its gid and, to directories, its S_ISGID bit).
 */

/* Regular file, fifo, socket, char or block device (metadata only). Type
 * from mode (S_IFREG if no type bits); -EINVAL for S_IFDIR / S_IFLNK. */
int cfs_ns_mknod(struct cfs_fs *fs, uint64_t parent, const char *name, uint32_t mode, uint64_t rdev,
		 uint32_t uid, uint32_t gid, struct cfs_attr *attr);

/* Create and open in one step (FUSE create): like mknod for S_IFREG, plus
 * what cfs_ns_open() does; *opened receives the open handle. */
int cfs_ns_create_open(struct cfs_fs *fs, uint64_t parent, const char *name, uint32_t mode,
		       uint32_t uid, uint32_t gid, struct cfs_attr *attr,
		       struct cfs_inode **opened);

/*
 * open(O_TMPFILE): a regular file without a name, created and opened in one
 * step. parent is checked as above; the directory does not change. The file
 * has nlink 0 from its birth: an orphan, deleted at its last release and
 * forget like an unlinked open file, and at the next mount after a crash.
 * linkable (no O_EXCL): cfs_ns_link() may give it its first name, which
 * makes it an ordinary file. *attr has nlink 0, as the kernel expects.
 */
int cfs_ns_tmpfile_open(struct cfs_fs *fs, uint64_t parent, uint32_t mode, uint32_t uid,
			uint32_t gid, bool linkable, struct cfs_attr *attr,
			struct cfs_inode **opened);

int cfs_ns_mkdir(struct cfs_fs *fs, uint64_t parent, const char *name, uint32_t mode, uint32_t uid,
		 uint32_t gid, struct cfs_attr *attr);

/* target: 1..CFS_SYMLINK_MAX bytes (-ENAMETOOLONG beyond, -ENOENT if empty). */
int cfs_ns_symlink(struct cfs_fs *fs, uint64_t parent, const char *name, const char *target,
		   uint32_t uid, uint32_t gid, struct cfs_attr *attr);

/* Copy the target (not NUL-terminated) into buf; returns its length, which
 * may exceed buf_size (then buf holds the first buf_size bytes). -EINVAL if
 * not a symlink, -ENOENT. */
ssize_t cfs_ns_readlink(struct cfs_fs *fs, uint64_t ino, char *buf, size_t buf_size);

/* Hard link: -EPERM for directories, -EMLINK at CFS_LINK_MAX links, -ENOENT
 * if ino has nlink 0 (unless it is a linkable file from cfs_ns_tmpfile_open()
 * never linked before). nlookup += 1 as for lookup. */
int cfs_ns_link(struct cfs_fs *fs, uint64_t ino, uint64_t new_parent, const char *new_name,
		struct cfs_attr *attr);

/* ---- removing names -------------------------------------------------------------- */

/* unlink: -EISDIR for a directory. The inode lives on while it is looked up
 * or open (an orphan with nlink 0). */
int cfs_ns_unlink(struct cfs_fs *fs, uint64_t parent, const char *name);
/* rmdir: -ENOTDIR, -ENOTEMPTY, -EBUSY for the root, -EINVAL for ".". */
int cfs_ns_rmdir(struct cfs_fs *fs, uint64_t parent, const char *name);

/*
 * rename(2) with flags 0, RENAME_NOREPLACE or RENAME_EXCHANGE (other flags:
 * -EINVAL; NOREPLACE|EXCHANGE: -EINVAL). Atomic: one log transaction.
 *   - no source: -ENOENT; NOREPLACE and target exists: -EEXIST; EXCHANGE and
 *     no target: -ENOENT;
 *   - dir over non-dir: -ENOTDIR; non-dir over dir: -EISDIR; dir over a
 *     non-empty dir: -ENOTEMPTY;
 *   - a directory moved into its own subtree: -EINVAL;
 *   - source and target the same inode (hard links): success, nothing done.
 * The replaced inode loses a link and may become an orphan.
 */
int cfs_ns_rename(struct cfs_fs *fs, uint64_t parent, const char *name, uint64_t new_parent,
		  const char *new_name, unsigned int flags);

/* ---- directories ------------------------------------------------------------------- */

/*
 * Called for each entry with the cookie to resume after it (FUSE d_off).
 * attr is non-NULL only in plus mode. Return 0 to go on, nonzero to stop
 * (reply buffer full): that entry is NOT consumed (and in plus mode its
 * nlookup is not raised). Runs with ns_lock held shared: it must not call
 * the namespace.
 */
typedef int (*cfs_ns_readdir_fn)(void *arg, const char *name, size_t name_length, uint64_t ino,
				 uint32_t mode, uint64_t next_cookie, const struct cfs_attr *attr);

/*
 * Entries of directory ino after cookie `offset` (0: from the start, which
 * yields "." (cookie 1) and ".." (cookie 2) first). Cookies are per-directory
 * monotonic ids of entries, so a listing survives concurrent create/unlink:
 * every entry that exists for the whole listing is returned exactly once;
 * entries added during it may or may not appear. plus: fill attr and raise
 * nlookup of each consumed entry except "." and "..". Returns the number of
 * entries passed to fn, -ENOTDIR, -ENOENT.
 */
int cfs_ns_readdir(struct cfs_fs *fs, uint64_t ino, uint64_t offset, bool plus,
		   cfs_ns_readdir_fn fn, void *arg);

/* ---- open files and the data path ------------------------------------------------------ */

/*
 * open: pins the inode (open_count) and returns it in *out for the file
 * handle (fi->fh): the data path then works on the pointer without the inode
 * table. -ENOENT; -EISDIR when opening a directory for writing is the
 * kernel's job. Any type may be opened (directories for opendir).
 */
int cfs_ns_open(struct cfs_fs *fs, uint64_t ino, struct cfs_inode **out);
/* release: unpins; may delete an unlinked inode (its units wait for the
 * last I/O reference). */
void cfs_ns_release(struct cfs_fs *fs, struct cfs_inode *inode);

/* I/O references (see fs/meta/extent.h): raise before looking up the map, drop
 * after the last mark_written of the request, before replying to the kernel.
 * An I/O reference also keeps the inode's memory (a zeroing write after a
 * path truncate holds no open handle). Lock-free, except that io_end may run
 * deferred work under the inode lock.
 *
 * Units unmapped while I/O is in flight are freed once every I/O reference
 * taken before the unmap is gone, not when the file is idle: a chunk that is
 * never idle (a busy database file, the mover's relocations) must still give
 * space back. References come in two generations (like SRCU): begin joins
 * inode->io_gen and returns it; io_end is told which. A deferred run is freed
 * once each generation has been seen empty after its unmap; while runs wait,
 * new I/O is steered to the empty generation so the other drains. */
unsigned cfs_ns_io_begin(struct cfs_inode *inode);
void cfs_ns_io_end(struct cfs_fs *fs, struct cfs_inode *inode, unsigned io_gen);

/*
 * Make sure [offset_bytes, +length_bytes) of an open regular file is mapped,
 * allocating missing units (contiguous after the previous unit where
 * possible; new sectors unwritten) and logging the mappings. Takes the inode
 * lock only when something is missing. When space is busy (freed, commit
 * pending) it forces a commit and retries without holding locks. Errors:
 * -ENOSPC (the units mapped so far stay mapped), -EAGAIN (no free unit yet,
 * but some are coming back: busy, or freed under I/O references older than
 * their unmap, which may be the caller's thread's own requests: try again
 * later without blocking them), -EFBIG, -EROFS, -ENOMEM, -EXDEV (a piece must
 * grow first: below).
 */
int cfs_ns_map_for_write(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t offset_bytes,
			 uint64_t length_bytes);
/* The same for a write of the kernel's write-back (its writeback cache, or
 * mmap'ed pages), which may also take the space the pool holds back for it
 * (cfs_pool_set_held_back): the kernel dirtied those pages without asking,
 * and only an fsync can report that they found no space. */
int cfs_ns_map_for_writeback(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t offset_bytes,
			     uint64_t length_bytes);

/*
 * Pieces (fs/meta/piece.h): cfs_ns_map_for_write gives the first unit of a
 * file smaller than half a unit a piece instead of a whole unit, and returns
 * -EXDEV when [offset_bytes, +length_bytes) needs more of a unit than its
 * piece holds: the piece must grow first (cfs_ns_grow_pieces), which moves
 * its bytes, so the data path first waits until no write of the file is in
 * flight (fs/fuse/data.c). [lock-free] True if the range needs that; with
 * whole (fallocate), any piece in the range must become a whole unit.
 */
bool cfs_ns_pieces_must_grow(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t offset_bytes,
			     uint64_t length_bytes, bool whole);

/* Copy `bytes` from device offset from_bytes to to_bytes, synchronously
 * (the data path's: the namespace does no data I/O). 0 or -errno; -EBUSY
 * when a write of the file is in flight after all (nothing is changed). */
typedef int (*cfs_ns_copy_fn)(void *arg, uint64_t from_bytes, uint64_t to_bytes, uint32_t bytes);

/*
 * Grow every piece of inode that [offset_bytes, +length_bytes) needs more
 * of (as cfs_ns_pieces_must_grow says): a new place (the next power of two
 * that holds the range and the file's size, or a whole unit past half a
 * unit, or always with whole) is allocated, copy moves the piece's bytes
 * there, and one transaction switches the mapping (EXTENT_MAP or
 * EXTENT_MAP_PIECE, then the written-state of the sectors it had); the old
 * piece is freed once that is durable and no I/O reference is left. A crash
 * before the commit keeps the old piece with its bytes. The caller holds an
 * I/O reference and guarantees no device write of the file starts meanwhile
 * (copy checks that none is in flight, under the inode lock). Takes the
 * inode lock; forces commits while space is busy. Only the kernel's
 * write-back (writeback) may take the space held back for it
 * (cfs_pool_set_held_back). 0, -EBUSY (from copy), -ENOSPC, -EROFS,
 * -ENOMEM, -EIO.
 */
int cfs_ns_grow_pieces(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t offset_bytes,
		       uint64_t length_bytes, bool whole, bool writeback, cfs_ns_copy_fn copy,
		       void *arg);

/*
 * A write of [offset_bytes, +length_bytes) completed (after
 * cfs_extent_mark_written): extend the size if the write ends beyond it and
 * set mtime/ctime. The size and times reach the log with the next commit
 * (the committer logs the inode after the flush that made the data durable),
 * so this costs no record per write. Lock-free unless the size grows.
 */
void cfs_ns_write_done(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t offset_bytes,
		       uint64_t length_bytes);

/*
 * fdatasync: true when what the writes to inode changed and no commit has
 * captured yet is at most its times (no size growth, no newly written
 * sectors), so once the writes are on the store, a flush of the store and
 * the records already in the log (cfs_journal_flush_async) make its data
 * durable and retrievable, as fdatasync(2) asks. Takes the inode lock.
 */
bool cfs_ns_datasync_flush_only(struct cfs_inode *inode);

/* The inode's statistics, allocated on first use (NULL on -ENOMEM or for
 * non-regular files). Stable until the inode is freed. */
struct cfs_chunk_stats *cfs_ns_inode_stats(struct cfs_inode *inode);

/*
 * For statistics readers (fs/fuse/xattr.c): pin inode ino (a reference, not an
 * open: opens stay as the application left them) and describe what the
 * rendering needs, read under the inode lock. The pin keeps view->inode and
 * its statistics valid until cfs_ns_unpin(). -ENOENT.
 */
struct cfs_ns_stat_view {
	struct cfs_inode *inode;
	uint32_t mode;
	uint32_t uid;
	uint32_t page_size_bytes; /* 0 = unset */
	uint32_t open_count;
	uint64_t size_bytes;
};
int cfs_ns_stat_pin(struct cfs_fs *fs, uint64_t ino, struct cfs_ns_stat_view *view);
/* Another pin of an inode the caller holds (keeps its memory, nothing more:
 * unlike an I/O reference it does not hold back units a truncate or punch
 * frees). Dropped by cfs_ns_unpin(). */
void cfs_ns_pin(struct cfs_inode *inode);
void cfs_ns_unpin(struct cfs_fs *fs, struct cfs_inode *inode);

/* Set the page size used for page statistics (0 = unset; else a power of
 * two in [512, 1 MiB]: -EINVAL). Persisted. */
int cfs_ns_set_page_size(struct cfs_fs *fs, uint64_t ino, uint32_t page_size_bytes);

/*
 * fallocate(2):
 *   0 / FALLOC_FL_KEEP_SIZE: map every hole in the range (sectors unwritten:
 *     they read as zeros), then extend the size unless KEEP_SIZE;
 *   FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: unmap the whole units inside
 *     the range (their space is freed, and discarded on the device, once the
 *     punch is committed: discarding earlier would destroy data a crash
 *     brings back), mark the whole sectors of partial units unwritten, and
 *     report partial sectors in *zero (see struct cfs_ns_zero);
 *   FALLOC_FL_ZERO_RANGE [| FALLOC_FL_KEEP_SIZE]: map every hole in the range
 *     as for 0, mark its whole sectors unwritten (no data I/O: they read as
 *     zeros), report the cut sectors at its ends in *zero, and extend the
 *     size unless KEEP_SIZE;
 *   anything else: -EOPNOTSUPP. Regular files only (-ENODEV otherwise, as
 *   the kernel does for non-files; -EISDIR for directories).
 * Errors: -ENOSPC (units mapped so far stay mapped), -EAGAIN (as for
 * cfs_ns_map_for_write), -EFBIG, -EINVAL (length 0), -EROFS.
 */
int cfs_ns_fallocate(struct cfs_fs *fs, uint64_t ino, int mode, uint64_t offset_bytes,
		     uint64_t length_bytes, struct cfs_ns_zero *zero);

/* lseek SEEK_DATA / SEEK_HOLE (whence), see fs/meta/extent.h for what is data:
 * mapped and written. Returns the offset, -ENXIO, -EINVAL for other whence. */
int64_t cfs_ns_seek(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t offset_bytes, int whence);

/* ---- user xattrs -------------------------------------------------------------------------
 * Only the "user." namespace is stored (other prefixes: set/remove
 * -EOPNOTSUPP, get -ENODATA: the kernel asks for security.capability before
 * writes and must get ENODATA). Names <= CFS_XATTR_NAME_MAX (-ERANGE beyond,
 * as the kernel), values <= CFS_XATTR_VALUE_MAX (-E2BIG), per-inode totals
 * CFS_XATTR_LIST_MAX / CFS_XATTR_TOTAL_MAX (-ENOSPC). "user." xattrs on
 * symlinks and devices: -EPERM, as Linux.
 */
#define CFS_XATTR_CREATE 0x1  /* XATTR_CREATE: -EEXIST if present */
#define CFS_XATTR_REPLACE 0x2 /* XATTR_REPLACE: -ENODATA if absent */

int cfs_ns_setxattr(struct cfs_fs *fs, uint64_t ino, const char *name, const void *value,
		    size_t size, int flags);
/* Returns the value length; copies the value into buf only if buf_size >=
 * that length (the caller answers size probes and ERANGE). -ENODATA. */
ssize_t cfs_ns_getxattr(struct cfs_fs *fs, uint64_t ino, const char *name, void *buf,
			size_t buf_size);
/* Returns the length of the name list ("user.a\0user.b\0"); copies it only
 * if buf_size >= that length. */
ssize_t cfs_ns_listxattr(struct cfs_fs *fs, uint64_t ino, char *buf, size_t buf_size);
int cfs_ns_removexattr(struct cfs_fs *fs, uint64_t ino, const char *name);

/* ---- placement (fs/POOLS.md) ---------------------------------------------------------------- */

/* fn for every mapped unit of regular file ino, in file order, under its
 * lock (fs/meta/extent.h cfs_extent_for_each). fn's nonzero return stops
 * the walk and is returned; -ENOENT, -EINVAL (not a regular file). */
int cfs_ns_for_each_unit(struct cfs_fs *fs, uint64_t ino, cfs_extent_unit_fn fn, void *arg);

/* The placement of ino (*place; store CFS_STORE_NONE when not placed).
 * -ENOENT. */
int cfs_ns_place_get(struct cfs_fs *fs, uint64_t ino, struct cfs_place *place);
/* Set the placement of a regular file or directory and log it (the root's
 * is the pool's default store). -ENOENT, -EINVAL (another type), -EROFS,
 * -ENOSPC (metadata full). What a file's new placement means for its units
 * (a move) is move.c's. */
int cfs_ns_place_set(struct cfs_fs *fs, uint64_t ino, const struct cfs_place *place);
/* Regular files with units or pieces in pool units [unit_base,
 * +unit_count) (a store being removed): their inode numbers (malloc'ed, the
 * caller frees). 0 or -ENOMEM. */
int cfs_ns_files_on(struct cfs_fs *fs, uint64_t unit_base, uint64_t unit_count, uint64_t **inos_out,
		    unsigned *count);
/* Files and directories placed on `store` with no move in progress (their
 * placement is dropped when the store is removed). 0 or -ENOMEM. */
int cfs_ns_places_on(struct cfs_fs *fs, uint32_t store, uint64_t **inos_out, unsigned *count);
/* The store a new unit of inode goes to now: its placement if that store is
 * active, else the store of its neighbouring or last unit, else the pool's
 * default. [inode lock] */
uint32_t cfs_ns_store_for_units(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t file_unit);

/* ---- moves (fs/fuse/move.h, fs/POOLS.md) ---------------------------------------------------- */

/* A run of reserved store units (allocated, in no map). */
struct cfs_unit_run {
	uint64_t first_unit;
	uint64_t count;
};

/*
 * Allocate `units` units on store `store` for a move, contiguous where the
 * allocator can (forcing commits while space is busy). The units are in no
 * map: a crash frees them (mount rebuilds the allocator from the maps).
 * Not the space held back for the kernel's write-back (cfs_pool_has_room).
 * *runs (malloc'ed, the caller frees) and *run_count on success; -ENOSPC
 * (nothing kept), -ENOMEM, -EROFS.
 */
int cfs_ns_move_reserve(struct cfs_fs *fs, uint32_t store, uint64_t units,
			struct cfs_unit_run **runs, unsigned *run_count);
/* Give reserved units back (never logged, free at once). */
void cfs_ns_move_unreserve(struct cfs_fs *fs, uint64_t first_unit, uint64_t count);

/*
 * A place on store `store` for a moved piece of `bytes` (a piece of at least
 * that size: the pool's smallest piece may be larger), in no map, as
 * cfs_ns_move_reserve's units (forcing commits while space is busy). 0,
 * -ENOSPC, -EINVAL (the pool makes no such piece), -EROFS.
 */
int cfs_ns_move_reserve_piece(struct cfs_fs *fs, uint32_t store, uint32_t bytes,
			      struct cfs_extent_loc *to);
/* Give a reserved piece back (never logged, free at once). */
void cfs_ns_move_unreserve_piece(struct cfs_fs *fs, const struct cfs_extent_loc *loc);

/*
 * The switch of one moved file unit: file_unit of inode, mapped to *from (a
 * whole unit or a piece), maps *to (reserved above, as large or larger) from
 * now on with the same written state (cfs_extent_relocate), logged in one
 * transaction (EXTENT_MAP or EXTENT_MAP_PIECE of *to and, when something is
 * written, EXTENT_WRITTEN SET of its state); *from is freed as unmapped
 * places are (deferred while I/O references exist, busy until *seq is
 * durable). The caller copied the written sectors and kept writes away (the
 * guard). 0, -ESTALE (file_unit no longer maps exactly *from: nothing
 * changed, *to is still the caller's), -EROFS, -ENOMEM.
 */
int cfs_ns_move_switch(struct cfs_fs *fs, struct cfs_inode *inode, uint64_t file_unit,
		       const struct cfs_extent_loc *from, const struct cfs_extent_loc *to,
		       uint64_t *seq);

/* Regular files with a move to finish (placement with `from` set), for
 * mount: *inos malloc'ed (the caller frees), *count of them. 0, -ENOMEM. */
int cfs_ns_moves_pending(struct cfs_fs *fs, uint64_t **inos, unsigned *count);

/* ---- statfs ------------------------------------------------------------------------------- */

struct cfs_ns_statfs {
	uint64_t block_bytes;  /* f_bsize / f_frsize: the alloc unit */
	uint64_t blocks;       /* data units */
	uint64_t blocks_free;  /* free + busy (busy ones return at the next commit) */
	uint64_t blocks_avail; /* less what is held back (cfs_pool_set_held_back); none for root */
	uint64_t files;	       /* inode limit */
	uint64_t files_free;
	uint32_t name_max; /* CFS_NAME_MAX */
};
void cfs_ns_statfs(struct cfs_fs *fs, struct cfs_ns_statfs *st);

/* ---- for the committer, replay and tests (mount.c, journal.c) -------------------------------- */

/* Committer, before it cuts the log tail: for every inode queued since the
 * last call, log its dirty written-state (CFS_LOG_EXTENT_WRITTEN, OR) and
 * its attributes if a write changed them. Runs quiesce work. 0 or -errno. */
int cfs_ns_commit_capture(struct cfs_fs *fs);

/* Snapshot: emit records describing the whole namespace into the snapshot
 * builder (fs/meta/journal.h) under ns_lock shared and each inode's lock. */
struct cfs_snap_builder;
int cfs_ns_snapshot(struct cfs_fs *fs, struct cfs_snap_builder *sb);

/* Mount: after replay, rebuild the allocator from the maps (-EUCLEAN: a unit
 * mapped twice or outside the store, with *why), delete orphans, create the
 * root if missing. */
int cfs_ns_mount_finish(struct cfs_fs *fs, const char **why);

/* A canonical, sorted text dump of the whole namespace (inodes with
 * attributes except atime, entries, symlinks, xattrs, mappings, written
 * state) for tests comparing two mounts. Caller frees. NULL on -ENOMEM. */
char *cfs_ns_dump(struct cfs_fs *fs);

/* Counts for tests. */
uint64_t cfs_ns_inode_count(struct cfs_fs *fs);

/*
 * Replay (journal.c, at mount; single-threaded): apply one decoded record to
 * the in-memory state without logging it. Records carry absolute state and
 * replay is tolerant: a record about an object that does not exist (deleted
 * later in the log, or already gone in a newer snapshot) is skipped, a
 * mapping that conflicts with the current one replaces it. 0, -ENOMEM, or
 * -EUCLEAN for a record that can never be valid (with *why).
 */
int cfs_ns_apply_fs_info(struct cfs_fs *fs, const struct cfs_jrec_fs_info *rec);
int cfs_ns_apply_inode(struct cfs_fs *fs, const struct cfs_jrec_inode *rec, const char **why);
int cfs_ns_apply_inode_delete(struct cfs_fs *fs, uint64_t ino);
int cfs_ns_apply_dirent_add(struct cfs_fs *fs, const struct cfs_jrec_dirent *rec);
int cfs_ns_apply_dirent_remove(struct cfs_fs *fs, const struct cfs_jrec_dirent *rec);
int cfs_ns_apply_rename(struct cfs_fs *fs, const struct cfs_jrec_rename *rec);
int cfs_ns_apply_extent(struct cfs_fs *fs, uint16_t type, const struct cfs_jrec_extent *rec,
			const char **why);
int cfs_ns_apply_written(struct cfs_fs *fs, const struct cfs_jrec_written *rec, const char **why);
int cfs_ns_apply_written_run(struct cfs_fs *fs, const struct cfs_jrec_extent *rec,
			     const char **why);
int cfs_ns_apply_piece(struct cfs_fs *fs, const struct cfs_jrec_piece *rec, const char **why);
int cfs_ns_apply_xattr(struct cfs_fs *fs, uint16_t type, const struct cfs_jrec_xattr *rec,
		       const char **why);
int cfs_ns_apply_place(struct cfs_fs *fs, const struct cfs_jrec_place *rec, const char **why);

#endif /* CFS_NAMESPACE_H */
