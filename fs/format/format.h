/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * format.h — the chunkfs on-disk format: superblock, metadata log record
 * framing, snapshot framing, store geometry, and the small helpers that
 * mkchunkfs, the daemon and fsck share (uuid, size parsing, summary).
 *
 * This header and fs/format/format.c depend on libc and xxhash only (no libfuse, no
 * liburing), so mkchunkfs links libcfs_format.a without the daemon. The
 * format is described byte by byte in fs/format/FORMAT.md; the two must agree.
 *
 * What this module does NOT do: any I/O on the store (callers read and write
 * the blocks, with iopath), deciding what log record payloads mean (the
 * daemon owns payloads; this module only frames and checksums them), or
 * keeping state between calls. Every function is pure apart from
 * cfs_uuid_generate() (reads the kernel's random source) and cfs_sb_print().
 *
 * Conventions: int-returning functions return 0 (or >= 0) on success and
 * -errno on failure. Functions taking `const char **why` set it on failure
 * to a static, human-readable reason (never NULL after a failure; never
 * freed). `why` may be NULL when the caller does not want the reason.
 *
 * In-core vs on-disk (the xfs_sb / xfs_dsb split): struct cfs_sb holds native
 * integers and is what everybody uses; the on-disk byte image is produced and
 * checked only by cfs_sb_encode() / cfs_sb_decode(). struct cfs_dsb documents
 * the on-disk layout (little-endian fields) and is pinned with static asserts.
 */
#ifndef CFS_FORMAT_H
#define CFS_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The format's constants, structures and size checks are aligned by hand as
 * tables, to be read against fs/format/FORMAT.md. */
/* clang-format off */

/* ---- constants: superblock --------------------------------------------- */

#define CFS_SB_MAGIC		0x2153464b4e554843ull	/* "CHUNKFS!" in LE bytes */
#define CFS_FORMAT_VERSION	1u		/* bumped only for a new, incompatible layout */

#define CFS_SB_BLOCK_BYTES	4096u		/* each superblock copy, always */
#define CFS_SB_SLOTS		2u
#define CFS_SB_SLOT_OFFSET_BYTES(slot)	((uint64_t)(slot) * CFS_SB_BLOCK_BYTES)
#define CFS_SB_AREA_BYTES	(64u * 1024)	/* reserved at the start of the store */

#define CFS_LABEL_BYTES		64u		/* on-disk field; at most 63 usable */
#define CFS_UUID_BYTES		16u
#define CFS_UUID_STR_BYTES	37u		/* 36 characters + NUL */

/* Superblock flags (sb.flags). Flags never change how the store is read;
 * anything an older reader must not misread goes into a feature mask. */
#define CFS_SB_INPROGRESS	(1ull << 0)	/* mkchunkfs is writing: never mount */
#define CFS_SB_CLEAN		(1ull << 1)	/* cleanly unmounted, log fully replayable */
#define CFS_SB_FLAGS_KNOWN	(CFS_SB_INPROGRESS | CFS_SB_CLEAN)

/*
 * Feature masks (semantics as in xfs_format.h / ext4):
 *   compat     a reader that does not know the bit may read and write.
 *   ro_compat  a reader that does not know the bit may only read: decode
 *              succeeds with CFS_SB_RO_REQUIRED.
 *   incompat   a reader that does not know the bit must refuse: -EOPNOTSUPP.
 * Bits defined (fs/format/FORMAT.md 3.2):
 *   CFS_FEAT_INCOMPAT_POOL  a store of a pool of several stores
 *       (fs/POOLS.md): the pool fields are valid, store 0 carries the table
 *       of stores, other stores hold data only.
 *   CFS_FEAT_INCOMPAT_WRITTEN_RUNS  the metadata may hold EXTENT_WRITTEN_RUN
 *       records (a run of wholly written units in one record); mkchunkfs sets
 *       it on new stores. Without it the daemon writes one EXTENT_WRITTEN
 *       record per written unit, which every chunkfs reads.
 *   CFS_FEAT_INCOMPAT_PIECES  the metadata may hold EXTENT_MAP_PIECE
 *       records: a file unit mapped to a power-of-two piece of a store unit
 *       (files smaller than half a unit take less than a unit).
 */
#define CFS_FEAT_INCOMPAT_POOL		(1ull << 0)
#define CFS_FEAT_INCOMPAT_WRITTEN_RUNS	(1ull << 1)
#define CFS_FEAT_INCOMPAT_PIECES	(1ull << 2)

#define CFS_FEAT_COMPAT_SUPPORTED	0ull
#define CFS_FEAT_RO_COMPAT_SUPPORTED	0ull
#define CFS_FEAT_INCOMPAT_SUPPORTED	(CFS_FEAT_INCOMPAT_POOL | CFS_FEAT_INCOMPAT_WRITTEN_RUNS | \
					 CFS_FEAT_INCOMPAT_PIECES)

