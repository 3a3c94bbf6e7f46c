/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_piece.c — pieces of units for small files (fs/meta/piece.h): sizes,
 * best-fit packing, buddies merging, units going back to the allocator only
 * when their last free is durable, busy pieces (EAGAIN, not ENOSPC), reserve
 * at mount (overlaps and units used whole refused), and a random run against
 * a model of every byte, with the counting invariants after each step.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "fs/meta/alloc.h"
#include "fs/meta/piece.h"

#define UNIT (1u << 20)
#define KIB 1024u

static struct cfs_alloc *alloc;
static struct cfs_pieces *pieces;

static void setup_units(uint64_t units)
{
	cr_assert_eq(cfs_alloc_create(units, &alloc), 0);
	cr_assert_eq(cfs_pieces_create(alloc, UNIT, 4 * KIB, &pieces), 0);
}

static void setup(void)
{
	setup_units(16);
}

static void teardown(void)
{
	cfs_pieces_destroy(pieces);
	cfs_alloc_destroy(alloc);
}

/* Used + busy + free bytes fill the piece units, and the allocator counts
 * each piece unit as used (or busy, once given back). */
static void check_counts(void)
{
	struct cfs_pieces_stat st;
	struct cfs_alloc_stat as;

	cfs_pieces_stat(pieces, &st);
	cfs_alloc_stat(alloc, &as);
	cr_assert_eq(st.used_bytes + st.busy_bytes + st.free_bytes, st.units * UNIT);
	cr_assert_leq(st.units, as.used_units);
	cr_assert_eq(as.free_units + as.busy_units + as.used_units, as.total_units);
}

Test(piece, sizes)
{
	cr_assert_eq(cfs_pieces_min_bytes(UNIT, 4096), 4096);
	cr_assert_eq(cfs_pieces_min_bytes(UNIT, 8192), 8192);
	/* At most CFS_PIECES_BLOCKS_MAX pieces in a unit. */
	cr_assert_eq(cfs_pieces_min_bytes(1u << 30, 4096), (1u << 30) / CFS_PIECES_BLOCKS_MAX);
	/* No piece of 4 KiB fits half of a 4 KiB unit. */
	cr_assert_eq(cfs_pieces_min_bytes(4096, 4096), 0);
	cr_assert_eq(cfs_pieces_min_bytes(8192, 4096), 4096);
	cr_assert_eq(cfs_pieces_min_bytes(3000, 4096), 0);

	cr_assert_eq(cfs_pieces_size(4096, UNIT, 0), 4096);
	cr_assert_eq(cfs_pieces_size(4096, UNIT, 1), 4096);
	cr_assert_eq(cfs_pieces_size(4096, UNIT, 4096), 4096);
	cr_assert_eq(cfs_pieces_size(4096, UNIT, 4097), 8192);
	cr_assert_eq(cfs_pieces_size(4096, UNIT, 24 * KIB), 32 * KIB);
	cr_assert_eq(cfs_pieces_size(4096, UNIT, UNIT / 2), UNIT / 2);
	cr_assert_eq(cfs_pieces_size(4096, UNIT, UNIT / 2 + 1), 0);
	cr_assert_eq(cfs_pieces_size(0, UNIT, 1), 0);
}

Test(piece, create_limits)
{
	struct cfs_pieces *p;

	cr_assert_eq(cfs_alloc_create(4, &alloc), 0);
	cr_assert_eq(cfs_pieces_create(alloc, UNIT, 3000, &p), -EINVAL);
	cr_assert_eq(cfs_pieces_create(alloc, UNIT, UNIT, &p), -EINVAL);
	cr_assert_eq(cfs_pieces_create(alloc, 1u << 30, 4096, &p), -EINVAL); /* 2^18 blocks */
	cr_assert_eq(cfs_pieces_create(alloc, UNIT, 4096, &p), 0);
	cfs_pieces_destroy(p);
	cfs_pieces_destroy(NULL);
	cfs_alloc_destroy(alloc);
}

