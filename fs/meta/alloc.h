/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * alloc.h — the allocator of the data region: which allocation units are
 * free, used, or busy (freed, but the free is not durable yet).
 *
 * Units are numbered 0 .. unit_count-1 (the store unit index of the extent
 * map; the device offset is data_offset_bytes + unit * alloc_unit_bytes).
 *
 * Main invariant: every unit is in exactly one of three states and
 *     free_count + busy_count + used_count == unit_count.
 * A freed unit is BUSY until the commit that logs the free is durable
 * (cfs_alloc_commit_done()). Why: if a unit freed by file A (truncate not yet
 * committed) were handed to file B and written, a crash would replay A still
 * owning the unit, now holding B's bytes.
 *
 * The allocator is not persisted: at mount it is rebuilt from the extent maps
 * (cfs_alloc_reserve() for every mapped unit), so the log needs no
 * allocation records (CFS_LOG_ALLOC_* stay unused; see fs/format/FORMAT.md).
 *
 * What it does not do: I/O (discards are issued by the caller of
 * cfs_alloc_discard_some() through its callback), logging, or knowing files.
 *
 * Locking: one mutex inside struct cfs_alloc, taken by every function; never
 * held while calling back into the caller. Lock order (fs/DAEMON.md):
 * ns_lock -> inode locks -> allocator -> journal tail. Callers may hold inode
 * locks and ns_lock; they must not hold the journal tail lock.
 */
#ifndef CFS_ALLOC_H
#define CFS_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

/* Largest data region we accept: 2^40 units (1 EiB at 1 MiB units). Memory
 * follows the free space's fragments (a node per free range), not the units. */
#define CFS_ALLOC_UNITS_MAX (1ull << 40)

/* Busy ranges kept at most (each cfs_alloc_free() call adds one range, and
 * adjacent ones with the same sequence are merged). Beyond it, free() still
 * succeeds: the list grows; this is the initial capacity. */
#define CFS_ALLOC_BUSY_INITIAL 256u

/* "No hint": allocate after the last allocation (a rotor), so independent
 * files do not start at the same place and collide when they grow. */
#define CFS_ALLOC_NO_HINT UINT64_MAX

struct cfs_alloc;

struct cfs_alloc_stat {
	uint64_t total_units; /* unit_count */
	uint64_t free_units;  /* allocatable now */
	uint64_t busy_units;  /* freed, waiting for a durable commit */
	uint64_t used_units;  /* mapped by some file */
	uint64_t free_ranges; /* fragments of the free space (48 bytes each) */
};

/* Create an allocator for unit_count units, all FREE. 0, -EINVAL (0 units or
 * more than CFS_ALLOC_UNITS_MAX), -ENOMEM. */
int cfs_alloc_create(uint64_t unit_count, struct cfs_alloc **out);
/* Free the allocator. NULL is a no-op. */
void cfs_alloc_destroy(struct cfs_alloc *alloc);

/*
 * Allocate up to want_units contiguous units, keeping files contiguous:
 *   1. the first run of want_units free units at or after hint_unit;
 *   2. else the first such run anywhere (wrapping to unit 0);
 *   3. else the first free run at or after the hint (wrapping), shorter than
 *      wanted: the caller loops for the rest (the fall-back to non-contiguous
 *      units).
 * On success the units [*first_out, *first_out + *count_out) are USED and
 * 1 <= *count_out <= want_units. Returns:
 *   0        allocated
 *   -EAGAIN  nothing free now, but busy units exist: they become free when
 *            the pending commit is durable. The caller (namespace) must drop
 *            its locks, force a commit (cfs_journal_commit_sync()) and retry.
 *   -ENOSPC  nothing free and nothing busy
 *   -EINVAL  want_units == 0
 * hint_unit may be CFS_ALLOC_NO_HINT or any value (taken modulo the count).
 */
int cfs_alloc_get(struct cfs_alloc *alloc, uint64_t hint_unit, uint64_t want_units,
		  uint64_t *first_out, uint64_t *count_out);
/* cfs_alloc_get() that leaves keep_units: -ENOSPC unless free and busy
 * units number at least want_units + keep_units, checked in the same step
 * as the allocation (the space a pool holds back, pool.h). */
int cfs_alloc_get_keeping(struct cfs_alloc *alloc, uint64_t hint_unit, uint64_t want_units,
			  uint64_t keep_units, uint64_t *first_out, uint64_t *count_out);

/*
 * Mark the given units USED (mount: rebuilding from the extent maps; tests).
 * All or nothing: -EEXIST if any of them is not FREE (at mount that means two
 * files map the same unit: corruption), -ERANGE if the range leaves the
 * region.
 */
int cfs_alloc_reserve(struct cfs_alloc *alloc, uint64_t first_unit, uint64_t count);

/*
 * Give back USED units. seq is the sequence number of the log record that
 * records the free (its transaction's last record): the units are BUSY until
 * cfs_alloc_commit_done(seq' >= seq). seq == 0 frees at once; use it only for
 * units that no durable record ever mapped (an allocation undone on an error
 * path before it was logged) or when nothing is persisted. Freeing a unit
 * that is not USED is a bug (always-on assertion: it would hand one unit to
 * two files).
 */
void cfs_alloc_free(struct cfs_alloc *alloc, uint64_t first_unit, uint64_t count, uint64_t seq);

/*
 * Called by the committer once every record with seq <= durable_seq is
 * durable: busy ranges freed with a seq <= durable_seq become FREE. With
 * queue_discards they are also queued (neighbours merged) for
 * cfs_alloc_discard_some(): a commit, and the fsyncs waiting for it, never
 * wait for the device to discard. Returns the number of units released.
 * Only one thread (the committer) may call it at a time.
 */
uint64_t cfs_alloc_commit_done(struct cfs_alloc *alloc, uint64_t durable_seq, bool queue_discards);

/*
 * Discard up to budget_units of the queued units that are still FREE (units
 * allocated again since their release are dropped from the queue: their new
 * owner writes them). The units being discarded are taken out of the free
 * space and counted busy (an allocation meanwhile gets -EAGAIN, not
 * -ENOSPC), discard(arg, first_unit, count) is called without the allocator
 * lock, and they become FREE again. Returns the units still queued (0: the
 * queue is empty). Only the committer's thread calls it.
 */
uint64_t cfs_alloc_discard_some(struct cfs_alloc *alloc, uint64_t budget_units,
				void (*discard)(void *arg, uint64_t first_unit, uint64_t count),
				void *arg);

/* Counts for statfs and tests (consistent with each other: one lock). */
void cfs_alloc_stat(struct cfs_alloc *alloc, struct cfs_alloc_stat *st);

/* State of one unit (tests, consistency checks): CFS_ALLOC_STATE_*, or
 * -ERANGE beyond the region. */
int cfs_alloc_unit_state(struct cfs_alloc *alloc, uint64_t unit);
#define CFS_ALLOC_STATE_FREE 0
#define CFS_ALLOC_STATE_USED 1
#define CFS_ALLOC_STATE_BUSY 2

#endif /* CFS_ALLOC_H */
