#!/usr/bin/env bash
# written_runs.sh — the written_runs feature: a new store has it (incompat
# 0x2) and its snapshot holds a run of written units in one record, so 1 GiB
# written whole and 2 GiB fallocated take a snapshot of a few hundred bytes
# (padded to 4 KiB) where one record per unit would take 72 KiB; a store made with
# --no-written-runs (what chunkfs before the feature made and mounts) keeps
# one record per unit, mounts, and both come back with their data and pass
# fsck after a clean unmount and after kill -9 of the daemon.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
[ -x "$CFS_BIN/fsck.chunkfs" ] || cfs_skip "needs $CFS_BIN/fsck.chunkfs"

fsck=$CFS_BIN/fsck.chunkfs
mnt=$CFS_WORK/mnt

snap_bytes() { # image
	"$CFS_BIN/mkchunkfs" -D "$1" | sed -n 's/^active half: .*snapshot \([0-9]*\) bytes.*/\1/p'
}

incompat() { # image
	"$CFS_BIN/mkchunkfs" -D "$1" | sed -n 's/^features: .*incompat \(0x[0-9a-f]*\).*/\1/p'
}

# fill IMAGE: a 1 GiB file written whole, a 2 GiB fallocated one with 8 MiB
# written at its start and one 4 KiB block in its middle (a partly written
# unit); prints the data's checksum.
fill() {
	cfs_mount "$1" "$mnt"
	dd if=/dev/urandom of="$mnt/whole" bs=1M count=1024 oflag=direct status=none
	fallocate -l 2G "$mnt/chunk"
	dd if=/dev/urandom of="$mnt/chunk" bs=1M count=8 oflag=direct conv=notrunc status=none
	dd if=/dev/urandom of="$mnt/chunk" bs=4k count=1 seek=100000 oflag=direct conv=notrunc \
		status=none
	sync -f "$mnt"
	cat "$mnt/whole" "$mnt/chunk" | md5sum
	cfs_umount "$mnt" || cfs_fail "unclean unmount of $1"
}

check() { # image sum what
	local out
	out=$("$fsck" -n "$1" 2>&1) || cfs_fail "fsck $3: $out"
	cfs_mount "$1" "$mnt"
	[ "$(cat "$mnt/whole" "$mnt/chunk" | md5sum)" = "$2" ] || cfs_fail "data differs: $3"
	# kill -9: the next mount replays the log over the mount's snapshot.
	dd if=/dev/urandom of="$mnt/whole" bs=1M count=2 seek=1030 oflag=direct status=none
	sync "$mnt/whole" # fsync: what kill -9 must keep (chunkfs has no syncfs)
	local sum2
	sum2=$(md5sum <"$mnt/whole")
	kill -9 "$CFS_MOUNT_PID"
	cfs_umount "$mnt" || true
	cfs_mount "$1" "$mnt"
	[ "$(md5sum <"$mnt/whole")" = "$sum2" ] || cfs_fail "data lost after kill -9: $3"
	cfs_umount "$mnt" || cfs_fail "unclean unmount: $3"
	out=$("$fsck" -n "$1" 2>&1) || cfs_fail "fsck after kill -9 $3: $out"
}

# ---- a new store: written runs --------------------------------------------------------
new=$CFS_WORK/new.img
cfs_mkfs "$new" 4G
[ "$(incompat "$new")" = 0x6 ] || cfs_fail "a new store lacks written_runs or pieces: $(incompat "$new")"
sum=$(fill "$new")
bytes=$(snap_bytes "$new")
cfs_log "snapshot with written runs: $bytes bytes"
[ "$bytes" -le 8192 ] || cfs_fail "snapshot of $bytes bytes: not one record per run"
check "$new" "$sum" "written runs"

# ---- an old-format store: one record per unit -----------------------------------------
old=$CFS_WORK/old.img
cfs_mkfs "$old" 4G --no-written-runs --no-pieces
[ "$(incompat "$old")" = 0x0 ] || cfs_fail "--no-written-runs set a feature: $(incompat "$old")"
sum=$(fill "$old")
bytes=$(snap_bytes "$old")
cfs_log "snapshot without written runs: $bytes bytes"
# 1032 wholly written units (1 GiB + 8 MiB) at 72 bytes each.
[ "$bytes" -gt $((1032 * 72)) ] || cfs_fail "snapshot of $bytes bytes without written runs"
check "$old" "$sum" "no written runs"
[ "$(incompat "$old")" = 0x0 ] || cfs_fail "mounting set a feature on an old store"
cfs_log "ok"
