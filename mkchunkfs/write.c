/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * write.c — the write sequence that turns a target into a chunkfs store.
 *
 * The order is what makes an interrupted run safe:
 *
 *   1. slot 0 <- the new superblock with CFS_SB_INPROGRESS, generation 0;
 *      slot 1 <- zeros; flush. From here on every reader (the daemon, fsck,
 *      mkchunkfs -D, our own "is this formatted?") refuses the store, and
 *      no stale copy from an earlier format can outvote the new one.
 *   2. Block device or RBD image: discard the data region (unless -K; on RBD
 *      it frees the objects an earlier use left). Image file: write
 *      zeros into every hole (unless --sparse) so the lower filesystem holds
 *      no unwritten extents: the first write into an unwritten ext4 extent
 *      pays a journal commit, which is what made ext4 + O_DIRECT the slowest
 *      configuration in published Informix measurements (bench/import_load.c).
 *   3. Metadata headers: an empty snapshot at the start of half A followed
 *      by a zeroed first log block, and a zeroed start of half B, so nothing
 *      left from an earlier format replays. With a uuid given by -U the
 *      whole region is zeroed first: an earlier format with the same uuid
 *      left records that verify with the same seed (fs/format/FORMAT.md rule 5).
 *   4. slot 1 <- generation 1 without INPROGRESS; flush. The store is valid
 *      from this moment (cfs_sb_pick takes the newest copy).
 *   5. slot 0 <- generation 2; flush. Both copies valid, as the daemon
 *      expects (generation N lives in slot N % 2).
 *
 * Every write is O_DIRECT (or buffered + fsync where the filesystem refuses
 * O_DIRECT), aligned to the target's logical sector from an aligned buffer.
 *
 * What this file does not do: decide anything (main() chose discard/fill)
 * or print the summary.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "mkchunkfs/mkchunkfs.h"

#define DISCARD_STEP_BYTES (1ull << 30)	 /* one BLKDISCARD call; progress unit */
#define META_HEAD_MIN_BYTES (64u * 1024) /* zeroed at the start of each half */

struct wctx {
	struct cfs_mkfs_target *t;
	int fd;		  /* where writes go: direct_fd, else fd */
	uint8_t *zeros;	  /* CFS_MKFS_IO_BYTES of zeros, aligned */
	uint8_t *sb_area; /* the two slots, rounded up to the write unit */
	uint32_t sb_area_bytes;
	/* progress */
	bool progress;
	const char *what;
	uint64_t total_bytes;
	uint64_t done_bytes;
	int shown_percent;
};

static uint64_t round_up(uint64_t v, uint64_t align)
{
	return (v + align - 1) / align * align;
}

static uint64_t round_down(uint64_t v, uint64_t align)
{
	return v / align * align;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Test hook: MKCHUNKFS_TEST_KILL=<stage> kills the process with SIGKILL at
 * that point (inprogress, data, meta, slot1), so tests reproduce a power cut
 * or kill -9 between two steps deterministically instead of racing a timer.
 */
void cfs_mkfs_test_kill_point(const char *stage)
{
	const char *want = getenv("MKCHUNKFS_TEST_KILL");

	if (want && strcmp(want, stage) == 0) {
		fflush(stdout);
		raise(SIGKILL);
	}
}

static int pwrite_all(struct wctx *c, const void *buf, size_t length, uint64_t offset)
{
	const uint8_t *p = buf;
	ssize_t n;

	if (c->t->is_rbd)
		return cfs_mkfs_rbd_write(c->t, buf, length, offset);
	while (length) {
		n = pwrite(c->fd, p, length, (off_t)offset);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? errno : EIO;

			cfs_mkfs_error("%s: write of %zu bytes at offset %llu failed: %s",
				       c->t->path, length, (unsigned long long)offset,
				       strerror(err));
			return -err;
		}
		p += n;
		length -= (size_t)n;
		offset += (uint64_t)n;
	}
	return 0;
}

/* fsync rather than fdatasync: a created or extended image's new size is
 * metadata the store cannot be read without. On a block device it flushes
 * the device's write cache. */
