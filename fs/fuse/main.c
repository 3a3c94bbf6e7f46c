/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * main.c — the chunkfs daemon: command line, validation, mount, event loops,
 * and an orderly exit.
 *
 *   chunkfs SOURCE MOUNTPOINT [-o opt[,opt...]] [-f] [-d]
 *   mount.chunkfs SOURCE MOUNTPOINT [-sfnv] [-o opts]        (mount(8) helper)
 *   chunkfs stat [...]            statistics of mounted chunks (fs/stats/statcmd.c)
 *   chunkfs move [...]            move a chunk to another store (fs/fuse/movecmd.c)
 *   chunkfs store [...]           add or remove a store of a mounted pool
 *                                 (fs/fuse/storecmd.c)
 *
 * The sequence (fs/DAEMON.md, "Mount, daemonizing, exit"):
 *   1. parse and check every option (usage errors exit 1);
 *   2. fork; the parent waits on a pipe for the child's verdict and exits
 *      with it, so every error below is still printed on the terminal and
 *      mount(8) sees a non-zero status;
 *   3. the child locks the store (flock on its fd, plus O_EXCL for block
 *      devices; an RBD image: its exclusive lock, iopath/rbd_lock.c), opens
 *      it through iopath, mounts the metadata (cfs_fs_open:
 *      superblock checks, snapshot, log replay), creates one iopath queue
 *      per event loop, creates the FUSE session and mounts it;
 *   4. only then does it detach (stdio to /dev/null, logs to syslog) and
 *      tell the parent "0".
 * Why our own fork instead of fuse_daemonize() after validation: the
 * metadata engine starts its committer thread in cfs_fs_open() and iopath
 * registers buffer arenas with io_uring; neither survives a fork (threads are
 * not copied, and pinned pages are copied away from the child). Forking
 * first keeps everything in the process that runs it.
 *
 * Event loops: N threads (threads=N, default the online CPUs), each owning
 * one struct cfs_loop (data.c: its iopath queue, buffer arena and request
 * contexts) and an epoll set of: the shared non-blocking /dev/fuse fd, its
 * queue's completion eventfd, its cross-thread completion eventfd, and the
 * stop eventfd. A request on /dev/fuse wakes every idle loop, each pinned to
 * its share of the CPUs, and the loop on the caller's CPU takes it
 * (dev_wakeup=all, the default up to DEV_WAKE_ALL_MAX_LOOPS loops); or, with
 * EPOLLEXCLUSIVE, one loop wherever it runs (dev_wakeup=one). The main
 * thread only waits for signals and the stop event.
 *
 * Exit: a signal (SIGINT/SIGTERM/SIGHUP), or ENODEV from /dev/fuse after
 * umount, stops every loop; each loop stops receiving, waits for its I/O in
 * flight and its requests' replies, and returns. Then cfs_fs_close() writes
 * the checkpoint, the store is closed, and the store lock is released last,
 * so a new mount of the same store waits (wait=SECONDS) or refuses until the
 * checkpoint is on the store.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fs/base/text.h"
#include "fs/fuse/daemon.h"
#include "fs/fuse/data.h"
#include "fs/fuse/dio_inval.h"
#include "fs/format/format.h"
#include "fs/meta/mount.h"
#include "fs/meta/pool.h"
#include "fs/fuse/proto_ext.h"
#include "fs/fuse/move.h"
#include "fs/fuse/movecmd.h"
#include "fs/fuse/storecmd.h"
#include "fs/fuse/storeop.h"
#include "fs/fuse/tmpfile.h"
#include "fs/stats/statcmd.h"
#include "fs/fuse/transport_uring.h"
#include "iopath/iopath.h"

#ifndef CFS_VERSION
#define CFS_VERSION "0.1"
#endif

/* Exit codes, as mount(8) documents them for helpers. */
#define EXIT_USAGE 1  /* incorrect invocation */
#define EXIT_MOUNT 32 /* mount failure */

#define THREADS_MAX 64u
/* dev_wakeup=all by default up to this many loops: each request wakes every
 * idle loop, and on more CPUs than this (not measured) those wakeups would
 * cost more than the one on the caller's CPU saves. */
#define DEV_WAKE_ALL_MAX_LOOPS 8u
#define RECV_BATCH 16 /* requests received per wakeup before reaping */
#define LOCK_WAIT_DEFAULT_S 5u

/* The stores of SOURCE ("SRC1,SRC2,...": a pool, fs/POOLS.md). */
static char *source_list;
static const char *source_paths[CFS_POOL_STORES_MAX];
static unsigned source_count;
static struct cfs_pool_source pool_sources[CFS_POOL_STORES_MAX];

struct options {
	const char *prog;
	const char *source;
	const char *mountpoint;
	char mountpoint_real[PATH_MAX];
	bool helper; /* invoked as mount.chunkfs / mount.fuse.chunkfs */
	bool foreground;
	bool debug;
	bool fake;   /* mount -f: check everything, mount nothing */
	bool sloppy; /* mount -s: ignore unknown options */
	bool verbose;
	bool allow_other;
	bool read_only;
	bool ram;
	bool hide_stats;		  /* listxattr shows no user.chunkfs.* names */
	bool writethrough;		  /* buffered writes answered only once on the store */
	bool writeback_cache;		  /* the kernel's writeback cache (opt-in) */
	uint64_t writeback_reserve_bytes; /* writeback_cache: space held back for it */
	bool writeback_reserve_given;
	bool blkdev;		    /* mount as fuseblk: st_dev is the store's device */
	bool no_discard;	    /* freed units are not discarded on the stores */
	char blkdev_path[PATH_MAX]; /* blkdev: SOURCE resolved, the mount's source */
	unsigned threads;
	uint64_t ram_size_bytes;
	bool ram_size_given;	  /* size= seen (a bad value was already reported) */
	uint32_t dio_align_bytes; /* RAM: 0 = accept any O_DIRECT alignment */
	bool dio_align_given;
	unsigned ram_flags; /* CFS_IO_RAM_MLOCK, CFS_IO_RAM_HUGEPAGES */
	unsigned commit_interval_s;
	bool commit_interval_set;
	unsigned lock_wait_s;
	const char *fault_spec;
	const char *fsname;
	bool rbd;		      /* SOURCE is rbd:POOL/[NAMESPACE/]IMAGE */
	bool rbd_member;	      /* SOURCE lists a pool with an RBD image among its stores */
	struct cfs_io_ceph ceph;      /* ceph_conf=, ceph_id=, ceph_cluster=, takeover */
	bool ceph_given;	      /* one of those options was given */
	enum cfs_transport transport; /* -o transport=dev|uring|auto, -o uring */
	int dev_wakeup;		      /* -o dev_wakeup=: 1 all, 0 one, -1 not given */
	char kernel_flags[256];	      /* ro,nosuid,... passed through to the mount */
};

/* ---- logging -------------------------------------------------------------
 * Every module logs through fuse_log(); until the daemon detaches that is
 * stderr. Afterwards: syslog (openlog "chunkfs") when something listens on
 * /dev/log; else the kernel log through /dev/kmsg (dmesg, journalctl -k),
 * which exists without any daemon or configuration (containers and minimal
 * VMs have no syslog daemon, and syslog(3) then drops every message); a log
 * file would need a path, rotation and a writable place, all to configure.
 * Only mount, exit and error lines are logged (never per request), well
 * within the kernel's rate limit for /dev/kmsg. */
enum log_sink { LOG_TO_STDERR, LOG_TO_SYSLOG, LOG_TO_KMSG };
static volatile int log_sink = LOG_TO_STDERR;
static int kmsg_fd = -1;

static void log_func(enum fuse_log_level level, const char *fmt, va_list ap)
{
	char line[1024];
	int n;

	switch (log_sink) {
	case LOG_TO_SYSLOG:
		vsyslog((int)level, fmt, ap);
		return;
	case LOG_TO_KMSG:
		/* One record per write; "<facility|level>" as syslog's. */
		n = snprintf(line, sizeof(line), "<%d>chunkfs[%d]: ", LOG_DAEMON | (int)level,
			     (int)getpid());
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
		if (write(kmsg_fd, line, strlen(line)) < 0) {
			/* rate-limited or gone: nowhere else to say it */
		}
		return;
	default:
		vfprintf(stderr, fmt, ap);
	}
}

#define say(...) fuse_log(FUSE_LOG_ERR, "chunkfs: " __VA_ARGS__)

