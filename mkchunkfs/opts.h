/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * opts.h — mkchunkfs command-line options: the parsed form and the parser.
 *
 * The parser is pure (no I/O, no exit, no printing), so a unit test can feed
 * it argument vectors and look at what it collected. It follows mke2fs and
 * xfs_mkfs: every bad option is collected as a message, nothing is reported
 * until the whole command line has been read, and the caller prints all the
 * messages followed by one usage line.
 *
 * What it does NOT check: anything that needs the target (its size, sector
 * size, whether it exists) or the layout rules that combine options with the
 * target (alloc unit against block size, metadata size against the store).
 * Those belong to cfs_sb_layout(), so mkchunkfs, the daemon and fsck give
 * the same reasons.
 */
#ifndef CFS_MKCHUNKFS_OPTS_H
#define CFS_MKCHUNKFS_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/format/format.h"

#define CFS_MKFS_PROG "mkchunkfs"
#define CFS_MKFS_ERRS_MAX 16u	/* messages kept; later ones are only counted */
#define CFS_MKFS_ERR_BYTES 256u /* one message, without the "mkchunkfs: " prefix */

/* What the user asked for. Zero/false/NULL means "not given". */
struct cfs_mkfs_opts {
	const char *target;	      /* DEVICE-OR-IMAGE (points into argv) */
	const char *label;	      /* -L, already checked against CFS_LABEL_BYTES */
	uint8_t uuid[CFS_UUID_BYTES]; /* -U, parsed */
	bool uuid_given;
	uint64_t size_bytes; /* -s: store size; creates or extends an image */
	bool size_given;
	uint32_t block_size_bytes;  /* -b, 0 = default */
	uint32_t alloc_unit_bytes;  /* -a, 0 = default */
	const char *alloc_unit_arg; /* -a as typed, for messages */
	uint64_t meta_size_bytes;   /* -m, 0 = default */
	const char *meta_size_arg;  /* -m as typed, for messages */
	bool force;		    /* -f: overwrite existing signatures */
	bool dry_run;		    /* -n: print the layout, write nothing */
	bool quiet;		    /* -q: no summary, no progress */
	bool no_discard;	    /* -K: do not discard a block device */
	bool sparse;		    /* --sparse: leave an image file's holes */
	bool no_written_runs;	    /* --no-written-runs: a store older chunkfs mount */
	bool no_pieces;		    /* --no-pieces: whole units for every file */
	bool print_only;	    /* -D / --print: decode an existing store */
	const char *join;	    /* --join STORE0: format as a data store of
				     * STORE0's pool (fs/POOLS.md) */
	const char *ceph_conf;	    /* --ceph-conf: an RBD target's cluster */
	const char *ceph_id;	    /* --id: its cephx user */
	const char *ceph_cluster;   /* --cluster: its cluster name */
	bool version;		    /* -V */
	bool help;		    /* -h */
};

struct cfs_mkfs_errs {
	unsigned count; /* all errors, including those not kept */
	char msg[CFS_MKFS_ERRS_MAX][CFS_MKFS_ERR_BYTES];
};

/*
 * Parse argv into *opts, collecting every error into *errs (both are reset
 * first). getopt's own messages are turned off; unknown options and missing
 * arguments become collected errors too. -h and -V end the checks for a
 * missing target (they need none). Returns 0, or -EINVAL when errs->count > 0.
 * Uses getopt_long, so it resets getopt's global state (optind) itself and
 * may be called more than once in a process (the unit tests do).
 */
int cfs_mkfs_opts_parse(int argc, char *argv[], struct cfs_mkfs_opts *opts,
			struct cfs_mkfs_errs *errs);

/* Append one formatted message to errs (kept if there is room). */
void cfs_mkfs_err_add(struct cfs_mkfs_errs *errs, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The one-line synopsis printed after option errors (no trailing newline). */
extern const char cfs_mkfs_usage_line[];

#endif /* CFS_MKCHUNKFS_OPTS_H */
