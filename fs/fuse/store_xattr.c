// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * store_xattr.c — user.chunkfs.store, .stores and .move (fs/fuse/store_xattr.h,
 * fs/POOLS.md).
 *
 *   user.chunkfs.store   a chunk: the label of the store its units are on
 *                        (two or more, comma-separated, while a move is half
 *                        done; a chunk without units: where its first unit
 *                        would go). A directory: the store its new files and
 *                        subdirectories go to (ENODATA when it has none). The
 *                        root: the pool's default. setxattr places a
 *                        directory or the root, and moves a chunk.
 *   user.chunkfs.stores  the root: one line per store (label, index, state,
 *                        sizes, what a removal has left, the source it was
 *                        mounted from). root sets "add [label=LABEL] SOURCE",
 *                        "remove [rate=RATE] STORE" or "cancel-remove STORE"
 *                        (fs/fuse/storeop.h).
 *   user.chunkfs.stores.why  the root: why the caller's last store request
 *                        was refused, how its removal stopped (or was
 *                        cancelled), or what its cancel did.
 *   user.chunkfs.move    a chunk: its move's progress (fs/fuse/move.h); set
 *                        "to=STORE [rate=BYTES]", "rate=BYTES", "pause",
 *                        "resume" or "cancel" (rates take K, M, G, T: powers
 *                        of 1024).
 *
 * Values are rendered into this thread's buffer; a size probe's text is kept
 * in chunkstat's probe cache, so the read after it gets the same bytes even
 * when a free count gained a digit in between.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/base/text.h"
#include "fs/fuse/move.h"
#include "fs/fuse/store_xattr.h"
#include "fs/fuse/storeop.h"
#include "fs/meta/fs.h"
#include "fs/meta/namespace.h"
#include "fs/meta/pool.h"
#include "fs/stats/chunkstat.h"

#define FS() (cfs_daemon.fs)
#define TEXT_MAX (CFS_POOL_STORES_MAX * 512u)

enum name_id { NAME_STORE = 1, NAME_STORES, NAME_MOVE, NAME_STORES_WHY };

/* Stable addresses for the probe cache's key. */
static const char key_store, key_stores, key_move, key_why;

static enum name_id name_of(const char *name)
{
	if (strncmp(name, CFS_CS_PREFIX, CFS_CS_PREFIX_BYTES))
		return 0;
	name += CFS_CS_PREFIX_BYTES;
	if (!strcmp(name, "store"))
		return NAME_STORE;
	if (!strcmp(name, "stores"))
		return NAME_STORES;
	if (!strcmp(name, "move"))
		return NAME_MOVE;
	if (!strcmp(name, "stores.why"))
		return NAME_STORES_WHY;
	return 0;
}

bool cfs_store_xattr_is(const char *name)
{
	return name_of(name) != 0;
}

static void store_name(uint32_t store, char *buf, size_t bytes)
{
	cfs_pool_store_name(FS()->pool, store, buf, bytes);
}

/* ---- rendering ---------------------------------------------------------------------- */

/* Which stores a chunk's units are on: a bit per position in ranges[]. */
struct where {
	struct cfs_pool_range ranges[CFS_POOL_STORES_MAX];
	unsigned count;
	uint64_t seen; /* bit i: ranges[i] holds a unit of the chunk */
};

static int where_unit(void *arg, const struct cfs_extent_unit_view *v)
{
	struct where *w = arg;

	for (unsigned i = 0; i < w->count; i++)
		if (v->store_unit >= w->ranges[i].unit_base &&
		    v->store_unit - w->ranges[i].unit_base < w->ranges[i].unit_count)
			w->seen |= 1ull << i;
	return 0;
}

