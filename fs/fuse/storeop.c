// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * storeop.c — adding and removing the stores of a mounted pool
 * (fs/fuse/storeop.h, fs/POOLS.md "Adding and removing stores online").
 *
 * Add, in this order, so that a crash between two steps loses nothing:
 *   1. SOURCE opened and locked as a store (flock on the path, O_EXCL for a
 *      block device; an RBD image: its exclusive lock, taken by the rbd
 *      backend as it opens), checked: not a store of this pool, no chunkfs
 *      superblock, no signature libblkid knows (an RBD image through a copy
 *      of its ends, read through its window), the pool's logical sector;
 *   2. its superblocks written as a data store of the pool (the next index,
 *      units past every store's: cfs_sb_data_store_new, as mkchunkfs
 *      --join), through its superblock window, flushed;
 *   3. routed, and in the pool as *joining*: no unit of it is handed out;
 *   4. store 0's table with it written (a snapshot, next generation);
 *   5. active: units go there, placement and moves may name it.
 * Killed after 2, the pool is as it was and SOURCE carries the superblocks
 * of an interrupted add (a mount given it names it; an add of it writes
 * them again). After 4 the pool has the store: the next mount needs it.
 *
 * Remove: the store turns *removing* in store 0's table first (no new units
 * go there, the next mount resumes), then the removal thread, every
 * REMOVE_NAP_NS until nothing is left: drops the placements naming the
 * store, asks the mover to move each chunk with units there to another
 * store (its placement, else the pool's default, else the store with the
 * most room), cancels moves heading there. Once none of its units is used
 * or busy: out of the pool's allocators, out of store 0's table (snapshot),
 * its superblocks wiped (it can never be mounted as a member by mistake),
 * unrouted, closed, unlocked. Killed before the table write, the next mount
 * resumes the removal; after it, the store is gone from the pool and its
 * superblocks may still be there (a mount given it refuses it as not in the
 * table).
 *
 * Cancel ("cancel-remove STORE"), answered once it is durable: the removal
 * thread told to end and joined (its last step, out of the table, looks at
 * so.halt under the lock, so a cancel that got the lock first wins); the
 * store active in the pool (units go there again); every move off it
 * cancelled (the mover logs each walk back at once); then active in store
 * 0's table (a snapshot: its commit makes those walks back durable too).
 * Killed before the table write, the next mount resumes the removal (which
 * turns the walks back round again); after it, the store is active and the
 * walks back resume. Placements the removal dropped stay dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs/base/text.h"
#include "fs/fuse/move.h"
#include "fs/fuse/storeop.h"
#include "fs/meta/fs.h"
#include "fs/meta/journal.h"
#include "fs/meta/namespace.h"
#include "fs/meta/pool.h"
#include "fs/meta/signature.h"
#include "iopath/iopath.h"

/* How often the removal looks at what is left. */
#define REMOVE_NAP_NS 100000000ull
#define WHY_SLOTS 8u
#define WHY_BYTES 512u

static struct storeop {
	struct cfs_daemon *d;
	/* One request (or the unmount) at a time, held while it waits for the
	 * removal thread to end (which needs `lock`); before `lock`. */
	pthread_mutex_t request_lock;
	/* One request or removal step at a time; everything below. */
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int lock_fd[CFS_IO_STORES_MAX][2]; /* store locks, by cfs_io store */
	struct cfs_ioq *q;		   /* superblock windows (made on first use) */
	uint8_t *buf;			   /* CFS_SB_AREA_BYTES, aligned */
	/* The removal. */
	pthread_t thread;
	bool thread_joinable;
	bool stop;
	bool halt;	   /* the removal is being cancelled: its thread ends */
	uint32_t removing; /* CFS_STORE_NONE: none running */
	uint64_t rate_bytes;
	pid_t remove_pid;    /* 0: resumed by the mount */
	bool resumed;	     /* by this mount: the bytes moved off are counted since */
	const char *stopped; /* why the removal stopped, NULL while it runs */
	/* The last store removed: a cancel of it says the removal finished. */
	char removed_label[CFS_LABEL_BYTES];
	uint32_t removed_index;
	/* Why the last request of a process was refused (or what its cancel
	 * did). */
	pthread_mutex_t why_lock;
	struct {
		pid_t pid;
		char text[WHY_BYTES];
	} why[WHY_SLOTS];
	unsigned why_next;
} so = {
	.request_lock = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
	.why_lock = PTHREAD_MUTEX_INITIALIZER,
	.removing = CFS_STORE_NONE,
	.removed_index = CFS_STORE_NONE,
};

static bool locks_ready;

#define FS() (so.d->fs)

static void locks_init(void)
{
	if (locks_ready)
		return;
	for (unsigned i = 0; i < CFS_IO_STORES_MAX; i++)
		so.lock_fd[i][0] = so.lock_fd[i][1] = -1;
	locks_ready = true;
}

static void set_why(pid_t pid, const char *text)
{
	unsigned slot = WHY_SLOTS;

	pthread_mutex_lock(&so.why_lock);
	for (unsigned i = 0; i < WHY_SLOTS; i++)
		if (so.why[i].pid == pid)
			slot = i;
	if (slot == WHY_SLOTS) {
		slot = so.why_next;
		so.why_next = (so.why_next + 1) % WHY_SLOTS;
	}
	so.why[slot].pid = pid;
	snprintf(so.why[slot].text, WHY_BYTES, "%s", text);
	pthread_mutex_unlock(&so.why_lock);
}

size_t cfs_storeop_why(pid_t pid, char *text, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&so.why_lock);
	for (unsigned i = 0; i < WHY_SLOTS; i++)
		if (so.why[i].pid == pid && so.why[i].text[0])
			n = (size_t)snprintf(text, max, "%s", so.why[i].text);
	pthread_mutex_unlock(&so.why_lock);
	return n;
}

/* Test hook: CHUNKFS_TEST_KILL=stage kills the daemon at that stage (a
 * crash between two steps, without the unmount's checkpoint). */
static void test_kill_point(const char *stage)
{
	const char *want = getenv("CHUNKFS_TEST_KILL");

	if (want && !strcmp(want, stage))
		raise(SIGKILL);
}

static void unlock_store(unsigned io_store)
{
	for (unsigned k = 0; k < 2; k++) {
		if (so.lock_fd[io_store][k] >= 0)
			close(so.lock_fd[io_store][k]);
		so.lock_fd[io_store][k] = -1;
	}
}

