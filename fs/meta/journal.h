/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * journal.h — the metadata log: record payloads, the in-memory tail, the
 * committer thread (group commit, fsync answers, the periodic timer),
 * snapshots into the other metadata half, and replay at mount.
 *
 * Record framing and checksums are fs/format/format.h's; this module owns what the
 * payloads mean (fs/format/FORMAT.md has one table per record type). Payloads are
 * little-endian, fixed-width, versioned by record type: a new layout gets a
 * new type number, never a reinterpretation.
 *
 * Transactions: a mutation builds its records in a struct cfs_txn and
 * appends them with cfs_txn_end(), contiguously and with consecutive
 * sequence numbers. Every record of a transaction but the last carries
 * CFS_JREC_MORE; replay applies a transaction only when its last record is
 * present, so a torn tail never half-applies a rename or an unlink.
 *
 * Commit (fs/DAEMON.md): (1) capture: the namespace logs dirty written-state
 * and attributes, then the tail is cut (padded with a NOOP record to the
 * physical sector); (2) flush the device; (3) write the records; (4) flush;
 * (5) answer waiters, release busy units (discarding them). When the log of
 * the active half passes half its room, or a batch does not fit, the
 * committer writes a snapshot of the whole state into the other half and
 * flips the superblock: the in-memory state is authoritative, so a snapshot
 * also covers records that could not be appended (out of memory).
 *
 * Threads: any thread appends (tail lock, innermost in the lock order); one
 * committer thread does all metadata I/O on its own iopath queue. No caller
 * ever waits for I/O except cfs_journal_commit_sync() (ENOSPC retry, tests)
 * and cfs_journal_throttle() (a tail far beyond its limit).
 *
 * A failed metadata write makes the filesystem read-only (one log line);
 * every later commit request is answered -EROFS and mutations fail -EROFS.
 *
 * RAM mounts have a journal without a store: appends only count sequence
 * numbers, commits write nothing but still release busy units, so the
 * allocator and ENOSPC behave the same.
 */
#ifndef CFS_JOURNAL_H
#define CFS_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/format/format.h"

struct cfs_fs;
struct cfs_journal;
struct cfs_snap_builder;

/* ---- limits and defaults ----------------------------------------------------- */

#define CFS_COMMIT_INTERVAL_MS_DEFAULT 5000u
#define CFS_COMMIT_INTERVAL_MS_MAX (3600u * 1000)
/* Pending tail bytes that wake the committer early, and the hard limit at
 * which cfs_journal_throttle() makes mutating callers wait (they hold no
 * locks there). */
#define CFS_TAIL_WAKE_BYTES (1u << 20)
#define CFS_TAIL_LIMIT_BYTES (64u << 20)

/* Record header flags (struct cfs_log_record.flags). */
#define CFS_JREC_MORE 0x0001u /* the transaction continues */

/* ---- record payloads (version 1) -------------------------------------------------
 * Byte layouts are in fs/format/FORMAT.md; these are the decoded forms.
 */

/* CFS_LOG_FS_INFO: first record of every snapshot. */
struct cfs_jrec_fs_info {
	uint64_t next_ino; /* next inode number to hand out */
	uint64_t next_generation;
};

/* CFS_LOG_INODE_CREATE / CFS_LOG_INODE_UPDATE: the inode's complete
 * attributes (absolute state: replay upserts). */
struct cfs_jrec_inode {
	uint64_t ino;
	uint64_t generation;
	uint32_t mode;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint64_t rdev;
	uint64_t size_bytes;
	int64_t atime_ns;
	int64_t mtime_ns;
	int64_t ctime_ns;
	uint32_t page_size_bytes;
	uint64_t parent_ino;	/* directories: "..", else 0 */
	uint32_t target_length; /* symlink target bytes (CREATE only, else 0) */
	const char *target;
};

