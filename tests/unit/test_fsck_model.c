// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_fsck_model.c — fsck.chunkfs's model (mkchunkfs/fsck_model.c, included
 * below: it is linked into fsck.chunkfs, not into a library) fed with records
 * the daemon's own encoders wrote (fs/meta/journal.c), so the two readings
 * of FORMAT.md meet here: what the model reports about a snapshot, and in
 * which order; and pieces (incompat PIECES): owned byte by byte (two pieces
 * of one unit are fine, overlapping ones or a piece in a unit mapped whole
 * are errors), invalid piece records and piece records on a store without
 * the feature are errors, written-state records clip to the piece, and the
 * summary counts a piece unit once.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/meta/journal.h"
#include "mkchunkfs/fsck_model.c"

/* Apply every record of txn (its buffer: [type u16][flags u16][length u32]
 * [payload], 8-byte aligned) to m as snapshot records. */
static void apply_snapshot(struct fsck_model *m, struct cfs_txn *txn)
{
	for (size_t at = 0; at < txn->used_bytes;) {
		const uint8_t *e = txn->buf + at;
		struct cfs_log_record rec = {
			.type = (uint16_t)(e[0] | e[1] << 8),
			.payload_length_bytes = (uint32_t)e[4] | (uint32_t)e[5] << 8 |
						(uint32_t)e[6] << 16 | (uint32_t)e[7] << 24,
			.payload = e + 8,
		};

		cr_assert_eq(fsck_model_snapshot_record(m, &rec), 0);
		at += (8 + rec.payload_length_bytes + 7) & ~(size_t)7;
	}
}

/* Problems come out in a fixed order (entries by directory and cookie),
 * not in the order of the model's hash tables: the same store gives the
 * same report on every run and with any table. */
Test(fsck_model, problems_in_entry_order)
{
	enum { ENTRIES = 48 };
	struct fsck_geom g = {
		.unit_count = 64, .unit_bytes = 65536, .sector_bytes = 512, .max_file_units = 128};
	struct cfs_jrec_fs_info info = {.next_ino = 1000, .next_generation = 1};
	struct cfs_jrec_inode root = {
		.ino = 1, .generation = 1, .mode = S_IFDIR | 0755, .nlink = 2, .parent_ino = 1};
	struct fsck_report r = {0};
	struct fsck_model *m;
	struct cfs_txn txn;
	char *text = NULL, name[8];
	size_t text_bytes = 0;
	unsigned reported = 0, last_cookie = 0;

	r.out = open_memstream(&text, &text_bytes);
	cr_assert_not_null(r.out);
	cr_assert_eq(fsck_model_create(&g, &r, &m), 0);
	cfs_txn_begin(&txn, NULL);
	cfs_txn_fs_info(&txn, &info);
	cfs_txn_inode(&txn, CFS_LOG_INODE_CREATE, &root);
	/* Entries for missing inodes, added in an order unlike their cookies. */
	for (unsigned i = 0; i < ENTRIES; i++) {
		unsigned cookie = 3 + (i * 29) % ENTRIES; /* a permutation of 3.. */
		struct cfs_jrec_dirent d = {.dir_ino = 1,
					    .ino = 500 + cookie,
					    .cookie = cookie,
					    .mode = S_IFREG,
					    .name = name};

		d.name_length = (uint32_t)snprintf(name, sizeof(name), "c%u", cookie);
		cfs_txn_dirent_add(&txn, &d);
	}
	cr_assert(!txn.failed);
	apply_snapshot(m, &txn);
	cr_assert_eq(fsck_model_check(m), 0);
	fclose(r.out);

	for (const char *line = text; (line = strstr(line, "entry \"c")); line++) {
		unsigned cookie = (unsigned)strtoul(line + strlen("entry \"c"), NULL, 10);

		cr_assert_gt(cookie, last_cookie, "entry c%u reported after c%u:\n%s", cookie,
			     last_cookie, text);
		last_cookie = cookie;
		reported++;
	}
	cr_assert_eq(reported, ENTRIES, "%s", text);
	cr_assert_eq(r.counts[FSCK_REPAIRABLE], ENTRIES);
	fsck_model_destroy(m);
	if (txn.buf != txn.inline_buf)
		free(txn.buf);
	free(r.fixes);
	free(text);
}

/* ---- pieces --------------------------------------------------------------------------- */

#define UNIT (1u << 20)

static struct fsck_report report;
static struct fsck_model *model;
static struct cfs_txn snap; /* the records of the snapshot being built */

static void start(uint64_t incompat)
{
	struct fsck_geom g = {.unit_count = 64,
			      .unit_bytes = UNIT,
			      .sector_bytes = 512,
			      .max_file_units = 128,
			      .incompat = incompat,
			      .physical_sector_bytes = 512};
	struct cfs_jrec_inode root = {
		.ino = 1, .generation = 1, .mode = S_IFDIR | 0755, .nlink = 2, .parent_ino = 1};

	memset(&report, 0, sizeof(report));
	cr_assert_eq(fsck_model_create(&g, &report, &model), 0);
	cfs_txn_begin(&snap, NULL);
	cfs_txn_inode(&snap, CFS_LOG_INODE_CREATE, &root);
}

/* Apply what was built; the check's result in report. */
static void check(void)
{
	cr_assert(!snap.failed);
	apply_snapshot(model, &snap);
	cr_assert_eq(fsck_model_check(model), 0);
}

static void finish(void)
{
	fsck_model_destroy(model);
	if (snap.buf != snap.inline_buf)
		free(snap.buf);
	free(report.fixes);
}

