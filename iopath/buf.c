// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * buf.c — the per-queue buffer arena: a binary buddy allocator over the
 * queue's mmap'ed (and, for the uring backend, registered) memory.
 *
 * Blocks are 4 KiB << order for order 0..BUF_ORDER_MAX (4 KiB .. 1 MiB =
 * CFS_IO_LENGTH_MAX); a request is rounded up to the next power of two of
 * pages. Every block is aligned to its own size relative to the arena, and
 * the arena is page aligned, so every buffer is at least 4096-byte aligned
 * (every sector size up to CFS_IO_SECTOR_MAX) and no block ever straddles a
 * 1 GiB boundary of the arena (the uring backend registers one iovec per
 * GiB). Freeing merges a block with its buddy while the buddy is free and of
 * the same order, so the arena does not fragment into small pieces under a
 * mix of 512 B and 1 MiB requests; the worst case is internal waste (a
 * 512 B request takes 4 KiB, a 520 KiB one takes 1 MiB).
 *
 * State lives outside the arena (the arena may be registered memory the
 * device writes into): one byte per page saying "head of a free block of
 * order k", "head of a used block of order k" or "inside a block", and
 * per-order doubly linked free lists threaded through two index arrays, so
 * get and put are O(BUF_ORDER_MAX) with no allocation. All of it is
 * allocated once in cfs_buf_arena_init().
 *
 * What this file does not do: it takes no lock. The arena belongs to the
 * thread that owns the queue's submission side (iopath.h); a buffer must be
 * put back by that thread too. It does not zero memory.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "iopath/backend.h"
#include "iopath/buf.h"

#define BUF_PAGE_SHIFT 12
#define BUF_PAGE_BYTES (1u << BUF_PAGE_SHIFT)
#define BUF_ORDER_MAX 8
#define BUF_ORDERS (BUF_ORDER_MAX + 1)
#define BUF_NONE UINT32_MAX

#define STATE_FREE 0x80u /* head of a free block; low bits: order */
#define STATE_USED 0x40u /* head of a handed-out block; low bits: order */
#define STATE_ORDER 0x0fu

_Static_assert((BUF_PAGE_BYTES << BUF_ORDER_MAX) == CFS_IO_LENGTH_MAX,
	       "largest arena block must be the largest request");
_Static_assert(BUF_PAGE_BYTES % CFS_IO_SECTOR_MAX == 0,
	       "arena blocks must be aligned for the largest sector");

struct buf_arena {
	uint32_t pages;
	uint32_t free_pages;
	uint32_t free_head[BUF_ORDERS];
	uint32_t *next; /* free-list links, indexed by page */
	uint32_t *prev;
	uint8_t *state; /* STATE_* | order for block heads, 0 inside */
};

static void list_push(struct buf_arena *a, uint32_t page, unsigned order)
{
	uint32_t head = a->free_head[order];

	a->next[page] = head;
	a->prev[page] = BUF_NONE;
	if (head != BUF_NONE)
		a->prev[head] = page;
	a->free_head[order] = page;
	a->state[page] = (uint8_t)(STATE_FREE | order);
}

static void list_remove(struct buf_arena *a, uint32_t page, unsigned order)
{
	uint32_t next = a->next[page], prev = a->prev[page];

	if (prev != BUF_NONE)
		a->next[prev] = next;
	else
		a->free_head[order] = next;
	if (next != BUF_NONE)
		a->prev[next] = prev;
	a->state[page] = 0;
}