/* The smallest piece an EXTENT_MAP_PIECE record may name (and at least the
 * physical sector). */
#define CFS_PIECE_MIN_BYTES		4096u

/* Positive return of cfs_sb_decode / cfs_sb_pick / cfs_sb_check_mountable:
 * the superblock is valid but has ro_compat features this code does not
 * know; the store may be read but must never be written. */
#define CFS_SB_RO_REQUIRED	1

/* ---- constants: geometry ----------------------------------------------- */

#define CFS_BLOCK_SIZE_MIN	512u
#define CFS_BLOCK_SIZE_MAX	65536u
#define CFS_BLOCK_SIZE_DEFAULT	4096u
#define CFS_SECTOR_MIN		512u
#define CFS_SECTOR_MAX		65536u
#define CFS_SECTOR_DEFAULT	512u
#define CFS_ALLOC_UNIT_DEFAULT	(1u << 20)	/* 1 MiB */
#define CFS_ALLOC_UNIT_MAX	(1u << 30)	/* 1 GiB */
#define CFS_STORE_MIN_BYTES	(16ull << 20)	/* 16 MiB */
#define CFS_META_MIN_BYTES	(4ull << 20)	/* default clamp low, explicit minimum */
#define CFS_META_DEFAULT_MAX_BYTES (1ull << 30)	/* default clamp high */
#define CFS_META_MAX_BYTES	(64ull << 30)	/* explicit maximum */
#define CFS_META_DEFAULT_PERCENT 1u		/* default: 1% of the store */

/* ---- constants: pools -------------------------------------------------- */

#define CFS_POOL_STORES_MAX	32u		/* stores in one pool (the table) */
#define CFS_POOL_TABLE_OFFSET	512u		/* byte offset of the table in store 0's sb */
#define CFS_POOL_ENTRY_BYTES	104u		/* one table entry */
#define CFS_POOL_ADDRESS_MAX	(1ull << 62)	/* pool addresses of every unit stay below */
#define CFS_STORE_NONE		UINT32_MAX	/* "no store" (placement records) */

/* A store's state in the table. */
enum cfs_store_state {
	CFS_STORE_ACTIVE = 1,		/* data goes there */
	CFS_STORE_REMOVING = 2,		/* being emptied: no new units, then dropped */
};

/* ---- constants: metadata log and snapshot ------------------------------ */

#define CFS_LOG_MAGIC		0x474f4c43u	/* "CLOG" */
#define CFS_LOG_HEADER_BYTES	32u
#define CFS_LOG_ALIGN_BYTES	8u		/* every record padded to this */
#define CFS_LOG_MAX_PAYLOAD	(64u * 1024)	/* payload_length_bytes limit */
#define CFS_LOG_SEQ_FIRST	1ull		/* first sequence number after mkfs */

#define CFS_SNAP_MAGIC		0x504e5343u	/* "CSNP" */
#define CFS_SNAP_VERSION	1u
#define CFS_SNAP_HEADER_BYTES	64u

/*
 * Log record types. The daemon defines the payloads; this module only
 * reserves numbers. Numbers are never reused. Ranges:
 *   0            invalid (a zeroed header never decodes)
 *   1..15        framing / housekeeping
 *   16..63       namespace (inodes, directory entries)
 *   64..127      space (extents, allocation, unwritten state)
 *   128..0x7fff  reserved for later
 *   0x8000..     private / experimental, never on a released store
 */
