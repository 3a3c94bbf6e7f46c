// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * iopath_bench.c — drive iopath without FUSE and measure it, in the spirit
 * of fio's t/io_uring.c: every knob is a flag, the usage text shows the
 * defaults, and each run prints one CSV line:
 *
 *   backend,target,bs,qd,rw,pattern,threads,fixed,iops,MBps,lat_p50_us,lat_p99_us
 *
 * Each thread owns one queue and keeps it full: it queues `depth` requests,
 * submits, then loops { reap at least one }, and every done() queues the
 * next request on the same slot (done() runs in this thread, so the slot's
 * buffer is reused at once) and submits every -c requests, as fio does
 * with iodepth_batch_submit=1 (its default). A request's latency is
 * iopath's own (queued -> done, from the per-thread statistics iopath
 * charges), so the figures include iopath's validation, statistics and
 * callback cost.
 *
 * Why -c 1 by default: on this machine (virtio-blk in a microVM) handing
 * each request to the kernel at once gave ~15% more 4 KiB random-read IOPS
 * at QD32 than one submit per reap round, with the same ring and the same
 * system calls otherwise (bench/README.md). The device starts on a request
 * sooner; batching only pays where a system call costs more than that.
 *
 * -N runs the "null" backend (iopath/backend_null.c): same harness, same
 * core (validation, statistics, queue/submit/reap, done()), but every request
 * completes at reap without moving data. It is the floor of the harness plus
 * iopath itself; the difference to a real run is the kernel and the device.
 *
 * What this does not do: it does not verify data (tests do), warm up, or
 * pin threads; run it several times (bench/iopath-vs-fio.sh takes medians).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "iopath/iopath.h"

#define NULL_TARGET_BYTES	(1ull << 40)	/* -N: addresses to spread requests over */

struct opts {
	uint32_t bs;
	unsigned depth;
	unsigned runtime_s;
	unsigned write_pct;
	bool sequential;
	bool fixed;
	bool noop;
	unsigned threads;
	bool direct;
	bool single_thread;
	unsigned submit_batch;
	uint64_t size_bytes;
	bool header;
	const char *target;
};

struct slot {
	struct cfs_io_req req;
	struct thread *t;
};

struct thread {
	const struct opts *o;
	struct cfs_io *io;
	struct cfs_ioq *q;
	pthread_t tid;
	unsigned id;
	struct slot *slots;
	void **bufs;
	uint64_t region_offset;		/* sequential: this thread's part */
	uint64_t region_blocks;
	uint64_t cursor;		/* sequential: next block in the region */
	uint64_t rng;
	bool stopping;
	unsigned unsubmitted;		/* queued since the last submit */
	uint64_t ios;			/* completed in the measured window */
	uint64_t errors;
	int first_error;
	bool fixed_effective;
	struct cfs_io_stats stats;	/* iopath charges latency here */
};

static atomic_uint ready_threads;
static atomic_bool go;

static void usage(FILE *out)
{
	fprintf(out,
		"usage: iopath_bench [options] TARGET\n"
		"  -b <bytes>  block size (default 4096; k/m suffixes)\n"
		"  -d <n>      queue depth per thread (default 32)\n"
		"  -r <sec>    runtime in seconds (default 10)\n"
		"  -w <pct>    percent of writes, 0 = read only, 100 = write only (default 0)\n"
		"  -s          sequential (default: uniform random, block-aligned)\n"
		"  -B <bool>   fixed buffers from the queue's registered arena (default 1)\n"
		"  -O <bool>   O_DIRECT (default 1; 0 = buffered)\n"
		"  -N          no-op: the \"null\" backend, TARGET optional -- the floor of\n"
		"              this harness plus iopath's core, with no device\n"
		"  -t <n>      threads, one queue each (default 1)\n"
		"  -c <n>      submit after every <n> requests queued (default 1, like fio's\n"
		"              iodepth_batch_submit; 0 = once per reap round)\n"
		"  -U <bool>   single-thread queues, CFS_IOQ_SINGLE_THREAD (default 1; 0 =\n"
		"              queues any thread may submit to, as the FUSE workers use)\n"
		"  -S <bytes>  use only the first <bytes> of the target (default: all)\n"
		"  -H          print the CSV header line first\n"
		"  -h          this help\n"
		"output: backend,target,bs,qd,rw,pattern,threads,fixed,iops,MBps,lat_p50_us,lat_p99_us\n");
}

