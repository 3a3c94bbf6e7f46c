/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mkchunkfs.h — private to mkchunkfs/: the target being formatted and the
 * steps main() runs on it, one file per concern:
 *
 *   target.c      open the device, image or RBD image, read its geometry,
 *                 refuse one in use; create or extend an image (only once
 *                 formatting is decided); an RBD image's I/O
 *   signatures.c  find what the target already holds (libblkid, and our own
 *                 superblock, which blkid does not know) and wipe it with -f
 *   write.c       the write sequence: superblock with INPROGRESS, discard or
 *                 zero-fill, metadata headers, final superblocks
 *   join.c        --join: a data store of an existing pool, and store 0's
 *                 table updated after it
 *   mkchunkfs.c   main(): parse, probe, lay out, print, refuse, write; -D
 *
 * Every function here returns 0 or -errno and has already printed a message
 * naming the target when it fails; main() only chooses the exit status.
 */
#ifndef CFS_MKCHUNKFS_H
#define CFS_MKCHUNKFS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fs/format/format.h"
#include "iopath/iopath.h"
#include "mkchunkfs/opts.h"

#define CFS_MKFS_VERSION "0.1.0"

/* Exit statuses (documented in mkchunkfs.8). */
enum cfs_mkfs_exit {
	CFS_MKFS_EXIT_OK = 0,	   /* formatted, dry run printed, store printed */
	CFS_MKFS_EXIT_USAGE = 1,   /* bad options, or refused: nothing was written */
	CFS_MKFS_EXIT_WRITE = 2,   /* failed after writing began: the store is
				    * left marked unfinished (INPROGRESS) */
	CFS_MKFS_EXIT_NOSTORE = 3, /* -D: no valid chunkfs store on the target */
};

/* Writes go in pieces of this size: large enough that a zero-fill of an
 * image runs at the device's sequential speed, small enough to allocate. */
#define CFS_MKFS_IO_BYTES (4u << 20)

/* Both superblock slots, as read back or kept in memory (write.c rounds
 * its copy up to the write unit when sectors are larger than 8 KiB). */
#define CFS_MKFS_SB_PAIR_BYTES (CFS_SB_SLOTS * CFS_SB_BLOCK_BYTES)

struct cfs_mkfs_target {
	const char *path;
	int fd;	       /* buffered: probing, wiping, ioctls, fsync;
			* O_EXCL on a block device being formatted;
			* RBD: a memfd copy of the image's head and tail,
			* for blkid and the superblock reads */
	int direct_fd; /* O_DIRECT for every write, or -1 when the
			* filesystem refuses it (then fd is used) */
	bool exists;   /* false: an image this run will create */
	bool is_block_device;
	bool created;		    /* this run created the image: remove on failure */
	bool read_only;		    /* opened for -n or -D */
	uint64_t target_size_bytes; /* device size, or the image's size now (0 if new) */
	uint64_t store_size_bytes;  /* what gets formatted: -s or the whole target */
	struct cfs_io_geometry geo; /* sectors and direct-I/O alignment */
	uint32_t write_align_bytes; /* offset/length unit of every write */
	uint32_t mem_align_bytes;   /* buffer alignment of every write */
	dev_t rdev;		    /* block device number, for the mount lookup */
	bool is_rbd;		    /* rbd:POOL/IMAGE: written through iopath */
	struct cfs_io *io;	    /* RBD: the image (holding its lock unless
				     * read-only) */
	struct cfs_ioq *q;	    /* RBD: the queue of every write */
	char note[1280];	    /* dry run: why a real run would be refused */
};

/* What signatures.c found on the target. */
struct cfs_mkfs_found {
	unsigned count;	      /* signatures found (blkid + chunkfs) */
	bool partition_table; /* one of them is a partition table */
	char what[512];	      /* "an ext4 filesystem (label "data")[, ...]" */
};

/* ---- mkchunkfs.c ---- */
/* "mkchunkfs: <message>" on stderr, after flushing stdout so the two streams
 * interleave in program order when they share a pipe (golden tests). */
void cfs_mkfs_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- target.c ---- */
void cfs_mkfs_target_init(struct cfs_mkfs_target *t);
/* Open (never create) the target named in opts, read its geometry and size,
 * and decide the store size. Read-only for -n and -D. */
int cfs_mkfs_target_open(struct cfs_mkfs_target *t, const struct cfs_mkfs_opts *opts);
/* Make the target writable at its store size: create a new image, or extend
 * a shorter one; open the direct-I/O descriptor. After the refusal checks. */
int cfs_mkfs_target_prepare(struct cfs_mkfs_target *t);
/* An image file to be written fully (not --sparse): 0 if its filesystem has
 * room for the holes (store size less the blocks the file already has),
 * else -ENOSPC with why set ("needs N, has M free"). Nothing is written. */
int cfs_mkfs_target_check_space(const struct cfs_mkfs_target *t, char *why, size_t why_bytes);
/* Close; with remove_created, unlink an image this run created. */
void cfs_mkfs_target_close(struct cfs_mkfs_target *t, bool remove_created);
/* RBD targets: write or read [offset, +length) (sector multiples, any
 * length, aligned buffer), flush, discard; 0 or -errno (write, flush and
 * discard have said why). */
int cfs_mkfs_rbd_write(struct cfs_mkfs_target *t, const void *buf, uint64_t length,
		       uint64_t offset);
int cfs_mkfs_rbd_read(const struct cfs_mkfs_target *t, void *buf, uint64_t length, uint64_t offset);
int cfs_mkfs_rbd_flush(struct cfs_mkfs_target *t);
int cfs_mkfs_rbd_discard(struct cfs_mkfs_target *t, uint64_t offset, uint64_t length);
/* RBD targets: write the probed head and tail (t->fd) back to the image,
 * after signatures were erased in them. */
int cfs_mkfs_rbd_write_back_probe(struct cfs_mkfs_target *t);

/* ---- signatures.c ---- */
int cfs_mkfs_signatures_find(const struct cfs_mkfs_target *t, struct cfs_mkfs_found *found);
/* Erase every signature blkid finds (as wipefs -a does), then flush. */
int cfs_mkfs_signatures_wipe(struct cfs_mkfs_target *t);
/* Read both superblock slots (zero-filled past the end of a short target). */
int cfs_mkfs_read_slots(const struct cfs_mkfs_target *t, uint8_t slots[CFS_MKFS_SB_PAIR_BYTES]);

/* ---- write.c ---- */
struct cfs_mkfs_write_cfg {
	bool discard;	/* block device: BLKDISCARD the data region */
	bool fill;	/* image: write every hole with zeros */
	bool progress;	/* one-line progress on stdout (a terminal) */
	bool zero_meta; /* zero the whole metadata region, not only
			 * its headers (a uuid given with -U) */
};
int cfs_mkfs_write(struct cfs_mkfs_target *t, struct cfs_sb *sb,
		   const struct cfs_mkfs_write_cfg *cfg);
/* Tests: SIGKILL ourselves at a named stage (MKCHUNKFS_TEST_KILL=stage). */
void cfs_mkfs_test_kill_point(const char *stage);

/* ---- join.c ---- */
/* --join STORE0: format the target as a data store of STORE0's pool and
 * add it to store 0's table (fs/POOLS.md). Returns an exit status. */
int cfs_mkfs_join(const struct cfs_mkfs_opts *opts);

#endif /* CFS_MKCHUNKFS_H */
