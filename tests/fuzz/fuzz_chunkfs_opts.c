/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_chunkfs_opts.c — the daemon's command line (fs/fuse/main.c parse_args:
 * positional arguments, -o lists, the mount-helper shapes, fault= specs).
 *
 * fs/fuse/main.c is compiled into this target with its main() renamed, so its
 * static parser is tested as the daemon runs it, without exporting it (the
 * daemon's file stays as it is; if parse_args changes shape, this target is
 * where the build says so). Arguments that end the process by design (-h,
 * -V) are dropped from the input. Its usage messages are silenced by
 * running it with -close_fd_mask=3 (make fuzz does), which keeps libFuzzer's
 * and the sanitizers' reports.
 */
#include <string.h>

int chunkfs_main(int argc, char **argv);
#define main chunkfs_main
#include "fs/fuse/main.c"
#undef main

#include "tests/fuzz/fuzz.h"

#define ARGS_MAX 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv[ARGS_MAX], *buf;
	struct options o;
	int argc, kept = 1;

	if (size > 4096)
		return 0;
	buf = malloc(size + 1);
	if (!buf)
		return 0;
	argc = fuzz_argv(data, size, buf, (size && (data[0] & 1)) ? "mount.chunkfs" : "chunkfs",
			 argv, ARGS_MAX);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "-V") ||
		    !strcmp(a, "--version"))
			continue;
		argv[kept++] = argv[i];
	}
	argv[kept] = NULL;
	memset(&o, 0, sizeof(o));
	if (parse_args(&o, kept, argv) == 0 && o.fault_spec) {
		/* What the daemon does next with a spec: open the fault backend
		 * over a harmless inner one (its spec parser is the point). */
		struct cfs_io_config cfg = {
			.backend = "null", .size_bytes = 1u << 20, .fault_spec = o.fault_spec};
		struct cfs_io *io;

		if (cfs_io_open(&cfg, &io) == 0)
			cfs_io_close(io);
	}
	free(buf);
	return 0;
}