static uint64_t parse_size(const char *s, bool *ok)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	*ok = end != s;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end)
		*ok = false;
	return v;
}

static uint64_t rng_next(uint64_t *s)
{
	/* xorshift64*: cheap, and good enough to spread offsets */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

static void slot_done(struct cfs_io_req *req, int res);

/* Aim the slot's request at the next block and queue it. */
static int slot_issue(struct slot *s)
{
	struct thread *t = s->t;
	const struct opts *o = t->o;
	uint64_t block;

	if (o->sequential) {
		block = t->region_offset / o->bs + t->cursor;
		t->cursor = (t->cursor + 1) % t->region_blocks;
	} else {
		block = rng_next(&t->rng) % t->region_blocks;
	}
	s->req.offset_bytes = block * o->bs;
	if (o->write_pct == 0)
		s->req.op = CFS_IO_READ;
	else if (o->write_pct >= 100)
		s->req.op = CFS_IO_WRITE;
	else
		s->req.op = rng_next(&t->rng) % 100 < o->write_pct ? CFS_IO_WRITE : CFS_IO_READ;
	return cfs_ioq_queue(t->q, &s->req);
}

static void slot_done(struct cfs_io_req *req, int res)
{
	struct slot *s = (struct slot *)req;
	struct thread *t = s->t;
	int ret;

	if (res < 0) {
		if (!t->errors++)
			t->first_error = res;
	}
	if (t->stopping)
		return;
	t->ios++;
	ret = slot_issue(s);
	if (ret && !t->errors++)
		t->first_error = ret;
	/* done() runs in this thread, which may submit on its queue */
	if (t->o->submit_batch && ++t->unsubmitted >= t->o->submit_batch) {
		cfs_ioq_submit(t->q);
		t->unsubmitted = 0;
	}
}

static int thread_setup(struct thread *t)
{
	const struct opts *o = t->o;
	struct cfs_ioq_config qcfg = {
		.depth = o->depth,
		.buffer_arena_bytes = o->fixed ? (size_t)o->depth * o->bs : 0,
		.flags = o->single_thread ? CFS_IOQ_SINGLE_THREAD : 0,
	};
	uint64_t blocks = cfs_io_geometry(t->io)->size_bytes / o->bs;
	unsigned i;
	int ret;

	ret = cfs_ioq_create(t->io, &qcfg, &t->q);
	if (ret)
		return ret;
	if (o->sequential) {
		t->region_blocks = blocks / o->threads;
		t->region_offset = (uint64_t)t->id * t->region_blocks * o->bs;
	} else {
		t->region_blocks = blocks;
		t->region_offset = 0;
	}
	if (!t->region_blocks)
		return -EINVAL;
	t->rng = 0x9E3779B97F4A7C15ull * (t->id + 1) ^ (uint64_t)getpid();
	t->slots = calloc(o->depth, sizeof(*t->slots));
	t->bufs = calloc(o->depth, sizeof(*t->bufs));
	if (!t->slots || !t->bufs)
		return -ENOMEM;
	cfs_io_stats_reset(&t->stats);
	for (i = 0; i < o->depth; i++) {
		if (o->fixed) {
			t->bufs[i] = cfs_ioq_buf_get(t->q, o->bs);
		} else if (posix_memalign(&t->bufs[i], 4096, o->bs)) {
			t->bufs[i] = NULL;
		}
		if (!t->bufs[i])
			return -ENOMEM;
		memset(t->bufs[i], 0x5a, o->bs);
		t->slots[i].t = t;
		t->slots[i].req = (struct cfs_io_req){
			.length_bytes = o->bs,
			.buf = t->bufs[i],
			.stats = &t->stats,
			.done = slot_done,
		};
	}
	t->fixed_effective = cfs_ioq_buf_is_fixed(t->q, t->bufs[0], o->bs);
	return 0;
}

static void thread_teardown(struct thread *t)
{
	unsigned i;

	if (t->q) {
		for (i = 0; t->bufs && i < t->o->depth; i++) {
			if (!t->bufs[i])
				continue;
			if (t->o->fixed)
				cfs_ioq_buf_put(t->q, t->bufs[i]);
			else
				free(t->bufs[i]);
		}
		cfs_ioq_destroy(t->q);
	}
	free(t->slots);
	free(t->bufs);
}

static void *thread_main(void *arg)
{
	struct thread *t = arg;
	uint64_t deadline_ns;
	unsigned i;
	int ret;

	/* The queue is created by the thread that uses it: a ring set up for
	 * a single issuer belongs to the thread that created it. */
	ret = thread_setup(t);
	if (ret) {
		t->errors++;
		t->first_error = ret;
		thread_teardown(t);
		atomic_fetch_add(&ready_threads, 1);
		return NULL;
	}
	atomic_fetch_add(&ready_threads, 1);
	while (!atomic_load(&go))
		;
	deadline_ns = cfs_now_ns() + (uint64_t)t->o->runtime_s * 1000000000ull;
	for (i = 0; i < t->o->depth; i++) {
		ret = slot_issue(&t->slots[i]);
		if (ret) {
			t->errors++;
			t->first_error = ret;
			break;
		}
	}
	cfs_ioq_submit(t->q);
	while (cfs_now_ns() < deadline_ns && !t->errors) {
		/* A reap that has to wait first submits what done() calls
		 * queued and did not submit yet (-c), in the same system call
		 * on a single-thread queue, which so needs no submit here. */
		ret = cfs_ioq_reap(t->q, 1);
		if (ret < 0 && ret != -EINTR) {
			t->errors++;
			t->first_error = ret;
			break;
		}
		if (!t->o->single_thread)
			cfs_ioq_submit(t->q);
	}
	t->stopping = true;
	while (cfs_ioq_inflight(t->q))
		if (cfs_ioq_reap(t->q, cfs_ioq_inflight(t->q)) < 0)
			break;
	thread_teardown(t);	/* the statistics stay in t for main() */
	return NULL;
}

static void hist_merge(struct cfs_latency_hist *into, const struct cfs_latency_hist *from)
{
	unsigned b;

	into->count += from->count;
	into->sum_ns += from->sum_ns;
	if (from->count && from->min_ns < into->min_ns)
		into->min_ns = from->min_ns;
	if (from->max_ns > into->max_ns)
		into->max_ns = from->max_ns;
	for (b = 0; b < CFS_HIST_BUCKETS; b++)
		into->bucket[b] += from->bucket[b];
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	bool ok = true, v_ok;
	int c;

	*o = (struct opts){
		.bs = 4096, .depth = 32, .runtime_s = 10, .write_pct = 0, .fixed = true,
		.threads = 1, .direct = true, .single_thread = true, .submit_batch = 1,
	};
	while ((c = getopt(argc, argv, "b:d:r:w:sB:O:Nt:U:c:S:Hh")) != -1) {
		switch (c) {
		case 'b': o->bs = (uint32_t)parse_size(optarg, &v_ok); ok &= v_ok; break;
		case 'd': o->depth = (unsigned)atoi(optarg); break;
		case 'r': o->runtime_s = (unsigned)atoi(optarg); break;
		case 'w': o->write_pct = (unsigned)atoi(optarg); break;
		case 's': o->sequential = true; break;
		case 'B': o->fixed = atoi(optarg) != 0; break;
		case 'O': o->direct = atoi(optarg) != 0; break;
		case 'N': o->noop = true; break;
		case 't': o->threads = (unsigned)atoi(optarg); break;
		case 'U': o->single_thread = atoi(optarg) != 0; break;
		case 'c': o->submit_batch = (unsigned)atoi(optarg); break;
		case 'S': o->size_bytes = parse_size(optarg, &v_ok); ok &= v_ok; break;
		case 'H': o->header = true; break;
		case 'h': usage(stdout); exit(0);
		default: ok = false; break;
		}
	}
	if (optind < argc)
		o->target = argv[optind];
	if (!o->noop && !o->target) {
		fprintf(stderr, "iopath_bench: no target\n");
		ok = false;
	}
	if (!o->bs || o->bs > CFS_IO_LENGTH_MAX || o->bs % 512) {
		fprintf(stderr, "iopath_bench: -b must be a multiple of 512 up to %u\n",
			CFS_IO_LENGTH_MAX);
		ok = false;
	}
	if (!o->depth || o->depth > CFS_IO_DEPTH_MAX || !o->threads || o->threads > 64 ||
	    !o->runtime_s || o->write_pct > 100)
		ok = false;
	return ok ? 0 : -EINVAL;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct cfs_io_config cfg = { 0 };
	struct cfs_latency_hist *lat;
	struct thread *threads;
	struct cfs_io *io;
	uint64_t ios = 0, errors = 0, start_ns, elapsed_ns;
	double iops, mbps;
	char rw[16];
	unsigned i;
	int ret, first_error = 0;
	bool fixed_effective = true;

	if (parse_opts(argc, argv, &o)) {
		usage(stderr);
		return 2;
	}
	cfg.backend = o.noop ? "null" : "uring";
	cfg.path = o.target;
	cfg.size_bytes = o.noop ? (o.size_bytes ? o.size_bytes : NULL_TARGET_BYTES) : o.size_bytes;
	cfg.dio = o.direct ? CFS_DIO_REQUIRED : CFS_DIO_OFF;
	ret = cfs_io_open(&cfg, &io);
	if (ret) {
		fprintf(stderr, "iopath_bench: open %s: %s\n", o.noop ? "null" : o.target,
			strerror(-ret));
		return 1;
	}
	if (o.bs % cfs_io_geometry(io)->logical_sector_bytes) {
		fprintf(stderr, "iopath_bench: -b %u is not a multiple of the %u-byte sector\n",
			o.bs, cfs_io_geometry(io)->logical_sector_bytes);
		cfs_io_close(io);
		return 1;
	}

	threads = calloc(o.threads, sizeof(*threads));
	lat = calloc(1, sizeof(*lat));
	if (!threads || !lat)
		return 1;
	lat->min_ns = UINT64_MAX;
	for (i = 0; i < o.threads; i++) {
		threads[i].o = &o;
		threads[i].io = io;
		threads[i].id = i;
		pthread_create(&threads[i].tid, NULL, thread_main, &threads[i]);
	}
	while (atomic_load(&ready_threads) < o.threads)
		usleep(100);
	start_ns = cfs_now_ns();
	atomic_store(&go, true);
	for (i = 0; i < o.threads; i++)
		pthread_join(threads[i].tid, NULL);
	elapsed_ns = cfs_now_ns() - start_ns;

	for (i = 0; i < o.threads; i++) {
		struct thread *t = &threads[i];

		ios += t->ios;
		errors += t->errors;
		if (t->errors && !first_error)
			first_error = t->first_error;
		fixed_effective &= t->fixed_effective;
		hist_merge(lat, &t->stats.op[CFS_IO_READ].latency);
		hist_merge(lat, &t->stats.op[CFS_IO_WRITE].latency);
	}
	if (errors) {
		fprintf(stderr, "iopath_bench: %" PRIu64 " errors, first: %s\n", errors,
			strerror(-first_error));
	}

	iops = (double)ios * 1e9 / (double)elapsed_ns;
	mbps = iops * o.bs / 1e6;
	if (o.write_pct == 0)
		snprintf(rw, sizeof(rw), "read");
	else if (o.write_pct == 100)
		snprintf(rw, sizeof(rw), "write");
	else
		snprintf(rw, sizeof(rw), "mix%u", o.write_pct);
	if (o.header)
		printf("backend,target,bs,qd,rw,pattern,threads,fixed,iops,MBps,lat_p50_us,lat_p99_us\n");
	printf("%s,%s,%u,%u,%s,%s,%u,%d,%.0f,%.1f,%.1f,%.1f\n", cfs_io_geometry(io)->backend,
	       o.noop ? "-" : o.target, o.bs, o.depth, rw, o.sequential ? "seq" : "rand", o.threads,
	       o.fixed && fixed_effective, iops, mbps,
	       (double)cfs_hist_percentile_ns(lat, 0.50) / 1000.0,
	       (double)cfs_hist_percentile_ns(lat, 0.99) / 1000.0);
	fflush(stdout);
	free(lat);
	free(threads);
	cfs_io_close(io);
	return errors ? 1 : 0;
}
