/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dio_coherence — asynchronous O_DIRECT writes next to buffered readers.
 *
 *   dio_coherence FILE SECONDS [READERS [MODE]]
 *
 * The rule it checks: once an O_DIRECT write has completed, no read of any
 * kind returns older data for its range. READERS (default 2) child processes
 * read FILE through buffered descriptors in a loop (so its pages are cached
 * and re-cached all the time); this process rewrites REGION_BYTES regions of
 * it with asynchronous O_DIRECT writes through io_uring (a new generation of
 * content each time), and after each completion reads the region back
 * through a buffered descriptor of its own and compares it. Every 4 KiB
 * block carries its generation and offset, so a stale block says which
 * older write it still shows. MODE:
 *   read         (default) buffered opens first, then the O_DIRECT one (so
 *                chunkfs gives it the kernel's direct path); readers and
 *                read-back use pread;
 *   mmap         the O_DIRECT open first (FOPEN_DIRECT_IO for every open);
 *                readers and read-back read shared mappings (MAP_SHARED);
 *   mmap-cached  buffered opens first, as read, with shared mappings.
 *
 * Exit 0: SECONDS passed and every read-back was right; 1: a read-back
 * showed older data (the first stale block is printed); 2: setup or I/O
 * error. Used by tests/integration/daemon_dio_coherence.sh.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <liburing.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FILE_BYTES (16u << 20)
#define REGION_BYTES (640u << 10)
#define BLOCK_BYTES 4096u
#define READ_BYTES (128u << 10)
#define READERS_MAX 8

struct stamp {
	uint64_t generation;
	uint64_t offset;
};

static void die(const char *what)
{
	fprintf(stderr, "dio_coherence: %s: %s\n", what, strerror(errno));
	exit(2);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Generation g of the block at offset: its stamp, then bytes of both. */
static void fill(uint8_t *buf, uint64_t offset, uint32_t bytes, uint64_t g)
{
	for (uint32_t b = 0; b < bytes; b += BLOCK_BYTES) {
		struct stamp s = {.generation = g, .offset = offset + b};

		memset(buf + b, (int)((g * 31 + (offset + b) / BLOCK_BYTES) & 0xff), BLOCK_BYTES);
		memcpy(buf + b, &s, sizeof(s));
	}
}

static void read_all(int fd, uint8_t *buf, uint32_t bytes, uint64_t offset)
{
	uint32_t done = 0;

	while (done < bytes) {
		ssize_t n = pread(fd, buf + done, bytes - done, (off_t)(offset + done));

		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			die("buffered read-back");
		}
		done += (uint32_t)n;
	}
}

static const uint8_t *map_shared(int fd)
{
	void *p = mmap(NULL, FILE_BYTES, PROT_READ, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		die("mmap(MAP_SHARED)");
	return p;
}

/* A buffered reader: random ranges, as fast as it can, until killed. */
static void reader(const char *path, unsigned seed, bool mapped)
{
	static uint8_t buf[READ_BYTES];
	int fd = open(path, O_RDONLY);
	const uint8_t *map;

	if (fd < 0)
		die("reader open");
	map = mapped ? map_shared(fd) : NULL;
	for (;;) {
		uint64_t off = ((uint64_t)rand_r(&seed) % (FILE_BYTES / BLOCK_BYTES)) * BLOCK_BYTES;

		if (map)
			memcpy(buf, map + off,
			       off + READ_BYTES <= FILE_BYTES ? READ_BYTES : FILE_BYTES - off);
		else if (pread(fd, buf, READ_BYTES, (off_t)off) < 0)
			die("reader pread");
	}
}

int main(int argc, char **argv)
{
	const char *path, *mode = "read";
	const uint8_t *map = NULL;
	bool mapped, direct_first;
	double seconds, start;
	unsigned readers = 2, seed = (unsigned)getpid();
	pid_t pids[READERS_MAX];
	uint8_t *wbuf, *want, *got;
	struct io_uring ring;
	int dfd, bfd, ret, status = 0;
	uint64_t generation = 0, checked = 0;

	if (argc < 3) {
		fprintf(stderr,
			"usage: dio_coherence FILE SECONDS [READERS [read|mmap|mmap-cached]]\n");
		return 2;
	}
	path = argv[1];
	seconds = atof(argv[2]);
	if (argc > 3)
		readers = (unsigned)atoi(argv[3]);
	if (argc > 4)
		mode = argv[4];
	if (strcmp(mode, "read") && strcmp(mode, "mmap") && strcmp(mode, "mmap-cached")) {
		fprintf(stderr, "dio_coherence: unknown mode %s\n", mode);
		return 2;
	}
	mapped = strncmp(mode, "mmap", 4) == 0;
	direct_first = strcmp(mode, "mmap") == 0;
	if (readers > READERS_MAX)
		readers = READERS_MAX;
	if (posix_memalign((void **)&wbuf, BLOCK_BYTES, REGION_BYTES) ||
	    !(want = malloc(FILE_BYTES)) || !(got = malloc(REGION_BYTES)))
		die("memory");

	/* Generation 0 everywhere, on the store before anyone reads, written
	 * through whichever open comes first. */
	fill(want, 0, FILE_BYTES, 0);
	if (direct_first) {
		dfd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
		if (dfd < 0)
			die("open (O_DIRECT)");
		for (uint32_t o = 0; o < FILE_BYTES; o += REGION_BYTES) {
			uint32_t n = FILE_BYTES - o < REGION_BYTES ? FILE_BYTES - o : REGION_BYTES;

			memcpy(wbuf, want + o, n);
			if (pwrite(dfd, wbuf, n, o) != (ssize_t)n)
				die("initial write");
		}
		if (fsync(dfd))
			die("initial fsync");
	}
	bfd = open(path, O_RDWR | O_CREAT | (direct_first ? 0 : O_TRUNC), 0644);
	if (bfd < 0)
		die("open (buffered)");
	if (!direct_first) {
		if (pwrite(bfd, want, FILE_BYTES, 0) != (ssize_t)FILE_BYTES || fsync(bfd))
			die("initial write");
		dfd = open(path, O_RDWR | O_DIRECT);
		if (dfd < 0)
			die("open (O_DIRECT)");
	}
	if (mapped)
		map = map_shared(bfd);
	ret = io_uring_queue_init(4, &ring, 0);
	if (ret < 0) {
		errno = -ret;
		die("io_uring_queue_init");
	}

	for (unsigned i = 0; i < readers; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			die("fork");
		if (pids[i] == 0)
			reader(path, seed + i + 1, mapped);
	}

	start = now_s();
	while (now_s() - start < seconds) {
		uint64_t off =
			((uint64_t)rand_r(&seed) % ((FILE_BYTES - REGION_BYTES) / BLOCK_BYTES)) *
			BLOCK_BYTES;
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		struct io_uring_cqe *cqe;

		generation++;
		fill(wbuf, off, REGION_BYTES, generation);
		io_uring_prep_write(sqe, dfd, wbuf, REGION_BYTES, (off_t)off);
		io_uring_submit(&ring);
		ret = io_uring_wait_cqe(&ring, &cqe);
		if (ret < 0 || cqe->res != (int)REGION_BYTES) {
			errno = ret < 0 ? -ret : cqe->res < 0 ? -cqe->res : EIO;
			die("O_DIRECT write");
		}
		io_uring_cqe_seen(&ring, cqe);
		memcpy(want + off, wbuf, REGION_BYTES);

		/* The write has completed: its range must read back as written. */
		if (map)
			memcpy(got, map + off, REGION_BYTES);
		else
			read_all(bfd, got, REGION_BYTES, off);
		if (memcmp(got, want + off, REGION_BYTES)) {
			uint32_t b = 0, stale = 0;

			while (!memcmp(got + b, want + off + b, BLOCK_BYTES))
				b += BLOCK_BYTES;
			for (uint32_t x = b; x < REGION_BYTES; x += BLOCK_BYTES)
				stale += memcmp(got + x, want + off + x, BLOCK_BYTES) != 0;
			{
				struct stamp s;

				memcpy(&s, got + b, sizeof(s));
				printf("STALE after %.2f s, write %llu: block at %llu shows "
				       "generation %llu (offset stamp %llu), %u of %u blocks stale\n",
				       now_s() - start, (unsigned long long)generation,
				       (unsigned long long)(off + b),
				       (unsigned long long)s.generation,
				       (unsigned long long)s.offset, stale,
				       REGION_BYTES / BLOCK_BYTES);
			}
			status = 1;
			break;
		}
		checked++;
	}

	for (unsigned i = 0; i < readers; i++)
		kill(pids[i], SIGKILL);
	for (unsigned i = 0; i < readers; i++) {
		int st;

		if (waitpid(pids[i], &st, 0) < 0)
			die("waitpid");
		if (!WIFSIGNALED(st)) {
			fprintf(stderr, "dio_coherence: reader %u failed\n", i);
			status = 2;
		}
	}
	io_uring_queue_exit(&ring);
	close(dfd);
	close(bfd);
	printf("dio_coherence (%s): %llu asynchronous O_DIRECT writes of %u KiB, %llu read back "
	       "right, %u buffered readers, %.1f s\n",
	       mode, (unsigned long long)generation, REGION_BYTES >> 10,
	       (unsigned long long)checked, readers, now_s() - start);
	if (map)
		munmap((void *)map, FILE_BYTES);
	free(wbuf);
	free(want);
	free(got);
	return status;
}
