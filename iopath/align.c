// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * align.c — discover the direct-I/O alignment of an open target.
 *
 * Order of evidence, most specific first:
 *   1. statx(STATX_DIOALIGN): stx_dio_offset_align / stx_dio_mem_align, what
 *      the kernel itself enforces for O_DIRECT on this file (6.1+ for files
 *      on ext4/xfs/f2fs, later kernels for block devices too). tmpfs and
 *      overlay answer 0: "no O_DIRECT rules", which is not a number to trust.
 *   2. Block devices: BLKSSZGET (logical sector) and BLKPBSZGET (physical).
 *   3. Nothing usable: 512, the smallest sector any device has.
 *
 * Memory alignment: stx_dio_mem_align when reported, else the logical
 * sector. (Block devices since 6.0 often accept 4-byte-aligned buffers, but
 * an NVMe behind another driver may not; the sector is always safe.)
 *
 * Physical sector (the unit a power cut cannot tear):
 *   - block device: BLKPBSZGET;
 *   - regular file: the physical_block_size of the block device holding the
 *     filesystem, read from /sys/dev/block/MAJ:MIN (or its parent disk for
 *     a partition); when st_dev is not a block device (tmpfs, overlay,
 *     btrfs) it is the logical sector.
 *   We do not use st_blksize: it is the filesystem's preferred I/O size
 *   (4096 on ext4 even over 512-byte sectors), not an atomicity promise, and
 *   overstating the atomic unit is the dangerous direction.
 *
 * What this file does not do: it does not open anything or decide policy;
 * cfs_io_open() compares the result with CFS_IO_SECTOR_MAX and the caller's
 * configured alignment.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "iopath/backend.h"

#define ALIGN_FALLBACK_BYTES 512u

static bool is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* Read one unsigned number from a sysfs file; 0 if absent or unparsable. */
static uint64_t sysfs_u64(const char *path)
{
	char text[32];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	text[n] = '\0';
	return strtoull(text, NULL, 10);
}

/*
 * A queue attribute of the block device dev, looking at the partition's
 * parent disk when dev is a partition (partitions have no queue/ directory).
 */
uint64_t cfs_io_sysfs_queue_attr(dev_t dev, const char *attr)
{
	char path[128];
	uint64_t v;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/%s", major(dev), minor(dev), attr);
	v = sysfs_u64(path);
	if (v)
		return v;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../queue/%s", major(dev), minor(dev),
		 attr);
	return sysfs_u64(path);
}

int cfs_io_probe_alignment(int fd, struct cfs_io_geometry *geo)
{
	uint32_t logical = 0, physical = 0, mem = 0;
	struct statx stx;
	struct stat st;

	if (fd < 0 || !geo)
		return -EINVAL;
	if (fstat(fd, &st) < 0)
		return -errno;

	memset(&stx, 0, sizeof(stx));
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align) {
		logical = stx.stx_dio_offset_align;
		mem = stx.stx_dio_mem_align;
	}

	if (S_ISBLK(st.st_mode)) {
		int lbs = 0;
		unsigned int pbs = 0;

		if (ioctl(fd, BLKSSZGET, &lbs) == 0 && lbs > 0 && (uint32_t)lbs > logical)
			logical = (uint32_t)lbs;
		if (ioctl(fd, BLKPBSZGET, &pbs) == 0)
			physical = pbs;
	} else if (S_ISREG(st.st_mode) && major(st.st_dev) != 0) {
		physical = (uint32_t)cfs_io_sysfs_queue_attr(st.st_dev, "physical_block_size");
	}

	if (!is_pow2(logical))
		logical = ALIGN_FALLBACK_BYTES;
	if (!is_pow2(mem) || mem > logical)
		mem = logical; /* never demand less than the kernel may check */
	if (!is_pow2(physical) || physical < logical)
		physical = logical;

	geo->logical_sector_bytes = logical;
	geo->physical_sector_bytes = physical;
	geo->mem_align_bytes = mem;
	geo->is_block_device = S_ISBLK(st.st_mode);
	return 0;
}
