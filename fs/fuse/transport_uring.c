/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * transport_uring.c — FUSE over io_uring for libfuse 3.14 (see the header and
 * fs/DAEMON.md, "FUSE over io_uring").
 *
 * Per request: the kernel fills an entry (fuse_in_header and op struct in the
 * entry's header buffer, the rest — a WRITE's data, a name — in its payload
 * buffer) and completes the entry's command as task work in the owner loop's
 * thread, which reaps the CQE without a system call. The loop copies the
 * header and op struct into the headroom before the payload (the op struct's
 * size is in_header.len - header - payload), giving libfuse one contiguous
 * message, remembers unique -> entry, and calls fuse_session_process_buf().
 * The reply, now or from a completion, reaches the writev hook: the out header
 * goes to the entry's header buffer, the payload to its payload buffer, and a
 * COMMIT_AND_FETCH SQE is queued; the loop submits the commits of a pass in
 * one io_uring_enter. Compared with /dev/fuse this saves the read(2) and
 * writev(2) per request (and the EAGAIN reads of loops that lost the race).
 *
 * No allocation, log line or lock per request: entries and the unique table
 * are allocated at setup; the table is open addressing with atomics (a
 * request is inserted by its owner loop before libfuse sees it and removed by
 * whichever thread replies).
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fs/fuse/daemon.h"
#include "fs/fuse/data.h"
#include "fs/fuse/proto_ext.h"
#include "fs/fuse/tmpfile.h"
#include "fs/fuse/transport_uring.h"
#include "fs/fuse/unique_map.h"

#define ENTRIES_PER_QUEUE 64u
/* Room before the payload for fuse_in_header + the largest op struct, a
 * whole page so the payload stays page aligned (O_DIRECT without a copy). */
#define HEADROOM_BYTES 4096u
#define ENABLE_PARAM "/sys/module/fuse/parameters/enable_uring"

_Static_assert(sizeof(struct fuse_in_header) + CFS_FUSE_URING_OP_IN_OUT_SZ <= HEADROOM_BYTES,
	       "headroom holds the header and the largest op struct");

struct ent {
	struct cfs_fuse_uring_req_header hdr __attribute__((aligned(64)));
	struct iovec iov[2];
	uint8_t *payload;
	struct cfs_uring_loop *owner;
	uint64_t unique;
	uint16_t qid;
	bool dead; /* the kernel released it (unmount, abort) */
	struct ent *next;
};

struct cfs_uring_loop {
	unsigned index;
	struct io_uring ring;
	bool ring_ready;
	bool registered;
	bool stopped;
	int wake_fd;
	struct ent *ents;
	unsigned nents;
	unsigned live; /* entries the kernel still holds or we answer */
	uint8_t *region;
	size_t region_bytes;
	unsigned sq_pending;
	struct ent *deferred_head; /* CQE'd, waiting for a free request context */
	struct ent *deferred_tail;
	_Atomic(struct ent *) remote; /* replied on another thread, to commit */
	uint64_t ring_requests;
	uint64_t dev_reads;
};

static struct {
	struct fuse_session *se;
	int fd;
	unsigned loop_count;
	unsigned queues;
	size_t payload_bytes;
	struct cfs_uring_loop *loops;
	struct cfs_unique_map uniques; /* request -> entry, while libfuse has it */
	uint64_t init_unique;	       /* the INIT request seen by the read hook */
	bool init_offered;	       /* the kernel's INIT carried FUSE_OVER_IO_URING */
	atomic_bool negotiated;
	uint64_t exited_ring_requests, exited_dev_reads;
} T = {.fd = -1};

static __thread struct cfs_uring_loop *tls_u;
static __thread struct ent *tls_cur; /* the ring request libfuse is handling */

static void *ring_reply_buf(size_t *bytes);

/* ---- SQEs --------------------------------------------------------------------------- */

static void prep_cmd(struct cfs_uring_loop *u, struct ent *e, uint32_t cmd_op)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	struct cfs_fuse_uring_cmd_req *req;

	/* The SQ holds one SQE per entry and an entry has at most one queued. */
	if (!sqe) {
		io_uring_submit(&u->ring);
		u->sq_pending = 0;
		sqe = io_uring_get_sqe(&u->ring);
		if (!sqe)
			abort();
	}
	memset(sqe, 0, 128);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = T.fd;
	sqe->cmd_op = cmd_op;
	sqe->addr = (uint64_t)(uintptr_t)e->iov;
	sqe->len = 2;
	sqe->user_data = (uint64_t)(uintptr_t)e;
	req = (struct cfs_fuse_uring_cmd_req *)sqe->cmd;
	req->qid = e->qid;
	req->commit_id = cmd_op == CFS_FUSE_IO_URING_CMD_COMMIT_AND_FETCH ? e->unique : 0;
	u->sq_pending++;
}