static int flush(struct wctx *c)
{
	if (c->t->is_rbd)
		return cfs_mkfs_rbd_flush(c->t);
	if (fsync(c->t->fd) < 0) {
		cfs_mkfs_error("%s: flush failed: %s", c->t->path, strerror(errno));
		return -errno;
	}
	return 0;
}

static void progress_start(struct wctx *c, const char *what, uint64_t total_bytes)
{
	c->what = what;
	c->total_bytes = total_bytes;
	c->done_bytes = 0;
	c->shown_percent = -1;
}

static void progress_add(struct wctx *c, uint64_t bytes)
{
	char done[CFS_SIZE_STR_BYTES], total[CFS_SIZE_STR_BYTES];
	int percent;

	c->done_bytes += bytes;
	if (!c->progress || !c->total_bytes)
		return;
	/* The counting pass and the writing pass may disagree a little if
	 * the file changes between them: never show more than 100%. */
	percent =
		c->done_bytes >= c->total_bytes ? 100 : (int)(c->done_bytes * 100 / c->total_bytes);
	if (percent == c->shown_percent)
		return;
	c->shown_percent = percent;
	/* One line, rewritten in place; the trailing spaces cover a longer
	 * previous text. */
	printf("\r%s: %3d%% (%s of %s)   ", c->what, percent, cfs_size_format(c->done_bytes, done),
	       cfs_size_format(c->total_bytes, total));
	fflush(stdout);
}

static void progress_end(struct wctx *c)
{
	if (c->progress && c->total_bytes && c->shown_percent >= 0) {
		printf("\r%s: done%40s\n", c->what, "");
		fflush(stdout);
	}
}

/* Slots whose bit is set in mask are written; the range is widened to the
 * write unit, which on targets with sectors above 4 KiB means both slots
 * (and zeros of the reserved superblock area) go in one write. */
static int write_slots(struct wctx *c, unsigned mask)
{
	uint64_t start = mask & 1u ? 0 : CFS_SB_BLOCK_BYTES;
	uint64_t end = mask & 2u ? 2ull * CFS_SB_BLOCK_BYTES : CFS_SB_BLOCK_BYTES;

	start = round_down(start, c->t->write_align_bytes);
	end = round_up(end, c->t->write_align_bytes);
	return pwrite_all(c, c->sb_area + start, (size_t)(end - start), start);
}

static void encode_slot(struct wctx *c, struct cfs_sb *sb)
{
	sb->wtime_ns = now_ns();
	cfs_sb_encode(sb, c->sb_area + CFS_SB_SLOT_OFFSET_BYTES(cfs_sb_slot(sb->generation)));
}

/* sb into its generation's slot, the slots in mask written and flushed:
 * each step of cfs_mkfs_write() is durable before the next begins. */
static int put_superblock(struct wctx *c, struct cfs_sb *sb, unsigned mask)
{
	int ret;

	encode_slot(c, sb);
	ret = write_slots(c, mask);
	if (ret < 0)
		return ret;
	return flush(c);
}

static int write_zeros(struct wctx *c, uint64_t offset, uint64_t length)
{
	size_t piece;
	int ret;

	while (length) {
		piece = length < CFS_MKFS_IO_BYTES ? (size_t)length : CFS_MKFS_IO_BYTES;
		ret = pwrite_all(c, c->zeros, piece, offset);
		if (ret < 0)
			return ret;
		offset += piece;
		length -= piece;
		progress_add(c, piece);
	}
	return 0;
}

/*
 * Filling an image: the ranges the lower filesystem has not written yet are
 * the holes and the unwritten (fallocated) extents. FIEMAP names both
 * exactly. SEEK_HOLE/SEEK_DATA is only the fallback (tmpfs and others
 * without FIEMAP): on ext4 and xfs it reports an unwritten extent as data
 * once its pages sit in the page cache, and blkid has just read the first
 * blocks of the image through the page cache.
 *
 * Ranges are widened to the write unit and merged, so a fallocated image
 * (ext4 splits unwritten extents every 128 MiB) is written in long runs.
 */
#define FIEMAP_EXTENTS_MAX 256u /* extents per FS_IOC_FIEMAP call */