enum cfs_log_type {
	CFS_LOG_INVALID = 0,
	CFS_LOG_NOOP = 1,		/* padding / test record, no payload meaning */
	CFS_LOG_COMMIT = 2,		/* end of a multi-record transaction */
	CFS_LOG_FS_INFO = 3,		/* daemon: first record of a snapshot */

	CFS_LOG_INODE_CREATE = 16,
	CFS_LOG_INODE_UPDATE = 17,
	CFS_LOG_INODE_DELETE = 18,
	CFS_LOG_DIRENT_ADD = 19,
	CFS_LOG_DIRENT_REMOVE = 20,
	CFS_LOG_DIRENT_RENAME = 21,
	CFS_LOG_XATTR_SET = 22,		/* daemon: user xattr (a piece of its value) */
	CFS_LOG_XATTR_REMOVE = 23,
	CFS_LOG_INODE_PLACE = 24,	/* daemon: the store a file or directory is placed on */

	CFS_LOG_EXTENT_MAP = 64,
	CFS_LOG_EXTENT_UNMAP = 65,
	CFS_LOG_EXTENT_WRITTEN = 66,	/* unwritten -> written */
	CFS_LOG_ALLOC_RESERVE = 67,
	CFS_LOG_ALLOC_FREE = 68,
	CFS_LOG_EXTENT_WRITTEN_RUN = 69, /* a run of units wholly written
					  * (incompat WRITTEN_RUNS) */
	CFS_LOG_EXTENT_MAP_PIECE = 70,	/* a file unit -> a piece of a store
					 * unit (incompat PIECES) */

	CFS_LOG_TYPE_PRIVATE = 0x8000,
};

/* ---- on-disk superblock (documentation + static asserts) ----------------
 * Every field little-endian. Only cfs_sb_encode/cfs_sb_decode touch it.
 * Offsets are pinned in fs/format/format_check.h; see fs/format/FORMAT.md for meanings. */
struct cfs_dsb {
	uint64_t	magic;			/*    0 CFS_SB_MAGIC */
	uint32_t	version;		/*    8 CFS_FORMAT_VERSION */
	uint32_t	block_size_bytes;	/*   12 */
	uint64_t	compat;			/*   16 */
	uint64_t	ro_compat;		/*   24 */
	uint64_t	incompat;		/*   32 */
	uint64_t	flags;			/*   40 CFS_SB_* */
	uint64_t	generation;		/*   48 lives in slot generation % 2 */
	uint8_t		uuid[CFS_UUID_BYTES];	/*   56 */
	uint8_t		label[CFS_LABEL_BYTES];	/*   72 NUL-padded */
	uint64_t	ctime_ns;		/*  136 format time, CLOCK_REALTIME */
	uint64_t	wtime_ns;		/*  144 time this copy was written */
	uint64_t	store_size_bytes;	/*  152 */
	uint32_t	logical_sector_bytes;	/*  160 */
	uint32_t	physical_sector_bytes;	/*  164 */
	uint32_t	alloc_unit_bytes;	/*  168 */
	uint32_t	meta_active_half;	/*  172 0 = A, 1 = B */
	uint64_t	meta_offset_bytes;	/*  176 */
	uint64_t	meta_size_bytes;	/*  184 both halves */
	uint64_t	meta_snap_length_bytes;	/*  192 snapshot (header+body) in active half */
	uint64_t	log_seq_start;		/*  200 first valid log seq after snapshot */
	uint64_t	data_offset_bytes;	/*  208 */
	uint64_t	data_size_bytes;	/*  216 data_unit_count * alloc_unit_bytes */
	uint64_t	data_unit_count;	/*  224 */
	/* Pool fields: meaningful only with CFS_FEAT_INCOMPAT_POOL (zero otherwise). */
	uint8_t		pool_uuid[CFS_UUID_BYTES]; /* 232 = uuid of the pool's store 0 */
	uint32_t	store_index;		/*  248 this store's index, 0 = holds the metadata */
	uint32_t	store_count;		/*  252 entries in stores[] (store 0 only, else 0) */
	uint64_t	unit_base;		/*  256 pool unit number of this store's unit 0 */
	uint8_t		reserved[248];		/*  264 zero */
	struct cfs_dstore {			/*  512 the table of stores (store 0 only) */
		uint8_t		uuid[CFS_UUID_BYTES];	/*  +0 the store's own uuid */
		uint32_t	index;			/* +16 */
		uint32_t	state;			/* +20 enum cfs_store_state */
		uint64_t	unit_base;		/* +24 first pool unit */
		uint64_t	unit_count;		/* +32 = its data_unit_count */
		uint8_t		label[CFS_LABEL_BYTES];	/* +40 NUL-padded */
	} stores[CFS_POOL_STORES_MAX];
	uint8_t		reserved2[248];		/* 3840 zero */
	uint64_t	checksum;		/* 4088 XXH3-64, seed 0, this field as 0 */
};

