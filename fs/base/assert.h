/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * assert.h — the always-on assertion every layer uses.
 *
 * CFS_ASSERT(expr) guards invariants whose violation would corrupt data or
 * the store (alignment, bounds, refcounts, unit ownership, a superblock about
 * to be written): it stays in every build, prints the program, file, line,
 * function and expression on stderr, and aborts. Plain assert() is for
 * debug-only checks in hot paths.
 */
#ifndef CFS_BASE_ASSERT_H
#define CFS_BASE_ASSERT_H

__attribute__((noreturn, cold)) void cfs_assert_fail(const char *expr, const char *file, int line,
						     const char *func);

#define CFS_ASSERT(expr)                                                                           \
	do {                                                                                       \
		if (__builtin_expect(!(expr), 0))                                                  \
			cfs_assert_fail(#expr, __FILE__, __LINE__, __func__);                      \
	} while (0)

#endif /* CFS_BASE_ASSERT_H */
