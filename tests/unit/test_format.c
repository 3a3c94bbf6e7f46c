/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_format.c — unit tests of fs/format/format.c: superblock encode/decode/pick,
 * geometry layout, log record framing and replay, snapshots, uuid and size
 * helpers, and the stable superblock summary.
 *
 * Every test asserts exact values (return codes, offsets, counts) so that a
 * format change fails here first. These tests do no I/O on a store and do
 * not test payload meanings (the daemon owns those).
 */
#include <endian.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <criterion/redirect.h>
#include <xxhash.h>

#include "fs/format/format.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MiB (1ull << 20)
#define GiB (1ull << 30)

static const char *const test_uuid_str = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f0";

/* ---- helpers ------------------------------------------------------------- */

/* A valid 1 GiB superblock with a fixed uuid and label. */
static void make_sb(struct cfs_sb *sb, uint64_t generation)
{
	const char *why = NULL;

	cfs_sb_init_defaults(sb);
	cr_assert_eq(cfs_sb_layout(sb, GiB, 0, 0, 0, &why), 0, "%s", why);
	cr_assert_eq(cfs_uuid_parse(test_uuid_str, sb->uuid), 0);
	cr_assert_eq(cfs_sb_set_label(sb, "rootdbs"), 0);
	sb->generation = generation;
	sb->ctime_ns = 1700000000000000000ull;
	sb->wtime_ns = 1700000000000000001ull;
}

static void put_le(uint8_t *block, size_t offset, unsigned int width, uint64_t v)
{
	unsigned int i;

	for (i = 0; i < width; i++)
		block[offset + i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *block, size_t offset, unsigned int width)
{
	uint64_t v = 0;
	unsigned int i;

	for (i = 0; i < width; i++)
		v |= (uint64_t)block[offset + i] << (8 * i);
	return v;
}

/* Recompute the checksum after patching a field: the copy is "sealed". */
static void sb_reseal(uint8_t *block)
{
	put_le(block, 4088, 8, cfs_sb_checksum(block));
}

static void sb_patch(uint8_t *block, size_t offset, unsigned int width, uint64_t v)
{
	put_le(block, offset, width, v);
	sb_reseal(block);
}

static void assert_sb_equal(const struct cfs_sb *a, const struct cfs_sb *b)
{
	cr_assert_eq(a->version, b->version);
	cr_assert_eq(a->compat, b->compat);
	cr_assert_eq(a->ro_compat, b->ro_compat);
	cr_assert_eq(a->incompat, b->incompat);
	cr_assert_eq(a->flags, b->flags);
	cr_assert_eq(a->generation, b->generation);
	cr_assert_arr_eq(a->uuid, b->uuid, CFS_UUID_BYTES);
	cr_assert_arr_eq(a->label, b->label, CFS_LABEL_BYTES);
	cr_assert_eq(a->ctime_ns, b->ctime_ns);
	cr_assert_eq(a->wtime_ns, b->wtime_ns);
	cr_assert_eq(a->block_size_bytes, b->block_size_bytes);
	cr_assert_eq(a->store_size_bytes, b->store_size_bytes);
	cr_assert_eq(a->logical_sector_bytes, b->logical_sector_bytes);
	cr_assert_eq(a->physical_sector_bytes, b->physical_sector_bytes);
	cr_assert_eq(a->alloc_unit_bytes, b->alloc_unit_bytes);
	cr_assert_eq(a->meta_offset_bytes, b->meta_offset_bytes);
	cr_assert_eq(a->meta_size_bytes, b->meta_size_bytes);
	cr_assert_eq(a->meta_active_half, b->meta_active_half);
	cr_assert_eq(a->meta_snap_length_bytes, b->meta_snap_length_bytes);
	cr_assert_eq(a->log_seq_start, b->log_seq_start);
	cr_assert_eq(a->data_offset_bytes, b->data_offset_bytes);
	cr_assert_eq(a->data_size_bytes, b->data_size_bytes);
	cr_assert_eq(a->data_unit_count, b->data_unit_count);
}

/* ---- superblock: round trip and byte layout ------------------------------ */

Test(sb, roundtrip)
{
	struct cfs_sb sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];
	const char *why = "unset";

	make_sb(&sb, 7);
	sb.flags = CFS_SB_CLEAN;
	sb.compat = 0;
	sb.meta_active_half = 1;
	sb.meta_snap_length_bytes = 123456;
	sb.log_seq_start = 99;
	memset(block, 0xa5, sizeof(block));
	cfs_sb_encode(&sb, block);
	cr_assert_eq(cfs_sb_decode(block, &out, &why), 0, "%s", why);
	assert_sb_equal(&sb, &out);
}

Test(sb, byte_layout)
{
	struct cfs_sb sb;
	uint8_t block[CFS_SB_BLOCK_BYTES];
	size_t i;

	make_sb(&sb, 4);
	memset(block, 0xa5, sizeof(block));
	cfs_sb_encode(&sb, block);
	cr_assert_arr_eq(block, "CHUNKFS!", 8);
	cr_assert_eq(get_le(block, 8, 4), CFS_FORMAT_VERSION);
	cr_assert_eq(get_le(block, 12, 4), 4096);
	cr_assert_eq(get_le(block, 48, 8), 4);
	cr_assert_eq(block[56], 0x0f);
	cr_assert_eq(block[71], 0xf0);
	cr_assert_str_eq((const char *)block + 72, "rootdbs");
	cr_assert_eq(get_le(block, 152, 8), GiB);
	cr_assert_eq(get_le(block, 168, 4), MiB);
	cr_assert_eq(get_le(block, 176, 8), MiB);
	cr_assert_eq(get_le(block, 184, 8), 12 * MiB);
	cr_assert_eq(get_le(block, 200, 8), 1);
	cr_assert_eq(get_le(block, 208, 8), 13 * MiB);
	cr_assert_eq(get_le(block, 224, 8), 1011);
	for (i = 232; i < 4088; i++)
		cr_assert_eq(block[i], 0, "reserved byte %zu not zero", i);
	/* checksum: XXH3-64, seed 0, over the block with the field as zero */
	cr_assert_eq(get_le(block, 4088, 8), cfs_sb_checksum(block));
	put_le(block, 4088, 8, 0);
	cr_assert_eq(XXH3_64bits(block, sizeof(block)), cfs_sb_checksum(block));
}

Test(sb, init_defaults)
{
	struct cfs_sb sb;

	memset(&sb, 0xff, sizeof(sb));
	cfs_sb_init_defaults(&sb);
	cr_assert_eq(sb.version, 1);
	cr_assert_eq(sb.block_size_bytes, 4096);
	cr_assert_eq(sb.alloc_unit_bytes, MiB);
	cr_assert_eq(sb.logical_sector_bytes, 512);
	cr_assert_eq(sb.physical_sector_bytes, 512);
	cr_assert_eq(sb.meta_snap_length_bytes, CFS_SNAP_HEADER_BYTES);
	cr_assert_eq(sb.log_seq_start, 1);
	cr_assert_eq(sb.flags, 0);
	cr_assert_eq(sb.generation, 0);
	cr_assert(cfs_uuid_is_null(sb.uuid));
	cr_assert_eq(sb.label[0], 0);
}

/* ---- superblock: corruption ---------------------------------------------- */

Test(sb, bad_magic)
{
	struct cfs_sb sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];
	const char *why = NULL;

	make_sb(&sb, 0);
	cfs_sb_encode(&sb, block);
	block[3] ^= 1;
	sb_reseal(block);
	cr_assert_eq(cfs_sb_decode(block, &out, &why), -EINVAL);
	cr_assert_not_null(strstr(why, "magic"));
}

Test(sb, zeroed_block_is_not_chunkfs)
{
	struct cfs_sb out;
	uint8_t block[CFS_SB_BLOCK_BYTES] = {0};

	cr_assert_eq(cfs_sb_decode(block, &out, NULL), -EINVAL);
}

/* Any single flipped bit outside the magic is caught by the checksum. */
Test(sb, every_byte_is_covered)
{
	struct cfs_sb sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];
	const char *why;
	size_t i;

	make_sb(&sb, 0);
	cfs_sb_encode(&sb, block);
	for (i = 0; i < sizeof(block); i++) {
		block[i] ^= 0x10;
		why = NULL;
		cr_assert_eq(cfs_sb_decode(block, &out, &why), i < 8 ? -EINVAL : -EUCLEAN,
			     "byte %zu", i);
		cr_assert_not_null(why);
		block[i] ^= 0x10;
	}
	cr_assert_eq(cfs_sb_decode(block, &out, NULL), 0);
}

Test(sb, bad_checksum)
{
	struct cfs_sb sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];
	const char *why = NULL;

	make_sb(&sb, 0);
	cfs_sb_encode(&sb, block);
	block[4088] ^= 0x80;
	cr_assert_eq(cfs_sb_decode(block, &out, &why), -EUCLEAN);
	cr_assert_str_eq(why, "bad superblock checksum");
}

Test(sb, unsupported_version)
{
	struct cfs_sb sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];

	make_sb(&sb, 0);
	cfs_sb_encode(&sb, block);
	sb_patch(block, 8, 4, CFS_FORMAT_VERSION + 1);
	cr_assert_eq(cfs_sb_decode(block, &out, NULL), -EOPNOTSUPP);
	cr_assert_eq(out.version, CFS_FORMAT_VERSION + 1, "filled once the checksum verified");
}

/* Every bit of each mask, one at a time (the known incompat bits have their
 * own tests: pool_*, and WRITTEN_RUNS and PIECES are accepted). */