/* ---- in-core superblock ------------------------------------------------ */

/* One store of a pool, as store 0's table lists it. */
struct cfs_store_entry {
	uint8_t		uuid[CFS_UUID_BYTES];
	uint32_t	index;
	uint32_t	state;			/* enum cfs_store_state */
	uint64_t	unit_base;
	uint64_t	unit_count;
	char		label[CFS_LABEL_BYTES];	/* NUL-terminated, NUL-padded */
};

struct cfs_sb {
	uint32_t	version;
	uint64_t	compat;
	uint64_t	ro_compat;
	uint64_t	incompat;
	uint64_t	flags;
	uint64_t	generation;
	uint8_t		uuid[CFS_UUID_BYTES];
	char		label[CFS_LABEL_BYTES];	/* NUL-terminated, NUL-padded */
	uint64_t	ctime_ns;
	uint64_t	wtime_ns;

	uint32_t	block_size_bytes;
	uint64_t	store_size_bytes;
	uint32_t	logical_sector_bytes;
	uint32_t	physical_sector_bytes;
	uint32_t	alloc_unit_bytes;

	uint64_t	meta_offset_bytes;
	uint64_t	meta_size_bytes;
	uint32_t	meta_active_half;
	uint64_t	meta_snap_length_bytes;
	uint64_t	log_seq_start;

	uint64_t	data_offset_bytes;
	uint64_t	data_size_bytes;
	uint64_t	data_unit_count;

	/* Pools (CFS_FEAT_INCOMPAT_POOL in incompat; all zero without it: a
	 * store that is a pool of one, see cfs_sb_is_data_store()). */
	uint8_t		pool_uuid[CFS_UUID_BYTES];
	uint32_t	store_index;
	uint64_t	unit_base;
	uint32_t	store_count;		/* store 0: entries of stores[] */
	struct cfs_store_entry stores[CFS_POOL_STORES_MAX];
};

/* A data store of a pool: it holds no metadata region (meta_size_bytes 0). */
static inline bool cfs_sb_is_data_store(const struct cfs_sb *sb)
{
	return (sb->incompat & CFS_FEAT_INCOMPAT_POOL) && sb->store_index != 0;
}

/* ---- superblock API ---------------------------------------------------- */

/* Zero *sb and set: version, default block size / alloc unit / sectors,
 * log_seq_start = CFS_LOG_SEQ_FIRST, active half 0, snapshot length
 * CFS_SNAP_HEADER_BYTES (an empty snapshot). No geometry, uuid or times. */
void cfs_sb_init_defaults(struct cfs_sb *sb);

/*
 * Compute the geometry into *sb from the store size and the parameters
 * (0 = default for block_size_bytes, alloc_unit_bytes, meta_size_bytes).
 * Reads sb->logical_sector_bytes / physical_sector_bytes (set them first,
 * e.g. from iopath's alignment discovery; cfs_sb_init_defaults gives 512).
 * Sets block size, alloc unit, store size, metadata and data regions; leaves
 * uuid, label, times, flags, generation and features alone.
 *   metadata offset = CFS_SB_AREA_BYTES rounded up to the alloc unit
 *   metadata size   = meta_size_bytes, or 1% of the store clamped to
 *                     [CFS_META_MIN_BYTES, CFS_META_DEFAULT_MAX_BYTES];
 *                     then rounded up to a multiple of 2 alloc units
 *   data            = from the end of metadata to the last whole alloc unit
 * Returns 0, or -EINVAL with *why (store too small, block size not a power
 * of two in [512, 65536], alloc unit not a power of two multiple of the block
 * size, block smaller than the logical sector, metadata size out of range,
 * no room for one data unit). On failure *sb geometry is unspecified.
 */