/* ---- options ------------------------------------------------------------- */

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s SOURCE MOUNTPOINT [-o opt[,opt...]] [-f] [-d]\n"
		"       %s -o ram,size=SIZE[,dio_align=N][,mlock][,hugepages] NAME MOUNTPOINT\n"
		"       chunkfs stat [-i SECONDS [-c COUNT]] [-z] [--json | --prom]\n"
		"                    [MOUNTPOINT | CHUNK ...]\n"
		"       chunkfs move [--wait | --no-wait] [--rate RATE] CHUNK STORE\n"
		"       chunkfs move --pause | --resume | --cancel | --status CHUNK\n"
		"       chunkfs store add DIR SOURCE [-L LABEL]\n"
		"       chunkfs store remove [--wait | --no-wait] [--rate RATE] DIR STORE\n"
		"       chunkfs store remove --cancel DIR STORE\n"
		"\n"
		"SOURCE is a block device or image file formatted by mkchunkfs, or a Ceph\n"
		"RBD image, rbd:POOL/IMAGE or rbd:POOL/NAMESPACE/IMAGE.\n"
		"\n"
		"options:\n"
		"  -f                 stay in the foreground, log to stderr\n"
		"  -d, -o debug       foreground and print every FUSE request\n"
		"  -o allow_other     let other users (the database) use the mount\n"
		"  -o ro              read-only\n"
		"  -o threads=N       event-loop threads (default: online CPUs, max %u)\n"
		"  -o commit_interval=S  seconds between metadata commits (default 5)\n"
		"  -o wait=S          wait up to S s for a store still held by a\n"
		"                     finishing daemon (default %u; 0 = refuse at once)\n"
		"  -o fsname=NAME     the source shown in /proc/mounts (default SOURCE)\n"
		"  -o ram,size=SIZE   RAM temp mount (nothing persisted)\n"
		"  -o dio_align=N     RAM: O_DIRECT alignment enforced (default 512;\n"
		"                     0 = accept anything, as tmpfs)\n"
		"  -o mlock           RAM: lock the data in memory (never swapped)\n"
		"  -o hugepages       RAM: ask for transparent huge pages\n"
		"  -o transport=T     dev (default): /dev/fuse; uring: FUSE over io_uring\n"
		"                     (kernel 6.14+, enable_uring=Y), refused when off;\n"
		"                     auto: io_uring where the kernel has it. -o uring\n"
		"                     is transport=uring\n"
		"  -o dev_wakeup=W    /dev/fuse: all (default up to %u threads): a request\n"
		"                     wakes every idle loop and the one on the caller's CPU\n"
		"                     takes it; one: a single loop, wherever it runs\n"
		"  -o writethrough    answer a buffered write only once it is on the store\n"
		"                     (default: once queued; fsync waits for it either way)\n"
		"  -o blkdev          a block-device store mounts as fuseblk: files report\n"
		"                     the device as st_dev (InnoDB then writes its redo log\n"
		"                     with O_DIRECT), umount waits for the daemon\n"
		"  -o writeback_cache the kernel's writeback cache: fewer, larger writes,\n"
		"                     but a full store fails fsync, not write() (chunkfs(8))\n"
		"  -o writeback_reserve=SIZE  space of each store only the kernel's\n"
		"                     write-back may take (default: the kernel's dirty\n"
		"                     limit for one FUSE mount: 1%% of the system's)\n"
		"  -o nodiscard       freed units are not discarded: an image file keeps its\n"
		"                     blocks (no hole punched), a device gets no discard\n"
		"                     (default: discard, once the free is durable)\n"
		"  -o hide_stats      do not list the user.chunkfs.* statistics (getfattr -d,\n"
		"                     cp -a, rsync -X); they stay readable by name\n"
		"  -o fault=SPEC      tests only: wrap the store in the fault backend\n"
		"RBD stores:\n"
		"  -o takeover        the image is held by a host that is down: break its\n"
		"                     lock and blocklist it (it can never write again)\n"
		"  -o ceph_conf=PATH  the cluster's ceph.conf (default: Ceph's search)\n"
		"  -o ceph_id=USER    the cephx user, without client. (default admin)\n"
		"  -o ceph_cluster=NAME  the cluster name (default ceph)\n"
		"generic mount options (rw, nosuid, nodev, noexec, noatime, sync, ...)\n"
		"are passed to the kernel; auto, noauto, user, nofail, _netdev,\n"
		"defaults and x-* are accepted and ignored. See chunkfs(8).\n",
		prog, prog, THREADS_MAX, DEV_WAKE_ALL_MAX_LOOPS, LOCK_WAIT_DEFAULT_S);
}

static bool opt_value(const char *opt, const char *name, const char **value)
{
	size_t n = strlen(name);

	if (strncmp(opt, name, n) != 0 || opt[n] != '=')
		return false;
	*value = opt + n + 1;
	return true;
}

