#!/usr/bin/env bash
# daemon_blkdev.sh — -o blkdev: a store on a block device (a loop device with
# direct I/O) mounted as fuseblk. /proc/mounts says fuseblk.chunkfs with the
# device as source; every file's st_dev is the device (what InnoDB needs to
# find its physical block size and write its redo log with O_DIRECT);
# O_DIRECT at 512 B..16 KiB with content checks; the device is held
# exclusively (a second daemon, mkchunkfs, mkfs.ext4 and an O_EXCL open are
# refused while mounted); chunkfs stat finds the mount; umount waits for the
# daemon's answer and the daemon exits; kill -9 during a write+fsync load,
# the dead mount cleared, remount and check; and what blkdev refuses, with
# the reason: an image file, a pool, fsname=, a RAM mount, a device in use.
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_require_cmd python3 losetup mkfs.ext4

util="python3 $CFS_ROOT/tests/integration/daemon_util.py"
img=$(cfs_image 256M)
cfs_loop_attach "$img"
dev=$CFS_LOOP_DEV
mnt=$CFS_WORK/mnt
ack=$CFS_WORK/ack.log
cd "$CFS_WORK"
"$CFS_BIN/mkchunkfs" -q -f "$dev" >/dev/null || cfs_fail "mkchunkfs $dev"

# ---- what blkdev refuses (before anything is mounted) ------------------------
mkdir -p "$CFS_WORK/mnt2"
# (if a refused mount mounted after all, it goes before the loop device)
cfs_defer "umount '$CFS_WORK/mnt2' 2>/dev/null"
cfs_expect_fail_with "is not a block device" nonzero "$CFS_BIN/chunkfs" "$img" "$CFS_WORK/mnt2" -o blkdev
cfs_expect_fail_with "fsname= cannot be used with blkdev" nonzero \
	"$CFS_BIN/chunkfs" "$dev" "$CFS_WORK/mnt2" -o blkdev,fsname=db
cfs_expect_fail_with "blkdev is for a store on a block device" nonzero \
	"$CFS_BIN/chunkfs" ram "$CFS_WORK/mnt2" -o ram,size=64M,blkdev
"$CFS_BIN/mkchunkfs" -q -s 256M --sparse "$CFS_WORK/p0.img" >/dev/null || cfs_fail "mkchunkfs p0"
cfs_expect_fail_with "a pool cannot be mounted as one block device" nonzero \
	"$CFS_BIN/chunkfs" "$dev,$CFS_WORK/p0.img" "$CFS_WORK/mnt2" -o blkdev
# a device another program holds exclusively: refused, nothing written
python3 -c "import os, time; os.open('$dev', os.O_RDONLY | os.O_EXCL); open('$CFS_WORK/held', 'w'); time.sleep(60)" &
holder=$!
cfs_defer "kill $holder 2>/dev/null"
for _ in $(seq 300); do [ -e "$CFS_WORK/held" ] && break; sleep 0.1; done
[ -e "$CFS_WORK/held" ] || cfs_fail "the O_EXCL holder did not start"
cfs_expect_fail_with "device is busy" nonzero "$CFS_BIN/chunkfs" "$dev" "$CFS_WORK/mnt2" -o blkdev,wait=0
kill $holder
wait $holder 2>/dev/null || true
cfs_is_mounted "$CFS_WORK/mnt2" && cfs_fail "a refused blkdev mount is mounted"

# ---- the mount -----------------------------------------------------------------------
cfs_mount "$dev" "$mnt" blkdev
grep -q "^$dev $mnt fuseblk.chunkfs " /proc/self/mounts ||
	cfs_fail "/proc/mounts: $(grep " $mnt " /proc/self/mounts)"
want=$(stat -L -c '%Hr:%Lr' "$dev")
echo data >"$mnt/f"
for p in "$mnt" "$mnt/f"; do
	[ "$(stat -c '%Hd:%Ld' "$p")" = "$want" ] || cfs_fail "st_dev of $p is $(stat -c '%Hd:%Ld' "$p"), not $dev ($want)"
done
[ -e "/sys/dev/block/$want/queue/physical_block_size" ] || cfs_fail "no physical_block_size in sysfs for $want"
"$CFS_BIN/chunkfs" stat "$mnt/f" >"$CFS_WORK/stat.out" 2>&1 || { cat "$CFS_WORK/stat.out"; cfs_fail "chunkfs stat on a fuseblk mount"; }
stats_all "$CFS_WORK/stat-all.out" "$mnt/f"
for bs in 512 2048 4096 16384; do
	$util direct "$mnt/direct$bs" $bs $((2 * 1048576 / bs)) $bs
done

# exclusive while mounted: the kernel holds the device for the mount
cfs_expect_fail_with "in use" 32 "$CFS_BIN/chunkfs" "$dev" "$CFS_WORK/mnt2" -o wait=0
"$CFS_BIN/mkchunkfs" -q -f "$dev" >/dev/null 2>&1 && cfs_fail "mkchunkfs formatted a mounted device"
mkfs.ext4 -q -F "$dev" >/dev/null 2>&1 && cfs_fail "mkfs.ext4 formatted a mounted device"
python3 -c "import os; os.open('$dev', os.O_RDONLY | os.O_EXCL)" 2>/dev/null &&
	cfs_fail "an O_EXCL open of the mounted device succeeded"

# umount: the kernel waits for the daemon's answer to DESTROY; the daemon exits
pid=$CFS_MOUNT_PID
umount "$mnt" || cfs_fail "umount of the fuseblk mount"
timeout 30 tail --pid="$pid" -f /dev/null || cfs_fail "the daemon did not exit after umount"
cfs_mount "$dev" "$mnt" blkdev
[ "$(cat "$mnt/f")" = data ] || cfs_fail "content after a remount"

# ---- crash during a write+fsync load, twice --------------------------------------------
: >"$ack"
mkdir -p "$mnt/load"
for c in 1 2; do
	n0=$(wc -l <"$ack")
	$util load "$mnt/load" "$ack" 8 60 2>/dev/null &
	load=$!
	for _ in $(seq 300); do
		[ "$(wc -l <"$ack")" -gt "$n0" ] && break
		sleep 0.1
	done
	[ "$(wc -l <"$ack")" -gt "$n0" ] || cfs_fail "cycle $c: the load acknowledged nothing in 30 s"
	sleep 1
	cfs_crash "$mnt"
	wait $load 2>/dev/null || true
	# the dead mount still holds the device: cleared first, then it mounts
	cfs_clear_mount "$mnt"
	[ -z "$(ls -A "$mnt")" ] || cfs_fail "cycle $c: files under the mount point: $(ls -A "$mnt")"
	cfs_mount "$dev" "$mnt" blkdev
	$util verify "$mnt/load" "$ack" || cfs_fail "after kill -9 cycle $c"
done
for bs in 512 2048 4096 16384; do
	$util direct_check "$mnt/direct$bs" $bs $((2 * 1048576 / bs)) $bs
done
cfs_umount "$mnt" || cfs_fail "unmount"
"$CFS_BIN/fsck.chunkfs" -n "$dev" >"$CFS_WORK/fsck.out" 2>&1 ||
	{ cat "$CFS_WORK/fsck.out" >&2; cfs_fail "fsck.chunkfs after the runs"; }
cfs_log "ok"