/* CFS_LOG_DIRENT_ADD: name in dir -> ino (upsert). */
struct cfs_jrec_dirent {
	uint64_t dir_ino;
	uint64_t ino;	 /* ADD only */
	uint64_t cookie; /* ADD only: the entry's readdir cookie */
	uint32_t mode;	 /* ADD only: type bits of ino */
	uint32_t name_length;
	const char *name;
};

/* CFS_LOG_DIRENT_RENAME: the absolute result of a rename of (src_dir,
 * src_name) to (dst_dir, dst_name). flags 0: dst_name -> src_ino, src_name
 * gone. EXCHANGE: dst_name -> src_ino and src_name -> dst_ino. */
#define CFS_JREC_RENAME_EXCHANGE 0x1u
struct cfs_jrec_rename {
	uint64_t src_dir;
	uint64_t dst_dir;
	uint64_t src_ino;
	uint64_t dst_ino;    /* EXCHANGE: the inode that was at dst */
	uint64_t src_cookie; /* EXCHANGE: cookie of src_name's new entry */
	uint64_t dst_cookie; /* cookie of dst_name's new entry */
	uint32_t src_mode;   /* type bits */
	uint32_t dst_mode;
	uint32_t flags; /* CFS_JREC_RENAME_* */
	uint32_t src_name_length;
	uint32_t dst_name_length;
	const char *src_name;
	const char *dst_name;
};

/* CFS_LOG_EXTENT_MAP: file units [file_unit, +count) -> store units
 * [store_unit, +count), unwritten. CFS_LOG_EXTENT_UNMAP: store_unit 0.
 * CFS_LOG_EXTENT_WRITTEN_RUN (stores with incompat WRITTEN_RUNS): the units
 * of the range that map store_unit + offset are wholly written. */
struct cfs_jrec_extent {
	uint64_t ino;
	uint64_t file_unit;
	uint64_t store_unit;
	uint64_t count;
};

/* CFS_LOG_EXTENT_MAP_PIECE (stores with incompat PIECES): file unit
 * file_unit -> the piece [offset_bytes, +bytes) of store unit store_unit,
 * unwritten; the rest of the file unit is a hole. */
struct cfs_jrec_piece {
	uint64_t ino;
	uint64_t file_unit;
	uint64_t store_unit;
	uint32_t offset_bytes;
	uint32_t bytes;
};

/* CFS_LOG_EXTENT_WRITTEN: written-state change of one unit's sectors
 * (op: enum cfs_extent_ws_op). bits NULL = all ones (no bitmap stored). */
struct cfs_jrec_written {
	uint64_t ino;
	uint64_t file_unit;
	uint64_t store_unit;
	uint32_t op;
	uint32_t first_sector;
	uint32_t sector_count;
	const uint8_t *bits; /* ceil(sector_count / 8) bytes or NULL */
};

/* CFS_LOG_XATTR_SET: a piece [offset, +chunk_length) of a value of
 * value_length bytes (values up to 64 KiB do not fit one record with their
 * name; the pieces of one value are one transaction). offset 0 replaces the
 * value. CFS_LOG_XATTR_REMOVE: name only. */
struct cfs_jrec_xattr {
	uint64_t ino;
	uint32_t name_length;
	uint32_t value_length;
	uint32_t offset;
	uint32_t chunk_length;
	const char *name;
	const void *chunk;
};

/* CFS_LOG_INODE_PLACE: the store a file or directory is placed on
 * (fs/POOLS.md): absolute state, replay overwrites. For a file, a store its
 * units are not all on is a move to finish; `from` is where a cancel goes
 * back to. */
#define CFS_JREC_PLACE_PAUSED 0x1u /* a move that does not run */
struct cfs_jrec_place {
	uint64_t ino;
	uint32_t store;	     /* store index, CFS_STORE_NONE = not placed */
	uint32_t from;	     /* a move's source, CFS_STORE_NONE */
	uint32_t flags;	     /* CFS_JREC_PLACE_* */
	uint64_t rate_bytes; /* a move's limit in bytes per second, 0 = none */
};

