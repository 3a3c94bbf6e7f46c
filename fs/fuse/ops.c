/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ops.c — the fuse_lowlevel_ops table: thin cfs_ll_* callbacks that turn
 * FUSE requests into calls of the namespace (fs/meta/namespace.h), the data path
 * (fs/fuse/data.h) and the journal (fsync), and turn their -errno into a FUSE
 * reply, once, here (through cfs_reply_err, fs/fuse/daemon.h).
 *
 * Policy lives elsewhere; what is decided here is only what FUSE itself
 * asks for:
 *   - init: capabilities (asynchronous reads and direct I/O, atomic O_TRUNC,
 *     symlink caching; no writeback cache unless -o writeback_cache:
 *     buffered writes are written through, so a full store fails the
 *     write() itself), 1 MiB requests,
 *     max_background raised so the database's asynchronous I/O keeps its
 *     queue depth, nanosecond timestamps.
 *   - Locks: .getlk/.setlk/.flock are deliberately unset, so the kernel
 *     handles POSIX and flock locks locally. Every process that can reach
 *     the files goes through this one mount, so local locks are exact.
 *   - Cache lifetimes: long (daemon.h explains why).
 *   - The page cache: kept across opens (keep_cache) and never dropped on an
 *     attribute change (no AUTO_INVAL_DATA); O_DIRECT opens bypass it
 *     (FOPEN_DIRECT_IO) unless the file has cached opens. See open_file().
 *   - fsync is answered from the committer thread when the commit is
 *     durable: no loop thread waits. fdatasync of a file whose writes
 *     changed only its times: a flush of the store, no commit of its own.
 *   - RAM mounts: after an operation that may free data (unlink, rename
 *     over a file, truncate, punch, the last close or forget of an unlinked
 *     file) the committer is woken, so the memory goes back to the system
 *     now rather than at its next timer tick (ram_give_back).
 *   - xattrs: security.capability (asked before a buffered write unless
 *     the kernel knows the file has no suid/sgid: fs/fuse/proto_ext.h) gets
 *     ENODATA without touching the namespace; security.*, system.*, trusted.*:
 *     ENODATA on get, EOPNOTSUPP on set; user.chunkfs.* are the statistics
 *     (fs/fuse/xattr.c), listed before the stored user.* names. getxattr/listxattr
 *     never answer ENOSYS: the kernel would stop asking for the whole mount.
 *   - Statistics charged here (fs/stats/chunkstat.h): opens, fsyncs (answered
 *     from the committer: the latency includes the commit), punch-hole
 *     discards. READ and WRITE are fs/fuse/data.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "fs/stats/chunkstat.h"
#include "fs/fuse/daemon.h"
#include "fs/fuse/data.h"
#include "fs/meta/fs.h"
#include "fs/meta/journal.h"
#include "fs/meta/namespace.h"
#include "fs/fuse/proto_ext.h"
#include "fs/fuse/tmpfile.h"
#include "fs/fuse/xattr.h"

#define FS() (cfs_daemon.fs)

/* fi->fh: the open inode, with CFS_FILE_* flags in the low bits (inodes are
 * at least 8-byte aligned). */
#define FH_FLAGS_MASK 7ull

static inline uint64_t fh_make(struct cfs_inode *inode, unsigned flags)
{
	return (uint64_t)(uintptr_t)inode | flags;
}

static inline struct cfs_inode *fh_inode(const struct fuse_file_info *fi)
{
	return (struct cfs_inode *)(uintptr_t)(fi->fh & ~FH_FLAGS_MASK);
}

static inline unsigned fh_flags(const struct fuse_file_info *fi)
{
	return (unsigned)(fi->fh & FH_FLAGS_MASK);
}

_Static_assert((CFS_FILE_DIRECT | CFS_FILE_UNCACHED) <= FH_FLAGS_MASK,
	       "file flags live in the low bits of fh");

/* ---- replies (cfs_reply_err and cfs_reply_attr are daemon.c's) ------------ */

static void entry_from_attr(const struct cfs_attr *a, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = a->ino;
	e->generation = a->generation;
	cfs_attr_to_stat(a, &e->attr);
	e->attr_timeout = CFS_ATTR_TIMEOUT_S;
	e->entry_timeout = CFS_ENTRY_TIMEOUT_S;
}

static void reply_entry(fuse_req_t req, int ret, const struct cfs_attr *attr)
{
	struct fuse_entry_param e;

	if (ret) {
		cfs_reply_err(req, ret);
		return;
	}
	entry_from_attr(attr, &e);
	/* If the kernel dropped the request (interrupted), the lookup count
	 * the namespace just raised would leak: give it back. */
	if (fuse_reply_entry(req, &e) == -ENOENT)
		cfs_ns_forget(FS(), attr->ino, 1);
}

/*
 * Units freed by a truncate, punch or delete stay busy until the committer
 * releases them, and only then does the RAM backend discard their pages
 * (MADV_DONTNEED). On a store mount that wait is what keeps a crash from
 * handing a freed unit's new bytes back to its old file; on a RAM mount
 * nothing survives a crash, so the commit costs only a wakeup: ask for it at
 * once, and a deleted temp table's memory is back within milliseconds.
 * Metadata operations only, never the read/write path.
 */
