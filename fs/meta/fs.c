/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fs.c — what the mounted filesystem object does itself: its log lines and
 * its read-only state (a failed metadata write turns it read-only, once).
 * Mount and unmount are mount.c's.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fs/meta/fs.h"

void cfs_fs_log(struct cfs_fs *fs, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (fs && fs->opts.log)
		fs->opts.log(fs->opts.log_arg, line);
	else
		fprintf(stderr, "chunkfs: %s\n", line);
}

bool cfs_fs_is_readonly(const struct cfs_fs *fs)
{
	return atomic_load(&((struct cfs_fs *)fs)->readonly);
}

void cfs_fs_set_readonly(struct cfs_fs *fs, const char *what, int err)
{
	/* One line, the first time: every later failure is a consequence. */
	if (!atomic_exchange(&fs->readonly, true))
		cfs_fs_log(fs, "metadata %s failed (%s): the filesystem is read-only from now on",
			   what, strerror(err < 0 ? -err : err));
}