Test(sb, feature_bits)
{
	struct cfs_sb sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES], orig[CFS_SB_BLOCK_BYTES];
	const char *why;
	unsigned int bit;

	make_sb(&sb, 0);
	cfs_sb_encode(&sb, orig);
	for (bit = 0; bit < 64; bit++) {
		uint64_t mask = 1ull << bit;

		memcpy(block, orig, sizeof(block));
		sb_patch(block, 16, 8, mask); /* compat: accepted */
		cr_assert_eq(cfs_sb_decode(block, &out, NULL), 0, "compat bit %u", bit);
		cr_assert_eq(out.compat, mask);
		cr_assert_eq(cfs_sb_check_mountable(&out, NULL), 0);

		memcpy(block, orig, sizeof(block));
		sb_patch(block, 24, 8, mask); /* ro_compat: read-only */
		why = NULL;
		cr_assert_eq(cfs_sb_decode(block, &out, &why), CFS_SB_RO_REQUIRED,
			     "ro_compat bit %u", bit);
		cr_assert_not_null(why);
		cr_assert_eq(out.ro_compat, mask);
		cr_assert_eq(cfs_sb_check_mountable(&out, NULL), CFS_SB_RO_REQUIRED);

		if (mask & CFS_FEAT_INCOMPAT_SUPPORTED)
			continue;
		memcpy(block, orig, sizeof(block));
		sb_patch(block, 32, 8, mask); /* incompat: refused unless known */
		cr_assert_eq(cfs_sb_decode(block, &out, NULL), -EOPNOTSUPP, "incompat bit %u", bit);
		cr_assert_eq(cfs_sb_check_mountable(&out, NULL), -EOPNOTSUPP);
	}
	/* WRITTEN_RUNS needs nothing else in the superblock. */
	memcpy(block, orig, sizeof(block));
	sb_patch(block, 32, 8, CFS_FEAT_INCOMPAT_WRITTEN_RUNS);
	cr_assert_eq(cfs_sb_decode(block, &out, NULL), 0);
	cr_assert_eq(out.incompat, CFS_FEAT_INCOMPAT_WRITTEN_RUNS);
	cr_assert_eq(cfs_sb_check_mountable(&out, NULL), 0);
	/* Neither does PIECES, alone or with it. */
	sb_patch(block, 32, 8, CFS_FEAT_INCOMPAT_PIECES);
	cr_assert_eq(cfs_sb_decode(block, &out, NULL), 0);
	cr_assert_eq(out.incompat, CFS_FEAT_INCOMPAT_PIECES);
	sb_patch(block, 32, 8, CFS_FEAT_INCOMPAT_PIECES | CFS_FEAT_INCOMPAT_WRITTEN_RUNS);
	cr_assert_eq(cfs_sb_decode(block, &out, NULL), 0);
	cr_assert_eq(cfs_sb_check_mountable(&out, NULL), 0);
}

Test(sb, unknown_flags_are_ignored)
{
	struct cfs_sb sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];

	make_sb(&sb, 0);
	sb.flags = 1ull << 40;
	cfs_sb_encode(&sb, block);
	cr_assert_eq(cfs_sb_decode(block, &out, NULL), 0);
	cr_assert_eq(out.flags, 1ull << 40);
	cr_assert_eq(cfs_sb_check_mountable(&out, NULL), 0);
}

/* Inconsistent geometry in a copy whose checksum is right: -EUCLEAN. */
/* Parameters are copied into each test's process (criterion re-executes the
 * binary): strings must live inside the struct, not behind pointers. */
struct geometry_case {
	char name[40];
	size_t offset;
	unsigned int width;
	uint64_t value;
};

ParameterizedTestParameters(sb, inconsistent_geometry)
{
	static struct geometry_case cases[] = {
		{"block size not pow2", 12, 4, 3000},
		{"block size too small", 12, 4, 256},
		{"block size too big", 12, 4, 131072},
		{"block size zero", 12, 4, 0},
		{"logical sector not pow2", 160, 4, 1000},
		{"logical sector above block", 160, 4, 8192},
		{"physical below logical", 164, 4, 256},
		{"alloc unit not pow2", 168, 4, 3 * MiB},
		{"alloc unit below block", 168, 4, 2048},
		{"alloc unit too big", 168, 4, 2 * GiB},
		{"store below minimum", 152, 8, 8 * MiB},
		{"store smaller than data end", 152, 8, GiB - 1},
		{"meta overlaps superblocks", 176, 8, 4096},
		{"meta offset unaligned", 176, 8, MiB + 4096},
		{"meta size zero", 184, 8, 0},
		{"meta size odd units", 184, 8, 13 * MiB},
		{"meta beyond store", 184, 8, 2 * GiB},
		{"meta overlaps data", 184, 8, 14 * MiB},
		{"data unaligned", 208, 8, 13 * MiB + 512},
		{"data beyond store", 208, 8, 1014 * MiB},
		{"data size mismatch", 216, 8, 1010 * MiB},
		{"data no units", 224, 8, 0},
		{"active half 2", 172, 4, 2},
		{"snapshot shorter than header", 192, 8, 8},
		{"snapshot longer than half", 192, 8, 6 * MiB + 1},
		{"log seq zero", 200, 8, 0},
		{"label not NUL-padded", 72 + 10, 1, 'x'},
	};
	return cr_make_param_array(struct geometry_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct geometry_case *c, sb, inconsistent_geometry)
{
	struct cfs_sb sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];
	const char *why = NULL;

	make_sb(&sb, 0);
	cfs_sb_encode(&sb, block);
	cr_assert_eq(cfs_sb_decode(block, &out, NULL), 0);
	sb_patch(block, c->offset, c->width, c->value);
	cr_assert_eq(cfs_sb_decode(block, &out, &why), -EUCLEAN, "%s", c->name);
	cr_assert_not_null(why, "%s", c->name);
	cr_assert_eq(cfs_sb_validate(&out, NULL), -EUCLEAN, "%s", c->name);
}

Test(sb, label_not_terminated)
{
	struct cfs_sb sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];
	const char *why = NULL;

	make_sb(&sb, 0);
	cfs_sb_encode(&sb, block);
	memset(block + 72, 'A', CFS_LABEL_BYTES);
	sb_reseal(block);
	cr_assert_eq(cfs_sb_decode(block, &out, &why), -EUCLEAN);
	cr_assert_str_eq(why, "label is not NUL-terminated");
}

/* ---- superblock: pools (FORMAT.md 3.4) ------------------------------------ */

static const char *const data_uuid_str = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";

/* make_sb() as store 0 of a pool of two: itself and a data store of 100
 * units after a one-unit gap. */
static void make_pool_sb(struct cfs_sb *sb)
{
	struct cfs_store_entry *e;

	make_sb(sb, 0);
	sb->incompat |= CFS_FEAT_INCOMPAT_POOL;
	memcpy(sb->pool_uuid, sb->uuid, CFS_UUID_BYTES);
	sb->store_index = 0;
	sb->unit_base = 0;
	sb->store_count = 2;
	e = &sb->stores[0];
	memcpy(e->uuid, sb->uuid, CFS_UUID_BYTES);
	e->index = 0;
	e->state = CFS_STORE_ACTIVE;
	e->unit_base = 0;
	e->unit_count = sb->data_unit_count;
	strcpy(e->label, "rootdbs");
	e = &sb->stores[1];
	cr_assert_eq(cfs_uuid_parse(data_uuid_str, e->uuid), 0);
	e->index = 1;
	e->state = CFS_STORE_REMOVING;
	e->unit_base = sb->data_unit_count + 1;
	e->unit_count = 100;
	strcpy(e->label, "hdd0");
}

/* The data store listed in make_pool_sb()'s table. */
static void make_data_sb(struct cfs_sb *sb, const struct cfs_sb *store0)
{
	const char *why = NULL;

	cfs_sb_init_defaults(sb);
	cr_assert_eq(cfs_sb_layout_data_store(sb, 100 * MiB + 2 * MiB, 0, 0, &why), 0, "%s", why);
	cr_assert_eq(sb->meta_size_bytes, 0);
	cr_assert_eq(sb->data_offset_bytes, MiB);
	cr_assert_eq(sb->data_unit_count, 101);
	cr_assert_eq(cfs_uuid_parse(data_uuid_str, sb->uuid), 0);
	cr_assert_eq(cfs_sb_set_label(sb, "hdd0"), 0);
	sb->incompat |= CFS_FEAT_INCOMPAT_POOL;
	memcpy(sb->pool_uuid, store0->uuid, CFS_UUID_BYTES);
	sb->store_index = 1;
	sb->unit_base = store0->stores[1].unit_base;
}

Test(sb, pool_store0_roundtrip)
{
	struct cfs_sb sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];
	const char *why = NULL;

	make_pool_sb(&sb);
	cfs_sb_encode(&sb, block);
	cr_assert_eq(get_le(block, 32, 8), CFS_FEAT_INCOMPAT_POOL);
	cr_assert_arr_eq(block + 232, sb.uuid, CFS_UUID_BYTES);
	cr_assert_eq(get_le(block, 252, 4), 2);
	cr_assert_eq(get_le(block, CFS_POOL_TABLE_OFFSET + CFS_POOL_ENTRY_BYTES + 16, 4), 1);
	cr_assert_eq(get_le(block, CFS_POOL_TABLE_OFFSET + CFS_POOL_ENTRY_BYTES + 20, 4),
		     CFS_STORE_REMOVING);
	cr_assert_eq(get_le(block, CFS_POOL_TABLE_OFFSET + CFS_POOL_ENTRY_BYTES + 24, 8),
		     sb.data_unit_count + 1);
	cr_assert_eq(get_le(block, CFS_POOL_TABLE_OFFSET + CFS_POOL_ENTRY_BYTES + 32, 8), 100);
	cr_assert_str_eq((const char *)block + CFS_POOL_TABLE_OFFSET + CFS_POOL_ENTRY_BYTES + 40,
			 "hdd0");
	cr_assert_eq(cfs_sb_decode(block, &out, &why), 0, "%s", why);
	assert_sb_equal(&sb, &out);
	cr_assert_eq(out.store_count, 2);
	cr_assert_arr_eq(&out.stores[0], &sb.stores[0], sizeof(sb.stores[0]));
	cr_assert_arr_eq(&out.stores[1], &sb.stores[1], sizeof(sb.stores[1]));
	cr_assert_eq(cfs_sb_check_mountable(&out, NULL), 0);
}

Test(sb, pool_data_store_roundtrip)
{
	struct cfs_sb s0, sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];
	const char *why = NULL;

	make_pool_sb(&s0);
	make_data_sb(&sb, &s0);
	cr_assert(cfs_sb_is_data_store(&sb));
	cr_assert_not(cfs_sb_is_data_store(&s0));
	cfs_sb_encode(&sb, block);
	cr_assert_eq(cfs_sb_decode(block, &out, &why), 0, "%s", why);
	assert_sb_equal(&sb, &out);
	cr_assert_arr_eq(out.pool_uuid, s0.uuid, CFS_UUID_BYTES);
	cr_assert_eq(out.store_index, 1);
	cr_assert_eq(out.unit_base, s0.data_unit_count + 1);
	cr_assert_eq(out.store_count, 0);
}

/* Without the feature bit the pool fields are not read: a store of today. */
Test(sb, pool_fields_ignored_without_the_bit)
{
	struct cfs_sb sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];

	make_sb(&sb, 0);
	cfs_sb_encode(&sb, block);
	sb_patch(block, 248, 4, 7);
	cr_assert_eq(cfs_sb_decode(block, &out, NULL), 0);
	cr_assert_eq(out.store_index, 0);
	cr_assert_not(cfs_sb_is_data_store(&out));
}