Test(piece, packs_a_unit_then_takes_the_next, .init = setup, .fini = teardown)
{
	uint64_t unit, first = 0;
	uint32_t off;
	bool seen[256] = {false};
	struct cfs_pieces_stat st;

	for (int i = 0; i < 256; i++) {
		cr_assert_eq(cfs_pieces_get(pieces, 4096, &unit, &off), 0);
		if (i == 0)
			first = unit;
		cr_assert_eq(unit, first, "piece %d left the first unit", i);
		cr_assert_eq(off % 4096, 0);
		cr_assert_not(seen[off / 4096], "offset %u given twice", off);
		seen[off / 4096] = true;
	}
	cfs_pieces_stat(pieces, &st);
	cr_assert_eq(st.units, 1);
	cr_assert_eq(st.used_bytes, UNIT);
	cr_assert_eq(st.free_bytes, 0);
	cr_assert_eq(st.pieces, 256);
	/* Full: the next one takes another unit, next to the first. */
	cr_assert_eq(cfs_pieces_get(pieces, 4096, &unit, &off), 0);
	cr_assert_eq(unit, first + 1);
	check_counts();
}

Test(piece, best_fit_keeps_large_blocks_whole, .init = setup, .fini = teardown)
{
	uint64_t u1, u2, u3;
	uint32_t o1, o2, o3, o4;

	/* 4 KiB then 256 KiB in one unit: the small one does not split the
	 * half the large one needs. */
	cr_assert_eq(cfs_pieces_get(pieces, 4096, &u1, &o1), 0);
	cr_assert_eq(cfs_pieces_get(pieces, 512 * KIB, &u2, &o2), 0);
	cr_assert_eq(u2, u1);
	cr_assert_eq(o2 / (512 * KIB), 1 - o1 / (512 * KIB));
	/* A second 4 KiB goes next to the first (the smallest free block). */
	cr_assert_eq(cfs_pieces_get(pieces, 4096, &u3, &o3), 0);
	cr_assert_eq(u3, u1);
	cr_assert_eq(o3, o1 ^ 4096);
	/* Aligned to its size. */
	cr_assert_eq(cfs_pieces_get(pieces, 64 * KIB, &u3, &o4), 0);
	cr_assert_eq(o4 % (64 * KIB), 0);
	cr_assert_eq(cfs_pieces_get(pieces, 3 * 4096, &u3, &o4), -EINVAL);
	cr_assert_eq(cfs_pieces_get(pieces, 2048, &u3, &o4), -EINVAL);
	cr_assert_eq(cfs_pieces_get(pieces, UNIT, &u3, &o4), -EINVAL);
	check_counts();
}

Test(piece, buddies_merge_and_the_empty_unit_goes_back, .init = setup, .fini = teardown)
{
	uint64_t u[4], big;
	uint32_t o[4], obig;
	struct cfs_alloc_stat as;

	for (int i = 0; i < 4; i++)
		cr_assert_eq(cfs_pieces_get(pieces, 128 * KIB, &u[i], &o[i]), 0);
	cr_assert_eq(cfs_pieces_get(pieces, 512 * KIB, &big, &obig), 0);
	cr_assert_eq(big, u[0]); /* the other half */
	cfs_alloc_stat(alloc, &as);
	cr_assert_eq(as.used_units, 1);
	/* Freed at once (never logged): the quarter merges back. */
	for (int i = 0; i < 4; i++)
		cfs_pieces_free(pieces, u[i], o[i], 128 * KIB, 0);
	cr_assert_eq(cfs_pieces_state(pieces, u[0], o[0] & ~(512 * KIB - 1), 512 * KIB), 0);
	cr_assert_eq(cfs_pieces_state(pieces, big, obig, 512 * KIB), 1);
	cfs_pieces_free(pieces, big, obig, 512 * KIB, 0);
	/* Empty: back to the allocator, free at once. */
	cfs_alloc_stat(alloc, &as);
	cr_assert_eq(as.used_units, 0);
	cr_assert_eq(as.free_units, 16);
	cr_assert_eq(cfs_pieces_state(pieces, big, 0, 512 * KIB), -1);
	check_counts();
}

