#!/usr/bin/env bash
# mkchunkfs_loop.sh — real formats on loop block devices.
#
# Covers: a 512-byte-sector loop device formatted and decoded back, the
# data region discarded (the loop driver punches holes in its backing file,
# which shows as freed blocks) and kept with -K, -s below the device size,
# -s above it refused, and a 4096-byte-sector loop device whose geometry
# must reach the superblock.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_root
cfs_require_cmd losetup

mk=$CFS_BIN/mkchunkfs
[ -x "$mk" ] || cfs_fail "$mk is not built"
U=6a7b8c9d-0e1f-4a2b-9c3d-4e5f60718293

allocated_bytes() { echo $(($(stat -c '%b * %B' "$1"))); }

# A backing file full of non-zero data, so discard shows as freed blocks.
img=$CFS_WORK/loop.img
dd if=/dev/zero bs=1M count=128 status=none | tr '\0' '\252' >"$img"
cfs_loop_attach "$img"
dev=$CFS_LOOP_DEV
cfs_log "using $dev"

# --- 1. format, decode ---------------------------------------------------------
out=$("$mk" -U $U -L loopstore "$dev" 2>&1) || cfs_fail "format of $dev failed: $out"
grep -q "^target: *$dev (block device, 134217728 bytes)" <<<"$out" || cfs_fail "summary: $out"
printed=$("$mk" -D "$dev") || cfs_fail "-D refused the store on $dev: $printed"
grep -q "^uuid: *$U\$" <<<"$printed" || cfs_fail "-D uuid: $printed"
grep -q '^label: *"loopstore"$' <<<"$printed" || cfs_fail "-D label: $printed"
# The image behind the loop device holds the same store.
"$mk" -q -D "$img" || cfs_fail "the backing file does not decode as the same store"
if command -v blkid >/dev/null 2>&1 && blkid -p "$dev" >/dev/null 2>&1; then
	cfs_fail "blkid recognises something on $dev: $(blkid -p "$dev")"
fi
cfs_log "format and decode: ok"

# --- 2. discard vs -K -------------------------------------------------------------
dmax=$(cat "/sys/block/${dev#/dev/}/queue/discard_max_bytes" 2>/dev/null || echo 0)
if [ "$dmax" -gt 0 ]; then
	after=$(allocated_bytes "$img")
	[ "$after" -lt $((32 << 20)) ] ||
		cfs_fail "data region not discarded: $after bytes still allocated in the backing file"
	# Refill through the device (never detach: another test could take
	# the loop device in between).
	dd if=/dev/zero bs=1M count=128 status=none | tr '\0' '\252' |
		dd of="$dev" bs=1M iflag=fullblock oflag=direct status=none
	"$mk" -q -K -f "$dev" || cfs_fail "-K format failed"
	after=$(allocated_bytes "$img")
	[ "$after" -ge $((128 << 20)) ] || cfs_fail "-K still discarded: $after bytes allocated"
	cfs_log "discard and -K: ok"
else
	cfs_log "$dev does not support discard: skipped the discard check"
fi

# --- 3. -s within and beyond the device ----------------------------------------------
"$mk" -q -f -s 64M "$dev" || cfs_fail "-s 64M on a 128M device failed"
"$mk" -D "$dev" | grep -q '^store size: *67108864 bytes' || cfs_fail "-s 64M not honoured"
cfs_expect_fail_with "is larger than the device" 1 "$mk" -f -s 256M "$dev"
"$mk" -D "$dev" | grep -q '^store size: *67108864 bytes' || cfs_fail "refused -s changed the store"
cfs_log "-s: ok"

# --- 4. 4096-byte logical sectors ------------------------------------------------------
img4k=$CFS_WORK/loop4k.img
truncate -s 64M "$img4k"
dev4k=$(losetup -f --show --sector-size 4096 "$img4k" 2>/dev/null) || dev4k=
if [ -n "$dev4k" ]; then
	cfs_defer "losetup -d $dev4k"
	"$mk" -q "$dev4k" || cfs_fail "format of the 4K-sector $dev4k failed"
	printed=$("$mk" -D "$dev4k")
	grep -q '^sectors: *logical 4096 bytes' <<<"$printed" || cfs_fail "4K sector lost: $printed"
	cfs_expect_fail_with "block size is smaller than the logical sector size" 1 \
		"$mk" -f -b 512 "$dev4k"
	cfs_log "4096-byte sectors ($dev4k): ok"
else
	cfs_log "losetup --sector-size unsupported: skipped the 4K-sector case"
fi
exit 0