static int parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	if (!*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

static int add_kernel_flag(struct options *o, const char *flag)
{
	size_t used = strlen(o->kernel_flags);

	if (used + strlen(flag) + 2 > sizeof(o->kernel_flags))
		return -E2BIG;
	if (used)
		strcat(o->kernel_flags, ",");
	strcat(o->kernel_flags, flag);
	return 0;
}

/* Generic mount flags the kernel applies to the FUSE mount (libfuse passes
 * them to mount(2)). */
static const char *const kernel_flags[] = {
	"nosuid", "suid", "nodev",   "dev",   "noexec",	 "exec",
	"async",  "sync", "dirsync", "atime", "noatime", NULL,
};

/* Options mount(8), mount.fuse3 and fstab hand to helpers that mean nothing
 * to the filesystem itself. */
static const char *const ignored_opts[] = {
	"defaults",
	"auto",
	"noauto",
	"user",
	"nouser",
	"users",
	"owner",
	"group",
	"_netdev",
	"nofail",
	"relatime",
	"norelatime",
	"strictatime",
	"nostrictatime",
	"lazytime",
	"nolazytime",
	"silent",
	"loud",
	"default_permissions", /* always on */
	"auto_unmount",
	"nodiratime",
	"diratime",
	"iversion",
	"noiversion",
	NULL,
};

static bool in_list(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (strcmp(*list, s) == 0)
			return true;
	return false;
}

/* OPT=V as a size (cfs_parse_size); says what is wrong. 0 or -EINVAL. */
static int parse_size_opt(const struct options *o, const char *opt, const char *v, uint64_t *out)
{
	if (!cfs_parse_size(v, out))
		return 0;
	fprintf(stderr, "%s: %s=%s: not a size (a number with an optional K, M, G or T suffix)\n",
		o->prog, opt, v);
	return -EINVAL;
}

/* One option of an -o list. Returns 0 or -EINVAL after printing why. */
static int parse_one(struct options *o, const char *opt)
{
	const char *v;
	uint64_t size;

	if (!*opt)
		return 0;
	if (strcmp(opt, "allow_other") == 0) {
		o->allow_other = true;
	} else if (strcmp(opt, "ro") == 0) {
		o->read_only = true;
	} else if (strcmp(opt, "rw") == 0) {
		o->read_only = false;
	} else if (strcmp(opt, "debug") == 0) {
		o->debug = true;
		o->foreground = true;
	} else if (strcmp(opt, "ram") == 0) {
		o->ram = true;
	} else if (strcmp(opt, "uring") == 0) {
		o->transport = CFS_TRANSPORT_URING;
	} else if (strcmp(opt, "hide_stats") == 0) {
		o->hide_stats = true;
	} else if (strcmp(opt, "writethrough") == 0) {
		o->writethrough = true;
	} else if (strcmp(opt, "writeback_cache") == 0) {
		o->writeback_cache = true;
	} else if (strcmp(opt, "blkdev") == 0) {
		o->blkdev = true;
	} else if (strcmp(opt, "nodiscard") == 0) {
		o->no_discard = true;
	} else if (strcmp(opt, "discard") == 0) {
		o->no_discard = false;
	} else if (strcmp(opt, "takeover") == 0) {
		o->ceph.takeover = true;
		o->ceph_given = true;
	} else if (strcmp(opt, "mlock") == 0) {
		o->ram_flags |= CFS_IO_RAM_MLOCK;
	} else if (strcmp(opt, "hugepages") == 0) {
		o->ram_flags |= CFS_IO_RAM_HUGEPAGES;
	} else if (in_list(kernel_flags, opt)) {
		if (add_kernel_flag(o, opt))
			goto too_many;
	} else if (in_list(ignored_opts, opt) || strncmp(opt, "x-", 2) == 0 ||
		   strncmp(opt, "comment=", 8) == 0 || strncmp(opt, "user=", 5) == 0 ||
		   strncmp(opt, "uhelper=", 8) == 0 || strncmp(opt, "helper=", 7) == 0 ||
		   strncmp(opt, "subtype=", 8) == 0) {
		/* accepted, no meaning here */
	} else if (opt_value(opt, "threads", &v)) {
		if (parse_uint(v, 1, THREADS_MAX, &o->threads))
			goto bad_value;
	} else if (opt_value(opt, "size", &v)) {
		o->ram_size_given = true;
		if (parse_size_opt(o, "size", v, &size))
			return -EINVAL;
		if (size == 0) {
			fprintf(stderr, "%s: size=%s: a RAM mount needs a size above 0\n", o->prog,
				v);
			return -EINVAL;
		}
		o->ram_size_bytes = size;
	} else if (opt_value(opt, "writeback_reserve", &v)) {
		if (parse_size_opt(o, "writeback_reserve", v, &size))
			return -EINVAL;
		o->writeback_reserve_bytes = size;
		o->writeback_reserve_given = true;
	} else if (opt_value(opt, "dio_align", &v)) {
		unsigned a;

		/* 0: no rule (tmpfs); else a device's logical sector: a power
		 * of two up to iopath's largest. */
		if (parse_uint(v, 0, CFS_IO_SECTOR_MAX, &a) || (a && (a < 512 || (a & (a - 1))))) {
			fprintf(stderr,
				"%s: dio_align=%s: must be 0 (accept any alignment) or a power of "
				"two from 512 to %u\n",
				o->prog, v, CFS_IO_SECTOR_MAX);
			return -EINVAL;
		}
		o->dio_align_bytes = a;
		o->dio_align_given = true;
	} else if (opt_value(opt, "commit_interval", &v)) {
		if (parse_uint(v, 1, 3600, &o->commit_interval_s))
			goto bad_value;
		o->commit_interval_set = true;
	} else if (opt_value(opt, "wait", &v)) {
		if (parse_uint(v, 0, 3600, &o->lock_wait_s))
			goto bad_value;
	} else if (opt_value(opt, "transport", &v)) {
		if (strcmp(v, "dev") == 0)
			o->transport = CFS_TRANSPORT_DEV;
		else if (strcmp(v, "uring") == 0)
			o->transport = CFS_TRANSPORT_URING;
		else if (strcmp(v, "auto") == 0)
			o->transport = CFS_TRANSPORT_AUTO;
		else {
			fprintf(stderr, "%s: transport=%s: must be dev, uring or auto\n", o->prog,
				v);
			return -EINVAL;
		}
	} else if (opt_value(opt, "dev_wakeup", &v)) {
		if (strcmp(v, "all") == 0)
			o->dev_wakeup = 1;
		else if (strcmp(v, "one") == 0)
			o->dev_wakeup = 0;
		else {
			fprintf(stderr, "%s: dev_wakeup=%s: must be all or one\n", o->prog, v);
			return -EINVAL;
		}
	} else if (opt_value(opt, "fault", &v)) {
		o->fault_spec = v;
	} else if (opt_value(opt, "ceph_conf", &v)) {
		if (!*v)
			goto bad_value;
		o->ceph.conf = v;
		o->ceph_given = true;
	} else if (opt_value(opt, "ceph_id", &v)) {
		if (!*v)
			goto bad_value;
		o->ceph.id = v;
		o->ceph_given = true;
	} else if (opt_value(opt, "ceph_cluster", &v)) {
		if (!*v)
			goto bad_value;
		o->ceph.cluster = v;
		o->ceph_given = true;
	} else if (opt_value(opt, "fsname", &v)) {
		if (!*v)
			goto bad_value;
		o->fsname = v;
	} else if (o->sloppy) {
		if (o->verbose)
			fprintf(stderr, "%s: ignoring unknown option '%s'\n", o->prog, opt);
	} else {
		fprintf(stderr, "%s: unknown option '%s' (see chunkfs(8))\n", o->prog, opt);
		return -EINVAL;
	}
	return 0;

bad_value:
	fprintf(stderr, "%s: bad value in option '%s' (see chunkfs(8))\n", o->prog, opt);
	return -EINVAL;
too_many:
	fprintf(stderr, "%s: too many mount flags\n", o->prog);
	return -EINVAL;
}

/*
 * Split an -o list at commas and parse each option. fault=SPEC takes the
 * rest of the list when it is the last option, because fault specs contain
 * commas of their own ("fault=write:3:EIO,volatile=1" would otherwise split).
 */
static int parse_opt_list(struct options *o, char *list)
{
	char *opt = list;
	int ret = 0;

	while (opt) {
		char *comma;

		if (strncmp(opt, "fault=", 6) == 0) {
			ret |= parse_one(o, opt);
			break;
		}
		comma = strchr(opt, ',');
		if (comma)
			*comma = '\0';
		ret |= parse_one(o, opt);
		opt = comma ? comma + 1 : NULL;
	}
	return ret ? -EINVAL : 0;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* Bytes of RAM and of swap; 0 if unknown. */
static void memory_bytes(uint64_t *ram, uint64_t *swap)
{
	struct sysinfo si;

	*ram = *swap = 0;
	if (sysinfo(&si))
		return;
	*ram = (uint64_t)si.totalram * si.mem_unit;
	*swap = (uint64_t)si.totalswap * si.mem_unit;
}

/* One number from a /proc or /sys file: false if it has none. */
static bool read_number_file(const char *path, uint64_t *out)
{
	FILE *f = fopen(path, "re");
	unsigned long long v;
	bool ok;

	if (!f)
		return false;
	ok = fscanf(f, "%llu", &v) == 1;
	fclose(f);
	if (ok)
		*out = v;
	return ok;
}

/*
 * The most dirty pages the kernel keeps for one FUSE mount, the default of
 * writeback_reserve=: the kernel's FUSE gives every mount's bdi a max_ratio
 * of 1% (with strictlimit) of the global dirty limit, vm.dirty_bytes or
 * vm.dirty_ratio percent of memory. All of RAM is counted, a little more
 * than the kernel's dirtyable memory: an upper bound.
 */
static uint64_t fuse_dirty_limit_bytes(void)
{
	uint64_t ram, swap, dirty_bytes = 0, dirty_ratio = 20;

	if (read_number_file("/proc/sys/vm/dirty_bytes", &dirty_bytes) && dirty_bytes)
		return dirty_bytes / 100;
	memory_bytes(&ram, &swap);
	read_number_file("/proc/sys/vm/dirty_ratio", &dirty_ratio);
	return ram / 100 * dirty_ratio / 100;
}

/* iopath's words (the rbd backend: who holds the image, a fencing) go where
 * the daemon's go: the terminal until it detaches, then syslog. */
static void backend_log(void *arg, const char *line)
{
	(void)arg;
	fuse_log(FUSE_LOG_ERR, "chunkfs: %s\n", line);
}

/*
 * The RAM store's size: rounded up to whole allocation units (a partial unit
 * could never be allocated; tmpfs rounds to pages the same way), and refused
 * when it is more than the machine could ever hold (RAM + swap; RAM alone with
 * mlock, since locked pages cannot be swapped). Memory is only used as data
 * is written, so a size up to that is allowed, as with tmpfs: filling it
 * competes with everything else for memory. Huge pages: a hint; say so when
 * the kernel has them switched off. 0 or -EINVAL after printing why.
 */
static int check_ram_size(struct options *o)
{
	uint64_t unit = CFS_RAM_ALLOC_UNIT_DEFAULT, ram, swap, limit;
	char a[CFS_SIZE_STR_BYTES], b[CFS_SIZE_STR_BYTES], c[CFS_SIZE_STR_BYTES];
	FILE *f;

	memory_bytes(&ram, &swap);
	limit = o->ram_flags & CFS_IO_RAM_MLOCK ? ram : ram + swap;
	if (ram && o->ram_size_bytes > limit) {
		if (o->ram_flags & CFS_IO_RAM_MLOCK)
			fprintf(stderr,
				"%s: size=%s is larger than the memory of this machine (%s of RAM; "
				"mlock: swap cannot hold locked pages)\n",
				o->prog, cfs_size_format(o->ram_size_bytes, a),
				cfs_size_format(ram, b));
		else
			fprintf(stderr,
				"%s: size=%s is larger than the memory of this machine (%s of RAM "
				"+ %s of swap)\n",
				o->prog, cfs_size_format(o->ram_size_bytes, a),
				cfs_size_format(ram, b), cfs_size_format(swap, c));
		return -EINVAL;
	}
	o->ram_size_bytes = (o->ram_size_bytes + unit - 1) / unit * unit;

	f = (o->ram_flags & CFS_IO_RAM_HUGEPAGES)
		    ? fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re")
		    : NULL;
	if (f) {
		char line[128] = "";

		if (fgets(line, sizeof(line), f) && strstr(line, "[never]"))
			fprintf(stderr,
				"%s: hugepages: transparent huge pages are disabled in this kernel "
				"(/sys/kernel/mm/transparent_hugepage/enabled); using 4 KiB "
				"pages\n",
				o->prog);
		fclose(f);
	}
	return 0;
}

/*
 * argv shapes accepted:
 *   chunkfs [opts] SOURCE MOUNTPOINT [opts]            (options anywhere)
 *   mount.chunkfs SOURCE DIR [-sfnv] [-N ns] [-o opts] [-t type]
 *   mount.fuse.chunkfs SOURCE DIR ...                    (same)
 * As a mount helper, -f means "fake" (mount(8) -f), not foreground.
 */
static int parse_args(struct options *o, int argc, char **argv)
{
	int positional = 0, bad = 0, i;

	o->prog = base_name(argv[0]);
	o->helper = strncmp(o->prog, "mount.", 6) == 0;
	o->lock_wait_s = LOCK_WAIT_DEFAULT_S;
	o->dev_wakeup = -1;
	o->dio_align_bytes = 512;

	for (i = 1; i < argc; i++) {
		char *a = argv[i];

		if (a[0] != '-' || !a[1]) {
			if (positional == 0)
				o->source = a;
			else if (positional == 1)
				o->mountpoint = a;
			else {
				fprintf(stderr, "%s: unexpected argument '%s'\n", o->prog, a);
				bad = 1;
			}
			positional++;
			continue;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout, o->prog);
			exit(0);
		}
		if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
			printf("chunkfs %s (libfuse %s)\n", CFS_VERSION, fuse_pkgversion());
			exit(0);
		}
		if (strncmp(a, "-o", 2) == 0) {
			char *list = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);

			if (!list) {
				fprintf(stderr, "%s: -o needs an argument\n", o->prog);
				bad = 1;
			} else if (parse_opt_list(o, list)) {
				bad = 1;
			}
			continue;
		}
		if (strcmp(a, "-t") == 0 || strcmp(a, "-N") == 0) {
			if (i + 1 >= argc) {
				fprintf(stderr, "%s: %s needs an argument\n", o->prog, a);
				bad = 1;
			} else if (a[1] == 'N') {
				fprintf(stderr, "%s: mount namespaces (-N) are not supported\n",
					o->prog);
				bad = 1;
			}
			i++;
			continue;
		}
		/* Single-letter flags, possibly grouped ("-fv"). */
		for (const char *c = a + 1; *c; c++) {
			switch (*c) {
			case 'f':
				if (o->helper)
					o->fake = true;
				else
					o->foreground = true;
				break;
			case 'd':
				o->debug = true;
				o->foreground = true;
				break;
			case 's':
				o->sloppy = true;
				break;
			case 'v':
				o->verbose = true;
				break;
			case 'n':
				break; /* no /etc/mtab: there is none to write */
			case 'r':
				o->read_only = true;
				break;
			case 'w':
				o->read_only = false;
				break;
			default:
				fprintf(stderr, "%s: unknown option '-%c'\n", o->prog, *c);
				bad = 1;
			}
		}
	}

	if (positional < 2) {
		if (!bad)
			usage(stderr, o->prog);
		return -EINVAL;
	}
	if (!o->ram && (o->ram_size_given || o->dio_align_given || o->ram_flags)) {
		fprintf(stderr,
			"%s: size=, dio_align=, mlock and hugepages are for RAM mounts "
			"(-o ram,size=...)\n",
			o->prog);
		bad = 1;
	}
	if (o->ram && !o->ram_size_given) {
		fprintf(stderr, "%s: a RAM mount needs size= (e.g. -o ram,size=4G)\n", o->prog);
		bad = 1;
	}
	if (o->ram && o->ram_size_bytes && check_ram_size(o))
		bad = 1;
	if (o->ram && o->read_only) {
		fprintf(stderr, "%s: a RAM mount cannot be read-only: it starts empty\n", o->prog);
		bad = 1;
	}
	if (o->ram && o->no_discard) {
		fprintf(stderr,
			"%s: nodiscard is for store mounts: a RAM mount gives freed memory back\n",
			o->prog);
		bad = 1;
	}
	if (o->writeback_reserve_given && !o->writeback_cache) {
		fprintf(stderr,
			"%s: writeback_reserve= is for mounts with -o writeback_cache (without "
			"it, write() itself returns ENOSPC)\n",
			o->prog);
		bad = 1;
	}
	if (o->ram && o->fault_spec) {
		fprintf(stderr, "%s: fault= is for store mounts\n", o->prog);
		bad = 1;
	}
	/* One RBD image; a list (SRC1,SRC2) is a pool, whose stores may be RBD
	 * images too (check_paths). */
	o->rbd = !o->ram && cfs_source_is_rbd(o->source) && !strchr(o->source, ',');
	o->rbd_member = !o->ram && !o->rbd && strstr(o->source, CFS_RBD_PREFIX) != NULL;
	if (o->rbd) {
		struct cfs_rbd_name name;
		const char *why;

		if (cfs_rbd_name_parse(o->source, &name, &why)) {
			fprintf(stderr, "%s: %s: %s\n", o->prog, o->source, why);
			bad = 1;
		}
		if (o->fault_spec) {
			fprintf(stderr, "%s: fault= is for local stores\n", o->prog);
			bad = 1;
		}
	} else if (o->ceph_given && !o->rbd_member) {
		fprintf(stderr,
			"%s: takeover, ceph_conf=, ceph_id= and ceph_cluster= are for RBD "
			"stores (rbd:POOL/IMAGE)\n",
			o->prog);
		bad = 1;
	}
	if (o->blkdev && (o->ram || o->rbd)) {
		fprintf(stderr, "%s: blkdev is for a store on a block device\n", o->prog);
		bad = 1;
	}
	if (o->blkdev && o->fsname) {
		fprintf(stderr,
			"%s: fsname= cannot be used with blkdev: the kernel mounts the device "
			"by its path\n",
			o->prog);
		bad = 1;
	}
	if (o->read_only && add_kernel_flag(o, "ro"))
		bad = 1;
	if (!o->threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		o->threads = n < 1 ? 1 : (n > (long)THREADS_MAX ? THREADS_MAX : (unsigned)n);
	}
	if (o->dev_wakeup < 0)
		o->dev_wakeup = o->threads <= DEV_WAKE_ALL_MAX_LOOPS;
	return bad ? -EINVAL : 0;
}

