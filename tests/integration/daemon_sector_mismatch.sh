#!/usr/bin/env bash
# daemon_sector_mismatch.sh — a store reached through a target whose logical
# sector differs from the one it was formatted for (fs/BAD-INPUT.md): the
# written-state is kept per store sector and read-modify-write works in
# device sectors, so the mount is refused with both sizes named (exit 32),
# nothing is written, and the store mounts again through a right target
# with everything in it. Both ways: a 512-byte store behind a 4096-byte
# loop device, and a store formatted on a 4096-byte loop device opened as
# the plain image file (512-byte direct I/O).
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd losetup md5sum

mnt=$CFS_WORK/mnt
mkdir -p "$mnt"

# loop4k FILE: attach FILE with 4096-byte logical sectors (detached at exit)
loop4k() {
	dev4k=$(losetup -f --show --sector-size 4096 "$1" 2>/dev/null) ||
		cfs_skip "losetup --sector-size 4096 unsupported"
	cfs_defer "losetup -d $dev4k"
}

refused() {	# SOURCE STORE_SECTOR TARGET_SECTOR
	cfs_expect_fail_with "the store was formatted for $2-byte sectors but the target has $3-byte logical sectors" \
		32 "$CFS_BIN/chunkfs" "$1" "$mnt" -o wait=10
	cfs_is_mounted "$mnt" && cfs_fail "$1 was mounted anyway"
	return 0
}

# ---- a 512-byte store behind a 4096-byte loop device ---------------------------------
img=$CFS_WORK/s512.img
cfs_mkfs "$img" 64M
"$CFS_BIN/mkchunkfs" -D "$img" | grep -q '^sectors: *logical 512 bytes' ||
	cfs_skip "this filesystem gives image files other than 512-byte direct I/O"
cfs_mount "$img" "$mnt"
head -c 3M /dev/urandom >"$mnt/a"
sum=$(md5sum <"$mnt/a")
cfs_umount "$mnt" || cfs_fail "unmount"
before=$(md5sum <"$img")
loop4k "$img"
refused "$dev4k" 512 4096
refused "$dev4k" 512 4096	# twice: the first refusal left nothing behind
# fsck cannot read 512-byte structures through 4096-byte sectors: exit 4.
cfs_expect_fail_with "the store's logical sector (512) is not a multiple of the target's (4096)" \
	4 "$CFS_BIN/fsck.chunkfs" -n "$dev4k"
# The refused daemon let go of the device before it exited: fsck right after
# it opens it (a ring's registered file used to keep the exclusive open
# alive for a moment after exit: "device is busy", every time, back to back).
for i in 1 2 3 4 5; do
	rc=0
	"$CFS_BIN/chunkfs" "$dev4k" "$mnt" -o wait=10 2>/dev/null || rc=$?
	[ "$rc" = 32 ] || cfs_fail "refused mount $i: exit $rc, expected 32"
	rc=0
	"$CFS_BIN/fsck.chunkfs" -n "$dev4k" >"$CFS_WORK/fsck-after.out" 2>&1 || rc=$?
	[ "$rc" = 4 ] || cfs_fail "fsck right after refused mount $i: exit $rc, expected 4: \
$(cat "$CFS_WORK/fsck-after.out")"
done
# (the loop device stays attached until exit: detaching it here could let a
# later cleanup detach another test's device of the same number)
[ "$(md5sum <"$img")" = "$before" ] || cfs_fail "a refused mount changed the store"
cfs_mount "$img" "$mnt" wait=10
[ "$(md5sum <"$mnt/a")" = "$sum" ] || cfs_fail "content changed"
cfs_umount "$mnt" || cfs_fail "unmount"
"$CFS_BIN/fsck.chunkfs" -n "$img" >/dev/null || cfs_fail "fsck after the refusal"

# ---- a 4096-byte store opened as its image file ------------------------------------------
img4=$CFS_WORK/s4k.img
truncate -s 64M "$img4"
loop4k "$img4"
"$CFS_BIN/mkchunkfs" -q "$dev4k" || cfs_fail "format of the 4K-sector $dev4k failed"
cfs_mount "$dev4k" "$mnt" wait=10
head -c 3M /dev/urandom >"$mnt/b"
sum=$(md5sum <"$mnt/b")
cfs_umount "$mnt" || cfs_fail "unmount"
before=$(md5sum <"$img4")
refused "$img4" 4096 512
# fsck can check it this way (whole 4096-byte reads), exit 0, but warns.
"$CFS_BIN/fsck.chunkfs" -n "$img4" >"$CFS_WORK/fsck.out" 2>&1 ||
	{ cat "$CFS_WORK/fsck.out"; cfs_fail "fsck of the 4K store through its image file"; }
grep -q "formatted for 4096-byte sectors, the target has 512: chunkfs will not mount it" \
	"$CFS_WORK/fsck.out" || { cat "$CFS_WORK/fsck.out"; cfs_fail "fsck did not warn of the mismatch"; }
[ "$(md5sum <"$img4")" = "$before" ] || cfs_fail "a refused mount changed the 4K store"
cfs_mount "$dev4k" "$mnt" wait=10
[ "$(md5sum <"$mnt/b")" = "$sum" ] || cfs_fail "content changed (4K store)"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"
