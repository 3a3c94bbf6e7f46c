/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_text.c — unit tests of fs/base/text.h: an error message is cut to the
 * caller's buffer and always terminated, a NULL or empty buffer is left
 * alone; a file's first line comes without its newline, and a missing or
 * empty file gives an empty string.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "fs/base/text.h"

Test(text, error_fits_and_is_cut)
{
	char buf[8];

	cfs_text_error(buf, sizeof(buf), "%s %d", "ab", 7);
	cr_assert_str_eq(buf, "ab 7");
	cfs_text_error(buf, sizeof(buf), "%s", "a longer message");
	cr_assert_str_eq(buf, "a longe");
}

Test(text, error_without_buffer)
{
	char buf[4] = "xyz";

	cfs_text_error(NULL, 16, "%s", "nothing");
	cfs_text_error(buf, 0, "%s", "nothing");
	cr_assert_str_eq(buf, "xyz");
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

Test(text, first_line)
{
	char path[] = "/tmp/cfs-test-text-XXXXXX", out[16];
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	close(fd);
	write_file(path, "/srv/store.img\nsecond line\n");
	cfs_text_first_line(path, out, sizeof(out));
	cr_assert_str_eq(out, "/srv/store.img");
	write_file(path, "no newline");
	cfs_text_first_line(path, out, sizeof(out));
	cr_assert_str_eq(out, "no newline");
	write_file(path, "a line longer than the buffer\n");
	cfs_text_first_line(path, out, sizeof(out));
	cr_assert_str_eq(out, "a line longer t");
	write_file(path, "");
	strcpy(out, "old");
	cfs_text_first_line(path, out, sizeof(out));
	cr_assert_str_eq(out, "");
	unlink(path);
	strcpy(out, "old");
	cfs_text_first_line(path, out, sizeof(out));
	cr_assert_str_eq(out, "");
}