int cfs_buf_arena_init(struct cfs_ioq *q)
{
	struct buf_arena *a;
	uint32_t pages, page, tail[BUF_ORDERS];
	unsigned order;
	size_t bytes;

	q->arena_state = NULL;
	if (!q->arena || !q->arena_bytes)
		return 0;
	if (q->arena_bytes / BUF_PAGE_BYTES > UINT32_MAX - 1)
		return -EINVAL;
	pages = (uint32_t)(q->arena_bytes / BUF_PAGE_BYTES);
	/* One allocation: header, then next[], prev[], state[]. */
	bytes = sizeof(*a) + (size_t)pages * (2 * sizeof(uint32_t) + 1);
	a = calloc(1, bytes);
	if (!a)
		return -ENOMEM;
	a->next = (uint32_t *)(a + 1);
	a->prev = a->next + pages;
	a->state = (uint8_t *)(a->prev + pages);
	a->pages = pages;
	a->free_pages = pages;
	for (order = 0; order < BUF_ORDERS; order++)
		a->free_head[order] = BUF_NONE;

	/* Cover the arena with the largest blocks aligned to their own size.
	 * Blocks are appended, so the lowest addresses are handed out first. */
	for (order = 0; order < BUF_ORDERS; order++)
		tail[order] = BUF_NONE;
	page = 0;
	while (page < pages) {
		order = BUF_ORDER_MAX;
		while (order > 0 && ((page & ((1u << order) - 1)) || pages - page < (1u << order)))
			order--;
		a->next[page] = BUF_NONE;
		a->prev[page] = tail[order];
		if (tail[order] != BUF_NONE)
			a->next[tail[order]] = page;
		else
			a->free_head[order] = page;
		tail[order] = page;
		a->state[page] = (uint8_t)(STATE_FREE | order);
		page += 1u << order;
	}
	q->arena_state = a;
	return 0;
}

void cfs_buf_arena_fini(struct cfs_ioq *q)
{
	free(q->arena_state);
	q->arena_state = NULL;
}

static unsigned order_for(uint32_t length_bytes)
{
	uint32_t pages = (length_bytes + BUF_PAGE_BYTES - 1) >> BUF_PAGE_SHIFT;
	unsigned order = 0;

	while ((1u << order) < pages)
		order++;
	return order;
}

void *cfs_ioq_buf_get(struct cfs_ioq *q, uint32_t length_bytes)
{
	struct buf_arena *a = q->arena_state;
	unsigned order, k;
	uint32_t page;

	if (!a || length_bytes == 0 || length_bytes > CFS_IO_LENGTH_MAX)
		return NULL;
	order = order_for(length_bytes);
	for (k = order; k < BUF_ORDERS && a->free_head[k] == BUF_NONE; k++)
		;
	if (k == BUF_ORDERS)
		return NULL;
	page = a->free_head[k];
	list_remove(a, page, k);
	/* Split down to the wanted order, freeing the upper halves. */
	while (k > order) {
		k--;
		list_push(a, page + (1u << k), k);
	}
	a->state[page] = (uint8_t)(STATE_USED | order);
	a->free_pages -= 1u << order;
	return (char *)q->arena + ((size_t)page << BUF_PAGE_SHIFT);
}

void cfs_ioq_buf_put(struct cfs_ioq *q, void *buf)
{
	struct buf_arena *a = q->arena_state;
	uintptr_t base = (uintptr_t)q->arena, addr = (uintptr_t)buf;
	unsigned order;
	uint32_t page;

	if (!buf)
		return;
	/* A foreign or twice-freed pointer would hand one buffer to two I/Os. */
	CFS_ASSERT(a && addr >= base && addr < base + q->arena_bytes);
	CFS_ASSERT(((addr - base) & (BUF_PAGE_BYTES - 1)) == 0);
	page = (uint32_t)((addr - base) >> BUF_PAGE_SHIFT);
	CFS_ASSERT(a->state[page] & STATE_USED);
	order = a->state[page] & STATE_ORDER;
	a->state[page] = 0;
	a->free_pages += 1u << order;

	while (order < BUF_ORDER_MAX) {
		uint32_t buddy = page ^ (1u << order);

		if (buddy >= a->pages || a->pages - buddy < (1u << order) ||
		    a->state[buddy] != (STATE_FREE | order))
			break;
		list_remove(a, buddy, order);
		if (buddy < page)
			page = buddy;
		order++;
	}
	list_push(a, page, order);
}

bool cfs_ioq_buf_is_fixed(const struct cfs_ioq *q, const void *buf, uint32_t length_bytes)
{
	uintptr_t base = (uintptr_t)q->arena, addr = (uintptr_t)buf;

	if (!q->arena_registered || !buf || addr < base)
		return false;
	return addr - base <= q->arena_bytes && length_bytes <= q->arena_bytes - (addr - base);
}

size_t cfs_buf_arena_free_bytes(const struct cfs_ioq *q)
{
	const struct buf_arena *a = q->arena_state;

	return a ? (size_t)a->free_pages << BUF_PAGE_SHIFT : 0;
}
