/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dio_inval.c — drop a range from the page cache after an O_DIRECT write
 * reached the store, then answer the write (see dio_inval.h).
 *
 * A fixed ring of handed-over writes under one mutex, and one worker. The
 * mutex is taken only for O_DIRECT writes to files that also have cached
 * opens (a backup or cat next to the database), which the kernel already
 * serializes on the inode lock while it submits them; every other request
 * never comes here. The ring is never full in practice: the kernel keeps at
 * most CFS_MAX_BACKGROUND asynchronous requests in flight, and a synchronous
 * writer holds its file's inode lock until it is answered. If it ever is
 * full, the loop waits for the worker (which only waits for the kernel).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include "fs/fuse/dio_inval.h"

#define RING_SLOTS 1024u

struct handed_write {
	fuse_req_t req;
	uint64_t ino;
	uint64_t offset;
	uint32_t length;
};

static struct {
	struct fuse_session *se;
	pthread_mutex_t lock;
	pthread_cond_t work;  /* the ring got an entry, or stop */
	pthread_cond_t space; /* the ring got a free slot */
	struct handed_write ring[RING_SLOTS];
	unsigned head, count;
	bool stop, started;
	pthread_t thread;
} W = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.work = PTHREAD_COND_INITIALIZER,
	.space = PTHREAD_COND_INITIALIZER,
};

static void *worker(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&W.lock);
	for (;;) {
		struct handed_write h;

		while (!W.count && !W.stop)
			pthread_cond_wait(&W.work, &W.lock);
		if (!W.count)
			break;
		h = W.ring[W.head];
		W.head = (W.head + 1) % RING_SLOTS;
		W.count--;
		pthread_cond_signal(&W.space);
		pthread_mutex_unlock(&W.lock);
		/* -ENOENT: the kernel has no inode for it, so no pages either;
		 * after an unmount every notification fails, nothing to drop. */
		(void)fuse_lowlevel_notify_inval_inode(W.se, (fuse_ino_t)h.ino, (off_t)h.offset,
						       (off_t)h.length);
		fuse_reply_write(h.req, h.length);
		pthread_mutex_lock(&W.lock);
	}
	pthread_mutex_unlock(&W.lock);
	return NULL;
}

int cfs_dio_inval_start(struct fuse_session *se)
{
	int ret;

	W.se = se;
	W.stop = false;
	ret = pthread_create(&W.thread, NULL, worker, NULL);
	if (ret)
		return -ret;
	W.started = true;
	return 0;
}

void cfs_dio_inval_stop(void)
{
	if (!W.started)
		return;
	pthread_mutex_lock(&W.lock);
	W.stop = true;
	pthread_cond_signal(&W.work);
	pthread_mutex_unlock(&W.lock);
	pthread_join(W.thread, NULL);
	W.started = false;
}

void cfs_dio_inval_reply_write(fuse_req_t req, uint64_t ino, uint64_t offset, uint32_t length)
{
	if (!W.started) {
		/* No worker (unit tests of the data path): nothing to drop. */
		fuse_reply_write(req, length);
		return;
	}
	pthread_mutex_lock(&W.lock);
	while (W.count == RING_SLOTS)
		pthread_cond_wait(&W.space, &W.lock);
	W.ring[(W.head + W.count) % RING_SLOTS] =
		(struct handed_write){.req = req, .ino = ino, .offset = offset, .length = length};
	W.count++;
	pthread_cond_signal(&W.work);
	pthread_mutex_unlock(&W.lock);
}