struct fill {
	struct wctx *c;
	uint64_t start, end;	     /* bounds, multiples of the write unit */
	uint64_t run_start, run_end; /* pending run; empty when equal */
	bool write;		     /* false: only count (for the progress line) */
	bool write_failed;	     /* write_zeros() failed and said why */
	uint64_t total;		     /* bytes counted or written */
};

static int fill_flush(struct fill *f)
{
	uint64_t length = f->run_end - f->run_start;
	int ret = 0;

	if (!length)
		return 0;
	f->total += length;
	if (f->write)
		ret = write_zeros(f->c, f->run_start, length);
	f->write_failed = ret < 0;
	f->run_start = f->run_end = 0;
	return ret;
}

static int fill_add(struct fill *f, uint64_t start, uint64_t end)
{
	uint32_t unit = f->c->t->write_align_bytes;
	int ret;

	start = round_down(start, unit);
	end = round_up(end, unit);
	if (start < f->start)
		start = f->start;
	if (end > f->end)
		end = f->end;
	if (end <= start)
		return 0;
	if (f->run_end > f->run_start && start <= f->run_end) {
		if (end > f->run_end)
			f->run_end = end;
		return 0;
	}
	ret = fill_flush(f);
	if (ret < 0)
		return ret;
	f->run_start = start;
	f->run_end = end;
	return 0;
}

/* Returns -EOPNOTSUPP when the filesystem has no FIEMAP (caller falls back). */
static int walk_fiemap(struct fill *f)
{
	const size_t bytes =
		sizeof(struct fiemap) + FIEMAP_EXTENTS_MAX * sizeof(struct fiemap_extent);
	uint64_t cursor = f->start, lo, hi;
	struct fiemap_extent *e;
	struct fiemap *fm;
	bool last = false;
	unsigned i;
	int ret = 0;

	fm = malloc(bytes);
	if (!fm)
		return -ENOMEM;
	while (!last && cursor < f->end) {
		memset(fm, 0, bytes);
		fm->fm_start = cursor;
		fm->fm_length = f->end - cursor;
		fm->fm_flags = FIEMAP_FLAG_SYNC;
		fm->fm_extent_count = FIEMAP_EXTENTS_MAX;
		if (ioctl(f->c->t->fd, FS_IOC_FIEMAP, fm) < 0) {
			ret = -errno;
			goto out_free;
		}
		if (fm->fm_mapped_extents < FIEMAP_EXTENTS_MAX)
			last = true; /* nothing else in the range */
		for (i = 0; i < fm->fm_mapped_extents; i++) {
			e = &fm->fm_extents[i];
			lo = e->fe_logical > cursor ? e->fe_logical : cursor;
			hi = e->fe_logical + e->fe_length;
			if (lo > cursor)
				ret = fill_add(f, cursor, lo); /* a hole */
			if (!ret && (e->fe_flags & FIEMAP_EXTENT_UNWRITTEN))
				ret = fill_add(f, lo, hi);
			if (ret < 0)
				goto out_free;
			if (hi > cursor)
				cursor = hi;
			if (e->fe_flags & FIEMAP_EXTENT_LAST)
				last = true;
		}
		if (!fm->fm_mapped_extents)
			break;
	}
	if (cursor < f->end)
		ret = fill_add(f, cursor, f->end); /* the tail after the last extent */
	if (!ret)
		ret = fill_flush(f);
out_free:
	free(fm);
	return ret;
}

static int walk_seek(struct fill *f)
{
	uint64_t offset = f->start, hole, next;
	int fd = f->c->t->fd;
	off_t r;
	int ret;

	/* Clean cached pages would turn unwritten extents into "data". */
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	while (offset < f->end) {
		r = lseek(fd, (off_t)offset, SEEK_HOLE);
		if (r < 0 && errno == ENXIO)
			break;
		if (r < 0)
			return -errno;
		hole = (uint64_t)r;
		if (hole >= f->end)
			break;
		r = lseek(fd, (off_t)hole, SEEK_DATA);
		if (r < 0 && errno != ENXIO)
			return -errno;
		next = r < 0 || (uint64_t)r > f->end ? f->end : (uint64_t)r;
		ret = fill_add(f, hole, next);
		if (ret < 0)
			return ret;
		if (next <= offset) /* the file changed under us: stop, never spin */
			break;
		offset = next;
	}
	return fill_flush(f);
}

