#!/usr/bin/env bash
# daemon_discard.sh — freed units are discarded after their commit, never
# before and never once they belong to another file (fs/DAEMON.md "Busy
# units"): on an image-file store a discard is a hole punch, so the image's
# allocated bytes show it.
#   1. a deleted file's units come back to the host (the image shrinks)
#      within seconds, and at unmount at the latest;
#   2. on a full store, a file written into the units another file just
#      freed (the only free ones) keeps its bytes while those units' discards
#      are worked through, after a remount too, and fsck is clean;
#   3. -o nodiscard: a deleted file's units are free again but the image
#      keeps its blocks, after the unmount too; a RAM mount refuses it.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3 fallocate

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
MiB=1048576
cfs_mkfs "$img" 256M
cfs_mount "$img" "$mnt"
allocated() { echo $(($(stat -c '%b' "$img") * 512)); }

# ---- 1. a deleted file's space goes back to the host -----------------------------------
base=$(allocated)
dd if=/dev/urandom of="$mnt/big" bs=1M count=128 oflag=direct status=none
sync "$mnt/big"
full=$(allocated)
[ $((full - base)) -ge $((120 * MiB)) ] || cfs_fail "128 MiB written, image grew by $((full - base))"
rm "$mnt/big"
sync "$mnt" # a commit: the free is durable, the units released and queued
for ((i = 0; i < 100; i++)); do
	[ $((full - $(allocated))) -ge $((120 * MiB)) ] && break
	sleep 0.1
done
now=$(allocated)
[ $((full - now)) -ge $((120 * MiB)) ] ||
	cfs_fail "10 s after rm and sync the image still holds $(((now - base) / MiB)) MiB more than before"
cfs_log "image: $((base / MiB)) MiB, $((full / MiB)) MiB with the file, $((now / MiB)) MiB after rm"

# ---- 2. units freed and taken again at once keep their new bytes ------------------------
# Fill the store, then free 64 MiB: those units are the only free ones, so
# the next file gets exactly them while their discards are still queued.
dd if=/dev/urandom of="$mnt/old" bs=1M count=64 oflag=direct status=none
avail=$(($(stat -f -c '%a*%S' "$mnt")))
fallocate -l "$avail" "$mnt/filler" || cfs_fail "fallocate of the free space"
[ "$(($(stat -f -c '%a*%S' "$mnt")))" -lt "$MiB" ] || cfs_fail "store not full after the filler"
head -c $((64 * MiB)) /dev/urandom >"$CFS_WORK/new.ref"
for round in 1 2 3; do
	rm "$mnt/old"
	# Written at once: its first write finds only busy units, forces the
	# commit that releases them and takes them while their discards are
	# worked through (ENOSPC here would mean the units being discarded were
	# refused instead of waited for).
	dd if="$CFS_WORK/new.ref" of="$mnt/new" bs=1M oflag=direct conv=fsync status=none ||
		cfs_fail "round $round: write into the units just freed"
	sleep 1 # every queued discard has had its pass
	cmp "$CFS_WORK/new.ref" "$mnt/new" || cfs_fail "round $round: the new file lost bytes to a discard"
	mv "$mnt/new" "$mnt/old"
done
cfs_umount "$mnt" || cfs_fail "unmount"
"$CFS_BIN/fsck.chunkfs" -n "$img" >"$CFS_WORK/fsck.out" 2>&1 || {
	cat "$CFS_WORK/fsck.out" >&2
	cfs_fail "fsck after the reuse rounds"
}
cfs_mount "$img" "$mnt"
cmp "$CFS_WORK/new.ref" "$mnt/old" || cfs_fail "after the remount the file differs"
cfs_log "three rounds of free-and-reuse on a full store: bytes intact, fsck clean"

# ---- 3. -o nodiscard: the image keeps its blocks ------------------------------------------
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_mount "$img" "$mnt" nodiscard
rm "$mnt/old" "$mnt/filler"
sync "$mnt"
dd if=/dev/urandom of="$mnt/big" bs=1M count=64 oflag=direct status=none
sync "$mnt/big"
full=$(allocated)
rm "$mnt/big"
sync "$mnt"
sleep 2
cfs_umount "$mnt" || cfs_fail "unmount"
now=$(allocated)
[ "$now" -ge "$full" ] ||
	cfs_fail "with nodiscard the image went from $((full / MiB)) to $((now / MiB)) MiB after rm and unmount"
cfs_mount "$img" "$mnt" nodiscard
free=$(($(stat -f -c '%a*%S' "$mnt")))
[ "$free" -ge $((200 * MiB)) ] || cfs_fail "with nodiscard the freed units are not free: $free bytes"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "nodiscard: $((full / MiB)) MiB allocated before rm, $((now / MiB)) MiB after rm and unmount; the units free"
cfs_expect_fail_with "nodiscard is for store mounts" 1 \
	"$CFS_BIN/chunkfs" -o ram,size=64M,nodiscard ramdisk "$mnt"