struct pool_case {
	char name[48];
	int kind; /* 0: store 0, 1: data store */
	size_t offset;
	unsigned int width;
	uint64_t value;
	char why[80];
};

#define E1 (CFS_POOL_TABLE_OFFSET + CFS_POOL_ENTRY_BYTES) /* entry 1 */

ParameterizedTestParameters(sb, pool_refused)
{
	static struct pool_case cases[] = {
		{"no pool uuid", 0, 232, 8, 0, ""},
		{"store 0 with a unit base", 0, 256, 8, 5,
		 "store 0 of a pool does not start at unit 0"},
		{"empty table", 0, 252, 4, 0, "the table of stores is empty or too long"},
		{"too long a table", 0, 252, 4, CFS_POOL_STORES_MAX + 1,
		 "the table of stores is empty or too long"},
		{"entry 1 adjacent", 0, E1 + 24, 8, 0, "two stores' unit ranges touch or overlap"},
		{"entry 1 index 0", 0, E1 + 16, 4, 0,
		 "store 0 is not the first entry of the table"},
		{"entry 1 bad state", 0, E1 + 20, 4, 9,
		 "a store in the table has an unknown state"},
		{"entry 1 no units", 0, E1 + 32, 8, 0,
		 "a store's units lie outside the pool's unit space"},
		{"entry 1 beyond the space", 0, E1 + 24, 8, 1ull << 60,
		 "a store's units lie outside the pool's unit space"},
		{"entry 0 other count", 0, CFS_POOL_TABLE_OFFSET + 32, 8, 3,
		 "the table's entry for store 0 does not describe it"},
		{"data store with a table", 1, 252, 4, 1, "a data store carries a table of stores"},
		{"data store at unit 0", 1, 256, 8, 0,
		 "a data store's units lie outside the pool's unit space"},
		{"data store with metadata", 1, 184, 8, 2 * MiB,
		 "a data store of a pool has a metadata region"},
	};
	return cr_make_param_array(struct pool_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct pool_case *c, sb, pool_refused)
{
	struct cfs_sb s0, sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];
	const char *why = NULL;

	make_pool_sb(&s0);
	if (c->kind == 1) {
		make_data_sb(&sb, &s0);
		cfs_sb_encode(&sb, block);
	} else {
		cfs_sb_encode(&s0, block);
	}
	if (c->offset == 232) {
		memset(block + 232, 0, CFS_UUID_BYTES);
		sb_reseal(block);
	} else {
		sb_patch(block, c->offset, c->width, c->value);
	}
	cr_assert_eq(cfs_sb_decode(block, &out, &why), -EUCLEAN, "%s", c->name);
	if (c->why[0])
		cr_assert_str_eq(why, c->why, "%s", c->name);
}

Test(sb, pool_duplicate_label_refused)
{
	struct cfs_sb sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];
	const char *why = NULL;

	make_pool_sb(&sb);
	cfs_sb_encode(&sb, block);
	memcpy(block + E1 + 40, "rootdbs", 8);
	sb_reseal(block);
	cr_assert_eq(cfs_sb_decode(block, &out, &why), -EUCLEAN);
	cr_assert_str_eq(why, "two stores in the table share a label");
}

/* A store joining a pool and leaving it: the superblock of the new data
 * store and store 0's next tables (mkchunkfs --join, chunkfs store). */
Test(sb, pool_table_add_state_remove)
{
	struct cfs_sb single, s0, add, next, more, gone;
	uint8_t uuid[CFS_UUID_BYTES];
	const char *why = NULL;

	make_sb(&single, 4);
	cr_assert_eq(cfs_uuid_parse(data_uuid_str, uuid), 0);
	/* A single store's first data store: index 1, units one past its own. */
	cr_assert_eq(cfs_sb_data_store_new(&single, 100 * MiB + 2 * MiB, 512, 4096, uuid, "hdd0",
					   &add, &why),
		     0, "%s", why);
	cr_assert_eq(add.store_index, 1);
	cr_assert_eq(add.unit_base, single.data_unit_count + 1);
	cr_assert_eq(add.data_unit_count, 101);
	cr_assert_eq(add.alloc_unit_bytes, single.alloc_unit_bytes);
	cr_assert_arr_eq(add.pool_uuid, single.uuid, CFS_UUID_BYTES);
	cr_assert_str_eq(add.label, "hdd0");
	cr_assert(cfs_sb_is_data_store(&add));
	cr_assert_eq(cfs_sb_table_add(&single, &add, &next, &why), 0, "%s", why);
	cr_assert(next.incompat & CFS_FEAT_INCOMPAT_POOL);
	cr_assert_eq(next.generation, 5);
	cr_assert_eq(next.store_count, 2);
	cr_assert_str_eq(next.stores[0].label, "rootdbs");
	cr_assert_eq(next.stores[1].index, 1);
	cr_assert_eq(next.stores[1].state, CFS_STORE_ACTIVE);
	cr_assert_eq(next.stores[1].unit_base, add.unit_base);
	/* The next one: index 2, past hdd0's units; a label in use refused. */
	s0 = next;
	cr_assert_eq(cfs_sb_data_store_new(&s0, 100 * MiB + 2 * MiB, 512, 4096, uuid, "hdd0", &add,
					   &why),
		     0);
	cr_assert_eq(add.store_index, 2);
	cr_assert_eq(add.unit_base, s0.stores[1].unit_base + s0.stores[1].unit_count + 1);
	cr_assert_eq(cfs_sb_table_add(&s0, &add, &more, &why), -EINVAL); /* uuid and label */
	add.uuid[0] ^= 1;
	cfs_sb_set_label(&add, "hdd1");
	cr_assert_eq(cfs_sb_table_add(&s0, &add, &more, &why), 0, "%s", why);
	cr_assert_eq(more.store_count, 3);
	/* Removing: the state in the table; then out of it. */
	cr_assert_eq(cfs_sb_table_set_state(&more, 1, CFS_STORE_REMOVING, &next), 0);
	cr_assert_eq(next.stores[1].state, CFS_STORE_REMOVING);
	cr_assert_eq(next.generation, more.generation + 1);
	cr_assert_eq(cfs_sb_validate(&next, &why), 0, "%s", why);
	cr_assert_eq(cfs_sb_table_remove(&next, 1, &gone), 0);
	cr_assert_eq(gone.store_count, 2);
	cr_assert_eq(gone.stores[1].index, 2);
	cr_assert_str_eq(gone.stores[1].label, "hdd1");
	cr_assert_eq(gone.stores[2].index, 0); /* cleared */
	cr_assert_eq(cfs_sb_validate(&gone, &why), 0, "%s", why);
	cr_assert_eq(cfs_sb_table_remove(&gone, 1, &next), -ENOENT);
	cr_assert_eq(cfs_sb_table_remove(&gone, 0, &next), -EINVAL);
	cr_assert_eq(cfs_sb_table_set_state(&single, 1, CFS_STORE_REMOVING, &next), -ENOENT);
	/* Too small for the superblocks and one unit. */
	cr_assert_eq(cfs_sb_data_store_new(&s0, MiB, 512, 4096, uuid, NULL, &add, &why), -EINVAL);
}

Test(sb, pool_print)
{
	struct cfs_sb sb;
	char *text = NULL;
	size_t length = 0;
	FILE *f = open_memstream(&text, &length);

	make_pool_sb(&sb);
	cfs_sb_print(f, &sb);
	fclose(f);
	cr_assert_not_null(strstr(text, "pool:            0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f0, "
					"store 0 (holds the metadata)\n"),
			   "%s", text);
	cr_assert_not_null(strstr(text, "store 1          \"hdd0\" "
					"aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee, units 1012 to 1111, "
					"removing\n"),
			   "%s", text);
	free(text);
}

/* ---- superblock: encode refuses what decode would refuse (pair assertion) */

Test(sb, encode_asserts_geometry, .signal = SIGABRT, .init = cr_redirect_stderr)
{
	struct cfs_sb sb;
	uint8_t block[CFS_SB_BLOCK_BYTES];

	make_sb(&sb, 0);
	sb.data_unit_count++;
	cfs_sb_encode(&sb, block);
}

Test(sb, encode_asserts_incompat, .signal = SIGABRT, .init = cr_redirect_stderr)
{
	struct cfs_sb sb;
	uint8_t block[CFS_SB_BLOCK_BYTES];

	make_sb(&sb, 0);
	sb.incompat = 1ull << 63;
	cfs_sb_encode(&sb, block);
}

Test(sb, encode_asserts_ro_compat, .signal = SIGABRT, .init = cr_redirect_stderr)
{
	struct cfs_sb sb;
	uint8_t block[CFS_SB_BLOCK_BYTES];

	make_sb(&sb, 0);
	sb.ro_compat = 1;
	cfs_sb_encode(&sb, block);
}

Test(sb, encode_allows_unknown_compat)
{
	struct cfs_sb sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];

	make_sb(&sb, 0);
	sb.compat = 0x8000000000000001ull;
	cfs_sb_encode(&sb, block);
	cr_assert_eq(cfs_sb_decode(block, &out, NULL), 0);
	cr_assert_eq(out.compat, 0x8000000000000001ull);
}

/* ---- superblock: picking a copy ------------------------------------------ */

struct two_slots {
	uint8_t slot[2][CFS_SB_BLOCK_BYTES];
};

/* Encode gen0 into slot gen0 % 2 and gen1 into slot gen1 % 2. */
static void two_copies(struct two_slots *t, uint64_t gen_a, uint64_t gen_b)
{
	struct cfs_sb sb;

	make_sb(&sb, gen_a);
	cfs_sb_encode(&sb, t->slot[cfs_sb_slot(gen_a)]);
	make_sb(&sb, gen_b);
	sb.log_seq_start = 1000 + gen_b;
	cfs_sb_encode(&sb, t->slot[cfs_sb_slot(gen_b)]);
}

Test(pick, newer_generation_wins)
{
	struct two_slots t;
	struct cfs_sb out;
	const char *why = "unset";
	int slot = -1;

	two_copies(&t, 4, 5);
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, &slot, &why), 0);
	cr_assert_eq(slot, 1);
	cr_assert_eq(out.generation, 5);
	cr_assert_eq(out.log_seq_start, 1005);
	cr_assert_null(why);

	two_copies(&t, 7, 8);
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, &slot, &why), 0);
	cr_assert_eq(slot, 0);
	cr_assert_eq(out.generation, 8);
	cr_assert_null(why);
}

