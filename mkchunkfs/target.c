/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * target.c — open the device or image mkchunkfs formats, and learn its size
 * and direct-I/O geometry.
 *
 * Opening is split in two so that a refusal leaves the target untouched:
 * cfs_mkfs_target_open() only opens what exists (a block device with O_EXCL,
 * which is how the kernel tells us it is mounted or held by someone else)
 * and measures it; cfs_mkfs_target_prepare() creates or extends an image and
 * opens the O_DIRECT descriptor, and main() calls it only after the layout
 * was accepted and no existing signature stopped us.
 *
 * A new image's geometry is read from an O_TMPFILE in the directory it will
 * live in: the same filesystem answers STATX_DIOALIGN for it, and nothing
 * visible is created, which keeps -n free of side effects.
 *
 * An RBD image (rbd:POOL/IMAGE) is opened through iopath's rbd backend, which
 * takes the image's exclusive lock for a run that writes (a mounted store is
 * refused, naming the host that holds it) and none for -n and -D. blkid and
 * the superblock reads need a file descriptor: they get a memfd holding a
 * copy of the image's ends (fs/meta/signature.h, "probed through a copy");
 * with -f the erased signatures are written back from it. Writes go through
 * the backend (cfs_mkfs_rbd_*). The image is never created or resized here:
 * that is `rbd create` and `rbd resize`, with the cluster's own permissions.
 *
 * What this file does not do: look at the target's contents (signatures.c)
 * or write anything but the new image's size.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fs/meta/signature.h"
#include "mkchunkfs/mkchunkfs.h"

void cfs_mkfs_target_init(struct cfs_mkfs_target *t)
{
	memset(t, 0, sizeof(*t));
	t->fd = -1;
	t->direct_fd = -1;
}