static void ram_give_back(void)
{
	if (cfs_daemon.ram)
		cfs_journal_kick(FS());
}

/* ---- lifecycle ---------------------------------------------------------------- */

static void cfs_ll_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* What we want on top of libfuse's defaults, where the kernel can. */
	conn->want |= conn->capable &
		      (FUSE_CAP_ASYNC_READ | FUSE_CAP_ASYNC_DIO | FUSE_CAP_ATOMIC_O_TRUNC |
		       FUSE_CAP_CACHE_SYMLINKS | FUSE_CAP_PARALLEL_DIROPS);
	/* Write-through page cache: every buffered write reaches us (and is
	 * answered early: data.c, "write-behind"), so O_DIRECT opens of the
	 * same file see it and a full store fails the write() itself. */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/* Unless asked for (-o writeback_cache): the kernel then gathers
	 * writes in dirty pages and owns size and times, so an extending write
	 * costs no attribute refresh (lseek(SEEK_END) after a write-through
	 * write always asks: GETATTR, then GETXATTR(security.capability)
	 * because the refresh clears S_NOSEC), at the price of ENOSPC showing
	 * at writeback (fsync) instead of in write(). */
	if (cfs_daemon.writeback_cache)
		conn->want |= conn->capable & FUSE_CAP_WRITEBACK_CACHE;
	/* Every change to a file goes through this mount, and open_file()
	 * keeps cached pages coherent with O_DIRECT writes: dropping a file's
	 * pages whenever its mtime moved (after every write) only made the
	 * next buffered reads go to the store (PostgreSQL: bench/README.md). */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	/* Not the first version (we would have to guess CAP_FSETID): the
	 * second, which libfuse 3.14 does not know, is added to the INIT reply
	 * by fs/fuse/proto_ext.c. */
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	/* Locks are the kernel's, locally (see the top of this file). */
	conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
	conn->want &= ~FUSE_CAP_EXPORT_SUPPORT;

	/* 1 MiB requests; libfuse 3.14 sizes its receive buffer from
	 * max_write (+ a page for the header), and sends max_pages. */
	conn->max_write = CFS_MAX_WRITE_BYTES;
	conn->max_readahead = CFS_MAX_WRITE_BYTES;
	conn->max_background = CFS_MAX_BACKGROUND;
	conn->congestion_threshold = CFS_CONGESTION_THRESHOLD;
	conn->time_gran = 1;

	/* The counting period of every chunk and of the totals starts now. */
	{
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		cfs_cs_mount_start((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
	}
}

/* ---- lookups and attributes ------------------------------------------------------ */

static void cfs_ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct cfs_attr attr;
	int ret = cfs_ns_lookup(FS(), parent, name, &attr);

	if (ret == -ENOENT) {
		/* A negative entry, cached as long as a positive one: every
		 * create goes through this mount and invalidates it. */
		struct fuse_entry_param e;

		memset(&e, 0, sizeof(e));
		e.entry_timeout = CFS_ENTRY_TIMEOUT_S;
		fuse_reply_entry(req, &e);
		return;
	}
	reply_entry(req, ret, &attr);
}

static void cfs_ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	cfs_ns_forget(FS(), ino, nlookup);
	ram_give_back(); /* the kernel's last reference to an unlinked file */
	fuse_reply_none(req);
}

static void cfs_ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		cfs_ns_forget(FS(), forgets[i].ino, forgets[i].nlookup);
	ram_give_back();
	fuse_reply_none(req);
}

static void cfs_ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfs_attr attr;
	int ret = cfs_ns_getattr(FS(), ino, &attr);

	(void)fi;
	if (ret)
		cfs_reply_err(req, ret);
	else
		cfs_reply_attr(req, &attr);
}

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

struct setattr_args {
	fuse_ino_t ino;
	int to_set;
	struct stat st;
};
_Static_assert(sizeof(struct setattr_args) <= CFS_DATA_THEN_ARGS_MAX,
	       "a parked setattr keeps its arguments in the context");

