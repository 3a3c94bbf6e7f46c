/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * text.h — small text chores several layers share: an error message
 * formatted into a caller's optional buffer (the mount paths of fs/meta
 * report why they refused), the first line of a small file (sysfs and
 * /proc values), and byte counts with K/M/G/T (rates of moves).
 */
#ifndef CFS_BASE_TEXT_H
#define CFS_BASE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Format into err[err_bytes] (truncated, always terminated); nothing when
 * err is NULL or err_bytes is 0. */
void cfs_text_error(char *err, size_t err_bytes, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The first line of the file at path into out[out_bytes], without its
 * newline; an empty string if the file cannot be opened or read. */
void cfs_text_first_line(const char *path, char *out, size_t out_bytes);

/* "200M" and the like: *out bytes (K, M, G, T are powers of 1024), from
 * text[0..length). False when it is not such a number. */
bool cfs_text_parse_bytes(const char *text, size_t length, uint64_t *out);

#endif /* CFS_BASE_TEXT_H */
