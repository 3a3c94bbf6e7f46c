/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * extent.h — the per-file map: file unit index -> store unit, and the
 * written-state of every logical sector of every mapped unit. Its memory
 * grows with the file's extents (runs of units contiguous in the file and on
 * the store with one written-state), not with its units.
 *
 * Shape (extent.c has the details):
 *   - The base map: a sorted array of runs {file unit, count, store unit,
 *     NONE or ALL written}, cut into leaves of up to CFS_EXTENT_LEAF_RUNS runs
 *     under a top array. Copy-on-write: a change builds new leaves and a new
 *     top and publishes it with one atomic store, so the data path reads it
 *     without a lock. Only the leaves around a change are copied.
 *   - Unit records: a unit whose sectors are partly written, or that was
 *     written since the committer last folded it into the base, has a record
 *     (store unit, written-state word: ALL or a bitmap of sectors) in a small
 *     per-map hash table read without locks. The record names the store unit
 *     it describes, so a write completing after its unit was unmapped and the
 *     file unit re-mapped marks the old record (or nothing), never the new
 *     unit, which would expose another file's stale bytes.
 *   A sector is written if its run is ALL, or its unit's record (for the
 *   same store unit) has it. Bitmaps exist only for partly written units.
 *   - Pieces (fs/format/FORMAT.md, incompat PIECES): a file unit may map a
 *     piece of a store unit instead of a whole one: a power-of-two part
 *     [piece offset, +piece bytes) of it, holding the first piece bytes of
 *     the file unit; the rest of the file unit is a hole. A piece is a run
 *     of one unit that merges with no neighbour; its records and written
 *     state cover the piece's sectors only ("ALL" means every sector of the
 *     piece). Which files get pieces, and how a file outgrows one, is the
 *     namespace's (cfs_extent_relocate moves a unit to a bigger place).
 *
 * Written-state changes: write completions set bits (cfs_extent_mark_written,
 * any thread: atomic OR in a record; the first write into a unit of a NONE
 * run creates its record under the map's own mutex, once per unit). Bits are
 * cleared only under the inode lock (punch, truncate) by freeze-copy-swap, so
 * a completion racing a clear never loses bits outside the cleared range.
 * The committer folds records that became ALL back into the base runs when
 * it collects them (cfs_extent_collect_dirty).
 *
 * Dirty tracking for the committer: a record whose sectors became written is
 * pushed on the map's lock-free dirty stack, and the first dirtying of a clean
 * map calls the map's notify hook (the namespace queues the inode for the
 * committer). cfs_extent_collect_dirty() drains it under the inode lock.
 *
 * Lifetime without locks on the data path: every function marked
 * [lock-free] runs inside an epoch read section (fs/meta/epoch.h); replaced
 * leaves, tops, records and bitmaps are retired and freed two epochs later
 * (cfs_extent_quiesce and every change try to). The data path's I/O
 * reference on the inode (cfs_ns_io_begin) is still what keeps a store unit
 * from being reused while a write to it is in flight; the map itself no
 * longer depends on it.
 *
 * Costs (for chunkfs(8)): a run takes 32 bytes in a leaf (leaves are kept
 * at least half full when touched), a record 64 bytes plus its bitmap
 * (sectors_per_unit / 8 bytes) and about 16 bytes of hash table. Worst case,
 * every unit its own run and partly written: about 40 + 64 + 16 + bitmap
 * bytes per unit; every unit its own run, written or not: about 40.
 *
 * What this module does not do: allocation (the namespace gets units from the
 * allocator and installs them here), logging (callbacks report what changed),
 * locking of the inode (callers hold it where marked), or I/O.
 *
 * Locking summary per function: [lock-free] may run anywhere; [inode lock]
 * caller holds the owning inode's mutex (changes of the base map are also
 * serialized by the map's own mutex, which the data path takes only to create
 * a unit record).
 */
#ifndef CFS_EXTENT_H
#define CFS_EXTENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Limits. Sectors per unit: alloc unit / logical sector, at most 2^21
 * (1 GiB units at 512-byte sectors: a 256 KiB bitmap). Runs per leaf of the
 * base map. */
#define CFS_EXTENT_SECTORS_MAX (1u << 21)
#define CFS_EXTENT_LEAF_RUNS 128u