static int render_chunk_store(fuse_ino_t ino, char *text, size_t max, size_t *n)
{
	struct where w = {0};
	struct cfs_place place;
	char label[CFS_LABEL_BYTES + 16];
	int ret;

	*n = 0;
	w.count = cfs_pool_ranges(FS()->pool, w.ranges);
	ret = cfs_ns_for_each_unit(FS(), ino, where_unit, &w);
	if (ret)
		return ret;
	if (!w.seen) {
		/* No units yet: where the first one would go. */
		ret = cfs_ns_place_get(FS(), ino, &place);
		if (ret)
			return ret;
		store_name(place.store != CFS_STORE_NONE &&
					   cfs_pool_store_state(FS()->pool, place.store) ==
						   CFS_STORE_ACTIVE
				   ? place.store
				   : cfs_pool_default_store(FS()->pool),
			   label, sizeof(label));
		*n = (size_t)snprintf(text, max, "%s", label);
		return 0;
	}
	for (unsigned i = 0; i < w.count; i++) {
		if (!(w.seen & (1ull << i)))
			continue;
		store_name(w.ranges[i].index, label, sizeof(label));
		*n += (size_t)snprintf(text + *n, max - *n, "%s%s", *n ? "," : "", label);
	}
	return 0;
}

static const char *state_name(uint32_t state)
{
	return state == CFS_STORE_REMOVING  ? "removing"
	       : state == CFS_STORE_JOINING ? "joining"
					    : "active";
}

static size_t render_stores(char *text, size_t max)
{
	struct cfs_pool_store_info info;
	uint64_t unit = FS()->geom.unit_bytes;
	size_t n = 0;

	for (unsigned i = 0; cfs_pool_store_at(FS()->pool, i, &info) == 0; i++) {
		char label[CFS_LABEL_BYTES + 16], removal[96];

		store_name(info.index, label, sizeof(label));
		cfs_storeop_render(info.index, removal, sizeof(removal));
		n += (size_t)snprintf(text + n, n < max ? max - n : 0,
				      "%s index=%" PRIu32 " state=%s size=%" PRIu64 " data=%" PRIu64
				      " used=%" PRIu64 " free=%" PRIu64 " busy=%" PRIu64
				      " held=%" PRIu64 "%s source=%s\n",
				      label, info.index, state_name(info.state), info.size_bytes,
				      info.space.total_units * unit, info.space.used_units * unit,
				      info.space.free_units * unit, info.space.busy_units * unit,
				      info.held_back_units * unit, removal,
				      info.source[0] ? info.source : "-");
	}
	return n;
}

/* The value of name for ino into text; -ENODATA when it has none. */
static int render(enum name_id id, fuse_ino_t ino, pid_t pid, char *text, size_t max, size_t *n)
{
	struct cfs_ns_stat_view nv;
	struct cfs_place place;
	int ret;

	ret = cfs_ns_stat_pin(FS(), ino, &nv);
	if (ret)
		return ret;
	cfs_ns_unpin(FS(), nv.inode);
	if (id == NAME_STORES) {
		if (ino != CFS_ROOT_INO)
			return -ENODATA;
		*n = render_stores(text, max);
		return 0;
	}
	if (id == NAME_STORES_WHY) {
		if (ino != CFS_ROOT_INO)
			return -ENODATA;
		*n = cfs_storeop_why(pid, text, max);
		return *n ? 0 : -ENODATA;
	}
	if (id == NAME_MOVE) {
		if (!S_ISREG(nv.mode))
			return -ENODATA;
		*n = cfs_mover_render(ino, text, max);
		return 0;
	}
	if (ino == CFS_ROOT_INO) {
		char label[CFS_LABEL_BYTES + 16];

		store_name(cfs_pool_default_store(FS()->pool), label, sizeof(label));
		*n = (size_t)snprintf(text, max, "%s", label);
		return 0;
	}
	if (S_ISREG(nv.mode))
		return render_chunk_store(ino, text, max, n);
	if (!S_ISDIR(nv.mode))
		return -ENODATA;
	ret = cfs_ns_place_get(FS(), ino, &place);
	if (ret)
		return ret;
	if (place.store == CFS_STORE_NONE)
		return -ENODATA;
	{
		char label[CFS_LABEL_BYTES + 16];

		store_name(place.store, label, sizeof(label));
		*n = (size_t)snprintf(text, max, "%s", label);
	}
	return 0;
}

