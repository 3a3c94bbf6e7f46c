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

#include "mkchunkfs/mkchunkfs.h"

#define FOUND_ITEMS_MAX 8u /* named in the message; more are counted */
#define FOUND_ITEM_BYTES 160u

struct found_list {
	unsigned count;
	char item[FOUND_ITEMS_MAX][FOUND_ITEM_BYTES];
};

static void list_add(struct found_list *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void list_add(struct found_list *l, const char *fmt, ...)
{
	va_list ap;

	if (l->count < FOUND_ITEMS_MAX) {
		va_start(ap, fmt);
		vsnprintf(l->item[l->count], FOUND_ITEM_BYTES, fmt, ap);
		va_end(ap);
	}
	l->count++;
}

/* "a dos", "an ext4", "an xfs" (said "ex-eff-ess"). */
static const char *article(const char *word)
{
	return strchr("aeiouxAEIOUX", word[0]) && word[0] ? "an" : "a";
}

/* What blkid's USAGE value calls the thing, for a message. */
static const char *usage_noun(const char *usage)
{
	if (!usage)
		return "signature";
	if (strcmp(usage, "filesystem") == 0)
		return "filesystem";
	if (strcmp(usage, "raid") == 0)
		return "RAID member";
	if (strcmp(usage, "crypto") == 0)
		return "encrypted volume";
	return "signature";
}

/* blkid probe on the buffered descriptor, asking for what a message and a
 * wipe need: type, label, usage and the magic's offset (BLKID_SUBLKS_MAGIC,
 * BLKID_PARTS_MAGIC are what blkid_do_wipe() erases). BADCSUM: a filesystem
 * with a bad checksum still holds someone's data. */
static blkid_probe probe_new(const struct cfs_mkfs_target *t)
{
	blkid_probe pr = blkid_new_probe();

	if (!pr)
		return NULL;
	if (blkid_probe_set_device(pr, t->fd, 0, 0) != 0) {
		blkid_free_probe(pr);
		return NULL;
	}
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_LABEL | BLKID_SUBLKS_TYPE |
						      BLKID_SUBLKS_USAGE | BLKID_SUBLKS_MAGIC |
						      BLKID_SUBLKS_BADCSUM);
	blkid_probe_enable_partitions(pr, 1);
	blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC);
	return pr;
}

/* visit(pr, arg) for each signature blkid finds on t (partition tables
 * included), in turn; a visit may erase the one it is shown (blkid_do_wipe()
 * steps the probe back, so the next visit sees what it was hiding). 0, the
 * first visit's nonzero return, or -ENOMEM / -EIO (said). */
static int each_signature(const struct cfs_mkfs_target *t, int (*visit)(blkid_probe pr, void *arg),
			  void *arg)
{
	blkid_probe pr;
	int rc, ret = 0;

	pr = probe_new(t);
	if (!pr) {
		cfs_mkfs_error("%s: cannot start a blkid probe", t->path);
		return -ENOMEM;
	}
	/* blkid_do_probe() returns each signature in turn (0), then 1. */
	while (!ret && (rc = blkid_do_probe(pr)) == 0)
		ret = visit(pr, arg);
	blkid_free_probe(pr);
	if (ret)
		return ret;
	if (rc < 0) {
		cfs_mkfs_error("%s: blkid cannot read the existing signatures", t->path);
		return -EIO;
	}
	return 0;
}

struct found_blkid {
	struct found_list *l;
	bool *partition_table;
};

