/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_replay.c — the daemon's own replay (fs/meta/journal.c, fs/meta/namespace.c) on
 * fuzzed metadata, through the public mount path on the RAM backend.
 *
 * The input's records (records.h) are framed with valid checksums into a
 * 16 MiB store image built in memory: a valid superblock, and the records
 * either in the snapshot (first byte bit 0) or in the log behind an empty
 * snapshot. The store is mounted read-write with cfs_fs_open(): a refusal
 * (-EUCLEAN with a reason) is a fine answer; a crash, a sanitizer report or
 * an assertion is a finding. Oracle: a store that mounts is dumped, closed
 * (which writes a snapshot of it), mounted again, and must dump the same —
 * what the daemon writes it reads back.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/meta/mount.h"
#include "fs/meta/namespace.h"
#include "iopath/iopath.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/records.h"

#define STORE_BYTES (16u << 20)
#define UNIT_BYTES (64u * 1024)

static const uint8_t uuid[CFS_UUID_BYTES] = {0x5e, 0xed, 0xf0, 0x0d, 1, 2, 3, 4};

static void quiet(void *arg, const char *line)
{
}

static int write_at(struct cfs_ioq *q, uint64_t offset, void *buf, uint64_t length)
{
	for (uint64_t done = 0; done < length; done += CFS_IO_LENGTH_MAX) {
		uint32_t n = length - done > CFS_IO_LENGTH_MAX ? CFS_IO_LENGTH_MAX
							       : (uint32_t)(length - done);
		int ret = cfs_ioq_sync(q, CFS_IO_WRITE, offset + done, n, (uint8_t *)buf + done,
				       NULL);

		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Superblock, snapshot and log into io. 0 or -errno. */
static int build_store(struct cfs_io *io, const uint8_t *data, size_t size)
{
	bool in_snapshot = size && (data[0] & 1);
	bool clean = size && (data[0] & 2);
	struct cfs_ioq_config qc = {0};
	const char *why = NULL;
	struct cfs_ioq *q;
	struct cfs_sb sb;
	uint64_t seed = cfs_log_seed(uuid), count, half;
	uint8_t *buf;
	size_t used;
	int ret;

	cfs_sb_init_defaults(&sb);
	if (cfs_sb_layout(&sb, STORE_BYTES, 4096, UNIT_BYTES, 0, &why))
		abort();
	memcpy(sb.uuid, uuid, sizeof(uuid));
	sb.generation = 1;
	sb.flags = clean ? CFS_SB_CLEAN : 0;
	/* Bit 2: a store with written runs (EXTENT_WRITTEN_RUN records); bit
	 * 3: with pieces (EXTENT_MAP_PIECE records). */
	sb.incompat = size && (data[0] & 4) ? CFS_FEAT_INCOMPAT_WRITTEN_RUNS : 0;
	sb.incompat |= size && (data[0] & 8) ? CFS_FEAT_INCOMPAT_PIECES : 0;
	half = cfs_sb_half_size_bytes(&sb);
	ret = cfs_ioq_create(io, &qc, &q);
	if (ret)
		return ret;
	buf = aligned_alloc(4096, half);
	if (!buf) {
		cfs_ioq_destroy(q);
		return -ENOMEM;
	}
	memset(buf, 0, half);
	data += size ? 1 : 0;
	size -= size ? 1 : 0;
	if (in_snapshot) {
		used = fuzz_frame_records(data, size, buf + CFS_SNAP_HEADER_BYTES,
					  half - CFS_SNAP_HEADER_BYTES, 0, seed, &count);
		cfs_snap_seal(buf, half, used, count, 1, seed);
		sb.meta_snap_length_bytes = CFS_SNAP_HEADER_BYTES + used;
	} else {
		uint64_t log = (CFS_SNAP_HEADER_BYTES + 4095) / 4096 * 4096;

		cfs_snap_seal(buf, half, 0, 0, 1, seed);
		sb.meta_snap_length_bytes = CFS_SNAP_HEADER_BYTES;
		fuzz_frame_records(data, size, buf + log, half - log, 1, seed, &count);
	}
	ret = write_at(q, cfs_sb_half_offset_bytes(&sb, 0), buf, half);
	if (!ret) {
		memset(buf, 0, 2 * CFS_SB_BLOCK_BYTES);
		cfs_sb_encode(&sb, buf + CFS_SB_BLOCK_BYTES);
		ret = write_at(q, 0, buf, 2 * CFS_SB_BLOCK_BYTES);
	}
	free(buf);
	cfs_ioq_destroy(q);
	return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cfs_io_config cfg = {
		.backend = "ram", .size_bytes = STORE_BYTES, .align_bytes = 512};
	struct cfs_fs_options fo = {.log = quiet};
	struct cfs_fs *fs;
	struct cfs_io *io;
	char err[256], *dump1, *dump2;

	if (cfs_io_open(&cfg, &io))
		return 0;
	if (build_store(io, data, size) || cfs_fs_open(io, &fo, &fs, err, sizeof(err))) {
		cfs_io_close(io);
		return 0;
	}
	dump1 = cfs_ns_dump(fs);
	FUZZ_CHECK(cfs_fs_close(fs) == 0);
	fo.read_only = true;
	FUZZ_CHECK(cfs_fs_open(io, &fo, &fs, err, sizeof(err)) == 0);
	dump2 = cfs_ns_dump(fs);
	if (dump1 && dump2 && strcmp(dump1, dump2)) {
		fprintf(stderr, "before:\n%s\nafter:\n%s\n", dump1, dump2);
		FUZZ_CHECK(!"the state read back differs from the state written");
	}
	free(dump1);
	free(dump2);
	cfs_fs_close(fs);
	cfs_io_close(io);
	return 0;
}
