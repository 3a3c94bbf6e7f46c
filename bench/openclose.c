// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * openclose.c — the open/close scaling test of a FairCom Server note:
 * `threads` connections repeatedly open and close a file set (one data file
 * and three index files); the sets number `files`, connection k uses set
 * k % files. One set for all is the best case (the files stay open
 * somewhere); one set per connection the worst.
 *
 *   openclose [-t threads] [-f files] [-i iterations] [-s set] [-d] [-c] DIR
 *
 * -c creates the sets (DIR/setN.dat, setN.idx1..3, 64 KiB each) and exits;
 * without -c they must exist. Each iteration opens the set's files (O_RDWR,
 * O_DIRECT with -d, as a database opens its chunks), then closes them.
 * Threads start together on a barrier.
 *
 * Output, one CSV line on stdout: threads,files,iterations,set,seconds
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SET_MAX 16

static unsigned nthreads = 128, nfiles = 1, iters = 200, setsize = 4;
static int oflags = O_RDWR;
static const char *dir;
static pthread_barrier_t start;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void set_path(char *p, size_t n, unsigned set, unsigned member)
{
	if (member == 0)
		snprintf(p, n, "%s/set%u.dat", dir, set);
	else
		snprintf(p, n, "%s/set%u.idx%u", dir, set, member);
}

static void *conn(void *arg)
{
	unsigned set = (unsigned)(unsigned long)arg % nfiles;
	char path[SET_MAX][4096];
	int fd[SET_MAX];

	for (unsigned m = 0; m < setsize; m++)
		set_path(path[m], sizeof(path[m]), set, m);
	pthread_barrier_wait(&start);
	for (unsigned it = 0; it < iters; it++) {
		for (unsigned m = 0; m < setsize; m++) {
			fd[m] = open(path[m], oflags);
			if (fd[m] < 0) {
				fprintf(stderr, "openclose: open %s: %s\n", path[m], strerror(errno));
				exit(1);
			}
		}
		for (unsigned m = 0; m < setsize; m++)
			close(fd[m]);
	}
	return NULL;
}

static unsigned parse_num(const char *s, const char *what, unsigned max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v == 0 || v > max) {
		fprintf(stderr, "openclose: bad %s '%s' (1..%u)\n", what, s, max);
		exit(2);
	}
	return (unsigned)v;
}

static int create_sets(void)
{
	static char buf[65536];

	for (unsigned s = 0; s < nfiles; s++) {
		for (unsigned m = 0; m < setsize; m++) {
			char p[4096];
			int fd;

			set_path(p, sizeof(p), s, m);
			fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0660);
			if (fd < 0 || write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf) ||
			    fsync(fd) || close(fd)) {
				fprintf(stderr, "openclose: create %s: %s\n", p, strerror(errno));
				return 1;
			}
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	bool create = false;
	pthread_t *tid;
	double t0, t1;
	int c;

	while ((c = getopt(argc, argv, "t:f:i:s:dch")) != -1) {
		switch (c) {
		case 't': nthreads = parse_num(optarg, "thread count", 4096); break;
		case 'f': nfiles = parse_num(optarg, "file-set count", 65536); break;
		case 'i': iters = parse_num(optarg, "iteration count", 1u << 30); break;
		case 's': setsize = parse_num(optarg, "set size", SET_MAX); break;
		case 'd': oflags |= O_DIRECT; break;
		case 'c': create = true; break;
		case 'h':
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: %s [-t threads] [-f files] [-i iterations] [-s set] [-d] [-c] DIR\n",
				argv[0]);
			return c == 'h' ? 0 : 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "openclose: which directory?\n");
		return 2;
	}
	dir = argv[optind];
	if (create)
		return create_sets();
	tid = calloc(nthreads, sizeof(*tid));
	if (!tid || pthread_barrier_init(&start, NULL, nthreads + 1)) {
		fprintf(stderr, "openclose: out of memory\n");
		return 1;
	}
	for (unsigned k = 0; k < nthreads; k++) {
		int err = pthread_create(&tid[k], NULL, conn, (void *)(unsigned long)k);

		if (err) {
			fprintf(stderr, "openclose: thread: %s\n", strerror(err));
			return 1;
		}
	}
	pthread_barrier_wait(&start);
	t0 = now();
	for (unsigned k = 0; k < nthreads; k++)
		pthread_join(tid[k], NULL);
	t1 = now();
	printf("%u,%u,%u,%u,%.3f\n", nthreads, nfiles, iters, setsize, t1 - t0);
	free(tid);
	return 0;
}