Test(pick, bad_checksum_in_newest_older_wins)
{
	struct two_slots t;
	struct cfs_sb out;
	const char *why = NULL;
	int slot = -1;

	two_copies(&t, 4, 5);
	t.slot[1][100] ^= 1;
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, &slot, &why), 0);
	cr_assert_eq(slot, 0);
	cr_assert_eq(out.generation, 4);
	cr_assert_str_eq(why, "bad superblock checksum");
}

Test(pick, bad_checksum_in_older_newest_wins)
{
	struct two_slots t;
	struct cfs_sb out;
	const char *why = NULL;
	int slot = -1;

	two_copies(&t, 4, 5);
	t.slot[0][4000] ^= 1;
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, &slot, &why), 0);
	cr_assert_eq(slot, 1);
	cr_assert_eq(out.generation, 5);
	cr_assert_str_eq(why, "bad superblock checksum");
}

Test(pick, one_copy_zeroed)
{
	struct two_slots t;
	struct cfs_sb out;
	const char *why = NULL;
	int slot = -1;

	two_copies(&t, 2, 3);
	memset(t.slot[0], 0, CFS_SB_BLOCK_BYTES);
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, &slot, &why), 0);
	cr_assert_eq(slot, 1);
	cr_assert_not_null(strstr(why, "magic"));
}

Test(pick, both_bad)
{
	struct two_slots t;
	struct cfs_sb out;
	const char *why = NULL;

	two_copies(&t, 2, 3);
	t.slot[0][200] ^= 1;
	t.slot[1][300] ^= 1;
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, NULL, &why), -EUCLEAN);
	cr_assert_str_eq(why, "bad superblock checksum");

	memset(t.slot[0], 0, CFS_SB_BLOCK_BYTES);
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, NULL, &why), -EUCLEAN);

	memset(t.slot[1], 0, CFS_SB_BLOCK_BYTES);
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, NULL, &why), -EINVAL);
	cr_assert_not_null(strstr(why, "magic"));
}

Test(pick, generation_in_wrong_slot_is_rejected)
{
	struct two_slots t;
	struct cfs_sb sb, out;
	const char *why = NULL;
	int slot = -1;

	two_copies(&t, 2, 3);
	make_sb(&sb, 9); /* odd generation misdirected into slot 0 */
	cfs_sb_encode(&sb, t.slot[0]);
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, &slot, &why), 0);
	cr_assert_eq(slot, 1);
	cr_assert_eq(out.generation, 3);
	cr_assert_str_eq(why, "superblock generation does not belong in this slot");
}

Test(pick, different_uuids_refused)
{
	struct two_slots t;
	struct cfs_sb sb, out;
	const char *why = NULL;

	two_copies(&t, 2, 3);
	make_sb(&sb, 3);
	sb.uuid[15] ^= 1;
	cfs_sb_encode(&sb, t.slot[1]);
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, NULL, &why), -EUCLEAN);
	cr_assert_not_null(strstr(why, "different filesystems"));
}

Test(pick, newest_unsupported_never_falls_back)
{
	struct two_slots t;
	struct cfs_sb out;
	const char *why = NULL;

	two_copies(&t, 4, 5);
	sb_patch(t.slot[1], 32, 8, 1ull << 3);
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, NULL, &why), -EOPNOTSUPP);
	cr_assert_not_null(why);
}

Test(pick, older_unsupported_newest_wins)
{
	struct two_slots t;
	struct cfs_sb out;
	const char *why = NULL;
	int slot = -1;

	two_copies(&t, 4, 5);
	sb_patch(t.slot[0], 32, 8, 1ull << 3);
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, &slot, &why), 0);
	cr_assert_eq(slot, 1);
	cr_assert_not_null(why);
}

Test(pick, newest_inconsistent_falls_back)
{
	struct two_slots t;
	struct cfs_sb out;
	const char *why = NULL;
	int slot = -1;

	two_copies(&t, 4, 5);
	sb_patch(t.slot[1], 172, 4, 7); /* active half 7 */
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, &slot, &why), 0);
	cr_assert_eq(slot, 0);
	cr_assert_eq(out.generation, 4);
	cr_assert_str_eq(why, "active metadata half is neither 0 nor 1");

	t.slot[0][10] ^= 1;
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, &slot, &why), -EUCLEAN);
	cr_assert_str_eq(why, "active metadata half is neither 0 nor 1");
}

Test(pick, ro_compat_propagates)
{
	struct two_slots t;
	struct cfs_sb out;
	const char *why = "unset";
	int slot = -1;

	two_copies(&t, 4, 5);
	sb_patch(t.slot[1], 24, 8, 1);
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, &slot, &why), CFS_SB_RO_REQUIRED);
	cr_assert_eq(slot, 1);
	cr_assert_null(why, "the other copy is good");
}

/* The mkchunkfs sequence: both slots INPROGRESS, then gen 2 clean in slot 0. */
Test(pick, mkfs_sequence)
{
	struct two_slots t;
	struct cfs_sb sb, out;
	const char *why = NULL;
	int slot = -1;

	make_sb(&sb, 0);
	sb.flags = CFS_SB_INPROGRESS;
	cfs_sb_encode(&sb, t.slot[0]);
	sb.generation = 1;
	cfs_sb_encode(&sb, t.slot[1]);
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, &slot, &why), 0);
	cr_assert_eq(slot, 1);
	cr_assert_eq(cfs_sb_check_mountable(&out, &why), -EUCLEAN);
	cr_assert_not_null(strstr(why, "mkchunkfs was interrupted"));

	sb.generation = 2;
	sb.flags = 0;
	cfs_sb_encode(&sb, t.slot[0]);
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, &slot, &why), 0);
	cr_assert_eq(slot, 0);
	cr_assert_eq(cfs_sb_check_mountable(&out, &why), 0);

	/* a torn final write leaves the in-progress copy: still refused */
	t.slot[0][2000] ^= 1;
	cr_assert_eq(cfs_sb_pick(t.slot[0], t.slot[1], &out, &slot, &why), 0);
	cr_assert_eq(slot, 1);
	cr_assert_eq(cfs_sb_check_mountable(&out, &why), -EUCLEAN);
}

Test(sb, check_mountable_flags)
{
	struct cfs_sb sb;
	const char *why = NULL;

	make_sb(&sb, 0);
	cr_assert_eq(cfs_sb_check_mountable(&sb, &why), 0);
	sb.flags = CFS_SB_CLEAN;
	cr_assert_eq(cfs_sb_check_mountable(&sb, &why), 0);
	sb.flags = CFS_SB_CLEAN | CFS_SB_INPROGRESS;
	cr_assert_eq(cfs_sb_check_mountable(&sb, &why), -EUCLEAN);
	cr_assert_not_null(strstr(why, "mkchunkfs was interrupted"));
	sb.flags = 0;
	sb.version = 2;
	cr_assert_eq(cfs_sb_check_mountable(&sb, &why), -EOPNOTSUPP);
	sb.version = 1;
	sb.meta_active_half = 3;
	cr_assert_eq(cfs_sb_check_mountable(&sb, &why), -EUCLEAN);
}

/* ---- layout --------------------------------------------------------------- */

struct layout_case {
	uint64_t store_size_bytes;
	uint32_t block_size_bytes;
	uint32_t alloc_unit_bytes;
	uint64_t meta_size_bytes;
	uint32_t logical_sector_bytes;
	uint32_t physical_sector_bytes;
	/* expected */
	int ret;
	uint64_t meta_offset_bytes;
	uint64_t meta_size_expect;
	uint64_t data_offset_bytes;
	uint64_t data_unit_count;
};

