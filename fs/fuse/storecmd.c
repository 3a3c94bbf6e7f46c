// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * storecmd.c — `chunkfs store` (fs/fuse/storecmd.h).
 *
 *   chunkfs store add DIR SOURCE [-L LABEL]
 *   chunkfs store remove [--wait | --no-wait] [--rate RATE] DIR STORE
 *   chunkfs store remove --cancel DIR STORE
 *   chunkfs store list DIR
 *
 * DIR is the mount (or any path in it: its mount root is asked). An add
 * sets user.chunkfs.stores to "add [label=LABEL] SOURCE" (SOURCE made
 * absolute: the daemon runs in /); a remove to "remove [rate=RATE] STORE",
 * then reads user.chunkfs.stores every 200 ms until the store is gone, with
 * a progress line on a terminal; a cancel to "cancel-remove STORE", which
 * the daemon answers once the cancel is durable (what it did is then in
 * user.chunkfs.stores.why). A refusal prints the daemon's sentence
 * (user.chunkfs.stores.why).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "fs/fuse/storecmd.h"
#include "fs/fuse/movecmd.h"

#define STORES_XATTR "user.chunkfs.stores"
#define WHY_XATTR "user.chunkfs.stores.why"
#define POLL_US 200000
#define LISTING_BYTES 65536

static void usage(FILE *f)
{
	fprintf(f, "usage: chunkfs store add DIR SOURCE [-L LABEL]\n"
		   "       chunkfs store remove [--wait | --no-wait] [--rate RATE] DIR STORE\n"
		   "       chunkfs store remove --cancel DIR STORE\n"
		   "       chunkfs store list DIR\n"
		   "DIR: the pool's mount; SOURCE: a block device, an image file or a Ceph RBD\n"
		   "image (rbd:POOL/IMAGE); STORE: a label or index; RATE: bytes per second,\n"
		   "with K, M, G or T (powers of 1024)\n");
}

static int read_stores(const char *root, char *text, size_t bytes)
{
	ssize_t n = getxattr(root, STORES_XATTR, text, bytes - 1);

	if (n < 0)
		return -errno;
	text[n] = 0;
	return 0;
}

/* The line of store `name` (label or index) in the listing, or NULL. */
static const char *store_line(const char *listing, const char *name)
{
	size_t len = strlen(name);
	char index[32];

	snprintf(index, sizeof(index), " index=%s ", name);
	for (const char *p = listing; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		const char *end = strchr(p, '\n');
		const char *hit = strstr(p, index);

		if (!strncmp(p, name, len) && p[len] == ' ')
			return p;
		if (hit && (!end || hit < end))
			return p;
	}
	return NULL;
}

/* The daemon's sentence for this process (user.chunkfs.stores.why): its
 * length, 0 when it has none. */
static size_t read_why(const char *root, char *why, size_t bytes)
{
	ssize_t n = getxattr(root, WHY_XATTR, why, bytes - 1);

	why[n > 0 ? n : 0] = 0;
	return n > 0 ? (size_t)n : 0;
}

/* Say why the daemon refused (or stopped): its sentence, else errno's. */
static int refuse(const char *verb, const char *root, int err)
{
	char why[1024];

	if (read_why(root, why, sizeof(why))) {
		fprintf(stderr, "chunkfs store %s: %s\n", verb, why);
	} else if (err == ENODATA || err == EOPNOTSUPP) {
		fprintf(stderr, "chunkfs store %s: %s is not a chunkfs pool's mount\n", verb, root);
	} else if (err == EPERM) {
		fprintf(stderr, "chunkfs store %s: only root adds and removes stores\n", verb);
	} else {
		fprintf(stderr, "chunkfs store %s: %s\n", verb, strerror(err));
	}
	return 1;
}

static int cmd_list(const char *root)
{
	char *text = malloc(LISTING_BYTES);
	int ret;

	if (!text)
		return 1;
	ret = read_stores(root, text, LISTING_BYTES);
	if (ret) {
		free(text);
		return refuse("list", root, -ret);
	}
	fputs(text, stdout);
	free(text);
	return 0;
}

static int cmd_add(const char *root, const char *source, const char *label)
{
	char value[PATH_MAX + 128], path[PATH_MAX], listing[LISTING_BYTES], size_h[32], v[32];
	const char *line;

	if (strncmp(source, "rbd:", 4) && !realpath(source, path)) {
		fprintf(stderr, "chunkfs store add: %s: %s\n", source, strerror(errno));
		return 1;
	} else if (!strncmp(source, "rbd:", 4)) {
		snprintf(path, sizeof(path), "%s", source);
	}
	snprintf(value, sizeof(value), "add %s%s%s%s", label ? "label=" : "", label ? label : "",
		 label ? " " : "", path);
	if (setxattr(root, STORES_XATTR, value, strlen(value), 0))
		return refuse("add", root, errno);
	if (read_stores(root, listing, sizeof(listing)) == 0 &&
	    (line = label ? store_line(listing, label) : NULL)) {
		cfs_cmd_field(line, "data", v, sizeof(v));
		cfs_cmd_human(strtoull(v, NULL, 10), size_h, sizeof(size_h));
		cfs_cmd_field(line, "index", v, sizeof(v));
		printf("added %s to the pool on %s: store %s (index %s), %s of data\n", path, root,
		       label, v, size_h);
	} else {
		printf("added %s to the pool on %s\n", path, root);
	}
	return 0;
}

