#!/usr/bin/env bash
# fsck_basic.sh — fsck.chunkfs on whole stores: a clean store exits 0 (-n
# and -y), a mounted store is refused (8), usage errors exit 16, something
# that is not a store 8, a truncated store 4, a flipped byte in either
# superblock copy is found (4 with -n, nothing written) and repaired with
# -y (1, then clean), a corrupt snapshot is an error left (4, also with -y).
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3
[ -x "$CFS_BIN/fsck.chunkfs" ] || cfs_skip "needs $CFS_BIN/fsck.chunkfs"

fsck=$CFS_BIN/fsck.chunkfs
util="python3 $CFS_ROOT/tests/integration/fsck_util.py"
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt

cfs_mkfs "$img" 64M
cfs_expect_exit 0 "$fsck" "$img"		# never mounted: no root yet, still clean
cfs_mount "$img" "$mnt"
mkdir "$mnt/d"
head -c 3M /dev/urandom >"$mnt/d/a"
head -c 100k /dev/urandom >"$mnt/b"
ln "$mnt/b" "$mnt/d/b2"
ln -s d/a "$mnt/sym"
sum=$(cat "$mnt/d/a" "$mnt/b" | md5sum)

# ---- in use --------------------------------------------------------------------------
cfs_expect_fail_with "store in use" 8 "$fsck" -n "$img"
cfs_umount "$mnt" || cfs_fail "unclean unmount"

# ---- clean, usage ---------------------------------------------------------------------
cfs_expect_exit 0 "$fsck" -n "$img"
grep -q "clean, 5 inodes (2 files, 2 directories)" <<<"$out" || cfs_fail "summary: $out"
cfs_expect_exit 0 "$fsck" -y "$img"
cfs_expect_exit 16 "$fsck" -n -y "$img"
cfs_expect_exit 16 "$fsck"
cfs_expect_exit 16 "$fsck" -Z "$img"
cfs_expect_exit 8 "$fsck" "$CFS_WORK/missing.img"
zero=$(cfs_image 32M zero.img)
cfs_expect_fail_with "not a chunkfs store" 8 "$fsck" "$zero"

# ---- truncated store ------------------------------------------------------------------
cp --sparse=always "$img" "$CFS_WORK/short.img"
truncate -s 40M "$CFS_WORK/short.img"
cfs_expect_fail_with "truncated" 4 "$fsck" -n "$CFS_WORK/short.img"

# ---- one superblock copy bad, each slot in turn ---------------------------------------
for slot in 0 1; do
	$util sbflip "$img" $slot
	before=$(md5sum <"$img")
	cfs_expect_exit 4 "$fsck" -n "$img"
	grep -q "superblock slot $slot" <<<"$out" || cfs_fail "slot $slot not named: $out"
	[ "$(md5sum <"$img")" = "$before" ] || cfs_fail "fsck -n wrote to the store"
	cfs_expect_exit 1 "$fsck" -y "$img"
	grep -q "fixed: superblock slot $slot rewritten" <<<"$out" || cfs_fail "no fix: $out"
	cfs_expect_exit 0 "$fsck" -n "$img"
done
cfs_mount "$img" "$mnt"
[ "$(cat "$mnt/d/a" "$mnt/b" | md5sum)" = "$sum" ] || cfs_fail "data changed by the repair"
cfs_umount "$mnt" || cfs_fail "unclean unmount"

# ---- corrupt snapshot: detected, left (the mount refuses it too) ----------------------
cp --sparse=always "$img" "$CFS_WORK/snap.img"
$util snapflip "$CFS_WORK/snap.img"
cfs_expect_fail_with "snapshot of metadata half" 4 "$fsck" -n "$CFS_WORK/snap.img"
cfs_expect_fail_with "snapshot of metadata half" 4 "$fsck" -y "$CFS_WORK/snap.img"
cfs_log "ok"
