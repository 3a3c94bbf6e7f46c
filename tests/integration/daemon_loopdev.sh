#!/usr/bin/env bash
# daemon_loopdev.sh — the same daemon on a block device (a loop device with
# direct I/O): mkchunkfs on the device, O_DIRECT at 512 B..16 KiB with content
# checks, fio --verify=crc32c with 4 jobs on one file, kill -9 during a
# write+fsync load, remount and check, O_EXCL (the device cannot be mounted
# twice, nor formatted while mounted).
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3 fio losetup

util="python3 $CFS_ROOT/tests/integration/daemon_util.py"
img=$(cfs_image 256M)
cfs_loop_attach "$img"
dev=$CFS_LOOP_DEV
mnt=$CFS_WORK/mnt
ack=$CFS_WORK/ack.log
cd "$CFS_WORK"
"$CFS_BIN/mkchunkfs" -q -f "$dev" >/dev/null || cfs_fail "mkchunkfs $dev"
cfs_mount "$dev" "$mnt"
grep -q "^$dev $mnt fuse.chunkfs" /proc/self/mounts || cfs_fail "/proc/mounts: $dev"

for bs in 512 2048 4096 16384; do
	$util direct "$mnt/direct$bs" $bs $((2 * 1048576 / bs)) $bs
done
fio --name=loop --directory="$mnt" --filename=shared --size=16M --offset_increment=16M \
	--numjobs=4 --ioengine=io_uring --iodepth=16 --direct=1 --rw=randwrite --bsrange=4k-16k \
	--verify=crc32c --verify_fatal=1 --do_verify=1 --verify_state_save=0 --group_reporting \
	--output="$CFS_WORK/fio.out" || { cat "$CFS_WORK/fio.out"; cfs_fail "fio on $dev"; }

# exclusive: a second daemon, and mkchunkfs, are refused while mounted
mkdir -p "$CFS_WORK/mnt2"
cfs_expect_fail_with "in use" 32 "$CFS_BIN/chunkfs" "$dev" "$CFS_WORK/mnt2" -o wait=0
"$CFS_BIN/mkchunkfs" -q -f "$dev" >/dev/null 2>&1 && cfs_fail "mkchunkfs formatted a mounted device"

# crash during a write+fsync load, three times
: >"$ack"
mkdir -p "$mnt/load"
for c in 1 2 3; do
	# crash once the load has acknowledged a record on this mount, keep the
	# dead mount until the load has ended (see daemon_crash.sh: a load that
	# outlives the mount would write under the mount point, on the host)
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
	cfs_clear_mount "$mnt"
	[ -z "$(ls -A "$mnt")" ] || cfs_fail "cycle $c: files under the mount point: $(ls -A "$mnt")"
	cfs_mount "$dev" "$mnt"
	$util verify "$mnt/load" "$ack" || cfs_fail "after kill -9 cycle $c"
done
for bs in 512 2048 4096 16384; do
	$util direct_check "$mnt/direct$bs" $bs $((2 * 1048576 / bs)) $bs
done
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_mount "$dev" "$mnt"
$util verify "$mnt/load" "$ack" || cfs_fail "after a clean remount"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"
