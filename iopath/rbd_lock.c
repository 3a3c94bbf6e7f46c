// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rbd_lock.c — fencing for stores on RBD: one writer at a time, from any
 * host. The writer holds the image's exclusive lock (librbd's exclusive-lock
 * feature, taken with rbd_lock_acquire(RBD_LOCK_MODE_EXCLUSIVE), so librbd
 * refuses to hand it to anyone who asks) for as long as the store is open
 * for writing, and describes itself in the image metadata (key
 * chunkfs.holder: host, process, boot id, pid namespace, client address) so
 * the next one can say who holds it.
 *
 * Taking the lock (cfs_rbd_lock_take), until wait_s runs out:
 *   - nobody holds it: acquire;
 *   - the holder record says it is a chunkfs of this very host (same boot
 *     id and pid namespace) whose process is gone (killed -9, crashed):
 *     break its lock (librbd blocklists the dead client, harmless) and
 *     acquire; a remount after a crash needs no -o takeover;
 *   - takeover asked, and the holder is not a live process of this host:
 *     break the lock, which blocklists the holder (rbd_blocklist_on_break_lock,
 *     on by default): a holder that was only cut off can never write again,
 *     since the OSDs refuse a blocklisted client from the map epoch on;
 *     then acquire;
 *   - the holder's client no longer watches the image (its watch timed out:
 *     it is gone for good): acquire, and librbd breaks and blocklists it;
 *   - else wait; at the end refuse with -EBUSY, naming the holder.
 * Acquiring is only attempted when no live holder would have to answer:
 * librbd asks a holder to give the lock up and, when the holder is dead
 * but its watch has not yet timed out, waits up to 30 s for an answer.
 *
 * After taking a lock from someone (fence_sweep): an OSD learns of a new
 * blocklist entry only with the next osdmap it receives, from the monitor or
 * a peer within seconds, or at once from a client whose request carries the
 * newer map; until then it still accepts the old holder's writes, which
 * then land on parts of the image the new holder has not touched yet (seen
 * in ceph_takeover.sh: a write of the frozen holder, thawed a second after
 * the takeover, reached the store). So the new holder sends one small
 * request (an object listing) to every placement group of the pool with
 * the map that has the blocklist: each primary takes that map before it
 * answers, and refuses the old holder from then on. By the time the mount
 * is done, nothing the old holder sends lands anywhere.
 *
 * What this file does not do: I/O (backend_rbd.c), or decide that a remote
 * holder is dead: only the administrator knows that, and says so with
 * takeover.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs/base/text.h"
#include "iopath/rbd.h"

#define HOLDER_BYTES 512u
#define OWNERS_MAX 4u
#define WATCHERS_MAX 64u
#define POLL_NS (100 * 1000 * 1000)

/* Who a process is, in the terms a holder record uses. */
struct holder {
	char host[64];
	char boot[40];		  /* /proc/sys/kernel/random/boot_id */
	unsigned long long pidns; /* inode of /proc/self/ns/pid */
	long pid;		  /* in that namespace */
	unsigned long long start; /* /proc/PID/stat starttime (clock ticks) */
	char addr[128];		  /* the librados client address */
	char user[96];		  /* client.ID */
};

/* starttime (field 22) of /proc/PID/stat; 0 if there is no such process,
 * or only its corpse (a zombie: killed, not yet reaped). */
static unsigned long long process_start(const char *stat_path)
{
	char line[1024], *p, state;
	unsigned long long start = 0;

	cfs_text_first_line(stat_path, line, sizeof(line));
	p = strrchr(line, ')'); /* the command name may hold spaces */
	if (!p || sscanf(p + 2,
			 "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu",
			 &state, &start) != 2)
		return 0;
	return state == 'Z' || state == 'X' ? 0 : start;
}

