/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * journal.c — the metadata log: payload encoding, transactions, the
 * in-memory tail, the committer thread, snapshots and replay.
 *
 * Main invariants:
 *   - Sequence numbers are handed out under the tail lock, one per record,
 *     in tail order; a transaction's records are contiguous in the tail.
 *   - The store holds, in the active half: a snapshot with seq S (the state
 *     after every record below S) and a log of records S, S+1, ... each
 *     commit's batch starting on a physical sector boundary (padded with a
 *     NOOP record), so a later commit never rewrites a sector holding
 *     committed records.
 *   - durable_seq only grows; busy units are released only up to it.
 *   - The in-memory state is authoritative: when records cannot be appended
 *     or written (no memory, log full), a snapshot of the state replaces them.
 *
 * What it does not do: decide what to log (the namespace does), data I/O.
 *
 * Divisions: payload encoding - transactions - snapshot builder - committer
 * (commit, snapshot, thread, requests) - replay - lifecycle.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/base/assert.h"
#include "fs/meta/pool.h"
#include "fs/meta/fs.h"
#include "fs/meta/journal.h"

#define TAIL_SEG_BYTES (256u * 1024)
#define REPLAY_WINDOW_BYTES (4u << 20)
#define REPLAY_TXN_RECORDS_MAX 4096u /* a limit on one transaction */

/* ---- payload encoding (little-endian) --------------------------------------------- */

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

#define INODE_DELETE_BYTES 16u

#define WRITTEN_F_BITS 0x1u /* a bitmap follows */
#define WRITTEN_FLAGS_AT 36u

/* ---- payload layouts -------------------------------------------------------------------
 * The fixed part of each payload (fs/format/FORMAT.md 5.3) as a table: where
 * each field of the decoded struct (journal.h) lies, little-endian, as wide
 * as the struct's field (checked at compile time). The encoders and replay
 * both walk these tables, so the two cannot disagree. Bytes no field covers
 * are reserved: written as zeros, not read. Names, targets, bitmaps and
 * value pieces follow the fixed part. */

struct field {
	uint8_t at;	 /* byte offset in the payload */
	uint8_t bytes;	 /* 4 or 8 */
	uint16_t member; /* offsetof the decoded struct's field */
};

