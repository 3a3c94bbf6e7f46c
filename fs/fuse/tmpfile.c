/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tmpfile.c — FUSE_TMPFILE for libfuse 3.14 (see tmpfile.h).
 */
#include <linux/fuse.h>
#include <stdint.h>

#include "fs/fuse/tmpfile.h"

/* Debian 12's uapi header (7.38) has the opcode (7.37); the request struct
 * is CREATE's, unchanged since 7.12, and so is the reply. */
_Static_assert(FUSE_TMPFILE == 51, "FUSE_TMPFILE opcode");
_Static_assert(sizeof(struct fuse_create_in) == 16, "fuse_create_in ABI");

static _Thread_local bool tmpfile_requested;

void cfs_tmpfile_note(void *msg, size_t bytes)
{
	struct fuse_in_header *in = msg;
	const char *end = (const char *)msg + bytes;

	tmpfile_requested = false;
	/* Only a request libfuse's CREATE handler can read whole: the op
	 * struct, then a NUL-terminated name. Anything else keeps its opcode
	 * and gets ENOSYS from libfuse (the kernel then says EOPNOTSUPP). */
	if (bytes < sizeof(*in) + sizeof(struct fuse_create_in) + 1 || in->opcode != FUSE_TMPFILE ||
	    in->len != bytes || end[-1] != '\0')
		return;
	in->opcode = FUSE_CREATE;
	tmpfile_requested = true;
}

bool cfs_tmpfile_requested(void)
{
	return tmpfile_requested;
}
