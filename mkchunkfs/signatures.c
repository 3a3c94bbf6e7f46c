/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * signatures.c — what does the target already hold, and erasing it.
 *
 * Two sources: libblkid, which knows every filesystem, RAID, crypto and
 * partition-table signature Linux knows, and our own superblock decoder,
 * because blkid has never heard of chunkfs. Every signature is listed (a
 * disk can carry a partition table and a stale filesystem at once), so the
 * refusal message names all of them and -f erases all of them, the way
 * wipefs -a does: otherwise blkid would report two types afterwards and
 * udev or mount could pick the stale one.
 *
 * Probing reads through the buffered descriptor (blkid reads at arbitrary
 * offsets and sizes, which O_DIRECT would refuse) that also holds the
 * O_EXCL claim, so nobody can mount the device between probe and wipe.
 *
 * What this file does not do: decide whether to refuse (main() does, from
 * -f) or erase our own superblock (write.c overwrites both slots first).
 */
#include <blkid.h>
#include <errno.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "fs/meta/signature.h"
#include "mkchunkfs/mkchunkfs.h"

int cfs_mkfs_read_slots(const struct cfs_mkfs_target *t, uint8_t slots[CFS_MKFS_SB_PAIR_BYTES])
{
	size_t done = 0;
	ssize_t n;

	memset(slots, 0, CFS_MKFS_SB_PAIR_BYTES);
	if (t->fd < 0)
		return 0;
	while (done < CFS_MKFS_SB_PAIR_BYTES) {
		n = pread(t->fd, slots + done, CFS_MKFS_SB_PAIR_BYTES - done, (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			cfs_mkfs_error("%s: cannot read the superblocks: %s", t->path,
				       strerror(errno));
			return -errno;
		}
		if (n == 0)
			break; /* a short image: the rest stays zero */
		done += (size_t)n;
	}
	return 0;
}

int cfs_mkfs_signatures_find(const struct cfs_mkfs_target *t, struct cfs_mkfs_found *found)
{
	uint8_t slots[CFS_MKFS_SB_PAIR_BYTES];
	struct cfs_signatures sigs;
	char err[256];
	int ret;

	memset(found, 0, sizeof(*found));
	if (!t->exists || t->target_size_bytes == 0)
		return 0; /* a new or empty image holds nothing */
	ret = cfs_mkfs_read_slots(t, slots);
	if (ret < 0)
		return ret;
	ret = cfs_signatures_find(t->fd, slots, &sigs, err, sizeof(err));
	if (ret < 0) {
		cfs_mkfs_error("%s: %s", t->path, err);
		return ret;
	}
	found->count = sigs.count;
	found->partition_table = sigs.partition_table;
	_Static_assert(sizeof(found->what) == sizeof(sigs.what), "the same message");
	memcpy(found->what, sigs.what, sizeof(found->what));
	return 0;
}

struct wipe {
	const char *path;
	bool wiped_pt;
};

/* Erase the signature shown; the loop then sees whatever it was hiding,
 * until nothing is left. */
static int wipe_one(struct blkid_struct_probe *pr, void *arg)
{
	struct wipe *w = arg;
	const char *pttype;

	if (blkid_probe_lookup_value(pr, "PTTYPE", &pttype, NULL) == 0)
		w->wiped_pt = true;
	if (blkid_do_wipe(pr, 0) != 0) {
		cfs_mkfs_error("%s: cannot erase an existing signature: %s", w->path,
			       strerror(errno));
		return -EIO;
	}
	return 0;
}

int cfs_mkfs_signatures_wipe(struct cfs_mkfs_target *t)
{
	struct wipe w = {t->path, false};
	char err[256] = "";
	int ret;

	ret = cfs_signatures_each(t->fd, wipe_one, &w, err, sizeof(err));
	if (ret == -ENOMEM || (ret == -EIO && err[0]))
		cfs_mkfs_error("%s: %s", t->path, err);
	if (ret)
		return ret;
	/* The erasures went through the page cache; make them durable before
	 * the O_DIRECT writes begin, so a late writeback cannot land on top. */
	if (fsync(t->fd) < 0) {
		cfs_mkfs_error("%s: cannot flush the erased signatures: %s", t->path,
			       strerror(errno));
		return -errno;
	}
	/* The kernel still shows the old partitions; ask it to reread the
	 * (now empty) table. Fails harmlessly on devices without partitions
	 * (a loop device without partscan) or with partitions in use. */
	if (w.wiped_pt && t->is_block_device)
		(void)ioctl(t->fd, BLKRRPART, NULL);
	/* RBD: blkid erased them in the probe copy; now in the image. */
	if (t->is_rbd)
		return cfs_mkfs_rbd_write_back_probe(t);
	return 0;
}
