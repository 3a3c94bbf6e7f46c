/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fsck.h — what the pieces of fsck.chunkfs share: the problem report and
 * the metadata model.
 *
 * The model is fsck's own reading of a store's metadata: it decodes the
 * snapshot and log payloads (fs/format/FORMAT.md section 5.3) itself and applies
 * them with the replay rules of that section, independently of the daemon's
 * namespace. A second reading is the point of a checker: a bug in the
 * daemon's replay must not hide itself. Only the framing (fs/format/format.h:
 * superblocks, record headers, checksums) is shared with the daemon.
 *
 * What the model does not do: I/O (fsck.c reads the store and feeds it
 * records) or repairs (fsck.c repairs through the daemon's engine, which
 * writes what it writes for a mount).
 */
#ifndef CFS_FSCK_H
#define CFS_FSCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fs/format/format.h"

/* e2fsck's exit codes (fsck(8) sums them). */
#define FSCK_EXIT_OK 0
#define FSCK_EXIT_CORRECTED 1
#define FSCK_EXIT_UNCORRECTED 4
#define FSCK_EXIT_OPERATIONAL 8
#define FSCK_EXIT_USAGE 16

enum fsck_severity {
	FSCK_NOTE,	 /* expected after a crash, needs nothing (a torn log tail) */
	FSCK_WARN,	 /* odd but harmless; does not change the exit code */
	FSCK_REPAIRABLE, /* -y repairs it safely */
	FSCK_ERROR,	 /* left as it is: exit 4 */
};

/* A repair -y makes through the engine (fsck.c), found by the model. */
enum fsck_fix_kind {
	FSCK_FIX_NLINK,	 /* set nlink to value */
	FSCK_FIX_LOST,	 /* link into /lost+found, then nlink = value */
	FSCK_FIX_PARENT, /* a directory's ".." becomes value */
};

struct fsck_fix {
	enum fsck_fix_kind kind;
	uint64_t ino;
	uint64_t value;
};

struct fsck_report {
	FILE *out;    /* where problems are printed (NULL: nowhere) */
	bool verbose; /* notes too */
	unsigned counts[FSCK_ERROR + 1];
	bool need_mount; /* an engine mount repairs something (orphans, entries) */
	struct fsck_fix *fixes;
	size_t fix_count;
	size_t fix_size;
	/* What the check saw, for the summary line. */
	uint64_t inodes;
	uint64_t dirs;
	uint64_t files;
	uint64_t units_used;
	uint64_t units_total;
	uint64_t snap_records;
	uint64_t log_records;
};

void fsck_problem(struct fsck_report *r, enum fsck_severity sev, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Remember a repair; -ENOMEM. */
int fsck_add_fix(struct fsck_report *r, enum fsck_fix_kind kind, uint64_t ino, uint64_t value);
void fsck_report_reset(struct fsck_report *r);

/* ---- the model ----------------------------------------------------------- */

struct fsck_geom {
	uint64_t unit_count; /* data units of the store; a pool: one past its last
			      * pool unit (the unit space, gaps included) */
	/* A pool (fs/POOLS.md): store 0's table; a unit is valid only inside
	 * one store's range. NULL/0 for a single store. */
	const struct cfs_store_entry *stores;
	uint32_t store_count;
	uint32_t unit_bytes;		/* allocation unit */
	uint32_t sector_bytes;		/* logical sector: written-state granularity */
	uint64_t max_file_units;	/* a file's map reaches this far */
	uint64_t incompat;		/* the superblock's incompat features */
	uint32_t physical_sector_bytes; /* pieces are at least this */
};

struct fsck_model;

int fsck_model_create(const struct fsck_geom *geom, struct fsck_report *report,
		      struct fsck_model **out);
void fsck_model_destroy(struct fsck_model *m);

/* Apply one snapshot record (no transactions). 0 or -ENOMEM; what is wrong
 * with the record is reported, not returned. */
int fsck_model_snapshot_record(struct fsck_model *m, const struct cfs_log_record *rec);
/* One log record: buffered until the last record of its transaction, then
 * the whole transaction is applied (FORMAT.md 5.3). 0 or -ENOMEM. */
int fsck_model_log_record(struct fsck_model *m, const struct cfs_log_record *rec);
/* Records of a transaction the log ended inside (dropped, as replay does). */
uint32_t fsck_model_pending_records(const struct fsck_model *m);

/* Check the state: extents, unit ownership, directories, link counts. */
int fsck_model_check(struct fsck_model *m);

#endif /* CFS_FSCK_H */