static void setattr_go(fuse_req_t req, struct cfs_inode *inode, const void *args)
{
	const struct setattr_args *a = args;
	const struct stat *st = &a->st;
	int to_set = a->to_set;
	fuse_ino_t ino = a->ino;
	struct cfs_setattr set = {0};
	struct cfs_ns_zero zero = {0};
	struct cfs_attr attr;
	int ret;

	if (to_set & FUSE_SET_ATTR_MODE) {
		set.valid |= CFS_SET_MODE;
		set.mode = st->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		set.valid |= CFS_SET_UID;
		set.uid = st->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		set.valid |= CFS_SET_GID;
		set.gid = st->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (st->st_size < 0) {
			cfs_reply_err(req, -EINVAL);
			return;
		}
		set.valid |= CFS_SET_SIZE;
		set.size_bytes = (uint64_t)st->st_size;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		set.valid |= CFS_SET_ATIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		set.valid |= CFS_SET_ATIME;
		set.atime_ns = ts_ns(&st->st_atim);
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		set.valid |= CFS_SET_MTIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		set.valid |= CFS_SET_MTIME;
		set.mtime_ns = ts_ns(&st->st_mtim);
	}
	if (to_set & FUSE_SET_ATTR_CTIME) {
		set.valid |= CFS_SET_CTIME;
		set.ctime_ns = ts_ns(&st->st_ctim);
	}
	/* FATTR_KILL_SUIDGID (chown; truncate without CAP_FSETID) arrives as
	 * this bit: fs/fuse/proto_ext.h. */
	if (to_set & FUSE_SET_ATTR_KILL_SUID)
		set.valid |= CFS_SET_KILL_SUIDGID;
	/* A cut: the held blocks' bytes are on the store (the caller went
	 * through cfs_data_after_writes) and would be old after it. Growing
	 * changes no byte they hold (SQLite grows its files by ftruncate). */
	if ((set.valid & CFS_SET_SIZE) && inode && set.size_bytes < atomic_load(&inode->size_bytes))
		cfs_data_drop_held(inode);
	ret = cfs_ns_setattr(FS(), ino, &set, &attr, &zero);
	if (ret) {
		cfs_reply_err(req, ret);
		return;
	}
	if (set.valid & CFS_SET_SIZE)
		ram_give_back();
	/* A truncate inside a written sector: zero the cut bytes on the
	 * device before answering (they must not come back if the file grows). */
	cfs_data_zero(req, &zero, &attr);
}

static void cfs_ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *st, int to_set,
			   struct fuse_file_info *fi)
{
	struct setattr_args a = {.ino = ino, .to_set = to_set, .st = *st};
	struct cfs_ns_stat_view view;

	(void)fi;
	/* A size change reads and changes the written-state, which a
	 * write-behind sets when it reaches the store: after them. (By
	 * number: truncate(2) comes without a handle.) */
	if (!(to_set & FUSE_SET_ATTR_SIZE) || cfs_ns_stat_pin(FS(), ino, &view)) {
		setattr_go(req, NULL, &a);
		return;
	}
	cfs_data_after_writes(req, view.inode, setattr_go, &a, sizeof(a));
	cfs_ns_unpin(FS(), view.inode);
}

static void cfs_ll_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char target[CFS_SYMLINK_MAX + 1];
	ssize_t n = cfs_ns_readlink(FS(), ino, target, sizeof(target) - 1);

	if (n < 0) {
		cfs_reply_err(req, (int)n);
		return;
	}
	if ((size_t)n > sizeof(target) - 1)
		n = sizeof(target) - 1;
	target[n] = '\0';
	fuse_reply_readlink(req, target);
}

/* ---- creating and removing names ----------------------------------------------------- */

static void cfs_ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			 dev_t rdev)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct cfs_attr attr;
	int ret = cfs_ns_mknod(FS(), parent, name, mode, rdev, ctx->uid, ctx->gid, &attr);

	reply_entry(req, ret, &attr);
}

static void cfs_ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct cfs_attr attr;
	int ret = cfs_ns_mkdir(FS(), parent, name, mode, ctx->uid, ctx->gid, &attr);

	reply_entry(req, ret, &attr);
}

static void cfs_ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct cfs_attr attr;
	int ret = cfs_ns_symlink(FS(), parent, name, link, ctx->uid, ctx->gid, &attr);

	reply_entry(req, ret, &attr);
}

static void cfs_ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct cfs_attr attr;
	int ret = cfs_ns_link(FS(), ino, newparent, newname, &attr);

	reply_entry(req, ret, &attr);
}

static void cfs_ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	int ret = cfs_ns_unlink(FS(), parent, name);

	if (!ret)
		ram_give_back();
	cfs_reply_err(req, ret);
}

static void cfs_ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	cfs_reply_err(req, cfs_ns_rmdir(FS(), parent, name));
}

static void cfs_ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
			  const char *newname, unsigned int flags)
{
	int ret = cfs_ns_rename(FS(), parent, name, newparent, newname, flags);

	if (!ret)
		ram_give_back(); /* a file renamed over may have gone */
	cfs_reply_err(req, ret);
}

/* ---- open files ------------------------------------------------------------------------ */

/*
 * The page cache. Buffered opens read through the kernel's page cache and
 * write through it (no write-back cache: every write reaches us); a
 * database's own buffer pool misses are served from it (PostgreSQL reads
 * 8 KiB blocks and relies on it). Pages are kept across opens (keep_cache)
 * and not dropped when the mtime moves (no AUTO_INVAL_DATA), so they must
 * never be older than the store. Only one thing writes around them: an
 * FOPEN_DIRECT_IO handle. So, per file, under the inode lock:
 *   - O_DIRECT open, no cached opens: FOPEN_DIRECT_IO (the fast path: the
 *     request goes straight to us, concurrent writes in parallel: the reply
 *     gains FOPEN_PARALLEL_DIRECT_WRITES in fs/fuse/proto_ext.c).
 *   - O_DIRECT open while cached opens exist: no FOPEN_DIRECT_IO; the
 *     kernel's own direct I/O path drops the range before the write and,
 *     for a synchronous one, after it, as for any filesystem (writes to the
 *     file serialize on the inode lock while submitting; the mix is rare: a
 *     backup or a cat of a chunk the database writes with O_DIRECT). After
 *     an asynchronous one it does not, and a buffered read during the write
 *     re-caches old bytes: we drop the range ourselves once the write is on
 *     the store, before answering it (write_flags(), fs/fuse/dio_inval.h).
 *   - Buffered open while FOPEN_DIRECT_IO handles exist: FOPEN_DIRECT_IO too
 *     (uncached, coherent by construction).
 *   - Buffered open otherwise: cached; keep the pages unless an
 *     FOPEN_DIRECT_IO write came since they were read (cache_stale).
 * Cached and uncached handles of one file never coexist.
 *
 * Shared mmap of an FOPEN_DIRECT_IO handle (FUSE_DIRECT_IO_ALLOW_MMAP,
 * fs/fuse/proto_ext.c): the kernel then caches the file's pages for the
 * mapping, writes dirty ones back before an FOPEN_DIRECT_IO read or write of
 * their range and drops the range before the write, not after it, so a
 * mapped read during the write re-caches old bytes. The daemon sees the
 * mapping as a READ without a lock owner on such a handle (the kernel's
 * direct reads carry the caller's, FUSE_READ_LOCKOWNER; its page cache fills
 * none): from then until the file's last uncached handle goes
 * (uncached_mapped), its FOPEN_DIRECT_IO writes drop their range once on the
 * store, before the reply, as above (fs/fuse/dio_inval.h).
 */
