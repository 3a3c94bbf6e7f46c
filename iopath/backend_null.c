// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * backend_null.c — the "null" backend: every request succeeds without
 * moving a byte (fio's engines/null.c). It exists to measure the floor of
 * iopath itself -- validation, statistics, the queue/submit/reap calls and
 * done() -- in bench/iopath_bench -N, apart from any device.
 *
 * Geometry: cfg->size_bytes (required), sectors of cfg->align_bytes (512
 * when 0), buffers aligned the same. queue() appends to a staged list,
 * submit() moves the staged list to a finished list, reap() completes the
 * finished list. Both lists are guarded by q->submit_lock (reap takes it
 * once per call to detach the finished list), because submit and reap may
 * run in two threads.
 *
 * What this file does not do: it stores nothing (a READ leaves the buffer
 * as it was), never blocks, and has no event fd.
 */
#include <errno.h>
#include <stdlib.h>

#include "iopath/backend.h"

struct null_queue {
	struct cfs_io_req *staged_head, *staged_tail;
	struct cfs_io_req *finished_head, *finished_tail;
};

static int null_open(struct cfs_io *io, const struct cfs_io_config *cfg)
{
	uint32_t align = cfg->align_bytes ? cfg->align_bytes : 512;

	if (!cfg->size_bytes || (align & (align - 1)) || align > CFS_IO_SECTOR_MAX)
		return -EINVAL;
	io->geo.size_bytes = cfg->size_bytes & ~(uint64_t)(align - 1);
	io->geo.logical_sector_bytes = align;
	io->geo.physical_sector_bytes = align;
	io->geo.mem_align_bytes = align;
	io->geo.is_block_device = false;
	io->geo.direct = true;
	io->geo.discard_supported = true;
	io->geo.backend = "null";
	io->priv = NULL;
	return 0;
}

static void null_close(struct cfs_io *io)
{
}

static int null_queue_init(struct cfs_ioq *q, const struct cfs_ioq_config *cfg)
{
	q->priv = calloc(1, sizeof(struct null_queue));
	return q->priv ? 0 : -ENOMEM;
}

static void null_queue_fini(struct cfs_ioq *q)
{
	free(q->priv);
	q->priv = NULL;
}

static int null_queue_req(struct cfs_ioq *q, struct cfs_io_req *req)
{
	struct null_queue *nq = q->priv;

	req->iop_next = NULL;
	if (nq->staged_tail)
		nq->staged_tail->iop_next = req;
	else
		nq->staged_head = req;
	nq->staged_tail = req;
	return 0;
}

/* Called with q->submit_lock held. */
static int null_submit_locked(struct null_queue *nq)
{
	struct cfs_io_req *req;
	int n = 0;

	for (req = nq->staged_head; req; req = req->iop_next)
		n++;
	if (!n)
		return 0;
	if (nq->finished_tail)
		nq->finished_tail->iop_next = nq->staged_head;
	else
		nq->finished_head = nq->staged_head;
	nq->finished_tail = nq->staged_tail;
	nq->staged_head = nq->staged_tail = NULL;
	return n;
}

static int null_submit(struct cfs_ioq *q)
{
	return null_submit_locked(q->priv);
}

static int null_reap(struct cfs_ioq *q, unsigned min_complete)
{
	struct null_queue *nq = q->priv;
	struct cfs_io_req *list, *req;
	int completed = 0;

	pthread_mutex_lock(&q->submit_lock);
	if (min_complete)
		null_submit_locked(nq); /* as the uring backend does before sleeping */
	list = nq->finished_head;
	nq->finished_head = nq->finished_tail = NULL;
	pthread_mutex_unlock(&q->submit_lock);

	while (list) {
		req = list;
		list = req->iop_next;
		req->iop_next = NULL;
		cfs_ioq_complete(q, req, req->op == CFS_IO_FLUSH ? 0 : (int)req->length_bytes);
		completed++;
	}
	return completed;
}

const struct cfs_backend_ops cfs_backend_null = {
	.name = "null",
	.version = CFS_BACKEND_OPS_VERSION,
	.open = null_open,
	.close = null_close,
	.queue_init = null_queue_init,
	.queue_fini = null_queue_fini,
	.queue = null_queue_req,
	.submit = null_submit,
	.reap = null_reap,
	.event_fd = NULL,
};