void cfs_store_xattr_get(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	enum name_id id = name_of(name);
	struct cfs_cs_probe_key key = {(uint64_t)fuse_req_ctx(req)->pid, ino,
				       (uint64_t)(uintptr_t)(id == NAME_STORE	 ? &key_store
							     : id == NAME_STORES ? &key_stores
							     : id == NAME_MOVE	 ? &key_move
										 : &key_why)};
	char *text = malloc(TEXT_MAX);
	size_t n = 0;
	ssize_t cached;
	int ret;

	if (!text) {
		cfs_reply_err(req, -ENOMEM);
		return;
	}
	if (size) {
		cached = cfs_cs_probe_take(&key, text, size < TEXT_MAX ? size : TEXT_MAX,
					   cfs_now_ns());
		if (cached >= 0) {
			fuse_reply_buf(req, text, (size_t)cached);
			goto out;
		}
	}
	ret = render(id, ino, fuse_req_ctx(req)->pid, text, TEXT_MAX, &n);
	if (ret) {
		cfs_reply_err(req, ret);
	} else if (n >= TEXT_MAX) {
		cfs_reply_err(req, -E2BIG);
	} else if (size == 0) {
		cfs_cs_probe_put(&key, text, n, cfs_now_ns());
		fuse_reply_xattr(req, n);
	} else if (n > size) {
		cfs_reply_err(req, -ERANGE);
	} else {
		fuse_reply_buf(req, text, n);
	}
out:
	free(text);
}

/* ---- setting ------------------------------------------------------------------------ */

/* Only files and directories are placed (else -EOPNOTSUPP), by their owner
 * or root (as chattr; else -EPERM). *mode: the node's mode. */
static int may_place(fuse_req_t req, fuse_ino_t ino, uint32_t *mode)
{
	struct cfs_ns_stat_view nv;
	uid_t uid = fuse_req_ctx(req)->uid;
	int ret = cfs_ns_stat_pin(FS(), ino, &nv);

	if (ret)
		return ret;
	cfs_ns_unpin(FS(), nv.inode);
	if (!S_ISREG(nv.mode) && !S_ISDIR(nv.mode))
		return -EOPNOTSUPP;
	*mode = nv.mode;
	return uid == 0 || uid == nv.uid ? 0 : -EPERM;
}

/* A store named in a setxattr value ("ssd0", "1", with or without a
 * newline): its index, or CFS_STORE_NONE. */
static uint32_t parse_store(const char *value, size_t size)
{
	if (size && value[size - 1] == '\n')
		size--;
	return cfs_pool_find(FS()->pool, value, size);
}

/* user.chunkfs.move: "to=STORE [rate=BYTES]", "rate=BYTES", "pause",
 * "resume", "cancel" (words separated by spaces; a final newline is fine).
 * -EINVAL for anything else. */
static int set_move(fuse_ino_t ino, const char *value, size_t size)
{
	uint32_t to = CFS_STORE_NONE;
	uint64_t rate = 0;
	bool has_to = false, has_rate = false;
	size_t at = 0;

	while (at < size) {
		size_t end = at;
		const char *w = value + at;
		size_t n;

		while (end < size && value[end] != ' ' && value[end] != '\n')
			end++;
		n = end - at;
		if (n == 5 && !memcmp(w, "pause", 5))
			return at == 0 && end >= size - 1 ? cfs_mover_pause(ino, true) : -EINVAL;
		if (n == 6 && !memcmp(w, "resume", 6))
			return at == 0 && end >= size - 1 ? cfs_mover_pause(ino, false) : -EINVAL;
		if (n == 6 && !memcmp(w, "cancel", 6))
			return at == 0 && end >= size - 1 ? cfs_mover_cancel(ino) : -EINVAL;
		if (n > 3 && !memcmp(w, "to=", 3)) {
			to = cfs_pool_find(FS()->pool, w + 3, n - 3);
			if (to == CFS_STORE_NONE)
				return -EINVAL; /* no such store */
			has_to = true;
		} else if (n > 5 && !memcmp(w, "rate=", 5)) {
			if (!cfs_text_parse_bytes(w + 5, n - 5, &rate))
				return -EINVAL;
			has_rate = true;
		} else if (n) {
			return -EINVAL;
		}
		at = end + 1;
	}
	if (!has_to) {
		struct cfs_place place;
		int ret;

		if (!has_rate)
			return -EINVAL;
		/* A new rate for the move there is. */
		ret = cfs_ns_place_get(FS(), ino, &place);
		if (ret)
			return ret;
		if (place.store == CFS_STORE_NONE || place.from == CFS_STORE_NONE)
			return -ENOENT;
		to = place.store;
	}
	if (cfs_pool_store_state(FS()->pool, to) != CFS_STORE_ACTIVE)
		return -EINVAL; /* being removed: nothing new goes there */
	return cfs_mover_request(ino, to, rate);
}