/* Largest value piece per XATTR_SET record. */
#define CFS_JREC_XATTR_CHUNK (32u * 1024)
/* Largest sector range per EXTENT_WRITTEN record with a bitmap. */
#define CFS_JREC_WRITTEN_SECTORS (32u * 1024 * 8)

/* ---- transactions --------------------------------------------------------------------- */

struct cfs_txn {
	struct cfs_journal *journal;
	uint8_t *buf; /* encoded payloads: [type u16][len u32][payload] */
	size_t used_bytes;
	size_t size_bytes;
	uint32_t record_count;
	bool failed;		 /* out of memory: the journal snapshots instead */
	uint8_t inline_buf[512]; /* most transactions need no malloc */
};

/* Start a transaction (no lock taken; cheap). */
void cfs_txn_begin(struct cfs_txn *txn, struct cfs_journal *journal);
/* Add records. Never fail: an allocation failure marks the transaction
 * failed, and cfs_txn_end() then asks the committer for a snapshot. */
void cfs_txn_fs_info(struct cfs_txn *txn, const struct cfs_jrec_fs_info *rec);
void cfs_txn_inode(struct cfs_txn *txn, uint16_t type, const struct cfs_jrec_inode *rec);
void cfs_txn_inode_delete(struct cfs_txn *txn, uint64_t ino);
void cfs_txn_dirent_add(struct cfs_txn *txn, const struct cfs_jrec_dirent *rec);
void cfs_txn_dirent_remove(struct cfs_txn *txn, uint64_t dir_ino, const char *name,
			   uint32_t name_length);
void cfs_txn_rename(struct cfs_txn *txn, const struct cfs_jrec_rename *rec);
void cfs_txn_extent(struct cfs_txn *txn, uint16_t type, const struct cfs_jrec_extent *rec);
void cfs_txn_piece(struct cfs_txn *txn, const struct cfs_jrec_piece *rec);
/* Splits ranges longer than CFS_JREC_WRITTEN_SECTORS into several records. */
void cfs_txn_written(struct cfs_txn *txn, const struct cfs_jrec_written *rec);
/* Splits the value into CFS_JREC_XATTR_CHUNK pieces. */
void cfs_txn_xattr_set(struct cfs_txn *txn, uint64_t ino, const char *name, uint32_t name_length,
		       const void *value, uint32_t value_length);
void cfs_txn_xattr_remove(struct cfs_txn *txn, uint64_t ino, const char *name,
			  uint32_t name_length);
void cfs_txn_place(struct cfs_txn *txn, const struct cfs_jrec_place *rec);
/*
 * Append every record of the transaction to the tail, contiguously, and free
 * its memory. Returns the sequence number of its last record (what
 * cfs_alloc_free() wants), or 0 for an empty transaction. Call it while
 * still holding the lock of what the records describe (records of one object
 * must reach the log in the order of its changes).
 */
uint64_t cfs_txn_end(struct cfs_txn *txn);

/* ---- what the journal asks of the state it logs ------------------------------------------
 * The journal frames, writes and replays records; what they mean is the
 * namespace's, which appends them through the transactions above. The calls
 * the other way (capture before a commit, the whole state for a snapshot,
 * each record at replay) go through this table, which mount.c fills with the
 * namespace's functions: the journal never calls the namespace by name.
 * All run on the committer thread, or at mount before it starts.
 */
