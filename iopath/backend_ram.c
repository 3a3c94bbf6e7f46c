// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * backend_ram.c — backend "ram": the store of the RAM temp mount
 * (`chunkfs -o ram,size=4G`), and a fast, exact test double for the rest of
 * iopath (the shape of fio's engines/null.c, but the bytes are kept).
 *
 * The whole capacity is one anonymous private mapping reserved at open with
 * MAP_NORESERVE: the kernel hands out a zero page on first touch, so memory
 * grows with the data written, never with the size of the mount. The mapping
 * never moves or grows, which is what makes it safe for several queues on
 * several threads to copy in and out of it with no lock at all; two writes to
 * the same bytes at once race exactly as they would on a device, and are the
 * caller's business.
 *
 * queue() does the memcpy at once (there is no device to wait for) and pushes
 * the request on the queue's completion list; done() runs at the next reap,
 * never inside queue(), as the iopath contract requires. The list is a
 * lock-free stack: the submitting thread pushes, the reaping thread takes the
 * whole stack with one exchange, so the two sides never share a lock.
 *
 * DISCARD and ZERO give memory back: whole pages are dropped with
 * MADV_DONTNEED (an anonymous private page reads as zeros afterwards) and the
 * partial pages at either edge are cleared with memset.
 *
 * Geometry: the logical sector is the alignment the mount advertises
 * (cfg->align_bytes, 512 by default in the daemon) and iopath enforces it,
 * unlike tmpfs, so a database that works here works on the device. With
 * align_bytes == 0 anything is accepted (sector 1), like tmpfs.
 *
 * What this file does not do: no persistence (closing the target frees every
 * byte), no ENOSPC accounting (the daemon's allocator owns space; iopath only
 * refuses ranges past the end), and no write ordering beyond program order:
 * a request is in the store when queue() returns.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "iopath/backend.h"

#define RAM_HUGE_BYTES (2u << 20) /* x86-64 PMD size: THP alignment */
#define RAM_MINCORE_PAGES 4096u	  /* resident scan: pages per mincore() call */

struct ram_target {
	uint8_t *base;	     /* start of the store, never moves */
	uint64_t size_bytes; /* capacity the caller asked for */
	void *map;	     /* what munmap() gets back */
	size_t map_bytes;
	size_t page_bytes;
	bool mlocked; /* CFS_IO_RAM_MLOCK took effect */
};

struct ram_queue {
	_Atomic(struct cfs_io_req *) done_head; /* finished, LIFO; linked by iop_next */
	atomic_uint staged;			/* queued since the last submit */
	int event_fd;				/* eventfd, -1 if none */
	atomic_bool event_armed;		/* someone polls event_fd: signal it */
};

static inline uint64_t align_down(uint64_t v, uint64_t a)
{
	return v / a * a;
}

static inline uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static int ram_open(struct cfs_io *io, const struct cfs_io_config *cfg)
{
	struct ram_target *rt;
	uint32_t align = cfg->align_bytes;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), extra = 0;
	uint8_t *map;
	int ret;

	if (cfg->size_bytes == 0) {
		fprintf(stderr, "chunkfs: ram backend: a size is required\n");
		return -EINVAL;
	}
	if (align && ((align & (align - 1)) || align > CFS_IO_SECTOR_MAX)) {
		fprintf(stderr, "chunkfs: ram backend: alignment %u is not a power of two <= %u\n",
			align, CFS_IO_SECTOR_MAX);
		return -EINVAL;
	}
	if (align && cfg->size_bytes % align) {
		fprintf(stderr, "chunkfs: ram backend: size %llu is not a multiple of %u\n",
			(unsigned long long)cfg->size_bytes, align);
		return -EINVAL;
	}
	if (cfg->size_bytes > SIZE_MAX - 2 * RAM_HUGE_BYTES)
		return -EFBIG;

	rt = calloc(1, sizeof(*rt));
	if (!rt)
		return -ENOMEM;
	rt->page_bytes = page;
	rt->size_bytes = cfg->size_bytes;
	/* THP needs 2 MiB-aligned virtual addresses: over-reserve and skip the
	 * head. Reserving address space costs nothing with MAP_NORESERVE. */
	if (cfg->ram_flags & CFS_IO_RAM_HUGEPAGES)
		extra = RAM_HUGE_BYTES;
	rt->map_bytes = align_up(cfg->size_bytes, page) + extra;
	map = mmap(NULL, rt->map_bytes, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		fprintf(stderr, "chunkfs: ram backend: cannot reserve %llu bytes: %s\n",
			(unsigned long long)cfg->size_bytes, strerror(-ret));
		goto out_free;
	}
	rt->map = map;
	rt->base = extra ? (uint8_t *)align_up((uintptr_t)map, RAM_HUGE_BYTES) : map;

	/*
	 * Huge pages: fewer TLB misses and page faults for large sequential
	 * copies, but a DISCARD of less than a whole 2 MiB page cannot return
	 * memory until the kernel splits the huge page (or all of it is
	 * discarded): a punched temp table may keep its RSS for a while.
	 */
	if (cfg->ram_flags & CFS_IO_RAM_HUGEPAGES &&
	    madvise(rt->base, align_up(cfg->size_bytes, page), MADV_HUGEPAGE) < 0)
		fprintf(stderr, "chunkfs: ram backend: MADV_HUGEPAGE: %s (continuing)\n",
			strerror(errno));

	/*
	 * mlock on fault: pages are locked as the store touches them, so the
	 * temp data never goes to swap. The cost: resident pages cannot be
	 * reclaimed under memory pressure, and the kernel charges the WHOLE
	 * capacity against RLIMIT_MEMLOCK at this call (unless CAP_IPC_LOCK),
	 * even though only touched pages are resident.
	 */
	if (cfg->ram_flags & CFS_IO_RAM_MLOCK) {
		if (mlock2(rt->base, align_up(cfg->size_bytes, page), MLOCK_ONFAULT) < 0) {
			ret = -errno;
			fprintf(stderr,
				"chunkfs: ram backend: mlock2(MLOCK_ONFAULT) of %llu bytes: %s "
				"(RLIMIT_MEMLOCK counts the whole size)\n",
				(unsigned long long)cfg->size_bytes, strerror(-ret));
			goto out_unmap;
		}
		rt->mlocked = true;
	}

	io->priv = rt;
	io->geo.size_bytes = cfg->size_bytes;
	io->geo.logical_sector_bytes = align ? align : 1;
	/* Nothing tears in RAM, but a caller that locks or aligns by the
	 * physical sector (read-modify-write) should use whole pages. */
	io->geo.physical_sector_bytes = align ? align : 4096;
	io->geo.mem_align_bytes = align ? align : 1;
	io->geo.is_block_device = false;
	io->geo.direct = false;
	io->geo.discard_supported = true;
	io->geo.backend = "ram";
	return 0;

out_unmap:
	munmap(map, rt->map_bytes);
out_free:
	free(rt);
	return ret;
}