/* ---- checks that need no store -------------------------------------------- */

static bool is_dev_fd_path(const char *path)
{
	unsigned fd;
	char tail;

	/* mount.fuse3 -o drop_privileges mounts first and hands us /dev/fd/N */
	return sscanf(path, "/dev/fd/%u%c", &fd, &tail) == 1;
}

static int check_paths(struct options *o)
{
	char err[512];
	struct stat st;
	int n;

	if (is_dev_fd_path(o->mountpoint)) {
		snprintf(o->mountpoint_real, sizeof(o->mountpoint_real), "%s", o->mountpoint);
	} else {
		if (!realpath(o->mountpoint, o->mountpoint_real) || stat(o->mountpoint_real, &st)) {
			say("mountpoint %s: %s\n", o->mountpoint, strerror(errno));
			return -ENOENT;
		}
		if (!S_ISDIR(st.st_mode)) {
			say("mountpoint %s: not a directory\n", o->mountpoint);
			return -ENOTDIR;
		}
	}
	if (o->ram || o->rbd)
		return 0; /* an RBD image: the cluster is asked when it opens */
	/* SRC1,SRC2,...: every store of a pool (a path that exists with a
	 * comma in it is one store). */
	source_list = strdup(o->source);
	n = source_list ? cfs_pool_split_sources(source_list, source_paths, CFS_POOL_STORES_MAX)
			: -ENOMEM;
	if (n < 0) {
		say("%s: %s\n", o->source,
		    n == -E2BIG ? "more stores than a pool holds" : "an empty store path");
		return -EINVAL;
	}
	source_count = (unsigned)n;
	if (cfs_pool_check_distinct(source_paths, source_count, err, sizeof(err))) {
		say("%s\n", err);
		return -EINVAL;
	}
	for (unsigned i = 0; i < source_count; i++) {
		struct cfs_rbd_name name;
		const char *why;

		if (cfs_source_is_rbd(source_paths[i])) {
			/* the cluster is asked when it opens */
			if (cfs_rbd_name_parse(source_paths[i], &name, &why)) {
				say("%s: %s\n", source_paths[i], why);
				return -EINVAL;
			}
			continue;
		}
		if (stat(source_paths[i], &st)) {
			say("%s: %s\n", source_paths[i], strerror(errno));
			return -ENOENT;
		}
		if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
			say("%s: not a block device or an image file\n", source_paths[i]);
			return -EINVAL;
		}
	}
	if (o->blkdev) {
		if (source_count != 1) {
			say("blkdev: a pool cannot be mounted as one block device; mount it "
			    "without blkdev\n");
			return -EINVAL;
		}
		if (!S_ISBLK(st.st_mode)) {
			say("blkdev: %s is not a block device (an image file: attach it with "
			    "losetup --direct-io=on and mount /dev/loopN)\n",
			    o->source);
			return -EINVAL;
		}
		if (!realpath(o->source, o->blkdev_path)) {
			say("%s: %s\n", o->source, strerror(errno));
			return -ENOENT;
		}
	}
	return 0;
}

