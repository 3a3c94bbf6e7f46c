#!/usr/bin/env bash
# ceph_osd_kill.sh — the cluster's faults are not the store's: kill -9 of one
# of the three OSDs (pool size 3, min_size 2) in the middle of an fio run
# with crc32c verify on a chunk of an RBD store. fio sees no error and no bad
# block, only a stall (its largest completion latency is logged), the
# chunk's statistics count no error, and after the OSD is back (and the
# cluster recovers) every block verifies again after a remount.
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/ceph.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_ceph_require
cfs_require_cmd fio getfattr

cfs_ceph_cluster
cfs_rbd_image osdkill 1G
src=$CFS_RBD
mnt=$CFS_WORK/mnt
"$CFS_BIN/mkchunkfs" -q "$src" || cfs_fail "mkchunkfs $src"
cfs_mount "$src" "$mnt"

cd "$CFS_WORK"
engine=io_uring
fio --enghelp=io_uring >/dev/null 2>&1 || engine=libaio
job=(--name=osdkill --directory="$mnt" --filename=chunk --ioengine=$engine --rw=randwrite
	--bsrange=4k-64k --bs_unaligned=0 --size=48M --iodepth=16 --direct=1 --verify=crc32c
	--verify_fatal=1 --verify_state_save=0)
victim=1
fio "${job[@]}" --do_verify=1 --verify_backlog=32 --time_based --runtime=12 \
	--output="$CFS_WORK/fio.out" &
fio_pid=$!
# whatever happens: the shared cluster needs it back
cfs_defer "ceph_osd_running $victim || ceph_osd_start $victim"
sleep 3
kill -0 $fio_pid 2>/dev/null || { cat "$CFS_WORK/fio.out"; cfs_fail "fio ended before the OSD was killed"; }
ceph_osd_kill $victim || cfs_fail "kill -9 of osd.$victim"
cfs_log "osd.$victim killed -9 while fio runs"
wait $fio_pid || { cat "$CFS_WORK/fio.out"; cfs_fail "fio failed while an OSD was down"; }
grep -qiE 'verify.*(fail|bad)|bad magic|crc32c.*wanted' "$CFS_WORK/fio.out" && cfs_fail "fio found bad blocks"
grep -E 'WRITE:|READ:' "$CFS_WORK/fio.out" | sed 's/^/#   /'
cfs_log "fio's slowest completions (the stall): $(grep -oE '^ *(read|write):|clat \((usec|msec)\): min=[^,]+, max=[^,]+' "$CFS_WORK/fio.out" | sed 's/clat //; s/min=[^,]*, //' | tr -s ' \n' ' ')"
for e in err_eio err_other err_enospc; do
	cfs_expect "$mnt/chunk" $e 0
done

ceph_osd_start $victim || cfs_fail "osd.$victim did not restart"
ceph_pool_wait "$CFS_RBD_POOL" 120 || cfs_fail "the pool did not come back after osd.$victim restarted"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_mount "$src" "$mnt"
fio "${job[@]}" --verify_only=1 --output="$CFS_WORK/fio-verify.out" ||
	{ cat "$CFS_WORK/fio-verify.out"; cfs_fail "verify after the OSD came back"; }
cfs_umount "$mnt" || cfs_fail "unmount"
"$CFS_BIN/fsck.chunkfs" "$src" >"$CFS_WORK/fsck.out" 2>&1 || { cat "$CFS_WORK/fsck.out"; cfs_fail "fsck"; }
cfs_log "ok"