void cfs_storeop_adopt_lock(unsigned io_store, int path_fd, int backing_fd)
{
	pthread_mutex_lock(&so.lock);
	locks_init();
	if (io_store < CFS_IO_STORES_MAX) {
		so.lock_fd[io_store][0] = path_fd;
		so.lock_fd[io_store][1] = backing_fd;
	}
	pthread_mutex_unlock(&so.lock);
}

void cfs_storeop_unlock(void)
{
	pthread_mutex_lock(&so.lock);
	locks_init();
	for (unsigned i = 0; i < CFS_IO_STORES_MAX; i++)
		unlock_store(i);
	pthread_mutex_unlock(&so.lock);
}

/* ---- superblock windows --------------------------------------------------------------- */

/* [lock] The queue and buffer for superblock I/O. */
static int window_ready(void)
{
	struct cfs_ioq_config cfg = {.depth = 4};
	int ret;

	if (!so.buf && posix_memalign((void **)&so.buf, 4096, CFS_SB_AREA_BYTES))
		return -ENOMEM;
	if (!so.q) {
		ret = cfs_ioq_create(so.d->io, &cfg, &so.q);
		if (ret)
			return ret;
	}
	return 0;
}

static uint64_t window_of(unsigned io_store)
{
	return CFS_POOL_RAW_BASE + io_store * CFS_POOL_RAW_STRIDE;
}

/* [lock] Write so.buf[0..bytes) at the start of the store's superblock
 * area, then flush. */
static int window_write(unsigned io_store, uint64_t bytes)
{
	int ret = cfs_ioq_sync_range(so.q, CFS_IO_WRITE, window_of(io_store), bytes, so.buf);

	if (!ret) {
		ret = cfs_ioq_sync(so.q, CFS_IO_FLUSH, 0, 0, NULL, NULL);
		ret = ret < 0 ? ret : 0;
	}
	return ret;
}

/* [lock] Both superblock slots of a new data store, one at a time as
 * mkchunkfs writes them: slot 1 (generation 1) first, then slot 0. */
static int write_superblocks(unsigned io_store, struct cfs_sb *sb, uint32_t sector_bytes)
{
	uint64_t bytes = 2 * CFS_SB_BLOCK_BYTES;
	struct timespec now;
	int ret;

	if (bytes % sector_bytes)
		bytes = (bytes / sector_bytes + 1) * sector_bytes;
	clock_gettime(CLOCK_REALTIME, &now);
	sb->flags = 0;
	sb->ctime_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	sb->wtime_ns = sb->ctime_ns;
	memset(so.buf, 0, CFS_SB_AREA_BYTES);
	for (uint64_t generation = 1; generation <= 2; generation++) {
		sb->generation = generation;
		cfs_sb_encode(sb, so.buf + CFS_SB_SLOT_OFFSET_BYTES(cfs_sb_slot(generation)));
		ret = window_write(io_store, bytes);
		if (ret)
			return ret;
	}
	return 0;
}

/* [lock] Zeros over the store's whole superblock area. */
static int wipe_superblocks(unsigned io_store)
{
	memset(so.buf, 0, CFS_SB_AREA_BYTES);
	return window_write(io_store, CFS_SB_AREA_BYTES);
}

/* ---- routes ------------------------------------------------------------------------- */

/* The routes in force without those of io_store, then with `add` (n_add
 * of them). */
static int reroute(unsigned drop_store, const struct cfs_io_route *add, unsigned n_add)
{
	struct cfs_io_route routes[CFS_IO_ROUTES_MAX];
	unsigned n = cfs_io_get_routes(so.d->io, routes, CFS_IO_ROUTES_MAX), kept = 0;

	for (unsigned i = 0; i < n; i++)
		if (routes[i].store != drop_store)
			routes[kept++] = routes[i];
	if (kept + n_add > CFS_IO_ROUTES_MAX)
		return -ENOSPC;
	if (n_add) /* add may be NULL then: memcpy's arguments must not */
		memcpy(&routes[kept], add, n_add * sizeof(*add));
	return cfs_io_set_routes(so.d->io, routes, kept + n_add);
}

/* ---- add ------------------------------------------------------------------------------ */

/* [lock] A single store about to become store 0 of a pool: its own routes
 * (the whole store, and its superblock window), the identity it had
 * without any. */
static int route_store0(const struct cfs_sb *s0)
{
	uint64_t lsec = s0->logical_sector_bytes;
	struct cfs_io_route self[2] = {
		{0, s0->store_size_bytes & ~(lsec - 1), 0, 0},
		{window_of(0), CFS_SB_AREA_BYTES, 0, 0},
	};

	return reroute(0, self, 2);
}

struct add_req {
	const char *source;
	const char *label; /* NULL: none */
};