static bool is_pow2(uint64_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

/* Copy with truncation, for names that only end up in messages. */
static void str_copy(char *dst, size_t size, const char *src)
{
	size_t n = strnlen(src, size - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

/*
 * Where the block device is mounted, from /proc/self/mountinfo (field 3 is
 * MAJ:MIN, field 5 the mount point). Only used to explain an EBUSY.
 */
static bool find_mount_point(dev_t rdev, char *out, size_t out_size)
{
	char line[4096], point[4096];
	unsigned maj, min;
	bool found = false;
	FILE *f;

	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, point) != 3)
			continue;
		if (makedev(maj, min) == rdev) {
			str_copy(out, out_size, point);
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

static void describe_busy(struct cfs_mkfs_target *t, char *out, size_t out_size)
{
	char point[1024];

	if (find_mount_point(t->rdev, point, sizeof(point)))
		snprintf(out, out_size, "%s is in use: mounted on %s", t->path, point);
	else
		snprintf(out, out_size,
			 "%s is in use: another program holds it open exclusively "
			 "(a mounted filesystem, swap, a device-mapper or RAID member, or another "
			 "mkfs)",
			 t->path);
}

/*
 * The loop device an image is attached to, if any (/sys/block/loopN/loop/
 * backing_file, compared by device and inode so any path spelling matches).
 * Formatting an image under an attached loop device would change a device
 * someone may have mounted, behind its page cache.
 */
static bool find_loop_attachment(const struct stat *st, char *out, size_t out_size)
{
	char path[512], backing[4096];
	struct dirent *de;
	struct stat bst;
	bool found = false;
	ssize_t n;
	DIR *dir;
	int fd;

	dir = opendir("/sys/block");
	if (!dir)
		return false;
	while (!found && (de = readdir(dir))) {
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, backing, sizeof(backing) - 1);
		close(fd);
		if (n <= 0)
			continue;
		backing[n] = '\0';
		backing[strcspn(backing, "\n")] = '\0';
		if (stat(backing, &bst) == 0 && bst.st_dev == st->st_dev &&
		    bst.st_ino == st->st_ino) {
			str_copy(out, out_size, "/dev/");
			str_copy(out + strlen(out), out_size - strlen(out), de->d_name);
			found = true;
		}
	}
	closedir(dir);
	return found;
}

static int probe_geometry(struct cfs_mkfs_target *t, int fd)
{
	int ret = cfs_io_probe_alignment(fd, &t->geo);

	if (ret < 0)
		cfs_mkfs_error("%s: cannot read the direct-I/O alignment: %s", t->path,
			       strerror(-ret));
	return ret;
}

/* Geometry of an image that does not exist yet: ask its directory's
 * filesystem through an unnamed temporary file (see the top comment). */
static int probe_new_image(struct cfs_mkfs_target *t)
{
	char *copy, *dir;
	int fd, ret;

	copy = strdup(t->path);
	if (!copy)
		return -ENOMEM;
	dir = dirname(copy);
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		/* No O_TMPFILE here: the directory itself gives the fallback
		 * answer (the smallest sector), which is always safe to write. */
		fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (fd < 0) {
		ret = -errno;
		cfs_mkfs_error("%s: cannot create an image in %s: %s", t->path, dir,
			       strerror(errno));
		free(copy);
		return ret;
	}
	free(copy);
	ret = probe_geometry(t, fd);
	close(fd);
	t->geo.is_block_device = false;
	return ret;
}

static int open_device(struct cfs_mkfs_target *t, const struct cfs_mkfs_opts *opts,
		       const struct stat *st)
{
	char busy[sizeof(t->note)];
	uint64_t size;
	int flags;

	t->is_block_device = true;
	t->rdev = st->st_rdev;
	flags = (t->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	/* O_EXCL on a block device: the kernel refuses it (EBUSY) while the
	 * device is mounted or claimed by another exclusive opener, and keeps
	 * everyone else from claiming it while we write. -D only reads a
	 * superblock, which is fine on a live store. */
	t->fd = open(t->path, flags | (opts->print_only ? 0 : O_EXCL));
	if (t->fd < 0 && errno == EBUSY) {
		describe_busy(t, busy, sizeof(busy));
		if (!opts->dry_run) {
			cfs_mkfs_error("%s", busy);
			return -EBUSY;
		}
		str_copy(t->note, sizeof(t->note), busy);
		t->fd = open(t->path, flags);
	}
	if (t->fd < 0) {
		cfs_mkfs_error("%s: %s", t->path, strerror(errno));
		return -errno;
	}
	if (ioctl(t->fd, BLKGETSIZE64, &size) < 0) {
		cfs_mkfs_error("%s: cannot read the device size: %s", t->path, strerror(errno));
		return -errno;
	}
	t->target_size_bytes = size;
	return probe_geometry(t, t->fd);
}

static int open_image(struct cfs_mkfs_target *t, const struct cfs_mkfs_opts *opts,
		      const struct stat *st)
{
	char loop[64];

	t->fd = open(t->path, (t->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (t->fd < 0) {
		cfs_mkfs_error("%s: %s", t->path, strerror(errno));
		return -errno;
	}
	t->target_size_bytes = (uint64_t)st->st_size;
	if (!opts->print_only && find_loop_attachment(st, loop, sizeof(loop))) {
		if (!opts->dry_run) {
			cfs_mkfs_error(
				"%s is attached to %s: format %s instead, or detach it first "
				"(losetup -d %s)",
				t->path, loop, loop, loop);
			return -EBUSY;
		}
		str_copy(t->note, sizeof(t->note), t->path);
		str_copy(t->note + strlen(t->note), sizeof(t->note) - strlen(t->note),
			 " is attached to ");
		str_copy(t->note + strlen(t->note), sizeof(t->note) - strlen(t->note), loop);
	}
	return probe_geometry(t, t->fd);
}

/* ---- RBD images ------------------------------------------------------------------- */

static void rbd_log(void *arg, const char *line)
{
	(void)arg;
	cfs_mkfs_error("%s", line);
}

int cfs_mkfs_rbd_write(struct cfs_mkfs_target *t, const void *buf, uint64_t length, uint64_t offset)
{
	int ret = cfs_ioq_sync_range(t->q, CFS_IO_WRITE, offset, length, (void *)buf);

	if (ret < 0)
		cfs_mkfs_error("%s: write of %llu bytes at offset %llu failed: %s", t->path,
			       (unsigned long long)length, (unsigned long long)offset,
			       strerror(-ret));
	return ret;
}

int cfs_mkfs_rbd_read(const struct cfs_mkfs_target *t, void *buf, uint64_t length, uint64_t offset)
{
	return cfs_ioq_sync_range(t->q, CFS_IO_READ, offset, length, buf);
}

int cfs_mkfs_rbd_flush(struct cfs_mkfs_target *t)
{
	int ret = cfs_ioq_sync(t->q, CFS_IO_FLUSH, 0, 0, NULL, NULL);

	if (ret < 0)
		cfs_mkfs_error("%s: flush failed: %s", t->path, strerror(-ret));
	return ret;
}

int cfs_mkfs_rbd_discard(struct cfs_mkfs_target *t, uint64_t offset, uint64_t length)
{
	int ret = cfs_ioq_sync(t->q, CFS_IO_DISCARD, offset, (uint32_t)length, NULL, NULL);

	if (ret < 0)
		cfs_mkfs_error("%s: discard failed: %s (use -K to skip discarding)", t->path,
			       strerror(-ret));
	return ret;
}

static int probe_read(void *arg, void *buf, uint64_t length, uint64_t offset)
{
	return cfs_mkfs_rbd_read(arg, buf, length, offset);
}

static int rbd_probe_copy(struct cfs_mkfs_target *t)
{
	char err[256];
	int ret = cfs_signature_probe_copy(t->target_size_bytes, probe_read, t, &t->fd, err,
					   sizeof(err));

	if (ret < 0)
		cfs_mkfs_error("%s: %s", t->path, err);
	return ret;
}

int cfs_mkfs_rbd_write_back_probe(struct cfs_mkfs_target *t)
{
	uint64_t range[2][2];
	uint8_t *buf;
	int ret = 0;

	buf = aligned_alloc(4096, CFS_SIGNATURE_PROBE_BYTES);
	if (!buf)
		return -ENOMEM;
	cfs_signature_probe_ranges(t->target_size_bytes, range);
	for (int i = 0; i < 2 && ret == 0; i++) {
		if (!range[i][1])
			continue;
		if (pread(t->fd, buf, range[i][1], (off_t)range[i][0]) != (ssize_t)range[i][1]) {
			cfs_mkfs_error("%s: cannot read the probe copy back", t->path);
			ret = -EIO;
			break;
		}
		ret = cfs_mkfs_rbd_write(t, buf, range[i][1], range[i][0]);
	}
	free(buf);
	return ret < 0 ? ret : cfs_mkfs_rbd_flush(t);
}

static int open_rbd(struct cfs_mkfs_target *t, const struct cfs_mkfs_opts *opts)
{
	struct cfs_io_config cfg = {0};
	struct cfs_ioq_config qc = {.depth = 4};
	int ret;

	t->is_rbd = true;
	t->exists = true;
	cfs_io_config_source(&cfg, t->path);
	cfg.read_only = t->read_only;
	cfg.exclusive = !t->read_only; /* -n and -D read a live store */
	cfg.ceph.conf = opts->ceph_conf;
	cfg.ceph.id = opts->ceph_id;
	cfg.ceph.cluster = opts->ceph_cluster;
	cfg.log = rbd_log;
	ret = cfs_io_open(&cfg, &t->io);
	if (ret < 0) {
		t->io = NULL;
		return ret; /* the backend said why */
	}
	t->geo = *cfs_io_geometry(t->io);
	t->target_size_bytes = t->geo.size_bytes;
	ret = cfs_ioq_create(t->io, &qc, &t->q);
	if (ret < 0) {
		t->q = NULL;
		cfs_mkfs_error("%s: cannot create an I/O queue: %s", t->path, strerror(-ret));
		return ret;
	}
	return rbd_probe_copy(t);
}

/*
 * Test and golden-file hook, after mke2fs's MKE2FS_DEVICE_SECTSIZE: pretend
 * the target has these sector sizes, so expected output does not depend on
 * the machine the tests run on. Larger-than-real values are always safe to
 * write with; smaller ones make O_DIRECT writes fail.
 */
static int apply_env_geometry(struct cfs_mkfs_target *t)
{
	static const struct {
		const char *name;
		bool logical;
	} vars[] = {
		{"MKCHUNKFS_DEVICE_SECTSIZE", true},
		{"MKCHUNKFS_DEVICE_PHYS_SECTSIZE", false},
	};
	unsigned long long v;
	const char *s;
	char *end;
	size_t i;

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		s = getenv(vars[i].name);
		if (!s || !*s)
			continue;
		errno = 0;
		v = strtoull(s, &end, 10);
		if (errno || *end || !is_pow2(v) || v < CFS_SECTOR_MIN || v > CFS_SECTOR_MAX) {
			cfs_mkfs_error("%s=%s: must be a power of two between %u and %u",
				       vars[i].name, s, CFS_SECTOR_MIN, CFS_SECTOR_MAX);
			return -EINVAL;
		}
		if (vars[i].logical) {
			t->geo.logical_sector_bytes = (uint32_t)v;
			t->geo.mem_align_bytes = (uint32_t)v;
		} else {
			t->geo.physical_sector_bytes = (uint32_t)v;
		}
	}
	if (t->geo.physical_sector_bytes < t->geo.logical_sector_bytes)
		t->geo.physical_sector_bytes = t->geo.logical_sector_bytes;
	return 0;
}

int cfs_mkfs_target_open(struct cfs_mkfs_target *t, const struct cfs_mkfs_opts *opts)
{
	char a[CFS_SIZE_STR_BYTES], b[CFS_SIZE_STR_BYTES];
	struct stat st;
	int ret;

	t->path = opts->target;
	t->read_only = opts->dry_run || opts->print_only;

	if (cfs_source_is_rbd(t->path)) {
		ret = open_rbd(t, opts);
	} else if (stat(t->path, &st) < 0) {
		if (errno != ENOENT || opts->print_only) {
			cfs_mkfs_error("%s: %s", t->path, strerror(errno));
			return -errno;
		}
		if (!opts->size_given) {
			cfs_mkfs_error(
				"%s: no such file or device (use -s SIZE to create an image file)",
				t->path);
			return -ENOENT;
		}
		t->exists = false;
		ret = probe_new_image(t);
	} else if (S_ISBLK(st.st_mode)) {
		t->exists = true;
		ret = open_device(t, opts, &st);
	} else if (S_ISREG(st.st_mode)) {
		t->exists = true;
		ret = open_image(t, opts, &st);
	} else {
		cfs_mkfs_error("%s: not a block device or a regular file", t->path);
		return -ENOTBLK;
	}
	if (ret < 0)
		return ret;
	ret = apply_env_geometry(t);
	if (ret < 0)
		return ret;

	t->store_size_bytes = t->target_size_bytes;
	if (opts->size_given) {
		if ((t->is_block_device || t->is_rbd) && opts->size_bytes > t->target_size_bytes) {
			cfs_mkfs_error("%s: -s %s is larger than the %s (%s)%s", t->path,
				       cfs_size_format(opts->size_bytes, a),
				       t->is_rbd ? "image" : "device",
				       cfs_size_format(t->target_size_bytes, b),
				       t->is_rbd ? "; grow it with rbd resize" : "");
			return -EFBIG;
		}
		/* An image is extended to -s but never shrunk: a larger file keeps
		 * its tail, which the store simply does not use. */
		t->store_size_bytes = opts->size_bytes;
	}

	t->write_align_bytes = t->geo.logical_sector_bytes;
	t->mem_align_bytes = t->geo.mem_align_bytes > 4096 ? t->geo.mem_align_bytes : 4096;
	return 0;
}

/* Reopen the very file fd refers to (not whatever the path names now). */
static int reopen(int fd, int flags)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return open(proc, flags | O_CLOEXEC);
}

int cfs_mkfs_target_check_space(const struct cfs_mkfs_target *t, char *why, size_t why_bytes)
{
	char need_text[CFS_SIZE_STR_BYTES], free_text[CFS_SIZE_STR_BYTES];
	uint64_t have_bytes = 0, need_bytes, free_bytes;
	struct statvfs vfs;
	struct stat st;
	int ret;

	if (t->exists) {
		if (fstat(t->fd, &st) < 0 || fstatvfs(t->fd, &vfs) < 0)
			return -errno;
		have_bytes = (uint64_t)st.st_blocks * 512u;
	} else {
		char *copy = strdup(t->path);

		if (!copy)
			return -ENOMEM;
		ret = statvfs(dirname(copy), &vfs);
		ret = ret < 0 ? -errno : 0;
		free(copy);
		if (ret)
			return ret;
	}
	need_bytes = t->store_size_bytes > have_bytes ? t->store_size_bytes - have_bytes : 0;
	/* root may use the blocks the filesystem reserves for it, as its
	 * writes would. */
	free_bytes = (uint64_t)(geteuid() == 0 ? vfs.f_bfree : vfs.f_bavail) * vfs.f_frsize;
	if (need_bytes <= free_bytes)
		return 0;
	snprintf(why, why_bytes,
		 "writing the image fully needs %s more and its filesystem has %s free",
		 cfs_size_format(need_bytes, need_text), cfs_size_format(free_bytes, free_text));
	return -ENOSPC;
}

int cfs_mkfs_target_prepare(struct cfs_mkfs_target *t)
{
	int ret;

	if (t->is_rbd)
		return 0; /* written through t->q; never created or resized here */

	if (!t->exists) {
		t->fd = open(t->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (t->fd < 0) {
			ret = -errno;
			cfs_mkfs_error("%s: cannot create the image: %s", t->path, strerror(errno));
			return ret;
		}
		t->created = true;
		t->exists = true;
	}
	if (!t->is_block_device && t->target_size_bytes < t->store_size_bytes) {
		if (ftruncate(t->fd, (off_t)t->store_size_bytes) < 0) {
			ret = -errno;
			cfs_mkfs_error("%s: cannot extend the image to %llu bytes: %s", t->path,
				       (unsigned long long)t->store_size_bytes, strerror(errno));
			return ret;
		}
		t->target_size_bytes = t->store_size_bytes;
	}

	/* Not O_EXCL: we already hold the exclusive claim through t->fd, and
	 * a second exclusive open from this process would fail. */
	t->direct_fd = reopen(t->fd, O_RDWR | O_DIRECT);
	if (t->direct_fd < 0) {
		if (errno != EINVAL) {
			ret = -errno;
			cfs_mkfs_error("%s: cannot open for direct I/O: %s", t->path,
				       strerror(errno));
			return ret;
		}
		/* A filesystem without O_DIRECT: every write goes through the
		 * page cache and is made durable by fsync, which is slower but
		 * as safe. */
		cfs_mkfs_error(
			"%s: the filesystem refuses O_DIRECT; writing through the page cache",
			t->path);
	}
	return 0;
}

void cfs_mkfs_target_close(struct cfs_mkfs_target *t, bool remove_created)
{
	if (t->q)
		cfs_ioq_destroy(t->q);
	if (t->io)
		cfs_io_close(t->io);
	t->q = NULL;
	t->io = NULL;
	if (t->direct_fd >= 0)
		close(t->direct_fd);
	if (t->fd >= 0)
		close(t->fd);
	t->direct_fd = -1;
	t->fd = -1;
	if (remove_created && t->created && unlink(t->path) < 0)
		cfs_mkfs_error("%s: cannot remove the unfinished image: %s", t->path,
			       strerror(errno));
}
