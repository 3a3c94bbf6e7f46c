// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * xattr.c — the user.chunkfs.* xattrs: a chunk's statistics and page size,
 * the root directory's mount-wide totals and store facts. ops.c
 * routes every user.chunkfs.* name here; the fields and their text are
 * fs/stats/chunkstat.c's.
 *
 * A getxattr pins the inode (a reference: not an open, so opens stay what
 * the application did), copies the counters with atomic loads into this
 * thread's scratch view, renders the one value asked for into this thread's
 * scratch text, and replies. Nothing here takes a lock the data path takes,
 * and nothing is allocated per call (the scratch is allocated once per
 * thread). The namespace lock is taken shared for the lookup, as getattr does.
 *
 * Size probes: getxattr(size 0) answers the length of the text rendered
 * now and remembers that text for the calling thread (chunkstat.h, "the
 * size-probe cache"), so the read that follows returns the very same bytes
 * and a buffer sized by the probe is never too small because a counter
 * gained a digit in between. A read without a probe renders fresh; too
 * small a buffer gets ERANGE.
 *
 * Names that exist: regular files (chunks) and the root directory. Other
 * directories, symlinks and devices have none: getxattr ENODATA, setxattr
 * EOPNOTSUPP. Writing: pagesize (persisted by the namespace) and reset
 * (owner or root); any other user.chunkfs.* name EOPNOTSUPP.
 *
 * What this file does not do: count anything (fs/fuse/data.c, fs/fuse/ops.c charge),
 * or store user.* xattrs (the namespace does).
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fs/stats/chunkstat.h"
#include "fs/meta/fs.h"
#include "fs/meta/namespace.h"
#include "fs/meta/pool.h"
#include "fs/fuse/store_xattr.h"
#include "fs/fuse/xattr.h"

#define FS() (cfs_daemon.fs)

/* One per loop thread, allocated on its first statistics read, freed when
 * the thread exits. */
struct scratch {
	struct cfs_cs_view view;
	char text[CFS_CS_TEXT_MAX];
};

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_key_init(void)
{
	if (pthread_key_create(&scratch_key, free))
		abort(); /* only EAGAIN/ENOMEM at start-up: nothing sensible left */
}

static struct scratch *scratch_get(void)
{
	struct scratch *s;

	pthread_once(&scratch_once, scratch_key_init);
	s = pthread_getspecific(scratch_key);
	if (s)
		return s;
	s = malloc(sizeof(*s));
	if (!s)
		return NULL;
	if (pthread_setspecific(scratch_key, s)) {
		free(s);
		return NULL;
	}
	return s;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool cfs_xattr_is_stats(const char *name)
{
	return strncmp(name, CFS_CS_PREFIX, CFS_CS_PREFIX_BYTES) == 0;
}

static bool is_root(fuse_ino_t ino)
{
	return ino == CFS_ROOT_INO;
}

/* Pin ino; -ENODATA (getxattr's "no such name") when it carries no
 * statistics: anything but a regular file or the root. */
static int pin_stats_inode(fuse_ino_t ino, struct cfs_ns_stat_view *nv)
{
	int ret = cfs_ns_stat_pin(FS(), ino, nv);

	if (ret)
		return ret;
	if (!is_root(ino) && !S_ISREG(nv->mode)) {
		cfs_ns_unpin(FS(), nv->inode);
		return -ENODATA;
	}
	return 0;
}

static void fill_root_facts(struct cfs_cs_view *v)
{
	const struct cfs_daemon *d = &cfs_daemon;
	const struct cfs_io_geometry *geo = d->geo;
	struct cfs_ns_statfs st;

	cfs_ns_statfs(d->fs, &st);
	v->source = d->source;
	v->backend = geo->backend;
	/* The stores' own sizes, not the target's: a pool's target ends at
	 * the superblock windows routed above every unit (fs/meta/pool.h,
	 * about 2^62), and keeps them when it is down to one store. */
	v->store_bytes = cfs_pool_is_multi(d->fs->pool)
				 ? cfs_pool_size_bytes(d->fs->pool)
				 : cfs_io_store_geometry(d->io, 0)->size_bytes;
	v->data_bytes = st.blocks * st.block_bytes;
	v->free_bytes = st.blocks_free * st.block_bytes;
	v->block_bytes = (uint32_t)st.block_bytes;
	v->sector_bytes = geo->logical_sector_bytes;
	v->physical_sector_bytes = geo->physical_sector_bytes;
	/* What O_DIRECT must be aligned to: enforced on a RAM mount; on a
	 * store, the logical sector is what avoids read-modify-write. */
	v->dio_align_enforced = d->dio_align_bytes != 0;
	v->dio_align_bytes = d->dio_align_bytes ? d->dio_align_bytes : geo->logical_sector_bytes;
	v->readonly = cfs_fs_is_readonly(d->fs);
	v->mount_time_ns = cfs_cs_mount_time_ns();
}

static void fill_view(struct cfs_cs_view *v, fuse_ino_t ino, const struct cfs_ns_stat_view *nv)
{
	/* snap is overwritten whole below; clear the rest */
	memset((char *)v + offsetof(struct cfs_cs_view, root), 0,
	       sizeof(*v) - offsetof(struct cfs_cs_view, root));
	v->now_ns = realtime_ns();
	if (is_root(ino)) {
		v->root = true;
		cfs_cs_mount_snapshot(&v->snap);
		v->opens_now = cfs_cs_mount_opens_now();
		fill_root_facts(v);
		return;
	}
	cfs_cs_snapshot(atomic_load(&nv->inode->stats), &v->snap);
	v->page_size_bytes = nv->page_size_bytes ? nv->page_size_bytes : CFS_CS_PAGE_SIZE_DEFAULT;
	v->size_bytes = nv->size_bytes;
	v->opens_now = nv->open_count;
}

void cfs_xattr_stats_get(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	const struct cfs_cs_field *f;
	struct cfs_ns_stat_view nv;
	struct cfs_cs_probe_key key;
	struct scratch *s;
	ssize_t cached;
	size_t n;
	int ret;

	if (cfs_store_xattr_is(name)) {
		cfs_store_xattr_get(req, ino, name, size);
		return;
	}
	ret = pin_stats_inode(ino, &nv);
	if (ret) {
		cfs_reply_err(req, ret);
		return;
	}
	f = cfs_cs_field_find(name + CFS_CS_PREFIX_BYTES, is_root(ino));
	if (!f || !(f->flags & CFS_CS_READABLE)) {
		ret = -ENODATA;
		goto out_unpin;
	}
	s = scratch_get();
	if (!s) {
		ret = -ENOMEM;
		goto out_unpin;
	}
	key.tid = (uint64_t)fuse_req_ctx(req)->pid;
	key.ino = ino;
	key.field = (uint64_t)(uintptr_t)f;
	if (size) {
		/* The read after this thread's probe: exactly the probed text. */
		cached = cfs_cs_probe_take(&key, s->text,
					   size < CFS_CS_TEXT_MAX ? size : CFS_CS_TEXT_MAX,
					   cfs_now_ns());
		if (cached >= 0) {
			cfs_ns_unpin(FS(), nv.inode);
			fuse_reply_buf(req, s->text, (size_t)cached);
			return;
		}
	}
	fill_view(&s->view, ino, &nv);
	cfs_ns_unpin(FS(), nv.inode);
	n = cfs_cs_render_field(&s->view, f, s->text, sizeof(s->text));
	if (n >= sizeof(s->text)) {
		cfs_reply_err(req, -E2BIG); /* cannot happen: CFS_CS_TEXT_MAX bounds every field */
		return;
	}
	if (size == 0) {
		/* Remembering may fail (no memory): the probe still answers. */
		cfs_cs_probe_put(&key, s->text, n, cfs_now_ns());
		fuse_reply_xattr(req, n);
	} else if (n > size) {
		cfs_reply_err(req, -ERANGE);
	} else {
		fuse_reply_buf(req, s->text, n);
	}
	return;

out_unpin:
	cfs_ns_unpin(FS(), nv.inode);
	cfs_reply_err(req, ret);
}

/* A decimal value as setfattr sends it ("2048", maybe with a newline from
 * `echo`). */
static int parse_value(const char *value, size_t size, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (size && value[size - 1] == '\n')
		size--;
	if (size == 0 || size > 20)
		return -EINVAL;
	for (i = 0; i < size; i++) {
		if (value[i] < '0' || value[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(value[i] - '0');
		if (v > max)
			return -EINVAL;
	}
	*out = v;
	return 0;
}

int cfs_xattr_stats_set(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	const struct cfs_cs_field *f;
	struct cfs_ns_stat_view nv;
	uint64_t v;
	int ret;

	if (cfs_store_xattr_is(name))
		return cfs_store_xattr_set(req, ino, name, value, size);
	ret = pin_stats_inode(ino, &nv);
	if (ret)
		return ret == -ENODATA ? -EOPNOTSUPP : ret;
	f = cfs_cs_field_find(name + CFS_CS_PREFIX_BYTES, is_root(ino));
	if (!f || !(f->flags & CFS_CS_WRITABLE)) {
		ret = -EOPNOTSUPP; /* the statistics are read-only */
		goto out_unpin;
	}
	if (strcmp(f->name, "reset") == 0) {
		/* The kernel already checked write permission (user.* xattrs);
		 * a reset also destroys what others measure: the owner's call. */
		if (ctx->uid != 0 && ctx->uid != nv.uid) {
			ret = -EPERM;
			goto out_unpin;
		}
		ret = parse_value(value, size, 1, &v);
		if (ret || v != 1) {
			ret = -EINVAL;
			goto out_unpin;
		}
		if (is_root(ino)) {
			cfs_cs_mount_reset();
		} else {
			struct cfs_chunk_stats *cs = cfs_ns_inode_stats(nv.inode);

			if (cs)
				cfs_cs_reset(cs);
			else
				ret = -ENOMEM;
		}
	} else { /* pagesize, the only other writable name */
		ret = parse_value(value, size, UINT32_MAX, &v);
		if (!ret)
			ret = cfs_ns_set_page_size(FS(), ino, (uint32_t)v);
	}
out_unpin:
	cfs_ns_unpin(FS(), nv.inode);
	return ret;
}

int cfs_xattr_stats_remove(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct cfs_ns_stat_view nv;
	int ret;

	if (cfs_store_xattr_is(name))
		return cfs_store_xattr_remove(req, ino, name);
	ret = pin_stats_inode(ino, &nv);
	if (ret)
		return ret == -ENODATA ? -EOPNOTSUPP : ret;
	cfs_ns_unpin(FS(), nv.inode);
	/* Removing the page size means "back to the default". */
	if (!is_root(ino) && strcmp(name + CFS_CS_PREFIX_BYTES, "pagesize") == 0)
		return cfs_ns_set_page_size(FS(), ino, 0);
	return -EOPNOTSUPP;
}

size_t cfs_xattr_stats_list(fuse_ino_t ino, char *buf, size_t size)
{
	struct cfs_ns_stat_view nv;
	size_t n = 0, pool;

	if (cfs_daemon.hide_stats)
		return 0;
	if (!pin_stats_inode(ino, &nv)) {
		cfs_ns_unpin(FS(), nv.inode);
		n = cfs_cs_list(is_root(ino), false, buf, size);
	}
	/* The pool's names after the statistics (only for a pool of several
	 * stores: a single store lists what it always did). */
	pool = cfs_store_xattr_list(ino, NULL, 0);
	if (buf && n + pool <= size)
		cfs_store_xattr_list(ino, buf + n, size - n);
	return n + pool;
}
