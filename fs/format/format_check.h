/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * format_check.h — compile-time pins of every on-disk size and offset
 * (the xfs_ondisk.h idea). Included by fs/format/format.c only.
 *
 * If one of these fires, the on-disk format changed: that needs a new
 * feature bit or CFS_FORMAT_VERSION and an update of fs/format/FORMAT.md, never
 * just a new number here. This file holds no code and no runtime checks.
 */
#ifndef CFS_FORMAT_CHECK_H
#define CFS_FORMAT_CHECK_H

#include <stddef.h>

/* The format's constants, structures and size checks are aligned by hand as
 * tables, to be read against fs/format/FORMAT.md. */
/* clang-format off */

#include "fs/format/format.h"

#define CFS_CHECK_SIZE(type, size)					\
	_Static_assert(sizeof(type) == (size), "sizeof(" #type ") != " #size)
#define CFS_CHECK_OFFSET(type, member, offset)				\
	_Static_assert(offsetof(type, member) == (offset),		\
		       "offsetof(" #type ", " #member ") != " #offset)

/* superblock */
CFS_CHECK_SIZE(struct cfs_dsb, 4096);
CFS_CHECK_OFFSET(struct cfs_dsb, magic, 0);
CFS_CHECK_OFFSET(struct cfs_dsb, version, 8);
CFS_CHECK_OFFSET(struct cfs_dsb, block_size_bytes, 12);
CFS_CHECK_OFFSET(struct cfs_dsb, compat, 16);
CFS_CHECK_OFFSET(struct cfs_dsb, ro_compat, 24);
CFS_CHECK_OFFSET(struct cfs_dsb, incompat, 32);
CFS_CHECK_OFFSET(struct cfs_dsb, flags, 40);
CFS_CHECK_OFFSET(struct cfs_dsb, generation, 48);
CFS_CHECK_OFFSET(struct cfs_dsb, uuid, 56);
CFS_CHECK_OFFSET(struct cfs_dsb, label, 72);
CFS_CHECK_OFFSET(struct cfs_dsb, ctime_ns, 136);
CFS_CHECK_OFFSET(struct cfs_dsb, wtime_ns, 144);
CFS_CHECK_OFFSET(struct cfs_dsb, store_size_bytes, 152);
CFS_CHECK_OFFSET(struct cfs_dsb, logical_sector_bytes, 160);
CFS_CHECK_OFFSET(struct cfs_dsb, physical_sector_bytes, 164);
CFS_CHECK_OFFSET(struct cfs_dsb, alloc_unit_bytes, 168);
CFS_CHECK_OFFSET(struct cfs_dsb, meta_active_half, 172);
CFS_CHECK_OFFSET(struct cfs_dsb, meta_offset_bytes, 176);
CFS_CHECK_OFFSET(struct cfs_dsb, meta_size_bytes, 184);
CFS_CHECK_OFFSET(struct cfs_dsb, meta_snap_length_bytes, 192);
CFS_CHECK_OFFSET(struct cfs_dsb, log_seq_start, 200);
CFS_CHECK_OFFSET(struct cfs_dsb, data_offset_bytes, 208);
CFS_CHECK_OFFSET(struct cfs_dsb, data_size_bytes, 216);
CFS_CHECK_OFFSET(struct cfs_dsb, data_unit_count, 224);
CFS_CHECK_OFFSET(struct cfs_dsb, pool_uuid, 232);
CFS_CHECK_OFFSET(struct cfs_dsb, store_index, 248);
CFS_CHECK_OFFSET(struct cfs_dsb, store_count, 252);
CFS_CHECK_OFFSET(struct cfs_dsb, unit_base, 256);
CFS_CHECK_OFFSET(struct cfs_dsb, reserved, 264);
CFS_CHECK_OFFSET(struct cfs_dsb, stores, CFS_POOL_TABLE_OFFSET);
CFS_CHECK_OFFSET(struct cfs_dsb, reserved2, 3840);
CFS_CHECK_OFFSET(struct cfs_dsb, checksum, 4088);

/* one entry of the table of stores */
CFS_CHECK_SIZE(struct cfs_dstore, CFS_POOL_ENTRY_BYTES);
CFS_CHECK_OFFSET(struct cfs_dstore, uuid, 0);
CFS_CHECK_OFFSET(struct cfs_dstore, index, 16);
CFS_CHECK_OFFSET(struct cfs_dstore, state, 20);
CFS_CHECK_OFFSET(struct cfs_dstore, unit_base, 24);
CFS_CHECK_OFFSET(struct cfs_dstore, unit_count, 32);
CFS_CHECK_OFFSET(struct cfs_dstore, label, 40);
_Static_assert(CFS_POOL_TABLE_OFFSET + CFS_POOL_STORES_MAX * CFS_POOL_ENTRY_BYTES <= 4088,
	       "the table of stores fits before the checksum");

/* log record header */
CFS_CHECK_SIZE(struct cfs_dlog_header, 32);
CFS_CHECK_OFFSET(struct cfs_dlog_header, magic, 0);
CFS_CHECK_OFFSET(struct cfs_dlog_header, type, 4);
CFS_CHECK_OFFSET(struct cfs_dlog_header, flags, 6);
CFS_CHECK_OFFSET(struct cfs_dlog_header, payload_length_bytes, 8);
CFS_CHECK_OFFSET(struct cfs_dlog_header, reserved, 12);
CFS_CHECK_OFFSET(struct cfs_dlog_header, seq, 16);
CFS_CHECK_OFFSET(struct cfs_dlog_header, checksum, 24);

/* snapshot header */
CFS_CHECK_SIZE(struct cfs_dsnap_header, 64);
CFS_CHECK_OFFSET(struct cfs_dsnap_header, magic, 0);
CFS_CHECK_OFFSET(struct cfs_dsnap_header, version, 4);
CFS_CHECK_OFFSET(struct cfs_dsnap_header, body_length_bytes, 8);
CFS_CHECK_OFFSET(struct cfs_dsnap_header, record_count, 16);
CFS_CHECK_OFFSET(struct cfs_dsnap_header, seq, 24);
CFS_CHECK_OFFSET(struct cfs_dsnap_header, reserved, 32);
CFS_CHECK_OFFSET(struct cfs_dsnap_header, checksum, 56);

/* relationships between constants */
_Static_assert(CFS_SB_BLOCK_BYTES == sizeof(struct cfs_dsb), "superblock block size");
_Static_assert(CFS_SB_SLOTS * CFS_SB_BLOCK_BYTES <= CFS_SB_AREA_BYTES,
	       "both superblock copies fit in the reserved area");
_Static_assert((CFS_SB_AREA_BYTES & (CFS_SB_AREA_BYTES - 1)) == 0, "sb area power of two");
_Static_assert(CFS_LOG_HEADER_BYTES == sizeof(struct cfs_dlog_header), "log header");
_Static_assert(CFS_SNAP_HEADER_BYTES == sizeof(struct cfs_dsnap_header), "snapshot header");
_Static_assert(CFS_LOG_HEADER_BYTES % CFS_LOG_ALIGN_BYTES == 0, "records stay aligned");
_Static_assert(CFS_SNAP_HEADER_BYTES % CFS_LOG_ALIGN_BYTES == 0, "snapshot body aligned");
_Static_assert(CFS_LOG_MAX_PAYLOAD % CFS_LOG_ALIGN_BYTES == 0, "max payload aligned");
_Static_assert((uint64_t)CFS_LOG_HEADER_BYTES + CFS_LOG_MAX_PAYLOAD <= UINT32_MAX,
	       "record length fits u32");
_Static_assert(CFS_BLOCK_SIZE_DEFAULT >= CFS_BLOCK_SIZE_MIN &&
	       CFS_BLOCK_SIZE_DEFAULT <= CFS_BLOCK_SIZE_MAX, "default block size in range");
_Static_assert(CFS_ALLOC_UNIT_DEFAULT % CFS_BLOCK_SIZE_MAX == 0,
	       "default alloc unit is a multiple of every block size");
_Static_assert(CFS_SECTOR_DEFAULT >= CFS_SECTOR_MIN && CFS_SECTOR_DEFAULT <= CFS_BLOCK_SIZE_DEFAULT,
	       "default sector fits the default block");
_Static_assert(CFS_META_MIN_BYTES <= CFS_META_DEFAULT_MAX_BYTES &&
	       CFS_META_DEFAULT_MAX_BYTES <= CFS_META_MAX_BYTES, "metadata bounds ordered");
_Static_assert(CFS_STORE_MIN_BYTES >= CFS_SB_AREA_BYTES + CFS_META_MIN_BYTES,
	       "a minimum store holds superblocks and minimum metadata");
_Static_assert(CFS_LABEL_BYTES == 64 && CFS_UUID_BYTES == 16, "label and uuid field sizes");

/* clang-format on */

#endif /* CFS_FORMAT_CHECK_H */