Test(piece, busy_until_durable, .init = setup, .fini = teardown)
{
	uint64_t u, u2;
	uint32_t o, o2;
	struct cfs_pieces_stat st;
	struct cfs_alloc_stat as;

	cr_assert_eq(cfs_pieces_get(pieces, 16 * KIB, &u, &o), 0);
	cfs_pieces_free(pieces, u, o, 16 * KIB, 7);
	cfs_pieces_stat(pieces, &st);
	cr_assert_eq(st.busy_bytes, 16 * KIB);
	cr_assert_eq(st.used_bytes, 0);
	/* Busy: never handed out again before the free is durable. */
	cr_assert_eq(cfs_pieces_state(pieces, u, o, 16 * KIB), 1);
	cr_assert_eq(cfs_pieces_get(pieces, 16 * KIB, &u2, &o2), 0);
	cr_assert(u2 != u || o2 != o);
	cfs_pieces_free(pieces, u2, o2, 16 * KIB, 9);
	cr_assert_eq(cfs_pieces_commit_done(pieces, 6), 0);
	cr_assert_eq(cfs_pieces_commit_done(pieces, 7), 1);
	cr_assert_eq(cfs_pieces_state(pieces, u, o, 16 * KIB), 0);
	cfs_alloc_stat(alloc, &as);
	cr_assert_eq(as.used_units, 1); /* the second piece still holds it */
	cr_assert_eq(cfs_pieces_commit_done(pieces, 9), 1);
	/* Empty once its last free is durable: back as a busy unit of that
	 * free, which the allocator's commit releases. */
	cfs_alloc_stat(alloc, &as);
	cr_assert_eq(as.used_units, 0);
	cr_assert_eq(as.busy_units, 1);
	cr_assert_eq(cfs_alloc_commit_done(alloc, 9, false), 1);
	cfs_pieces_stat(pieces, &st);
	cr_assert_eq(st.units, 0);
	cr_assert_eq(st.busy_bytes, 0);
	check_counts();
}

Test(piece, eagain_while_pieces_are_busy_then_enospc)
{
	uint64_t u;
	uint32_t o;

	setup_units(1);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(cfs_pieces_get(pieces, 512 * KIB, &u, &o), 0);
	cr_assert_eq(cfs_pieces_get(pieces, 4096, &u, &o), -ENOSPC);
	cfs_pieces_free(pieces, u, o, 512 * KIB, 3);
	cr_assert_eq(cfs_pieces_get(pieces, 4096, &u, &o), -EAGAIN);
	cfs_pieces_commit_done(pieces, 3);
	cr_assert_eq(cfs_pieces_get(pieces, 4096, &u, &o), 0);
	check_counts();
	teardown();
}

Test(piece, reserve_rebuilds_and_refuses_overlaps, .init = setup, .fini = teardown)
{
	uint64_t u;
	uint32_t o;

	cr_assert_eq(cfs_pieces_reserve(pieces, 3, 64 * KIB, 64 * KIB), 0);
	cr_assert_eq(cfs_alloc_unit_state(alloc, 3), CFS_ALLOC_STATE_USED);
	/* Inside it, around it, or the same: overlaps. */
	cr_assert_eq(cfs_pieces_reserve(pieces, 3, 64 * KIB, 64 * KIB), -EEXIST);
	cr_assert_eq(cfs_pieces_reserve(pieces, 3, 96 * KIB, 4096), -EEXIST);
	cr_assert_eq(cfs_pieces_reserve(pieces, 3, 0, 128 * KIB), -EEXIST);
	cr_assert_eq(cfs_pieces_reserve(pieces, 3, 0, 64 * KIB), 0);
	/* Not a piece: misaligned, too large, too small. */
	cr_assert_eq(cfs_pieces_reserve(pieces, 3, 4096, 8192), -EINVAL);
	cr_assert_eq(cfs_pieces_reserve(pieces, 3, 0, UNIT), -EINVAL);
	cr_assert_eq(cfs_pieces_reserve(pieces, 3, 0, 1024), -EINVAL);
	/* A unit a file maps whole holds no pieces. */
	cr_assert_eq(cfs_alloc_reserve(alloc, 5, 1), 0);
	cr_assert_eq(cfs_pieces_reserve(pieces, 5, 0, 4096), -EEXIST);
	cr_assert_eq(cfs_pieces_reserve(pieces, 99, 0, 4096), -ERANGE);
	/* Allocation after a rebuild fills unit 3 first. */
	cr_assert_eq(cfs_pieces_get(pieces, 4096, &u, &o), 0);
	cr_assert_eq(u, 3);
	cr_assert_geq(o, 128 * KIB);
	check_counts();
}