struct cfs_extent_geom {
	uint32_t unit_bytes;	    /* alloc unit, power of two */
	uint32_t sector_bytes;	    /* written-state granularity, power of two,
				     * divides unit_bytes */
	uint32_t unit_shift;	    /* log2(unit_bytes) */
	uint32_t sector_shift;	    /* log2(sector_bytes) */
	uint32_t sectors_per_unit;  /* unit_bytes / sector_bytes */
	uint64_t max_units;	    /* file units a map can address (>= twice
				     * the store's unit count) */
	uint64_t store_units;	    /* valid store unit numbers: [0, store_units) */
	uint64_t data_offset_bytes; /* device offset of store unit 0 */
};

/*
 * Fill *geom for a store: units of unit_bytes, sector granularity
 * sector_bytes, store_units units starting at data_offset_bytes. A file may
 * map twice as many units as the store has (max_units >= 2 * store_units; at
 * least 1 leaf), so filling the store with one file ends in ENOSPC, not
 * EFBIG. (max_units keeps the rounding of the earlier two-level table, a
 * multiple of about sqrt(2 * store_units), so mappings that stores written by
 * older daemons hold stay valid.) -EINVAL for non-powers of two, a sector
 * larger than the unit, or more than CFS_EXTENT_SECTORS_MAX sectors per unit.
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

/* [lock-free] Number of mapped file units, pieces included. */
uint64_t cfs_extent_mapped_units(const struct cfs_extent_map *map);
/* [lock-free] Store bytes the map holds: whole units plus pieces (st_blocks). */
uint64_t cfs_extent_mapped_bytes(const struct cfs_extent_map *map);
/* [lock-free] Number of file units mapped to pieces. */
uint64_t cfs_extent_piece_count(const struct cfs_extent_map *map);

/* Where one mapped file unit lives: the whole store unit store_unit, or the
 * piece [piece_offset_bytes, +piece_bytes) of it (piece_bytes a power of two
 * from CFS_EXTENT_PIECE_MIN to half a unit, the offset a multiple of it). */
struct cfs_extent_loc {
	uint64_t store_unit;
	uint32_t piece_offset_bytes; /* 0 for a whole unit */
	uint32_t piece_bytes;	     /* 0: the whole unit */
};
#define CFS_EXTENT_PIECE_MIN 4096u /* = the format's CFS_PIECE_MIN_BYTES */

/* Bytes of the file unit a location holds: the piece, or the unit. */
static inline uint32_t cfs_extent_loc_bytes(const struct cfs_extent_geom *geom,
					    const struct cfs_extent_loc *loc)
{
	return loc->piece_bytes ? loc->piece_bytes : geom->unit_bytes;
}

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
 * A piece ends its run at the piece's end, and the rest of its file unit is
 * a hole. Any byte alignment. 0, or -EINVAL for length 0, -EFBIG when offset_bytes is
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

/* [inode lock, or lock-free read] The store unit mapped at file_unit (a
 * piece's unit too), or -1 for a hole (also beyond max_units). */
int64_t cfs_extent_unit_get(const struct cfs_extent_map *map, uint64_t file_unit);
/* [inode lock, or lock-free read] Where file_unit lives (*loc): 0, or
 * -ENOENT for a hole. */
int cfs_extent_unit_loc(const struct cfs_extent_map *map, uint64_t file_unit,
			struct cfs_extent_loc *loc);

/* [inode lock, or lock-free read] How many file units from file_unit (at
 * most count, >= 1 for count >= 1) are all mapped or all holes; which goes to
 * *mapped. */
uint64_t cfs_extent_unit_span(const struct cfs_extent_map *map, uint64_t file_unit, uint64_t count,
			      bool *mapped);

/*
 * [inode lock] Map file units [file_unit, +count) to store units
 * [store_unit, +count), all sectors unwritten (NONE). cfs_extent_remap_units
 * first drops mappings of the range to other store units (replay of an
 * absolute record over a newer snapshot) instead of failing. All or nothing:
 * -EEXIST if any of them is mapped (to something else), -EFBIG beyond
 * max_units, -ERANGE for store units beyond the store, -ENOMEM. A file unit
 * already mapped to exactly the same store unit is left alone (replay of a
 * record the snapshot already holds must not forget its written bits); one
 * mapped to a piece of it is mapped to something else.
 */
int cfs_extent_map_units(struct cfs_extent_map *map, uint64_t file_unit, uint64_t store_unit,
			 uint64_t count);
int cfs_extent_remap_units(struct cfs_extent_map *map, uint64_t file_unit, uint64_t store_unit,
			   uint64_t count);

/*
 * [inode lock] Map file unit file_unit to the piece *loc (piece_bytes != 0),
 * all sectors unwritten, as cfs_extent_map_units maps units: -EEXIST if it
 * maps something else, left alone if it maps exactly *loc.
 * cfs_extent_remap_piece replaces another mapping instead (replay). -EINVAL
 * for a piece that is not a power of two from CFS_EXTENT_PIECE_MIN (and a
 * sector) to half a unit at a multiple of its size; -EFBIG, -ERANGE, -ENOMEM
 * as above.
 */