int cfs_sb_layout(struct cfs_sb *sb, uint64_t store_size_bytes,
		  uint32_t block_size_bytes, uint32_t alloc_unit_bytes,
		  uint64_t meta_size_bytes, const char **why);

/*
 * The geometry of a data store of a pool (fs/POOLS.md): no metadata region;
 * data starts after the superblock area, rounded up to the allocation unit.
 * Same checks and parameters as cfs_sb_layout() (block size, allocation unit
 * 0 = defaults); sets meta_size_bytes 0 and meta_offset = data offset.
 */
int cfs_sb_layout_data_store(struct cfs_sb *sb, uint64_t store_size_bytes,
			     uint32_t block_size_bytes, uint32_t alloc_unit_bytes,
			     const char **why);

/*
 * A new data store of the pool whose store 0 is *store0 (a pool, or a single
 * store about to become store 0 of one): the pool's block size and
 * allocation unit, the given sectors, the next index (one past the highest
 * in the table) and units one past every store's in the table (FORMAT.md
 * 3.4), uuid and label (NULL: none). Flags, times and generation are the
 * caller's. 0, or -EINVAL with *why (too small, label too long, ...).
 * mkchunkfs --join and `chunkfs store add` both make their store here.
 */
int cfs_sb_data_store_new(const struct cfs_sb *store0, uint64_t store_size_bytes,
			  uint32_t logical_sector_bytes, uint32_t physical_sector_bytes,
			  const uint8_t uuid[CFS_UUID_BYTES], const char *label, struct cfs_sb *out,
			  const char **why);

/*
 * Store 0's next superblock (generation + 1) with `add` (from
 * cfs_sb_data_store_new) in its table, active; a single store becomes store
 * 0 of a pool (CFS_FEAT_INCOMPAT_POOL, its own entry first). 0, -ENOSPC (the
 * table holds CFS_POOL_STORES_MAX stores), -EINVAL with *why (the result
 * does not validate: a label in use, ...).
 */
int cfs_sb_table_add(const struct cfs_sb *store0, const struct cfs_sb *add, struct cfs_sb *out,
		     const char **why);
/* Store 0's next superblock with store `index`'s state changed (remove:
 * dropped from the table). -ENOENT for an index not in it, -EINVAL for
 * index 0. */
int cfs_sb_table_set_state(const struct cfs_sb *store0, uint32_t index, uint32_t state,
			   struct cfs_sb *out);
int cfs_sb_table_remove(const struct cfs_sb *store0, uint32_t index, struct cfs_sb *out);

/* Copy a label in (NUL-padded). -ENAMETOOLONG above 63 bytes. */
int cfs_sb_set_label(struct cfs_sb *sb, const char *label);

/* Geometry and label consistency of an in-core superblock (not features,
 * not flags), and with CFS_FEAT_INCOMPAT_POOL the pool fields and store 0's
 * table (FORMAT.md 3.4). 0 or -EUCLEAN with *why. Used by encode (as an
 * assertion) and by decode. */
int cfs_sb_validate(const struct cfs_sb *sb, const char **why);

/*
 * Write the 4096-byte on-disk image of *sb into block (any alignment),
 * reserved bytes zero, checksum last. Aborts (CFS_ASSERT) if *sb fails
 * cfs_sb_validate() or carries ro_compat / incompat bits this code does not
 * support: a writer never writes what it does not understand. The caller
 * chooses generation and writes the block at
 * CFS_SB_SLOT_OFFSET_BYTES(cfs_sb_slot(sb->generation)).
 */
void cfs_sb_encode(const struct cfs_sb *sb, void *block);

/*
 * Decode and verify one 4096-byte superblock copy. Order of checks:
 *   bad magic                                  -> -EINVAL (not chunkfs)
 *   bad checksum                               -> -EUCLEAN
 *   version != CFS_FORMAT_VERSION              -> -EOPNOTSUPP
 *   unknown incompat bits                      -> -EOPNOTSUPP
 *   inconsistent geometry / label              -> -EUCLEAN
 *   unknown ro_compat bits                     -> CFS_SB_RO_REQUIRED (1)
 *   otherwise                                  -> 0
 * Unknown compat bits are accepted. *sb is filled whenever the checksum
 * verified (so callers can print what they refused); otherwise untouched.
 * Decode does not look at flags: readers call cfs_sb_check_mountable().
 */