static void open_file(fuse_req_t req, struct cfs_inode *inode, struct fuse_file_info *fi)
{
	bool direct = fi->flags & O_DIRECT;
	unsigned flags = direct ? CFS_FILE_DIRECT : 0;

	(void)req;
	/* No FLUSH at close (FOPEN_NOFLUSH, kernel 5.17+): there is nothing to
	 * flush (no write-back cache; with -o writeback_cache the kernel sends
	 * FLUSH anyway, after writing the file's dirty pages), and it was one
	 * of three round trips per open+close — a database opening chunks per
	 * session pays for each. */
	fi->noflush = 1;
	if (!S_ISREG(inode->mode)) {
		fi->direct_io = direct;
	} else {
		pthread_mutex_lock(&inode->lock);
		if (direct ? inode->cached_opens == 0 : inode->uncached_opens > 0) {
			fi->direct_io = 1;
			flags |= CFS_FILE_UNCACHED;
			inode->uncached_opens++;
		} else {
			if (!direct)
				fi->keep_cache = !atomic_exchange(&inode->cache_stale, false);
			inode->cached_opens++;
		}
		pthread_mutex_unlock(&inode->lock);
	}
	fi->fh = fh_make(inode, flags);
	if (S_ISREG(inode->mode))
		cfs_cs_open(cfs_ns_inode_stats(inode), flags & CFS_FILE_DIRECT);
}

/* A handle of a regular file goes: the counts open_file() decides by. */
static void close_file(struct cfs_inode *inode, unsigned flags)
{
	pthread_mutex_lock(&inode->lock);
	if (flags & CFS_FILE_UNCACHED) {
		/* No handle left that a mapping could hold: the next shared
		 * mmap starts from an empty cache (the kernel drops it). */
		if (--inode->uncached_opens == 0)
			atomic_store(&inode->uncached_mapped, false);
	} else
		inode->cached_opens--;
	pthread_mutex_unlock(&inode->lock);
	if (!(flags & CFS_FILE_UNCACHED))
		cfs_data_closed(inode);
	cfs_cs_close();
}

/* The kernel dropped an open we answered (interrupted): no RELEASE comes. */
static void open_dropped(struct cfs_inode *inode, const struct fuse_file_info *fi)
{
	if (S_ISREG(inode->mode))
		close_file(inode, fh_flags(fi));
	cfs_ns_release(FS(), inode);
}

/* The kernel asks to clear suid/sgid on every write by a caller without
 * CAP_FSETID (fs/fuse/proto_ext.h): the bits are read without the lock, so only a
 * file that has them takes the slow path. */
static bool has_suidgid(const struct cfs_inode *inode)
{
	return __atomic_load_n(&inode->mode, __ATOMIC_RELAXED) & (S_ISUID | S_ISGID);
}

/* After clearing them for an OPEN or a WRITE: neither reply carries
 * attributes, and the kernel keeps the mode it has for the attribute timeout. */
static void attr_changed_behind_kernel(fuse_ino_t ino)
{
	fuse_lowlevel_notify_inval_inode(cfs_daemon.se, ino, -1, 0);
}

/* Before a WRITE or FALLOCATE changes the data, as the kernel's VFS does:
 * clears suid/sgid when asked to and the file has them. On failure answers
 * the request and returns false. */
static bool suidgid_cleared_first(fuse_req_t req, bool asked, fuse_ino_t ino,
				  const struct cfs_inode *inode)
{
	struct cfs_setattr set = {.valid = CFS_SET_KILL_SUIDGID};
	struct cfs_attr attr;
	int ret;

	if (!asked || !has_suidgid(inode))
		return true;
	ret = cfs_ns_setattr(FS(), ino, &set, &attr, NULL);
	if (ret) {
		cfs_reply_err(req, ret);
		return false;
	}
	attr_changed_behind_kernel(ino);
	return true;
}

