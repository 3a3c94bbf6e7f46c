/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * assert.c — where CFS_ASSERT stops the program (fs/base/assert.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fs/base/assert.h"

void cfs_assert_fail(const char *expr, const char *file, int line, const char *func)
{
	fprintf(stderr, "%s: %s:%d: %s: assertion failed: %s\n", program_invocation_short_name,
		file, line, func, expr);
	fflush(stderr);
	abort();
}