int cfs_sb_decode(const void *block, struct cfs_sb *sb, const char **why);

/* The XXH3-64 checksum of a 4096-byte superblock image, with its checksum
 * field taken as zero (for tools and tests that patch images). */
uint64_t cfs_sb_checksum(const void *block);

/* Slot that generation `generation` lives in: generation % 2. */
static inline unsigned int cfs_sb_slot(uint64_t generation)
{
	return (unsigned int)(generation % CFS_SB_SLOTS);
}

/*
 * Choose between the two copies (slot0 = bytes 0..4095 of the store,
 * slot1 = bytes 4096..8191). A copy is a candidate if its magic and checksum
 * verify and its generation's parity matches its slot. The newest candidate
 * wins; then:
 *   - if it has unsupported version / incompat bits: -EOPNOTSUPP (never fall
 *     back to the older copy: a newer program wrote the newest state);
 *   - if its geometry is inconsistent, the other copy is used if fully valid;
 *   - if both copies are candidates with different uuids: -EUCLEAN (they
 *     belong to two different formats: an interrupted mkchunkfs).
 * On success returns 0 or CFS_SB_RO_REQUIRED, fills *out, sets *slot (may be
 * NULL) and sets *why to NULL if both copies were good, or to the reason the
 * other copy was rejected (the caller should log it: the store is running
 * on one superblock). On failure: -EINVAL when neither copy has the magic
 * (not a chunkfs store), else -EUCLEAN or -EOPNOTSUPP, with *why.
 */
int cfs_sb_pick(const void *slot0, const void *slot1, struct cfs_sb *out,
		int *slot, const char **why);

/*
 * What every reader (daemon, fsck, mkchunkfs' "is this formatted?") calls
 * after cfs_sb_pick(): -EUCLEAN if CFS_SB_INPROGRESS is set (mkchunkfs was
 * interrupted: reformat), -EOPNOTSUPP for unsupported version/incompat,
 * -EUCLEAN if cfs_sb_validate() fails, CFS_SB_RO_REQUIRED for unknown
 * ro_compat bits, else 0 (checked in this order).
 */
int cfs_sb_check_mountable(const struct cfs_sb *sb, const char **why);

/* Metadata half geometry: half 0 (A) is the first half of the region. */
uint64_t cfs_sb_half_size_bytes(const struct cfs_sb *sb);
uint64_t cfs_sb_half_offset_bytes(const struct cfs_sb *sb, unsigned int half);
/* Store offset where the log of the active half starts: the active half's
 * offset + meta_snap_length_bytes rounded up to the block size. */
uint64_t cfs_sb_log_offset_bytes(const struct cfs_sb *sb);
/* Bytes available to the log in the active half. */
uint64_t cfs_sb_log_size_bytes(const struct cfs_sb *sb);

/*
 * Print a human summary (label, uuid, size, blocks, sectors, alignment,
 * allocation unit, regions, features, flags, generation) to f. The format is
 * stable (golden tests compare it): change it only with the golden files.
 * Times are not printed (they differ on every run).
 */
void cfs_sb_print(FILE *f, const struct cfs_sb *sb);

/* ---- metadata log records ----------------------------------------------
 * On disk: a 32-byte header, the payload, zero padding to 8 bytes.
 *   0 magic u32 | 4 type u16 | 6 flags u16 | 8 payload_length u32 |
 *  12 reserved u32 (0) | 16 seq u64 | 24 checksum u64
 * checksum = XXH3-64 with seed cfs_log_seed(uuid) over the header (checksum
 * field as zero) followed by the payload; padding is not covered. */

/* On-disk record header (little-endian), pinned in fs/format/format_check.h. */
struct cfs_dlog_header {
	uint32_t	magic;			/*  0 CFS_LOG_MAGIC */
	uint16_t	type;			/*  4 enum cfs_log_type */
	uint16_t	flags;			/*  6 */
	uint32_t	payload_length_bytes;	/*  8 <= CFS_LOG_MAX_PAYLOAD */
	uint32_t	reserved;		/* 12 zero */
	uint64_t	seq;			/* 16 */
	uint64_t	checksum;		/* 24 */
};