static void cfs_ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfs_inode *inode;
	int ret;

	ret = cfs_ns_open(FS(), ino, &inode);
	if (ret) {
		cfs_reply_err(req, ret);
		return;
	}
	if ((fi->flags & O_TRUNC) && S_ISREG(inode->mode)) {
		/* FUSE_CAP_ATOMIC_O_TRUNC: the kernel leaves O_TRUNC to us (no
		 * separate SETATTR), so open and truncate are one step. A
		 * truncate to 0 cuts no sector: nothing to zero. */
		bool kill = cfs_proto_kill_suidgid() && has_suidgid(inode);
		struct cfs_setattr set = {
			.valid = CFS_SET_SIZE | CFS_SET_MTIME_NOW |
				 (kill ? CFS_SET_KILL_SUIDGID : 0),
			.size_bytes = 0,
		};
		struct cfs_attr attr;

		/* What the held blocks have not written yet is cut anyway. */
		cfs_data_drop_held(inode);
		ret = cfs_ns_setattr(FS(), ino, &set, &attr, NULL);
		if (ret) {
			cfs_ns_release(FS(), inode);
			cfs_reply_err(req, ret);
			return;
		}
		if (kill)
			attr_changed_behind_kernel(ino);
		ram_give_back();
	}
	open_file(req, inode, fi);
	if (fuse_reply_open(req, fi) == -ENOENT)
		open_dropped(inode, fi); /* interrupted: no RELEASE will come */
}

static void cfs_ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			  struct fuse_file_info *fi)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fuse_entry_param e;
	struct cfs_inode *inode;
	struct cfs_attr attr;
	int ret;

	/* open(O_TMPFILE) comes here too (fs/fuse/tmpfile.h), with no real
	 * name: the file is born unlinked; only without O_EXCL may linkat()
	 * name it later (the kernel checks that too). */
	if (cfs_tmpfile_requested())
		ret = cfs_ns_tmpfile_open(FS(), parent, mode, ctx->uid, ctx->gid,
					  !(fi->flags & O_EXCL), &attr, &inode);
	else
		ret = cfs_ns_create_open(FS(), parent, name, mode, ctx->uid, ctx->gid, &attr,
					 &inode);
	if (ret) {
		cfs_reply_err(req, ret);
		return;
	}
	open_file(req, inode, fi);
	entry_from_attr(&attr, &e);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		open_dropped(inode, fi);
		cfs_ns_forget(FS(), attr.ino, 1);
	}
}

static void cfs_ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	int ret;

	(void)ino;
	if (off < 0) {
		cfs_reply_err(req, -EINVAL);
		return;
	}
	/* The kernel's direct reads carry the caller's lock owner
	 * (FUSE_READ_LOCKOWNER), its page cache fills none: a fill through an
	 * FOPEN_DIRECT_IO handle is a shared mmap's (open_file()). Set before
	 * the read goes to the store, so a write landing after it sees it. */
	if ((fh_flags(fi) & CFS_FILE_UNCACHED) && !fi->lock_owner &&
	    !atomic_load_explicit(&fh_inode(fi)->uncached_mapped, memory_order_relaxed))
		atomic_store(&fh_inode(fi)->uncached_mapped, true);
	ret = cfs_data_read(req, fh_inode(fi), fh_flags(fi), size, (uint64_t)off);
	if (ret)
		cfs_reply_err(req, ret);
}

/* An O_DIRECT write of a cached handle came through the kernel's own direct
 * path (open_file()), which does not drop the range from the page cache once
 * an asynchronous write is done: we do, before answering (fs/fuse/dio_inval.h).
 * The flags are the file's now (fcntl may have set O_DIRECT since the open);
 * never for the kernel's write-back of mmap'ed pages (writepage), whose pages
 * stay locked until it is answered. */
static unsigned write_flags(const struct fuse_file_info *fi)
{
	unsigned flags = fh_flags(fi);

	if (fi->writepage)
		return flags | CFS_FILE_WRITEBACK;
	if (flags & CFS_FILE_UNCACHED)
		flags |= CFS_FILE_DROP_CACHE_IF_MAPPED;
	else if (fi->flags & O_DIRECT)
		flags |= CFS_FILE_DROP_CACHE_AFTER;
	return flags;
}

static void cfs_ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	int ret;

	if (off < 0) {
		cfs_reply_err(req, -EINVAL);
		return;
	}
	if (!suidgid_cleared_first(req, cfs_proto_kill_suidgid(), ino, fh_inode(fi)))
		return;
	ret = cfs_data_write(req, fh_inode(fi), write_flags(fi), buf, size, (uint64_t)off);
	if (ret)
		cfs_reply_err(req, ret);
}

static void cfs_ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	/* Only kernels before 5.17 send this (open_file() sets noflush).
	 * close() makes nothing durable on a kernel filesystem either: a
	 * write-behind still in flight is fsync's to wait for (data.c). */
	fuse_reply_err(req, 0);
}

static void cfs_ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	if (S_ISREG(fh_inode(fi)->mode))
		close_file(fh_inode(fi), fh_flags(fi));
	cfs_ns_release(FS(), fh_inode(fi));
	ram_give_back(); /* the last close of an unlinked file frees it */
	fuse_reply_err(req, 0);
}

