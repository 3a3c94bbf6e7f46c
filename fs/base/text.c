// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * text.c — see text.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/base/text.h"

void cfs_text_error(char *err, size_t err_bytes, const char *fmt, ...)
{
	va_list ap;

	if (!err || !err_bytes)
		return;
	va_start(ap, fmt);
	vsnprintf(err, err_bytes, fmt, ap);
	va_end(ap);
}

void cfs_text_first_line(const char *path, char *out, size_t out_bytes)
{
	FILE *f = fopen(path, "re");

	out[0] = '\0';
	if (!f)
		return;
	if (!fgets(out, (int)out_bytes, f))
		out[0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/* "200M" and the like: bytes (K, M, G, T are powers of 1024). False when it
 * is not a number. */
bool cfs_text_parse_bytes(const char *text, size_t length, uint64_t *out)
{
	char buf[32];
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (length == 0 || length >= sizeof(buf))
		return false;
	memcpy(buf, text, length);
	buf[length] = 0;
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno || end == buf || buf[0] == '-')
		return false;
	switch (*end) {
	case 0:
		break;
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	default:
		return false;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}