static int add_found(blkid_probe pr, void *arg)
{
	struct found_blkid *f = arg;
	const char *type = NULL, *label = NULL, *usage = NULL, *pttype = NULL;

	if (blkid_probe_lookup_value(pr, "TYPE", &type, NULL) == 0) {
		blkid_probe_lookup_value(pr, "LABEL", &label, NULL);
		blkid_probe_lookup_value(pr, "USAGE", &usage, NULL);
		if (label && *label)
			list_add(f->l, "%s %s %s (label \"%s\")", article(type), type,
				 usage_noun(usage), label);
		else
			list_add(f->l, "%s %s %s", article(type), type, usage_noun(usage));
	} else if (blkid_probe_lookup_value(pr, "PTTYPE", &pttype, NULL) == 0) {
		list_add(f->l, "%s %s partition table", article(pttype), pttype);
		*f->partition_table = true;
	}
	return 0;
}

static int find_blkid(const struct cfs_mkfs_target *t, struct found_list *l, bool *pt)
{
	struct found_blkid f = {l, pt};

	return each_signature(t, add_found, &f);
}

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

/* Our own signature: either slot carrying the chunkfs magic counts, even a
 * damaged or unfinished one, since someone ran mkchunkfs on this target. */
static int find_chunkfs(const struct cfs_mkfs_target *t, struct found_list *l)
{
	uint8_t slots[CFS_MKFS_SB_PAIR_BYTES];
	char uuid[CFS_UUID_STR_BYTES];
	const char *why = NULL;
	struct cfs_sb sb;
	int ret;

	ret = cfs_mkfs_read_slots(t, slots);
	if (ret < 0)
		return ret;
	if (cfs_sb_decode(slots, &sb, NULL) == -EINVAL &&
	    cfs_sb_decode(slots + CFS_SB_BLOCK_BYTES, &sb, NULL) == -EINVAL)
		return 0;

	ret = cfs_sb_pick(slots, slots + CFS_SB_BLOCK_BYTES, &sb, NULL, &why);
	if (ret < 0) {
		list_add(l, "a damaged chunkfs store (%s)", why);
		return 0;
	}
	if (sb.flags & CFS_SB_INPROGRESS) {
		list_add(l, "an unfinished chunkfs store (mkchunkfs was interrupted)");
		return 0;
	}
	cfs_uuid_unparse(sb.uuid, uuid);
	if (sb.label[0])
		list_add(l, "a chunkfs store (label \"%s\", uuid %s)", sb.label, uuid);
	else
		list_add(l, "a chunkfs store (uuid %s)", uuid);
	return 0;
}

/* "A", "A and B", "A, B and C", "A, B and 3 more signatures". */
static void list_join(const struct found_list *l, char *out, size_t out_size)
{
	unsigned kept = l->count < FOUND_ITEMS_MAX ? l->count : FOUND_ITEMS_MAX;
	size_t used = 0;
	unsigned i;

	out[0] = '\0';
	for (i = 0; i < kept && used < out_size; i++) {
		const char *sep = i == 0 ? "" : (i + 1 == l->count ? " and " : ", ");

		used += (size_t)snprintf(out + used, out_size - used, "%s%s", sep, l->item[i]);
	}
	if (l->count > kept && used < out_size)
		snprintf(out + used, out_size - used, " and %u more signatures", l->count - kept);
}

int cfs_mkfs_signatures_find(const struct cfs_mkfs_target *t, struct cfs_mkfs_found *found)
{
	struct found_list l;
	int ret;

	memset(found, 0, sizeof(*found));
	memset(&l, 0, sizeof(l));
	if (!t->exists || t->target_size_bytes == 0)
		return 0; /* a new or empty image holds nothing */

	ret = find_chunkfs(t, &l);
	if (ret < 0)
		return ret;
	ret = find_blkid(t, &l, &found->partition_table);
	if (ret < 0)
		return ret;
	found->count = l.count;
	list_join(&l, found->what, sizeof(found->what));
	return 0;
}

struct wipe {
	const char *path;
	bool wiped_pt;
};

/* Erase the signature shown; the loop then sees whatever it was hiding,
 * until nothing is left. */
static int wipe_one(blkid_probe pr, void *arg)
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
	int ret;

	ret = each_signature(t, wipe_one, &w);
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