/* clang-format off */
/* A field as wide in the payload as in the decoded struct, or no build. */
#define FIELD(type, m, offset, width)						\
	{(offset),								\
	 (width) + 0 * sizeof(struct {						\
		_Static_assert(sizeof(((type *)0)->m) == (width), "width of " #m); \
		int unused;							\
	 }),									\
	 offsetof(type, m)}
#define U32(type, m, offset) FIELD(type, m, offset, 4)
#define U64(type, m, offset) FIELD(type, m, offset, 8)
#define LAYOUT(fields, fixed_bytes) {(fields), sizeof(fields) / sizeof((fields)[0]), (fixed_bytes)}

struct layout {
	const struct field *fields;
	uint32_t count;
	uint32_t fixed_bytes;
};

/* 16 bytes. */
static const struct field fs_info_fields[] = {
	U64(struct cfs_jrec_fs_info, next_ino, 0),
	U64(struct cfs_jrec_fs_info, next_generation, 8),
};
static const struct layout fs_info_layout = LAYOUT(fs_info_fields, 16u);

/* 88 bytes; then the symlink target. */
static const struct field inode_fields[] = {
	U64(struct cfs_jrec_inode, ino, 0),
	U64(struct cfs_jrec_inode, generation, 8),
	U32(struct cfs_jrec_inode, mode, 16),
	U32(struct cfs_jrec_inode, nlink, 20),
	U32(struct cfs_jrec_inode, uid, 24),
	U32(struct cfs_jrec_inode, gid, 28),
	U64(struct cfs_jrec_inode, rdev, 32),
	U64(struct cfs_jrec_inode, size_bytes, 40),
	U64(struct cfs_jrec_inode, atime_ns, 48),
	U64(struct cfs_jrec_inode, mtime_ns, 56),
	U64(struct cfs_jrec_inode, ctime_ns, 64),
	U32(struct cfs_jrec_inode, page_size_bytes, 72),
	U32(struct cfs_jrec_inode, target_length, 76),
	U64(struct cfs_jrec_inode, parent_ino, 80),
};
static const struct layout inode_layout = LAYOUT(inode_fields, 88u);

/* 32 bytes. */
static const struct field place_fields[] = {
	U64(struct cfs_jrec_place, ino, 0),
	U32(struct cfs_jrec_place, store, 8),
	U32(struct cfs_jrec_place, from, 12),
	U32(struct cfs_jrec_place, flags, 16),
	U64(struct cfs_jrec_place, rate_bytes, 24),
};
static const struct layout place_layout = LAYOUT(place_fields, 32u);

/* 32 bytes; DIRENT_ADD, then the name. */
static const struct field dirent_fields[] = {
	U64(struct cfs_jrec_dirent, dir_ino, 0),
	U64(struct cfs_jrec_dirent, ino, 8),
	U64(struct cfs_jrec_dirent, cookie, 16),
	U32(struct cfs_jrec_dirent, mode, 24),
	U32(struct cfs_jrec_dirent, name_length, 28),
};
static const struct layout dirent_layout = LAYOUT(dirent_fields, 32u);

/* 16 bytes; then the name. */
static const struct field dirent_remove_fields[] = {
	U64(struct cfs_jrec_dirent, dir_ino, 0),
	U32(struct cfs_jrec_dirent, name_length, 8),
};
static const struct layout dirent_remove_layout = LAYOUT(dirent_remove_fields, 16u);

/* 72 bytes; then the source name and the destination name. */
static const struct field rename_fields[] = {
	U64(struct cfs_jrec_rename, src_dir, 0),
	U64(struct cfs_jrec_rename, dst_dir, 8),
	U64(struct cfs_jrec_rename, src_ino, 16),
	U64(struct cfs_jrec_rename, dst_ino, 24),
	U64(struct cfs_jrec_rename, src_cookie, 32),
	U64(struct cfs_jrec_rename, dst_cookie, 40),
	U32(struct cfs_jrec_rename, src_mode, 48),
	U32(struct cfs_jrec_rename, dst_mode, 52),
	U32(struct cfs_jrec_rename, flags, 56),
	U32(struct cfs_jrec_rename, src_name_length, 60),
	U32(struct cfs_jrec_rename, dst_name_length, 64),
};
static const struct layout rename_layout = LAYOUT(rename_fields, 72u);

/* 32 bytes; EXTENT_MAP, EXTENT_UNMAP, EXTENT_WRITTEN_RUN. */
static const struct field extent_fields[] = {
	U64(struct cfs_jrec_extent, ino, 0),
	U64(struct cfs_jrec_extent, file_unit, 8),
	U64(struct cfs_jrec_extent, store_unit, 16),
	U64(struct cfs_jrec_extent, count, 24),
};
static const struct layout extent_layout = LAYOUT(extent_fields, 32u);

/* 32 bytes; EXTENT_MAP_PIECE. */
static const struct field piece_fields[] = {
	U64(struct cfs_jrec_piece, ino, 0),
	U64(struct cfs_jrec_piece, file_unit, 8),
	U64(struct cfs_jrec_piece, store_unit, 16),
	U32(struct cfs_jrec_piece, offset_bytes, 24),
	U32(struct cfs_jrec_piece, bytes, 28),
};
static const struct layout piece_layout = LAYOUT(piece_fields, 32u);

/* 40 bytes; flags at WRITTEN_FLAGS_AT: a bitmap follows. */
static const struct field written_fields[] = {
	U64(struct cfs_jrec_written, ino, 0),
	U64(struct cfs_jrec_written, file_unit, 8),
	U64(struct cfs_jrec_written, store_unit, 16),
	U32(struct cfs_jrec_written, op, 24),
	U32(struct cfs_jrec_written, first_sector, 28),
	U32(struct cfs_jrec_written, sector_count, 32),
};
static const struct layout written_layout = LAYOUT(written_fields, 40u);

/* 24 bytes; XATTR_SET, then the name and the value piece. */
static const struct field xattr_fields[] = {
	U64(struct cfs_jrec_xattr, ino, 0),
	U32(struct cfs_jrec_xattr, name_length, 8),
	U32(struct cfs_jrec_xattr, value_length, 12),
	U32(struct cfs_jrec_xattr, offset, 16),
	U32(struct cfs_jrec_xattr, chunk_length, 20),
};
static const struct layout xattr_layout = LAYOUT(xattr_fields, 24u);

/* 16 bytes; then the name. */
static const struct field xattr_remove_fields[] = {
	U64(struct cfs_jrec_xattr, ino, 0),
	U32(struct cfs_jrec_xattr, name_length, 8),
};
static const struct layout xattr_remove_layout = LAYOUT(xattr_remove_fields, 16u);
/* clang-format on */

/* The fixed part of rec's payload at p; returns its size. */
static uint32_t encode_fixed(uint8_t *p, const struct layout *l, const void *rec)
{
	memset(p, 0, l->fixed_bytes);
	for (uint32_t i = 0; i < l->count; i++) {
		const struct field *f = &l->fields[i];
		const uint8_t *m = (const uint8_t *)rec + f->member;
		uint64_t v64;
		uint32_t v32;

		if (f->bytes == 8) {
			memcpy(&v64, m, 8);
			put64(p + f->at, v64);
		} else {
			memcpy(&v32, m, 4);
			put32(p + f->at, v32);
		}
	}
	return l->fixed_bytes;
}

/* The fixed part of a payload of n bytes into rec; false when n is too
 * short for it. */
static bool decode_fixed(const uint8_t *p, uint32_t n, const struct layout *l, void *rec)
{
	if (n < l->fixed_bytes)
		return false;
	for (uint32_t i = 0; i < l->count; i++) {
		const struct field *f = &l->fields[i];
		uint8_t *m = (uint8_t *)rec + f->member;
		uint64_t v64;
		uint32_t v32;

		if (f->bytes == 8) {
			v64 = get64(p + f->at);
			memcpy(m, &v64, 8);
		} else {
			v32 = get32(p + f->at);
			memcpy(m, &v32, 4);
		}
	}
	return true;
}

/* Fixed part, then each variable part in turn (length 0 for none). */
static uint32_t encode(uint8_t *p, const struct layout *l, const void *rec, const void *var1,
		       uint32_t var1_length, const void *var2, uint32_t var2_length)
{
	uint32_t at = encode_fixed(p, l, rec);

	if (var1_length)
		memcpy(p + at, var1, var1_length);
	at += var1_length;
	if (var2_length)
		memcpy(p + at, var2, var2_length);
	return at + var2_length;
}

static uint32_t enc_inode(uint8_t *p, const struct cfs_jrec_inode *r)
{
	return encode(p, &inode_layout, r, r->target, r->target_length, NULL, 0);
}

static uint32_t enc_dirent_add(uint8_t *p, const struct cfs_jrec_dirent *r)
{
	return encode(p, &dirent_layout, r, r->name, r->name_length, NULL, 0);
}

static uint32_t written_bits_bytes(const struct cfs_jrec_written *r)
{
	return r->bits ? (r->sector_count + 7) / 8 : 0;
}

static uint32_t enc_written(uint8_t *p, const struct cfs_jrec_written *r)
{
	uint32_t bytes = encode(p, &written_layout, r, r->bits, written_bits_bytes(r), NULL, 0);

	put32(p + WRITTEN_FLAGS_AT, r->bits ? WRITTEN_F_BITS : 0);
	return bytes;
}

static uint32_t enc_xattr(uint8_t *p, const struct cfs_jrec_xattr *r)
{
	return encode(p, &xattr_layout, r, r->name, r->name_length, r->chunk, r->chunk_length);
}

/* The piece of a written-state change that starts `done` sectors in: the
 * whole change without a bitmap, else at most CFS_JREC_WRITTEN_SECTORS
 * (a multiple of 8: pieces start on bytes of the bitmap). */
static struct cfs_jrec_written written_piece(const struct cfs_jrec_written *r, uint32_t done)
{
	struct cfs_jrec_written piece = *r;
	uint32_t n = r->sector_count - done;

	if (r->bits && n > CFS_JREC_WRITTEN_SECTORS)
		n = CFS_JREC_WRITTEN_SECTORS;
	piece.first_sector = r->first_sector + done;
	piece.sector_count = n;
	piece.bits = r->bits ? r->bits + done / 8 : NULL;
	return piece;
}

/* The XATTR_SET record of a value's piece from offset on (at most
 * CFS_JREC_XATTR_CHUNK bytes). */
static struct cfs_jrec_xattr xattr_piece(uint64_t ino, const char *name, uint32_t name_length,
					 const void *value, uint32_t value_length, uint32_t offset)
{
	uint32_t n = value_length - offset;

	if (n > CFS_JREC_XATTR_CHUNK)
		n = CFS_JREC_XATTR_CHUNK;
	return (struct cfs_jrec_xattr){
		.ino = ino,
		.name_length = name_length,
		.value_length = value_length,
		.offset = offset,
		.chunk_length = n,
		.name = name,
		.chunk = (const uint8_t *)value + offset,
	};
}

/* ---- the journal object --------------------------------------------------------------- */

struct tail_seg {
	struct tail_seg *next;
	size_t used_bytes;
	size_t size_bytes;
	uint8_t data[]; /* framed records */
};

struct waiter {
	struct waiter *next;
	cfs_commit_cb cb;
	void *arg;
	bool flush_only; /* cfs_journal_flush_async: no capture needed */
};

struct cfs_journal {
	struct cfs_fs *fs;
	const struct cfs_journal_ops *ops; /* the namespace's side (mount.c) */
	bool persist;
	uint32_t interval_ms;

	/* The tail: innermost lock of the daemon. */
	pthread_mutex_t tail_lock;
	uint64_t next_seq;	       /* [tail_lock] */
	struct tail_seg *tail_first;   /* [tail_lock] */
	struct tail_seg *tail_last;    /* [tail_lock] */
	size_t pending_bytes;	       /* [tail_lock] */
	bool lost;		       /* [tail_lock] records dropped: snapshot */
	_Atomic size_t pending_approx; /* for throttling without the lock */
	_Atomic uint64_t records;

	/* Committer requests. */
	pthread_mutex_t lock;
	pthread_cond_t wake;	/* the committer waits here */
	pthread_cond_t done;	/* throttled callers wait here */
	struct waiter *waiters; /* [lock] served by the next commit */
	bool requested;		/* [lock] */
	bool stop;		/* [lock] */
	bool abandon;		/* [lock] stop without a last commit */
	bool running;		/* [lock] */
	bool snapshot_wanted;	/* [lock] the next commit ends with a snapshot */
	uint64_t commits_done;	/* [lock] */
	pthread_t thread;

	/* Committer-owned (or mount/unmount while it is stopped). */
	uint64_t captured_ns;	   /* CLOCK_MONOTONIC of the last capture */
	uint64_t log_offset_bytes; /* store offset of the next commit */
	uint64_t log_start_bytes;  /* this half's log area */
	uint64_t log_end_bytes;
	bool skip_seq;	 /* next snapshot skips seqs (FORMAT.md 7.4) */
	uint8_t *io_buf; /* aligned metadata write buffer */
	size_t io_buf_bytes;
	_Atomic uint64_t durable_seq;
	_Atomic uint64_t log_used_approx; /* log_offset - log_start + records in flight */
	_Atomic bool meta_full;
	/* Read without a lock by mutations (cfs_journal_throttle), so not
	 * from fs->sb, which the committer rewrites: the size is fixed. */
	uint64_t meta_limit_bytes;
	_Atomic uint64_t commits;
	_Atomic uint64_t snapshots;
	_Atomic uint64_t snapshot_bytes;

	/* Store 0's table of stores as the next snapshot writes it: a copy of
	 * the superblock whose pool fields are the ones that count (stores
	 * added and removed online change them; fs->sb is the committer's). */
	pthread_mutex_t table_lock;
	struct cfs_sb table; /* [table_lock] */
};

/* ---- transactions ------------------------------------------------------------------------
 * The transaction buffer holds entries [type u16][flags u16][length u32][payload]
 * padded to 8 bytes; txn_end frames them into the tail with their seqs. */

#define TXN_ENTRY_HEADER 8u

void cfs_txn_begin(struct cfs_txn *txn, struct cfs_journal *journal)
{
	txn->journal = journal;
	txn->buf = txn->inline_buf;
	txn->used_bytes = 0;
	txn->size_bytes = sizeof(txn->inline_buf);
	txn->record_count = 0;
	txn->failed = false;
}

/* Room for one entry of payload_bytes; NULL (and failed) without memory. */
static uint8_t *txn_reserve(struct cfs_txn *txn, uint16_t type, uint32_t payload_bytes)
{
	size_t need = (TXN_ENTRY_HEADER + payload_bytes + 7) & ~(size_t)7;
	uint8_t *entry;

	CFS_ASSERT(payload_bytes <= CFS_LOG_MAX_PAYLOAD);
	if (txn->failed)
		return NULL;
	if (txn->used_bytes + need > txn->size_bytes) {
		size_t size = txn->size_bytes * 2;
		uint8_t *grown;

		while (size < txn->used_bytes + need)
			size *= 2;
		grown = malloc(size);
		if (!grown) {
			txn->failed = true;
			return NULL;
		}
		memcpy(grown, txn->buf, txn->used_bytes);
		if (txn->buf != txn->inline_buf)
			free(txn->buf);
		txn->buf = grown;
		txn->size_bytes = size;
	}
	entry = txn->buf + txn->used_bytes;
	put16(entry, type);
	put16(entry + 2, 0);
	put32(entry + 4, payload_bytes);
	txn->used_bytes += need;
	txn->record_count++;
	return entry + TXN_ENTRY_HEADER;
}

void cfs_txn_fs_info(struct cfs_txn *txn, const struct cfs_jrec_fs_info *rec)
{
	uint8_t *p = txn_reserve(txn, CFS_LOG_FS_INFO, fs_info_layout.fixed_bytes);

	if (p)
		encode_fixed(p, &fs_info_layout, rec);
}

void cfs_txn_inode(struct cfs_txn *txn, uint16_t type, const struct cfs_jrec_inode *rec)
{
	uint8_t *p;

	CFS_ASSERT(type == CFS_LOG_INODE_CREATE || type == CFS_LOG_INODE_UPDATE);
	p = txn_reserve(txn, type, inode_layout.fixed_bytes + rec->target_length);
	if (p)
		enc_inode(p, rec);
}

void cfs_txn_place(struct cfs_txn *txn, const struct cfs_jrec_place *rec)
{
	uint8_t *p = txn_reserve(txn, CFS_LOG_INODE_PLACE, place_layout.fixed_bytes);

	if (p)
		encode_fixed(p, &place_layout, rec);
}

void cfs_txn_inode_delete(struct cfs_txn *txn, uint64_t ino)
{
	uint8_t *p = txn_reserve(txn, CFS_LOG_INODE_DELETE, INODE_DELETE_BYTES);

	if (p) {
		memset(p, 0, INODE_DELETE_BYTES);
		put64(p, ino);
	}
}

void cfs_txn_dirent_add(struct cfs_txn *txn, const struct cfs_jrec_dirent *rec)
{
	uint8_t *p =
		txn_reserve(txn, CFS_LOG_DIRENT_ADD, dirent_layout.fixed_bytes + rec->name_length);

	if (p)
		enc_dirent_add(p, rec);
}

void cfs_txn_dirent_remove(struct cfs_txn *txn, uint64_t dir_ino, const char *name,
			   uint32_t name_length)
{
	struct cfs_jrec_dirent r = {.dir_ino = dir_ino, .name_length = name_length, .name = name};
	uint8_t *p = txn_reserve(txn, CFS_LOG_DIRENT_REMOVE,
				 dirent_remove_layout.fixed_bytes + name_length);

	if (p)
		encode(p, &dirent_remove_layout, &r, name, name_length, NULL, 0);
}

void cfs_txn_rename(struct cfs_txn *txn, const struct cfs_jrec_rename *r)
{
	uint8_t *p =
		txn_reserve(txn, CFS_LOG_DIRENT_RENAME,
			    rename_layout.fixed_bytes + r->src_name_length + r->dst_name_length);

	if (p)
		encode(p, &rename_layout, r, r->src_name, r->src_name_length, r->dst_name,
		       r->dst_name_length);
}

void cfs_txn_extent(struct cfs_txn *txn, uint16_t type, const struct cfs_jrec_extent *rec)
{
	uint8_t *p;

	CFS_ASSERT(type == CFS_LOG_EXTENT_MAP || type == CFS_LOG_EXTENT_UNMAP ||
		   type == CFS_LOG_EXTENT_WRITTEN_RUN);
	p = txn_reserve(txn, type, extent_layout.fixed_bytes);
	if (p)
		encode_fixed(p, &extent_layout, rec);
}

void cfs_txn_piece(struct cfs_txn *txn, const struct cfs_jrec_piece *rec)
{
	uint8_t *p = txn_reserve(txn, CFS_LOG_EXTENT_MAP_PIECE, piece_layout.fixed_bytes);

	if (p)
		encode_fixed(p, &piece_layout, rec);
}

void cfs_txn_written(struct cfs_txn *txn, const struct cfs_jrec_written *rec)
{
	for (uint32_t done = 0; done < rec->sector_count;) {
		struct cfs_jrec_written piece = written_piece(rec, done);
		uint8_t *p = txn_reserve(txn, CFS_LOG_EXTENT_WRITTEN,
					 written_layout.fixed_bytes + written_bits_bytes(&piece));

		if (p)
			enc_written(p, &piece);
		done += piece.sector_count;
	}
}

void cfs_txn_xattr_set(struct cfs_txn *txn, uint64_t ino, const char *name, uint32_t name_length,
		       const void *value, uint32_t value_length)
{
	uint32_t offset = 0;

	do {
		struct cfs_jrec_xattr rec =
			xattr_piece(ino, name, name_length, value, value_length, offset);
		uint8_t *p = txn_reserve(txn, CFS_LOG_XATTR_SET,
					 xattr_layout.fixed_bytes + name_length + rec.chunk_length);

		if (p)
			enc_xattr(p, &rec);
		offset += rec.chunk_length;
	} while (offset < value_length);
}

void cfs_txn_xattr_remove(struct cfs_txn *txn, uint64_t ino, const char *name, uint32_t name_length)
{
	struct cfs_jrec_xattr r = {.ino = ino, .name_length = name_length, .name = name};
	uint8_t *p = txn_reserve(txn, CFS_LOG_XATTR_REMOVE,
				 xattr_remove_layout.fixed_bytes + name_length);

	if (p)
		encode(p, &xattr_remove_layout, &r, name, name_length, NULL, 0);
}

/* [tail_lock] Room for bytes more in the tail; false without memory. */
static bool tail_room(struct cfs_journal *j, size_t bytes)
{
	struct tail_seg *seg = j->tail_last;
	size_t size;

	if (seg && seg->size_bytes - seg->used_bytes >= bytes)
		return true;
	size = bytes > TAIL_SEG_BYTES ? bytes : TAIL_SEG_BYTES;
	seg = malloc(sizeof(*seg) + size);
	if (!seg)
		return false;
	seg->next = NULL;
	seg->used_bytes = 0;
	seg->size_bytes = size;
	if (j->tail_last)
		j->tail_last->next = seg;
	else
		j->tail_first = seg;
	j->tail_last = seg;
	return true;
}

/* [tail_lock] Frame one record with the next seq into the tail. */
static void tail_append(struct cfs_journal *j, uint16_t type, uint16_t flags, const void *payload,
			uint32_t length)
{
	uint32_t bytes = cfs_log_record_bytes(length);
	uint64_t seq = j->next_seq++;
	int ret;

	if (!j->persist || j->lost)
		return;
	if (!tail_room(j, bytes)) {
		/* Out of memory: the committer writes a snapshot instead. */
		j->lost = true;
		return;
	}
	ret = cfs_log_record_encode(j->tail_last->data + j->tail_last->used_bytes, bytes, type,
				    flags, seq, j->fs->log_seed, payload, length);
	CFS_ASSERT(ret == (int)bytes);
	j->tail_last->used_bytes += bytes;
	j->pending_bytes += bytes;
}

static void tail_free(struct tail_seg *seg)
{
	while (seg) {
		struct tail_seg *next = seg->next;

		free(seg);
		seg = next;
	}
}

uint64_t cfs_txn_end(struct cfs_txn *txn)
{
	struct cfs_journal *j = txn->journal;
	size_t offset = 0;
	uint64_t last = 0;
	bool wake;

	if (txn->record_count == 0 && !txn->failed)
		goto out_free;
	pthread_mutex_lock(&j->tail_lock);
	if (txn->failed) {
		j->lost = true;
		last = j->next_seq++;
	}
	for (uint32_t i = 0; i < txn->record_count && !txn->failed; i++) {
		uint8_t *entry = txn->buf + offset;
		uint16_t type = (uint16_t)(entry[0] | entry[1] << 8);
		uint32_t length = get32(entry + 4);
		bool more = i + 1 < txn->record_count;

		last = j->next_seq;
		tail_append(j, type, more ? CFS_JREC_MORE : 0, entry + TXN_ENTRY_HEADER, length);
		offset += (TXN_ENTRY_HEADER + length + 7) & ~(size_t)7;
	}
	atomic_store(&j->pending_approx, j->pending_bytes);
	wake = j->pending_bytes >= CFS_TAIL_WAKE_BYTES || j->lost;
	pthread_mutex_unlock(&j->tail_lock);
	atomic_fetch_add(&j->records, txn->record_count);
	if (wake)
		cfs_journal_kick(j->fs);
out_free:
	if (txn->buf != txn->inline_buf)
		free(txn->buf);
	txn->buf = txn->inline_buf;
	txn->record_count = 0;
	txn->used_bytes = 0;
	return last;
}

/* ---- the snapshot builder ----------------------------------------------------------------- */

struct cfs_snap_builder {
	struct cfs_journal *journal;
	uint8_t *buf;	   /* header + body, aligned for I/O */
	size_t used_bytes; /* header included */
	size_t size_bytes;
	size_t limit_bytes; /* the snapshot may not grow past this */
	uint64_t record_count;
	uint8_t *scratch; /* one payload */
};

static size_t io_align(const struct cfs_fs *fs)
{
	const struct cfs_io_geometry *geo = cfs_io_geometry(fs->io);
	size_t a = geo->mem_align_bytes > 4096 ? geo->mem_align_bytes : 4096;

	return a;
}

int cfs_snap_add(struct cfs_snap_builder *sb, uint16_t type, const void *payload,
		 uint32_t payload_length_bytes)
{
	uint32_t bytes = cfs_log_record_bytes(payload_length_bytes);
	int ret;

	if (sb->used_bytes + bytes > sb->limit_bytes)
		return -ENOSPC;
	if (sb->used_bytes + bytes > sb->size_bytes) {
		size_t size = sb->size_bytes * 2;
		uint8_t *grown;

		while (size < sb->used_bytes + bytes)
			size *= 2;
		grown = aligned_alloc(io_align(sb->journal->fs), size);
		if (!grown)
			return -ENOMEM;
		memcpy(grown, sb->buf, sb->used_bytes);
		free(sb->buf);
		sb->buf = grown;
		sb->size_bytes = size;
	}
	ret = cfs_log_record_encode(sb->buf + sb->used_bytes, bytes, type, 0, sb->record_count,
				    sb->journal->fs->log_seed, payload, payload_length_bytes);
	CFS_ASSERT(ret == (int)bytes);
	sb->used_bytes += bytes;
	sb->record_count++;
	return 0;
}

int cfs_snap_fs_info(struct cfs_snap_builder *sb, const struct cfs_jrec_fs_info *rec)
{
	return cfs_snap_add(sb, CFS_LOG_FS_INFO, sb->scratch,
			    encode_fixed(sb->scratch, &fs_info_layout, rec));
}

int cfs_snap_inode(struct cfs_snap_builder *sb, const struct cfs_jrec_inode *rec)
{
	return cfs_snap_add(sb, CFS_LOG_INODE_CREATE, sb->scratch, enc_inode(sb->scratch, rec));
}

int cfs_snap_place(struct cfs_snap_builder *sb, const struct cfs_jrec_place *rec)
{
	return cfs_snap_add(sb, CFS_LOG_INODE_PLACE, sb->scratch,
			    encode_fixed(sb->scratch, &place_layout, rec));
}

int cfs_snap_dirent_add(struct cfs_snap_builder *sb, const struct cfs_jrec_dirent *rec)
{
	return cfs_snap_add(sb, CFS_LOG_DIRENT_ADD, sb->scratch, enc_dirent_add(sb->scratch, rec));
}

int cfs_snap_extent(struct cfs_snap_builder *sb, const struct cfs_jrec_extent *rec)
{
	return cfs_snap_add(sb, CFS_LOG_EXTENT_MAP, sb->scratch,
			    encode_fixed(sb->scratch, &extent_layout, rec));
}

int cfs_snap_piece(struct cfs_snap_builder *sb, const struct cfs_jrec_piece *rec)
{
	return cfs_snap_add(sb, CFS_LOG_EXTENT_MAP_PIECE, sb->scratch,
			    encode_fixed(sb->scratch, &piece_layout, rec));
}

int cfs_snap_written_run(struct cfs_snap_builder *sb, const struct cfs_jrec_extent *rec)
{
	return cfs_snap_add(sb, CFS_LOG_EXTENT_WRITTEN_RUN, sb->scratch,
			    encode_fixed(sb->scratch, &extent_layout, rec));
}

int cfs_snap_written(struct cfs_snap_builder *sb, const struct cfs_jrec_written *rec)
{
	int ret = 0;

	for (uint32_t done = 0; done < rec->sector_count && !ret;) {
		struct cfs_jrec_written piece = written_piece(rec, done);

		ret = cfs_snap_add(sb, CFS_LOG_EXTENT_WRITTEN, sb->scratch,
				   enc_written(sb->scratch, &piece));
		done += piece.sector_count;
	}
	return ret;
}

int cfs_snap_xattr(struct cfs_snap_builder *sb, uint64_t ino, const char *name,
		   uint32_t name_length, const void *value, uint32_t value_length)
{
	uint32_t offset = 0;
	int ret = 0;

	do {
		struct cfs_jrec_xattr rec =
			xattr_piece(ino, name, name_length, value, value_length, offset);

		ret = cfs_snap_add(sb, CFS_LOG_XATTR_SET, sb->scratch,
				   enc_xattr(sb->scratch, &rec));
		offset += rec.chunk_length;
	} while (offset < value_length && !ret);
	return ret;
}

/* ---- metadata I/O (committer thread, or mount/unmount) -----------------------------------------
 */

/* Make j->io_buf hold at least bytes. */
static int io_buf_reserve(struct cfs_journal *j, size_t bytes)
{
	size_t align = io_align(j->fs);
	size_t size = (bytes + align - 1) & ~(align - 1);
	uint8_t *buf;

	if (j->io_buf_bytes >= size)
		return 0;
	buf = aligned_alloc(align, size);
	if (!buf)
		return -ENOMEM;
	free(j->io_buf);
	j->io_buf = buf;
	j->io_buf_bytes = size;
	return 0;
}

/* Synchronous I/O of [offset, +length) on the metadata queue. 0 or -errno. */
static int meta_io(struct cfs_fs *fs, enum cfs_io_op op, uint64_t offset_bytes, void *buf,
		   uint64_t length_bytes)
{
	return cfs_ioq_sync_range(fs->meta_q, op, offset_bytes, length_bytes, buf);
}

static int meta_flush(struct cfs_fs *fs)
{
	int ret = cfs_ioq_sync(fs->meta_q, CFS_IO_FLUSH, 0, 0, NULL, NULL);

	return ret < 0 ? ret : 0;
}

static void discard_units(void *arg, uint64_t first_unit, uint64_t count)
{
	struct cfs_fs *fs = arg;
	/* Advisory: a failed discard only costs space on the device. */
	if (cfs_io_can_discard(fs->io) && fs->meta_q)
		meta_io(fs, CFS_IO_DISCARD, cfs_fs_unit_offset_bytes(fs, first_unit), NULL,
			count << fs->geom.unit_shift);
}

/* Everything below seq is durable: release busy units (their discards are
 * queued for discard_pass(), after the commit's waiters are answered). */
static void set_durable(struct cfs_journal *j, uint64_t seq)
{
	if (seq > atomic_load(&j->durable_seq))
		atomic_store(&j->durable_seq, seq);
	cfs_pool_commit_done(j->fs->pool, atomic_load(&j->durable_seq),
			     cfs_io_can_discard(j->fs->io) && !j->fs->opts.no_discard);
}

/* Units one discard pass may discard per store: a commit that comes in
 * meanwhile waits for at most this much (8 MiB at 1 MiB units). */
#define DISCARD_PASS_UNITS 8u

/* One pass over the queued discards; returns the units still queued. */
static uint64_t discard_pass(struct cfs_journal *j)
{
	struct cfs_fs *fs = j->fs;

	if (cfs_fs_is_readonly(fs))
		return 0; /* advisory: not on a store that failed */
	return cfs_pool_discard_some(fs->pool, DISCARD_PASS_UNITS, discard_units, fs);
}

/* Alignment of snapshot and log starts: both block and physical sector. */
static uint64_t meta_align(const struct cfs_fs *fs)
{
	uint64_t a = fs->sb.block_size_bytes;

	if (fs->sb.physical_sector_bytes > a)
		a = fs->sb.physical_sector_bytes;
	return a;
}

/* Append NOOP records (seq from *seq, flags 0) to fill gap bytes exactly;
 * gap is a multiple of 8 and either 0 or >= CFS_LOG_HEADER_BYTES. */
static size_t frame_padding(struct cfs_fs *fs, uint8_t *out, uint64_t gap, uint64_t *seq)
{
	size_t written = 0;

	while (gap) {
		uint64_t payload = gap - CFS_LOG_HEADER_BYTES;
		int ret;

		/* Leave either nothing or a whole header for the next one. */
		if (payload > CFS_LOG_MAX_PAYLOAD)
			payload = CFS_LOG_MAX_PAYLOAD - CFS_LOG_HEADER_BYTES;
		memset(out + written + CFS_LOG_HEADER_BYTES, 0, payload);
		ret = cfs_log_record_encode(out + written, (size_t)gap, CFS_LOG_NOOP, 0, (*seq)++,
					    fs->log_seed, out + written + CFS_LOG_HEADER_BYTES,
					    (uint32_t)payload);
		CFS_ASSERT(ret > 0 && (uint64_t)ret <= gap);
		written += (size_t)ret;
		gap -= (uint64_t)ret;
	}
	return written;
}

/* Bytes of padding to reach the next multiple of align after `used`, never
 * 1..CFS_LOG_HEADER_BYTES-1. */
static uint64_t padding_for(uint64_t used, uint64_t align)
{
	uint64_t gap = (align - used % align) % align;

	if (gap && gap < CFS_LOG_HEADER_BYTES)
		gap += align;
	return gap;
}

/* ---- how full the metadata region is ---------------------------------------------------------
 * meta_full is exact only right after a snapshot. Between snapshots the
 * state can grow by everything logged since and everything still in the
 * tail (up to CFS_TAIL_LIMIT_BYTES, far more than a small region), so a
 * burst of metadata without fsync could outgrow the region before the next
 * snapshot noticed: the snapshot then fails and the mount turns read-only.
 * The estimate below bounds the next snapshot (a record adds at most its
 * own bytes to the state); while it is over the limit and meta_full is not
 * set, mutations wait in cfs_journal_throttle() for a commit, which then
 * snapshots and makes meta_full exact again. */

static bool meta_unsettled(struct cfs_journal *j)
{
	return j->persist && !atomic_load(&j->meta_full) &&
	       atomic_load(&j->snapshot_bytes) + atomic_load(&j->log_used_approx) +
			       atomic_load(&j->pending_approx) >
		       j->meta_limit_bytes;
}

static void set_log_offset(struct cfs_journal *j, uint64_t offset)
{
	j->log_offset_bytes = offset;
	atomic_store(&j->log_used_approx, offset - j->log_start_bytes);
}

/* ---- snapshots ------------------------------------------------------------------------------- */

/* The pool fields of `from` into `to` (the rest of the superblock is the
 * committer's). */
static void table_merge(struct cfs_sb *to, const struct cfs_sb *from)
{
	to->incompat = (to->incompat & ~CFS_FEAT_INCOMPAT_POOL) |
		       (from->incompat & CFS_FEAT_INCOMPAT_POOL);
	memcpy(to->pool_uuid, from->pool_uuid, CFS_UUID_BYTES);
	to->store_index = from->store_index;
	to->unit_base = from->unit_base;
	to->store_count = from->store_count;
	memcpy(to->stores, from->stores, sizeof(to->stores));
}

int cfs_journal_snapshot(struct cfs_journal *j, bool clean)
{
	struct cfs_fs *fs = j->fs;
	struct cfs_snap_builder sb = {.journal = j};
	unsigned half = fs->sb.meta_active_half ^ 1u;
	uint64_t half_offset = cfs_sb_half_offset_bytes(&fs->sb, half);
	uint64_t half_bytes = cfs_sb_half_size_bytes(&fs->sb);
	uint64_t align = meta_align(fs);
	uint64_t seq_start, pad_seq, body, total;
	struct tail_seg *dropped;
	struct cfs_sb next;
	uint8_t *block = NULL;
	int ret;

	if (!j->persist)
		return 0;
	if (cfs_fs_is_readonly(fs))
		return -EROFS;
	/* The snapshot replaces every record below S: note S first, so the
	 * state written afterwards includes all of them (a record is appended
	 * after its change). Later records stay in the tail for the new log. */
	pthread_mutex_lock(&j->tail_lock);
	if (j->skip_seq)
		j->next_seq += cfs_log_seq_skip(&fs->sb);
	seq_start = j->next_seq;
	dropped = j->tail_first;
	j->tail_first = j->tail_last = NULL;
	/* Still counted (as log) until the snapshot holding them is written. */
	atomic_fetch_add(&j->log_used_approx, j->pending_bytes);
	j->pending_bytes = 0;
	j->lost = false;
	atomic_store(&j->pending_approx, 0);
	pthread_mutex_unlock(&j->tail_lock);
	tail_free(dropped);

	sb.size_bytes = 1u << 20;
	sb.limit_bytes = half_bytes - 2 * align; /* keep room for the zeroed log block */
	sb.used_bytes = CFS_SNAP_HEADER_BYTES;
	sb.buf = aligned_alloc(io_align(fs), sb.size_bytes);
	sb.scratch = malloc(CFS_LOG_MAX_PAYLOAD);
	if (!sb.buf || !sb.scratch) {
		ret = -ENOMEM;
		goto out_free;
	}
	ret = j->ops->snapshot(fs, &sb);
	if (ret == -ENOSPC)
		cfs_fs_log(fs, "metadata region full: the snapshot does not fit in %llu bytes",
			   (unsigned long long)half_bytes);
	if (ret)
		goto out_free;
	/* Pad the body so the log after it starts on a physical sector. */
	pad_seq = sb.record_count;
	{
		uint64_t gap = padding_for(sb.used_bytes, align);

		if (sb.used_bytes + gap + align > sb.size_bytes) {
			uint8_t *grown = aligned_alloc(io_align(fs), sb.used_bytes + gap + align);

			if (!grown) {
				ret = -ENOMEM;
				goto out_free;
			}
			memcpy(grown, sb.buf, sb.used_bytes);
			free(sb.buf);
			sb.buf = grown;
			sb.size_bytes = sb.used_bytes + gap + align;
		}
		sb.used_bytes += frame_padding(fs, sb.buf + sb.used_bytes, gap, &pad_seq);
		sb.record_count = pad_seq;
	}
	body = sb.used_bytes - CFS_SNAP_HEADER_BYTES;
	total = sb.used_bytes;
	CFS_ASSERT(total % align == 0);
	if (total + align > half_bytes) {
		ret = -ENOSPC;
		goto out_free;
	}
	/* The first log block after the snapshot is zeroed (FORMAT.md 7.2). */
	memset(sb.buf + total, 0, align);
	ret = cfs_snap_seal(sb.buf, sb.size_bytes, body, sb.record_count, seq_start, fs->log_seed);
	CFS_ASSERT(ret == 0);

	/* The written bits in the snapshot describe data: make it durable first. */
	ret = meta_flush(fs);
	if (!ret)
		ret = meta_io(fs, CFS_IO_WRITE, half_offset, sb.buf, total + align);
	if (!ret)
		ret = meta_flush(fs);
	if (ret) {
		cfs_fs_set_readonly(fs, "snapshot write", ret);
		goto out_free;
	}
	next = fs->sb;
	pthread_mutex_lock(&j->table_lock);
	table_merge(&next, &j->table);
	pthread_mutex_unlock(&j->table_lock);
	next.generation++;
	next.meta_active_half = half;
	next.meta_snap_length_bytes = total;
	next.log_seq_start = seq_start;
	next.wtime_ns = (uint64_t)time(NULL) * 1000000000ull;
	if (clean)
		next.flags |= CFS_SB_CLEAN;
	else
		next.flags &= ~CFS_SB_CLEAN;
	block = aligned_alloc(io_align(fs), CFS_SB_BLOCK_BYTES);
	if (!block) {
		ret = -ENOMEM;
		goto out_free;
	}
	cfs_sb_encode(&next, block);
	ret = meta_io(fs, CFS_IO_WRITE, CFS_SB_SLOT_OFFSET_BYTES(cfs_sb_slot(next.generation)),
		      block, CFS_SB_BLOCK_BYTES);
	if (!ret)
		ret = meta_flush(fs);
	if (ret) {
		cfs_fs_set_readonly(fs, "superblock write", ret);
		goto out_free;
	}
	fs->sb = next;
	j->skip_seq = false;
	j->log_start_bytes = cfs_sb_log_offset_bytes(&fs->sb);
	j->log_end_bytes = half_offset + half_bytes;
	set_log_offset(j, j->log_start_bytes);
	CFS_ASSERT(j->log_start_bytes == half_offset + total);
	atomic_store(&j->snapshot_bytes, total);
	atomic_store(&j->meta_full, total > j->meta_limit_bytes);
	atomic_fetch_add(&j->snapshots, 1);
	set_durable(j, seq_start - 1);
out_free:
	/* The tail below S is gone and no snapshot holds it: later records
	 * would sit behind a gap that replay stops at. Refuse changes rather
	 * than acknowledge what a crash would lose. */
	if (ret)
		cfs_fs_set_readonly(
			fs, ret == -ENOSPC ? "snapshot (metadata region full)" : "snapshot", ret);
	free(block);
	free(sb.scratch);
	free(sb.buf);
	return ret;
}

/* ---- commits -----------------------------------------------------------------------------------
 */

/*
 * One commit (committer thread). force: somebody waits (fsync): flush the
 * device even when no record is pending, since writes to written sectors
 * create no record but still sit in the device's cache.
 */
static int commit_once(struct cfs_journal *j, bool force, bool capture)
{
	struct cfs_fs *fs = j->fs;
	struct tail_seg *batch;
	uint64_t bytes, gap, last_seq, seq;
	uint64_t align = j->persist ? meta_align(fs) : 1;
	bool lost;
	int ret;

	if (cfs_fs_is_readonly(fs))
		return fs->mounted_ro ? 0 : -EROFS;
	/* (1) capture: dirty written-state and attributes become records
	 * (unless every waiter asked for a flush only). */
	if (capture)
		j->ops->capture(fs);
	pthread_mutex_lock(&j->tail_lock);
	batch = j->tail_first;
	bytes = j->pending_bytes;
	lost = j->lost;
	if (!j->persist) {
		last_seq = j->next_seq - 1;
		pthread_mutex_unlock(&j->tail_lock);
		set_durable(j, last_seq);
		return 0;
	}
	/* Pad the batch to the physical sector with NOOP records in the tail. */
	gap = bytes ? padding_for(bytes, align) : 0;
	if (gap && !lost && tail_room(j, gap)) {
		seq = j->next_seq;
		j->tail_last->used_bytes +=
			frame_padding(fs, j->tail_last->data + j->tail_last->used_bytes, gap, &seq);
		j->next_seq = seq;
		bytes += gap;
	} else if (gap) {
		lost = true;
	}
	last_seq = j->next_seq - 1;
	j->tail_first = j->tail_last = NULL;
	/* The batch in flight still counts for meta_unsettled(). */
	atomic_fetch_add(&j->log_used_approx, bytes);
	j->pending_bytes = 0;
	atomic_store(&j->pending_approx, 0);
	pthread_mutex_unlock(&j->tail_lock);

	if (lost || j->log_offset_bytes + bytes > j->log_end_bytes) {
		/* Records were lost (no memory) or the log is full: the
		 * snapshot holds everything they said. */
		tail_free(batch);
		return cfs_journal_snapshot(j, false);
	}
	if (!bytes && !force) {
		tail_free(batch);
		return meta_unsettled(j) ? cfs_journal_snapshot(j, false) : 0;
	}
	/* (2) the data the captured bits describe is durable before (3). */
	ret = meta_flush(fs);
	if (!ret && bytes) {
		uint64_t off = 0;

		ret = io_buf_reserve(j, bytes);
		for (struct tail_seg *s = batch; !ret && s; s = s->next) {
			memcpy(j->io_buf + off, s->data, s->used_bytes);
			off += s->used_bytes;
		}
		CFS_ASSERT(ret || off == bytes);
		if (ret == -ENOMEM) {
			tail_free(batch);
			return cfs_journal_snapshot(j, false);
		}
		/* (3) the records, (4) flush. */
		if (!ret)
			ret = meta_io(fs, CFS_IO_WRITE, j->log_offset_bytes, j->io_buf, bytes);
		if (!ret)
			ret = meta_flush(fs);
	}
	tail_free(batch);
	if (ret) {
		cfs_fs_set_readonly(fs, "log write", ret);
		return -EIO;
	}
	set_log_offset(j, j->log_offset_bytes + bytes);
	if (bytes)
		atomic_fetch_add(&j->commits, 1);
	/* (5) busy units freed by these records are free now. */
	set_durable(j, last_seq);
	/* Compact when the log passes half its room; while the region is
	 * full, after every commit that wrote something, so deletions make
	 * room as soon as they are durable; and when it may have filled
	 * since the last snapshot, to know. */
	if (j->log_offset_bytes - j->log_start_bytes >
		    (j->log_end_bytes - j->log_start_bytes) / 2 ||
	    (bytes && atomic_load(&j->meta_full)) || meta_unsettled(j))
		return cfs_journal_snapshot(j, false);
	return 0;
}

static void answer(struct waiter *w, int res)
{
	while (w) {
		struct waiter *next = w->next;

		w->cb(res, w->arg);
		free(w);
		w = next;
	}
}

static void sync_done(int res, void *arg);

/* Answers the waiters of a commit that sleep in a loop's callback (fsync);
 * returns the threads blocked in cfs_journal_commit_sync(), which are
 * answered after the discard pass that follows the commit: they get the
 * units it released back without one of them being discarded that moment
 * (an allocation retrying after -EAGAIN, tests counting free units). */
static struct waiter *answer_callbacks(struct waiter *w, int res)
{
	struct waiter *blocked = NULL;

	while (w) {
		struct waiter *next = w->next;

		if (w->cb == sync_done) {
			w->next = blocked;
			blocked = w;
		} else {
			w->cb(res, w->arg);
			free(w);
		}
		w = next;
	}
	return blocked;
}

/* Every waiter of this commit asked for cfs_journal_flush_async. */
static bool all_flush_only(const struct waiter *w)
{
	for (; w; w = w->next)
		if (!w->flush_only)
			return false;
	return true;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Does this commit capture what writes changed? Not when every waiter asked
 * for a flush only, unless the last capture is commit_interval old: the
 * timer never fires while syncs keep coming, and the sizes of files nobody
 * syncs must still reach the log that often. */
static bool commit_captures(struct cfs_journal *j, const struct waiter *w, bool stopping)
{
	uint64_t now = monotonic_ns();

	if (w && !stopping && all_flush_only(w) &&
	    now - j->captured_ns < (uint64_t)j->interval_ms * 1000000u)
		return false;
	j->captured_ns = now;
	return true;
}

static void *committer(void *arg)
{
	struct cfs_journal *j = arg;
	struct timespec deadline;
	uint64_t discards_left = 0;

	pthread_mutex_lock(&j->lock);
	for (;;) {
		struct waiter *w;
		bool stopping, snapshot;
		int res;

		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += j->interval_ms / 1000;
		deadline.tv_nsec += (long)(j->interval_ms % 1000) * 1000000;
		if (deadline.tv_nsec >= 1000000000) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000;
		}
		for (;;) {
			struct timespec now;

			while (!j->requested && !j->stop && !discards_left &&
			       pthread_cond_timedwait(&j->wake, &j->lock, &deadline) != ETIMEDOUT)
				;
			clock_gettime(CLOCK_REALTIME, &now);
			if (j->requested || j->stop || now.tv_sec > deadline.tv_sec ||
			    (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec))
				break;
			/* Only discards to do: one pass, then look again, so a
			 * commit asked for meanwhile waits for one pass at most. */
			pthread_mutex_unlock(&j->lock);
			discards_left = discard_pass(j);
			pthread_mutex_lock(&j->lock);
		}
		/* Everything asked for until now is served by this commit. */
		w = j->waiters;
		j->waiters = NULL;
		j->requested = false;
		snapshot = j->snapshot_wanted;
		j->snapshot_wanted = false;
		stopping = j->stop;
		if (stopping && j->abandon) {
			/* A simulated crash: nothing more reaches the store. */
			pthread_mutex_unlock(&j->lock);
			answer(w, -ESHUTDOWN);
			pthread_mutex_lock(&j->lock);
			break;
		}
		pthread_mutex_unlock(&j->lock);

		res = commit_once(j, w != NULL || stopping, commit_captures(j, w, stopping));
		if (!res && snapshot)
			res = cfs_journal_snapshot(j, false);
		w = answer_callbacks(w, res);
		/* The units this commit released are discarded after its
		 * waiters have their answer, a pass at a time; at the end,
		 * all of them (an unmount gives the space back). */
		discards_left = discard_pass(j);
		while (stopping && discards_left)
			discards_left = discard_pass(j);
		answer(w, res);

		pthread_mutex_lock(&j->lock);
		j->commits_done++;
		pthread_cond_broadcast(&j->done);
		if (stopping && !j->waiters)
			break;
	}
	j->running = false;
	pthread_cond_broadcast(&j->done);
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

static int commit_wait(struct cfs_fs *fs, cfs_commit_cb cb, void *arg, bool flush_only,
		       bool snapshot)
{
	struct cfs_journal *j = fs->journal;
	struct waiter *w;

	if (cfs_fs_is_readonly(fs) && !fs->mounted_ro)
		return -EROFS;
	w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->cb = cb;
	w->arg = arg;
	w->flush_only = flush_only;
	pthread_mutex_lock(&j->lock);
	if (!j->running) {
		pthread_mutex_unlock(&j->lock);
		free(w);
		return -ESHUTDOWN;
	}
	w->next = j->waiters;
	j->waiters = w;
	j->requested = true;
	if (snapshot)
		j->snapshot_wanted = true;
	pthread_cond_signal(&j->wake);
	pthread_mutex_unlock(&j->lock);
	return 0;
}

int cfs_journal_commit_async(struct cfs_fs *fs, cfs_commit_cb cb, void *arg)
{
	return commit_wait(fs, cb, arg, false, false);
}

int cfs_journal_flush_async(struct cfs_fs *fs, cfs_commit_cb cb, void *arg)
{
	return commit_wait(fs, cb, arg, true, false);
}

struct sync_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int res;
};

static void sync_done(int res, void *arg)
{
	struct sync_wait *s = arg;

	pthread_mutex_lock(&s->lock);
	s->res = res;
	s->done = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static int commit_wait_sync(struct cfs_fs *fs, bool snapshot)
{
	struct sync_wait s = {.done = false, .res = 0};
	int ret;

	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	ret = commit_wait(fs, sync_done, &s, false, snapshot);
	if (!ret) {
		pthread_mutex_lock(&s.lock);
		while (!s.done)
			pthread_cond_wait(&s.cond, &s.lock);
		pthread_mutex_unlock(&s.lock);
		ret = s.res;
	}
	pthread_cond_destroy(&s.cond);
	pthread_mutex_destroy(&s.lock);
	return ret;
}

int cfs_journal_commit_sync(struct cfs_fs *fs)
{
	return commit_wait_sync(fs, false);
}

void cfs_journal_table(struct cfs_journal *j, struct cfs_sb *out)
{
	pthread_mutex_lock(&j->table_lock);
	*out = j->table;
	pthread_mutex_unlock(&j->table_lock);
}

int cfs_journal_write_table(struct cfs_fs *fs, const struct cfs_sb *next)
{
	struct cfs_journal *j = fs->journal;
	struct cfs_sb before;
	int ret;

	if (!j->persist)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&j->table_lock);
	before = j->table;
	table_merge(&j->table, next);
	pthread_mutex_unlock(&j->table_lock);
	ret = commit_wait_sync(fs, true);
	if (ret) {
		/* Not written: the next snapshot must not write it either. */
		pthread_mutex_lock(&j->table_lock);
		table_merge(&j->table, &before);
		pthread_mutex_unlock(&j->table_lock);
	}
	return ret;
}

void cfs_journal_kick(struct cfs_fs *fs)
{
	struct cfs_journal *j = fs->journal;

	pthread_mutex_lock(&j->lock);
	j->requested = true;
	pthread_cond_signal(&j->wake);
	pthread_mutex_unlock(&j->lock);
}

void cfs_journal_throttle(struct cfs_fs *fs)
{
	struct cfs_journal *j = fs->journal;

	if (atomic_load(&j->pending_approx) < CFS_TAIL_LIMIT_BYTES && !meta_unsettled(j))
		return;
	pthread_mutex_lock(&j->lock);
	/* Bounded: each pass waits for one commit, which empties the tail
	 * (and snapshots if the metadata region may be full). */
	for (int pass = 0;
	     pass < 100 && j->running && !cfs_fs_is_readonly(fs) &&
	     (atomic_load(&j->pending_approx) >= CFS_TAIL_LIMIT_BYTES || meta_unsettled(j));
	     pass++) {
		uint64_t seen = j->commits_done;

		j->requested = true;
		pthread_cond_signal(&j->wake);
		while (j->running && j->commits_done == seen)
			pthread_cond_wait(&j->done, &j->lock);
	}
	pthread_mutex_unlock(&j->lock);
}

bool cfs_journal_meta_full(struct cfs_journal *journal)
{
	return atomic_load(&journal->meta_full);
}

uint64_t cfs_journal_durable_seq(struct cfs_journal *journal)
{
	return atomic_load(&journal->durable_seq);
}

void cfs_journal_stat(struct cfs_journal *j, struct cfs_journal_stat *st)
{
	st->commits = atomic_load(&j->commits);
	st->snapshots = atomic_load(&j->snapshots);
	st->records = atomic_load(&j->records);
	st->log_used_bytes = j->log_offset_bytes - j->log_start_bytes;
	st->log_room_bytes = j->log_end_bytes - j->log_start_bytes;
	st->snapshot_bytes = atomic_load(&j->snapshot_bytes);
	st->pending_bytes = atomic_load(&j->pending_approx);
}

/* ---- replay ------------------------------------------------------------------------------------
 */

static int too_short(const char **why)
{
	*why = "record payload too short for its type";
	return -EUCLEAN;
}

/* Decode one record's payload and apply it (to the namespace, through j->ops). */
static int apply_record(struct cfs_journal *j, uint16_t type, const uint8_t *p, uint32_t n,
			const char **why)
{
	struct cfs_fs *fs = j->fs;

	switch (type) {
	case CFS_LOG_NOOP:
	case CFS_LOG_COMMIT:
		return 0;
	case CFS_LOG_FS_INFO: {
		struct cfs_jrec_fs_info r;

		if (!decode_fixed(p, n, &fs_info_layout, &r))
			return too_short(why);
		return j->ops->apply_fs_info(fs, &r);
	}
	case CFS_LOG_INODE_CREATE:
	case CFS_LOG_INODE_UPDATE: {
		struct cfs_jrec_inode r;

		if (!decode_fixed(p, n, &inode_layout, &r))
			return too_short(why);
		r.target = (const char *)p + inode_layout.fixed_bytes;
		if (r.target_length > n - inode_layout.fixed_bytes)
			return too_short(why);
		return j->ops->apply_inode(fs, &r, why);
	}
	case CFS_LOG_INODE_DELETE:
		if (n < INODE_DELETE_BYTES)
			return too_short(why);
		return j->ops->apply_inode_delete(fs, get64(p));
	case CFS_LOG_DIRENT_ADD: {
		struct cfs_jrec_dirent r;

		if (!decode_fixed(p, n, &dirent_layout, &r))
			return too_short(why);
		r.name = (const char *)p + dirent_layout.fixed_bytes;
		if (r.name_length > n - dirent_layout.fixed_bytes)
			return too_short(why);
		return j->ops->apply_dirent_add(fs, &r);
	}
	case CFS_LOG_DIRENT_REMOVE: {
		struct cfs_jrec_dirent r = {0};

		if (!decode_fixed(p, n, &dirent_remove_layout, &r))
			return too_short(why);
		r.name = (const char *)p + dirent_remove_layout.fixed_bytes;
		if (r.name_length > n - dirent_remove_layout.fixed_bytes)
			return too_short(why);
		return j->ops->apply_dirent_remove(fs, &r);
	}
	case CFS_LOG_DIRENT_RENAME: {
		struct cfs_jrec_rename r;

		if (!decode_fixed(p, n, &rename_layout, &r))
			return too_short(why);
		if ((uint64_t)r.src_name_length + r.dst_name_length > n - rename_layout.fixed_bytes)
			return too_short(why);
		r.src_name = (const char *)p + rename_layout.fixed_bytes;
		r.dst_name = r.src_name + r.src_name_length;
		return j->ops->apply_rename(fs, &r);
	}
	case CFS_LOG_INODE_PLACE: {
		struct cfs_jrec_place r;

		if (!decode_fixed(p, n, &place_layout, &r))
			return too_short(why);
		return j->ops->apply_place(fs, &r, why);
	}
	case CFS_LOG_EXTENT_MAP:
	case CFS_LOG_EXTENT_UNMAP:
	case CFS_LOG_EXTENT_WRITTEN_RUN: {
		struct cfs_jrec_extent r;

		if (!decode_fixed(p, n, &extent_layout, &r))
			return too_short(why);
		if (type == CFS_LOG_EXTENT_WRITTEN_RUN)
			return j->ops->apply_written_run(fs, &r, why);
		return j->ops->apply_extent(fs, type, &r, why);
	}
	case CFS_LOG_EXTENT_MAP_PIECE: {
		struct cfs_jrec_piece r;

		if (!decode_fixed(p, n, &piece_layout, &r))
			return too_short(why);
		return j->ops->apply_piece(fs, &r, why);
	}
	case CFS_LOG_EXTENT_WRITTEN: {
		struct cfs_jrec_written r;

		if (!decode_fixed(p, n, &written_layout, &r))
			return too_short(why);
		r.bits = (get32(p + WRITTEN_FLAGS_AT) & WRITTEN_F_BITS)
				 ? p + written_layout.fixed_bytes
				 : NULL;
		if (written_bits_bytes(&r) > n - written_layout.fixed_bytes)
			return too_short(why);
		return j->ops->apply_written(fs, &r, why);
	}
	case CFS_LOG_XATTR_SET: {
		struct cfs_jrec_xattr r;

		if (!decode_fixed(p, n, &xattr_layout, &r))
			return too_short(why);
		if ((uint64_t)r.name_length + r.chunk_length > n - xattr_layout.fixed_bytes)
			return too_short(why);
		r.name = (const char *)p + xattr_layout.fixed_bytes;
		r.chunk = p + xattr_layout.fixed_bytes + r.name_length;
		return j->ops->apply_xattr(fs, type, &r, why);
	}
	case CFS_LOG_XATTR_REMOVE: {
		struct cfs_jrec_xattr r = {0};

		if (!decode_fixed(p, n, &xattr_remove_layout, &r))
			return too_short(why);
		if (r.name_length > n - xattr_remove_layout.fixed_bytes)
			return too_short(why);
		r.name = (const char *)p + xattr_remove_layout.fixed_bytes;
		return j->ops->apply_xattr(fs, type, &r, why);
	}
	default:
		if (type >= CFS_LOG_TYPE_PRIVATE)
			return 0;
		*why = "unknown log record type";
		return -EUCLEAN;
	}
}

/* Snapshot body: no transactions, every record applies at once. */
struct snap_apply {
	struct cfs_journal *j;
	const char *why;
	int ret;
};

static int snap_apply_cb(const struct cfs_log_record *rec, void *arg)
{
	struct snap_apply *a = arg;

	a->ret = apply_record(a->j, rec->type, rec->payload, rec->payload_length_bytes, &a->why);
	return a->ret;
}

/* The log: records are buffered until their transaction's last record. */
struct replay {
	struct cfs_journal *j;
	uint8_t *txn_buf; /* copies: [type u16][pad][len u32][payload] */
	size_t txn_used;
	size_t txn_size;
	uint32_t txn_records;
	uint64_t cursor_bytes;	     /* store offset after the last record seen */
	uint64_t complete_end_bytes; /* after the last complete transaction */
	uint64_t complete_next_seq;
	uint64_t seq; /* seq of the next record expected */
	uint64_t applied;
	const char *why;
	int ret;
};

static int replay_cb(const struct cfs_log_record *rec, void *arg)
{
	struct replay *r = arg;
	size_t need = (TXN_ENTRY_HEADER + rec->payload_length_bytes + 7) & ~(size_t)7;

	r->cursor_bytes += rec->record_length_bytes;
	r->seq = rec->seq + 1;
	if (r->txn_records >= REPLAY_TXN_RECORDS_MAX) {
		r->why = "a transaction longer than the limit";
		r->ret = -EUCLEAN;
		return r->ret;
	}
	if (r->txn_used + need > r->txn_size) {
		size_t size = r->txn_size ? r->txn_size * 2 : 1u << 20;
		uint8_t *grown;

		while (size < r->txn_used + need)
			size *= 2;
		grown = realloc(r->txn_buf, size);
		if (!grown) {
			r->ret = -ENOMEM;
			return r->ret;
		}
		r->txn_buf = grown;
		r->txn_size = size;
	}
	put16(r->txn_buf + r->txn_used, rec->type);
	put32(r->txn_buf + r->txn_used + 4, rec->payload_length_bytes);
	memcpy(r->txn_buf + r->txn_used + TXN_ENTRY_HEADER, rec->payload,
	       rec->payload_length_bytes);
	r->txn_used += need;
	r->txn_records++;
	if (rec->flags & CFS_JREC_MORE)
		return 0;
	/* The transaction is complete: apply it whole. */
	for (size_t off = 0; off < r->txn_used;) {
		uint8_t *e = r->txn_buf + off;
		uint16_t type = (uint16_t)(e[0] | e[1] << 8);
		uint32_t length = get32(e + 4);

		r->ret = apply_record(r->j, type, e + TXN_ENTRY_HEADER, length, &r->why);
		if (r->ret)
			return r->ret;
		off += (TXN_ENTRY_HEADER + length + 7) & ~(size_t)7;
		r->applied++;
	}
	r->txn_used = 0;
	r->txn_records = 0;
	r->complete_end_bytes = r->cursor_bytes;
	r->complete_next_seq = r->seq;
	return 0;
}

static int load_snapshot(struct cfs_journal *j, const char **why)
{
	struct cfs_fs *fs = j->fs;
	uint32_t sector = cfs_io_geometry(fs->io)->logical_sector_bytes;
	uint64_t length = fs->sb.meta_snap_length_bytes;
	uint64_t read_bytes = (length + sector - 1) / sector * sector;
	struct snap_apply a = {j, NULL, 0};
	struct cfs_log_walk_result res;
	struct cfs_snap snap;
	uint8_t *buf;
	int ret;

	buf = aligned_alloc(io_align(fs), (read_bytes + io_align(fs) - 1) & ~(io_align(fs) - 1));
	if (!buf)
		return -ENOMEM;
	ret = meta_io(fs, CFS_IO_READ, cfs_sb_half_offset_bytes(&fs->sb, fs->sb.meta_active_half),
		      buf, read_bytes);
	if (ret) {
		*why = "cannot read the snapshot";
		goto out_free;
	}
	ret = cfs_snap_decode(buf, (size_t)length, fs->log_seed, &snap, why);
	if (ret)
		goto out_free;
	if (snap.seq != fs->sb.log_seq_start) {
		*why = "the snapshot's sequence number does not match the superblock";
		ret = -EUCLEAN;
		goto out_free;
	}
	cfs_log_walk(snap.body, snap.body_length_bytes, 0, fs->log_seed, snap_apply_cb, &a, &res);
	if (a.ret) {
		*why = a.why ? a.why : "cannot load the snapshot";
		ret = a.ret;
	}
out_free:
	free(buf);
	return ret;
}

static int replay_log(struct cfs_journal *j, uint64_t *replayed, const char **why)
{
	struct cfs_fs *fs = j->fs;
	uint32_t sector = cfs_io_geometry(fs->io)->logical_sector_bytes;
	uint64_t start = cfs_sb_log_offset_bytes(&fs->sb);
	uint64_t end = start + cfs_sb_log_size_bytes(&fs->sb);
	uint64_t buf_offset = start;	/* store offset of buf[0] */
	uint64_t valid = 0, parsed = 0; /* bytes in buf; bytes walked */
	struct replay r = {.j = j};
	uint8_t *buf;
	int ret = 0;

	r.cursor_bytes = start;
	r.complete_end_bytes = start;
	r.seq = fs->sb.log_seq_start;
	r.complete_next_seq = r.seq;
	buf = aligned_alloc(io_align(fs), REPLAY_WINDOW_BYTES);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		struct cfs_log_walk_result res;
		uint64_t room = REPLAY_WINDOW_BYTES - valid;
		uint64_t n = end - (buf_offset + valid);

		if (n > room)
			n = room;
		n = n / sector * sector;
		if (n) {
			ret = meta_io(fs, CFS_IO_READ, buf_offset + valid, buf + valid, n);
			if (ret) {
				*why = "cannot read the log";
				goto out_free;
			}
			valid += n;
		}
		cfs_log_walk(buf + parsed, valid - parsed, r.seq, fs->log_seed, replay_cb, &r,
			     &res);
		if (r.ret) {
			ret = r.ret;
			*why = r.why ? r.why : "cannot apply a log record";
			goto out_free;
		}
		parsed += res.end_offset_bytes;
		/* Stopped inside the window with room for a whole record after
		 * it, or at the end of the area: the log ends here. */
		if (buf_offset + valid >= end || valid - parsed >= CFS_LOG_HEADER_BYTES +
									   CFS_LOG_MAX_PAYLOAD +
									   CFS_LOG_ALIGN_BYTES)
			break;
		/* Slide: keep the partial record, from a sector boundary. */
		{
			uint64_t keep_from = parsed / sector * sector;

			memmove(buf, buf + keep_from, valid - keep_from);
			buf_offset += keep_from;
			valid -= keep_from;
			parsed -= keep_from;
		}
	}
	*replayed = r.applied;
	/* A transaction cut by the end of the log is dropped whole; appends
	 * would go after the last complete one, but mount writes a snapshot
	 * first anyway (FORMAT.md 7.4). */
	pthread_mutex_lock(&j->tail_lock);
	j->next_seq = r.complete_next_seq;
	pthread_mutex_unlock(&j->tail_lock);
	set_log_offset(j, r.complete_end_bytes);
out_free:
	free(r.txn_buf);
	free(buf);
	return ret;
}