int cfs_store_xattr_set(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size)
{
	struct cfs_place place = {CFS_STORE_NONE, CFS_STORE_NONE, 0, 0};
	enum name_id id = name_of(name);
	uint32_t store, mode;
	int ret;

	if (id == NAME_STORES) {
		/* Adding and removing stores: root, on the mount root. */
		if (ino != CFS_ROOT_INO)
			return -EOPNOTSUPP;
		if (fuse_req_ctx(req)->uid != 0)
			return -EPERM;
		return cfs_storeop_request(fuse_req_ctx(req)->pid, value, size);
	}
	if (id != NAME_STORE && id != NAME_MOVE)
		return -EOPNOTSUPP;
	ret = may_place(req, ino, &mode);
	if (ret)
		return ret;
	if (id == NAME_MOVE)
		return S_ISREG(mode) ? set_move(ino, value, size) : -EOPNOTSUPP;
	store = parse_store(value, size);
	if (store == CFS_STORE_NONE)
		return -EINVAL; /* no such store */
	if (cfs_pool_store_state(FS()->pool, store) != CFS_STORE_ACTIVE)
		return -EINVAL; /* being removed: nothing new goes there */
	place.store = store;
	if (S_ISREG(mode)) {
		/* A chunk already there (or without units) is only placed; one
		 * with units elsewhere is moved (fs/fuse/move.h). */
		return cfs_mover_request(ino, store, 0);
	}
	return cfs_ns_place_set(FS(), ino, &place);
}

int cfs_store_xattr_remove(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct cfs_place none = {CFS_STORE_NONE, CFS_STORE_NONE, 0, 0};
	uint32_t mode;
	int ret;

	if (name_of(name) != NAME_STORE)
		return -EOPNOTSUPP;
	ret = may_place(req, ino, &mode);
	if (ret)
		return ret;
	return cfs_ns_place_set(FS(), ino, &none);
}

/* ---- listing ------------------------------------------------------------------------ */

size_t cfs_store_xattr_list(fuse_ino_t ino, char *buf, size_t size)
{
	static const char chunk[] = CFS_CS_PREFIX "store";
	static const char root[] = CFS_CS_PREFIX "store\0" CFS_CS_PREFIX "stores";
	struct cfs_ns_stat_view nv;
	const char *names;
	size_t n;

	if (cfs_daemon.hide_stats || !cfs_pool_is_multi(FS()->pool))
		return 0;
	if (cfs_ns_stat_pin(FS(), ino, &nv))
		return 0;
	cfs_ns_unpin(FS(), nv.inode);
	if (ino == CFS_ROOT_INO) {
		names = root;
		n = sizeof(root);
	} else if (S_ISREG(nv.mode)) {
		names = chunk;
		n = sizeof(chunk);
	} else {
		struct cfs_place place;

		/* A directory lists its store when it has one. */
		if (!S_ISDIR(nv.mode) || cfs_ns_place_get(FS(), ino, &place) ||
		    place.store == CFS_STORE_NONE)
			return 0;
		names = chunk;
		n = sizeof(chunk);
	}
	if (buf && n <= size)
		memcpy(buf, names, n);
	return n;
}
