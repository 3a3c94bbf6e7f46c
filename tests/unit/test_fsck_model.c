// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_fsck_model.c — fsck.chunkfs's model (mkchunkfs/fsck_model.c, included
 * below: it is linked into fsck.chunkfs, not into a library) fed with records
 * the daemon's own encoders wrote (fs/meta/journal.c), so the two readings
 * of FORMAT.md meet here: what the model reports about a snapshot, and in
 * which order.
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