/* fsync is answered by the committer thread once the commit is durable. */
static void fsync_done(int res, void *arg)
{
	fuse_req_t req = arg;

	/* The filesystem went read-only after a failed metadata write: what
	 * this fsync covers may not be on the store. */
	if (res == -EROFS)
		res = -EIO;
	cfs_reply_err(req, res > 0 ? 0 : res);
}

/* An fsync being timed for the statistics. The journal allocates a waiter
 * per fsync already; this rides along (an fsync costs two device flushes). */
struct fsync_timing {
	fuse_req_t req;
	struct cfs_chunk_stats *stats; /* NULL: only the mount totals */
	uint64_t start_ns;
};

static void fsync_timed_done(int res, void *arg)
{
	struct fsync_timing *t = arg;
	int replied = res == -EROFS ? -EIO : (res > 0 ? 0 : res);

	cfs_cs_request_done(t->stats, CFS_IO_FLUSH, replied, 0, cfs_now_ns() - t->start_ns, 0);
	fsync_done(res, t->req);
	free(t);
}

struct fsync_args {
	uint64_t start_ns; /* when it arrived */
	bool datasync;	   /* fdatasync(2) */
};

/*
 * Start the commit an fsync waits for. fdatasync of a file whose writes
 * changed only its times (an overwrite: a database's redo log, its data
 * pages) needs no records of its own: a flush of the store, one device
 * request where a commit with records costs a flush, a log write and
 * another flush. The times reach the log with a later commit, as fdatasync
 * allows.
 */
static int fsync_commit(struct cfs_inode *inode, bool datasync, cfs_commit_cb cb, void *arg)
{
	if (datasync && inode && S_ISREG(inode->mode) && cfs_ns_datasync_flush_only(inode))
		return cfs_journal_flush_async(FS(), cb, arg);
	return cfs_journal_commit_async(FS(), cb, arg);
}

/* The fsync itself, once the file's write-behind is on the store: the
 * commit's device flush must come after it. */
static void fsync_go(fuse_req_t req, struct cfs_inode *inode, const void *args)
{
	const struct fsync_args *a = args;
	uint64_t start_ns = a->start_ns;
	struct cfs_chunk_stats *stats = inode ? cfs_ns_inode_stats(inode) : NULL;
	struct fsync_timing *t = NULL;
	int ret;

	/* A failed write since the last fsync: reported once, as Linux
	 * reports a writeback error to the next fsync (errseq). */
	if (inode) {
		int werr = atomic_exchange(&inode->write_error, 0);

		if (werr) {
			cfs_cs_request_done(stats, CFS_IO_FLUSH, werr, 0, cfs_now_ns() - start_ns,
					    0);
			cfs_reply_err(req, werr);
			return;
		}
	}
	if (cfs_daemon.ram || cfs_daemon.read_only) {
		/* Nothing to make durable: a RAM mount persists nothing, a
		 * read-only mount changes nothing. */
		cfs_cs_request_done(stats, CFS_IO_FLUSH, 0, 0, cfs_now_ns() - start_ns, 0);
		fuse_reply_err(req, 0);
		return;
	}
	if (CFS_STATS_ENABLED)
		t = malloc(sizeof(*t));
	if (!t) {
		/* No timing (or no memory for it): the fsync itself goes on. */
		ret = fsync_commit(inode, a->datasync, fsync_done, req);
		if (ret)
			fsync_done(ret, req);
		return;
	}
	t->req = req;
	t->stats = stats;
	t->start_ns = start_ns;
	ret = fsync_commit(inode, a->datasync, fsync_timed_done, t);
	if (ret)
		fsync_timed_done(ret, t);
}

static void cfs_ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct fsync_args a = {cfs_now_ns(), datasync != 0};

	(void)ino;
	cfs_data_after_writes(req, fi && fi->fh ? fh_inode(fi) : NULL, fsync_go, &a, sizeof(a));
}

static void cfs_ll_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	cfs_ll_fsync(req, ino, datasync, fi);
}

struct fallocate_args {
	fuse_ino_t ino;
	int mode;
	uint64_t offset_bytes;
	uint64_t length_bytes;
};

/* The fallocate itself, after the file's write-behinds: a punch changes
 * the written-state they set when they reach the store. */
static void fallocate_go(fuse_req_t req, struct cfs_inode *inode, const void *args)
{
	const struct fallocate_args *a = args;
	struct cfs_ns_zero zero = {0};
	uint64_t start_ns = cfs_now_ns();
	int ret;

	/* Punch and zero range change bytes held blocks may hold: as for a
	 * truncate (setattr_go). */
	if ((a->mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) && inode)
		cfs_data_drop_held(inode);
	ret = cfs_ns_fallocate(FS(), a->ino, a->mode, a->offset_bytes, a->length_bytes, &zero);
	if (ret == -EAGAIN) {
		/* No free unit yet, some coming back: again shortly. */
		if (cfs_data_space_wait(req, inode, fallocate_go, a, sizeof(*a)))
			return;
		ret = -ENOSPC;
	}
	if (a->mode & FALLOC_FL_PUNCH_HOLE) {
		/* A discard of the chunk (InnoDB page compression punches holes);
		 * timed up to the namespace's answer: the zeroing of at most two
		 * cut sectors that may follow is not included. */
		cfs_cs_request_done(inode ? cfs_ns_inode_stats(inode) : NULL, CFS_IO_DISCARD, ret,
				    a->length_bytes, cfs_now_ns() - start_ns, 0);
	}
	if (ret) {
		cfs_reply_err(req, ret);
		return;
	}
	if (a->mode & FALLOC_FL_PUNCH_HOLE)
		ram_give_back();
	/* A punch or zero range inside written sectors: zero their cut bytes
	 * on the device. */
	cfs_data_zero(req, &zero, NULL);
}