struct cfs_journal_ops {
	/* Commit step (1): log the dirty written-state and attributes. */
	int (*capture)(struct cfs_fs *fs);
	/* Emit the whole state into the snapshot being built (cfs_snap_*). */
	int (*snapshot)(struct cfs_fs *fs, struct cfs_snap_builder *sb);
	/* Replay: apply one decoded record. 0, or -errno (with *why where given). */
	int (*apply_fs_info)(struct cfs_fs *fs, const struct cfs_jrec_fs_info *rec);
	int (*apply_inode)(struct cfs_fs *fs, const struct cfs_jrec_inode *rec, const char **why);
	int (*apply_inode_delete)(struct cfs_fs *fs, uint64_t ino);
	int (*apply_dirent_add)(struct cfs_fs *fs, const struct cfs_jrec_dirent *rec);
	int (*apply_dirent_remove)(struct cfs_fs *fs, const struct cfs_jrec_dirent *rec);
	int (*apply_rename)(struct cfs_fs *fs, const struct cfs_jrec_rename *rec);
	int (*apply_extent)(struct cfs_fs *fs, uint16_t type, const struct cfs_jrec_extent *rec,
			    const char **why);
	int (*apply_written)(struct cfs_fs *fs, const struct cfs_jrec_written *rec,
			     const char **why);
	int (*apply_written_run)(struct cfs_fs *fs, const struct cfs_jrec_extent *rec,
				 const char **why);
	int (*apply_piece)(struct cfs_fs *fs, const struct cfs_jrec_piece *rec, const char **why);
	int (*apply_xattr)(struct cfs_fs *fs, uint16_t type, const struct cfs_jrec_xattr *rec,
			   const char **why);
	int (*apply_place)(struct cfs_fs *fs, const struct cfs_jrec_place *rec, const char **why);
};

/* ---- lifecycle (mount.c) ----------------------------------------------------------------- */

struct cfs_journal_config {
	const struct cfs_journal_ops *ops;
	bool persist;		     /* false: RAM mount, nothing written */
	uint32_t commit_interval_ms; /* 0 = CFS_COMMIT_INTERVAL_MS_DEFAULT */
	uint64_t next_seq;	     /* seq of the next record to append */
	uint64_t log_offset_bytes;   /* persist: where the next commit writes */
};

int cfs_journal_create(struct cfs_fs *fs, const struct cfs_journal_config *cfg,
		       struct cfs_journal **out);
/* Start the committer thread. */
int cfs_journal_start(struct cfs_journal *journal);
/* Stop the committer after a last commit (its result is returned: 0 or
 * -errno); pending waiters are answered. Idempotent. */
int cfs_journal_stop(struct cfs_journal *journal);
/* Test hook (a crash): stop the committer without a last commit; waiters
 * get -ESHUTDOWN. */
void cfs_journal_abandon(struct cfs_journal *journal);
/* Free (committer must be stopped). Unanswered waiters get -ESHUTDOWN. */
void cfs_journal_destroy(struct cfs_journal *journal);

/*
 * Write a snapshot of the whole state into the other metadata half and flip
 * the superblock to it (clean: with CFS_SB_CLEAN). Used by the committer, by
 * mount (after replay, so the log starts empty) and by unmount (clean). Only
 * the committer thread may call it while the committer runs. 0 or -errno
 * (the filesystem is then read-only).
 */
int cfs_journal_snapshot(struct cfs_journal *journal, bool clean);

/* Mount: load the snapshot of the active half and replay its log (to the
 * first bad record or incomplete transaction). Sets where the next commit
 * writes and *replayed_records. 0, or -errno with *why. */
int cfs_journal_load(struct cfs_journal *journal, uint64_t *replayed_records, const char **why);

/* ---- commits ----------------------------------------------------------------------------- */

typedef void (*cfs_commit_cb)(int res, void *arg);

/*
 * Ask for a commit and get cb(res, arg) on the committer thread once every
 * change made before this call is durable (res 0), or it failed (-EIO, then
 * the filesystem is read-only; -EROFS when it already was; -ESHUTDOWN at
 * unmount). Requests that arrive while a commit runs are served together by
 * the next one. cb must not block (it replies to FUSE). Returns 0 (cb will
 * run) or -ENOMEM / -EROFS (cb will not run).
 */
int cfs_journal_commit_async(struct cfs_fs *fs, cfs_commit_cb cb, void *arg);

/*
 * As cfs_journal_commit_async, but what the writes changed and no commit has
 * captured yet (written-state, sizes, times: the namespace's capture) is left
 * to a later commit: cb runs once the store has been flushed after this call
 * and every record appended before it is durable. Costs one device flush
 * where a commit with records costs two and a log write. For fdatasync of a
 * file whose writes changed no more than its times
 * (cfs_ns_datasync_flush_only).
 */