static void holder_self(const struct rbd_target *t, struct holder *h)
{
	struct stat st;
	char *addrs = NULL;

	memset(h, 0, sizeof(*h));
	if (gethostname(h->host, sizeof(h->host) - 1))
		snprintf(h->host, sizeof(h->host), "?");
	cfs_text_first_line("/proc/sys/kernel/random/boot_id", h->boot, sizeof(h->boot));
	if (stat("/proc/self/ns/pid", &st) == 0)
		h->pidns = (unsigned long long)st.st_ino;
	h->pid = (long)getpid();
	/* self, not /proc/PID: /proc may belong to another pid namespace */
	h->start = process_start("/proc/self/stat");
	if (rados_getaddrs(t->cluster, &addrs) == 0 && addrs) {
		snprintf(h->addr, sizeof(h->addr), "%s", addrs);
		free(addrs);
	}
	snprintf(h->user, sizeof(h->user), "%s", t->user);
}

static void holder_format(const struct holder *h, char *out, size_t out_bytes)
{
	snprintf(out, out_bytes, "host=%s boot=%s pidns=%llu pid=%ld start=%llu addr=%s user=%s",
		 h->host, h->boot, h->pidns, h->pid, h->start, h->addr, h->user);
}

/* Parse a record; false if it is not one. */
static bool holder_parse(const char *text, struct holder *h)
{
	memset(h, 0, sizeof(*h));
	return sscanf(text,
		      "host=%63s boot=%39s pidns=%llu pid=%ld start=%llu addr=%127s user=%95s",
		      h->host, h->boot, &h->pidns, &h->pid, &h->start, h->addr, h->user) == 7;
}

/* The record on the image, if it describes owner (a lock owner address). */
static bool holder_read(const struct rbd_target *t, const char *owner, struct holder *h)
{
	char text[HOLDER_BYTES];
	size_t length = sizeof(text);

	if (rbd_metadata_get(t->image, CFS_RBD_HOLDER_KEY, text, &length) < 0)
		return false;
	text[sizeof(text) - 1] = '\0';
	return holder_parse(text, h) && strcmp(h->addr, owner) == 0;
}

/* "chunkfs on host H (pid P, client.N at ADDR)" or "a client at ADDR
 * that is not chunkfs" for a holder without a record. */
static void holder_describe(bool known, const struct holder *h, const char *owner, char *out,
			    size_t out_bytes)
{
	if (known)
		snprintf(out, out_bytes, "chunkfs on host %s (pid %ld, %s at %s)", h->host, h->pid,
			 h->user, owner);
	else
		snprintf(out, out_bytes, "a client at %s that left no chunkfs holder record",
			 owner);
}

/* The current lock owner's address into owner; false when nobody holds it. */
static int lock_owner(const struct rbd_target *t, char *owner, size_t owner_bytes)
{
	char *owners[OWNERS_MAX];
	size_t count = OWNERS_MAX;
	rbd_lock_mode_t mode;
	int ret;

	ret = rbd_lock_get_owners(t->image, &mode, owners, &count);
	if (ret == -ENOENT)
		return 0;
	if (ret < 0)
		return ret;
	ret = count > 0;
	if (ret)
		snprintf(owner, owner_bytes, "%s", owners[0]);
	rbd_lock_get_owners_cleanup(owners, count);
	return ret;
}

/* Does the client at owner still watch the image header (it lives, or
 * died less than the watch timeout ago)? */
static bool owner_watches(const struct rbd_target *t, const char *owner)
{
	rbd_image_watcher_t w[WATCHERS_MAX];
	size_t count = WATCHERS_MAX;
	bool found = false;

	if (rbd_watchers_list(t->image, w, &count) < 0)
		return true; /* cannot tell: assume it lives */
	for (size_t i = 0; i < count; i++)
		if (w[i].addr && strcmp(w[i].addr, owner) == 0)
			found = true;
	rbd_watchers_list_cleanup(w, count);
	return found;
}

/* A holder of this very host: its process is there (or it is us). */
static bool local_alive(const struct holder *h)
{
	char path[64];
	unsigned long long start;

	snprintf(path, sizeof(path), "/proc/%ld/stat", h->pid);
	start = process_start(path);

	return start != 0 && start == h->start;
}