/* A decoded record; payload points into the caller's buffer. */
struct cfs_log_record {
	uint16_t	type;			/* enum cfs_log_type (or newer) */
	uint16_t	flags;			/* meaning defined by the daemon */
	uint32_t	payload_length_bytes;
	uint64_t	seq;
	const void	*payload;
	uint32_t	record_length_bytes;	/* header + payload + padding */
};

/* The checksum seed for log records and snapshots of a store: XXH3-64 with
 * seed CFS_LOG_MAGIC over the 16 uuid bytes. */
uint64_t cfs_log_seed(const uint8_t uuid[CFS_UUID_BYTES]);

/* Bytes a record with this payload occupies (header + payload, padded). */
static inline uint32_t cfs_log_record_bytes(uint32_t payload_length_bytes)
{
	return (CFS_LOG_HEADER_BYTES + payload_length_bytes + CFS_LOG_ALIGN_BYTES - 1) &
	       ~(CFS_LOG_ALIGN_BYTES - 1);
}

/*
 * Frame a record into buf (any alignment). Returns the bytes written
 * (cfs_log_record_bytes(payload_length_bytes)), -EINVAL if the payload is
 * over CFS_LOG_MAX_PAYLOAD or type is CFS_LOG_INVALID, -ENOSPC if it does
 * not fit in buf_size_bytes. payload may be NULL when the length is 0.
 */
int cfs_log_record_encode(void *buf, size_t buf_size_bytes, uint16_t type,
			  uint16_t flags, uint64_t seq, uint64_t seed,
			  const void *payload, uint32_t payload_length_bytes);

/*
 * Decode the record at buf, given avail_bytes readable bytes, expecting
 * sequence number expected_seq. Returns 0 and fills *out, or:
 *   -EINVAL   fewer than CFS_LOG_HEADER_BYTES available (end of the region)
 *   -EUCLEAN  bad magic, payload over CFS_LOG_MAX_PAYLOAD, record past the
 *             end of avail_bytes, bad checksum, nonzero reserved field,
 *             type CFS_LOG_INVALID, or seq != expected_seq (checked in
 *             this order).
 * Both mean "the log ends here" during replay: a torn tail is normal.
 * *why names the reason.
 */
int cfs_log_record_decode(const void *buf, size_t avail_bytes,
			  uint64_t expected_seq, uint64_t seed,
			  struct cfs_log_record *out, const char **why);

/*
 * Sequence numbers a writer skips after an unclean shutdown (CLEAN flag not
 * set when it mounted): the most records one metadata half can hold, plus
 * one. Records the interrupted run wrote past the torn tail carry sequence
 * numbers below next_seq + this, so once the writer compacts into the other
 * half with snapshot seq = next_seq + cfs_log_seq_skip(sb), none of them can
 * ever be taken for a valid record again. See FORMAT.md, "Writer rules".
 */
uint64_t cfs_log_seq_skip(const struct cfs_sb *sb);

/* Called for each valid record by cfs_log_walk(); a nonzero return stops
 * the walk and is returned by cfs_log_walk(). */
typedef int (*cfs_log_walk_fn)(const struct cfs_log_record *rec, void *arg);

struct cfs_log_walk_result {
	uint64_t	record_count;		/* valid records seen */
	uint64_t	next_seq;		/* seq of the next record to append */
	size_t		end_offset_bytes;	/* where the valid log ends (append here) */
	const char	*why;			/* why the walk stopped */
};

/*
 * Walk the log in buf[0, length_bytes) from its first record, which must
 * carry first_seq, calling fn (may be NULL) for every valid record in
 * order, and stop at the first record that does not decode (torn tail or
 * end of buffer). Fills *res. Returns 0, or fn's nonzero return (then *res
 * describes the records before the one fn stopped at, not counting it).
 */
int cfs_log_walk(const void *buf, size_t length_bytes, uint64_t first_seq,
		 uint64_t seed, cfs_log_walk_fn fn, void *arg,
		 struct cfs_log_walk_result *res);

