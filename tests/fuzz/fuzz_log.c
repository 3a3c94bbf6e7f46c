/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_log.c — log and snapshot framing, and fsck's replay model.
 *
 * First byte odd: the rest is raw bytes for cfs_log_walk() and
 * cfs_snap_decode() (checksums will not verify: the decoders' bounds and
 * header checks are what is exercised). Even: the rest is records
 * (records.h) that are framed with valid checksums; properties: the walk
 * finds exactly the records framed, a sealed snapshot of them decodes with
 * their count, and fsck's model (mkchunkfs/fsck_model.c) applies them as
 * log and as snapshot and checks the result without crashing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/format/format.h"
#include "mkchunkfs/fsck.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/records.h"

#define AREA_BYTES (1u << 20)

static const uint8_t uuid[CFS_UUID_BYTES] = {0xc4, 0x75, 0x0f, 0x55};

static int count_cb(const struct cfs_log_record *rec, void *arg)
{
	(*(uint64_t *)arg)++;
	return 0;
}

static int log_cb(const struct cfs_log_record *rec, void *arg)
{
	return fsck_model_log_record(arg, rec);
}

static int snap_cb(const struct cfs_log_record *rec, void *arg)
{
	return fsck_model_snapshot_record(arg, rec);
}

static void model_run(const uint8_t *buf, size_t length, uint64_t seed, bool snapshot)
{
	struct fsck_geom g = {.unit_count = 64,
			      .unit_bytes = 65536,
			      .sector_bytes = 512,
			      .max_file_units = 128,
			      .incompat = CFS_FEAT_INCOMPAT_WRITTEN_RUNS | CFS_FEAT_INCOMPAT_PIECES,
			      .physical_sector_bytes = 512};
	struct fsck_report r = {0};
	struct cfs_log_walk_result res;
	struct fsck_model *m;

	if (fsck_model_create(&g, &r, &m))
		return;
	cfs_log_walk(buf, length, snapshot ? 0 : 1, seed, snapshot ? snap_cb : log_cb, m, &res);
	fsck_model_check(m);
	fsck_model_destroy(m);
	free(r.fixes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t seed = cfs_log_seed(uuid), seen = 0, count;
	struct cfs_log_walk_result res;
	const char *why = NULL;
	struct cfs_snap snap;
	uint8_t *area;
	size_t used;

	if (size < 1)
		return 0;
	if (data[0] & 1) {
		cfs_log_walk(data + 1, size - 1, 1, seed, count_cb, &seen, &res);
		FUZZ_CHECK(res.end_offset_bytes <= size - 1);
		FUZZ_CHECK(seen == res.record_count);
		cfs_snap_decode(data + 1, size - 1, seed, &snap, &why);
		return 0;
	}
	area = calloc(1, AREA_BYTES);
	if (!area)
		return 0;
	/* As a log from seq 1. */
	used = fuzz_frame_records(data + 1, size - 1, area, AREA_BYTES, 1, seed, &count);
	cfs_log_walk(area, AREA_BYTES, 1, seed, count_cb, &seen, &res);
	FUZZ_CHECK(res.record_count == count);
	FUZZ_CHECK(res.end_offset_bytes == used);
	model_run(area, used, seed, false);
	/* As a snapshot body (seq = index) behind a 64-byte header. */
	memset(area, 0, AREA_BYTES);
	used = fuzz_frame_records(data + 1, size - 1, area + CFS_SNAP_HEADER_BYTES,
				  AREA_BYTES - CFS_SNAP_HEADER_BYTES, 0, seed, &count);
	if (cfs_snap_seal(area, AREA_BYTES, used, count, 1, seed) >= 0) {
		int ret = cfs_snap_decode(area, CFS_SNAP_HEADER_BYTES + used, seed, &snap, &why);

		FUZZ_CHECK(ret == 0);
		FUZZ_CHECK(snap.record_count == count);
		model_run(snap.body, snap.body_length_bytes, seed, true);
	}
	free(area);
	return 0;
}