/* ---- daemonizing ---------------------------------------------------------- */

static int verdict_fd = -1;

/*
 * Fork; the parent waits for the child's verdict (one byte: the exit code)
 * or its death, and exits with it. Returns in the child.
 */
static void detach_begin(void)
{
	int pipefd[2];
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC)) {
		perror("chunkfs: pipe");
		exit(EXIT_MOUNT);
	}
	pid = fork();
	if (pid < 0) {
		perror("chunkfs: fork");
		exit(EXIT_MOUNT);
	}
	if (pid > 0) {
		unsigned char code;
		ssize_t n;
		int status;

		close(pipefd[1]);
		do
			n = read(pipefd[0], &code, 1);
		while (n < 0 && errno == EINTR);
		if (n == 1)
			_exit(code);
		/* The child died before its verdict: it printed why. */
		if (waitpid(pid, &status, 0) == pid && WIFEXITED(status))
			_exit(WEXITSTATUS(status) ? WEXITSTATUS(status) : EXIT_MOUNT);
		_exit(EXIT_MOUNT);
	}
	close(pipefd[0]);
	verdict_fd = pipefd[1];
	setsid();
}

/* The child mounted: detach from the terminal and release the parent. */
static void detach_finish(void)
{
	unsigned char ok = 0;
	int null_fd;

	if (verdict_fd < 0)
		return;
	if (chdir("/")) {
		/* "/" always exists; nothing to do if it does not */
	}
	null_fd = open("/dev/null", O_RDWR);
	if (null_fd >= 0) {
		dup2(null_fd, STDIN_FILENO);
		dup2(null_fd, STDOUT_FILENO);
		dup2(null_fd, STDERR_FILENO);
		if (null_fd > STDERR_FILENO)
			close(null_fd);
	}
	{
		struct stat st;

		if (stat("/dev/log", &st) == 0 && S_ISSOCK(st.st_mode)) {
			openlog("chunkfs", LOG_PID, LOG_DAEMON);
			log_sink = LOG_TO_SYSLOG;
		} else if ((kmsg_fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC)) >= 0) {
			log_sink = LOG_TO_KMSG;
		} else {
			openlog("chunkfs", LOG_PID, LOG_DAEMON); /* lost, as syslog(3) would */
			log_sink = LOG_TO_SYSLOG;
		}
	}
	if (write(verdict_fd, &ok, 1) != 1) {
		/* the parent is gone; nobody to tell */
	}
	close(verdict_fd);
	verdict_fd = -1;
}

/* ---- the store ------------------------------------------------------------ */

/*
 * A loop device's backing file, so that the store is locked under both of
 * its names (the image, and /dev/loopN over it). Empty if path is not a
 * loop device.
 */
static void loop_backing_file(const char *path, char *out, size_t out_bytes)
{
	char sys[128];
	struct stat st;

	out[0] = '\0';
	if (stat(path, &st) || !S_ISBLK(st.st_mode) || major(st.st_rdev) != 7)
		return;
	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u/loop/backing_file", major(st.st_rdev),
		 minor(st.st_rdev));
	cfs_text_first_line(sys, out, out_bytes);
}

/*
 * Take the store lock: flock(LOCK_EX) on our own fd of SOURCE (and of a loop
 * device's backing file), held until exit (O_CLOEXEC: inherited by nobody).
 * Every chunkfs takes it, so a second daemon on the same store, or the next
 * mount while the previous daemon still writes its checkpoint after umount,
 * finds it taken. Waits up to wait= seconds for a daemon that is finishing.
 */
static int lock_one(const struct options *o, const char *path, int *out_fd)
{
	struct timespec pause = {0, 100 * 1000 * 1000};
	unsigned tries = o->lock_wait_s * 10;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		say("%s: %s\n", path, strerror(errno));
		return -errno;
	}
	for (;;) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			break;
		if (errno != EWOULDBLOCK) {
			say("%s: cannot lock: %s\n", o->source, strerror(errno));
			close(fd);
			return -EIO;
		}
		if (!tries--) {
			say("%s: store in use (a chunkfs daemon may still be finishing "
			    "its checkpoint)\n",
			    o->source);
			close(fd);
			return -EBUSY;
		}
		if (o->verbose && tries + 1 == o->lock_wait_s * 10u)
			say("%s: held by another chunkfs; waiting up to %u s\n", o->source,
			    o->lock_wait_s);
		nanosleep(&pause, NULL);
	}
	*out_fd = fd;
	return 0;
}

/* Lock every store of SOURCE: lock_fd[2i] the path, lock_fd[2i+1] a loop
 * device's backing file. On failure the locks taken so far stay in lock_fd
 * for the caller to release. */