ParameterizedTestParameters(layout, cases)
{
	static struct layout_case cases[] = {
		/* defaults: 1% clamped to [4 MiB, 1 GiB], rounded to 2 units */
		{GiB, 0, 0, 0, 512, 512, 0, MiB, 12 * MiB, 13 * MiB, 1011},
		{16 * MiB, 0, 0, 0, 512, 512, 0, MiB, 4 * MiB, 5 * MiB, 11},
		{16 * MiB + 4095, 0, 0, 0, 512, 512, 0, MiB, 4 * MiB, 5 * MiB, 11},
		{1024 * GiB, 0, 0, 0, 512, 4096, 0, MiB, GiB, GiB + MiB, 1023 * 1024 - 1},
		{100 * GiB, 0, 0, 0, 512, 512, 0, MiB, 1024 * MiB, 1025 * MiB, 99 * 1024 - 1},
		/* small alloc unit: metadata right after the 64 KiB superblock area */
		{64 * MiB, 4096, 4096, 0, 512, 512, 0, 64 * 1024, 4 * MiB, 4 * MiB + 64 * 1024,
		 (60 * MiB - 64 * 1024) / 4096},
		/* big alloc unit pushes metadata out to it */
		{GiB, 65536, 8 * MiB, 0, 4096, 4096, 0, 8 * MiB, 16 * MiB, 24 * MiB, 125},
		/* explicit metadata size rounded up to 2 alloc units */
		{GiB, 0, 0, 5 * MiB, 512, 512, 0, MiB, 6 * MiB, 7 * MiB, 1017},
		{GiB, 512, 512, 4 * MiB + 1, 512, 512, 0, 64 * 1024, 4 * MiB + 1024,
		 4 * MiB + 1024 + 64 * 1024, (GiB - 4 * MiB - 1024 - 64 * 1024) / 512},
		/* errors */
		{16 * MiB - 1, 0, 0, 0, 512, 512, -EINVAL, 0, 0, 0, 0},
		{0, 0, 0, 0, 512, 512, -EINVAL, 0, 0, 0, 0},
		{GiB, 3000, 0, 0, 512, 512, -EINVAL, 0, 0, 0, 0},
		{GiB, 256, 0, 0, 512, 512, -EINVAL, 0, 0, 0, 0},
		{GiB, 131072, 0, 0, 512, 512, -EINVAL, 0, 0, 0, 0},
		{GiB, 4096, 3 * 4096, 0, 512, 512, -EINVAL, 0, 0, 0, 0},
		{GiB, 8192, 4096, 0, 512, 512, -EINVAL, 0, 0, 0, 0},
		{GiB, 0, 1u << 31, 0, 512, 512, -EINVAL, 0, 0, 0, 0},
		{GiB, 512, 0, 0, 4096, 4096, -EINVAL, 0, 0, 0, 0},
		{GiB, 0, 0, 0, 500, 512, -EINVAL, 0, 0, 0, 0},
		{GiB, 0, 0, 0, 4096, 512, -EINVAL, 0, 0, 0, 0},
		{GiB, 0, 0, 0, 0, 0, -EINVAL, 0, 0, 0, 0},
		{GiB, 0, 0, MiB, 512, 512, -EINVAL, 0, 0, 0, 0},
		{128 * GiB, 0, 0, 65 * GiB, 512, 512, -EINVAL, 0, 0, 0, 0},
		{16 * MiB, 0, 64 * MiB, 0, 512, 512, -EINVAL, 0, 0, 0, 0},
		{32 * MiB, 0, 0, 31 * MiB, 512, 512, -EINVAL, 0, 0, 0, 0},
		{6 * MiB + 64 * 1024, 0, 0, 0, 512, 512, -EINVAL, 0, 0, 0, 0},
	};
	return cr_make_param_array(struct layout_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct layout_case *c, layout, cases)
{
	struct cfs_sb sb, out;
	uint8_t block[CFS_SB_BLOCK_BYTES];
	const char *why = NULL;
	int ret;

	cfs_sb_init_defaults(&sb);
	sb.logical_sector_bytes = c->logical_sector_bytes;
	sb.physical_sector_bytes = c->physical_sector_bytes;
	ret = cfs_sb_layout(&sb, c->store_size_bytes, c->block_size_bytes, c->alloc_unit_bytes,
			    c->meta_size_bytes, &why);
	cr_assert_eq(ret, c->ret, "store %llu: %s", (unsigned long long)c->store_size_bytes,
		     why ? why : "");
	if (ret) {
		cr_assert_not_null(why);
		return;
	}
	cr_assert_eq(sb.store_size_bytes, c->store_size_bytes);
	cr_assert_eq(sb.block_size_bytes, c->block_size_bytes ? c->block_size_bytes : 4096);
	cr_assert_eq(sb.alloc_unit_bytes, c->alloc_unit_bytes ? c->alloc_unit_bytes : MiB);
	cr_assert_eq(sb.meta_offset_bytes, c->meta_offset_bytes);
	cr_assert_eq(sb.meta_size_bytes, c->meta_size_expect);
	cr_assert_eq(sb.data_offset_bytes, c->data_offset_bytes);
	cr_assert_eq(sb.data_unit_count, c->data_unit_count);
	cr_assert_eq(sb.data_size_bytes, c->data_unit_count * sb.alloc_unit_bytes);
	/* what layout produces, encode accepts and decode returns */
	cfs_sb_encode(&sb, block);
	cr_assert_eq(cfs_sb_decode(block, &out, &why), 0, "%s", why);
	assert_sb_equal(&sb, &out);
}

Test(layout, keeps_identity_fields)
{
	struct cfs_sb sb;

	make_sb(&sb, 6);
	sb.flags = CFS_SB_INPROGRESS;
	cr_assert_eq(cfs_sb_layout(&sb, 2 * GiB, 0, 0, 0, NULL), 0);
	cr_assert_eq(sb.generation, 6);
	cr_assert_eq(sb.flags, CFS_SB_INPROGRESS);
	cr_assert_str_eq(sb.label, "rootdbs");
	cr_assert_eq(sb.uuid[0], 0x0f);
}

Test(layout, halves_and_log)
{
	struct cfs_sb sb;

	make_sb(&sb, 0);
	cr_assert_eq(cfs_sb_half_size_bytes(&sb), 6 * MiB);
	cr_assert_eq(cfs_sb_half_offset_bytes(&sb, 0), MiB);
	cr_assert_eq(cfs_sb_half_offset_bytes(&sb, 1), 7 * MiB);
	/* empty snapshot (64 bytes) -> the log starts at the next block */
	cr_assert_eq(cfs_sb_log_offset_bytes(&sb), MiB + 4096);
	cr_assert_eq(cfs_sb_log_size_bytes(&sb), 6 * MiB - 4096);
	sb.meta_active_half = 1;
	sb.meta_snap_length_bytes = 8192;
	cr_assert_eq(cfs_sb_log_offset_bytes(&sb), 7 * MiB + 8192);
	cr_assert_eq(cfs_sb_log_size_bytes(&sb), 6 * MiB - 8192);
	sb.meta_snap_length_bytes = 8193;
	cr_assert_eq(cfs_sb_log_offset_bytes(&sb), 7 * MiB + 12288);
}

Test(log, seq_skip_covers_a_full_half)
{
	struct cfs_sb sb;

	make_sb(&sb, 0);
	/* 6 MiB half / 32-byte minimum record + 1 */
	cr_assert_eq(cfs_log_seq_skip(&sb), 6 * MiB / 32 + 1);
	cr_assert_gt(cfs_log_seq_skip(&sb) * CFS_LOG_HEADER_BYTES, cfs_sb_half_size_bytes(&sb));
}

Test(sb, label)
{
	struct cfs_sb sb;
	char label[80];

	cfs_sb_init_defaults(&sb);
	memset(label, 'a', sizeof(label));
	label[63] = '\0';
	cr_assert_eq(cfs_sb_set_label(&sb, label), 0);
	cr_assert_eq(strlen(sb.label), 63);
	label[63] = 'a';
	label[64] = '\0';
	cr_assert_eq(cfs_sb_set_label(&sb, label), -ENAMETOOLONG);
	cr_assert_eq(strlen(sb.label), 63, "unchanged on failure");
	cr_assert_eq(cfs_sb_set_label(&sb, "x"), 0);
	cr_assert_str_eq(sb.label, "x");
	cr_assert_eq(sb.label[2], 0, "NUL-padded");
}

/* ---- summary (golden) ------------------------------------------------------ */

static char *print_to_string(const struct cfs_sb *sb)
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);

	cr_assert_not_null(f);
	cfs_sb_print(f, sb);
	cr_assert_eq(fclose(f), 0);
	return text;
}

Test(sb, print_golden)
{
	static const char expect[] =
		"label:           \"rootdbs\"\n"
		"uuid:            0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f0\n"
		"format version:  1\n"
		"store size:      1073741824 bytes (1 GiB)\n"
		"block size:      4096 bytes, 262144 blocks\n"
		"sectors:         logical 512 bytes, physical 512 bytes\n"
		"alignment:       direct I/O 512 bytes, regions 1048576 bytes\n"
		"allocation unit: 1048576 bytes (1 MiB)\n"
		"superblocks:     offsets 0 and 4096, 4096 bytes each\n"
		"metadata:        offset 1048576, size 12582912 bytes (12 MiB), 2 halves of 6 MiB\n"
		"active half:     A, snapshot 64 bytes, log from seq 1\n"
		"data:            offset 13631488, size 1060110336 bytes (1011 MiB), 1011 units\n"
		"features:        compat 0x0, ro_compat 0x0, incompat 0x0\n"
		"flags:           inprogress\n"
		"generation:      1\n";
	struct cfs_sb sb;
	char *text;

	make_sb(&sb, 1);
	sb.flags = CFS_SB_INPROGRESS;
	text = print_to_string(&sb);
	cr_assert_str_eq(text, expect);
	free(text);
}

Test(sb, print_odd_values)
{
	struct cfs_sb sb;
	char *text;

	make_sb(&sb, 0);
	cr_assert_eq(cfs_sb_set_label(&sb, ""), 0);
	sb.flags = CFS_SB_INPROGRESS | CFS_SB_CLEAN | (1ull << 8);
	sb.meta_active_half = 1;
	sb.compat = 0x10;
	text = print_to_string(&sb);
	cr_assert_not_null(strstr(text, "label:           (none)\n"));
	cr_assert_not_null(strstr(text, "flags:           inprogress,clean,0x100\n"));
	cr_assert_not_null(strstr(text, "active half:     B,"));
	cr_assert_not_null(strstr(text, "compat 0x10,"));
	free(text);

	cr_assert_eq(cfs_sb_set_label(&sb, "a\"b\n"), 0);
	text = print_to_string(&sb);
	cr_assert_not_null(strstr(text, "label:           \"a\\x22b\\x0a\"\n"));
	free(text);
}

/* ---- log records ------------------------------------------------------------ */

#define SEED_A 0x1234567890abcdefull

static uint64_t test_seed(void)
{
	uint8_t uuid[CFS_UUID_BYTES];

	cr_assert_eq(cfs_uuid_parse(test_uuid_str, uuid), 0);
	return cfs_log_seed(uuid);
}

Test(log, seed_is_defined)
{
	uint8_t uuid[CFS_UUID_BYTES];

	cr_assert_eq(cfs_uuid_parse(test_uuid_str, uuid), 0);
	cr_assert_eq(cfs_log_seed(uuid), XXH3_64bits_withSeed(uuid, 16, CFS_LOG_MAGIC));
	uuid[0] ^= 1;
	cr_assert_neq(cfs_log_seed(uuid), test_seed());
}

Test(log, record_bytes)
{
	cr_assert_eq(cfs_log_record_bytes(0), 32);
	cr_assert_eq(cfs_log_record_bytes(1), 40);
	cr_assert_eq(cfs_log_record_bytes(8), 40);
	cr_assert_eq(cfs_log_record_bytes(9), 48);
	cr_assert_eq(cfs_log_record_bytes(CFS_LOG_MAX_PAYLOAD), 32 + 65536);
}

ParameterizedTestParameters(log, roundtrip)
{
	static uint32_t lengths[] = {
		0, 1, 7, 8, 9, 100, 4096, CFS_LOG_MAX_PAYLOAD - 1, CFS_LOG_MAX_PAYLOAD};
	return cr_make_param_array(uint32_t, lengths, ARRAY_SIZE(lengths));
}

