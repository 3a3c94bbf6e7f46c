/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * daemon.h — what the parts of the FUSE front share: the mount-wide state
 * of one chunkfs daemon, the reply helpers and the loops' CPU pinning
 * (daemon.c), the FUSE ops table (ops.c), the kernel cache lifetimes and
 * request limits.
 *
 * Private to the FUSE side of the daemon. The metadata modules (alloc,
 * extent, namespace, journal) never include it: they know nothing of FUSE.
 */
#ifndef CFS_DAEMON_H
#define CFS_DAEMON_H

#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>

#include <stdbool.h>
#include <stdint.h>

struct cfs_fs;
struct cfs_io;
struct cfs_io_geometry;
struct cfs_loop;

/*
 * Kernel cache lifetimes. Every change to the namespace goes through this
 * mount (there is no second writer behind the kernel's back, unlike a network
 * filesystem), and the kernel updates its own dentries and attributes for
 * the operations it sends us (create, unlink, rename, setattr, and i_size on
 * writes), so long lifetimes are correct and save a LOOKUP/GETATTR round trip
 * per path walk and stat. Negative entries are cached as long: a database
 * probing for files that do not exist gets its ENOENT from the dcache.
 */
#define CFS_ENTRY_TIMEOUT_S 3600.0
#define CFS_ATTR_TIMEOUT_S 3600.0

/* Largest FUSE request and reply payload: FUSE max_write / max_pages. */
#define CFS_MAX_WRITE_BYTES (1u << 20)
/* The kernel's limit of asynchronous requests in flight per mount (default
 * 12) and where it starts throttling: asynchronous direct I/O from the
 * database counts there, so a low limit caps its queue depth. */
#define CFS_MAX_BACKGROUND 256u
#define CFS_CONGESTION_THRESHOLD 192u

struct cfs_daemon {
	struct fuse_session *se;
	struct cfs_fs *fs;
	struct cfs_io *io;
	const struct cfs_io_geometry *geo;
	bool ram; /* the RAM temp mount */
	bool read_only;
	uint32_t dio_align_bytes; /* RAM: O_DIRECT alignment enforced; else 0 */
	const char *source;	  /* SOURCE as given (the root's user.chunkfs.source) */
	bool hide_stats;	  /* -o hide_stats: listxattr omits user.chunkfs.* */
	bool write_behind;	  /* buffered writes answered once queued (default;
				   * -o writethrough: once on the store) */
	bool writeback_cache;	  /* -o writeback_cache: the kernel's, opt-in */
	bool reply_any_thread;	  /* replies may go out from any thread (/dev/fuse):
				   * data.c answers reads on the store's thread */
	unsigned loop_count;
	struct cfs_loop **loops;
	bool dev_wake_all; /* /dev/fuse: a request wakes every idle loop, each
			    * pinned to its CPUs (-o dev_wakeup=, main.c) */
};

/* The one daemon of this process (FUSE userdata points at it too); daemon.c. */
extern struct cfs_daemon cfs_daemon;

/* ops.c */
extern const struct fuse_lowlevel_ops cfs_ll_ops;

/* ---- replies (daemon.c) ---------------------------------------------------- */
/* Reply to req with -err (err < 0), the one place -errno becomes a FUSE
 * reply; data.c uses it for asynchronous completions. */
void cfs_reply_err(fuse_req_t req, int err);
/* Reply to a GETATTR/SETATTR with attr and the attribute timeout. */
struct cfs_attr;
void cfs_reply_attr(fuse_req_t req, const struct cfs_attr *attr);
/* Answer a getxattr or listxattr that offered size bytes (0: the size
 * probe) with n bytes of buf, or n = -errno: the size for a probe, ERANGE
 * when the value does not fit. */
void cfs_reply_xattr_value(fuse_req_t req, ssize_t n, const void *buf, size_t size);
/* The struct stat of attr, for attribute and entry replies. */
struct stat;
void cfs_attr_to_stat(const struct cfs_attr *attr, struct stat *st);

/* ---- event loops on CPUs (daemon.c) ---------------------------------------- */
/* Pin the calling thread, event loop index of loops, to the CPUs c below
 * ncpus with c mod loops == index that the process may use, so that a
 * request made on one of those CPUs is taken by a loop already there: the
 * hand-off and the reply then need no cross-CPU wakeup, which on a VM that
 * halts idle vCPUs costs more than the request itself. Left unpinned when
 * that set is empty or every usable CPU, or when the kernel refuses. */
void cfs_loop_pin_cpus(unsigned index, unsigned loops, unsigned ncpus);

#endif /* CFS_DAEMON_H */
