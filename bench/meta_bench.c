// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * meta_bench.c — metadata operations on many chunk files, timed:
 *
 *   meta_bench create [-s bytes] N DIR   create DIR/cNNNNN, N of them, each
 *                                         fallocated to `bytes` (default 0)
 *   meta_bench stat N DIR                stat every one of them
 *   meta_bench remove N DIR              unlink every one of them
 *   meta_bench mount MNT NAME -- CMD...  run CMD (a daemon staying in the
 *                                         foreground, e.g. chunkfs -f), and
 *                                         time until MNT/NAME can be stat'ed
 *                                         on a new filesystem (the mount
 *                                         answers); CMD keeps running
 *
 * Output, one CSV line on stdout: op,N,seconds (mount: mount,1,seconds,pid).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void name(char *p, size_t n, const char *dir, unsigned long i)
{
	snprintf(p, n, "%s/c%05lu", dir, i);
}

static int usage(void)
{
	fprintf(stderr, "usage: meta_bench create [-s bytes] N DIR | stat N DIR | remove N DIR |\n"
			"       meta_bench mount MNT NAME -- CMD [ARG...]\n");
	return 2;
}

static int time_mount(int argc, char **argv)
{
	struct stat before, st;
	char probe[4096];
	double t0, t;
	pid_t pid;
	int status;

	if (argc < 5 || strcmp(argv[3], "--"))
		return usage();
	if (stat(argv[1], &before)) {
		fprintf(stderr, "meta_bench: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	snprintf(probe, sizeof(probe), "%s/%s", argv[1], argv[2]);
	t0 = now();
	pid = fork();
	if (pid < 0) {
		perror("meta_bench: fork");
		return 1;
	}
	if (pid == 0) {
		/* our stdout is the result; the daemon outlives us, keep it off */
		dup2(STDERR_FILENO, STDOUT_FILENO);
		execvp(argv[4], argv + 4);
		fprintf(stderr, "meta_bench: %s: %s\n", argv[4], strerror(errno));
		_exit(127);
	}
	for (;;) {
		if (stat(probe, &st) == 0 && st.st_dev != before.st_dev)
			break;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			fprintf(stderr, "meta_bench: %s exited before the mount answered\n", argv[4]);
			return 1;
		}
		if (now() - t0 > 120) {
			fprintf(stderr, "meta_bench: no mount after 120 s\n");
			kill(pid, SIGTERM);
			return 1;
		}
		usleep(500);
	}
	t = now() - t0;
	printf("mount,1,%.4f,%d\n", t, (int)pid);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long n, i;
	long long bytes = 0;
	const char *op, *dir;
	char p[4096];
	double t0;
	int c;

	if (argc < 2)
		return usage();
	op = argv[1];
	if (!strcmp(op, "mount"))
		return time_mount(argc - 1, argv + 1);
	optind = 2;
	while ((c = getopt(argc, argv, "s:")) != -1) {
		if (c != 's')
			return usage();
		bytes = strtoll(optarg, NULL, 10);
	}
	if (argc - optind != 2)
		return usage();
	n = strtoul(argv[optind], NULL, 10);
	dir = argv[optind + 1];
	if (n == 0 || n > 99999 || bytes < 0)
		return usage();
	t0 = now();
	for (i = 0; i < n; i++) {
		struct stat st;
		int fd;

		name(p, sizeof(p), dir, i);
		if (!strcmp(op, "create")) {
			fd = open(p, O_CREAT | O_EXCL | O_RDWR, 0660);
			if (fd < 0 || (bytes && fallocate(fd, 0, 0, bytes)) || close(fd))
				goto fail;
		} else if (!strcmp(op, "stat")) {
			if (stat(p, &st))
				goto fail;
		} else if (!strcmp(op, "remove")) {
			if (unlink(p))
				goto fail;
		} else {
			return usage();
		}
	}
	printf("%s,%lu,%.4f\n", op, n, now() - t0);
	return 0;
fail:
	fprintf(stderr, "meta_bench: %s %s: %s\n", op, p, strerror(errno));
	return 1;
}
