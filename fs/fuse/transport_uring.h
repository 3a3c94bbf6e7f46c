/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * transport_uring.h — FUSE over io_uring (kernel 6.14+), for libfuse 3.14,
 * which only knows /dev/fuse (fs/DAEMON.md, "FUSE over io_uring").
 *
 * The kernel ABI (include/uapi/linux/fuse.h, protocol 7.42): the daemon sets
 * FUSE_OVER_IO_URING in its INIT reply, then each queue (one per possible
 * CPU; a request goes to the queue of the CPU its caller runs on) gets ring
 * entries: IORING_OP_URING_CMD SQEs (128-byte SQEs) on the /dev/fuse fd,
 * FUSE_IO_URING_CMD_REGISTER once per entry, then COMMIT_AND_FETCH to answer
 * the entry's request and take the next one in the same step. An entry is a
 * header buffer (struct fuse_uring_req_header) and a payload buffer of at
 * least max(max_write, max_pages pages). The kernel switches to the rings
 * once every queue has an entry; until then, and for FORGET, INTERRUPT and
 * notifications always, /dev/fuse carries the traffic as before.
 *
 * Integration with libfuse 3.14: custom I/O (fuse_session_custom_io) on the
 * mounted fd. Its read hook sees the INIT request (does the kernel offer
 * io_uring?), its writev hook sees every reply: it adds the flag to the INIT
 * reply, and copies a reply to a ring request into that request's entry
 * instead of writing it to /dev/fuse. A ring request is rebuilt into one
 * contiguous FUSE message (header and op struct copied into the headroom
 * just before the payload, so a WRITE payload is not copied and stays page
 * aligned) and handed to fuse_session_process_buf().
 *
 * Threads: loop i owns queues q with q % loops == i, on its own io_uring,
 * and is the only thread that submits to it (the kernel runs the request
 * delivery as task work in that thread). A reply made on another thread
 * (fsync from the committer) is handed to the owner through a lock-free list
 * and an eventfd.
 */
#ifndef CFS_TRANSPORT_URING_H
#define CFS_TRANSPORT_URING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fuse_session;
struct cfs_loop;
struct cfs_uring_loop;

/* ---- kernel ABI (uapi fuse.h 7.42; Debian 12's headers are 7.38) ------------ */

#define CFS_FUSE_OVER_IO_URING_FLAGS2 (1u << 9) /* FUSE_OVER_IO_URING = 1ULL << 41 */
#define CFS_FUSE_URING_IN_OUT_HEADER_SZ 128
#define CFS_FUSE_URING_OP_IN_OUT_SZ 128

enum {
	CFS_FUSE_IO_URING_CMD_REGISTER = 1,
	CFS_FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,
};

struct cfs_fuse_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id; /* the request's unique; echoed in the commit */
	uint32_t payload_sz;
	uint32_t padding;
	uint64_t reserved;
};

struct cfs_fuse_uring_req_header {
	char in_out[CFS_FUSE_URING_IN_OUT_HEADER_SZ]; /* fuse_in_header / fuse_out_header */
	char op_in[CFS_FUSE_URING_OP_IN_OUT_SZ];      /* the op struct (in_args[0]) */
	struct cfs_fuse_uring_ent_in_out ring_ent_in_out;
};

/* In the 80-byte command area of a 128-byte SQE. */
struct cfs_fuse_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

_Static_assert(sizeof(struct cfs_fuse_uring_ent_in_out) == 32, "fuse_uring_ent_in_out ABI");
_Static_assert(sizeof(struct cfs_fuse_uring_req_header) == 288, "fuse_uring_req_header ABI");
_Static_assert(sizeof(struct cfs_fuse_uring_cmd_req) == 24, "fuse_uring_cmd_req ABI");

/* ---- the transport ------------------------------------------------------------ */

enum cfs_transport { CFS_TRANSPORT_DEV = 0, CFS_TRANSPORT_URING, CFS_TRANSPORT_AUTO };

/*
 * Is FUSE over io_uring switched on in this kernel
 * (/sys/module/fuse/parameters/enable_uring)? 0, or -EOPNOTSUPP with a
 * sentence in why. The daemon never changes the parameter.
 */
int cfs_uring_available(char *why, size_t why_bytes);

/*
 * Set up the transport for a mounted session: loop_count loops, the custom
 * I/O hooks on the session's fd. Called after fuse_session_mount() and before
 * the loops start; it registers the reply-buffer hook of the data path
 * (cfs_data_set_reply_buf_hook). 0 or -errno (nothing left installed).
 */
int cfs_uring_setup(struct fuse_session *se, unsigned loop_count);
/* After the loops were joined. */
void cfs_uring_teardown(void);

/* The loop's transport state; NULL when the transport is not set up. */
struct cfs_uring_loop *cfs_uring_loop_get(unsigned index);
/* In the loop's thread, before anything else. */
void cfs_uring_loop_enter(struct cfs_uring_loop *u);
/* Readable when the loop has transport work (start, replies from other threads). */
int cfs_uring_loop_fd(const struct cfs_uring_loop *u);
/* Drain the wake eventfd (after epoll said it is readable). */
void cfs_uring_loop_drain(struct cfs_uring_loop *u);
/*
 * Register the loop's entries once INIT negotiated the rings, take ring
 * requests (as long as cfs_loop_can_receive(l)) and hand them to libfuse,
 * queue the commits of replies made on other threads. receive false (the loop
 * is stopping): commits only; new requests are held until the unmount.
 * Returns the number of requests dispatched, or < 0 when the rings could not
 * be set up.
 */
int cfs_uring_loop_work(struct cfs_uring_loop *u, struct cfs_loop *l, bool receive);
/*
 * The ring's fd once the entries are registered, else -1: the loop polls it
 * (readable while CQEs wait). Needed because the kernel delivers a request as
 * task work, which may run when the thread returns from an interrupt, after
 * the loop looked at its CQ and before it sleeps.
 */
int cfs_uring_loop_ring_fd(const struct cfs_uring_loop *u);
/* Submit the commits queued by replies (one io_uring_enter). */
void cfs_uring_loop_flush(struct cfs_uring_loop *u);
/* Work is waiting (completions, deferred requests, remote replies): poll, do not sleep. */
bool cfs_uring_loop_pending(const struct cfs_uring_loop *u, const struct cfs_loop *l, bool receive);
/* Stop: no more commits; entries still in flight are released by the kernel. */
void cfs_uring_loop_stop(struct cfs_uring_loop *u);

/* Counters for the exit log line and the tests: requests taken from the rings
 * and from /dev/fuse, and whether the rings were ever in use. */
struct cfs_uring_counts {
	uint64_t ring_requests;
	uint64_t dev_reads;
	bool negotiated;
	unsigned queues;
	unsigned entries_per_queue;
};
void cfs_uring_counts(struct cfs_uring_counts *out);

#endif /* CFS_TRANSPORT_URING_H */
