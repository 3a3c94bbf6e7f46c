/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_superblock.c — the superblock decoders on arbitrary bytes: each slot
 * alone (cfs_sb_decode), the choice between two (cfs_sb_pick), and the
 * mountability check. Properties: decode never reads outside its 4096
 * bytes; what decodes re-encodes (the encoder asserts what the decoder
 * accepted: FORMAT.md 3.1, "what one program writes, every program
 * accepts") and decodes to the same superblock; a pick never chooses a slot
 * whose copy does not decode.
 */
#include <errno.h>
#include <string.h>

#include "fs/format/format.h"
#include "tests/fuzz/fuzz.h"

static void roundtrip(const struct cfs_sb *sb)
{
	uint8_t block[CFS_SB_BLOCK_BYTES];
	struct cfs_sb again = {0};
	const char *why = NULL;

	cfs_sb_encode(sb, block);
	FUZZ_CHECK(cfs_sb_decode(block, &again, &why) >= 0);
	FUZZ_CHECK(memcmp(sb, &again, sizeof(again)) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t slots[2 * CFS_SB_BLOCK_BYTES];
	const char *why = NULL;
	struct cfs_sb sb;
	int slot = -1, ret;

	/* Short inputs fill the first bytes of slot 0; the rest stays zero. */
	memset(slots, 0, sizeof(slots));
	memcpy(slots, data, size < sizeof(slots) ? size : sizeof(slots));
	for (int s = 0; s < 2; s++) {
		memset(&sb, 0, sizeof(sb));
		ret = cfs_sb_decode(slots + s * CFS_SB_BLOCK_BYTES, &sb, &why);
		FUZZ_CHECK(ret == 0 || ret == CFS_SB_RO_REQUIRED || ret == -EINVAL ||
			   ret == -EUCLEAN || ret == -EOPNOTSUPP);
		FUZZ_CHECK(ret == 0 || why);
		if (ret == 0)
			roundtrip(&sb);
	}
	memset(&sb, 0, sizeof(sb));
	ret = cfs_sb_pick(slots, slots + CFS_SB_BLOCK_BYTES, &sb, &slot, &why);
	if (ret >= 0) {
		struct cfs_sb one;
		const char *w = NULL;

		FUZZ_CHECK(slot == 0 || slot == 1);
		FUZZ_CHECK(cfs_sb_decode(slots + slot * CFS_SB_BLOCK_BYTES, &one, &w) >= 0);
		FUZZ_CHECK(cfs_sb_slot(sb.generation) == (unsigned)slot);
		ret = cfs_sb_check_mountable(&sb, &why);
		if (ret == 0 && !(sb.flags & CFS_SB_INPROGRESS)) {
			FILE *null = fopen("/dev/null", "w");

			if (null) {
				cfs_sb_print(null, &sb);
				fclose(null);
			}
			roundtrip(&sb);
		}
	}
	return 0;
}
