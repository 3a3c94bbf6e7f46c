// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * movecmd.c — `chunkfs move` (fs/fuse/movecmd.h).
 *
 *   chunkfs move [--wait | --no-wait] [--rate RATE] CHUNK STORE
 *   chunkfs move --pause | --resume | --cancel | --status CHUNK
 *
 * Starting a move sets user.chunkfs.move to "to=STORE [rate=RATE]"; waiting
 * reads the same xattr every 200 ms until the move ends, with a progress
 * line on a terminal. Errors are the daemon's, said in a DBA's words.
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

#include "fs/fuse/movecmd.h"

#define MOVE_XATTR "user.chunkfs.move"
#define POLL_US 200000

static void usage(FILE *f)
{
	fprintf(f, "usage: chunkfs move [--wait | --no-wait] [--rate RATE] CHUNK STORE\n"
		   "       chunkfs move --pause | --resume | --cancel | --status CHUNK\n"
		   "RATE: bytes per second, with K, M, G or T (powers of 1024), e.g. 200M\n");
}

/* A field of the progress text ("done=123"): its value, or "". */
void cfs_cmd_field(const char *text, const char *name, char *out, size_t out_bytes)
{
	size_t n = strlen(name);
	const char *end = strchr(text, '\n');

	out[0] = 0;
	for (const char *p = text; (p = strstr(p, name)) && (!end || p < end); p += n) {
		if ((p == text || p[-1] == ' ') && p[n] == '=') {
			size_t len = strcspn(p + n + 1, " \n");

			if (len >= out_bytes)
				len = out_bytes - 1;
			memcpy(out, p + n + 1, len);
			out[len] = 0;
			return;
		}
	}
}

static uint64_t field_u64(const char *text, const char *name)
{
	char v[32];

	cfs_cmd_field(text, name, v, sizeof(v));
	return strtoull(v, NULL, 10);
}

static int read_progress(const char *chunk, char *text, size_t bytes)
{
	ssize_t n = getxattr(chunk, MOVE_XATTR, text, bytes - 1);

	if (n < 0)
		return -errno;
	text[n] = 0;
	return 0;
}

void cfs_cmd_human(uint64_t bytes, char *out, size_t out_bytes)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	unsigned u = 0;

	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	snprintf(out, out_bytes, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

bool cfs_cmd_mount_root(const char *path, char *root, size_t root_bytes)
{
	char cur[PATH_MAX], up[PATH_MAX];
	struct stat st, st_up;

	if (!realpath(path, cur) || stat(cur, &st))
		return false;
	for (;;) {
		snprintf(up, sizeof(up), "%s", cur);
		dirname(up);
		if (!strcmp(up, cur) || stat(up, &st_up) || st_up.st_dev != st.st_dev)
			break;
		snprintf(cur, sizeof(cur), "%s", up);
	}
	snprintf(root, root_bytes, "%s", cur);
	return true;
}

/* The bytes a move may take on the store of a user.chunkfs.stores line: free
 * and busy (back at the next commit), less what the store holds back for
 * the kernel's write-back (held=). */
static uint64_t room_of(const char *line)
{
	uint64_t have = field_u64(line, "free") + field_u64(line, "busy");
	uint64_t held = field_u64(line, "held");

	return have > held ? have - held : 0;
}

/* ENOSPC: say how much the store has and how much the chunk needs. */
static void explain_nospace(const char *chunk, const char *store)
{
	char root[PATH_MAX], stores[8192], free_h[32], need_h[32];
	struct stat st;
	ssize_t n;
	const char *line = NULL;

	if (!cfs_cmd_mount_root(chunk, root, sizeof(root)) || stat(chunk, &st))
		goto plain;
	n = getxattr(root, "user.chunkfs.stores", stores, sizeof(stores) - 1);
	if (n < 0)
		goto plain;
	stores[n] = 0;
	for (char *p = stores; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		size_t len = strlen(store);

		if (!strncmp(p, store, len) && p[len] == ' ') {
			line = p;
			break;
		}
	}
	if (!line)
		goto plain;
	cfs_cmd_human(room_of(line), free_h, sizeof(free_h));
	cfs_cmd_human((uint64_t)st.st_blocks * 512, need_h, sizeof(need_h));
	fprintf(stderr,
		"chunkfs move: %s: not enough room on %s: it has %s free, the chunk needs up to "
		"%s; nothing was changed\n",
		chunk, store, free_h, need_h);
	return;
plain:
	fprintf(stderr, "chunkfs move: %s: not enough room on %s; nothing was changed\n", chunk,
		store);
}

static int refuse(const char *chunk, const char *store, int err)
{
	switch (err) {
	case ENOSPC:
		explain_nospace(chunk, store);
		break;
	case EBUSY:
		fprintf(stderr,
			"chunkfs move: %s is being moved to another store (chunkfs move --cancel "
			"first)\n",
			chunk);
		break;
	case EINVAL:
		fprintf(stderr, "chunkfs move: %s: no store %s in this pool, or a bad rate\n",
			chunk, store ? store : "");
		break;
	case ENOENT:
		fprintf(stderr, "chunkfs move: %s: %s\n", chunk,
			store ? strerror(err) : "no move to change");
		break;
	case ENODATA:
	case EOPNOTSUPP:
		fprintf(stderr, "chunkfs move: %s is not a chunk on a chunkfs mount\n", chunk);
		break;
	default:
		fprintf(stderr, "chunkfs move: %s: %s\n", chunk, strerror(err));
	}
	return 1;
}

/* Are all of chunk's units on store (user.chunkfs.store names it alone)? */
static bool only_on(const char *chunk, const char *store)
{
	char where[256];
	ssize_t n = getxattr(chunk, "user.chunkfs.store", where, sizeof(where) - 1);

	if (n < 0)
		return false;
	where[n] = 0;
	return !strcmp(where, store);
}

/* Wait for the move of chunk to `to` to end. */
static int wait_move(const char *chunk, const char *to)
{
	bool tty = isatty(STDOUT_FILENO);
	struct timespec t0, t;
	char text[512], state[32], dst[128], done_h[32], total_h[32], rate_h[32];
	bool shown = false;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int ret = read_progress(chunk, text, sizeof(text));
		uint64_t done, total;

		if (ret)
			return refuse(chunk, to, -ret);
		cfs_cmd_field(text, "state", state, sizeof(state));
		cfs_cmd_field(text, "to", dst, sizeof(dst));
		done = field_u64(text, "done");
		total = field_u64(text, "total");
		cfs_cmd_human(done, done_h, sizeof(done_h));
		cfs_cmd_human(total, total_h, sizeof(total_h));
		cfs_cmd_human(field_u64(text, "rate"), rate_h, sizeof(rate_h));
		if (!strcmp(state, "done") || !strcmp(state, "none")) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (shown)
				printf("\n");
			if ((!strcmp(state, "none") || strcmp(dst, to)) && !only_on(chunk, to)) {
				fprintf(stderr, "chunkfs move: the move of %s was cancelled\n",
					chunk);
				return 1;
			}
			printf("moved %s to %s: %s in %.1f s\n", chunk, to, done_h,
			       (double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9);
			return 0;
		}
		if (!strcmp(state, "nospace") || !strcmp(state, "error")) {
			if (shown)
				printf("\n");
			if (!strcmp(state, "nospace"))
				return refuse(chunk, to, ENOSPC);
			fprintf(stderr,
				"chunkfs move: the move of %s failed (%s); the daemon's log "
				"says why\n",
				chunk, text);
			return 1;
		}
		if (tty) {
			printf("\r%s %s: %s of %s (%" PRIu64 "%%), %s/s   ", state, chunk, done_h,
			       total_h, total ? done * 100 / total : 0, rate_h);
			fflush(stdout);
			shown = true;
		}
		usleep(POLL_US);
	}
}

