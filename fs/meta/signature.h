/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * signature.h — what a device or image already holds, before it becomes a
 * store: every filesystem, RAID, crypto and partition-table signature
 * libblkid knows, and a chunkfs superblock (blkid has never heard of
 * chunkfs). mkchunkfs refuses to format over them without -f, and
 * `chunkfs store add` refuses them outright; both ask here, so both name
 * the same things in the same words.
 *
 * Reads only, through a buffered descriptor the caller opened (blkid reads
 * at offsets and sizes O_DIRECT would refuse). Erasing is mkchunkfs's
 * (cfs_signatures_each gives it blkid's probe).
 */
#ifndef CFS_SIGNATURE_H
#define CFS_SIGNATURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/format/format.h"

struct cfs_signatures {
	unsigned count;	      /* signatures found (blkid + chunkfs) */
	bool partition_table; /* one of them is a partition table */
	char what[512];	      /* "an ext4 filesystem (label "data")[, ...]" */
};

/*
 * Fill *found with what fd holds. slots: the first 2 * CFS_SB_BLOCK_BYTES of
 * it (zeros past the end of a short target), checked for a chunkfs
 * superblock in either slot, even a damaged or unfinished one; NULL: not
 * checked. 0, or -ENOMEM / -EIO with err (blkid could not read).
 */
int cfs_signatures_find(int fd, const uint8_t *slots, struct cfs_signatures *found, char *err,
			size_t err_bytes);

/* Call visit(probe, arg) for each signature blkid finds on fd, in turn (a
 * visit may erase the one it is shown: blkid_do_wipe() steps the probe
 * back). 0, the first nonzero visit, or -ENOMEM / -EIO with err. */
struct blkid_struct_probe;
int cfs_signatures_each(int fd, int (*visit)(struct blkid_struct_probe *probe, void *arg),
			void *arg, char *err, size_t err_bytes);

/*
 * A target blkid cannot open (an RBD image, reached through librbd) is
 * probed through a copy: a memfd of its size holding its first and last
 * CFS_SIGNATURE_PROBE_BYTES (where every signature blkid knows lives, and
 * both chunkfs superblock slots), sparse in between.
 */
#define CFS_SIGNATURE_PROBE_BYTES (1u << 20)
/* The ranges copied, as {offset, length}; the second is empty when the
 * target is no longer than one. */
void cfs_signature_probe_ranges(uint64_t size_bytes, uint64_t range[2][2]);
/* Make the copy: read(arg, buf, length, offset) fills buf (aligned to 4096)
 * from the target, 0 or -errno. *fd_out: the memfd (the caller closes it).
 * 0, or -errno with err. */
int cfs_signature_probe_copy(uint64_t size_bytes,
			     int (*read)(void *arg, void *buf, uint64_t length, uint64_t offset),
			     void *arg, int *fd_out, char *err, size_t err_bytes);

#endif /* CFS_SIGNATURE_H */