int cfs_journal_load(struct cfs_journal *j, uint64_t *replayed_records, const char **why)
{
	struct cfs_fs *fs = j->fs;
	int ret;

	*replayed_records = 0;
	j->log_start_bytes = cfs_sb_log_offset_bytes(&fs->sb);
	j->log_end_bytes = j->log_start_bytes + cfs_sb_log_size_bytes(&fs->sb);
	j->log_offset_bytes = j->log_start_bytes;
	j->skip_seq = !(fs->sb.flags & CFS_SB_CLEAN);
	atomic_store(&j->snapshot_bytes, fs->sb.meta_snap_length_bytes);
	ret = load_snapshot(j, why);
	if (!ret)
		ret = replay_log(j, replayed_records, why);
	if (!ret)
		atomic_store(&j->durable_seq, j->next_seq - 1);
	return ret;
}

/* ---- lifecycle ----------------------------------------------------------------------------------
 */

int cfs_journal_create(struct cfs_fs *fs, const struct cfs_journal_config *cfg,
		       struct cfs_journal **out)
{
	struct cfs_journal *j = calloc(1, sizeof(*j));

	*out = NULL;
	if (!j)
		return -ENOMEM;
	if (cfg->commit_interval_ms > CFS_COMMIT_INTERVAL_MS_MAX) {
		free(j);
		return -EINVAL;
	}
	j->fs = fs;
	j->ops = cfg->ops;
	j->persist = cfg->persist;
	j->meta_limit_bytes = cfs_sb_half_size_bytes(&fs->sb) / 4 * 3;
	j->interval_ms =
		cfg->commit_interval_ms ? cfg->commit_interval_ms : CFS_COMMIT_INTERVAL_MS_DEFAULT;
	j->next_seq = cfg->next_seq ? cfg->next_seq : CFS_LOG_SEQ_FIRST;
	j->log_offset_bytes = cfg->log_offset_bytes;
	atomic_store(&j->durable_seq, j->next_seq - 1);
	pthread_mutex_init(&j->tail_lock, NULL);
	pthread_mutex_init(&j->lock, NULL);
	pthread_mutex_init(&j->table_lock, NULL);
	j->table = fs->sb;
	pthread_cond_init(&j->wake, NULL);
	pthread_cond_init(&j->done, NULL);
	*out = j;
	return 0;
}

