/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * text.h — two small text chores several layers share: an error message
 * formatted into a caller's optional buffer (the mount paths of fs/meta
 * report why they refused), and the first line of a small file (sysfs and
 * /proc values).
 */
#ifndef CFS_BASE_TEXT_H
#define CFS_BASE_TEXT_H

#include <stddef.h>

/* Format into err[err_bytes] (truncated, always terminated); nothing when
 * err is NULL or err_bytes is 0. */
void cfs_text_error(char *err, size_t err_bytes, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The first line of the file at path into out[out_bytes], without its
 * newline; an empty string if the file cannot be opened or read. */
void cfs_text_first_line(const char *path, char *out, size_t out_bytes);

#endif /* CFS_BASE_TEXT_H */
