/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * format.c — encode, decode and verify the chunkfs on-disk structures
 * (superblock, metadata log records, snapshots), compute a store's geometry,
 * and the shared helpers (uuid, size parsing, superblock summary).
 *
 * Invariant: every byte this file writes is little-endian and checksummed,
 * and every byte it reads is verified before it is believed. The on-disk
 * layout is pinned in fs/format/format_check.h and described in fs/format/FORMAT.md.
 *
 * What it does NOT do: no I/O on the store (callers read/write blocks), no
 * interpretation of log record payloads (the daemon owns them), no memory
 * allocation, no global state. Only libc and xxhash: mkchunkfs links this
 * without libfuse or liburing.
 */
#include <ctype.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack: no malloc per record */
#include <xxhash.h>

#include "fs/base/assert.h"
#include "fs/base/hex.h"
#include "fs/format/format.h"
#include "fs/format/format_check.h"

static int fail(const char **why, const char *reason, int err)
{
	if (why)
		*why = reason;
	return err;
}

static bool is_pow2(uint64_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

static uint64_t round_up(uint64_t v, uint64_t align)
{
	return (v + align - 1) / align * align;
}

/* ---- superblock: validation --------------------------------------------- */

static int validate_sectors(uint32_t logical, uint32_t physical, const char **why, int err)
{
	if (!is_pow2(logical) || logical < CFS_SECTOR_MIN || logical > CFS_SECTOR_MAX)
		return fail(why, "logical sector size must be a power of two from 512 to 65536",
			    err);
	if (!is_pow2(physical) || physical < logical || physical > CFS_SECTOR_MAX)
		return fail(
			why,
			"physical sector size must be a power of two, at least the logical sector size, at most 65536",
			err);
	return 0;
}

static int validate_block_and_unit(uint32_t block_size_bytes, uint32_t alloc_unit_bytes,
				   uint32_t logical_sector_bytes, const char **why, int err)
{
	if (!is_pow2(block_size_bytes) || block_size_bytes < CFS_BLOCK_SIZE_MIN ||
	    block_size_bytes > CFS_BLOCK_SIZE_MAX)
		return fail(why, "block size must be a power of two from 512 to 65536", err);
	if (block_size_bytes < logical_sector_bytes)
		return fail(why, "block size is smaller than the logical sector size", err);
	if (!is_pow2(alloc_unit_bytes))
		return fail(why, "allocation unit must be a power of two", err);
	if (alloc_unit_bytes < block_size_bytes)
		return fail(why, "allocation unit must be a multiple of the block size", err);
	if (alloc_unit_bytes > CFS_ALLOC_UNIT_MAX)
		return fail(why, "allocation unit must be at most 1 GiB", err);
	return 0;
}

/* Geometry only: what cfs_sb_layout() produces. */
static int validate_geometry(const struct cfs_sb *sb, const char **why)
{
	uint64_t au = sb->alloc_unit_bytes;
	uint64_t meta_end;
	int ret;

	ret = validate_sectors(sb->logical_sector_bytes, sb->physical_sector_bytes, why, -EUCLEAN);
	if (ret)
		return ret;
	ret = validate_block_and_unit(sb->block_size_bytes, sb->alloc_unit_bytes,
				      sb->logical_sector_bytes, why, -EUCLEAN);
	if (ret)
		return ret;
	if (sb->store_size_bytes < CFS_STORE_MIN_BYTES)
		return fail(why, "store size below the 16 MiB minimum", -EUCLEAN);
	if (sb->meta_offset_bytes < CFS_SB_AREA_BYTES)
		return fail(why, "metadata region overlaps the superblock area", -EUCLEAN);
	if (sb->meta_offset_bytes % au)
		return fail(why, "metadata offset not aligned to the allocation unit", -EUCLEAN);
	if (cfs_sb_is_data_store(sb)) {
		/* A data store of a pool: no metadata region (store 0 has it). */
		if (sb->meta_size_bytes != 0)
			return fail(why, "a data store of a pool has a metadata region", -EUCLEAN);
	} else if (sb->meta_size_bytes == 0 || sb->meta_size_bytes % (2 * au)) {
		return fail(why, "metadata size not a nonzero multiple of two allocation units",
			    -EUCLEAN);
	}
	if (sb->meta_offset_bytes > sb->store_size_bytes ||
	    sb->meta_size_bytes > sb->store_size_bytes - sb->meta_offset_bytes)
		return fail(why, "metadata region extends beyond the store", -EUCLEAN);
	meta_end = sb->meta_offset_bytes + sb->meta_size_bytes;
	if (sb->data_offset_bytes < meta_end)
		return fail(why, "data region overlaps the metadata region", -EUCLEAN);
	if (sb->data_offset_bytes % au)
		return fail(why, "data offset not aligned to the allocation unit", -EUCLEAN);
	if (sb->data_unit_count == 0)
		return fail(why, "data region has no allocation unit", -EUCLEAN);
	if (sb->data_unit_count > UINT64_MAX / au ||
	    sb->data_size_bytes != sb->data_unit_count * au)
		return fail(why, "data size is not unit count times allocation unit", -EUCLEAN);
	if (sb->data_offset_bytes > sb->store_size_bytes ||
	    sb->data_size_bytes > sb->store_size_bytes - sb->data_offset_bytes)
		return fail(why, "data region extends beyond the store", -EUCLEAN);
	return 0;
}

/* NULL when the label field is NUL-terminated and NUL-padded, else why not. */
static const char *label_invalid(const char *label)
{
	const char *nul = memchr(label, 0, CFS_LABEL_BYTES);

	if (!nul)
		return "label is not NUL-terminated";
	for (size_t i = (size_t)(nul - label); i < CFS_LABEL_BYTES; i++)
		if (label[i])
			return "label is not NUL-padded";
	return NULL;
}

/* Pool address just past the last unit of [base, base + count). */
static bool pool_range_fits(const struct cfs_sb *sb, uint64_t base, uint64_t count)
{
	uint64_t au = sb->alloc_unit_bytes;
	uint64_t end = base + count;

	return count && end > base && end <= (CFS_POOL_ADDRESS_MAX - sb->data_offset_bytes) / au;
}

/* The pool fields (FORMAT.md 3.4). */
static int validate_pool(const struct cfs_sb *sb, const char **why)
{
	if (cfs_uuid_is_null(sb->pool_uuid))
		return fail(why, "pool store without a pool uuid", -EUCLEAN);
	if (sb->store_index != 0) {
		/* A data store: its own facts only; store 0 has the table. */
		if (!memcmp(sb->pool_uuid, sb->uuid, CFS_UUID_BYTES))
			return fail(why, "a data store has the pool's uuid as its own", -EUCLEAN);
		if (sb->store_count != 0)
			return fail(why, "a data store carries a table of stores", -EUCLEAN);
		if (sb->unit_base == 0 || !pool_range_fits(sb, sb->unit_base, sb->data_unit_count))
			return fail(why, "a data store's units lie outside the pool's unit space",
				    -EUCLEAN);
		return 0;
	}
	if (memcmp(sb->pool_uuid, sb->uuid, CFS_UUID_BYTES))
		return fail(why, "store 0 of a pool does not carry the pool's uuid", -EUCLEAN);
	if (sb->unit_base != 0)
		return fail(why, "store 0 of a pool does not start at unit 0", -EUCLEAN);
	if (sb->store_count < 1 || sb->store_count > CFS_POOL_STORES_MAX)
		return fail(why, "the table of stores is empty or too long", -EUCLEAN);
	for (uint32_t i = 0; i < sb->store_count; i++) {
		const struct cfs_store_entry *e = &sb->stores[i];

		if (cfs_uuid_is_null(e->uuid))
			return fail(why, "a store in the table has no uuid", -EUCLEAN);
		if (e->state != CFS_STORE_ACTIVE && e->state != CFS_STORE_REMOVING)
			return fail(why, "a store in the table has an unknown state", -EUCLEAN);
		if (label_invalid(e->label))
			return fail(why, "a store's label in the table is not NUL-padded",
				    -EUCLEAN);
		if (!pool_range_fits(sb, e->unit_base, e->unit_count))
			return fail(why, "a store's units lie outside the pool's unit space",
				    -EUCLEAN);
		if ((e->index == 0) != (i == 0))
			return fail(why, "store 0 is not the first entry of the table", -EUCLEAN);
		for (uint32_t j = 0; j < i; j++) {
			const struct cfs_store_entry *o = &sb->stores[j];

			if (o->index == e->index || !memcmp(o->uuid, e->uuid, CFS_UUID_BYTES))
				return fail(why, "two stores in the table share an index or a uuid",
					    -EUCLEAN);
			if (e->label[0] && !strcmp(o->label, e->label))
				return fail(why, "two stores in the table share a label", -EUCLEAN);
			/* Disjoint and never adjacent: no run of consecutive
			 * unit numbers crosses two stores. */
			if (e->unit_base <= o->unit_base + o->unit_count &&
			    o->unit_base <= e->unit_base + e->unit_count)
				return fail(why, "two stores' unit ranges touch or overlap",
					    -EUCLEAN);
		}
	}
	if (memcmp(sb->stores[0].uuid, sb->uuid, CFS_UUID_BYTES) || sb->stores[0].unit_base != 0 ||
	    sb->stores[0].unit_count != sb->data_unit_count)
		return fail(why, "the table's entry for store 0 does not describe it", -EUCLEAN);
	return 0;
}

int cfs_sb_validate(const struct cfs_sb *sb, const char **why)
{
	int ret;

	ret = validate_geometry(sb, why);
	if (ret)
		return ret;
	if (!cfs_sb_is_data_store(sb)) {
		if (sb->meta_active_half > 1)
			return fail(why, "active metadata half is neither 0 nor 1", -EUCLEAN);
		if (sb->meta_snap_length_bytes < CFS_SNAP_HEADER_BYTES ||
		    sb->meta_snap_length_bytes > cfs_sb_half_size_bytes(sb))
			return fail(why, "snapshot length does not fit the metadata half",
				    -EUCLEAN);
		if (sb->log_seq_start < CFS_LOG_SEQ_FIRST)
			return fail(why, "log sequence start is zero", -EUCLEAN);
	}
	if (label_invalid(sb->label))
		return fail(why, label_invalid(sb->label), -EUCLEAN);
	if (sb->incompat & CFS_FEAT_INCOMPAT_POOL)
		return validate_pool(sb, why);
	return 0;
}

/* ---- superblock: defaults and layout ------------------------------------ */

void cfs_sb_init_defaults(struct cfs_sb *sb)
{
	memset(sb, 0, sizeof(*sb));
	sb->version = CFS_FORMAT_VERSION;
	sb->block_size_bytes = CFS_BLOCK_SIZE_DEFAULT;
	sb->alloc_unit_bytes = CFS_ALLOC_UNIT_DEFAULT;
	sb->logical_sector_bytes = CFS_SECTOR_DEFAULT;
	sb->physical_sector_bytes = CFS_SECTOR_DEFAULT;
	sb->meta_active_half = 0;
	sb->meta_snap_length_bytes = CFS_SNAP_HEADER_BYTES;
	sb->log_seq_start = CFS_LOG_SEQ_FIRST;
}

/* What every layout checks first, after putting in the defaults for a block
 * size or unit of 0: the sectors, the block size and unit, the minimum size. */
static int layout_check(const struct cfs_sb *sb, uint64_t store_size_bytes,
			uint32_t *block_size_bytes, uint32_t *alloc_unit_bytes, const char **why)
{
	int ret;

	if (!*block_size_bytes)
		*block_size_bytes = CFS_BLOCK_SIZE_DEFAULT;
	if (!*alloc_unit_bytes)
		*alloc_unit_bytes = CFS_ALLOC_UNIT_DEFAULT;
	ret = validate_sectors(sb->logical_sector_bytes, sb->physical_sector_bytes, why, -EINVAL);
	if (ret)
		return ret;
	ret = validate_block_and_unit(*block_size_bytes, *alloc_unit_bytes,
				      sb->logical_sector_bytes, why, -EINVAL);
	if (ret)
		return ret;
	if (store_size_bytes < CFS_STORE_MIN_BYTES)
		return fail(why, "store too small: chunkfs needs at least 16 MiB", -EINVAL);
	return 0;
}

/* The geometry of a checked layout; the data region is the whole units from
 * data_offset to the end of the store. */
static void layout_set(struct cfs_sb *sb, uint64_t store_size_bytes, uint32_t block_size_bytes,
		       uint32_t alloc_unit_bytes, uint64_t meta_offset, uint64_t meta_size_bytes,
		       uint64_t data_offset)
{
	sb->block_size_bytes = block_size_bytes;
	sb->alloc_unit_bytes = alloc_unit_bytes;
	sb->store_size_bytes = store_size_bytes;
	sb->meta_offset_bytes = meta_offset;
	sb->meta_size_bytes = meta_size_bytes;
	sb->data_offset_bytes = data_offset;
	sb->data_unit_count = (store_size_bytes - data_offset) / alloc_unit_bytes;
	sb->data_size_bytes = sb->data_unit_count * alloc_unit_bytes;
}

int cfs_sb_layout(struct cfs_sb *sb, uint64_t store_size_bytes, uint32_t block_size_bytes,
		  uint32_t alloc_unit_bytes, uint64_t meta_size_bytes, const char **why)
{
	uint64_t au, meta_offset, data_offset;
	int ret;

	ret = layout_check(sb, store_size_bytes, &block_size_bytes, &alloc_unit_bytes, why);
	if (ret)
		return ret;
	au = alloc_unit_bytes;
	if (!meta_size_bytes) {
		meta_size_bytes = store_size_bytes / 100 * CFS_META_DEFAULT_PERCENT;
		if (meta_size_bytes < CFS_META_MIN_BYTES)
			meta_size_bytes = CFS_META_MIN_BYTES;
		if (meta_size_bytes > CFS_META_DEFAULT_MAX_BYTES)
			meta_size_bytes = CFS_META_DEFAULT_MAX_BYTES;
	} else if (meta_size_bytes < CFS_META_MIN_BYTES) {
		return fail(why, "metadata size below the 4 MiB minimum", -EINVAL);
	} else if (meta_size_bytes > CFS_META_MAX_BYTES) {
		return fail(why, "metadata size above the 64 GiB maximum", -EINVAL);
	}
	/* Both halves start on an allocation unit: bounded values, no overflow. */
	meta_size_bytes = round_up(meta_size_bytes, 2 * au);
	meta_offset = round_up(CFS_SB_AREA_BYTES, au);
	data_offset = meta_offset + meta_size_bytes;
	if (data_offset > store_size_bytes || store_size_bytes - data_offset < au)
		return fail(
			why,
			"store too small for the superblocks, the metadata region and one allocation unit",
			-EINVAL);

	layout_set(sb, store_size_bytes, block_size_bytes, alloc_unit_bytes, meta_offset,
		   meta_size_bytes, data_offset);

	/* Pair assertion: what layout produces, decode must accept. */
	CFS_ASSERT(validate_geometry(sb, NULL) == 0);
	return 0;
}

int cfs_sb_layout_data_store(struct cfs_sb *sb, uint64_t store_size_bytes,
			     uint32_t block_size_bytes, uint32_t alloc_unit_bytes, const char **why)
{
	uint64_t au, data_offset;
	int ret;

	ret = layout_check(sb, store_size_bytes, &block_size_bytes, &alloc_unit_bytes, why);
	if (ret)
		return ret;
	au = alloc_unit_bytes;
	data_offset = round_up(CFS_SB_AREA_BYTES, au);
	if (store_size_bytes - data_offset < au)
		return fail(why, "store too small for the superblocks and one allocation unit",
			    -EINVAL);
	/* No metadata region: it is empty at the data region's start. */
	layout_set(sb, store_size_bytes, block_size_bytes, alloc_unit_bytes, data_offset, 0,
		   data_offset);
	sb->meta_active_half = 0;
	sb->meta_snap_length_bytes = 0;
	return 0;
}

int cfs_sb_data_store_new(const struct cfs_sb *store0, uint64_t store_size_bytes,
			  uint32_t logical_sector_bytes, uint32_t physical_sector_bytes,
			  const uint8_t uuid[CFS_UUID_BYTES], const char *label, struct cfs_sb *out,
			  const char **why)
{
	uint64_t end = store0->data_unit_count;
	uint32_t index = 0;
	int ret;

	cfs_sb_init_defaults(out);
	out->logical_sector_bytes = logical_sector_bytes;
	out->physical_sector_bytes = physical_sector_bytes;
	ret = cfs_sb_layout_data_store(out, store_size_bytes, store0->block_size_bytes,
				       store0->alloc_unit_bytes, why);
	if (ret < 0)
		return ret;
	if (store0->incompat & CFS_FEAT_INCOMPAT_POOL) {
		for (uint32_t i = 0; i < store0->store_count; i++) {
			const struct cfs_store_entry *e = &store0->stores[i];

			if (e->unit_base + e->unit_count > end)
				end = e->unit_base + e->unit_count;
			if (e->index > index)
				index = e->index;
		}
	}
	out->incompat |= CFS_FEAT_INCOMPAT_POOL;
	memcpy(out->pool_uuid, store0->uuid, CFS_UUID_BYTES);
	memcpy(out->uuid, uuid, CFS_UUID_BYTES);
	out->store_index = index + 1;
	out->unit_base = end + 1; /* one unit number apart: ranges never touch */
	if (label && cfs_sb_set_label(out, label))
		return fail(why, "label longer than 63 bytes", -EINVAL);
	ret = cfs_sb_validate(out, why);
	return ret ? -EINVAL : 0;
}

/* store0 as the first superblock of a pool: its own entry in the table. */
static void pool_of_one(struct cfs_sb *out)
{
	struct cfs_store_entry *e = &out->stores[0];

	out->incompat |= CFS_FEAT_INCOMPAT_POOL;
	memcpy(out->pool_uuid, out->uuid, CFS_UUID_BYTES);
	out->store_index = 0;
	out->unit_base = 0;
	out->store_count = 1;
	memset(e, 0, sizeof(*e));
	memcpy(e->uuid, out->uuid, CFS_UUID_BYTES);
	e->state = CFS_STORE_ACTIVE;
	e->unit_count = out->data_unit_count;
	memcpy(e->label, out->label, CFS_LABEL_BYTES);
}

int cfs_sb_table_add(const struct cfs_sb *store0, const struct cfs_sb *add, struct cfs_sb *out,
		     const char **why)
{
	struct cfs_store_entry *e;

	*out = *store0;
	if (!(out->incompat & CFS_FEAT_INCOMPAT_POOL))
		pool_of_one(out);
	if (out->store_count >= CFS_POOL_STORES_MAX)
		return fail(why, "the table of stores is full", -ENOSPC);
	e = &out->stores[out->store_count++];
	memset(e, 0, sizeof(*e));
	memcpy(e->uuid, add->uuid, CFS_UUID_BYTES);
	e->index = add->store_index;
	e->state = CFS_STORE_ACTIVE;
	e->unit_base = add->unit_base;
	e->unit_count = add->data_unit_count;
	memcpy(e->label, add->label, CFS_LABEL_BYTES);
	out->generation = store0->generation + 1;
	return cfs_sb_validate(out, why) ? -EINVAL : 0;
}

/* The table position of store `index` in sb, or -ENOENT (-EINVAL: index 0). */
static int table_slot(const struct cfs_sb *sb, uint32_t index)
{
	if (index == 0)
		return -EINVAL;
	if (!(sb->incompat & CFS_FEAT_INCOMPAT_POOL))
		return -ENOENT;
	for (uint32_t i = 1; i < sb->store_count; i++)
		if (sb->stores[i].index == index)
			return (int)i;
	return -ENOENT;
}

int cfs_sb_table_set_state(const struct cfs_sb *store0, uint32_t index, uint32_t state,
			   struct cfs_sb *out)
{
	int slot = table_slot(store0, index);

	if (slot < 0)
		return slot;
	*out = *store0;
	out->stores[slot].state = state;
	out->generation = store0->generation + 1;
	return 0;
}

int cfs_sb_table_remove(const struct cfs_sb *store0, uint32_t index, struct cfs_sb *out)
{
	int slot = table_slot(store0, index);

	if (slot < 0)
		return slot;
	*out = *store0;
	memmove(&out->stores[slot], &out->stores[slot + 1],
		(out->store_count - (uint32_t)slot - 1) * sizeof(out->stores[0]));
	out->store_count--;
	memset(&out->stores[out->store_count], 0, sizeof(out->stores[0]));
	out->generation = store0->generation + 1;
	return 0;
}

int cfs_sb_set_label(struct cfs_sb *sb, const char *label)
{
	size_t length = strlen(label);

	if (length >= CFS_LABEL_BYTES)
		return -ENAMETOOLONG;
	memset(sb->label, 0, sizeof(sb->label));
	memcpy(sb->label, label, length);
	return 0;
}

/* ---- superblock: encode / decode ---------------------------------------- */

uint64_t cfs_sb_checksum(const void *block)
{
	struct cfs_dsb d;

	memcpy(&d, block, sizeof(d));
	d.checksum = 0;
	return XXH3_64bits(&d, sizeof(d));
}

void cfs_sb_encode(const struct cfs_sb *sb, void *block)
{
	struct cfs_dsb d;

	CFS_ASSERT(cfs_sb_validate(sb, NULL) == 0);
	CFS_ASSERT(sb->version == CFS_FORMAT_VERSION);
	CFS_ASSERT((sb->ro_compat & ~CFS_FEAT_RO_COMPAT_SUPPORTED) == 0);
	CFS_ASSERT((sb->incompat & ~CFS_FEAT_INCOMPAT_SUPPORTED) == 0);

	memset(&d, 0, sizeof(d));
	d.magic = htole64(CFS_SB_MAGIC);
	d.version = htole32(sb->version);
	d.block_size_bytes = htole32(sb->block_size_bytes);
	d.compat = htole64(sb->compat);
	d.ro_compat = htole64(sb->ro_compat);
	d.incompat = htole64(sb->incompat);
	d.flags = htole64(sb->flags);
	d.generation = htole64(sb->generation);
	memcpy(d.uuid, sb->uuid, sizeof(d.uuid));
	memcpy(d.label, sb->label, sizeof(d.label));
	d.ctime_ns = htole64(sb->ctime_ns);
	d.wtime_ns = htole64(sb->wtime_ns);
	d.store_size_bytes = htole64(sb->store_size_bytes);
	d.logical_sector_bytes = htole32(sb->logical_sector_bytes);
	d.physical_sector_bytes = htole32(sb->physical_sector_bytes);
	d.alloc_unit_bytes = htole32(sb->alloc_unit_bytes);
	d.meta_active_half = htole32(sb->meta_active_half);
	d.meta_offset_bytes = htole64(sb->meta_offset_bytes);
	d.meta_size_bytes = htole64(sb->meta_size_bytes);
	d.meta_snap_length_bytes = htole64(sb->meta_snap_length_bytes);
	d.log_seq_start = htole64(sb->log_seq_start);
	d.data_offset_bytes = htole64(sb->data_offset_bytes);
	d.data_size_bytes = htole64(sb->data_size_bytes);
	d.data_unit_count = htole64(sb->data_unit_count);
	if (sb->incompat & CFS_FEAT_INCOMPAT_POOL) {
		memcpy(d.pool_uuid, sb->pool_uuid, sizeof(d.pool_uuid));
		d.store_index = htole32(sb->store_index);
		d.store_count = htole32(sb->store_count);
		d.unit_base = htole64(sb->unit_base);
		for (uint32_t i = 0; i < sb->store_count; i++) {
			const struct cfs_store_entry *e = &sb->stores[i];
			struct cfs_dstore *o = &d.stores[i];

			memcpy(o->uuid, e->uuid, sizeof(o->uuid));
			o->index = htole32(e->index);
			o->state = htole32(e->state);
			o->unit_base = htole64(e->unit_base);
			o->unit_count = htole64(e->unit_count);
			memcpy(o->label, e->label, sizeof(o->label));
		}
	}
	d.checksum = 0;
	d.checksum = htole64(XXH3_64bits(&d, sizeof(d)));
	memcpy(block, &d, sizeof(d));
}

/*
 * Decode with the integrity result kept apart: *sealed says the copy has our
 * magic and a good checksum (it was written whole by some chunkfs program),
 * which is what cfs_sb_pick() orders copies by.
 */
static int sb_decode(const void *block, struct cfs_sb *sb, const char **why, bool *sealed)
{
	struct cfs_dsb d;
	struct cfs_sb s;
	int ret;

	*sealed = false;
	memcpy(&d, block, sizeof(d));
	if (le64toh(d.magic) != CFS_SB_MAGIC)
		return fail(why, "bad superblock magic: not a chunkfs superblock", -EINVAL);
	if (le64toh(d.checksum) != cfs_sb_checksum(block))
		return fail(why, "bad superblock checksum", -EUCLEAN);
	*sealed = true;

	memset(&s, 0, sizeof(s));
	s.version = le32toh(d.version);
	s.block_size_bytes = le32toh(d.block_size_bytes);
	s.compat = le64toh(d.compat);
	s.ro_compat = le64toh(d.ro_compat);
	s.incompat = le64toh(d.incompat);
	s.flags = le64toh(d.flags);
	s.generation = le64toh(d.generation);
	memcpy(s.uuid, d.uuid, sizeof(s.uuid));
	memcpy(s.label, d.label, sizeof(s.label));
	s.ctime_ns = le64toh(d.ctime_ns);
	s.wtime_ns = le64toh(d.wtime_ns);
	s.store_size_bytes = le64toh(d.store_size_bytes);
	s.logical_sector_bytes = le32toh(d.logical_sector_bytes);
	s.physical_sector_bytes = le32toh(d.physical_sector_bytes);
	s.alloc_unit_bytes = le32toh(d.alloc_unit_bytes);
	s.meta_active_half = le32toh(d.meta_active_half);
	s.meta_offset_bytes = le64toh(d.meta_offset_bytes);
	s.meta_size_bytes = le64toh(d.meta_size_bytes);
	s.meta_snap_length_bytes = le64toh(d.meta_snap_length_bytes);
	s.log_seq_start = le64toh(d.log_seq_start);
	s.data_offset_bytes = le64toh(d.data_offset_bytes);
	s.data_size_bytes = le64toh(d.data_size_bytes);
	s.data_unit_count = le64toh(d.data_unit_count);
	if (s.incompat & CFS_FEAT_INCOMPAT_POOL) {
		memcpy(s.pool_uuid, d.pool_uuid, sizeof(s.pool_uuid));
		s.store_index = le32toh(d.store_index);
		s.store_count = le32toh(d.store_count);
		s.unit_base = le64toh(d.unit_base);
		if (s.store_count > CFS_POOL_STORES_MAX)
			s.store_count = CFS_POOL_STORES_MAX + 1; /* refused by validate */
		for (uint32_t i = 0; i < s.store_count && i < CFS_POOL_STORES_MAX; i++) {
			struct cfs_store_entry *e = &s.stores[i];
			const struct cfs_dstore *o = &d.stores[i];

			memcpy(e->uuid, o->uuid, sizeof(e->uuid));
			e->index = le32toh(o->index);
			e->state = le32toh(o->state);
			e->unit_base = le64toh(o->unit_base);
			e->unit_count = le64toh(o->unit_count);
			memcpy(e->label, o->label, sizeof(e->label));
		}
	}
	*sb = s;

	if (s.version != CFS_FORMAT_VERSION)
		return fail(why, "unsupported chunkfs format version", -EOPNOTSUPP);
	if (s.incompat & ~CFS_FEAT_INCOMPAT_SUPPORTED)
		return fail(why,
			    "unsupported incompatible features (a newer chunkfs wrote this store)",
			    -EOPNOTSUPP);
	ret = cfs_sb_validate(&s, why);
	if (ret)
		return ret;
	if (s.ro_compat & ~CFS_FEAT_RO_COMPAT_SUPPORTED) {
		if (why)
			*why = "unknown read-only-compatible features: the store may only be read";
		return CFS_SB_RO_REQUIRED;
	}
	return 0;
}

int cfs_sb_decode(const void *block, struct cfs_sb *sb, const char **why)
{
	bool sealed;

	return sb_decode(block, sb, why, &sealed);
}

int cfs_sb_pick(const void *slot0, const void *slot1, struct cfs_sb *out, int *slot,
		const char **why)
{
	const void *blocks[CFS_SB_SLOTS] = {slot0, slot1};
	struct cfs_sb sb[CFS_SB_SLOTS];
	const char *reason[CFS_SB_SLOTS];
	bool cand[CFS_SB_SLOTS];
	int ret[CFS_SB_SLOTS];
	unsigned int s, newest, other;

	for (s = 0; s < CFS_SB_SLOTS; s++) {
		reason[s] = NULL;
		ret[s] = sb_decode(blocks[s], &sb[s], &reason[s], &cand[s]);
		if (cand[s] && cfs_sb_slot(sb[s].generation) != s) {
			/* A misdirected or misplaced write: gen N lives in slot N % 2. */
			cand[s] = false;
			ret[s] = -EUCLEAN;
			reason[s] = "superblock generation does not belong in this slot";
		}
	}

	if (!cand[0] && !cand[1]) {
		if (ret[0] == -EINVAL && ret[1] == -EINVAL)
			return fail(why, "no chunkfs superblock in either slot (bad magic)",
				    -EINVAL);
		/* Report the copy that at least had our magic. */
		s = ret[0] != -EINVAL ? 0 : 1;
		return fail(why, reason[s], ret[s]);
	}
	if (cand[0] && cand[1] && memcmp(sb[0].uuid, sb[1].uuid, CFS_UUID_BYTES) != 0)
		return fail(
			why,
			"the two superblock copies belong to different filesystems (interrupted mkchunkfs?)",
			-EUCLEAN);

	if (cand[0] && cand[1])
		newest = sb[1].generation > sb[0].generation ? 1 : 0;
	else
		newest = cand[0] ? 0 : 1;
	other = 1 - newest;

	if (ret[newest] == -EOPNOTSUPP)
		/* Never fall back past a copy a newer program wrote. */
		return fail(why, reason[newest], ret[newest]);
	if (ret[newest] < 0) {
		if (!cand[other] || ret[other] < 0)
			return fail(why, reason[newest], ret[newest]);
		/* The newest copy verified but is inconsistent: use the older one. */
		*out = sb[other];
		if (slot)
			*slot = (int)other;
		if (why)
			*why = reason[newest];
		return ret[other];
	}

	*out = sb[newest];
	if (slot)
		*slot = (int)newest;
	if (why)
		*why = ret[other] < 0 ? reason[other] : NULL;
	return ret[newest];
}

int cfs_sb_check_mountable(const struct cfs_sb *sb, const char **why)
{
	int ret;

	if (sb->flags & CFS_SB_INPROGRESS)
		return fail(
			why,
			"mkchunkfs was interrupted before it finished (mkfs-in-progress flag set): run mkchunkfs again",
			-EUCLEAN);
	if (sb->version != CFS_FORMAT_VERSION)
		return fail(why, "unsupported chunkfs format version", -EOPNOTSUPP);
	if (sb->incompat & ~CFS_FEAT_INCOMPAT_SUPPORTED)
		return fail(why,
			    "unsupported incompatible features (a newer chunkfs wrote this store)",
			    -EOPNOTSUPP);
	ret = cfs_sb_validate(sb, why);
	if (ret)
		return ret;
	if (sb->ro_compat & ~CFS_FEAT_RO_COMPAT_SUPPORTED) {
		if (why)
			*why = "unknown read-only-compatible features: the store may only be read";
		return CFS_SB_RO_REQUIRED;
	}
	return 0;
}

/* ---- superblock: metadata halves ---------------------------------------- */

uint64_t cfs_sb_half_size_bytes(const struct cfs_sb *sb)
{
	return sb->meta_size_bytes / 2;
}

uint64_t cfs_sb_half_offset_bytes(const struct cfs_sb *sb, unsigned int half)
{
	CFS_ASSERT(half <= 1);
	return sb->meta_offset_bytes + half * cfs_sb_half_size_bytes(sb);
}

uint64_t cfs_sb_log_offset_bytes(const struct cfs_sb *sb)
{
	uint64_t start = round_up(sb->meta_snap_length_bytes, sb->block_size_bytes);

	CFS_ASSERT(start <= cfs_sb_half_size_bytes(sb));
	return cfs_sb_half_offset_bytes(sb, sb->meta_active_half) + start;
}

uint64_t cfs_sb_log_size_bytes(const struct cfs_sb *sb)
{
	return cfs_sb_half_offset_bytes(sb, sb->meta_active_half) + cfs_sb_half_size_bytes(sb) -
	       cfs_sb_log_offset_bytes(sb);
}

/* ---- superblock: summary ------------------------------------------------- */

static void print_label(FILE *f, const char *label)
{
	size_t i;

	if (!label[0]) {
		fputs("(none)", f);
		return;
	}
	fputc('"', f);
	for (i = 0; i < CFS_LABEL_BYTES && label[i]; i++) {
		unsigned char c = (unsigned char)label[i];

		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void print_flags(FILE *f, uint64_t flags)
{
	bool first = true;

	if (!flags) {
		fputs("none", f);
		return;
	}
	if (flags & CFS_SB_INPROGRESS) {
		fputs("inprogress", f);
		first = false;
	}
	if (flags & CFS_SB_CLEAN) {
		fprintf(f, "%sclean", first ? "" : ",");
		first = false;
	}
	if (flags & ~CFS_SB_FLAGS_KNOWN)
		fprintf(f, "%s0x%" PRIx64, first ? "" : ",",
			(uint64_t)(flags & ~CFS_SB_FLAGS_KNOWN));
}

/* The pool lines of cfs_sb_print (only for stores of a pool). */
static void print_pool(FILE *f, const struct cfs_sb *sb)
{
	char uuid[CFS_UUID_STR_BYTES];

	cfs_uuid_unparse(sb->pool_uuid, uuid);
	fprintf(f, "pool:            %s, store %" PRIu32 " (%s)\n", uuid, sb->store_index,
		sb->store_index ? "data only" : "holds the metadata");
	fprintf(f, "pool units:      %" PRIu64 " to %" PRIu64 "\n", sb->unit_base,
		sb->unit_base + sb->data_unit_count - 1);
	for (uint32_t i = 0; i < sb->store_count && i < CFS_POOL_STORES_MAX; i++) {
		const struct cfs_store_entry *e = &sb->stores[i];

		cfs_uuid_unparse(e->uuid, uuid);
		fprintf(f, "store %-10" PRIu32 " ", e->index);
		print_label(f, e->label);
		fprintf(f, " %s, units %" PRIu64 " to %" PRIu64 ", %s\n", uuid, e->unit_base,
			e->unit_base + e->unit_count - 1,
			e->state == CFS_STORE_REMOVING ? "removing" : "active");
	}
}

void cfs_sb_print(FILE *f, const struct cfs_sb *sb)
{
	char uuid[CFS_UUID_STR_BYTES];
	char h1[CFS_SIZE_STR_BYTES], h2[CFS_SIZE_STR_BYTES];
	uint64_t half = cfs_sb_half_size_bytes(sb);

	cfs_uuid_unparse(sb->uuid, uuid);
	fputs("label:           ", f);
	print_label(f, sb->label);
	fputc('\n', f);
	fprintf(f, "uuid:            %s\n", uuid);
	fprintf(f, "format version:  %" PRIu32 "\n", sb->version);
	fprintf(f, "store size:      %" PRIu64 " bytes (%s)\n", sb->store_size_bytes,
		cfs_size_format(sb->store_size_bytes, h1));
	fprintf(f, "block size:      %" PRIu32 " bytes, %" PRIu64 " blocks\n", sb->block_size_bytes,
		sb->block_size_bytes ? sb->store_size_bytes / sb->block_size_bytes : 0);
	fprintf(f, "sectors:         logical %" PRIu32 " bytes, physical %" PRIu32 " bytes\n",
		sb->logical_sector_bytes, sb->physical_sector_bytes);
	fprintf(f, "alignment:       direct I/O %" PRIu32 " bytes, regions %" PRIu32 " bytes\n",
		sb->logical_sector_bytes, sb->alloc_unit_bytes);
	fprintf(f, "allocation unit: %" PRIu32 " bytes (%s)\n", sb->alloc_unit_bytes,
		cfs_size_format(sb->alloc_unit_bytes, h1));
	fprintf(f, "superblocks:     offsets 0 and %u, %u bytes each\n", CFS_SB_BLOCK_BYTES,
		CFS_SB_BLOCK_BYTES);
	if (cfs_sb_is_data_store(sb)) {
		fputs("metadata:        none (a data store: store 0 of its pool has it)\n", f);
	} else {
		fprintf(f,
			"metadata:        offset %" PRIu64 ", size %" PRIu64
			" bytes (%s), 2 halves of %s\n",
			sb->meta_offset_bytes, sb->meta_size_bytes,
			cfs_size_format(sb->meta_size_bytes, h1), cfs_size_format(half, h2));
		fprintf(f,
			"active half:     %c, snapshot %" PRIu64 " bytes, log from seq %" PRIu64
			"\n",
			sb->meta_active_half ? 'B' : 'A', sb->meta_snap_length_bytes,
			sb->log_seq_start);
	}
	fprintf(f,
		"data:            offset %" PRIu64 ", size %" PRIu64 " bytes (%s), %" PRIu64
		" units\n",
		sb->data_offset_bytes, sb->data_size_bytes,
		cfs_size_format(sb->data_size_bytes, h1), sb->data_unit_count);
	fprintf(f,
		"features:        compat 0x%" PRIx64 ", ro_compat 0x%" PRIx64
		", incompat 0x%" PRIx64 "\n",
		sb->compat, sb->ro_compat, sb->incompat);
	fputs("flags:           ", f);
	print_flags(f, sb->flags);
	fputc('\n', f);
	fprintf(f, "generation:      %" PRIu64 "\n", sb->generation);
	if (sb->incompat & CFS_FEAT_INCOMPAT_POOL)
		print_pool(f, sb);
}

/* ---- log records ---------------------------------------------------------- */

uint64_t cfs_log_seed(const uint8_t uuid[CFS_UUID_BYTES])
{
	return XXH3_64bits_withSeed(uuid, CFS_UUID_BYTES, CFS_LOG_MAGIC);
}

uint64_t cfs_log_seq_skip(const struct cfs_sb *sb)
{
	return cfs_sb_half_size_bytes(sb) / CFS_LOG_HEADER_BYTES + 1;
}

/* XXH3-64 over header (checksum field zero) + payload, without copying. */
static uint64_t record_checksum(const struct cfs_dlog_header *h, const void *payload,
				uint32_t payload_length_bytes, uint64_t seed)
{
	struct cfs_dlog_header zeroed = *h;
	XXH3_state_t state;

	zeroed.checksum = 0;
	/* A stack state must be initialised: reset_withSeed skips deriving the
	 * secret when the garbage in the slot already holds the same seed. */
	XXH3_INITSTATE(&state);
	XXH3_64bits_reset_withSeed(&state, seed);
	XXH3_64bits_update(&state, &zeroed, sizeof(zeroed));
	if (payload_length_bytes)
		XXH3_64bits_update(&state, payload, payload_length_bytes);
	return XXH3_64bits_digest(&state);
}

int cfs_log_record_encode(void *buf, size_t buf_size_bytes, uint16_t type, uint16_t flags,
			  uint64_t seq, uint64_t seed, const void *payload,
			  uint32_t payload_length_bytes)
{
	struct cfs_dlog_header h;
	uint32_t record_bytes;
	uint8_t *p = buf;

	if (type == CFS_LOG_INVALID || payload_length_bytes > CFS_LOG_MAX_PAYLOAD)
		return -EINVAL;
	CFS_ASSERT(payload || payload_length_bytes == 0);
	record_bytes = cfs_log_record_bytes(payload_length_bytes);
	if (record_bytes > buf_size_bytes)
		return -ENOSPC;

	memset(&h, 0, sizeof(h));
	h.magic = htole32(CFS_LOG_MAGIC);
	h.type = htole16(type);
	h.flags = htole16(flags);
	h.payload_length_bytes = htole32(payload_length_bytes);
	h.reserved = 0;
	h.seq = htole64(seq);
	h.checksum = htole64(record_checksum(&h, payload, payload_length_bytes, seed));

	if (payload_length_bytes)
		memmove(p + CFS_LOG_HEADER_BYTES, payload, payload_length_bytes);
	memcpy(p, &h, sizeof(h));
	memset(p + CFS_LOG_HEADER_BYTES + payload_length_bytes, 0,
	       record_bytes - CFS_LOG_HEADER_BYTES - payload_length_bytes);
	return (int)record_bytes;
}

int cfs_log_record_decode(const void *buf, size_t avail_bytes, uint64_t expected_seq, uint64_t seed,
			  struct cfs_log_record *out, const char **why)
{
	const uint8_t *p = buf;
	struct cfs_dlog_header h;
	uint32_t length, record_bytes;

	if (avail_bytes < CFS_LOG_HEADER_BYTES)
		return fail(why, "no room for a record header", -EINVAL);
	memcpy(&h, p, sizeof(h));
	if (le32toh(h.magic) != CFS_LOG_MAGIC)
		return fail(why, "bad record magic", -EUCLEAN);
	length = le32toh(h.payload_length_bytes);
	if (length > CFS_LOG_MAX_PAYLOAD)
		return fail(why, "record payload longer than the maximum", -EUCLEAN);
	record_bytes = cfs_log_record_bytes(length);
	if (record_bytes > avail_bytes)
		return fail(why, "record runs past the end of the log", -EUCLEAN);
	if (le64toh(h.checksum) != record_checksum(&h, p + CFS_LOG_HEADER_BYTES, length, seed))
		return fail(why, "bad record checksum", -EUCLEAN);
	if (h.reserved != 0)
		return fail(why, "record reserved field is not zero", -EUCLEAN);
	if (le16toh(h.type) == CFS_LOG_INVALID)
		return fail(why, "record type 0 is invalid", -EUCLEAN);
	if (le64toh(h.seq) != expected_seq)
		return fail(why, "record sequence number is not the expected one", -EUCLEAN);

	out->type = le16toh(h.type);
	out->flags = le16toh(h.flags);
	out->payload_length_bytes = length;
	out->seq = expected_seq;
	out->payload = p + CFS_LOG_HEADER_BYTES;
	out->record_length_bytes = record_bytes;
	return 0;
}

int cfs_log_walk(const void *buf, size_t length_bytes, uint64_t first_seq, uint64_t seed,
		 cfs_log_walk_fn fn, void *arg, struct cfs_log_walk_result *res)
{
	const uint8_t *p = buf;
	struct cfs_log_record rec;
	const char *why = NULL;
	size_t offset = 0;
	uint64_t seq = first_seq, count = 0;
	int ret = 0;

	while (cfs_log_record_decode(p + offset, length_bytes - offset, seq, seed, &rec, &why) ==
	       0) {
		if (fn) {
			ret = fn(&rec, arg);
			if (ret) {
				why = "stopped by the caller";
				break;
			}
		}
		offset += rec.record_length_bytes;
		count++;
		seq++;
		CFS_ASSERT(offset <= length_bytes);
	}
	res->record_count = count;
	res->next_seq = seq;
	res->end_offset_bytes = offset;
	res->why = why;
	return ret;
}

/* ---- snapshots -------------------------------------------------------------- */

int cfs_snap_seal(void *buf, size_t buf_size_bytes, uint64_t body_length_bytes,
		  uint64_t record_count, uint64_t seq, uint64_t seed)
{
	struct cfs_dsnap_header h;
	XXH3_state_t state;
	uint8_t *p = buf;

	if (buf_size_bytes < CFS_SNAP_HEADER_BYTES ||
	    body_length_bytes > buf_size_bytes - CFS_SNAP_HEADER_BYTES)
		return -ENOSPC;
	memset(&h, 0, sizeof(h));
	h.magic = htole32(CFS_SNAP_MAGIC);
	h.version = htole32(CFS_SNAP_VERSION);
	h.body_length_bytes = htole64(body_length_bytes);
	h.record_count = htole64(record_count);
	h.seq = htole64(seq);
	h.checksum = 0;
	/* A stack state must be initialised: reset_withSeed skips deriving the
	 * secret when the garbage in the slot already holds the same seed. */
	XXH3_INITSTATE(&state);
	XXH3_64bits_reset_withSeed(&state, seed);
	XXH3_64bits_update(&state, &h, sizeof(h));
	if (body_length_bytes)
		XXH3_64bits_update(&state, p + CFS_SNAP_HEADER_BYTES, (size_t)body_length_bytes);
	h.checksum = htole64(XXH3_64bits_digest(&state));
	memcpy(p, &h, sizeof(h));
	return 0;
}

int cfs_snap_decode(const void *buf, size_t avail_bytes, uint64_t seed, struct cfs_snap *out,
		    const char **why)
{
	const uint8_t *p = buf;
	struct cfs_dsnap_header h, zeroed;
	struct cfs_log_walk_result walk;
	XXH3_state_t state;
	uint64_t body_length, count, checksum;
	uint32_t version;

	if (avail_bytes < sizeof(h.magic))
		return fail(why, "no room for a snapshot header", -EINVAL);
	memcpy(&h.magic, p, sizeof(h.magic));
	if (le32toh(h.magic) != CFS_SNAP_MAGIC)
		return fail(why, "bad snapshot magic: no snapshot here", -EINVAL);
	if (avail_bytes < CFS_SNAP_HEADER_BYTES)
		return fail(why, "snapshot header truncated", -EUCLEAN);
	memcpy(&h, p, sizeof(h));
	body_length = le64toh(h.body_length_bytes);
	count = le64toh(h.record_count);
	if (body_length > avail_bytes - CFS_SNAP_HEADER_BYTES)
		return fail(why, "snapshot body runs past the end of the snapshot", -EUCLEAN);

	zeroed = h;
	zeroed.checksum = 0;
	/* A stack state must be initialised: reset_withSeed skips deriving the
	 * secret when the garbage in the slot already holds the same seed. */
	XXH3_INITSTATE(&state);
	XXH3_64bits_reset_withSeed(&state, seed);
	XXH3_64bits_update(&state, &zeroed, sizeof(zeroed));
	if (body_length)
		XXH3_64bits_update(&state, p + CFS_SNAP_HEADER_BYTES, (size_t)body_length);
	checksum = XXH3_64bits_digest(&state);
	if (le64toh(h.checksum) != checksum)
		return fail(why, "bad snapshot checksum", -EUCLEAN);

	version = le32toh(h.version);
	if (version > CFS_SNAP_VERSION)
		return fail(why, "unsupported snapshot version (a newer chunkfs wrote it)",
			    -EOPNOTSUPP);
	if (version != CFS_SNAP_VERSION)
		return fail(why, "bad snapshot version", -EUCLEAN);
	if (h.reserved[0] || h.reserved[1] || h.reserved[2])
		return fail(why, "snapshot reserved fields are not zero", -EUCLEAN);
	if (le64toh(h.seq) < CFS_LOG_SEQ_FIRST)
		return fail(why, "snapshot sequence number is zero", -EUCLEAN);

	cfs_log_walk(p + CFS_SNAP_HEADER_BYTES, (size_t)body_length, 0, seed, NULL, NULL, &walk);
	if (walk.record_count != count || walk.end_offset_bytes != body_length)
		return fail(why, "snapshot body does not hold exactly its records", -EUCLEAN);

	out->seq = le64toh(h.seq);
	out->record_count = count;
	out->body_length_bytes = body_length;
	out->length_bytes = CFS_SNAP_HEADER_BYTES + body_length;
	out->body = p + CFS_SNAP_HEADER_BYTES;
	return 0;
}

/* ---- uuid ------------------------------------------------------------------ */

static int read_urandom(uint8_t *buf, size_t length)
{
	size_t done = 0;
	ssize_t n;
	int fd, ret = 0;

	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (done < length) {
		n = read(fd, buf + done, length - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			break;
		}
		done += (size_t)n;
	}
	close(fd);
	return ret;
}

int cfs_uuid_generate(uint8_t uuid[CFS_UUID_BYTES])
{
	size_t done = 0;
	ssize_t n;
	int ret;

	while (done < CFS_UUID_BYTES) {
		n = getrandom(uuid + done, CFS_UUID_BYTES - done, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == ENOSYS) {
			ret = read_urandom(uuid, CFS_UUID_BYTES);
			if (ret)
				return ret;
			done = CFS_UUID_BYTES;
			break;
		}
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40); /* version 4: random */
	uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	return 0;
}

void cfs_uuid_unparse(const uint8_t uuid[CFS_UUID_BYTES], char out[CFS_UUID_STR_BYTES])
{
	static const char hex[] = "0123456789abcdef";
	size_t i, o = 0;

	for (i = 0; i < CFS_UUID_BYTES; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[uuid[i] >> 4];
		out[o++] = hex[uuid[i] & 0xf];
	}
	out[o] = '\0';
	CFS_ASSERT(o == CFS_UUID_STR_BYTES - 1);
}

int cfs_uuid_parse(const char *s, uint8_t uuid[CFS_UUID_BYTES])
{
	uint8_t tmp[CFS_UUID_BYTES];
	size_t i, o = 0;
	int hi, lo;

	for (i = 0; i < CFS_UUID_STR_BYTES - 1; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return -EINVAL;
			continue;
		}
		hi = cfs_hex_value(s[i]);
		if (hi < 0)
			return -EINVAL;
		i++;
		lo = cfs_hex_value(s[i]);
		if (lo < 0)
			return -EINVAL;
		tmp[o++] = (uint8_t)(hi << 4 | lo);
	}
	if (s[i] != '\0')
		return -EINVAL;
	CFS_ASSERT(o == CFS_UUID_BYTES);
	memcpy(uuid, tmp, sizeof(tmp));
	return 0;
}

bool cfs_uuid_is_null(const uint8_t uuid[CFS_UUID_BYTES])
{
	size_t i;

	for (i = 0; i < CFS_UUID_BYTES; i++)
		if (uuid[i])
			return false;
	return true;
}

/* ---- sizes ------------------------------------------------------------------ */

int cfs_parse_size(const char *s, uint64_t *out_bytes)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	const char *p = s;

	if (!s || !isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		unsigned int d = (unsigned int)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	/* one suffix per line */
	/* clang-format off */
	switch (*p) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	case 't':
	case 'T':
		shift = 40;
		break;
	case 'p':
	case 'P':
		shift = 50;
		break;
	default:
		break;
	}
	/* clang-format on */
	if (shift) {
		p++;
		if (p[0] == 'i' && p[1] == 'B')
			p += 2;
		else if (p[0] == 'B')
			p++;
	} else if (p[0] == 'B') {
		p++;
	}
	if (*p != '\0')
		return -EINVAL;
	if (v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out_bytes = v << shift;
	return 0;
}

char *cfs_size_format(uint64_t bytes, char buf[CFS_SIZE_STR_BYTES])
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	unsigned int u = 0, shift;
	uint64_t whole, rem, mask;
	unsigned int d1, d2;

	while (u + 1 < sizeof(units) / sizeof(units[0]) && bytes >> ((u + 1) * 10))
		u++;
	shift = u * 10;
	whole = bytes >> shift;
	mask = shift ? (1ull << shift) - 1 : 0;
	rem = bytes & mask;
	if (!rem) {
		snprintf(buf, CFS_SIZE_STR_BYTES, "%" PRIu64 " %s", whole, units[u]);
		return buf;
	}
	/* Two decimals, truncated, by long division: rem < 2^60, rem * 10 fits. */
	rem *= 10;
	d1 = (unsigned int)(rem >> shift);
	rem = (rem & mask) * 10;
	d2 = (unsigned int)(rem >> shift);
	snprintf(buf, CFS_SIZE_STR_BYTES, "%" PRIu64 ".%u%u %s", whole, d1, d2, units[u]);
	return buf;
}