ParameterizedTest(uint32_t *length, log, roundtrip)
{
	size_t size = CFS_LOG_HEADER_BYTES + CFS_LOG_MAX_PAYLOAD + 64;
	uint8_t *buf = malloc(size), *payload = malloc(CFS_LOG_MAX_PAYLOAD);
	struct cfs_log_record rec;
	const char *why = NULL;
	uint32_t i, record_bytes = cfs_log_record_bytes(*length);
	int ret;

	cr_assert(buf && payload);
	for (i = 0; i < CFS_LOG_MAX_PAYLOAD; i++)
		payload[i] = (uint8_t)(i * 7 + 3);
	memset(buf, 0xee, size);
	ret = cfs_log_record_encode(buf, size, CFS_LOG_EXTENT_MAP, 0x0102, 42, SEED_A,
				    *length ? payload : NULL, *length);
	cr_assert_eq(ret, (int)record_bytes);
	/* header bytes */
	cr_assert_eq(get_le(buf, 0, 4), CFS_LOG_MAGIC);
	cr_assert_arr_eq(buf, "CLOG", 4);
	cr_assert_eq(get_le(buf, 4, 2), CFS_LOG_EXTENT_MAP);
	cr_assert_eq(get_le(buf, 6, 2), 0x0102);
	cr_assert_eq(get_le(buf, 8, 4), *length);
	cr_assert_eq(get_le(buf, 12, 4), 0);
	cr_assert_eq(get_le(buf, 16, 8), 42);
	for (i = CFS_LOG_HEADER_BYTES + *length; i < record_bytes; i++)
		cr_assert_eq(buf[i], 0, "padding byte %u", i);
	cr_assert_eq(buf[record_bytes], 0xee, "nothing written past the record");
	/* checksum definition: XXH3-64(seed) over header (checksum 0) + payload */
	{
		uint64_t stored = get_le(buf, 24, 8);

		put_le(buf, 24, 8, 0);
		cr_assert_eq(stored,
			     XXH3_64bits_withSeed(buf, CFS_LOG_HEADER_BYTES + *length, SEED_A));
		put_le(buf, 24, 8, stored);
	}

	ret = cfs_log_record_decode(buf, record_bytes, 42, SEED_A, &rec, &why);
	cr_assert_eq(ret, 0, "%s", why);
	cr_assert_eq(rec.type, CFS_LOG_EXTENT_MAP);
	cr_assert_eq(rec.flags, 0x0102);
	cr_assert_eq(rec.seq, 42);
	cr_assert_eq(rec.payload_length_bytes, *length);
	cr_assert_eq(rec.record_length_bytes, record_bytes);
	cr_assert_eq(rec.payload, buf + CFS_LOG_HEADER_BYTES);
	cr_assert_arr_eq(rec.payload, payload, *length);
	free(buf);
	free(payload);
}

Test(log, encode_errors)
{
	uint8_t buf[64], payload[40] = {0};
	static uint8_t big[CFS_LOG_HEADER_BYTES + CFS_LOG_MAX_PAYLOAD + 8];

	cr_assert_eq(cfs_log_record_encode(big, sizeof(big), CFS_LOG_NOOP, 0, 1, 0, big,
					   CFS_LOG_MAX_PAYLOAD + 1),
		     -EINVAL);
	cr_assert_eq(cfs_log_record_encode(buf, sizeof(buf), CFS_LOG_INVALID, 0, 1, 0, NULL, 0),
		     -EINVAL);
	cr_assert_eq(cfs_log_record_encode(buf, 31, CFS_LOG_NOOP, 0, 1, 0, NULL, 0), -ENOSPC);
	cr_assert_eq(cfs_log_record_encode(buf, 32, CFS_LOG_NOOP, 0, 1, 0, NULL, 0), 32);
	cr_assert_eq(cfs_log_record_encode(buf, sizeof(buf), CFS_LOG_NOOP, 0, 1, 0, payload, 33),
		     -ENOSPC);
	cr_assert_eq(cfs_log_record_encode(buf, sizeof(buf), CFS_LOG_NOOP, 0, 1, 0, payload, 32),
		     64);
}

/* A log of count records (seq first_seq, ...) at the start of a zeroed
 * buffer; returns its length and fills ends[] with each record's end. */
static size_t build_log(uint8_t *buf, size_t size, uint64_t first_seq, uint64_t seed,
			unsigned int count, size_t *ends)
{
	size_t offset = 0;
	unsigned int i;

	memset(buf, 0, size);
	for (i = 0; i < count; i++) {
		uint8_t payload[128];
		uint32_t length = 5 + 11 * i; /* odd lengths: exercise padding */
		int ret;

		cr_assert_leq(length, sizeof(payload));
		memset(payload, 'a' + (int)i, sizeof(payload));
		ret = cfs_log_record_encode(buf + offset, size - offset, (uint16_t)(16 + i), 0,
					    first_seq + i, seed, payload, length);
		cr_assert_gt(ret, 0);
		offset += (size_t)ret;
		if (ends)
			ends[i] = offset;
	}
	return offset;
}

struct bad_record_case {
	char name[32];
	size_t offset; /* byte to change, or SIZE_MAX for none */
	uint8_t xor ;
	size_t avail; /* SIZE_MAX: the whole record */
	uint64_t expected_seq;
	uint64_t seed;
	int ret;
	char why[64];
};

