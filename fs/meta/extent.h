/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * extent.h — the per-file map: file unit index -> store unit, and the
 * written-state of every logical sector of every mapped unit.
 *
 * Shape: a fixed two-level table. The root (allocated on the first mapping)
 * has root_slots pointers to leaves of leaf_slots entries each; both are
 * powers of two chosen from the largest file (cfs_extent_geom_init), leaves
 * are allocated on first use and never move or shrink until the map is
 * destroyed. So the data path reads the map with atomic loads and no lock.
 *
 * A leaf entry is NULL (a hole) or points to a unit record: the mapping of
 * that file unit to one store unit plus the written-state of its sectors.
 * (Not a bare "store unit + 1, 0 = hole": the record ties the
 * written-state to one mapping instance, so a write
 * completing after its unit was unmapped and the file unit re-mapped marks
 * the old record, never the new unit, which would expose another file's
 * stale bytes.) A record's store unit never changes.
 *
 * Written-state per record: NONE (every sector reads as zeros), ALL, or a
 * bitmap of sectors (allocated only while a unit is partly written; when it
 * fills up the record switches to ALL and the bitmap is retired). Bits are
 * set with atomic OR by write completions (cfs_extent_mark_written, any
 * thread, no lock), and cleared only under the inode lock
 * (cfs_extent_mark_unwritten: punch, truncate).
 *
 * Dirty tracking for the committer: a record whose sectors became written is
 * pushed on the map's lock-free dirty stack, and the first dirtying of a clean
 * map calls the map's notify hook (the namespace queues the inode for the
 * committer). cfs_extent_collect_dirty() drains it under the inode lock.
 *
 * Lifetime of records and bitmaps without locks on the data path ("I/O
 * references"): a data-path caller raises the inode's in-flight count
 * (cfs_ns_io_begin) BEFORE looking up the map and drops it after its last
 * mark_written. Unmapped records and replaced bitmaps are retired, not freed;
 * cfs_extent_quiesce() frees them when the owner guarantees no I/O reference
 * exists (in-flight count 0, under the inode lock) and the committer is not
 * holding them (dirty). Both sides use sequentially consistent atomics, so
 * either the data path sees the unmap or the quiescer sees the reference.
 *
 * What this module does not do: allocation (the namespace gets units from the
 * allocator and installs them here), logging (callbacks report what changed),
 * locking of the inode (callers hold it where marked), or I/O.
 *
 * Locking summary per function: [lock-free] may run anywhere, with an I/O
 * reference held; [inode lock] caller holds the owning inode's mutex.
 */
#ifndef CFS_EXTENT_H
#define CFS_EXTENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Limits. Sectors per unit: alloc unit / logical sector, at most 2^21
 * (1 GiB units at 512-byte sectors: a 256 KiB bitmap). */
#define CFS_EXTENT_SECTORS_MAX (1u << 21)
#define CFS_EXTENT_LEAF_SLOTS_MIN 64u
#define CFS_EXTENT_LEAF_SLOTS_MAX (1u << 16)

struct cfs_extent_geom {
	uint32_t unit_bytes;	    /* alloc unit, power of two */
	uint32_t sector_bytes;	    /* written-state granularity, power of two,
				     * divides unit_bytes */
	uint32_t unit_shift;	    /* log2(unit_bytes) */
	uint32_t sector_shift;	    /* log2(sector_bytes) */
	uint32_t sectors_per_unit;  /* unit_bytes / sector_bytes */
	uint32_t leaf_shift;	    /* log2(leaf_slots) */
	uint64_t leaf_slots;	    /* entries per leaf */
	uint64_t root_slots;	    /* leaves per map */
	uint64_t max_units;	    /* root_slots * leaf_slots: file units a map
				     * can address (>= the store's unit count) */
	uint64_t store_units;	    /* valid store unit numbers: [0, store_units) */
	uint64_t data_offset_bytes; /* device offset of store unit 0 */
};

/*
 * Fill *geom for a store: units of unit_bytes, sector granularity
 * sector_bytes, store_units units starting at data_offset_bytes. A file may
 * map twice as many units as the store has (max_units >= 2 * store_units; at
 * least 1 leaf), so filling the store with one file ends in ENOSPC, not
 * EFBIG. Root and leaf sizes are about sqrt(2 * store_units) each, so an
 * empty map costs nothing and a full one a root of a few KiB. -EINVAL for non-powers of two, a
 * sector larger than the unit, or more than CFS_EXTENT_SECTORS_MAX sectors per unit.
 */
int cfs_extent_geom_init(struct cfs_extent_geom *geom, uint32_t unit_bytes, uint32_t sector_bytes,
			 uint64_t store_units, uint64_t data_offset_bytes);

struct cfs_extent_map;

/* Called (lock-free, from whichever thread dirtied it) when a clean map gets
 * its first dirty record since the last cfs_extent_collect_dirty(). */
typedef void (*cfs_extent_notify_fn)(void *arg);

/* Create an empty map (all holes). geom must outlive the map. notify may be
 * NULL. 0 or -ENOMEM. */
int cfs_extent_map_create(const struct cfs_extent_geom *geom, cfs_extent_notify_fn notify,
			  void *notify_arg, struct cfs_extent_map **out);
/* Free the map and every record, bitmap and leaf. The caller guarantees no
 * I/O reference and no concurrent call. NULL is a no-op. */
void cfs_extent_map_destroy(struct cfs_extent_map *map);

/* [lock-free] Number of mapped units (for st_blocks and statistics). */
uint64_t cfs_extent_mapped_units(const struct cfs_extent_map *map);

/* ---- the data path -------------------------------------------------------- */

struct cfs_extent_run {
	uint64_t offset_bytes;	      /* = the query offset */
	uint64_t length_bytes;	      /* > 0, <= the query length */
	bool mapped;		      /* false: a hole, reads as zeros */
	uint64_t store_unit;	      /* mapped: store unit holding offset_bytes */
	uint64_t device_offset_bytes; /* mapped: where offset_bytes lives on the device */
};

/*
 * [lock-free] The longest run starting at offset_bytes, at most length_bytes
 * long, that is all hole or all mapped to physically contiguous store units.
 * Any byte alignment. 0, or -EINVAL for length 0, -EFBIG when offset_bytes is
 * beyond the largest file (max_units * unit_bytes; the run is then undefined).
 * A range past max_units is reported as a hole up to the limit.
 */
int cfs_extent_lookup(const struct cfs_extent_map *map, uint64_t offset_bytes,
		      uint64_t length_bytes, struct cfs_extent_run *run);

/*
 * [lock-free] Written-state boundary: how many bytes from offset_bytes (at
 * most length_bytes) share the written-state of the sector holding
 * offset_bytes; that state goes to *written. Holes are unwritten. The run
 * ends at a sector boundary (or at offset + length). With cfs_extent_lookup()
 * this splits a read into zero-fill and device parts without locks.
 */
uint64_t cfs_extent_written_span(const struct cfs_extent_map *map, uint64_t offset_bytes,
				 uint64_t length_bytes, bool *written);

/* [lock-free] True if the sector holding offset_bytes is mapped and written
 * (the read-modify-write question: read it, or start from zeros?). */
bool cfs_extent_sector_written(const struct cfs_extent_map *map, uint64_t offset_bytes);

/*
 * [lock-free] A write of [offset_bytes, +length_bytes) to the device at
 * device_offset_bytes (from the run the write was issued for) completed:
 * set the written bits, atomic OR; mark the touched records dirty. Offset
 * and length must be multiples of the sector (assertion: the data path
 * writes whole sectors, read-modify-write included). Units that no longer
 * map the store unit the write went to are skipped (they were unmapped
 * while the write was in flight; the write landed in a retired unit).
 * Units whose bitmap fills up switch to ALL. Returns the number of sectors
 * that changed from unwritten to written (0 when all were already written),
 * or -ENOMEM if a bitmap could not be allocated (the sectors then stay
 * unwritten: the caller must fail the write, never report it as done).
 */
int cfs_extent_mark_written(struct cfs_extent_map *map, uint64_t offset_bytes,
			    uint64_t length_bytes, uint64_t device_offset_bytes);

/* ---- SEEK_DATA / SEEK_HOLE -----------------------------------------------
 * Data is "mapped AND written" at sector granularity: an fallocated but
 * never written range is a hole, as on ext4 with unwritten extents (it reads
 * as zeros). [lock-free, or inode lock for a stable answer]
 * cfs_extent_seek_data: the first data byte at or after offset_bytes and
 *   before size_bytes, -ENXIO if none.
 * cfs_extent_seek_hole: the first hole byte at or after offset_bytes; the
 *   end of the file (size_bytes) counts as a hole; -ENXIO if offset_bytes >=
 *   size_bytes.
 * Results are clamped to [offset_bytes, size_bytes].
 */
int64_t cfs_extent_seek_data(const struct cfs_extent_map *map, uint64_t offset_bytes,
			     uint64_t size_bytes);
int64_t cfs_extent_seek_hole(const struct cfs_extent_map *map, uint64_t offset_bytes,
			     uint64_t size_bytes);

/* ---- changes under the inode lock ------------------------------------------ */

/* [inode lock, or lock-free read] The store unit mapped at file_unit, or -1
 * for a hole (also beyond max_units). */
int64_t cfs_extent_unit_get(const struct cfs_extent_map *map, uint64_t file_unit);

/*
 * [inode lock] Map file units [file_unit, +count) to store units
 * [store_unit, +count), all sectors unwritten (NONE). All or nothing:
 * -EEXIST if any of them is mapped (to something else), -EFBIG beyond
 * max_units, -ERANGE for store units beyond the store, -ENOMEM. A file unit
 * already mapped to exactly the same store unit is left alone (replay of a
 * record the snapshot already holds must not forget its written bits).
 */
int cfs_extent_map_units(struct cfs_extent_map *map, uint64_t file_unit, uint64_t store_unit,
			 uint64_t count);

/* Called for each run of unmapped units: file units [file_unit, +count) were
 * mapped to store units [store_unit, +count). */
typedef void (*cfs_extent_unmap_fn)(void *arg, uint64_t file_unit, uint64_t store_unit,
				    uint64_t count);

/*
 * [inode lock] Unmap file units [file_unit, +count) (truncate down, punch of
 * whole units, delete). Holes in the range are skipped. Each physically
 * contiguous run of unmapped units is reported to fn (may be NULL) so the
 * caller can log it and return the units to the allocator (deferred while I/O
 * references exist: see the top of this file). Records are retired. Returns
 * the number of units unmapped.
 */
uint64_t cfs_extent_unmap(struct cfs_extent_map *map, uint64_t file_unit, uint64_t count,
			  cfs_extent_unmap_fn fn, void *arg);

/* Called for each mapped unit whose sectors [first_sector, +sector_count)
 * were cleared (sector indices within the unit). */
typedef void (*cfs_extent_clear_fn)(void *arg, uint64_t file_unit, uint64_t store_unit,
				    uint32_t first_sector, uint32_t sector_count);

/*
 * [inode lock] Mark the whole sectors inside [offset_bytes, +length_bytes)
 * unwritten (punch inside a unit, the tail of a truncate). Partial sectors at
 * either end are left as they are: the caller zeroes those bytes on the
 * device. Holes are skipped; fn (may be NULL) reports every mapped unit that
 * was touched so the caller can log it. 0 or -ENOMEM (a bitmap was needed to
 * clear part of an ALL unit; nothing was changed in that unit).
 */
int cfs_extent_mark_unwritten(struct cfs_extent_map *map, uint64_t offset_bytes,
			      uint64_t length_bytes, cfs_extent_clear_fn fn, void *arg);

/* ---- the written-state as data: logging, snapshots, replay ------------------ */

enum cfs_extent_ws {
	CFS_EXTENT_WS_NONE = 0,	  /* no sector written */
	CFS_EXTENT_WS_ALL = 1,	  /* every sector written */
	CFS_EXTENT_WS_BITMAP = 2, /* see bits */
};

/* A view of one mapped unit, valid only during the callback. */
struct cfs_extent_unit_view {
	uint64_t file_unit;
	uint64_t store_unit;
	enum cfs_extent_ws state;
	uint32_t sector_count;	      /* sectors_per_unit */
	const _Atomic uint64_t *bits; /* BITMAP only: sector_count bits, bit i
				       * of word i/64; read with atomic loads */
};
typedef int (*cfs_extent_unit_fn)(void *arg, const struct cfs_extent_unit_view *view);

/* Copy sector_count bits of a view starting at first_sector into out (byte
 * i holds sectors first+8i .. first+8i+7, least significant bit first: the
 * on-disk order). For NONE/ALL writes zeros/ones. */
void cfs_extent_view_bits(const struct cfs_extent_unit_view *view, uint32_t first_sector,
			  uint32_t sector_count, uint8_t *out);

/*
 * [inode lock] Drain the dirty stack: for every record dirtied since the last
 * call and still mapped, call fn with its current state (in file-unit order
 * is NOT guaranteed). The dirty mark is cleared before the state is read, so a
 * write completing during the call dirties the record again for the next
 * collect. fn's nonzero return stops the walk; the rest stay dirty. Returns 0
 * or fn's return.
 */
int cfs_extent_collect_dirty(struct cfs_extent_map *map, cfs_extent_unit_fn fn, void *arg);

/* [inode lock] Every mapped unit in file-unit order (snapshot, dump, mount). */
int cfs_extent_for_each(const struct cfs_extent_map *map, cfs_extent_unit_fn fn, void *arg);

/*
 * [inode lock] An online move (fs/POOLS.md): file unit file_unit, mapped to
 * store unit from_store_unit, maps to_store_unit from now on, with the same
 * written-state. The caller has copied the written sectors from the old
 * store unit to the new one and kept every write away from the file unit
 * while it copied (none is in flight now). One atomic slot store publishes a
 * new record for to_store_unit holding a copy of the old record's state: a
 * lookup sees the old mapping or the new one, and both read the same bytes.
 * The old record is retired as by cfs_extent_unmap(): a write completion
 * that still names from_store_unit is skipped, and a reader holding an I/O
 * reference may still read the old store unit (the caller frees it the way
 * unmapped units are freed: deferred while I/O references exist, busy until
 * the switch is durable). The new record is not dirty: the caller logs the
 * switch itself (EXTENT_MAP of the new unit, then EXTENT_WRITTEN SET of its
 * state, in one transaction); fn (may be NULL) receives the new record's view
 * for that, once the switch is done (its return is returned). Returns 0, -ESTALE when file_unit no
 * longer maps from_store_unit (unmapped or re-mapped while the caller copied: nothing changed),
 * -ERANGE for to_store_unit beyond the store, -ENOMEM.
 */
int cfs_extent_remap(struct cfs_extent_map *map, uint64_t file_unit, uint64_t from_store_unit,
		     uint64_t to_store_unit, cfs_extent_unit_fn fn, void *arg);

/* How a CFS_LOG_EXTENT_WRITTEN record changes a unit's sectors. */
enum cfs_extent_ws_op {
	CFS_EXTENT_WS_OP_OR = 0,    /* set the given bits (write completions) */
	CFS_EXTENT_WS_OP_CLEAR = 1, /* clear every sector of the range */
	CFS_EXTENT_WS_OP_SET = 2,   /* the range becomes exactly the bits */
};

/*
 * [inode lock] Apply a written-state change to file_unit if, and only if, it
 * maps store_unit (replay: a record about a mapping that no longer exists is
 * ignored; returns 0). bits: sector_count bits as in cfs_extent_view_bits,
 * or NULL meaning "all ones". Does not dirty the record (the change comes
 * from the log). 0, -EINVAL for a range beyond the unit, -ENOMEM.
 */
int cfs_extent_apply_ws(struct cfs_extent_map *map, uint64_t file_unit, uint64_t store_unit,
			enum cfs_extent_ws_op op, uint32_t first_sector, uint32_t sector_count,
			const uint8_t *bits);

/*
 * [inode lock, no I/O references] Free retired records and bitmaps that the
 * committer does not hold. Returns true if something retired remains (still
 * dirty-queued: call again after the next collect).
 */
bool cfs_extent_quiesce(struct cfs_extent_map *map);

#endif /* CFS_EXTENT_H */
