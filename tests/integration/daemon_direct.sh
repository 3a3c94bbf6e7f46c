#!/usr/bin/env bash
# daemon_direct.sh — O_DIRECT at 512 B, 2 KiB, 4 KiB and 16 KiB with content
# checks (O_DIRECT and buffered read-back, again after a remount); unaligned
# O_DIRECT and buffered writes against a model (read-modify-write, coherence
# of the two kinds of open); the alignment policy: a store mount accepts
# misaligned O_DIRECT, a RAM mount refuses it with EINVAL (dio_align).
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3

util="python3 $CFS_ROOT/tests/integration/daemon_util.py"
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
cfs_mkfs "$img" 256M
cfs_mount "$img" "$mnt"

for bs in 512 2048 4096 16384; do
	cfs_log "O_DIRECT $bs"
	$util direct "$mnt/direct$bs" $bs $((3 * 1048576 / bs)) $bs
done
# the same block sizes with dd (oflag=direct), read back with iflag=direct
for bs in 512 2k 4k 16k; do
	dd if=/dev/urandom of="$CFS_WORK/dd$bs" bs=$bs count=97 status=none
	dd if="$CFS_WORK/dd$bs" of="$mnt/dd$bs" bs=$bs oflag=direct status=none ||
		cfs_fail "dd oflag=direct bs=$bs"
	dd if="$mnt/dd$bs" of="$CFS_WORK/back$bs" bs=$bs iflag=direct status=none
	cmp "$CFS_WORK/dd$bs" "$CFS_WORK/back$bs" || cfs_fail "dd bs=$bs read back differs"
done

cfs_log "unaligned O_DIRECT and buffered writes against a model"
$util unaligned "$mnt/unaligned" 3000000 1
cfs_log "4 writers interleaving 700-byte records in shared sectors"
$util interleave "$mnt/interleave" 4 1500 700
# a store mount accepts misaligned O_DIRECT (read-modify-write)
$util misaligned "$mnt/mis" 4096 ok

cfs_umount "$mnt" || cfs_fail "unmount"
cfs_mount "$img" "$mnt"
for bs in 512 2048 4096 16384; do
	$util direct_check "$mnt/direct$bs" $bs $((3 * 1048576 / bs)) $bs
done
for bs in 512 2k 4k 16k; do
	cmp "$CFS_WORK/dd$bs" "$mnt/dd$bs" || cfs_fail "dd bs=$bs differs after remount"
done
cmp "$CFS_WORK/mnt/unaligned" "$CFS_WORK/mnt/unaligned.model" ||
	cfs_fail "unaligned file differs from its model after remount"
cfs_umount "$mnt" || cfs_fail "unmount"

# ---- the RAM mount: alignment enforced ---------------------------------------
ram=$CFS_WORK/ram
cfs_mount none "$ram" ram,size=64M
grep -q "^none $ram fuse.chunkfs" /proc/self/mounts || cfs_fail "RAM mount not in /proc/mounts"
for bs in 512 2048 4096 16384; do
	$util direct "$ram/direct$bs" $bs $((1048576 / bs)) $((bs + 1))
done
$util misaligned "$ram/mis" 512 EINVAL
cfs_umount "$ram" || cfs_fail "unmount ram"

cfs_mount none "$ram" ram,size=64M,dio_align=4096
$util direct "$ram/direct4k" 4096 64 5
$util misaligned "$ram/mis" 4096 EINVAL
# buffered I/O has no alignment rules
printf 'abc' | dd of="$ram/buffered" bs=1 seek=7 status=none
[ "$(od -An -c -j7 "$ram/buffered" | tr -d ' ')" = abc ] || cfs_fail "buffered unaligned on RAM"
cfs_umount "$ram" || cfs_fail "unmount ram"
cfs_log "ok"