ParameterizedTestParameters(log, bad_record)
{
	static struct bad_record_case cases[] = {
		{"good", SIZE_MAX, 0, SIZE_MAX, 10, SEED_A, 0, ""},
		{"bad magic", 0, 0x01, SIZE_MAX, 10, SEED_A, -EUCLEAN, "bad record magic"},
		{"type flipped", 4, 0x01, SIZE_MAX, 10, SEED_A, -EUCLEAN, "bad record checksum"},
		{"flags flipped", 6, 0x01, SIZE_MAX, 10, SEED_A, -EUCLEAN, "bad record checksum"},
		{"length flipped", 8, 0x01, SIZE_MAX, 10, SEED_A, -EUCLEAN, "bad record checksum"},
		{"length huge", 10, 0x10, SIZE_MAX, 10, SEED_A, -EUCLEAN,
		 "record payload longer than the maximum"},
		{"length past end", 9, 0x01, SIZE_MAX, 10, SEED_A, -EUCLEAN,
		 "record runs past the end of the log"},
		{"reserved flipped", 12, 0x01, SIZE_MAX, 10, SEED_A, -EUCLEAN,
		 "bad record checksum"},
		{"seq flipped", 16, 0x01, SIZE_MAX, 10, SEED_A, -EUCLEAN, "bad record checksum"},
		{"checksum flipped", 24, 0x01, SIZE_MAX, 10, SEED_A, -EUCLEAN,
		 "bad record checksum"},
		{"payload flipped", 40, 0x80, SIZE_MAX, 10, SEED_A, -EUCLEAN,
		 "bad record checksum"},
		{"truncated payload", SIZE_MAX, 0, 47, 10, SEED_A, -EUCLEAN,
		 "record runs past the end of the log"},
		{"truncated padding", SIZE_MAX, 0, 55, 10, SEED_A, -EUCLEAN,
		 "record runs past the end of the log"},
		{"truncated header", SIZE_MAX, 0, 31, 10, SEED_A, -EINVAL,
		 "no room for a record header"},
		{"nothing left", SIZE_MAX, 0, 0, 10, SEED_A, -EINVAL,
		 "no room for a record header"},
		{"seq behind", SIZE_MAX, 0, SIZE_MAX, 11, SEED_A, -EUCLEAN,
		 "record sequence number is not the expected one"},
		{"seq ahead (gap)", SIZE_MAX, 0, SIZE_MAX, 9, SEED_A, -EUCLEAN,
		 "record sequence number is not the expected one"},
		{"other store's seed", SIZE_MAX, 0, SIZE_MAX, 10, SEED_A ^ 1, -EUCLEAN,
		 "bad record checksum"},
	};
	return cr_make_param_array(struct bad_record_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct bad_record_case *c, log, bad_record)
{
	uint8_t buf[128], payload[21];
	struct cfs_log_record rec;
	const char *why = NULL;
	int ret;

	memset(payload, 'p', sizeof(payload));
	memset(buf, 0, sizeof(buf));
	ret = cfs_log_record_encode(buf, sizeof(buf), CFS_LOG_INODE_CREATE, 0, 10, SEED_A, payload,
				    sizeof(payload));
	cr_assert_eq(ret, 56);
	if (c->offset != SIZE_MAX)
		buf[c->offset] ^= c->xor ;
	ret = cfs_log_record_decode(buf, c->avail == SIZE_MAX ? 56 : c->avail, c->expected_seq,
				    c->seed, &rec, &why);
	cr_assert_eq(ret, c->ret, "%s: %s", c->name, why ? why : "");
	if (c->why[0])
		cr_assert_str_eq(why, c->why, "%s", c->name);
}

/* A record whose checksum is right but whose reserved field is not zero. */
Test(log, reserved_must_be_zero)
{
	uint8_t buf[64];
	struct cfs_log_record rec;
	const char *why = NULL;

	cr_assert_eq(cfs_log_record_encode(buf, sizeof(buf), CFS_LOG_NOOP, 0, 3, SEED_A, NULL, 0),
		     32);
	put_le(buf, 12, 4, 1);
	put_le(buf, 24, 8, 0);
	put_le(buf, 24, 8, XXH3_64bits_withSeed(buf, 32, SEED_A));
	cr_assert_eq(cfs_log_record_decode(buf, 32, 3, SEED_A, &rec, &why), -EUCLEAN);
	cr_assert_str_eq(why, "record reserved field is not zero");
}

Test(log, zeroed_header_ends_log)
{
	uint8_t buf[64] = {0};
	struct cfs_log_record rec;
	const char *why = NULL;

	cr_assert_eq(cfs_log_record_decode(buf, sizeof(buf), 1, 0, &rec, &why), -EUCLEAN);
	cr_assert_str_eq(why, "bad record magic");
}

struct collect {
	unsigned int calls;
	unsigned int stop_at; /* return 99 on this call (1-based), 0 = never */
	uint64_t seqs[16];
	uint16_t types[16];
};

static int collect_fn(const struct cfs_log_record *rec, void *arg)
{
	struct collect *c = arg;

	c->calls++;
	if (c->stop_at && c->calls == c->stop_at)
		return 99;
	c->seqs[c->calls - 1] = rec->seq;
	c->types[c->calls - 1] = rec->type;
	return 0;
}

Test(log, walk_full)
{
	uint8_t buf[4096];
	size_t ends[8], length;
	struct cfs_log_walk_result res;
	struct collect col = {0};
	unsigned int i;

	length = build_log(buf, sizeof(buf), 100, SEED_A, 8, ends);
	cr_assert_eq(cfs_log_walk(buf, sizeof(buf), 100, SEED_A, collect_fn, &col, &res), 0);
	cr_assert_eq(res.record_count, 8);
	cr_assert_eq(res.next_seq, 108);
	cr_assert_eq(res.end_offset_bytes, length);
	cr_assert_str_eq(res.why, "bad record magic", "the zeroed tail ends it");
	cr_assert_eq(col.calls, 8);
	for (i = 0; i < 8; i++) {
		cr_assert_eq(col.seqs[i], 100 + i);
		cr_assert_eq(col.types[i], 16 + i);
	}

	/* the buffer ends exactly at the last record */
	cr_assert_eq(cfs_log_walk(buf, length, 100, SEED_A, NULL, NULL, &res), 0);
	cr_assert_eq(res.record_count, 8);
	cr_assert_eq(res.end_offset_bytes, length);
	cr_assert_str_eq(res.why, "no room for a record header");

	/* empty log */
	cr_assert_eq(cfs_log_walk(buf, 0, 100, SEED_A, NULL, NULL, &res), 0);
	cr_assert_eq(res.record_count, 0);
	cr_assert_eq(res.next_seq, 100);
	cr_assert_eq(res.end_offset_bytes, 0);
}

Test(log, walk_torn_tail)
{
	uint8_t buf[4096];
	size_t ends[6], cut;
	struct cfs_log_walk_result res;

	build_log(buf, sizeof(buf), 1, SEED_A, 6, ends);
	/* every cut inside record 5 (index 4) leaves 4 records */
	for (cut = ends[3]; cut < ends[4]; cut++) {
		cr_assert_eq(cfs_log_walk(buf, cut, 1, SEED_A, NULL, NULL, &res), 0);
		cr_assert_eq(res.record_count, 4, "cut at %zu", cut);
		cr_assert_eq(res.end_offset_bytes, ends[3]);
		cr_assert_eq(res.next_seq, 5);
	}
	/* a torn write: the tail of record 5 never reached the disk */
	memset(buf + ends[3] + 40, 0, ends[5] - ends[3] - 40);
	cr_assert_eq(cfs_log_walk(buf, sizeof(buf), 1, SEED_A, NULL, NULL, &res), 0);
	cr_assert_eq(res.record_count, 4);
	cr_assert_str_eq(res.why, "bad record checksum");
}

Test(log, walk_sequence_gap)
{
	uint8_t buf[4096];
	struct cfs_log_walk_result res;
	size_t offset;
	int ret;

	offset = build_log(buf, sizeof(buf), 1, SEED_A, 3, NULL);
	/* seq 5 after 1, 2, 3: a gap ends the log even though it verifies */
	ret = cfs_log_record_encode(buf + offset, sizeof(buf) - offset, CFS_LOG_NOOP, 0, 5, SEED_A,
				    NULL, 0);
	cr_assert_eq(ret, 32);
	cr_assert_eq(cfs_log_walk(buf, sizeof(buf), 1, SEED_A, NULL, NULL, &res), 0);
	cr_assert_eq(res.record_count, 3);
	cr_assert_eq(res.end_offset_bytes, offset);
	cr_assert_eq(res.next_seq, 4);
	cr_assert_str_eq(res.why, "record sequence number is not the expected one");
	/* the first record must carry first_seq */
	cr_assert_eq(cfs_log_walk(buf, sizeof(buf), 2, SEED_A, NULL, NULL, &res), 0);
	cr_assert_eq(res.record_count, 0);
}

/* Reusing a half: new records overwrite the start of an older log of the
 * same store, whose leftovers verify but carry older sequence numbers. */
Test(log, walk_stale_records_after_reuse)
{
	uint8_t buf[4096];
	size_t old_ends[10], new_ends[3];
	struct cfs_log_walk_result res;

	build_log(buf, sizeof(buf), 1, SEED_A, 10, old_ends);
	{
		uint8_t fresh[4096];

		build_log(fresh, sizeof(fresh), 500, SEED_A, 3, new_ends);
		memcpy(buf, fresh, new_ends[2]);
	}
	cr_assert_eq(cfs_log_walk(buf, sizeof(buf), 500, SEED_A, NULL, NULL, &res), 0);
	cr_assert_eq(res.record_count, 3);
	cr_assert_eq(res.end_offset_bytes, new_ends[2]);
}

Test(log, walk_wrong_uuid_seed)
{
	uint8_t buf[4096];
	uint8_t uuid[CFS_UUID_BYTES];
	struct cfs_log_walk_result res;

	cr_assert_eq(cfs_uuid_parse(test_uuid_str, uuid), 0);
	build_log(buf, sizeof(buf), 1, cfs_log_seed(uuid), 4, NULL);
	cr_assert_eq(cfs_log_walk(buf, sizeof(buf), 1, cfs_log_seed(uuid), NULL, NULL, &res), 0);
	cr_assert_eq(res.record_count, 4);
	uuid[9] ^= 0x40; /* the store was reformatted: new uuid */
	cr_assert_eq(cfs_log_walk(buf, sizeof(buf), 1, cfs_log_seed(uuid), NULL, NULL, &res), 0);
	cr_assert_eq(res.record_count, 0);
	cr_assert_str_eq(res.why, "bad record checksum");
}

Test(log, walk_callback_stops)
{
	uint8_t buf[4096];
	size_t ends[5];
	struct cfs_log_walk_result res;
	struct collect col = {.stop_at = 3};

	build_log(buf, sizeof(buf), 7, SEED_A, 5, ends);
	cr_assert_eq(cfs_log_walk(buf, sizeof(buf), 7, SEED_A, collect_fn, &col, &res), 99);
	cr_assert_eq(res.record_count, 2);
	cr_assert_eq(res.next_seq, 9);
	cr_assert_eq(res.end_offset_bytes, ends[1]);
	cr_assert_str_eq(res.why, "stopped by the caller");
}

/* Flip every byte of a 3-record log: the walk keeps exactly the records
 * before the damaged one; padding is not covered by the checksum. */
Test(log, walk_every_byte)
{
	uint8_t buf[512];
	size_t ends[3], length, i;
	struct cfs_log_walk_result res;

	length = build_log(buf, sizeof(buf), 1, SEED_A, 3, ends);
	for (i = 0; i < length; i++) {
		unsigned int rec = i < ends[0] ? 0 : i < ends[1] ? 1 : 2;
		size_t start = rec ? ends[rec - 1] : 0;
		uint32_t payload = 5 + 11 * rec;
		bool padding = i >= start + CFS_LOG_HEADER_BYTES + payload;

		buf[i] ^= 0x04;
		cr_assert_eq(cfs_log_walk(buf, sizeof(buf), 1, SEED_A, NULL, NULL, &res), 0);
		cr_assert_eq(res.record_count, padding ? 3 : rec, "byte %zu", i);
		buf[i] ^= 0x04;
	}
}

/* ---- snapshots ---------------------------------------------------------------- */

/* Build a snapshot of n records into buf; returns its total length. */
static size_t build_snap(uint8_t *buf, size_t size, unsigned int n, uint64_t seq, uint64_t seed)
{
	size_t body = 0;
	unsigned int i;

	memset(buf, 0, size);
	for (i = 0; i < n; i++) {
		uint32_t v = 1000 + i;
		int ret = cfs_log_record_encode(buf + CFS_SNAP_HEADER_BYTES + body,
						size - CFS_SNAP_HEADER_BYTES - body,
						CFS_LOG_INODE_CREATE, 0, i, seed, &v, sizeof(v));

		cr_assert_eq(ret, 40);
		body += (size_t)ret;
	}
	cr_assert_eq(cfs_snap_seal(buf, size, body, n, seq, seed), 0);
	return CFS_SNAP_HEADER_BYTES + body;
}

static int sum_fn(const struct cfs_log_record *rec, void *arg)
{
	uint32_t v;

	memcpy(&v, rec->payload, sizeof(v));
	*(uint64_t *)arg += v;
	return 0;
}

Test(snap, roundtrip)
{
	uint8_t buf[1024];
	struct cfs_snap snap;
	struct cfs_log_walk_result res;
	const char *why = NULL;
	size_t length;
	uint64_t sum = 0;

	length = build_snap(buf, sizeof(buf), 5, 77, SEED_A);
	cr_assert_eq(length, 64 + 5 * 40);
	cr_assert_arr_eq(buf, "CSNP", 4);
	cr_assert_eq(get_le(buf, 4, 4), 1);
	cr_assert_eq(get_le(buf, 8, 8), 200);
	cr_assert_eq(get_le(buf, 16, 8), 5);
	cr_assert_eq(get_le(buf, 24, 8), 77);
	cr_assert_eq(get_le(buf, 32, 8) | get_le(buf, 40, 8) | get_le(buf, 48, 8), 0);
	{
		uint64_t stored = get_le(buf, 56, 8);

		put_le(buf, 56, 8, 0);
		cr_assert_eq(stored, XXH3_64bits_withSeed(buf, length, SEED_A));
		put_le(buf, 56, 8, stored);
	}
	/* avail may exceed the snapshot (e.g. a whole block was read) */
	cr_assert_eq(cfs_snap_decode(buf, sizeof(buf), SEED_A, &snap, &why), 0, "%s", why);
	cr_assert_eq(snap.seq, 77);
	cr_assert_eq(snap.record_count, 5);
	cr_assert_eq(snap.body_length_bytes, 200);
	cr_assert_eq(snap.length_bytes, length);
	cr_assert_eq(snap.body, buf + 64);
	cr_assert_eq(cfs_log_walk(snap.body, snap.body_length_bytes, 0, SEED_A, sum_fn, &sum, &res),
		     0);
	cr_assert_eq(res.record_count, 5);
	cr_assert_eq(sum, 1000 + 1001 + 1002 + 1003 + 1004);
	cr_assert_eq(cfs_snap_decode(buf, length, SEED_A, &snap, &why), 0);
}

Test(snap, empty)
{
	uint8_t buf[CFS_SNAP_HEADER_BYTES];
	struct cfs_snap snap;

	cr_assert_eq(cfs_snap_seal(buf, sizeof(buf), 0, 0, CFS_LOG_SEQ_FIRST, SEED_A), 0);
	cr_assert_eq(cfs_snap_decode(buf, sizeof(buf), SEED_A, &snap, NULL), 0);
	cr_assert_eq(snap.record_count, 0);
	cr_assert_eq(snap.length_bytes, CFS_SNAP_HEADER_BYTES);
	cr_assert_eq(snap.seq, 1);
}

Test(snap, seal_errors)
{
	uint8_t buf[128];

	cr_assert_eq(cfs_snap_seal(buf, 63, 0, 0, 1, 0), -ENOSPC);
	cr_assert_eq(cfs_snap_seal(buf, sizeof(buf), 65, 0, 1, 0), -ENOSPC);
	cr_assert_eq(cfs_snap_seal(buf, sizeof(buf), 64, 0, 1, 0), 0);
}

Test(snap, every_byte_is_covered)
{
	uint8_t buf[512];
	struct cfs_snap snap;
	const char *why;
	size_t length, i;

	length = build_snap(buf, sizeof(buf), 3, 10, SEED_A);
	for (i = 0; i < length; i++) {
		buf[i] ^= 0x02;
		why = NULL;
		cr_assert_eq(cfs_snap_decode(buf, length, SEED_A, &snap, &why),
			     i < 4 ? -EINVAL : -EUCLEAN, "byte %zu", i);
		cr_assert_not_null(why);
		buf[i] ^= 0x02;
	}
}

static void snap_reseal(uint8_t *buf, size_t length, uint64_t seed)
{
	put_le(buf, 56, 8, 0);
	put_le(buf, 56, 8, XXH3_64bits_withSeed(buf, length, seed));
}

Test(snap, bad_cases)
{
	uint8_t buf[512];
	struct cfs_snap snap;
	const char *why = NULL;
	size_t length;

	length = build_snap(buf, sizeof(buf), 3, 10, SEED_A);
	cr_assert_eq(cfs_snap_decode(buf, length, SEED_A ^ 1, &snap, &why), -EUCLEAN);
	cr_assert_str_eq(why, "bad snapshot checksum");
	cr_assert_eq(cfs_snap_decode(buf, length - 1, SEED_A, &snap, &why), -EUCLEAN);
	cr_assert_str_eq(why, "snapshot body runs past the end of the snapshot");
	cr_assert_eq(cfs_snap_decode(buf, 63, SEED_A, &snap, &why), -EUCLEAN);
	cr_assert_str_eq(why, "snapshot header truncated");
	cr_assert_eq(cfs_snap_decode(buf, 3, SEED_A, &snap, &why), -EINVAL);

	put_le(buf, 4, 4, 2); /* newer version */
	snap_reseal(buf, length, SEED_A);
	cr_assert_eq(cfs_snap_decode(buf, length, SEED_A, &snap, &why), -EOPNOTSUPP);
	put_le(buf, 4, 4, 0);
	snap_reseal(buf, length, SEED_A);
	cr_assert_eq(cfs_snap_decode(buf, length, SEED_A, &snap, &why), -EUCLEAN);
	put_le(buf, 4, 4, 1);
	put_le(buf, 40, 8, 1); /* reserved */
	snap_reseal(buf, length, SEED_A);
	cr_assert_eq(cfs_snap_decode(buf, length, SEED_A, &snap, &why), -EUCLEAN);
	cr_assert_str_eq(why, "snapshot reserved fields are not zero");
	put_le(buf, 40, 8, 0);
	snap_reseal(buf, length, SEED_A);
	cr_assert_eq(cfs_snap_decode(buf, length, SEED_A, &snap, &why), 0);

	/* header claims 4 records, body holds 3 */
	cr_assert_eq(cfs_snap_seal(buf, sizeof(buf), length - 64, 4, 10, SEED_A), 0);
	cr_assert_eq(cfs_snap_decode(buf, length, SEED_A, &snap, &why), -EUCLEAN);
	cr_assert_str_eq(why, "snapshot body does not hold exactly its records");
	/* body longer than its records (trailing garbage sealed in) */
	cr_assert_eq(cfs_snap_seal(buf, sizeof(buf), length - 64 + 8, 3, 10, SEED_A), 0);
	cr_assert_eq(cfs_snap_decode(buf, length + 8, SEED_A, &snap, &why), -EUCLEAN);
	/* seq zero */
	cr_assert_eq(cfs_snap_seal(buf, sizeof(buf), length - 64, 3, 0, SEED_A), 0);
	cr_assert_eq(cfs_snap_decode(buf, length, SEED_A, &snap, &why), -EUCLEAN);
	cr_assert_str_eq(why, "snapshot sequence number is zero");
}

/* A body record with a log-style sequence (not its index) is refused. */
Test(snap, body_seq_must_be_index)
{
	uint8_t buf[256];
	struct cfs_snap snap;
	const char *why = NULL;
	int ret;

	memset(buf, 0, sizeof(buf));
	ret = cfs_log_record_encode(buf + 64, sizeof(buf) - 64, CFS_LOG_NOOP, 0, 1, SEED_A, NULL,
				    0);
	cr_assert_eq(ret, 32);
	cr_assert_eq(cfs_snap_seal(buf, sizeof(buf), 32, 1, 5, SEED_A), 0);
	cr_assert_eq(cfs_snap_decode(buf, 96, SEED_A, &snap, &why), -EUCLEAN);
}

/* ---- uuid ---------------------------------------------------------------------- */

Test(uuid, generate)
{
	uint8_t a[CFS_UUID_BYTES], b[CFS_UUID_BYTES];

	cr_assert_eq(cfs_uuid_generate(a), 0);
	cr_assert_eq(cfs_uuid_generate(b), 0);
	cr_assert_arr_neq(a, b, CFS_UUID_BYTES);
	cr_assert_eq(a[6] >> 4, 4, "version 4");
	cr_assert_eq(a[8] >> 6, 2, "RFC 4122 variant");
	cr_assert_not(cfs_uuid_is_null(a));
}

Test(uuid, unparse_parse)
{
	uint8_t u[CFS_UUID_BYTES], v[CFS_UUID_BYTES];
	char s[CFS_UUID_STR_BYTES];
	unsigned int i;

	for (i = 0; i < CFS_UUID_BYTES; i++)
		u[i] = (uint8_t)(i * 0x11 + 0x0a);
	cfs_uuid_unparse(u, s);
	cr_assert_str_eq(s, "0a1b2c3d-4e5f-7081-92a3-b4c5d6e7f809");
	cr_assert_eq(cfs_uuid_parse(s, v), 0);
	cr_assert_arr_eq(u, v, CFS_UUID_BYTES);
	cr_assert_eq(cfs_uuid_parse("0A1B2C3D-4E5F-7081-92A3-B4C5D6E7F809", v), 0);
	cr_assert_arr_eq(u, v, CFS_UUID_BYTES);
	memset(u, 0, sizeof(u));
	cr_assert(cfs_uuid_is_null(u));
	cfs_uuid_unparse(u, s);
	cr_assert_str_eq(s, "00000000-0000-0000-0000-000000000000");
}

struct uuid_case {
	char s[48];
};

ParameterizedTestParameters(uuid, parse_bad)
{
	static struct uuid_case bad[] = {
		{""},
		{"0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f"},   /* short */
		{"0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f90"}, /* long */
		{"0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8fg"},  /* not hex */
		{"0a1b2c3d04e5f-6071-8293-a4b5c6d7e8f9"},  /* missing dash */
		{"0a1b2c3-d4e5f-6071-8293-a4b5c6d7e8f9"},  /* dash misplaced */
		{"0a1b2c3d4e5f607182934a4b5c6d7e8f9abc"},  /* no dashes */
		{" a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"},
		{"{a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f}"},
	};
	return cr_make_param_array(struct uuid_case, bad, ARRAY_SIZE(bad));
}

ParameterizedTest(struct uuid_case *c, uuid, parse_bad)
{
	uint8_t u[CFS_UUID_BYTES];

	memset(u, 0x55, sizeof(u));
	cr_assert_eq(cfs_uuid_parse(c->s, u), -EINVAL, "\"%s\"", c->s);
	cr_assert_eq(u[0], 0x55, "untouched on failure");
}

/* ---- sizes ------------------------------------------------------------------------ */

struct size_case {
	char s[32];
	int ret;
	uint64_t bytes;
};

ParameterizedTestParameters(size, parse)
{
	static struct size_case cases[] = {
		{"0", 0, 0},
		{"1", 0, 1},
		{"4096", 0, 4096},
		{"007", 0, 7},
		{"512B", 0, 512},
		{"4k", 0, 4096},
		{"4K", 0, 4096},
		{"4KiB", 0, 4096},
		{"4KB", 0, 4096},
		{"1m", 0, 1ull << 20},
		{"1M", 0, 1ull << 20},
		{"16G", 0, 16ull << 30},
		{"3T", 0, 3ull << 40},
		{"2P", 0, 2ull << 50},
		{"16383P", 0, 16383ull << 50},
		{"18446744073709551615", 0, UINT64_MAX},
		{"17179869183G", 0, 17179869183ull << 30},
		{"18446744073709551616", -ERANGE, 0},
		{"99999999999999999999999", -ERANGE, 0},
		{"16384P", -ERANGE, 0},
		{"17179869184G", -ERANGE, 0},
		{"", -EINVAL, 0},
		{"k", -EINVAL, 0},
		{"M", -EINVAL, 0},
		{"-1", -EINVAL, 0},
		{"-1M", -EINVAL, 0},
		{"+1", -EINVAL, 0},
		{" 1", -EINVAL, 0},
		{"1 ", -EINVAL, 0},
		{"1 M", -EINVAL, 0},
		{"1.5M", -EINVAL, 0},
		{"0x10", -EINVAL, 0},
		{"1KK", -EINVAL, 0},
		{"1kib", -EINVAL, 0},
		{"1iB", -EINVAL, 0},
		{"1Q", -EINVAL, 0},
		{"1e6", -EINVAL, 0},
		{"1MiBx", -EINVAL, 0},
		{"1BB", -EINVAL, 0},
	};
	return cr_make_param_array(struct size_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct size_case *c, size, parse)
{
	uint64_t v = 12345;
	int ret = cfs_parse_size(c->s, &v);

	cr_assert_eq(ret, c->ret, "\"%s\"", c->s);
	if (ret == 0)
		cr_assert_eq(v, c->bytes, "\"%s\"", c->s);
	else
		cr_assert_eq(v, 12345, "\"%s\": output untouched on failure", c->s);
}

Test(size, parse_null)
{
	uint64_t v;

	cr_assert_eq(cfs_parse_size(NULL, &v), -EINVAL);
}

struct format_case {
	uint64_t bytes;
	char expect[CFS_SIZE_STR_BYTES];
};

ParameterizedTestParameters(size, format)
{
	static struct format_case cases[] = {
		{0, "0 B"},
		{1, "1 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{1536, "1.50 KiB"},
		{1025, "1.00 KiB"},
		{2047, "1.99 KiB"},
		{1ull << 20, "1 MiB"},
		{1060110336, "1011 MiB"},
		{1ull << 30, "1 GiB"},
		{(1ull << 40) * 3 / 2, "1.50 TiB"},
		{1ull << 50, "1 PiB"},
		{1ull << 60, "1 EiB"},
		{UINT64_MAX, "15.99 EiB"},
	};
	return cr_make_param_array(struct format_case, cases, ARRAY_SIZE(cases));
}

ParameterizedTest(struct format_case *c, size, format)
{
	char buf[CFS_SIZE_STR_BYTES];

	cr_assert_eq(cfs_size_format(c->bytes, buf), buf);
	cr_assert_str_eq(buf, c->expect, "%llu", (unsigned long long)c->bytes);
}