static int fill_walk(struct wctx *c, uint64_t start, uint64_t end, bool write, uint64_t *total)
{
	struct fill f = {.c = c, .start = start, .end = end, .write = write};
	int ret;

	ret = walk_fiemap(&f);
	if (ret == -EOPNOTSUPP || ret == -ENOTTY) {
		f.run_start = f.run_end = 0;
		f.total = 0;
		ret = walk_seek(&f);
	}
	if (ret < 0 && !f.write_failed)
		cfs_mkfs_error("%s: cannot find the image's unwritten ranges: %s", c->t->path,
			       strerror(-ret));
	*total = f.total;
	return ret;
}

static int fill_image(struct wctx *c, const struct cfs_sb *sb)
{
	/* Slots 0 and 1 are written already; everything after them, up to the
	 * last whole write unit of the store, must be allocated. */
	uint64_t start = round_up(CFS_MKFS_SB_PAIR_BYTES, c->t->write_align_bytes);
	uint64_t end = round_down(sb->store_size_bytes, c->t->write_align_bytes);
	uint64_t total;
	int ret;

	ret = fill_walk(c, start, end, false, &total);
	if (ret < 0 || total == 0)
		return ret;
	progress_start(c, "writing zeros", total);
	ret = fill_walk(c, start, end, true, &total);
	progress_end(c);
	return ret;
}

static int discard_data(struct wctx *c, const struct cfs_sb *sb)
{
	uint64_t offset = sb->data_offset_bytes, end = offset + sb->data_size_bytes;
	uint64_t range[2];

	progress_start(c, "discarding", sb->data_size_bytes);
	while (offset < end) {
		range[0] = offset;
		range[1] = end - offset < DISCARD_STEP_BYTES ? end - offset : DISCARD_STEP_BYTES;
		if (c->t->is_rbd) {
			if (cfs_mkfs_rbd_discard(c->t, range[0], range[1]) < 0)
				return -EIO;
		} else if (ioctl(c->t->fd, BLKDISCARD, range) < 0) {
			/* A device without discard support: nothing to do. The
			 * daemon tracks unwritten ranges itself and never shows
			 * what a block held before, so discard is only a gift
			 * to the device's wear levelling. */
			if (errno == EOPNOTSUPP)
				return 0;
			cfs_mkfs_error("%s: discard failed: %s (use -K to skip discarding)",
				       c->t->path, strerror(errno));
			return -errno;
		}
		offset += range[1];
		progress_add(c, range[1]);
	}
	progress_end(c);
	return 0;
}

/*
 * Step 3: the empty snapshot the daemon loads on the first mount, and zeros
 * behind it up to and including the first log block, in half A; zeros over
 * the same length at the start of half B.
 */
static int write_meta_headers(struct wctx *c, const struct cfs_sb *sb)
{
	uint64_t half_bytes = cfs_sb_half_size_bytes(sb);
	uint64_t head_bytes, log_end;
	unsigned half;
	int ret;

	log_end = cfs_sb_log_offset_bytes(sb) + sb->block_size_bytes -
		  cfs_sb_half_offset_bytes(sb, 0);
	head_bytes = log_end > META_HEAD_MIN_BYTES ? log_end : META_HEAD_MIN_BYTES;
	head_bytes = round_up(head_bytes, sb->block_size_bytes);
	if (head_bytes > half_bytes)
		head_bytes = half_bytes;
	if (head_bytes > CFS_MKFS_IO_BYTES) /* block <= 64 KiB: never, but bound it */
		head_bytes = CFS_MKFS_IO_BYTES;

	for (half = 0; half < 2; half++) {
		memset(c->zeros, 0, (size_t)head_bytes);
		if (half == sb->meta_active_half) {
			ret = cfs_snap_seal(c->zeros, (size_t)head_bytes, 0, 0, sb->log_seq_start,
					    cfs_log_seed(sb->uuid));
			if (ret < 0) {
				cfs_mkfs_error("%s: cannot build the empty snapshot: %s",
					       c->t->path, strerror(-ret));
				return ret;
			}
		}
		ret = pwrite_all(c, c->zeros, (size_t)head_bytes,
				 cfs_sb_half_offset_bytes(sb, half));
		if (ret < 0)
			goto out_clear;
	}
	ret = 0;
out_clear:
	/* The buffer is "zeros" again for whoever uses it next. */
	memset(c->zeros, 0, (size_t)head_bytes);
	return ret;
}