static void cfs_ll_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			     struct fuse_file_info *fi)
{
	struct fallocate_args a = {
		.ino = ino,
		.mode = mode,
		.offset_bytes = (uint64_t)offset,
		.length_bytes = (uint64_t)length,
	};

	if (offset < 0 || length <= 0) {
		cfs_reply_err(req, -EINVAL);
		return;
	}
	/* What the extent map can do without moving data (chunkfs(8),
	 * fallocate): not COLLAPSE_RANGE, INSERT_RANGE (they shift a file's
	 * units, which no database asks of a chunk) nor UNSHARE_RANGE
	 * (nothing is shared). */
	if (mode != 0 && mode != FALLOC_FL_KEEP_SIZE &&
	    mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) && mode != FALLOC_FL_ZERO_RANGE &&
	    mode != (FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE)) {
		cfs_reply_err(req, -EOPNOTSUPP);
		return;
	}
	/* With FUSE_HANDLE_KILLPRIV_V2 the kernel neither clears suid/sgid for
	 * fallocate nor flags the request (fs/fuse/proto_ext.h): clear them for any
	 * caller but root, which stands in for CAP_FSETID here. */
	if (fi && fi->fh &&
	    !suidgid_cleared_first(req, fuse_req_ctx(req)->uid != 0, ino, fh_inode(fi)))
		return;
	if (!(mode & FALLOC_FL_PUNCH_HOLE) && fi && fi->fh)
		cfs_data_grow_then(req, fh_inode(fi), a.offset_bytes, a.length_bytes, fallocate_go,
				   &a, sizeof(a));
	else
		cfs_data_after_writes(req, fi && fi->fh ? fh_inode(fi) : NULL, fallocate_go, &a,
				      sizeof(a));
}

struct lseek_args {
	uint64_t offset_bytes;
	int whence;
};

/* SEEK_DATA/SEEK_HOLE read the written-state, which a write-behind sets
 * when it reaches the store: after the file's write-behinds. */
static void lseek_go(fuse_req_t req, struct cfs_inode *inode, const void *args)
{
	const struct lseek_args *a = args;
	int64_t ret = cfs_ns_seek(FS(), inode, a->offset_bytes, a->whence);

	if (ret < 0)
		cfs_reply_err(req, (int)ret);
	else
		fuse_reply_lseek(req, (off_t)ret);
}

static void cfs_ll_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
			 struct fuse_file_info *fi)
{
	(void)ino;
	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		/* SEEK_SET/CUR/END never reach us; answer as the kernel would. */
		cfs_reply_err(req, -EINVAL);
		return;
	}
	if (off < 0) {
		cfs_reply_err(req, -ENXIO);
		return;
	}
	struct lseek_args a = {.offset_bytes = (uint64_t)off, .whence = whence};

	cfs_data_after_writes(req, fh_inode(fi), lseek_go, &a, sizeof(a));
}

/* ---- directories ---------------------------------------------------------------------- */

struct readdir_buf {
	fuse_req_t req;
	char *buf;
	size_t size;
	size_t used;
	bool plus;
};

static int readdir_add(void *arg, const char *name, size_t name_length, uint64_t ino, uint32_t mode,
		       uint64_t next_cookie, const struct cfs_attr *attr)
{
	struct readdir_buf *rb = arg;
	char stackname[CFS_NAME_MAX + 1];
	size_t n;

	/* fuse_add_direntry wants a NUL-terminated name. */
	if (name_length > CFS_NAME_MAX)
		return -ENAMETOOLONG;
	memcpy(stackname, name, name_length);
	stackname[name_length] = '\0';
	if (rb->plus) {
		struct fuse_entry_param e;

		if (attr) {
			entry_from_attr(attr, &e);
		} else {
			/* "." and "..": no lookup count, attributes unknown */
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = ino;
			e.attr.st_mode = mode;
		}
		n = fuse_add_direntry_plus(rb->req, rb->buf + rb->used, rb->size - rb->used,
					   stackname, &e, (off_t)next_cookie);
	} else {
		struct stat st = {.st_ino = ino, .st_mode = mode};

		n = fuse_add_direntry(rb->req, rb->buf + rb->used, rb->size - rb->used, stackname,
				      &st, (off_t)next_cookie);
	}
	if (n > rb->size - rb->used)
		return 1; /* full: this entry is not consumed */
	rb->used += n;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct readdir_buf rb = {.req = req, .size = size, .plus = plus};
	int ret;

	if (size > CFS_MAX_WRITE_BYTES)
		rb.size = size = CFS_MAX_WRITE_BYTES;
	rb.buf = malloc(size);
	if (!rb.buf) {
		cfs_reply_err(req, -ENOMEM);
		return;
	}
	ret = cfs_ns_readdir(FS(), ino, off < 0 ? 0 : (uint64_t)off, plus, readdir_add, &rb);
	if (ret < 0)
		cfs_reply_err(req, ret);
	else
		fuse_reply_buf(req, rb.buf, rb.used);
	free(rb.buf);
}

