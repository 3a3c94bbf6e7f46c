/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * records.h — turn fuzz input into log records with valid framing, so a
 * fuzzer gets past the checksums to the payload decoders and replay (it
 * would never guess an XXH3). Input: a sequence of
 *     [type u16][flags u16][payload length u16][payload ...]
 * little-endian; a length past the end of the input takes what is left.
 */
#ifndef CFS_FUZZ_RECORDS_H
#define CFS_FUZZ_RECORDS_H

#include <string.h>

#include "fs/format/format.h"

#define FUZZ_RECORDS_MAX 4096u

/*
 * Encode records from data into out (out_size bytes) with sequence numbers
 * from first_seq, checksums with seed. Returns the bytes used; *count the
 * records encoded. Stops when the input or the room ends.
 */
static inline size_t fuzz_frame_records(const uint8_t *data, size_t size, uint8_t *out,
					size_t out_size, uint64_t first_seq, uint64_t seed,
					uint64_t *count)
{
	size_t used = 0, pos = 0;

	*count = 0;
	while (pos + 6 <= size && *count < FUZZ_RECORDS_MAX) {
		uint16_t type = (uint16_t)(data[pos] | data[pos + 1] << 8);
		uint16_t flags = (uint16_t)(data[pos + 2] | data[pos + 3] << 8);
		uint32_t length = (uint32_t)(data[pos + 4] | data[pos + 5] << 8);
		int n;

		pos += 6;
		if (length > size - pos)
			length = (uint32_t)(size - pos);
		if (type == 0)
			type = 1; /* type 0 never frames; keep the record */
		n = cfs_log_record_encode(out + used, out_size - used, type, flags,
					  first_seq + *count, seed, data + pos, length);
		if (n < 0)
			break;
		used += (size_t)n;
		pos += length;
		(*count)++;
	}
	return used;
}

#endif /* CFS_FUZZ_RECORDS_H */