static void ram_close(struct cfs_io *io)
{
	struct ram_target *rt = io->priv;

	if (!rt)
		return;
	munmap(rt->map, rt->map_bytes);
	free(rt);
	io->priv = NULL;
}

static int ram_queue_init(struct cfs_ioq *q, const struct cfs_ioq_config *cfg)
{
	struct ram_queue *rq = calloc(1, sizeof(*rq));

	if (!rq)
		return -ENOMEM;
	atomic_init(&rq->done_head, NULL);
	atomic_init(&rq->staged, 0);
	atomic_init(&rq->event_armed, false);
	/* Creating it is cheap; it is only written once someone asks for it. */
	rq->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	q->priv = rq;
	return 0;
}

static void ram_queue_fini(struct cfs_ioq *q)
{
	struct ram_queue *rq = q->priv;

	if (!rq)
		return;
	/* The core drains every request before destroying the queue. */
	CFS_ASSERT(atomic_load(&rq->done_head) == NULL);
	if (rq->event_fd >= 0)
		close(rq->event_fd);
	free(rq);
	q->priv = NULL;
}

/*
 * Give [offset, offset+length) back to the kernel: whole pages are dropped
 * (zero-filled on the next touch), partial pages at the edges cleared by hand.
 */
static void ram_punch(struct ram_target *rt, uint64_t offset, uint64_t length)
{
	uint64_t end = offset + length;
	uint64_t first = align_up(offset, rt->page_bytes);
	uint64_t last = align_down(end, rt->page_bytes);
	uint8_t *p;

	if (first >= last) {
		memset(rt->base + offset, 0, length);
		return;
	}
	memset(rt->base + offset, 0, first - offset);
	memset(rt->base + last, 0, end - last);
	p = rt->base + first;
	/* MADV_DONTNEED refuses locked pages: unlock the span, drop it, and
	 * lock-on-fault again (the VMAs merge back). The raw system call,
	 * because ASan's munlock() interceptor does nothing. */
	if (rt->mlocked)
		syscall(SYS_munlock, p, (size_t)(last - first));
	if (madvise(p, last - first, MADV_DONTNEED) < 0)
		memset(p, 0, last - first); /* cannot fail on our own mapping; stay correct */
	if (rt->mlocked)
		mlock2(p, last - first, MLOCK_ONFAULT);
}