static int cmd_remove(const char *root, const char *store, const char *rate, bool wait)
{
	char value[512], listing[LISTING_BYTES], left[32], stopped[32], left_h[32], state[32];
	bool tty = isatty(STDOUT_FILENO), shown = false;
	struct timespec t0, t;

	snprintf(value, sizeof(value), "remove %s%s%s", rate ? "rate=" : "", rate ? rate : "",
		 rate ? " " : "");
	snprintf(value + strlen(value), sizeof(value) - strlen(value), "%s", store);
	if (setxattr(root, STORES_XATTR, value, strlen(value), 0))
		return refuse("remove", root, errno);
	if (!wait) {
		printf("removing %s from the pool on %s (chunkfs store list %s shows what is "
		       "left)\n",
		       store, root, root);
		return 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		const char *line;
		int ret = read_stores(root, listing, sizeof(listing));

		if (ret)
			return refuse("remove", root, -ret);
		line = store_line(listing, store);
		if (!line) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (shown)
				printf("\n");
			printf("removed %s from the pool on %s in %.1f s\n", store, root,
			       (double)(t.tv_sec - t0.tv_sec) +
				       (double)(t.tv_nsec - t0.tv_nsec) / 1e9);
			return 0;
		}
		cfs_cmd_field(line, "state", state, sizeof(state));
		if (!strcmp(state, "active")) {
			/* Cancelled (chunkfs store remove --cancel). */
			if (shown)
				printf("\n");
			return refuse("remove", root, ECANCELED);
		}
		cfs_cmd_field(line, "stopped", stopped, sizeof(stopped));
		if (stopped[0]) {
			char why[1024];

			if (shown)
				printf("\n");
			if (read_why(root, why, sizeof(why)))
				fprintf(stderr, "chunkfs store remove: %s\n", why);
			else
				fprintf(stderr,
					"chunkfs store remove: the removal stopped (%s); the "
					"daemon's log says why\n",
					stopped);
			fprintf(stderr,
				"chunkfs store remove: %s stays in the pool, removing (run the same "
				"command again to go on)\n",
				store);
			return 1;
		}
		cfs_cmd_field(line, "left", left, sizeof(left));
		if (tty) {
			cfs_cmd_human(strtoull(left, NULL, 10), left_h, sizeof(left_h));
			printf("\rremoving %s: %s left to move   ", store, left_h);
			fflush(stdout);
			shown = true;
		}
		usleep(POLL_US);
	}
}

/* The daemon answers once the removal thread has ended and the store is
 * active in store 0's table: nothing to wait for here. */
static int cmd_cancel(const char *root, const char *store)
{
	char value[512], why[1024];

	snprintf(value, sizeof(value), "cancel-remove %s", store);
	if (setxattr(root, STORES_XATTR, value, strlen(value), 0))
		return refuse("remove --cancel", root, errno);
	if (read_why(root, why, sizeof(why)))
		printf("%s\n", why);
	else
		printf("removal of %s cancelled\n", store);
	return 0;
}

int cfs_storecmd_main(int argc, char **argv)
{
	enum { OPT_WAIT = 1, OPT_NO_WAIT, OPT_CANCEL };
	static const struct option longs[] = {
		{"wait", no_argument, NULL, OPT_WAIT},
		{"no-wait", no_argument, NULL, OPT_NO_WAIT},
		{"cancel", no_argument, NULL, OPT_CANCEL},
		{"rate", required_argument, NULL, 'r'},
		{"label", required_argument, NULL, 'L'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *rate = NULL, *label = NULL, *verb;
	char root[PATH_MAX];
	bool wait = true, cancel = false, wait_given = false;
	int c;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	verb = argv[1];
	if (!strcmp(verb, "-h") || !strcmp(verb, "--help")) {
		usage(stdout);
		return 0;
	}
	optind = 1;
	argc--;
	argv++;
	while ((c = getopt_long(argc, argv, "r:L:h", longs, NULL)) != -1) {
		switch (c) {
		case OPT_WAIT:
		case OPT_NO_WAIT:
			wait = c == OPT_WAIT;
			wait_given = true;
			break;
		case OPT_CANCEL:
			cancel = true;
			break;
		case 'r':
			rate = optarg;
			break;
		case 'L':
			label = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if ((!strcmp(verb, "add") && (argc - optind != 2 || rate)) ||
	    (!strcmp(verb, "remove") &&
	     (argc - optind != 2 || label || (cancel && (rate || (wait_given && !wait))))) ||
	    (cancel && strcmp(verb, "remove")) ||
	    (!strcmp(verb, "list") && (argc - optind != 1 || rate || label)) ||
	    (strcmp(verb, "add") && strcmp(verb, "remove") && strcmp(verb, "list"))) {
		usage(stderr);
		return 2;
	}
	if (!cfs_cmd_mount_root(argv[optind], root, sizeof(root))) {
		fprintf(stderr, "chunkfs store %s: %s: %s\n", verb, argv[optind], strerror(errno));
		return 1;
	}
	if (!strcmp(verb, "list"))
		return cmd_list(root);
	if (!strcmp(verb, "add"))
		return cmd_add(root, argv[optind + 1], label);
	if (cancel)
		return cmd_cancel(root, argv[optind + 1]);
	return cmd_remove(root, argv[optind + 1], rate, wait);
}