static int lock_store(const struct options *o, int *lock_fd)
{
	char backing[PATH_MAX];
	int ret;

	for (unsigned i = 0; i < source_count; i++) {
		if (cfs_source_is_rbd(source_paths[i]))
			continue; /* its exclusive lock is taken when it opens */
		ret = lock_one(o, source_paths[i], &lock_fd[2 * i]);
		if (ret)
			return ret;
		loop_backing_file(source_paths[i], backing, sizeof(backing));
		if (backing[0]) {
			ret = lock_one(o, backing, &lock_fd[2 * i + 1]);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/*
 * -o blkdev: the kernel's fuseblk mount opens the device exclusively, which
 * an O_EXCL fd of ours would refuse, so the store is opened without O_EXCL
 * and this fd holds the exclusive claim (an ext4 mount, mkfs, another
 * exclusive user) from before the metadata is read until just before the
 * mount takes it over.
 */
static int blkdev_claim = -1;

static void blkdev_release(void)
{
	if (blkdev_claim >= 0)
		close(blkdev_claim);
	blkdev_claim = -1;
}

static int open_store(const struct options *o, struct cfs_io **out)
{
	struct cfs_io_config cfg = {0};
	char err[512];
	int ret;

	if (o->rbd) {
		cfs_io_config_source(&cfg, o->source);
		cfg.read_only = o->read_only || o->fake;
		/* Even read-only: the lock keeps a writer away, as flock does. */
		cfg.exclusive = true;
		cfg.ceph = o->ceph;
		cfg.ceph.wait_s = o->lock_wait_s;
		cfg.log = backend_log;
		return cfs_io_open(&cfg, out); /* the backend says why it failed */
	} else if (o->ram) {
		cfg.backend = "ram";
		cfg.size_bytes = o->ram_size_bytes;
		/* dio_align=0 enforces nothing, but the written-state and the
		 * read-modify-write still work in 512-byte sectors (the data
		 * path takes unaligned O_DIRECT as a store mount does). */
		cfg.align_bytes = o->dio_align_bytes ? o->dio_align_bytes : 512;
		cfg.ram_flags = o->ram_flags;
	} else {
		cfg.backend = "uring";
		cfg.read_only = o->read_only || o->fake; /* fake: write nothing */
		cfg.exclusive = !o->blkdev;		 /* blkdev: blkdev_claim */
		cfg.fault_spec = o->fault_spec;
		/* for the pool's stores on RBD images */
		cfg.ceph = o->ceph;
		cfg.ceph.wait_s = o->lock_wait_s;
		cfg.log = backend_log;
		/* A block device must do direct I/O (cfs_pool_open_io asks for
		 * it); an image file on a filesystem that refuses O_DIRECT still
		 * works (iopath says so on stderr) and fsync keeps it durable. */
		cfg.dio = CFS_DIO_OPTIONAL;
	}
	/* EBUSY on a block device right after its previous daemon died: the
	 * kernel tears a dead process's io_uring down asynchronously, and the
	 * ring's file reference keeps the exclusive claim for a moment after
	 * the flock is gone. Wait for it as for the lock. */
	for (unsigned tries = o->lock_wait_s * 10;; tries--) {
		struct timespec pause = {0, 100 * 1000 * 1000};

		err[0] = '\0';
		ret = 0;
		if (o->blkdev && blkdev_claim < 0) {
			blkdev_claim = open(o->blkdev_path, O_RDONLY | O_CLOEXEC | O_EXCL);
			if (blkdev_claim < 0)
				ret = -errno;
		}
		/* Every store of the pool probed, checked against store 0's
		 * table and routed before anything is written (a single store
		 * is a pool of one). */
		if (!ret)
			ret = o->ram ? cfs_io_open(&cfg, out)
				     : cfs_pool_open_io(source_paths, source_count, &cfg,
							pool_sources, out, err, sizeof(err));
		if (ret != -EBUSY || !tries)
			break;
		nanosleep(&pause, NULL);
	}
	if (ret == 0)
		return 0;
	if (ret == -EBUSY)
		say("%s: device is busy (mounted, or held open exclusively by "
		    "another program)\n",
		    o->source);
	else if (o->ram)
		say("cannot create the RAM store: %s\n", strerror(-ret));
	else if (err[0])
		say("%s\n", err);
	else
		say("%s: cannot open: %s\n", o->source, strerror(-ret));
	return ret;
}

/* The metadata engine's log lines go where everything else goes. */
static void fs_log_line(void *arg, const char *line)
{
	(void)arg;
	fuse_log(FUSE_LOG_ERR, "chunkfs: %s\n", line);
}

static int open_metadata(const struct options *o, struct cfs_io *io, struct cfs_fs **out)
{
	struct cfs_fs_options fo = {0};
	char err[512] = "";
	int ret;

	fo.read_only = o->read_only || o->fake;
	fo.commit_interval_ms = o->commit_interval_set ? o->commit_interval_s * 1000u : 0;
	fo.no_discard = o->no_discard;
	fo.root_mode = 0755;
	fo.root_uid = getuid();
	fo.root_gid = getgid();
	fo.log = fs_log_line;
	if (!o->ram) {
		/* A single store too: its path names store 0 (chunkfs store add
		 * can make it a pool's). */
		fo.pool_sources = pool_sources;
		fo.pool_source_count = source_count;
	}
	if (o->ram)
		ret = cfs_fs_open_ram(io, &fo, out, err, sizeof(err));
	else
		ret = cfs_fs_open(io, &fo, out, err, sizeof(err));
	if (ret == 0)
		return 0;
	/* The engine names the reason (not a chunkfs store, corrupt
	 * superblock, unsupported version or feature, mkchunkfs interrupted,
	 * a replay failure); we only add the store. */
	if (err[0])
		say("%s: %s\n", o->ram ? "ram" : o->source, err);
	else
		say("%s: cannot mount: %s\n", o->ram ? "ram" : o->source, strerror(-ret));
	return ret;
}

/* Checkpoint and free the metadata (once; later calls do nothing). */
static void close_metadata(struct cfs_daemon *d, const char *source, int *exit_code)
{
	int ret;

	if (!d->fs)
		return;
	ret = cfs_fs_close(d->fs);
	d->fs = NULL;
	if (ret && *exit_code == 0) {
		fuse_log(FUSE_LOG_ERR, "chunkfs: %s: checkpoint at unmount failed: %s\n", source,
			 strerror(-ret));
		*exit_code = EXIT_MOUNT;
	}
}

/* ---- the FUSE session ----------------------------------------------------- */

static struct fuse_session *new_session(const struct options *o)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se = NULL;
	char *mo = NULL, *fsname = NULL;

	/* Escaped: a comma or backslash in the source path would otherwise
	 * split the option list. */
	if (asprintf(&fsname, "fsname=%s",
		     o->blkdev	 ? o->blkdev_path
		     : o->fsname ? o->fsname
				 : o->source) < 0) {
		fsname = NULL;
		goto out;
	}
	if (fuse_opt_add_arg(&args, o->prog) || fuse_opt_add_opt(&mo, "default_permissions") ||
	    fuse_opt_add_opt(&mo, "subtype=chunkfs") || fuse_opt_add_opt_escaped(&mo, fsname) ||
	    (o->allow_other && fuse_opt_add_opt(&mo, "allow_other")) ||
	    (o->blkdev && fuse_opt_add_opt(&mo, "blkdev")) ||
	    (o->kernel_flags[0] && fuse_opt_add_opt(&mo, o->kernel_flags)) ||
	    fuse_opt_add_arg(&args, "-o") || fuse_opt_add_arg(&args, mo) ||
	    (o->debug && fuse_opt_add_arg(&args, "-d")))
		goto out;
	se = fuse_session_new(&args, &cfs_ll_ops, sizeof(cfs_ll_ops), &cfs_daemon);
out:
	free(fsname);
	free(mo);
	fuse_opt_free_args(&args);
	if (!se)
		say("cannot create the FUSE session\n");
	return se;
}

/* ---- event loops ---------------------------------------------------------- */

static int stop_fd = -1; /* eventfd: written once to stop every loop */
static volatile sig_atomic_t crash_requested;

static void request_stop(void)
{
	uint64_t one = 1;

	if (write(stop_fd, &one, sizeof(one)) != sizeof(one)) {
		/* the counter cannot overflow from a few writes */
	}
}

enum { TAG_FUSE = 1, TAG_QUEUE, TAG_REMOTE, TAG_STOP, TAG_URING, TAG_URING_CQ };

static int ep_add(int ep, int fd, uint32_t events, uint64_t tag)
{
	struct epoll_event ev = {.events = events, .data.u64 = tag};

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

static void drain_eventfd(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: another wakeup already drained it */
	}
}

/* Receive and dispatch up to RECV_BATCH requests. False when the session
 * ended (unmount, fatal error). */
static bool receive_some(struct cfs_loop *l, struct fuse_session *se)
{
	for (int i = 0; i < RECV_BATCH && cfs_loop_can_receive(l); i++) {
		int res = fuse_session_receive_buf(se, cfs_loop_fuse_buf(l));

		if (res == -EAGAIN)
			return true; /* another loop took it */
		if (res == -EINTR)
			continue;
		if (res <= 0 || fuse_session_exited(se)) {
			if (res < 0)
				fuse_log(FUSE_LOG_ERR, "chunkfs: reading /dev/fuse: %s\n",
					 strerror(-res));
			return false;
		}
		cfs_tmpfile_note(cfs_loop_fuse_buf(l)->mem, (size_t)res);
		cfs_proto_note(cfs_loop_fuse_buf(l)->mem, (size_t)res);
		fuse_session_process_buf(se, cfs_loop_fuse_buf(l));
		if (fuse_session_exited(se))
			return false;
	}
	return true;
}

/* The batch's device I/O goes out in one submit once the device is busy
 * (cfs_loop_hold_submit). */
static bool receive_batch(struct cfs_loop *l, struct fuse_session *se)
{
	bool ok;

	cfs_loop_hold_submit(l, true);
	ok = receive_some(l, se);
	cfs_loop_hold_submit(l, false);
	return ok;
}

static void *loop_thread(void *arg)
{
	struct cfs_loop *l = arg;
	struct fuse_session *se = cfs_daemon.se;
	int fuse_fd = fuse_session_fd(se);
	/* FUSE over io_uring: ring requests are reaped here, and /dev/fuse
	 * still carries INIT, FORGET and INTERRUPT (transport_uring.h). */
	struct cfs_uring_loop *u = cfs_uring_loop_get(cfs_loop_index(l));
	bool armed = false, stopping = false, ring_polled = false;
	int ep;

	cfs_loop_enter(l);
	if (u)
		cfs_uring_loop_enter(u);
	else if (cfs_daemon.dev_wake_all)
		cfs_loop_pin_cpus(cfs_loop_index(l), cfs_daemon.loop_count,
				  (unsigned)sysconf(_SC_NPROCESSORS_CONF));
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0 || ep_add(ep, stop_fd, EPOLLIN, TAG_STOP) ||
	    (cfs_loop_queue_fd(l) >= 0 && ep_add(ep, cfs_loop_queue_fd(l), EPOLLIN, TAG_QUEUE)) ||
	    ep_add(ep, cfs_loop_remote_fd(l), EPOLLIN, TAG_REMOTE) ||
	    (u && ep_add(ep, cfs_uring_loop_fd(u), EPOLLIN, TAG_URING))) {
		fuse_log(FUSE_LOG_ERR, "chunkfs: loop %u: epoll: %s\n", cfs_loop_index(l),
			 strerror(errno));
		request_stop();
		stopping = true;
	}

	for (;;) {
		struct epoll_event evs[6];
		int n, timeout;

		cfs_loop_work(l);
		if (u) {
			/* Requests from the rings, their replies from the RAM
			 * path or completions, then every commit of the pass
			 * in one io_uring_enter. */
			for (int round = 0; round < 4; round++) {
				n = cfs_uring_loop_work(u, l, !stopping);
				if (n < 0 && !stopping) {
					request_stop();
					stopping = true;
				}
				if (n <= 0)
					break;
				cfs_loop_work(l);
			}
			cfs_uring_loop_flush(u);
			/* The ring exists once INIT negotiated it. */
			if (!ring_polled && cfs_uring_loop_ring_fd(u) >= 0) {
				if (ep_add(ep, cfs_uring_loop_ring_fd(u), EPOLLIN, TAG_URING_CQ))
					fuse_log(FUSE_LOG_ERR, "chunkfs: epoll: %s\n",
						 strerror(errno));
				ring_polled = true;
			}
		}
		if (stopping) {
			cfs_loop_stopping(l);
			if (cfs_loop_idle(l))
				break;
		} else if (cfs_loop_can_receive(l) != armed) {
			/* A loop whose contexts are all busy stops listening
			 * (level-triggered, it would otherwise spin here while
			 * the other loops sleep); the request waits for a loop
			 * with room. EPOLLEXCLUSIVE cannot be modified, only
			 * deleted and added again. */
			if (armed)
				epoll_ctl(ep, EPOLL_CTL_DEL, fuse_fd, NULL);
			else if (ep_add(ep, fuse_fd,
					EPOLLIN | (cfs_daemon.dev_wake_all ? 0u : EPOLLEXCLUSIVE),
					TAG_FUSE))
				fuse_log(FUSE_LOG_ERR, "chunkfs: epoll: %s\n", strerror(errno));
			armed = !armed;
		}

		/* A ring request arrives as task work that runs when this
		 * thread returns to user space (from the flush above, from an
		 * interrupt, or from epoll_wait, which it interrupts): look
		 * before sleeping, and epoll watches the ring fd for the CQEs
		 * posted in between. */
		timeout = cfs_loop_poll_timeout_ms(l);
		if (u && cfs_uring_loop_pending(u, l, !stopping))
			timeout = 0;
		n = epoll_wait(ep, evs, 6, timeout);
		if (n < 0 && errno != EINTR) {
			fuse_log(FUSE_LOG_ERR, "chunkfs: epoll_wait: %s\n", strerror(errno));
			request_stop();
			stopping = true;
			continue;
		}
		for (int i = 0; i < n; i++) {
			switch (evs[i].data.u64) {
			case TAG_STOP:
				if (!stopping && armed) {
					epoll_ctl(ep, EPOLL_CTL_DEL, fuse_fd, NULL);
					armed = false;
				}
				stopping = true;
				/* stays readable: every loop sees it */
				epoll_ctl(ep, EPOLL_CTL_DEL, stop_fd, NULL);
				break;
			case TAG_QUEUE:
				drain_eventfd(cfs_loop_queue_fd(l));
				break;
			case TAG_REMOTE:
				drain_eventfd(cfs_loop_remote_fd(l));
				break;
			case TAG_URING:
				cfs_uring_loop_drain(u);
				break;
			case TAG_URING_CQ:
				break; /* reaped at the top of the loop */
			case TAG_FUSE:
				if (!stopping && !receive_batch(l, se)) {
					request_stop();
				}
				break;
			}
		}
	}
	if (u)
		cfs_uring_loop_stop(u);
	if (ep >= 0)
		close(ep);
	return NULL;
}

/* ---- signals -------------------------------------------------------------- */

static void crash_handler(int sig)
{
	(void)sig;
	crash_requested = 1;
}

/*
 * Wait until the session ends: a signal (libfuse's handlers call
 * fuse_session_exit), a loop that saw the unmount, or, with fault=, SIGUSR1
 * (simulate a power loss). Loop threads block these signals, so they land
 * here, inside ppoll.
 */
static void wait_for_end(struct fuse_session *se, const sigset_t *unblocked)
{
	struct pollfd p = {.fd = stop_fd, .events = POLLIN};

	while (!fuse_session_exited(se) && !crash_requested) {
		int n = ppoll(&p, 1, NULL, unblocked);

		if (n > 0)
			break;
	}
	request_stop();
}

/* ---- main ----------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct options o = {0};
	struct cfs_daemon *d = &cfs_daemon;
	sigset_t block, old;
	int lock_fd[2 * CFS_POOL_STORES_MAX];
	int ret, exit_code = EXIT_MOUNT;

	for (unsigned i = 0; i < 2 * CFS_POOL_STORES_MAX; i++)
		lock_fd[i] = -1;
	unsigned started = 0;
	pthread_t *threads = NULL;

	/* `chunkfs stat ...`: a client of the mounted statistics, no daemon.
	 * (A store file named "stat" in the current directory is ./stat.) */
	if (argc >= 2 && strcmp(argv[1], "stat") == 0 && strncmp(base_name(argv[0]), "mount.", 6))
		return cfs_statcmd_main(argc - 1, argv + 1);
	/* `chunkfs move ...`: a client of user.chunkfs.move (fs/fuse/movecmd.c). */
	if (argc >= 2 && strcmp(argv[1], "move") == 0 && strncmp(base_name(argv[0]), "mount.", 6))
		return cfs_movecmd_main(argc - 1, argv + 1);
	/* `chunkfs store ...`: a client of user.chunkfs.stores (fs/fuse/storecmd.c). */
	if (argc >= 2 && strcmp(argv[1], "store") == 0 && strncmp(base_name(argv[0]), "mount.", 6))
		return cfs_storecmd_main(argc - 1, argv + 1);
	fuse_set_log_func(log_func);
	if (parse_args(&o, argc, argv))
		return EXIT_USAGE;
	if (check_paths(&o))
		return EXIT_MOUNT;
	if (!o.foreground && !o.fake)
		detach_begin();

	if (!o.ram && !o.rbd && lock_store(&o, lock_fd))
		goto out;
	if (open_store(&o, &d->io))
		goto out_unlock;
	d->geo = cfs_io_geometry(d->io);
	d->ram = o.ram;
	d->read_only = o.read_only;
	d->dio_align_bytes = o.ram ? o.dio_align_bytes : 0;
	d->source = o.source;
	d->hide_stats = o.hide_stats;
	d->write_behind = !o.writethrough;
	d->writeback_cache = o.writeback_cache;
	if (open_metadata(&o, d->io, &d->fs))
		goto out_close_io;
	if (o.writeback_cache && d->fs->geom.unit_bytes) {
		uint64_t unit = d->fs->geom.unit_bytes;
		uint64_t bytes = o.writeback_reserve_given ? o.writeback_reserve_bytes
							   : fuse_dirty_limit_bytes();

		cfs_pool_set_held_back(d->fs->pool, (bytes + unit - 1) / unit);
	}
	if (o.fake) {
		exit_code = 0;
		goto out_close_fs;
	}

	ret = cfs_loops_create(d, o.threads);
	if (ret) {
		say("cannot set up %u event loops: %s\n", o.threads, strerror(-ret));
		goto out_close_fs;
	}
	stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (stop_fd < 0) {
		say("eventfd: %s\n", strerror(errno));
		goto out_destroy_loops;
	}
	d->se = new_session(&o);
	if (!d->se)
		goto out_close_stop;
	if (fuse_set_signal_handlers(d->se)) {
		say("cannot install signal handlers\n");
		goto out_destroy_session;
	}
	if (o.fault_spec)
		signal(SIGUSR1, crash_handler);
	if (o.transport != CFS_TRANSPORT_DEV) {
		char why[256];

		if (cfs_uring_available(why, sizeof(why))) {
			if (o.transport == CFS_TRANSPORT_URING) {
				say("transport=uring: %s\n", why);
				goto out_remove_handlers;
			}
			o.transport = CFS_TRANSPORT_DEV; /* auto: /dev/fuse */
		}
	}
	/* The fuseblk mount claims the device itself (blkdev_claim). */
	blkdev_release();
	if (fuse_session_mount(d->se, o.mountpoint_real)) {
		say("cannot mount on %s\n", o.mountpoint);
		goto out_remove_handlers;
	}
	/* Every loop polls the same fd and must never block in read(). */
	if (fcntl(fuse_session_fd(d->se), F_SETFL,
		  fcntl(fuse_session_fd(d->se), F_GETFL) | O_NONBLOCK)) {
		say("cannot make /dev/fuse non-blocking: %s\n", strerror(errno));
		goto out_unmount;
	}
	/* Before the loops start: INIT is the first request they read. */
	if (o.transport != CFS_TRANSPORT_DEV) {
		ret = cfs_uring_setup(d->se, d->loop_count);
		if (ret) {
			say("FUSE over io_uring: %s\n", strerror(-ret));
			goto out_unmount;
		}
	} else if (fuse_session_custom_io(d->se, &cfs_proto_dev_io, fuse_session_fd(d->se))) {
		say("cannot set up /dev/fuse I/O\n");
		goto out_unmount;
	}
	/* A /dev/fuse reply is one writev(), from any thread; a ring entry is
	 * its loop's. */
	d->reply_any_thread = o.transport == CFS_TRANSPORT_DEV;
	d->dev_wake_all = o.transport == CFS_TRANSPORT_DEV && o.dev_wakeup == 1;

	/* Before the loops: they hand it O_DIRECT writes to answer. */
	ret = cfs_dio_inval_start(d->se);
	if (ret) {
		say("cannot start the page cache worker: %s\n", strerror(-ret));
		goto out_unmount;
	}

	/* Loops run with the stop signals blocked, so they arrive in the main
	 * thread's ppoll and never interrupt a loop between two steps. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	threads = calloc(d->loop_count, sizeof(*threads));
	if (!threads) {
		say("out of memory\n");
		goto out_unblock;
	}
	for (started = 0; started < d->loop_count; started++) {
		ret = pthread_create(&threads[started], NULL, loop_thread, d->loops[started]);
		if (ret) {
			say("cannot start event loop %u: %s\n", started, strerror(ret));
			request_stop();
			goto out_join;
		}
	}
	/* After the loops: it wakes them when its guard moves. */
	ret = cfs_mover_start(d);
	if (ret) {
		say("cannot start the mover: %s\n", strerror(-ret));
		request_stop();
		goto out_join;
	}
	/* The store locks go with the stores: a removed store is unlocked. */
	for (unsigned i = 0; i < source_count && !o.ram; i++) {
		for (unsigned j = 0; j < source_count; j++) {
			if (pool_sources[j].path != source_paths[i])
				continue;
			cfs_storeop_adopt_lock(pool_sources[j].io_store, lock_fd[2 * i],
					       lock_fd[2 * i + 1]);
			lock_fd[2 * i] = lock_fd[2 * i + 1] = -1;
		}
	}
	/* After the mover: a removal left in store 0's table goes on. */
	ret = cfs_storeop_start(d);
	if (ret) {
		say("cannot resume the removal of a store: %s\n", strerror(-ret));
		request_stop();
		goto out_join;
	}
	/* Mounted: the terminal is released first, so this line goes to
	 * syslog (or to stderr with -f). */
	detach_finish();
	fuse_log(FUSE_LOG_INFO, "chunkfs: %s mounted on %s (%s, %u threads)\n", o.source,
		 o.mountpoint_real, d->geo->backend, d->loop_count);
	exit_code = 0;

	{
		sigset_t unblocked = old;

		sigdelset(&unblocked, SIGINT);
		sigdelset(&unblocked, SIGTERM);
		sigdelset(&unblocked, SIGHUP);
		sigdelset(&unblocked, SIGUSR1);
		wait_for_end(d->se, &unblocked);
	}

out_join:
	/* Before the loops finish: writes parked behind its guard go once it
	 * stops (between two steps; the placement record resumes the move at
	 * the next mount). The removal of a store first: it asks the mover. */
	cfs_storeop_stop();
	cfs_mover_stop();
	for (unsigned i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	free(threads);
	{
		uint64_t batches, requests;

		/* How well the loops batched their device I/O (tests check it). */
		cfs_loops_submit_counts(d, &batches, &requests);
		if (requests)
			fuse_log(FUSE_LOG_INFO, "chunkfs: device: %llu requests in %llu submits\n",
				 (unsigned long long)requests, (unsigned long long)batches);
		requests = cfs_loops_reads_answered_elsewhere(d);
		if (requests) /* data.c, round_done: tests check it */
			fuse_log(FUSE_LOG_INFO,
				 "chunkfs: reads answered on the store's completion thread: %llu\n",
				 (unsigned long long)requests);
	}
	if (o.transport != CFS_TRANSPORT_DEV) {
		struct cfs_uring_counts c = {0};

		/* What the tests and the benchmarks check: the rings were in
		 * use, and /dev/fuse carried little more than INIT and FORGET. */
		cfs_uring_counts(&c);
		fuse_log(FUSE_LOG_INFO,
			 "chunkfs: transport %s: %llu requests over io_uring, %llu reads of "
			 "/dev/fuse\n",
			 c.negotiated ? "io_uring" : "/dev/fuse (io_uring not negotiated)",
			 (unsigned long long)c.ring_requests, (unsigned long long)c.dev_reads);
	}
out_unblock:
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (crash_requested) {
		/* Test-only power loss: every write not covered by a completed
		 * flush is dropped (or torn), nothing is checkpointed, the
		 * kernel sees the daemon vanish. */
		fuse_log(FUSE_LOG_WARNING, "chunkfs: SIGUSR1: simulating a power loss\n");
		cfs_fs_abandon(d->fs);
		ret = cfs_io_fault_crash(d->io, false);
		if (ret < 0)
			fuse_log(FUSE_LOG_ERR, "chunkfs: power loss simulation: %s\n",
				 strerror(-ret));
		_exit(exit_code);
	}
out_unmount:
	fuse_session_unmount(d->se);
	/* After the unmount released every entry the kernel held. */
	cfs_uring_teardown();
	/* After the unmount: its page cache drops no longer wait for reads. */
	cfs_dio_inval_stop();
	/* The checkpoint while the session still exists: fsyncs waiting in
	 * the committer are answered from cfs_fs_close() and their requests
	 * belong to the session (after the unmount the replies just fail). */
	cfs_loops_destroy(d);
	close_metadata(d, o.source, &exit_code);
out_remove_handlers:
	fuse_remove_signal_handlers(d->se);
out_destroy_session:
	fuse_session_destroy(d->se);
	d->se = NULL;
out_close_stop:
	close(stop_fd);
out_destroy_loops:
	cfs_loops_destroy(d);
out_close_fs:
	close_metadata(d, o.source, &exit_code);
out_close_io:
	cfs_io_close(d->io);
out_unlock:
	blkdev_release();
	/* Last: the next mount of this store may start only now. */
	for (unsigned i = 0; i < 2 * CFS_POOL_STORES_MAX; i++)
		if (lock_fd[i] >= 0)
			close(lock_fd[i]);
	cfs_storeop_unlock();
out:
	if (log_sink == LOG_TO_SYSLOG)
		closelog();
	else if (log_sink == LOG_TO_KMSG)
		close(kmsg_fd);
	return exit_code;
}