static bool same_host(const struct holder *a, const struct holder *b)
{
	return a->boot[0] && strcmp(a->boot, b->boot) == 0 && a->pidns == b->pidns;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int break_lock(struct rbd_target *t, const char *owner, const char *who)
{
	int ret = rbd_lock_break(t->image, RBD_LOCK_MODE_EXCLUSIVE, owner);

	if (ret < 0 && ret != -ENOENT) {
		cfs_rbd_say(t, "%s: cannot break the lock of %s: %s", t->source, who,
			    strerror(-ret));
		return ret;
	}
	return 0;
}

/* The pool's number of placement groups, from the monitor; 0 if unknown. */
static unsigned pool_pg_num(const struct rbd_target *t)
{
	char cmd[CFS_RBD_NAME_BYTES + 96], *out = NULL, *status = NULL;
	const char *argv[1] = {cmd};
	size_t out_len = 0, status_len = 0;
	unsigned pg_num = 0;
	const char *p;

	snprintf(cmd, sizeof(cmd),
		 "{\"prefix\": \"osd pool get\", \"pool\": \"%s\", \"var\": \"pg_num\", "
		 "\"format\": \"json\"}",
		 t->name.pool);
	if (rados_mon_command(t->cluster, argv, 1, "", 0, &out, &out_len, &status, &status_len) ==
		    0 &&
	    out && (p = strstr(out, "\"pg_num\":")))
		pg_num = (unsigned)strtoul(p + strlen("\"pg_num\":"), NULL, 10);
	rados_buffer_free(out);
	rados_buffer_free(status);
	return pg_num;
}

/* See the top of the file. Listing order is by (bit-reversed) object hash,
 * so the pool's listing range cut into pg_num equal slices gives every
 * placement group at least one slice, and a listing of one entry from a
 * slice is one request to the group that holds its start: pg_num small
 * requests (more slices than groups if pg_num is unknown or grows). */
#define SWEEP_SLICES_UNKNOWN 4096u

static int fence_sweep(struct rbd_target *t)
{
	rados_object_list_cursor begin, end;
	unsigned slices = pool_pg_num(t);
	int ret;

	if (!slices)
		slices = SWEEP_SLICES_UNKNOWN;
	ret = rados_wait_for_latest_osdmap(t->cluster);
	if (ret < 0)
		return ret;
	begin = rados_object_list_begin(t->ioctx);
	end = rados_object_list_end(t->ioctx);
	if (!begin || !end) {
		ret = -ENOENT;
		goto out;
	}
	for (unsigned n = 0; n < slices && ret >= 0; n++) {
		/* librados fills cursors the caller allocated. */
		rados_object_list_cursor from = rados_object_list_begin(t->ioctx);
		rados_object_list_cursor to = rados_object_list_begin(t->ioctx);
		rados_object_list_cursor next = rados_object_list_begin(t->ioctx);
		rados_object_list_item item;

		if (from && to && next) {
			rados_object_list_slice(t->ioctx, begin, end, n, slices, &from, &to);
			ret = rados_object_list(t->ioctx, from, to, 1, NULL, 0, &item, &next);
			if (ret > 0)
				rados_object_list_free((size_t)ret, &item);
		} else {
			ret = -ENOMEM;
		}
		if (from)
			rados_object_list_cursor_free(t->ioctx, from);
		if (to)
			rados_object_list_cursor_free(t->ioctx, to);
		if (next)
			rados_object_list_cursor_free(t->ioctx, next);
	}
out:
	if (begin)
		rados_object_list_cursor_free(t->ioctx, begin);
	if (end)
		rados_object_list_cursor_free(t->ioctx, end);
	return ret < 0 ? ret : 0;
}

/* Acquired: say who we are in the image metadata. */
static void holder_write(struct rbd_target *t)
{
	char text[HOLDER_BYTES];
	struct holder me;
	int ret;

	holder_self(t, &me);
	holder_format(&me, text, sizeof(text));
	ret = rbd_metadata_set(t->image, CFS_RBD_HOLDER_KEY, text);
	if (ret < 0) /* only the next one's message suffers */
		cfs_rbd_say(t, "%s: cannot write the holder record: %s", t->source, strerror(-ret));
}

int cfs_rbd_lock_take(struct rbd_target *t, const struct cfs_io_ceph *ceph)
{
	uint64_t deadline = monotonic_ns() + (uint64_t)ceph->wait_s * 1000000000u;
	struct timespec pause = {0, POLL_NS};
	char owner[128], who[384];
	struct holder me, h;
	bool known = false, said_waiting = false, had_holder = false;
	int ret;

	holder_self(t, &me);
	for (;;) {
		ret = lock_owner(t, owner, sizeof(owner));
		if (ret < 0) {
			cfs_rbd_say(t, "%s: cannot read the image's lock: %s", t->source,
				    strerror(-ret));
			return ret;
		}
		if (ret == 1) {
			had_holder = true;
			known = holder_read(t, owner, &h);
			holder_describe(known, &h, owner, who, sizeof(who));
		}
		if (ret == 1 && known && same_host(&h, &me) && !local_alive(&h)) {
			cfs_rbd_say(t, "%s: its holder, %s, is gone: breaking its lock", t->source,
				    who);
			ret = break_lock(t, owner, who);
			if (ret < 0)
				return ret;
			continue;
		}
		if (ret == 1 && ceph->takeover) {
			if (known && same_host(&h, &me)) {
				cfs_rbd_say(t,
					    "%s: held by %s, which is running on this host: "
					    "unmount it instead of taking it over",
					    t->source, who);
				return -EBUSY;
			}
			cfs_rbd_say(t,
				    "%s: taking over from %s: breaking its lock and "
				    "blocklisting it",
				    t->source, who);
			ret = break_lock(t, owner, who);
			if (ret < 0)
				return ret;
			continue;
		}
		if (ret == 0 || !owner_watches(t, owner)) {
			/* Nobody holds it, or its holder is gone for good
			 * (librbd breaks that lock itself). */
			ret = rbd_lock_acquire(t->image, RBD_LOCK_MODE_EXCLUSIVE);
			if (ret == 0) {
				t->locked = true;
				ret = had_holder ? fence_sweep(t) : 0;
				if (ret < 0) {
					cfs_rbd_say(t,
						    "%s: cannot make every OSD refuse the previous "
						    "holder: %s",
						    t->source, strerror(-ret));
					cfs_rbd_lock_give(t);
					return ret;
				}
				holder_write(t);
				return 0;
			}
			if (ret != -EROFS && ret != -EBUSY) {
				cfs_rbd_say(t, "%s: cannot take the image's exclusive lock: %s",
					    t->source, strerror(-ret));
				return ret;
			}
			continue; /* someone was faster: look again */
		}
		if (monotonic_ns() >= deadline) {
			cfs_rbd_say(t,
				    "%s: in use by %s; mount it there, or, if that host is down, "
				    "take it over here with -o takeover (fsck.chunkfs and "
				    "mkchunkfs refuse it too)",
				    t->source, who);
			return -EBUSY;
		}
		if (!said_waiting && ceph->wait_s) {
			said_waiting = true;
			cfs_rbd_say(t, "%s: held by %s; waiting up to %u s for it to let go",
				    t->source, who, ceph->wait_s);
		}
		nanosleep(&pause, NULL);
	}
}

void cfs_rbd_lock_give(struct rbd_target *t)
{
	int ret;

	/* The record first: once the lock is free, a record would describe
	 * nobody (and is ignored: its address no longer owns the lock). */
	(void)rbd_metadata_remove(t->image, CFS_RBD_HOLDER_KEY);
	ret = rbd_lock_release(t->image);
	if (ret < 0 && !atomic_load(&t->fenced))
		cfs_rbd_say(t, "%s: releasing the image's exclusive lock: %s", t->source,
			    strerror(-ret));
	t->locked = false;
}