static void cfs_ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, false);
}

static void cfs_ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			       struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, true);
}

/* ---- statfs ------------------------------------------------------------------------------ */

static void cfs_ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct cfs_ns_statfs s;
	struct statvfs st;

	(void)ino;
	cfs_ns_statfs(FS(), &s);
	memset(&st, 0, sizeof(st));
	st.f_bsize = s.block_bytes;
	st.f_frsize = s.block_bytes;
	st.f_blocks = s.blocks;
	st.f_bfree = s.blocks_free;
	st.f_bavail = s.blocks_avail;
	st.f_files = s.files;
	st.f_ffree = s.files_free;
	st.f_favail = s.files_free;
	st.f_namemax = s.name_max;
	fuse_reply_statfs(req, &st);
}

/* ---- extended attributes ------------------------------------------------------------------ */

static bool has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Namespaces chunkfs does not store: ENODATA on get, EOPNOTSUPP on set. */
static bool foreign_xattr(const char *name)
{
	return !has_prefix(name, "user.");
}

static void cfs_ll_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char stackbuf[256];
	char *buf = stackbuf;
	ssize_t n;

	/* The kernel asks for security.capability before every write (unless
	 * told not to): the fast path, no lock, no lookup. */
	if (foreign_xattr(name)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (cfs_xattr_is_stats(name)) {
		cfs_xattr_stats_get(req, ino, name, size);
		return;
	}
	if (size > sizeof(stackbuf)) {
		buf = malloc(size);
		if (!buf) {
			cfs_reply_err(req, -ENOMEM);
			return;
		}
	}
	n = cfs_ns_getxattr(FS(), ino, name, buf, size);
	cfs_reply_xattr_value(req, n, buf, size);
	if (buf != stackbuf)
		free(buf);
}

/* The statistics' names first (a constant list per inode kind, so a size
 * probe stays right for them), then the stored user.* names. */
static void cfs_ll_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	size_t stats_bytes = cfs_xattr_stats_list(ino, NULL, 0);
	char *buf = NULL;
	ssize_t n;

	if (size) {
		buf = malloc(size);
		if (!buf) {
			cfs_reply_err(req, -ENOMEM);
			return;
		}
		if (stats_bytes <= size)
			cfs_xattr_stats_list(ino, buf, size);
	}
	n = cfs_ns_listxattr(FS(), ino, size > stats_bytes ? buf + stats_bytes : NULL,
			     size > stats_bytes ? size - stats_bytes : 0);
	if (n >= 0)
		n += (ssize_t)stats_bytes;
	cfs_reply_xattr_value(req, n, buf, size);
	free(buf);
}

static void cfs_ll_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			    size_t size, int flags)
{
	if (foreign_xattr(name)) {
		cfs_reply_err(req, -EOPNOTSUPP);
		return;
	}
	if (cfs_xattr_is_stats(name)) {
		cfs_reply_err(req, cfs_xattr_stats_set(req, ino, name, value, size));
		return;
	}
	cfs_reply_err(req, cfs_ns_setxattr(FS(), ino, name, value, size, flags));
}

static void cfs_ll_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	if (foreign_xattr(name)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (cfs_xattr_is_stats(name)) {
		cfs_reply_err(req, cfs_xattr_stats_remove(req, ino, name));
		return;
	}
	cfs_reply_err(req, cfs_ns_removexattr(FS(), ino, name));
}

const struct fuse_lowlevel_ops cfs_ll_ops = {
	.init = cfs_ll_init,
	.lookup = cfs_ll_lookup,
	.forget = cfs_ll_forget,
	.forget_multi = cfs_ll_forget_multi,
	.getattr = cfs_ll_getattr,
	.setattr = cfs_ll_setattr,
	.readlink = cfs_ll_readlink,
	.mknod = cfs_ll_mknod,
	.mkdir = cfs_ll_mkdir,
	.unlink = cfs_ll_unlink,
	.rmdir = cfs_ll_rmdir,
	.symlink = cfs_ll_symlink,
	.rename = cfs_ll_rename,
	.link = cfs_ll_link,
	.open = cfs_ll_open,
	.read = cfs_ll_read,
	.write = cfs_ll_write,
	.flush = cfs_ll_flush,
	.release = cfs_ll_release,
	.fsync = cfs_ll_fsync,
	.readdir = cfs_ll_readdir,
	.readdirplus = cfs_ll_readdirplus,
	.fsyncdir = cfs_ll_fsyncdir,
	.statfs = cfs_ll_statfs,
	.setxattr = cfs_ll_setxattr,
	.getxattr = cfs_ll_getxattr,
	.listxattr = cfs_ll_listxattr,
	.removexattr = cfs_ll_removexattr,
	.create = cfs_ll_create,
	.fallocate = cfs_ll_fallocate,
	.lseek = cfs_ll_lseek,
	/* .getlk, .setlk, .flock: unset on purpose (kernel-local locks). */
};