int cfs_movecmd_main(int argc, char **argv)
{
	enum { OPT_WAIT = 1, OPT_NO_WAIT, OPT_PAUSE, OPT_RESUME, OPT_CANCEL, OPT_STATUS };
	static const struct option longs[] = {
		{"wait", no_argument, NULL, OPT_WAIT},
		{"no-wait", no_argument, NULL, OPT_NO_WAIT},
		{"rate", required_argument, NULL, 'r'},
		{"pause", no_argument, NULL, OPT_PAUSE},
		{"resume", no_argument, NULL, OPT_RESUME},
		{"cancel", no_argument, NULL, OPT_CANCEL},
		{"status", no_argument, NULL, OPT_STATUS},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *rate = NULL, *action = NULL;
	bool wait = true;
	char value[256];
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "r:h", longs, NULL)) != -1) {
		switch (c) {
		case OPT_WAIT:
			wait = true;
			break;
		case OPT_NO_WAIT:
			wait = false;
			break;
		case 'r':
			rate = optarg;
			break;
		case OPT_PAUSE:
		case OPT_RESUME:
		case OPT_CANCEL:
		case OPT_STATUS:
			if (action) {
				usage(stderr);
				return 2;
			}
			action = c == OPT_PAUSE	   ? "pause"
				 : c == OPT_RESUME ? "resume"
				 : c == OPT_CANCEL ? "cancel"
						   : "status";
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (action) {
		char text[512];
		int ret;

		if (argc - optind != 1 || rate) {
			usage(stderr);
			return 2;
		}
		if (!strcmp(action, "status")) {
			ret = read_progress(argv[optind], text, sizeof(text));
			if (ret)
				return refuse(argv[optind], NULL, -ret);
			printf("%s\n", text);
			return 0;
		}
		if (setxattr(argv[optind], MOVE_XATTR, action, strlen(action), 0))
			return refuse(argv[optind], NULL, errno);
		return 0;
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	snprintf(value, sizeof(value), "to=%s%s%s", argv[optind + 1], rate ? " rate=" : "",
		 rate ? rate : "");
	if (setxattr(argv[optind], MOVE_XATTR, value, strlen(value), 0))
		return refuse(argv[optind], argv[optind + 1], errno);
	return wait ? wait_move(argv[optind], argv[optind + 1]) : 0;
}
