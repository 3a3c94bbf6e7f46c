/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * test_signature.c — the probe copy of a target blkid cannot open
 * (fs/meta/signature.h): which ranges are copied for small and large
 * targets, the copy holding them and zeros between, a failed read reported
 * with no descriptor left open, and a chunkfs superblock in the copy found
 * as a signature. What blkid itself finds on real images is tested by the
 * integration tests (mkchunkfs over ext4, chunkfs store add, ceph_store_add).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "fs/meta/signature.h"

#define MIB (1ull << 20)

Test(signature, ranges_of_a_large_target)
{
	uint64_t r[2][2];

	cfs_signature_probe_ranges(256 * MIB, r);
	cr_assert_eq(r[0][0], 0);
	cr_assert_eq(r[0][1], CFS_SIGNATURE_PROBE_BYTES);
	cr_assert_eq(r[1][0], 256 * MIB - CFS_SIGNATURE_PROBE_BYTES);
	cr_assert_eq(r[1][1], CFS_SIGNATURE_PROBE_BYTES);
}

Test(signature, ranges_never_overlap_on_a_small_target)
{
	uint64_t r[2][2];

	cfs_signature_probe_ranges(MIB + 4096, r);
	cr_assert_eq(r[0][1], MIB);
	cr_assert_eq(r[1][0], MIB);
	cr_assert_eq(r[1][1], 4096);
	cfs_signature_probe_ranges(64 * 1024, r);
	cr_assert_eq(r[0][1], 64 * 1024);
	cr_assert_eq(r[1][1], 0);
	cfs_signature_probe_ranges(0, r);
	cr_assert_eq(r[0][1], 0);
	cr_assert_eq(r[1][1], 0);
}

/* A target whose every byte says where it is: (offset / 512) & 0xff, never
 * 0 in the first byte of a sector past the first. */
struct fake_target {
	uint64_t size;
	unsigned reads;
	int fail_at; /* this read fails with -EIO; -1: none */
};

static int fake_read(void *arg, void *buf, uint64_t length, uint64_t offset)
{
	struct fake_target *t = arg;

	cr_assert_leq(offset + length, t->size, "read past the end");
	cr_assert_eq((uintptr_t)buf % 4096, 0, "buffer not aligned");
	if ((int)t->reads++ == t->fail_at)
		return -EIO;
	for (uint64_t i = 0; i < length; i += 512)
		memset((uint8_t *)buf + i, (int)(((offset + i) / 512) & 0xff) | 1, 512);
	return (int)length;
}

static uint8_t byte_at(int fd, uint64_t offset)
{
	uint8_t b = 0xee;

	cr_assert_eq(pread(fd, &b, 1, (off_t)offset), 1);
	return b;
}

Test(signature, copy_holds_both_ends_and_zeros_between)
{
	struct fake_target t = {64 * MIB, 0, -1};
	char err[128] = "";
	int fd = -1;

	cr_assert_eq(cfs_signature_probe_copy(t.size, fake_read, &t, &fd, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_geq(fd, 0);
	cr_assert_eq(t.reads, 2);
	cr_assert_eq(lseek(fd, 0, SEEK_END), (off_t)t.size);
	cr_assert_eq(byte_at(fd, 0), 1);
	cr_assert_eq(byte_at(fd, 3 * 512 + 7), 3);
	cr_assert_eq(byte_at(fd, MIB - 1), (((MIB - 1) / 512) & 0xff) | 1);
	cr_assert_eq(byte_at(fd, MIB), 0, "the middle is not copied");
	cr_assert_eq(byte_at(fd, 32 * MIB), 0);
	cr_assert_eq(byte_at(fd, t.size - 1), (((t.size - 1) / 512) & 0xff) | 1);
	cr_assert_eq(byte_at(fd, t.size - MIB), (((t.size - MIB) / 512) & 0xff) | 1);
	close(fd);
}

Test(signature, failed_read_reported_and_nothing_left_open)
{
	struct fake_target t = {8 * MIB, 0, 1};
	char err[128] = "";
	int fd = 12345, before = dup(0), after;

	close(before);
	cr_assert_eq(cfs_signature_probe_copy(t.size, fake_read, &t, &fd, err, sizeof(err)), -EIO);
	cr_assert_eq(fd, -1);
	cr_assert(strstr(err, "cannot read it"), "err: %s", err);
	after = dup(0);
	cr_assert_eq(after, before, "a descriptor was left open");
	close(after);
}

Test(signature, chunkfs_superblock_in_the_copy_is_found)
{
	struct fake_target t = {4 * MIB, 0, -1};
	uint8_t slots[2 * CFS_SB_BLOCK_BYTES];
	struct cfs_signatures found;
	struct cfs_sb sb;
	const char *why = NULL;
	char err[256] = "";
	int fd;

	cr_assert_eq(cfs_signature_probe_copy(t.size, fake_read, &t, &fd, err, sizeof(err)), 0);
	cfs_sb_init_defaults(&sb);
	cr_assert_eq(cfs_sb_layout(&sb, 1ull << 30, 0, 0, 0, &why), 0, "%s", why);
	sb.generation = 1;
	memset(slots, 0, sizeof(slots));
	cfs_sb_encode(&sb, slots);
	cr_assert_eq(pwrite(fd, slots, sizeof(slots), 0), (ssize_t)sizeof(slots));
	cr_assert_eq(cfs_signatures_find(fd, slots, &found, err, sizeof(err)), 0, "%s", err);
	cr_assert_geq(found.count, 1, "nothing found");
	cr_assert(strstr(found.what, "chunkfs"), "found: %s", found.what);
	close(fd);
}