Test(piece, freeing_what_is_not_in_use_aborts, .init = setup, .fini = teardown, .signal = SIGABRT)
{
	uint64_t u;
	uint32_t o;

	cr_assert_eq(cfs_pieces_get(pieces, 8192, &u, &o), 0);
	cfs_pieces_free(pieces, u, o ^ 8192, 8192, 0);
}

/* ---- random runs against a model ------------------------------------------------- */

#define RUNITS 8u
#define RBLOCKS (UNIT / 4096)

struct held {
	uint64_t unit;
	uint32_t off, bytes;
	uint64_t seq; /* 0: in use; else busy until this seq */
};

Test(piece, random_against_a_model, .timeout = 60)
{
	static uint8_t owner[RUNITS][RBLOCKS]; /* 0 free, 1 in use, 2 busy */
	struct held *h = calloc(4096, sizeof(*h));
	size_t n = 0;
	uint64_t seq = 1, durable = 0;
	unsigned rng = 12345;

	cr_assert(h);
	memset(owner, 0, sizeof(owner));
	setup_units(RUNITS);
	for (int step = 0; step < 20000; step++) {
		unsigned r = (rng = rng * 1103515245u + 12345u) >> 8;

		if (r % 10 < 5 && n < 4096) {
			uint32_t bytes = 4096u << (r / 16 % 8);
			uint64_t u;
			uint32_t o;
			int ret = cfs_pieces_get(pieces, bytes, &u, &o);

			if (ret) {
				cr_assert(ret == -ENOSPC || ret == -EAGAIN, "get: %d", ret);
				continue;
			}
			cr_assert_lt(u, RUNITS);
			cr_assert_eq(o % bytes, 0);
			for (uint32_t b = o / 4096; b < (o + bytes) / 4096; b++) {
				cr_assert_eq(owner[u][b], 0, "block %u of unit %llu given twice", b,
					     (unsigned long long)u);
				owner[u][b] = 1;
			}
			h[n++] = (struct held){u, o, bytes, 0};
		} else if (r % 10 < 9 && n) {
			size_t i = r / 16 % n;

			if (h[i].seq)
				continue;
			h[i].seq = r % 3 ? seq++ : 0;
			cfs_pieces_free(pieces, h[i].unit, h[i].off, h[i].bytes, h[i].seq);
			for (uint32_t b = h[i].off / 4096; b < (h[i].off + h[i].bytes) / 4096; b++)
				owner[h[i].unit][b] = h[i].seq ? 2 : 0;
			if (!h[i].seq)
				h[i] = h[--n];
		} else {
			durable = seq - 1 - r / 16 % 3;
			if (durable >= seq)
				durable = 0;
			cfs_pieces_commit_done(pieces, durable);
			cfs_alloc_commit_done(alloc, durable, false);
			for (size_t i = 0; i < n;) {
				if (h[i].seq && h[i].seq <= durable) {
					for (uint32_t b = h[i].off / 4096;
					     b < (h[i].off + h[i].bytes) / 4096; b++)
						owner[h[i].unit][b] = 0;
					h[i] = h[--n];
					continue;
				}
				i++;
			}
		}
		check_counts();
	}
	/* Everything in use or busy is exactly what the model holds. */
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(cfs_pieces_state(pieces, h[i].unit, h[i].off, h[i].bytes), 1);
	free(h);
	teardown();
}