int cfs_journal_start(struct cfs_journal *j)
{
	int ret;

	pthread_mutex_lock(&j->lock);
	j->stop = false;
	j->running = true;
	pthread_mutex_unlock(&j->lock);
	ret = pthread_create(&j->thread, NULL, committer, j);
	if (ret) {
		j->running = false;
		return -ret;
	}
	return 0;
}

static int journal_halt(struct cfs_journal *j, bool abandon)
{
	pthread_mutex_lock(&j->lock);
	if (!j->running) {
		pthread_mutex_unlock(&j->lock);
		return 0;
	}
	j->stop = true;
	j->abandon = abandon;
	pthread_cond_signal(&j->wake);
	pthread_mutex_unlock(&j->lock);
	pthread_join(j->thread, NULL);
	if (abandon)
		return 0;
	return cfs_fs_is_readonly(j->fs) && !j->fs->mounted_ro ? -EIO : 0;
}

int cfs_journal_stop(struct cfs_journal *j)
{
	return journal_halt(j, false);
}

void cfs_journal_abandon(struct cfs_journal *j)
{
	journal_halt(j, true);
}

void cfs_journal_destroy(struct cfs_journal *j)
{
	if (!j)
		return;
	answer(j->waiters, -ESHUTDOWN);
	tail_free(j->tail_first);
	free(j->io_buf);
	pthread_cond_destroy(&j->done);
	pthread_cond_destroy(&j->wake);
	pthread_mutex_destroy(&j->lock);
	pthread_mutex_destroy(&j->tail_lock);
	pthread_mutex_destroy(&j->table_lock);
	free(j);
}
