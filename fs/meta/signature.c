/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * signature.c — what a target already holds (fs/meta/signature.h).
 *
 * Every signature is listed (a disk can carry a partition table and a stale
 * filesystem at once), so a refusal names all of them, the way wipefs does.
 */
#include <blkid.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fs/base/text.h"
#include "fs/meta/signature.h"

#define FOUND_ITEMS_MAX 8u /* named in the message; more are counted */
#define FOUND_ITEM_BYTES 160u

struct found_list {
	unsigned count;
	bool partition_table;
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

/* A probe asking for what a message and a wipe need: type, label, usage and
 * the magic's offset (BLKID_SUBLKS_MAGIC, BLKID_PARTS_MAGIC are what
 * blkid_do_wipe() erases). BADCSUM: a filesystem with a bad checksum still
 * holds someone's data. */
static blkid_probe probe_new(int fd)
{
	blkid_probe pr = blkid_new_probe();

	if (!pr)
		return NULL;
	if (blkid_probe_set_device(pr, fd, 0, 0) != 0) {
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

int cfs_signatures_each(int fd, int (*visit)(struct blkid_struct_probe *probe, void *arg),
			void *arg, char *err, size_t err_bytes)
{
	blkid_probe pr = probe_new(fd);
	int rc, ret = 0;

	if (!pr) {
		cfs_text_error(err, err_bytes, "cannot start a blkid probe");
		return -ENOMEM;
	}
	/* blkid_do_probe() returns each signature in turn (0), then 1. */
	while (!ret && (rc = blkid_do_probe(pr)) == 0)
		ret = visit(pr, arg);
	blkid_free_probe(pr);
	if (ret)
		return ret;
	if (rc < 0) {
		cfs_text_error(err, err_bytes, "blkid cannot read the existing signatures");
		return -EIO;
	}
	return 0;
}

static int add_found(struct blkid_struct_probe *pr, void *arg)
{
	struct found_list *l = arg;
	const char *type = NULL, *label = NULL, *usage = NULL, *pttype = NULL;

	if (blkid_probe_lookup_value(pr, "TYPE", &type, NULL) == 0) {
		blkid_probe_lookup_value(pr, "LABEL", &label, NULL);
		blkid_probe_lookup_value(pr, "USAGE", &usage, NULL);
		if (label && *label)
			list_add(l, "%s %s %s (label \"%s\")", article(type), type,
				 usage_noun(usage), label);
		else
			list_add(l, "%s %s %s", article(type), type, usage_noun(usage));
	} else if (blkid_probe_lookup_value(pr, "PTTYPE", &pttype, NULL) == 0) {
		list_add(l, "%s %s partition table", article(pttype), pttype);
		l->partition_table = true;
	}
	return 0;
}

/* Our own signature: either slot carrying the chunkfs magic counts, even a
 * damaged or unfinished one, since someone ran mkchunkfs on this target. */
static void find_chunkfs(const uint8_t *slots, struct found_list *l)
{
	char uuid[CFS_UUID_STR_BYTES];
	const char *why = NULL;
	struct cfs_sb sb;

	if (cfs_sb_decode(slots, &sb, NULL) == -EINVAL &&
	    cfs_sb_decode(slots + CFS_SB_BLOCK_BYTES, &sb, NULL) == -EINVAL)
		return;
	if (cfs_sb_pick(slots, slots + CFS_SB_BLOCK_BYTES, &sb, NULL, &why) < 0) {
		list_add(l, "a damaged chunkfs store (%s)", why);
		return;
	}
	if (sb.flags & CFS_SB_INPROGRESS) {
		list_add(l, "an unfinished chunkfs store (mkchunkfs was interrupted)");
		return;
	}
	cfs_uuid_unparse(sb.uuid, uuid);
	if (sb.label[0])
		list_add(l, "a chunkfs store (label \"%s\", uuid %s)", sb.label, uuid);
	else
		list_add(l, "a chunkfs store (uuid %s)", uuid);
}

/* "A", "A and B", "A, B and C", "A, B and 3 more signatures". */
static void list_join(const struct found_list *l, char *out, size_t out_size)
{
	unsigned kept = l->count < FOUND_ITEMS_MAX ? l->count : FOUND_ITEMS_MAX;
	size_t used = 0;

	out[0] = '\0';
	for (unsigned i = 0; i < kept && used < out_size; i++) {
		const char *sep = i == 0 ? "" : (i + 1 == l->count ? " and " : ", ");

		used += (size_t)snprintf(out + used, out_size - used, "%s%s", sep, l->item[i]);
	}
	if (l->count > kept && used < out_size)
		snprintf(out + used, out_size - used, " and %u more signatures", l->count - kept);
}

int cfs_signatures_find(int fd, const uint8_t *slots, struct cfs_signatures *found, char *err,
			size_t err_bytes)
{
	struct found_list l;
	int ret;

	memset(found, 0, sizeof(*found));
	memset(&l, 0, sizeof(l));
	if (slots)
		find_chunkfs(slots, &l);
	ret = cfs_signatures_each(fd, add_found, &l, err, err_bytes);
	if (ret < 0)
		return ret;
	found->count = l.count;
	found->partition_table = l.partition_table;
	list_join(&l, found->what, sizeof(found->what));
	return 0;
}

void cfs_signature_probe_ranges(uint64_t size_bytes, uint64_t range[2][2])
{
	uint64_t head =
		size_bytes < CFS_SIGNATURE_PROBE_BYTES ? size_bytes : CFS_SIGNATURE_PROBE_BYTES;
	uint64_t tail = size_bytes - head < CFS_SIGNATURE_PROBE_BYTES ? size_bytes - head
								      : CFS_SIGNATURE_PROBE_BYTES;

	range[0][0] = 0;
	range[0][1] = head;
	range[1][0] = size_bytes - tail;
	range[1][1] = tail;
}

int cfs_signature_probe_copy(uint64_t size_bytes,
			     int (*read)(void *arg, void *buf, uint64_t length, uint64_t offset),
			     void *arg, int *fd_out, char *err, size_t err_bytes)
{
	uint64_t range[2][2];
	uint8_t *buf = NULL;
	int fd, ret = 0;

	*fd_out = -1;
	fd = memfd_create("chunkfs-probe", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)size_bytes) < 0) {
		ret = -errno;
		cfs_text_error(err, err_bytes, "cannot make a probe copy: %s", strerror(errno));
		goto out;
	}
	buf = aligned_alloc(4096, CFS_SIGNATURE_PROBE_BYTES);
	if (!buf) {
		ret = -ENOMEM;
		cfs_text_error(err, err_bytes, "out of memory");
		goto out;
	}
	cfs_signature_probe_ranges(size_bytes, range);
	for (int i = 0; i < 2 && ret == 0; i++) {
		if (!range[i][1])
			continue;
		ret = read(arg, buf, range[i][1], range[i][0]);
		if (ret < 0) {
			cfs_text_error(err, err_bytes, "cannot read it: %s", strerror(-ret));
			break;
		}
		ret = 0;
		if (pwrite(fd, buf, range[i][1], (off_t)range[i][0]) != (ssize_t)range[i][1]) {
			ret = -EIO;
			cfs_text_error(err, err_bytes, "cannot fill the probe copy");
		}
	}
out:
	free(buf);
	if (ret && fd >= 0)
		close(fd);
	else
		*fd_out = fd;
	return ret;
}
