/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_mkfs_opts.c — mkchunkfs's option parser (mkchunkfs/opts.c) on
 * arbitrary argument vectors (the input split at NUL bytes). Properties:
 * it returns 0 or -EINVAL, -EINVAL exactly when it collected errors, every
 * kept message is NUL-terminated, and a successful parse names a target or
 * asks for help or the version.
 */
#include <errno.h>
#include <string.h>

#include "mkchunkfs/opts.h"
#include "tests/fuzz/fuzz.h"

#define ARGS_MAX 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct cfs_mkfs_errs errs;
	struct cfs_mkfs_opts opts;
	char *argv[ARGS_MAX], *buf;
	int argc, ret;

	if (size > 4096)
		return 0;
	buf = malloc(size + 1);
	if (!buf)
		return 0;
	argc = fuzz_argv(data, size, buf, "mkchunkfs", argv, ARGS_MAX);
	ret = cfs_mkfs_opts_parse(argc, argv, &opts, &errs);
	FUZZ_CHECK(ret == 0 || ret == -EINVAL);
	FUZZ_CHECK((ret == 0) == (errs.count == 0));
	for (unsigned i = 0; i < errs.count && i < CFS_MKFS_ERRS_MAX; i++)
		FUZZ_CHECK(memchr(errs.msg[i], '\0', CFS_MKFS_ERR_BYTES) != NULL);
	if (ret == 0)
		FUZZ_CHECK(opts.target || opts.help || opts.version);
	free(buf);
	return 0;
}