/* ---- snapshots ----------------------------------------------------------
 * On disk: a 64-byte header, then a body of records in log framing whose
 * seq fields are 0, 1, 2, ... (their index).
 *   0 magic u32 | 4 version u32 | 8 body_length u64 | 16 record_count u64 |
 *  24 seq u64 | 32 reserved 3 x u64 (0) | 56 checksum u64
 * checksum = XXH3-64, seed cfs_log_seed(uuid), over header (checksum field
 * as zero) + body. seq = the log sequence at which the snapshot was taken:
 * the first log record after it carries seq (== sb.log_seq_start). */

/* On-disk snapshot header (little-endian), pinned in fs/format/format_check.h. */
struct cfs_dsnap_header {
	uint32_t	magic;			/*  0 CFS_SNAP_MAGIC */
	uint32_t	version;		/*  4 CFS_SNAP_VERSION */
	uint64_t	body_length_bytes;	/*  8 */
	uint64_t	record_count;		/* 16 */
	uint64_t	seq;			/* 24 */
	uint64_t	reserved[3];		/* 32 zero */
	uint64_t	checksum;		/* 56 */
};

/* A verified snapshot; body points into the caller's buffer. */
struct cfs_snap {
	uint64_t	seq;
	uint64_t	record_count;
	uint64_t	body_length_bytes;
	uint64_t	length_bytes;		/* header + body: sb.meta_snap_length_bytes */
	const void	*body;			/* points into the caller's buffer */
};

/*
 * Seal a snapshot: the caller has framed record_count records (seq = index)
 * into buf + CFS_SNAP_HEADER_BYTES, body_length_bytes long; this writes the
 * header and checksum at buf. Returns 0, or -ENOSPC if header + body do not
 * fit in buf_size_bytes.
 */
int cfs_snap_seal(void *buf, size_t buf_size_bytes, uint64_t body_length_bytes,
		  uint64_t record_count, uint64_t seq, uint64_t seed);

/*
 * Verify the snapshot at buf (avail_bytes readable, e.g. the snapshot length
 * from the superblock): header, checksum, and that the body is exactly
 * record_count valid records with seq 0..n-1. Returns 0 and fills *out, or
 * -EINVAL (bad magic: no snapshot here), -EOPNOTSUPP (newer version),
 * -EUCLEAN (anything else), with *why. Unlike the log, a bad snapshot is
 * corruption, never a torn tail: the superblock points at it only after it
 * was written and flushed. Iterate the body with cfs_log_walk(body,
 * body_length_bytes, 0, seed, ...).
 */
int cfs_snap_decode(const void *buf, size_t avail_bytes, uint64_t seed,
		    struct cfs_snap *out, const char **why);

/* ---- helpers ----------------------------------------------------------- */

/* Random (version 4) uuid from getrandom(2). 0 or -errno. */
int cfs_uuid_generate(uint8_t uuid[CFS_UUID_BYTES]);
/* Lower-case canonical form "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx". */
void cfs_uuid_unparse(const uint8_t uuid[CFS_UUID_BYTES], char out[CFS_UUID_STR_BYTES]);
/* Parse the canonical form (either case, exactly 36 characters). 0 or -EINVAL. */
int cfs_uuid_parse(const char *s, uint8_t uuid[CFS_UUID_BYTES]);
bool cfs_uuid_is_null(const uint8_t uuid[CFS_UUID_BYTES]);

/*
 * Parse a size: decimal digits, optionally followed by one binary suffix
 * K, M, G, T, P (either case, x1024^n), optionally followed by "iB" or "B"
 * ("4k", "1M", "1MiB", "16G"). No sign, no spaces, no fractions, no hex.
 * Returns 0, -EINVAL (empty or garbage), -ERANGE (over UINT64_MAX).
 */
int cfs_parse_size(const char *s, uint64_t *out_bytes);

/*
 * Format a size for humans into buf: "512 B", "4 KiB", "1.50 GiB" (largest
 * binary unit not above the value, two decimals truncated unless exact).
 * Returns buf.
 */
#define CFS_SIZE_STR_BYTES	32u
char *cfs_size_format(uint64_t bytes, char buf[CFS_SIZE_STR_BYTES]);

/* clang-format on */

#endif /* CFS_FORMAT_H */