static int ram_queue(struct cfs_ioq *q, struct cfs_io_req *req)
{
	struct ram_target *rt = q->io->priv;
	struct ram_queue *rq = q->priv;
	struct cfs_io_req *head;

	/* The core validated the range; re-check, since a bad one here would
	 * scribble over the heap rather than fail an I/O. */
	CFS_ASSERT(req->offset_bytes <= rt->size_bytes &&
		   req->length_bytes <= rt->size_bytes - req->offset_bytes);

	switch (req->op) {
	case CFS_IO_READ:
		memcpy(req->buf, rt->base + req->offset_bytes, req->length_bytes);
		break;
	case CFS_IO_WRITE:
		memcpy(rt->base + req->offset_bytes, req->buf, req->length_bytes);
		break;
	case CFS_IO_DISCARD:
	case CFS_IO_ZERO:
		ram_punch(rt, req->offset_bytes, req->length_bytes);
		break;
	case CFS_IO_FLUSH:
		break; /* nothing is volatile beyond the store itself */
	default:
		CFS_ASSERT(!"unknown op");
	}
	req->done_bytes = req->length_bytes;

	head = atomic_load_explicit(&rq->done_head, memory_order_relaxed);
	do
		req->iop_next = head;
	while (!atomic_compare_exchange_weak_explicit(&rq->done_head, &head, req,
						      memory_order_release, memory_order_relaxed));
	atomic_fetch_add_explicit(&rq->staged, 1, memory_order_relaxed);
	return 0;
}

static int ram_submit(struct cfs_ioq *q)
{
	struct ram_queue *rq = q->priv;
	unsigned n = atomic_exchange_explicit(&rq->staged, 0, memory_order_relaxed);
	uint64_t one = 1;

	/* One eventfd write per batch, and only when a poller asked for it. */
	if (n && atomic_load_explicit(&rq->event_armed, memory_order_relaxed) &&
	    write(rq->event_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, so it is readable anyway */
	}
	return (int)n;
}

/*
 * Everything queued has already happened, so reap never waits: it returns
 * what is there, even if that is fewer than min_complete. Completions queued
 * by done() callbacks (read-modify-write stages) are reaped in the same call
 * while min_complete is not reached.
 */
static int ram_reap(struct cfs_ioq *q, unsigned min_complete)
{
	struct ram_queue *rq = q->priv;
	struct cfs_io_req *list, *next, *fifo;
	unsigned n = 0;

	/* The poller reads (re-arms) the eventfd before calling reap, as
	 * iopath.h asks; a push after our take is followed by its submit's
	 * write, so no completion is left unannounced. */
	do {
		list = atomic_exchange_explicit(&rq->done_head, NULL, memory_order_acquire);
		for (fifo = NULL; list; list = next) { /* LIFO -> FIFO */
			next = list->iop_next;
			list->iop_next = fifo;
			fifo = list;
		}
		for (; fifo; fifo = next) {
			next = fifo->iop_next;
			fifo->iop_next = NULL;
			CFS_ASSERT(fifo->done_bytes == fifo->length_bytes);
			cfs_ioq_complete(q, fifo, (int)fifo->length_bytes);
			n++;
		}
	} while (n < min_complete && atomic_load_explicit(&rq->done_head, memory_order_relaxed));
	return (int)n;
}

static int ram_event_fd(struct cfs_ioq *q)
{
	struct ram_queue *rq = q->priv;
	uint64_t one = 1;

	if (rq->event_fd < 0)
		return -1;
	if (!atomic_exchange(&rq->event_armed, true) && atomic_load(&rq->done_head) &&
	    write(rq->event_fd, &one, sizeof(one)) < 0) {
		/* saturated: readable anyway */
	}
	return rq->event_fd;
}

uint64_t cfs_io_ram_resident_bytes(struct cfs_io *io)
{
	struct ram_target *rt;
	unsigned char vec[RAM_MINCORE_PAGES];
	uint64_t pages, done = 0, resident = 0;

	if (!io || io->ops != &cfs_backend_ram || !io->priv)
		return 0;
	rt = io->priv;
	pages = align_up(rt->size_bytes, rt->page_bytes) / rt->page_bytes;
	while (done < pages) {
		uint64_t n = pages - done < RAM_MINCORE_PAGES ? pages - done : RAM_MINCORE_PAGES;

		if (mincore(rt->base + done * rt->page_bytes, n * rt->page_bytes, vec) < 0)
			return 0;
		for (uint64_t i = 0; i < n; i++)
			resident += vec[i] & 1;
		done += n;
	}
	return resident * rt->page_bytes;
}

void *cfs_io_ram_ptr(struct cfs_io *io, uint64_t offset_bytes, uint64_t length_bytes)
{
	struct ram_target *rt;

	if (!io || io->ops != &cfs_backend_ram || !io->priv)
		return NULL;
	rt = io->priv;
	if (offset_bytes > rt->size_bytes || length_bytes > rt->size_bytes - offset_bytes)
		return NULL;
	return rt->base + offset_bytes;
}

const struct cfs_backend_ops cfs_backend_ram = {
	.name = "ram",
	.version = CFS_BACKEND_OPS_VERSION,
	.open = ram_open,
	.close = ram_close,
	.queue_init = ram_queue_init,
	.queue_fini = ram_queue_fini,
	.queue = ram_queue,
	.submit = ram_submit,
	.reap = ram_reap,
	.event_fd = ram_event_fd,
};
