/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * driver.c — main() for a fuzz target built without libFuzzer: runs the
 * target once per file named on the command line (regression inputs in
 * `make check`, or a crash file being debugged under gdb). Exits 0 when
 * every input ran; a finding aborts, as under libFuzzer.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/fuzz/fuzz.h"

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		uint8_t *data;
		long size;

		if (!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
			perror(argv[i]);
			return 2;
		}
		data = malloc((size_t)size + 1);
		if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
			perror(argv[i]);
			return 2;
		}
		fclose(f);
		LLVMFuzzerTestOneInput(data, (size_t)size);
		free(data);
	}
	printf("%d inputs ran\n", argc - 1);
	return 0;
}