int cfs_journal_flush_async(struct cfs_fs *fs, cfs_commit_cb cb, void *arg);

/* Ask for a commit and wait for it. 0 or -errno. Never call with a namespace
 * lock held (the committer takes them). */
int cfs_journal_commit_sync(struct cfs_fs *fs);

/* ---- store 0's table of stores (stores added and removed online) ---------------------------- */

/* The superblock as the next snapshot writes it: its pool fields (the table
 * of stores) are current; geometry and uuid are the mount's. */
void cfs_journal_table(struct cfs_journal *journal, struct cfs_sb *out);
/*
 * Make next's pool fields (CFS_FEAT_INCOMPAT_POOL, the table) store 0's: a
 * commit, then a snapshot writes them into the superblock (next
 * generation, the other slot); returns once that is durable. 0 or -errno
 * (the table stays as it was: -EROFS, -EIO and the filesystem is then
 * read-only, -ESHUTDOWN). Callers serialize their changes; never with a
 * namespace lock held.
 */
int cfs_journal_write_table(struct cfs_fs *fs, const struct cfs_sb *next);

/* Wake the committer without waiting (e.g. space is busy). */
void cfs_journal_kick(struct cfs_fs *fs);

/* Called at the start of every mutation, holding no lock: waits while the
 * tail is beyond CFS_TAIL_LIMIT_BYTES (a limit on memory). */
void cfs_journal_throttle(struct cfs_fs *fs);

/* True when the metadata region is nearly full (the last snapshot took more
 * than 3/4 of a half): operations that add metadata (create, link, xattr,
 * new mappings) fail with -ENOSPC until deletions shrink it. [lock-free] */
bool cfs_journal_meta_full(struct cfs_journal *journal);

/* The sequence number of the last durable record (tests, statistics). */
uint64_t cfs_journal_durable_seq(struct cfs_journal *journal);

struct cfs_journal_stat {
	uint64_t commits;	 /* commits that wrote records */
	uint64_t snapshots;	 /* snapshots written (compactions + mount/unmount) */
	uint64_t records;	 /* records appended */
	uint64_t log_used_bytes; /* of the active half's log room */
	uint64_t log_room_bytes;
	uint64_t snapshot_bytes; /* size of the last snapshot */
	uint64_t pending_bytes;	 /* tail not yet committed */
};
void cfs_journal_stat(struct cfs_journal *journal, struct cfs_journal_stat *st);

/* ---- snapshot building (namespace.c emits, journal.c frames) ----------------------------------
 */

/* Add one record to the snapshot being built (seq = its index). -ENOMEM,
 * -ENOSPC when the snapshot outgrows the metadata half. */
int cfs_snap_add(struct cfs_snap_builder *sb, uint16_t type, const void *payload,
		 uint32_t payload_length_bytes);
/* The same encoders as for transactions, into a snapshot. */
int cfs_snap_fs_info(struct cfs_snap_builder *sb, const struct cfs_jrec_fs_info *rec);
int cfs_snap_inode(struct cfs_snap_builder *sb, const struct cfs_jrec_inode *rec);
int cfs_snap_dirent_add(struct cfs_snap_builder *sb, const struct cfs_jrec_dirent *rec);
int cfs_snap_extent(struct cfs_snap_builder *sb, const struct cfs_jrec_extent *rec);
int cfs_snap_written(struct cfs_snap_builder *sb, const struct cfs_jrec_written *rec);
int cfs_snap_place(struct cfs_snap_builder *sb, const struct cfs_jrec_place *rec);
int cfs_snap_written_run(struct cfs_snap_builder *sb, const struct cfs_jrec_extent *rec);
int cfs_snap_piece(struct cfs_snap_builder *sb, const struct cfs_jrec_piece *rec);
int cfs_snap_xattr(struct cfs_snap_builder *sb, uint64_t ino, const char *name,
		   uint32_t name_length, const void *value, uint32_t value_length);

#endif /* CFS_JOURNAL_H */