/* ---- libfuse's custom I/O ------------------------------------------------------------ */

static ssize_t hook_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t res = read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	(void)userdata;
	if (res < (ssize_t)sizeof(*in))
		return res;
	if (tls_u)
		tls_u->dev_reads++;
	if (in->opcode == FUSE_INIT &&
	    (size_t)res >= sizeof(*in) + offsetof(struct fuse_init_in, unused)) {
		const struct fuse_init_in *arg = (const void *)(in + 1);

		T.init_unique = in->unique;
		T.init_offered = (arg->flags & FUSE_INIT_EXT) &&
				 (arg->flags2 & CFS_FUSE_OVER_IO_URING_FLAGS2);
	}
	return res;
}

static void wake(struct cfs_uring_loop *u)
{
	uint64_t one = 1;

	if (write(u->wake_fd, &one, sizeof(one)) != sizeof(one)) {
		/* cannot fail short of a counter overflow */
	}
}

/* Adds FUSE_OVER_IO_URING to the INIT reply when the kernel offered it. */
static void init_reply(struct iovec *iov, int count)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	struct fuse_init_out *arg;

	if (!T.init_offered || out->error || count < 2 ||
	    iov[1].iov_len < offsetof(struct fuse_init_out, unused)) {
		fuse_log(FUSE_LOG_ERR, "chunkfs: FUSE over io_uring: the kernel did not offer it "
				       "in INIT; using /dev/fuse\n");
		T.init_unique = 0;
		return;
	}
	arg = iov[1].iov_base;
	arg->flags |= FUSE_INIT_EXT;
	arg->flags2 |= CFS_FUSE_OVER_IO_URING_FLAGS2;
}

static ssize_t hook_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	struct ent *e;
	size_t total = 0, copied = 0;
	bool init;
	ssize_t res;

	(void)userdata;
	cfs_proto_reply(iov, count);
	init = out->unique && out->unique == T.init_unique;
	/* NULL: a /dev/fuse request, or a reply made after teardown (while the
	 * daemon closes), when no ring is left. */
	e = (T.uniques.keys && out->unique && !init) ? cfs_unique_map_take(&T.uniques, out->unique)
						     : NULL;
	if (!e) {
		if (init)
			init_reply(iov, count);
		res = writev(fd, iov, count);
		if (init && res >= 0 && T.init_unique) {
			/* The kernel processed the reply in writev: the
			 * connection is initialized, the rings may register. */
			T.init_unique = 0;
			atomic_store_explicit(&T.negotiated, true, memory_order_release);
			for (unsigned i = 0; i < T.loop_count; i++)
				wake(&T.loops[i]);
		}
		return res;
	}
	for (int i = 0; i < count; i++)
		total += iov[i].iov_len;
	memcpy(e->hdr.in_out, iov[0].iov_base, sizeof(*out));
	for (int i = 1; i < count; i++) {
		/* The kernel never asks more than max_pages: a longer reply is a bug. */
		if (copied + iov[i].iov_len > T.payload_bytes)
			abort();
		/* Read straight into the payload (ring_reply_buf): no copy. */
		if (iov[i].iov_base != e->payload + copied)
			memcpy(e->payload + copied, iov[i].iov_base, iov[i].iov_len);
		copied += iov[i].iov_len;
	}
	e->hdr.ring_ent_in_out.payload_sz = (uint32_t)copied;
	if (tls_u == e->owner) {
		if (!e->owner->stopped)
			prep_cmd(e->owner, e, CFS_FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
	} else {
		/* Another thread (the committer answering an fsync): the owner
		 * submits, its SQ has one producer. */
		struct ent *head = atomic_load_explicit(&e->owner->remote, memory_order_relaxed);

		do {
			e->next = head;
		} while (!atomic_compare_exchange_weak_explicit(
			&e->owner->remote, &head, e, memory_order_release, memory_order_relaxed));
		wake(e->owner);
	}
	return (ssize_t)total;
}

static const struct fuse_custom_io hooks = {
	.read = hook_read,
	.writev = hook_writev,
};

/* ---- setup -------------------------------------------------------------------------- */

