/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * hex.h — the value of a hexadecimal digit, for the parsers of every layer
 * (fs/format's UUIDs, fs/stats' %XX escapes).
 */
#ifndef CFS_BASE_HEX_H
#define CFS_BASE_HEX_H

/* 0..15 for 0-9, a-f, A-F; -1 for anything else. */
static inline int cfs_hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif /* CFS_BASE_HEX_H */
