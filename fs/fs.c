/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fs.c — the mounted filesystem object: mount (superblocks, snapshot, log
 * replay, orphans), the RAM temp mount, unmount (final snapshot + CLEAN),
 * read-only after a failed metadata write, logging and assertions.
 *
 * Main invariant: once cfs_fs_open*() returns, the in-memory state is the
 * truth and the store holds a prefix of it (snapshot + durable log); the
 * committer is the only thread writing metadata to the store.
 *
 * What it does not do: FUSE, data I/O, option parsing.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"

_Noreturn void cfs_fs_assert_fail(const char *expr, const char *file, int line, const char *func)
{
	fprintf(stderr, "chunkfs: %s:%d: %s: assertion failed: %s\n", file, line, func, expr);
	fflush(stderr);
	abort();
}
