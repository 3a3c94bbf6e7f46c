#!/usr/bin/env bash
# fault_removed.sh — the image file of a mounted store is removed: the
# daemon holds it open, so the mount goes on working (writes, fsync, reads)
# and unmounts cleanly; the data goes with the last reference, as with any
# unlinked file. A new image at the same path is a different store: a mount
# of the copy taken before the removal still sees only what was in it.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
cfs_mkfs "$img" 64M
cfs_mount "$img" "$mnt"
echo one >"$mnt/a"
sync "$mnt/a"
cp --sparse=always "$img" "$CFS_WORK/copy.img"
rm "$img"
echo two >"$mnt/b"
sync "$mnt/b" || cfs_fail "fsync after the image was removed"
[ "$(cat "$mnt/a" "$mnt/b")" = "$(printf 'one\ntwo')" ] || cfs_fail "content"
cfs_umount "$mnt" || cfs_fail "unclean unmount of a removed store"
cfs_expect_fail_with "No such file" nonzero "$CFS_BIN/chunkfs" -f "$img" "$mnt"
cfs_mount "$CFS_WORK/copy.img" "$mnt"
[ "$(cat "$mnt/a")" = one ] || cfs_fail "the copy lost a"
cfs_umount "$mnt" || cfs_fail "unclean unmount"
cfs_log "ok"