/* Read both superblock slots of fd (zeros past a short end). */
static int read_slots(int fd, uint8_t *slots)
{
	size_t done = 0;

	memset(slots, 0, 2 * CFS_SB_BLOCK_BYTES);
	while (done < 2 * CFS_SB_BLOCK_BYTES) {
		ssize_t n = pread(fd, slots + done, 2 * CFS_SB_BLOCK_BYTES - done, (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return 0;
}

/* Is SOURCE free to become a store of the pool table describes? 0 (with
 * *rewrite when it holds the superblocks of an interrupted add of this
 * pool), or -errno with msg. fd: SOURCE, buffered. */
static int check_source(int fd, const char *source, const struct cfs_sb *table, char *msg,
			size_t msg_bytes)
{
	uint8_t slots[2 * CFS_SB_BLOCK_BYTES];
	char uuid[CFS_UUID_STR_BYTES], err[256] = "";
	struct cfs_signatures found;
	struct cfs_sb sb;
	bool ours = false;
	int ret;

	ret = read_slots(fd, slots);
	if (ret) {
		cfs_text_error(msg, msg_bytes, "%s: cannot read it: %s", source, strerror(-ret));
		return ret;
	}
	if (cfs_sb_pick(slots, slots + CFS_SB_BLOCK_BYTES, &sb, NULL, NULL) >= 0 &&
	    (sb.incompat & CFS_FEAT_INCOMPAT_POOL) &&
	    !memcmp(sb.pool_uuid, table->uuid, CFS_UUID_BYTES)) {
		for (uint32_t i = 0; i < table->store_count; i++) {
			if (memcmp(table->stores[i].uuid, sb.uuid, CFS_UUID_BYTES))
				continue;
			cfs_text_error(msg, msg_bytes,
				       "%s is already store %s (index %" PRIu32 ") of this pool",
				       source, sb.label[0] ? sb.label : "without a label",
				       table->stores[i].index);
			return -EEXIST;
		}
		ours = true; /* an interrupted add (or a removed store): written again */
	} else if (cfs_sb_pick(slots, slots + CFS_SB_BLOCK_BYTES, &sb, NULL, NULL) >= 0 &&
		   cfs_sb_is_data_store(&sb)) {
		cfs_uuid_unparse(sb.pool_uuid, uuid);
		cfs_text_error(msg, msg_bytes,
			       "%s is a store of another pool (pool %s): chunkfs store add never "
			       "overwrites a store",
			       source, uuid);
		return -EEXIST;
	}
	ret = cfs_signatures_find(fd, ours ? NULL : slots, &found, err, sizeof(err));
	if (ret) {
		cfs_text_error(msg, msg_bytes, "%s: %s", source, err);
		return ret;
	}
	if (found.count) {
		cfs_text_error(msg, msg_bytes,
			       "%s contains %s: chunkfs store add never overwrites it (erase it "
			       "first if it is not needed, e.g. wipefs -a)",
			       source, found.what);
		return -EEXIST;
	}
	return 0;
}

/*
 * What the rbd backend said last while an add opened an image (who holds
 * its lock, no such image, the cluster unreachable): the command's answer.
 * Every line also goes to the daemon's log, for as long as the image is a
 * store (its fencing is said here too).
 */
static struct {
	pthread_mutex_t lock;
	bool listening;
	char line[WHY_BYTES];
} rbd_said = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void rbd_log(void *arg, const char *line)
{
	(void)arg;
	cfs_fs_log(FS(), "%s", line);
	pthread_mutex_lock(&rbd_said.lock);
	if (rbd_said.listening)
		snprintf(rbd_said.line, sizeof(rbd_said.line), "%s", line);
	pthread_mutex_unlock(&rbd_said.lock);
}

static void rbd_listen(bool on)
{
	pthread_mutex_lock(&rbd_said.lock);
	rbd_said.listening = on;
	if (on)
		rbd_said.line[0] = '\0';
	pthread_mutex_unlock(&rbd_said.lock);
}

/* [lock] Read [offset, offset + length) of an RBD store not yet in the pool:
 * its superblock window routed there for the read. */
static int rbd_probe_read(void *arg, void *buf, uint64_t length, uint64_t offset)
{
	unsigned io_store = *(const unsigned *)arg;
	struct cfs_io_route probe = {window_of(io_store), length, offset, io_store};
	int ret = reroute(io_store, &probe, 1);

	return ret ? ret : cfs_ioq_sync_range(so.q, CFS_IO_READ, window_of(io_store), length, buf);
}

/* [lock] check_source() for an RBD image opened (and locked) as io_store:
 * blkid and the superblock check read a copy of its ends. first: the mount
 * is a single store, routed as store 0 of a pool before any route names
 * another store. */
static int check_rbd_source(unsigned io_store, const char *source, const struct cfs_sb *table,
			    bool first, char *msg, size_t msg_bytes)
{
	const struct cfs_io_geometry *geo = cfs_io_store_geometry(so.d->io, io_store);
	uint64_t size = geo->size_bytes & ~(uint64_t)(geo->logical_sector_bytes - 1);
	char err[256];
	int fd, ret;

	ret = window_ready();
	if (!ret && first)
		ret = route_store0(table);
	if (ret) {
		cfs_text_error(msg, msg_bytes, "%s: cannot route it: %s", source, strerror(-ret));
		return ret;
	}
	ret = cfs_signature_probe_copy(size, rbd_probe_read, &io_store, &fd, err, sizeof(err));
	if (ret) {
		cfs_text_error(msg, msg_bytes, "%s: %s", source, err);
		return ret;
	}
	ret = check_source(fd, source, table, msg, msg_bytes);
	close(fd);
	return ret;
}

/* [lock] */
static int store_add(const struct add_req *r, char *msg, size_t msg_bytes)
{
	struct cfs_io_config cfg = {0};
	const struct cfs_io_geometry *geo;
	struct cfs_io_route add[2];
	struct cfs_store_entry e;
	struct cfs_sb table, sb, next;
	uint8_t uuid[CFS_UUID_BYTES];
	const char *why = NULL;
	struct stat st;
	int fd = -1, io_store = -1, ret;
	bool pooled = false, written = false, first, rbd = cfs_source_is_rbd(r->source);
	uint64_t au;

	cfs_journal_table(FS()->journal, &table);
	/* A single store becomes store 0 of a pool of two. */
	first = !(table.incompat & CFS_FEAT_INCOMPAT_POOL);
	if (first && cfs_source_is_rbd(so.d->source)) {
		cfs_text_error(msg, msg_bytes,
			       "this mount is a single store on an RBD image: a pool's first store "
			       "(it holds the metadata) must be a local device or image file");
		return -EOPNOTSUPP;
	}
	if (rbd) {
		struct cfs_pool_store_info info;
		struct cfs_rbd_name name;

		if (cfs_rbd_name_parse(r->source, &name, &why)) {
			cfs_text_error(msg, msg_bytes, "%s: %s", r->source, why);
			return -EINVAL;
		}
		why = NULL;
		/* Its lock would refuse it, naming this daemon as its holder:
		 * say what that means. */
		for (unsigned i = 0; cfs_pool_store_at(FS()->pool, i, &info) == 0; i++) {
			if (strcmp(info.source, r->source))
				continue;
			cfs_text_error(msg, msg_bytes,
				       "%s is already store %s (index %" PRIu32 ") of this pool",
				       r->source, info.label[0] ? info.label : "without a label",
				       info.index);
			return -EEXIST;
		}
	} else if (r->source[0] != '/') {
		cfs_text_error(msg, msg_bytes, "%s: give SOURCE as an absolute path", r->source);
		return -EINVAL;
	}
	if (r->label && strlen(r->label) >= CFS_LABEL_BYTES) {
		cfs_text_error(msg, msg_bytes, "label %s: longer than %u bytes", r->label,
			       CFS_LABEL_BYTES - 1);
		return -EINVAL;
	}
	cfg.path = r->source;
	cfg.exclusive = true;
	if (rbd) {
		/* The image's exclusive lock, as its open takes it: a live
		 * holder refuses the add (no takeover here). */
		cfg.dio = CFS_DIO_OPTIONAL;
		cfg.log = rbd_log;
		goto open_store;
	}
	fd = open(r->source, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		ret = -errno;
		cfs_text_error(msg, msg_bytes, "%s: %s", r->source, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		ret = -EINVAL;
		cfs_text_error(msg, msg_bytes, "%s: not a block device or an image file",
			       r->source);
		goto out;
	}
	ret = check_source(fd, r->source, &table, msg, msg_bytes);
	if (ret)
		goto out;
	/* The store lock every chunkfs, mkchunkfs and fsck takes. */
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		ret = -EBUSY;
		cfs_text_error(msg, msg_bytes,
			       "%s: in use (mounted by chunkfs, or checked by fsck.chunkfs)",
			       r->source);
		goto out;
	}
	cfg.dio = S_ISBLK(st.st_mode) ? CFS_DIO_REQUIRED : CFS_DIO_OPTIONAL;
open_store:
	rbd_listen(rbd);
	io_store = cfs_io_add_store(so.d->io, &cfg);
	rbd_listen(false);
	if (io_store < 0) {
		ret = io_store;
		if (rbd && rbd_said.line[0]) /* the backend said why, naming it */
			cfs_text_error(msg, msg_bytes, "%s", rbd_said.line);
		else
			cfs_text_error(msg, msg_bytes, "%s: %s", r->source,
				       ret == -EBUSY ? "busy (mounted, or open exclusively by "
						       "another program)"
				       : ret == -EINVAL
					       ? "cannot be a store of this pool (its logical "
						 "sector size or buffer alignment differs from "
						 "the pool's)"
					       : strerror(-ret));
		goto out;
	}
	if (rbd) {
		ret = check_rbd_source((unsigned)io_store, r->source, &table, first, msg,
				       msg_bytes);
		if (ret)
			goto out;
	}
	geo = cfs_io_store_geometry(so.d->io, (unsigned)io_store);
	ret = cfs_uuid_generate(uuid);
	if (!ret)
		ret = cfs_sb_data_store_new(&table, geo->size_bytes, geo->logical_sector_bytes,
					    geo->physical_sector_bytes, uuid, r->label, &sb, &why);
	if (!ret)
		ret = cfs_sb_table_add(&table, &sb, &next, &why);
	if (ret) {
		cfs_text_error(msg, msg_bytes, "%s: %s", r->source,
			       ret == -ENOSPC ? "the pool holds the most stores it can (32)"
			       : why	      ? why
					      : strerror(-ret));
		goto out;
	}
	/* Its superblock window first: the superblocks go through it. */
	add[0] = (struct cfs_io_route){window_of((unsigned)io_store), CFS_SB_AREA_BYTES, 0,
				       (unsigned)io_store};
	ret = window_ready();
	if (!ret && first)
		ret = route_store0(&table);
	if (!ret)
		ret = reroute((unsigned)io_store, add, 1);
	if (!ret) {
		written = true;
		ret = write_superblocks((unsigned)io_store, &sb, geo->logical_sector_bytes);
	}
	if (ret) {
		cfs_text_error(msg, msg_bytes, "%s: writing its superblocks failed: %s", r->source,
			       strerror(-ret));
		goto out;
	}
	test_kill_point("store-add-written");
	au = table.alloc_unit_bytes;
	add[1] = (struct cfs_io_route){table.data_offset_bytes + sb.unit_base * au,
				       sb.data_unit_count * au, sb.data_offset_bytes,
				       (unsigned)io_store};
	memset(&e, 0, sizeof(e));
	memcpy(e.uuid, sb.uuid, CFS_UUID_BYTES);
	e.index = sb.store_index;
	e.unit_base = sb.unit_base;
	e.unit_count = sb.data_unit_count;
	memcpy(e.label, sb.label, CFS_LABEL_BYTES);
	ret = reroute((unsigned)io_store, add, 2);
	if (!ret) {
		ret = cfs_pool_add_store(FS()->pool, &e, CFS_STORE_JOINING, (unsigned)io_store,
					 geo->size_bytes, r->source);
		pooled = ret == 0;
	}
	if (ret) {
		cfs_text_error(msg, msg_bytes, "%s: cannot route it: %s", r->source,
			       strerror(-ret));
		goto out;
	}
	/* The add takes effect here: the next mount needs the store. */
	ret = cfs_journal_write_table(FS(), &next);
	if (ret) {
		cfs_text_error(msg, msg_bytes,
			       "writing store 0's table of stores failed: %s; the store was not "
			       "added",
			       strerror(-ret));
		goto out;
	}
	cfs_pool_set_state(FS()->pool, e.index, CFS_STORE_ACTIVE);
	so.lock_fd[io_store][0] = fd;
	cfs_fs_log(FS(),
		   "store %s (index %" PRIu32 ", %s) added: %" PRIu64 " units of %" PRIu64 " bytes",
		   e.label[0] ? e.label : "without a label", e.index, r->source, e.unit_count, au);
	if (first)
		cfs_fs_log(FS(),
			   "%s is store 0 of a pool now: mount it as %s,%s from now on (fstab "
			   "too)",
			   so.d->source, so.d->source, r->source);
	return 0;

out:
	/* Nothing of it stays: out of the pool, unrouted, closed, its new
	 * superblocks wiped where they were written. */
	if (pooled)
		cfs_pool_drop_store(FS()->pool, e.index);
	if (io_store >= 0) {
		if (written && so.q)
			wipe_superblocks((unsigned)io_store);
		reroute((unsigned)io_store, NULL, 0);
		cfs_io_drop_store(so.d->io, (unsigned)io_store);
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

/* ---- remove --------------------------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Bytes as a DBA reads them: "3.50 GiB", "24.0 MiB". */
static void gib(uint64_t bytes, char *out, size_t out_bytes)
{
	if (bytes >= (1ull << 30))
		snprintf(out, out_bytes, "%.2f GiB", (double)bytes / (double)(1ull << 30));
	else
		snprintf(out, out_bytes, "%.1f MiB", (double)bytes / (double)(1ull << 20));
}

/* Units the other active stores can take (free now or once busy units are
 * released, above what they hold back for the kernel's write-back), and
 * what `store` holds. */
static void room(uint32_t store, uint64_t *held_units, uint64_t *room_units)
{
	struct cfs_pool_store_info info;

	*held_units = *room_units = 0;
	for (unsigned i = 0; cfs_pool_store_at(FS()->pool, i, &info) == 0; i++) {
		if (info.index == store)
			*held_units = info.space.used_units + info.space.busy_units;
		else if (info.state == CFS_STORE_ACTIVE)
			*room_units += info.room_units;
	}
}

/* [lock] The removal stops (kept in the table: a remove request or the
 * next mount takes it up again). */
static void stop_removal(const char *reason, const char *text)
{
	so.stopped = reason;
	set_why(so.remove_pid, text);
	cfs_fs_log(FS(), "removal of store %" PRIu32 " stopped: %s", so.removing, text);
}

/* Ask the mover to take chunk ino off `store`: its placement, else the
 * default, else any active store with room. 0 (moving, or nothing to do
 * now), -ENOSPC (no store can take it), or another error. */
static int evacuate(uint64_t ino, uint32_t store, uint64_t rate)
{
	struct cfs_pool_store_info info;
	struct cfs_place place;
	uint32_t to, tried[CFS_POOL_STORES_MAX];
	unsigned n = 0;
	int ret = -ENOSPC;

	if (cfs_mover_moving_to(ino, &to)) {
		/* Heading for the store: back where it came from first. */
		if (to == store)
			cfs_mover_cancel(ino);
		return 0;
	}
	if (cfs_ns_place_get(FS(), ino, &place))
		return 0; /* deleted meanwhile */
	if (place.store != CFS_STORE_NONE && place.store != store &&
	    cfs_pool_store_state(FS()->pool, place.store) == CFS_STORE_ACTIVE)
		tried[n++] = place.store;
	to = cfs_pool_default_store(FS()->pool);
	if (to != store && (n == 0 || tried[0] != to))
		tried[n++] = to;
	for (unsigned i = 0; cfs_pool_store_at(FS()->pool, i, &info) == 0; i++) {
		bool seen = info.index == store || info.state != CFS_STORE_ACTIVE;

		for (unsigned k = 0; k < n && !seen; k++)
			seen = tried[k] == info.index;
		if (!seen && n < CFS_POOL_STORES_MAX)
			tried[n++] = info.index;
	}
	for (unsigned k = 0; k < n; k++) {
		ret = cfs_mover_request(ino, tried[k], rate);
		if (ret != -ENOSPC && ret != -EINVAL)
			break;
	}
	if (ret == -EBUSY || ret == -ENOENT)
		ret = 0; /* a move of it is running (it ends off the store), or it is gone */
	return ret == -EINVAL ? -ENOSPC : ret;
}

/* Placements naming the store are dropped (the root's: the default). */
static void drop_placements(uint32_t store)
{
	struct cfs_place none = {CFS_STORE_NONE, CFS_STORE_NONE, 0, 0};
	uint64_t *inos = NULL;
	unsigned n = 0;

	if (cfs_ns_places_on(FS(), store, &inos, &n))
		return;
	for (unsigned i = 0; i < n; i++)
		cfs_ns_place_set(FS(), inos[i], &none);
	free(inos);
}

/* [lock] The store holds nothing: out of the pool, out of the table,
 * wiped, unrouted, closed, unlocked. */
static int finish_removal(uint32_t store)
{
	struct cfs_pool_store_info info;
	struct cfs_sb table, next;
	char label[CFS_LABEL_BYTES + 16];
	int ret;

	ret = cfs_pool_store_info(FS()->pool, store, &info);
	if (ret)
		return ret;
	cfs_pool_store_name(FS()->pool, store, label, sizeof(label));
	/* First out of the allocators (refused while a unit is in use), so
	 * nothing can be handed out there once the table no longer has it. */
	ret = cfs_pool_drop_store(FS()->pool, store);
	if (ret)
		return ret;
	cfs_journal_table(FS()->journal, &table);
	ret = cfs_sb_table_remove(&table, store, &next);
	if (!ret)
		ret = cfs_journal_write_table(FS(), &next);
	if (ret) {
		struct cfs_store_entry e = {0};

		/* Still in the table: back in the pool, removing. */
		e.index = info.index;
		e.unit_base = info.unit_base;
		e.unit_count = info.unit_count;
		memcpy(e.label, info.label, CFS_LABEL_BYTES);
		for (uint32_t i = 0; i < table.store_count; i++)
			if (table.stores[i].index == store)
				memcpy(e.uuid, table.stores[i].uuid, CFS_UUID_BYTES);
		cfs_pool_add_store(FS()->pool, &e, CFS_STORE_REMOVING, info.io_store,
				   info.size_bytes, info.source);
		return ret;
	}
	test_kill_point("store-remove-dropped");
	/* Not a member any more: its superblocks must not say it is. */
	if (window_ready() || wipe_superblocks(info.io_store))
		cfs_fs_log(FS(),
			   "store %s left the pool but its superblocks could not be wiped: a "
			   "mount given it refuses it as not in the pool's table",
			   label);
	reroute(info.io_store, NULL, 0);
	cfs_io_drop_store(so.d->io, info.io_store);
	unlock_store(info.io_store);
	memcpy(so.removed_label, info.label, CFS_LABEL_BYTES);
	so.removed_index = store;
	cfs_fs_log(FS(), "store %s (index %" PRIu32 ", %s) removed", label, store,
		   info.source[0] ? info.source : "-");
	return 0;
}

/* Should the removal thread end: an unmount, or a cancel? */
static bool halted(void)
{
	bool halt;

	pthread_mutex_lock(&so.lock);
	halt = so.stop || so.halt;
	pthread_mutex_unlock(&so.lock);
	return halt;
}

/* One look at what is left on the store: true when the removal is over
 * (finished, stopped, or cancelled). */
static bool removal_step(uint32_t store, uint64_t rate)
{
	struct cfs_pool_store_info info;
	char text[WHY_BYTES], label[CFS_LABEL_BYTES + 16];
	uint64_t *inos = NULL;
	unsigned n = 0;
	int ret;

	cfs_pool_store_name(FS()->pool, store, label, sizeof(label));
	drop_placements(store);
	if (cfs_pool_store_info(FS()->pool, store, &info))
		return true;
	ret = cfs_ns_files_on(FS(), info.unit_base, info.unit_count, &inos, &n);
	if (ret)
		return false; /* no memory now: the next look */
	for (unsigned i = 0; i < n && !ret && !halted(); i++) {
		ret = evacuate(inos[i], store, rate);
		if (ret == -ENOSPC) {
			uint64_t held, free_units;
			char need[32], have[32];

			room(store, &held, &free_units);
			gib(held * FS()->geom.unit_bytes, need, sizeof(need));
			gib(free_units * FS()->geom.unit_bytes, have, sizeof(have));
			snprintf(text, sizeof(text),
				 "no store has room for inode %" PRIu64
				 "'s units: %s still holds %s, the other stores have %s free",
				 inos[i], label, need, have);
			pthread_mutex_lock(&so.lock);
			stop_removal("nospace", text);
			pthread_mutex_unlock(&so.lock);
		} else if (ret) {
			snprintf(text, sizeof(text), "moving inode %" PRIu64 " off %s failed: %s",
				 inos[i], label, strerror(-ret));
			pthread_mutex_lock(&so.lock);
			stop_removal("error", text);
			pthread_mutex_unlock(&so.lock);
		}
	}
	free(inos);
	if (ret)
		return true;
	if (n)
		return false;
	if (info.space.used_units == 0 && info.space.busy_units == 0) {
		pthread_mutex_lock(&so.lock);
		if (so.halt) {
			/* Cancelled first: the store stays. */
			pthread_mutex_unlock(&so.lock);
			return true;
		}
		ret = finish_removal(store);
		if (ret == -EBUSY) {
			pthread_mutex_unlock(&so.lock);
			return false; /* a unit was taken meanwhile: look again */
		}
		if (ret) {
			snprintf(text, sizeof(text), "taking %s out of the pool failed: %s", label,
				 strerror(-ret));
			stop_removal("error", text);
		}
		pthread_mutex_unlock(&so.lock);
		return true;
	}
	if (info.space.busy_units) {
		/* Freed by moves, free once durable. */
		cfs_journal_commit_sync(FS());
		return false;
	}
	return false; /* units still referenced by I/O in flight */
}

static void *removal_thread(void *arg)
{
	uint32_t store;
	uint64_t rate;

	(void)arg;
	pthread_mutex_lock(&so.lock);
	store = so.removing;
	rate = so.rate_bytes;
	pthread_mutex_unlock(&so.lock);
	for (;;) {
		struct timespec until;
		uint64_t deadline;

		if (halted() || removal_step(store, rate))
			break;
		deadline = now_ns() + REMOVE_NAP_NS;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += (long)REMOVE_NAP_NS;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_mutex_lock(&so.lock);
		while (!so.stop && !so.halt && now_ns() < deadline &&
		       pthread_cond_timedwait(&so.wake, &so.lock, &until) == 0)
			;
		pthread_mutex_unlock(&so.lock);
	}
	pthread_mutex_lock(&so.lock);
	if (!so.stopped)
		so.removing = CFS_STORE_NONE; /* finished (or stopped for the unmount) */
	pthread_mutex_unlock(&so.lock);
	return NULL;
}

/* [request_lock, lock] Wait for the removal thread to end (the caller
 * told it to, or it has). `lock` is let go meanwhile: the thread needs it;
 * request_lock keeps other requests out. */
static void removal_join(void)
{
	if (!so.thread_joinable)
		return;
	pthread_mutex_unlock(&so.lock);
	pthread_join(so.thread, NULL);
	pthread_mutex_lock(&so.lock);
	so.thread_joinable = false;
}

/* [request_lock, lock] Start the removal thread for `store` (joining one
 * that ended). */
static int removal_start(uint32_t store, uint64_t rate, pid_t pid)
{
	int ret;

	removal_join();
	so.removing = store;
	so.rate_bytes = rate;
	so.remove_pid = pid;
	so.stopped = NULL;
	so.halt = false;
	ret = pthread_create(&so.thread, NULL, removal_thread, NULL);
	if (ret) {
		so.removing = CFS_STORE_NONE;
		return -ret;
	}
	so.thread_joinable = true;
	return 0;
}

/* The store a request names (label or index), its name into label; or
 * CFS_STORE_NONE, msg saying so. */
static uint32_t named_store(const char *name, size_t name_length, char *label, size_t label_bytes,
			    char *msg, size_t msg_bytes)
{
	uint32_t store = cfs_pool_find(FS()->pool, name, name_length);

	if (store == CFS_STORE_NONE)
		cfs_text_error(msg, msg_bytes,
			       "no store %.*s in this pool (getfattr -n user.chunkfs.stores on the "
			       "mount lists them)",
			       (int)name_length, name);
	else
		cfs_pool_store_name(FS()->pool, store, label, label_bytes);
	return store;
}

/* [request_lock, lock] */
static int store_remove(const char *name, size_t name_length, uint64_t rate, pid_t pid, char *msg,
			size_t msg_bytes)
{
	struct cfs_pool_store_info info;
	char label[CFS_LABEL_BYTES + 16], need[32], have[32];
	struct cfs_sb table, next;
	uint64_t held, free_units;
	uint32_t store;
	int ret;

	store = named_store(name, name_length, label, sizeof(label), msg, msg_bytes);
	if (store == CFS_STORE_NONE)
		return -ENOENT;
	if (store == 0) {
		cfs_text_error(msg, msg_bytes,
			       "store %s holds the pool's metadata (store 0): it cannot be removed",
			       label);
		return -EPERM;
	}
	if (so.removing != CFS_STORE_NONE && so.removing != store) {
		char other[CFS_LABEL_BYTES + 16];

		cfs_pool_store_name(FS()->pool, so.removing, other, sizeof(other));
		cfs_text_error(msg, msg_bytes, "store %s is being removed: one removal at a time",
			       other);
		return -EBUSY;
	}
	if (cfs_pool_store_info(FS()->pool, store, &info))
		return -ENOENT;
	if (info.state == CFS_STORE_JOINING) {
		cfs_text_error(msg, msg_bytes, "store %s is being added", label);
		return -EBUSY;
	}
	if (info.state == CFS_STORE_REMOVING) {
		/* Already: running, or stopped and taken up again. */
		if (so.removing == store && !so.stopped)
			return 0;
		return removal_start(store, rate, pid);
	}
	room(store, &held, &free_units);
	if (held > free_units) {
		gib(held * FS()->geom.unit_bytes, need, sizeof(need));
		gib((held - free_units) * FS()->geom.unit_bytes, have, sizeof(have));
		cfs_text_error(msg, msg_bytes,
			       "store %s holds %s, more than the other stores have free: %s short; "
			       "nothing was changed",
			       label, need, have);
		return -ENOSPC;
	}
	cfs_journal_table(FS()->journal, &table);
	ret = cfs_sb_table_set_state(&table, store, CFS_STORE_REMOVING, &next);
	if (!ret) {
		/* No new units go there from here on. */
		cfs_pool_set_state(FS()->pool, store, CFS_STORE_REMOVING);
		ret = cfs_journal_write_table(FS(), &next);
		if (ret)
			cfs_pool_set_state(FS()->pool, store, CFS_STORE_ACTIVE);
	}
	if (ret) {
		cfs_text_error(msg, msg_bytes, "writing store 0's table of stores failed: %s",
			       strerror(-ret));
		return ret;
	}
	test_kill_point("store-remove-marked");
	cfs_fs_log(FS(), "store %s (index %" PRIu32 "): removing, %" PRIu64 " bytes to move", label,
		   store, held * FS()->geom.unit_bytes);
	cfs_mover_count_off(store);
	so.resumed = false;
	return removal_start(store, rate, pid);
}

/* Is name (label or index) the last store removed? */
static bool was_removed(const char *name, size_t name_length)
{
	char index[16];
	size_t label_length = strnlen(so.removed_label, CFS_LABEL_BYTES);

	if (so.removed_index == CFS_STORE_NONE)
		return false;
	snprintf(index, sizeof(index), "%" PRIu32, so.removed_index);
	return (name_length == strlen(index) && !memcmp(name, index, name_length)) ||
	       (label_length && name_length == label_length &&
		!memcmp(name, so.removed_label, name_length));
}

/* [request_lock, lock] The removal of a store is cancelled: its thread
 * ended, the store active in the pool, the moves off it cancelled (logged
 * before the table, so one commit makes both durable), then active in
 * store 0's table. msg: what it did, or why not. */
static int store_cancel_remove(const char *name, size_t name_length, pid_t pid, char *msg,
			       size_t msg_bytes)
{
	char label[CFS_LABEL_BYTES + 16], moved[32];
	struct cfs_sb table, next;
	unsigned cancelled = 0;
	uint32_t store;
	bool ours; /* this mount's removal thread removes it (or stopped) */
	int ret;

	store = named_store(name, name_length, label, sizeof(label), msg, msg_bytes);
	if (store == CFS_STORE_NONE) {
		if (was_removed(name, name_length))
			cfs_text_error(msg, msg_bytes,
				       "the removal of %.*s has finished: it is no longer in the "
				       "pool",
				       (int)name_length, name);
		return -ENOENT;
	}
	if (cfs_pool_store_state(FS()->pool, store) != CFS_STORE_REMOVING) {
		cfs_text_error(msg, msg_bytes, "store %s is not being removed", label);
		return -ENOENT;
	}
	ours = so.removing == store;
	if (ours) {
		so.halt = true;
		pthread_cond_broadcast(&so.wake);
		removal_join();
	}
	/* No step of the removal runs now, and it did not take the store out
	 * of the table: that step looks at so.halt under the lock. */
	gib(ours ? cfs_mover_counted_off() : 0, moved, sizeof(moved));
	cfs_pool_set_state(FS()->pool, store, CFS_STORE_ACTIVE);
	ret = cfs_mover_cancel_from(store, &cancelled);
	if (ret)
		cfs_fs_log(FS(),
			   "cancelling the removal of %s: logging a cancelled move failed (%s): a "
			   "crash before its chunk is back on the store resumes that move",
			   label, strerror(-ret));
	test_kill_point("store-cancel-moves");
	cfs_journal_table(FS()->journal, &table);
	ret = cfs_sb_table_set_state(&table, store, CFS_STORE_ACTIVE, &next);
	if (!ret)
		ret = cfs_journal_write_table(FS(), &next);
	if (ret) {
		/* Still removing in the table: in the pool too, stopped. The
		 * moves cancelled above go on back to it; a removal taken up
		 * again turns them round. */
		cfs_pool_set_state(FS()->pool, store, CFS_STORE_REMOVING);
		so.removing = store;
		so.halt = false;
		cfs_text_error(msg, msg_bytes,
			       "writing store 0's table of stores failed: %s; %s stays removing "
			       "(stopped=error)",
			       strerror(-ret), label);
		stop_removal("error", msg);
		return ret;
	}
	if (ours && so.remove_pid && so.remove_pid != pid) {
		char text[WHY_BYTES];

		snprintf(text, sizeof(text), "the removal of %s was cancelled", label);
		set_why(so.remove_pid, text);
	}
	so.removing = CFS_STORE_NONE;
	so.stopped = NULL;
	so.halt = false;
	cfs_mover_count_off(CFS_STORE_NONE);
	snprintf(msg, msg_bytes, "removal of %s cancelled: %s had moved off it%s", label, moved,
		 so.resumed ? " since this mount resumed the removal" : "");
	if (cancelled)
		snprintf(msg + strlen(msg), msg_bytes - strlen(msg),
			 "; %u move%s off it cancelled: the units already moved go back onto it",
			 cancelled, cancelled == 1 ? "" : "s");
	cfs_fs_log(FS(), "store %s (index %" PRIu32 "): %s", label, store, msg);
	return 0;
}

/* ---- requests ------------------------------------------------------------------------- */

/* The next word of value[*at..size) (spaces separate words; a final
 * newline is not part of the last). */
static bool next_word(const char *value, size_t size, size_t *at, const char **word, size_t *n)
{
	while (*at < size && value[*at] == ' ')
		(*at)++;
	if (*at >= size || value[*at] == '\n')
		return false;
	*word = value + *at;
	while (*at < size && value[*at] != ' ' && value[*at] != '\n')
		(*at)++;
	*n = (size_t)(value + *at - *word);
	return true;
}

int cfs_storeop_request(pid_t pid, const char *value, size_t size)
{
	char msg[WHY_BYTES] = "", label[CFS_LABEL_BYTES + 1], source[4096];
	const char *w;
	size_t at = 0, n;
	bool report = false; /* msg says what a request did */
	int ret;

	if (size && value[size - 1] == '\n')
		size--;
	pthread_mutex_lock(&so.request_lock);
	pthread_mutex_lock(&so.lock);
	locks_init();
	if (!so.d || so.d->ram || so.d->read_only || cfs_fs_is_readonly(FS())) {
		ret = -EROFS;
		cfs_text_error(msg, sizeof(msg),
			       "a read-only or RAM mount has no stores to change");
		goto out;
	}
	if (so.stop) {
		ret = -EBUSY;
		cfs_text_error(msg, sizeof(msg), "the pool is being unmounted");
		goto out;
	}
	if (!next_word(value, size, &at, &w, &n)) {
		ret = -EINVAL;
		cfs_text_error(msg, sizeof(msg), "an empty request");
		goto out;
	}
	if (n == 3 && !memcmp(w, "add", 3)) {
		struct add_req r = {source, NULL};

		/* add [label=LABEL] SOURCE: SOURCE is the rest (it may hold
		 * spaces). */
		while (at < size && value[at] == ' ')
			at++;
		if (size - at > 6 && !memcmp(value + at, "label=", 6)) {
			size_t end = at + 6;

			while (end < size && value[end] != ' ')
				end++;
			if (end - at - 6 >= sizeof(label)) {
				ret = -EINVAL;
				cfs_text_error(msg, sizeof(msg), "label longer than %u bytes",
					       CFS_LABEL_BYTES - 1);
				goto out;
			}
			memcpy(label, value + at + 6, end - at - 6);
			label[end - at - 6] = 0;
			r.label = label[0] ? label : NULL;
			at = end;
			while (at < size && value[at] == ' ')
				at++;
		}
		if (at >= size || size - at >= sizeof(source)) {
			ret = -EINVAL;
			cfs_text_error(msg, sizeof(msg), "add: no SOURCE, or a path too long");
			goto out;
		}
		memcpy(source, value + at, size - at);
		source[size - at] = 0;
		ret = store_add(&r, msg, sizeof(msg));
	} else if (n == 6 && !memcmp(w, "remove", 6)) {
		const char *name = NULL;
		size_t name_n = 0;
		uint64_t rate = 0;

		while (next_word(value, size, &at, &w, &n)) {
			if (n > 5 && !memcmp(w, "rate=", 5)) {
				if (!cfs_text_parse_bytes(w + 5, n - 5, &rate)) {
					ret = -EINVAL;
					cfs_text_error(msg, sizeof(msg), "remove: a bad rate %.*s",
						       (int)n, w);
					goto out;
				}
			} else if (!name) {
				name = w;
				name_n = n;
			} else {
				name = NULL;
				break;
			}
		}
		if (!name) {
			ret = -EINVAL;
			cfs_text_error(msg, sizeof(msg), "remove: name one store");
			goto out;
		}
		ret = store_remove(name, name_n, rate, pid, msg, sizeof(msg));
	} else if (n == 13 && !memcmp(w, "cancel-remove", 13)) {
		const char *name;
		size_t name_n;

		if (!next_word(value, size, &at, &name, &name_n) ||
		    next_word(value, size, &at, &w, &n)) {
			ret = -EINVAL;
			cfs_text_error(msg, sizeof(msg), "cancel-remove: name one store");
			goto out;
		}
		ret = store_cancel_remove(name, name_n, pid, msg, sizeof(msg));
		report = ret == 0;
	} else {
		ret = -EINVAL;
		cfs_text_error(msg, sizeof(msg),
			       "user.chunkfs.stores takes \"add [label=LABEL] SOURCE\", \"remove "
			       "[rate=RATE] STORE\" or \"cancel-remove STORE\"");
	}
out:
	if (ret && msg[0] && so.d)
		cfs_fs_log(FS(), "store request refused: %s", msg);
	pthread_mutex_unlock(&so.lock);
	pthread_mutex_unlock(&so.request_lock);
	set_why(pid, ret || report ? msg : "");
	return ret;
}

size_t cfs_storeop_render(uint32_t store, char *text, size_t max)
{
	struct cfs_pool_store_info info;
	struct cfs_daemon *d;
	const char *stopped;
	bool ours;

	text[0] = 0;
	pthread_mutex_lock(&so.lock);
	d = so.d; /* NULL until cfs_storeop_start */
	ours = so.removing == store;
	stopped = so.stopped;
	pthread_mutex_unlock(&so.lock);
	if (!d || cfs_pool_store_info(d->fs->pool, store, &info) ||
	    info.state != CFS_STORE_REMOVING)
		return 0;
	return (size_t)snprintf(text, max, " left=%" PRIu64 "%s%s",
				(info.space.used_units + info.space.busy_units) *
					d->fs->geom.unit_bytes,
				ours && stopped ? " stopped=" : "", ours && stopped ? stopped : "");
}

/* ---- lifecycle ----------------------------------------------------------------------- */

int cfs_storeop_start(struct cfs_daemon *d)
{
	struct cfs_pool_store_info info;
	int ret = 0;

	pthread_mutex_lock(&so.request_lock);
	pthread_mutex_lock(&so.lock);
	locks_init();
	so.d = d;
	so.stop = false;
	if (d->ram || d->read_only) {
		pthread_mutex_unlock(&so.lock);
		pthread_mutex_unlock(&so.request_lock);
		return 0;
	}
	for (unsigned i = 0; cfs_pool_store_at(d->fs->pool, i, &info) == 0; i++) {
		if (info.state != CFS_STORE_REMOVING)
			continue;
		cfs_fs_log(d->fs, "store %s (index %" PRIu32 "): resuming its removal",
			   info.label[0] ? info.label : "without a label", info.index);
		cfs_mover_count_off(info.index);
		so.resumed = true;
		ret = removal_start(info.index, 0, 0);
		break;
	}
	pthread_mutex_unlock(&so.lock);
	pthread_mutex_unlock(&so.request_lock);
	return ret;
}

void cfs_storeop_stop(void)
{
	pthread_mutex_lock(&so.request_lock);
	pthread_mutex_lock(&so.lock);
	so.stop = true;
	pthread_cond_broadcast(&so.wake);
	removal_join();
	if (so.q)
		cfs_ioq_destroy(so.q);
	so.q = NULL;
	free(so.buf);
	so.buf = NULL;
	pthread_mutex_unlock(&so.lock);
	pthread_mutex_unlock(&so.request_lock);
}