int cfs_extent_map_piece(struct cfs_extent_map *map, uint64_t file_unit,
			 const struct cfs_extent_loc *loc);
int cfs_extent_remap_piece(struct cfs_extent_map *map, uint64_t file_unit,
			   const struct cfs_extent_loc *loc);

/* Called for each run of unmapped units: file units [file_unit, +count) were
 * mapped to store units [store_unit, +count), or (piece_bytes != 0, count 1)
 * to that piece of store_unit. */
typedef void (*cfs_extent_unmap_fn)(void *arg, uint64_t file_unit, uint64_t store_unit,
				    uint64_t count, uint32_t piece_offset_bytes,
				    uint32_t piece_bytes);

/*
 * [inode lock] Unmap file units [file_unit, +count) (truncate down, punch of
 * whole units, delete). Holes in the range are skipped. Each physically
 * contiguous run of unmapped units is reported to fn (may be NULL) so the
 * caller can log it and return the units to the allocator (deferred while I/O
 * references exist: see the top of this file). Records are retired. Returns
 * the number of units unmapped, or -ENOMEM with nothing changed if the new
 * leaves could not be allocated (unmapping from unit 0 to the end never
 * allocates).
 */
int64_t cfs_extent_unmap(struct cfs_extent_map *map, uint64_t file_unit, uint64_t count,
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

/* A view of mapped units, valid only during the callback: file units
 * [file_unit, +unit_count) map store units [store_unit, +unit_count) and
 * share one state. A BITMAP view is always one unit, and so is a piece's. */
struct cfs_extent_unit_view {
	uint64_t file_unit;
	uint64_t store_unit;
	uint64_t unit_count; /* >= 1 */
	enum cfs_extent_ws state;
	uint32_t sector_count;	      /* sectors_per_unit; a piece's sectors */
	const _Atomic uint64_t *bits; /* BITMAP only: sector_count bits, bit i
				       * of word i/64; read with atomic loads */
	uint32_t piece_offset_bytes;  /* a piece: where in store_unit */
	uint32_t piece_bytes;	      /* 0: whole units */
};
typedef int (*cfs_extent_unit_fn)(void *arg, const struct cfs_extent_unit_view *view);

/* Copy sector_count bits of a view starting at first_sector into out (byte
 * i holds sectors first+8i .. first+8i+7, least significant bit first: the
 * on-disk order). For NONE/ALL writes zeros/ones. */
void cfs_extent_view_bits(const struct cfs_extent_unit_view *view, uint32_t first_sector,
			  uint32_t sector_count, uint8_t *out);

/*
 * [inode lock] Drain the dirty stack: for every record dirtied since the last
 * call and still the place its file unit maps (not the old place of a
 * relocation, whose state the relocation's view carried), call fn with its
 * current state (one unit per view;
 * file-unit order is NOT guaranteed). The dirty mark is cleared before the
 * state is read, so a write completing during the call dirties the record
 * again for the next collect. fn's nonzero return stops the walk; the rest
 * stay dirty. Records found wholly written are then folded into the base runs
 * (their memory is retired). Returns 0 or fn's return.
 */
int cfs_extent_collect_dirty(struct cfs_extent_map *map, cfs_extent_unit_fn fn, void *arg);

/* [lock-free] Some record's sectors became written since the last
 * cfs_extent_collect_dirty(): the next commit has written-state to log. */
bool cfs_extent_is_dirty(const struct cfs_extent_map *map);

/* [inode lock] Every mapped unit in file-unit order, as maximal runs
 * (contiguous in the file and on the store, one state) and single BITMAP
 * units (snapshot, dump, mount). 0, fn's nonzero return, or -ENOMEM. */
int cfs_extent_for_each(const struct cfs_extent_map *map, cfs_extent_unit_fn fn, void *arg);

/* How a CFS_LOG_EXTENT_WRITTEN record changes a unit's sectors. */
enum cfs_extent_ws_op {
	CFS_EXTENT_WS_OP_OR = 0,    /* set the given bits (write completions) */
	CFS_EXTENT_WS_OP_CLEAR = 1, /* clear every sector of the range */
	CFS_EXTENT_WS_OP_SET = 2,   /* the range becomes exactly the bits */
};

/*
 * [inode lock] Apply a written-state change to file_unit if, and only if, it
 * maps store_unit, whole or a piece of it (replay: a record about a mapping
 * that no longer exists is ignored; returns 0). Sectors past a piece's end
 * are ignored. bits: sector_count bits as in cfs_extent_view_bits, or NULL
 * meaning "all ones". Does not dirty the record (the change comes from the
 * log). 0, -EINVAL for a range beyond the unit, -ENOMEM.
 */
int cfs_extent_apply_ws(struct cfs_extent_map *map, uint64_t file_unit, uint64_t store_unit,
			enum cfs_extent_ws_op op, uint32_t first_sector, uint32_t sector_count,
			const uint8_t *bits);

/*
 * [inode lock] Every unit of file units [file_unit, +count) that maps store
 * unit store_unit + (its offset in the range), whole or a piece of it,
 * becomes wholly written (replay of a written run; other units are left
 * alone). Does not dirty. 0 or -ENOMEM.
 */
int cfs_extent_apply_written_run(struct cfs_extent_map *map, uint64_t file_unit,
				 uint64_t store_unit, uint64_t count);

/*
 * [inode lock] Move file units [file_unit, +count), which must all be mapped,
 * to store units [new_store_unit, +count), keeping every sector's
 * written-state (pools: a run migrates between stores). The data path sees
 * the old or the new mapping, never a mix within one lookup. The caller
 * copies the data first and guarantees that no write to the old units is in
 * flight (a completion arriving later would mark nothing: its store unit is
 * no longer mapped). 0, -ENOENT if a unit of the range is a hole, -EINVAL if
 * one is a piece (cfs_extent_relocate moves those), -ERANGE beyond the
 * store, -ENOMEM (nothing changed).
 */
int cfs_extent_move(struct cfs_extent_map *map, uint64_t file_unit, uint64_t count,
		    uint64_t new_store_unit);

/*
 * [inode lock] An online move of one unit (fs/POOLS.md), on top of
 * cfs_extent_move: file unit file_unit, mapped to store unit
 * from_store_unit, maps to_store_unit from now on, with the same
 * written-state. The caller has copied the written sectors from the old store
 * unit to the new one and kept every write away from the file unit while it
 * copied (none is in flight now). A lookup sees the old mapping or the new
 * one, and both read the same bytes. A write completion that still names
 * from_store_unit is skipped; the caller frees the old unit the way unmapped
 * units are freed (deferred while I/O references exist, busy until the
 * switch is durable). Nothing is dirtied: the caller logs the switch itself
 * (EXTENT_MAP of the new unit, then the written-state of fn's view, in one
 * transaction); fn (may be NULL) receives the new unit's view once the
 * switch is done (its return is returned). Returns 0, -ESTALE when file_unit
 * no longer maps from_store_unit as a whole unit (nothing changed), -ERANGE for to_store_unit
 * beyond the store, -ENOMEM.
 */
int cfs_extent_remap(struct cfs_extent_map *map, uint64_t file_unit, uint64_t from_store_unit,
		     uint64_t to_store_unit, cfs_extent_unit_fn fn, void *arg);

/*
 * [inode lock] A file unit outgrows its piece (or changes place): file_unit,
 * mapped to *from, maps *to from now on, which holds at least as many bytes.
 * The sectors *from held keep their written-state, the others of *to are
 * unwritten. The caller copied the written sectors to *to and kept every
 * write of the unit away meanwhile (none is in flight). A lookup sees the old
 * place or the new one, and both read the same bytes. Nothing is dirtied:
 * the caller logs the change (EXTENT_MAP or EXTENT_MAP_PIECE of *to, then the
 * written-state of fn's view, in one transaction) and frees *from as an
 * unmapped place; fn (may be NULL) receives the new view (its return is
 * returned). 0, -ESTALE when file_unit does not map exactly *from (nothing
 * changed), -EINVAL for a smaller or invalid *to, -ERANGE beyond the store,
 * -ENOMEM.
 */
int cfs_extent_relocate(struct cfs_extent_map *map, uint64_t file_unit,
			const struct cfs_extent_loc *from, const struct cfs_extent_loc *to,
			cfs_extent_unit_fn fn, void *arg);

/* Memory the map holds now, in bytes (leaves, top, records, bitmaps, hash
 * table; retired memory not yet freed included). [inode lock] */
uint64_t cfs_extent_map_bytes(const struct cfs_extent_map *map);

/*
 * [inode lock] Free retired leaves, records and bitmaps that no reader can
 * hold any more (epoch reclamation) and that the committer does not hold.
 * Returns true if something retired remains (call again later: after the
 * next collect or once the epoch moved on).
 */
bool cfs_extent_quiesce(struct cfs_extent_map *map);

#endif /* CFS_EXTENT_H */
