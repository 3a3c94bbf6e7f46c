// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * text.c — see text.h.
 */
#include <stdarg.h>
#include <stdio.h>
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
