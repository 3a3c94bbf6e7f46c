/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz.h — what the libFuzzer targets in tests/fuzz/ share: the entry point
 * libFuzzer calls, and FUZZ_CHECK, an assertion that stays on in every
 * build (a target's oracle: a violated property is a finding, as a crash is).
 *
 * Each target is built twice: with clang -fsanitize=fuzzer,address,undefined
 * for `make fuzz`, and with the ordinary compiler plus driver.c (a main()
 * that feeds it files) for `make check`, which replays every input saved
 * under tests/fuzz/regressions/<target>/.
 */
#ifndef CFS_FUZZ_H
#define CFS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(expr)                                                                           \
	do {                                                                                       \
		if (!(expr)) {                                                                     \
			fprintf(stderr, "%s:%d: %s: property violated: %s\n", __FILE__, __LINE__,  \
				__func__, #expr);                                                  \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* Split data at NUL bytes into at most max - 2 arguments after argv[0];
 * copies into buf (size + 1 bytes). Returns argc; argv[argc] = NULL. */
static inline int fuzz_argv(const uint8_t *data, size_t size, char *buf, const char *prog,
			    char **argv, int max)
{
	int argc = 0;

	argv[argc++] = (char *)prog;
	for (size_t i = 0; i < size; i++)
		buf[i] = (char)data[i];
	buf[size] = '\0';
	for (size_t i = 0; i <= size && argc < max - 1;) {
		argv[argc++] = buf + i;
		while (i < size && buf[i])
			i++;
		i++;
		if (i > size)
			break;
	}
	argv[argc] = NULL;
	return argc;
}

#endif /* CFS_FUZZ_H */