/* -U: the whole metadata region, before its headers are written. */
static int zero_meta_region(struct wctx *c, const struct cfs_sb *sb)
{
	int ret;

	progress_start(c, "zeroing metadata", sb->meta_size_bytes);
	ret = write_zeros(c, sb->meta_offset_bytes, sb->meta_size_bytes);
	progress_end(c);
	return ret;
}

/* A new image's name must survive a power cut too. */
static void sync_parent_dir(const char *path)
{
	char *copy = strdup(path);
	int fd;

	if (!copy)
		return;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
	free(copy);
}

int cfs_mkfs_write(struct cfs_mkfs_target *t, struct cfs_sb *sb,
		   const struct cfs_mkfs_write_cfg *cfg)
{
	struct wctx c = {.t = t, .progress = cfg->progress};
	int ret;

	c.fd = t->direct_fd >= 0 ? t->direct_fd : t->fd;
	c.sb_area_bytes = (uint32_t)round_up(CFS_MKFS_SB_PAIR_BYTES, t->write_align_bytes);
	ret = posix_memalign((void **)&c.zeros, t->mem_align_bytes, CFS_MKFS_IO_BYTES);
	if (ret) {
		cfs_mkfs_error("%s", strerror(ret));
		return -ret;
	}
	memset(c.zeros, 0, CFS_MKFS_IO_BYTES);
	ret = posix_memalign((void **)&c.sb_area, t->mem_align_bytes, c.sb_area_bytes);
	if (ret) {
		cfs_mkfs_error("%s", strerror(ret));
		ret = -ret;
		goto out_free_zeros;
	}
	memset(c.sb_area, 0, c.sb_area_bytes);

	/* 1. Mark the store unfinished before touching anything else. */
	sb->flags = CFS_SB_INPROGRESS;
	sb->generation = 0;
	sb->ctime_ns = now_ns();
	ret = put_superblock(&c, sb, 3u);
	if (ret < 0)
		goto out_free_area;
	cfs_mkfs_test_kill_point("inprogress");

	/* 2. Data region. */
	if (cfg->discard)
		ret = discard_data(&c, sb);
	else if (cfg->fill)
		ret = fill_image(&c, sb);
	if (ret < 0)
		goto out_free_area;
	cfs_mkfs_test_kill_point("data");

	/* 3. Metadata headers, durable before any superblock points at them
	 * (a data store of a pool has none). */
	if (cfs_sb_is_data_store(sb))
		goto finish;
	if (cfg->zero_meta) {
		ret = zero_meta_region(&c, sb);
		if (ret < 0)
			goto out_free_area;
	}
	ret = write_meta_headers(&c, sb);
	if (ret < 0)
		goto out_free_area;
	ret = flush(&c);
	if (ret < 0)
		goto out_free_area;
	cfs_mkfs_test_kill_point("meta");

	/* 4. and 5. The finished superblock, one copy at a time. */
finish:
	sb->flags = 0;
	sb->generation = 1;
	ret = put_superblock(&c, sb, 1u << cfs_sb_slot(sb->generation));
	if (ret < 0)
		goto out_free_area;
	cfs_mkfs_test_kill_point("slot1");

	sb->generation = 2;
	ret = put_superblock(&c, sb, 1u << cfs_sb_slot(sb->generation));
	if (ret < 0)
		goto out_free_area;
	if (t->created)
		sync_parent_dir(t->path);

out_free_area:
	free(c.sb_area);
out_free_zeros:
	free(c.zeros);
	return ret;
}