int cfs_uring_available(char *why, size_t why_bytes)
{
	char c = 0;
	int fd = open(ENABLE_PARAM, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		snprintf(why, why_bytes,
			 "FUSE over io_uring is not in this kernel (no %s; it needs Linux 6.14 "
			 "with CONFIG_FUSE_IO_URING)",
			 ENABLE_PARAM);
		return -EOPNOTSUPP;
	}
	if (read(fd, &c, 1) != 1)
		c = 0;
	close(fd);
	if (c != 'Y' && c != 'y' && c != '1') {
		snprintf(why, why_bytes,
			 "FUSE over io_uring is disabled in this kernel (%s is N; root can "
			 "enable it: echo Y > %s)",
			 ENABLE_PARAM, ENABLE_PARAM);
		return -EOPNOTSUPP;
	}
	return 0;
}

static void loop_free(struct cfs_uring_loop *u)
{
	if (u->ring_ready)
		io_uring_queue_exit(&u->ring);
	u->ring_ready = false;
	if (u->region)
		munmap(u->region, u->region_bytes);
	u->region = NULL;
	free(u->ents);
	u->ents = NULL;
	if (u->wake_fd >= 0)
		close(u->wake_fd);
	u->wake_fd = -1;
}

static int loop_alloc(struct cfs_uring_loop *u, unsigned index)
{
	size_t per = HEADROOM_BYTES + T.payload_bytes;
	unsigned n = 0;

	u->index = index;
	u->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (u->wake_fd < 0)
		return -errno;
	for (unsigned q = index; q < T.queues; q += T.loop_count)
		n += ENTRIES_PER_QUEUE;
	u->nents = n;
	if (!n)
		return 0; /* more loops than queues: this one serves /dev/fuse only */
	u->ents = aligned_alloc(64, sizeof(*u->ents) * n);
	if (!u->ents)
		return -ENOMEM;
	memset(u->ents, 0, sizeof(*u->ents) * n);
	/* Touched only as far as requests use it (1 MiB per entry reserved). */
	u->region_bytes = per * n;
	u->region = mmap(NULL, u->region_bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (u->region == MAP_FAILED) {
		u->region = NULL;
		return -ENOMEM;
	}
	/* Payloads in huge pages where the kernel has them: a 1 MiB O_DIRECT
	 * read or write into 4 KiB pages is 256 segments, more than virtio-blk
	 * takes in one request (254), and 256 pages to pin per I/O; 1 MiB
	 * reads 2x, writes 1.5x (bench/README.md). The cost: an entry a
	 * request has touched is resident in full. Advice only: no error. */
	(void)madvise(u->region, u->region_bytes, MADV_HUGEPAGE);
	n = 0;
	for (unsigned q = index; q < T.queues; q += T.loop_count)
		for (unsigned i = 0; i < ENTRIES_PER_QUEUE; i++, n++) {
			struct ent *e = &u->ents[n];

			e->owner = u;
			e->qid = (uint16_t)q;
			e->payload = u->region + per * n + HEADROOM_BYTES;
			e->iov[0].iov_base = &e->hdr;
			e->iov[0].iov_len = sizeof(e->hdr);
			e->iov[1].iov_base = e->payload;
			e->iov[1].iov_len = T.payload_bytes;
		}
	return 0;
}

static size_t entries_total(void)
{
	size_t n = 0;

	for (unsigned i = 0; i < T.loop_count; i++)
		n += T.loops[i].nents;
	return n;
}

int cfs_uring_setup(struct fuse_session *se, unsigned loop_count)
{
	long cpus = sysconf(_SC_NPROCESSORS_CONF);
	int ret;

	/* The kernel has one queue per possible CPU (num_possible_cpus()). */
	T.queues = cpus > 0 ? (unsigned)cpus : 1;
	{
		FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
		unsigned a, b;

		if (f) {
			if (fscanf(f, "%u-%u", &a, &b) == 2)
				T.queues = b + 1;
			else if (fscanf(f, "%u", &a) == 1)
				T.queues = a + 1;
			fclose(f);
		}
	}
	T.se = se;
	T.fd = fuse_session_fd(se);
	T.loop_count = loop_count;
	/* max(max_write, max_pages pages); ops.c asks for 1 MiB of both. */
	T.payload_bytes = CFS_MAX_WRITE_BYTES;
	T.loops = calloc(loop_count, sizeof(*T.loops));
	if (!T.loops)
		return -ENOMEM;
	for (unsigned i = 0; i < loop_count; i++)
		T.loops[i].wake_fd = -1;
	for (unsigned i = 0; i < loop_count; i++) {
		ret = loop_alloc(&T.loops[i], i);
		if (ret)
			goto fail;
	}
	/* A queue, and entries, per possible CPU: 64 x 64 on a machine with 64
	 * (a fixed table of 4096 slots would have been full). */
	ret = cfs_unique_map_init(&T.uniques, entries_total());
	if (ret)
		goto fail;
	ret = fuse_session_custom_io(se, &hooks, T.fd);
	if (ret)
		goto fail;
	cfs_data_set_reply_buf_hook(ring_reply_buf);
	return 0;
fail:
	cfs_uring_teardown();
	return ret < 0 ? ret : -EINVAL;
}

void cfs_uring_teardown(void)
{
	if (!T.loops)
		return;
	cfs_data_set_reply_buf_hook(NULL);
	for (unsigned i = 0; i < T.loop_count; i++) {
		T.exited_ring_requests += T.loops[i].ring_requests;
		T.exited_dev_reads += T.loops[i].dev_reads;
		loop_free(&T.loops[i]);
	}
	free(T.loops);
	T.loops = NULL;
	cfs_unique_map_destroy(&T.uniques);
}

void cfs_uring_counts(struct cfs_uring_counts *c)
{
	c->ring_requests = T.exited_ring_requests;
	c->dev_reads = T.exited_dev_reads;
	for (unsigned i = 0; T.loops && i < T.loop_count; i++) {
		c->ring_requests += T.loops[i].ring_requests;
		c->dev_reads += T.loops[i].dev_reads;
	}
	c->negotiated = atomic_load(&T.negotiated);
	c->queues = T.queues;
	c->entries_per_queue = ENTRIES_PER_QUEUE;
}

struct cfs_uring_loop *cfs_uring_loop_get(unsigned index)
{
	return T.loops && index < T.loop_count ? &T.loops[index] : NULL;
}

void cfs_uring_loop_enter(struct cfs_uring_loop *u)
{
	tls_u = u;
}

int cfs_uring_loop_fd(const struct cfs_uring_loop *u)
{
	return u->wake_fd;
}

void cfs_uring_loop_drain(struct cfs_uring_loop *u)
{
	uint64_t v;

	if (read(u->wake_fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing to drain */
	}
}

/* ---- the loop's side ------------------------------------------------------------------ */

/*
 * Run the loop on the CPUs whose queues it owns. The kernel queues a request
 * on the queue of the CPU its caller runs on and delivers it as task work to
 * the loop: with the loop on that CPU the hand-off needs no cross-CPU wakeup
 * (4 KiB random I/O QD32 on an image mount 1.24-1.29x:
 * bench/results/perf-20261203-222248/notes.md). libfuse 3.17 pins its ring
 * threads likewise.
 */
static void loop_pin(const struct cfs_uring_loop *u)
{
	cfs_loop_pin_cpus(u->index, T.loop_count, T.queues);
}

/* Create the ring and register every entry (in the loop's thread: the kernel
 * delivers requests as task work to the thread that submitted the command). */
static int loop_register(struct cfs_uring_loop *u)
{
	struct io_uring_params p = {0};
	int ret;

	u->registered = true;
	if (!u->nents)
		return 0;
	loop_pin(u);
	p.flags = IORING_SETUP_SQE128;
	ret = io_uring_queue_init_params(u->nents, &u->ring, &p);
	if (ret < 0) {
		fuse_log(FUSE_LOG_ERR, "chunkfs: FUSE over io_uring: loop %u: ring: %s\n", u->index,
			 strerror(-ret));
		return ret;
	}
	u->ring_ready = true;
	for (unsigned i = 0; i < u->nents; i++)
		prep_cmd(u, &u->ents[i], CFS_FUSE_IO_URING_CMD_REGISTER);
	u->live = u->nents;
	ret = io_uring_submit(&u->ring);
	u->sq_pending = 0;
	if (ret < 0) {
		fuse_log(FUSE_LOG_ERR, "chunkfs: FUSE over io_uring: loop %u: register: %s\n",
			 u->index, strerror(-ret));
		return ret;
	}
	return 0;
}

/* Rebuild the FUSE message in front of the payload and hand it to libfuse. */
static void dispatch(struct cfs_uring_loop *u, struct ent *e)
{
	const struct fuse_in_header *in = (const void *)e->hdr.in_out;
	uint32_t payload = e->hdr.ring_ent_in_out.payload_sz;
	uint32_t op_bytes;
	struct fuse_buf buf = {0};
	uint8_t *msg;

	if (in->len < sizeof(*in) + payload ||
	    (op_bytes = in->len - (uint32_t)sizeof(*in) - payload) > CFS_FUSE_URING_OP_IN_OUT_SZ ||
	    payload > T.payload_bytes) {
		/* Not a message we can rebuild: answer EIO through the ring. */
		struct fuse_out_header *out = (void *)e->hdr.in_out;

		fuse_log(FUSE_LOG_ERR,
			 "chunkfs: FUSE over io_uring: malformed request (opcode %u, len %u, "
			 "payload %u)\n",
			 in->opcode, in->len, payload);
		e->unique = in->unique;
		out->len = sizeof(*out);
		out->error = -EIO;
		out->unique = e->unique;
		e->hdr.ring_ent_in_out.payload_sz = 0;
		prep_cmd(u, e, CFS_FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
		return;
	}
	msg = e->payload - op_bytes - sizeof(*in);
	memcpy(msg, in, sizeof(*in));
	memcpy(msg + sizeof(*in), e->hdr.op_in, op_bytes);
	e->unique = in->unique;
	buf.mem = msg;
	buf.size = in->len;
	u->ring_requests++;
	cfs_unique_map_insert(&T.uniques, e->unique, e);
	tls_cur = e;
	cfs_tmpfile_note(buf.mem, buf.size);
	cfs_proto_note(buf.mem, buf.size);
	fuse_session_process_buf(T.se, &buf);
	tls_cur = NULL;
}

/* The data path's reply-buffer hook (cfs_data_set_reply_buf_hook): the
 * payload buffer of the ring request this thread is handling, if any. */
static void *ring_reply_buf(size_t *bytes)
{
	if (!tls_cur)
		return NULL;
	*bytes = T.payload_bytes;
	return tls_cur->payload;
}

int cfs_uring_loop_work(struct cfs_uring_loop *u, struct cfs_loop *l, bool receive)
{
	struct io_uring_cqe *cqe;
	struct ent *e;
	unsigned head, seen = 0;
	int done = 0;

	if (u->stopped)
		return 0;
	if (!u->registered) {
		if (!atomic_load_explicit(&T.negotiated, memory_order_acquire))
			return 0;
		if (loop_register(u))
			return -EIO;
	}
	if (!u->ring_ready)
		return 0;
	/* Replies made on other threads: their commits. */
	e = atomic_exchange_explicit(&u->remote, NULL, memory_order_acquire);
	while (e) {
		struct ent *next = e->next;

		prep_cmd(u, e, CFS_FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
		e = next;
	}
	/* Requests that waited for a context (stopping: they wait for the
	 * unmount, which fails them). */
	while (receive && (e = u->deferred_head) && cfs_loop_can_receive(l)) {
		u->deferred_head = e->next;
		if (!u->deferred_head)
			u->deferred_tail = NULL;
		dispatch(u, e);
		done++;
	}
	cfs_loop_hold_submit(l, true);
	io_uring_for_each_cqe(&u->ring, head, cqe)
	{
		e = (struct ent *)(uintptr_t)cqe->user_data;
		seen++;
		if (cqe->res < 0) {
			/* -ENOTCONN/-ECANCELED at unmount or abort; anything
			 * else is a bug worth a line. */
			if (cqe->res != -ENOTCONN && cqe->res != -ECANCELED &&
			    cqe->res != -ECONNABORTED)
				fuse_log(FUSE_LOG_ERR,
					 "chunkfs: FUSE over io_uring: queue %u: %s\n", e->qid,
					 strerror(-cqe->res));
			e->dead = true;
			u->live--;
			continue;
		}
		if (!receive || u->deferred_head || !cfs_loop_can_receive(l)) {
			e->next = NULL;
			if (u->deferred_tail)
				u->deferred_tail->next = e;
			else
				u->deferred_head = e;
			u->deferred_tail = e;
			continue;
		}
		dispatch(u, e);
		done++;
	}
	io_uring_cq_advance(&u->ring, seen);
	cfs_loop_hold_submit(l, false);
	return done;
}

int cfs_uring_loop_ring_fd(const struct cfs_uring_loop *u)
{
	return u->ring_ready ? u->ring.ring_fd : -1;
}

void cfs_uring_loop_flush(struct cfs_uring_loop *u)
{
	if (u->ring_ready && u->sq_pending) {
		io_uring_submit(&u->ring);
		u->sq_pending = 0;
	}
}

bool cfs_uring_loop_pending(const struct cfs_uring_loop *u, const struct cfs_loop *l, bool receive)
{
	if (!u->ring_ready || u->stopped)
		return false;
	if (atomic_load_explicit(&u->remote, memory_order_relaxed) || u->sq_pending)
		return true;
	return io_uring_cq_ready(&u->ring) ||
	       (receive && u->deferred_head && cfs_loop_can_receive(l));
}

void cfs_uring_loop_stop(struct cfs_uring_loop *u)
{
	cfs_uring_loop_flush(u);
	u->stopped = true;
	tls_u = NULL;
}