static void file(uint64_t ino, const char *name, uint64_t size)
{
	struct cfs_jrec_inode in = {.ino = ino, .generation = 1, .mode = S_IFREG | 0600,
				    .nlink = 1, .size_bytes = size};
	struct cfs_jrec_dirent d = {.dir_ino = 1, .ino = ino, .cookie = 3 + ino,
				    .mode = S_IFREG, .name_length = (uint32_t)strlen(name),
				    .name = name};

	cfs_txn_inode(&snap, CFS_LOG_INODE_CREATE, &in);
	cfs_txn_dirent_add(&snap, &d);
}

static void piece(uint64_t ino, uint64_t fu, uint64_t su, uint32_t off, uint32_t bytes)
{
	struct cfs_jrec_piece p = {ino, fu, su, off, bytes};

	cfs_txn_piece(&snap, &p);
}

static void units(uint64_t ino, uint64_t fu, uint64_t su, uint64_t count)
{
	struct cfs_jrec_extent e = {ino, fu, su, count};

	cfs_txn_extent(&snap, CFS_LOG_EXTENT_MAP, &e);
}

/* An EXTENT_WRITTEN OR of sectors [first, +count), all ones. */
static void written(uint64_t ino, uint64_t fu, uint64_t su, uint32_t first, uint32_t count)
{
	struct cfs_jrec_written w = {ino, fu, su, 0, first, count, NULL};

	cfs_txn_written(&snap, &w);
}

Test(fsck_model, pieces_of_one_unit_are_fine)
{
	start(CFS_FEAT_INCOMPAT_PIECES);
	file(2, "a", 4096);
	file(3, "b", 8192);
	file(4, "c", 3 * UNIT);
	piece(2, 0, 5, 0, 4096);
	piece(3, 0, 5, 8192, 8192);
	units(4, 0, 6, 3);
	written(2, 0, 5, 0, 8);
	check();
	cr_assert_eq(report.counts[FSCK_ERROR], 0);
	cr_assert_eq(report.counts[FSCK_WARN], 0);
	cr_assert_eq(report.units_used, 4); /* unit 5 once, 6..8 */
	finish();
}

Test(fsck_model, overlapping_pieces_are_an_error)
{
	start(CFS_FEAT_INCOMPAT_PIECES);
	file(2, "a", 4096);
	file(3, "b", 4096);
	piece(2, 0, 5, 0, 16384);
	piece(3, 0, 5, 8192, 4096);
	check();
	cr_assert_eq(report.counts[FSCK_ERROR], 1);
	finish();
}

Test(fsck_model, a_piece_in_a_unit_mapped_whole_is_an_error)
{
	start(CFS_FEAT_INCOMPAT_PIECES);
	file(2, "a", 4096);
	file(3, "b", 2 * UNIT);
	piece(2, 0, 7, 512 * 1024, 4096);
	units(3, 0, 6, 2);
	check();
	cr_assert_eq(report.counts[FSCK_ERROR], 1);
	finish();
}

Test(fsck_model, invalid_piece_records)
{
	static const uint32_t bad[][2] = {
		{4096, 8192},	     /* not aligned to its size */
		{0, 2048},	     /* below 4 KiB */
		{0, 3 * 4096},	     /* not a power of two */
		{0, UNIT},	     /* a whole unit */
		{UNIT - 4096, 8192}, /* past the unit */
	};

	start(CFS_FEAT_INCOMPAT_PIECES);
	file(2, "a", 4096);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		piece(2, 0, 5, bad[i][0], bad[i][1]);
	piece(2, 0, 64, 0, 4096);  /* beyond the data region */
	piece(2, 128, 5, 0, 4096); /* beyond the largest file */
	check();
	cr_assert_eq(report.counts[FSCK_ERROR], 7);
	finish();
}

Test(fsck_model, piece_records_need_the_feature)
{
	start(CFS_FEAT_INCOMPAT_WRITTEN_RUNS);
	file(2, "a", 4096);
	piece(2, 0, 5, 0, 4096);
	check();
	cr_assert_eq(report.counts[FSCK_ERROR], 1);
	finish();
}

Test(fsck_model, written_state_clips_to_the_piece)
{
	start(CFS_FEAT_INCOMPAT_PIECES);
	file(2, "a", 4096);
	piece(2, 0, 5, 0, 4096);
	/* A record about the unit beyond the piece: ignored, so nothing is
	 * written past the file's 4 KiB. */
	written(2, 0, 5, 0, 64);
	check();
	cr_assert_eq(report.counts[FSCK_ERROR], 0);
	cr_assert_eq(report.counts[FSCK_WARN], 0);
	finish();
	/* Inside the piece but past the size: the usual warning. */
	start(CFS_FEAT_INCOMPAT_PIECES);
	file(2, "a", 1024);
	piece(2, 0, 5, 0, 8192);
	written(2, 0, 5, 0, 16);
	check();
	cr_assert_eq(report.counts[FSCK_WARN], 1);
	finish();
}

Test(fsck_model, a_piece_replaces_a_mapping)
{
	start(CFS_FEAT_INCOMPAT_PIECES);
	file(2, "a", 4096);
	file(3, "b", UNIT);
	units(2, 0, 5, 1);
	/* The file unit now maps a piece of unit 9: unit 5 is free for b. */
	piece(2, 0, 9, 0, 4096);
	units(3, 0, 5, 1);
	check();
	cr_assert_eq(report.counts[FSCK_ERROR], 0);
	cr_assert_eq(report.units_used, 2);
	finish();
}
