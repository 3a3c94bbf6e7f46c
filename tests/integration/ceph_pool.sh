#!/usr/bin/env bash
# ceph_pool.sh — a pool of a local store (store 0, the metadata) and an RBD
# image: mkchunkfs --join makes the image a data store of the local one's
# pool, fsck.chunkfs checks both, chunkfs mounts LOCAL,rbd:... (and the
# other order). Directories placed on each store (user.chunkfs.store) get
# their files there: fio with crc32c verify on a chunk in each, the data
# found on the store it was placed on (the stores' used units, the RBD
# image's content), the member image locked while mounted (fsck and a mount
# of it alone refused, naming this daemon), unmount, fsck clean, remount in
# the other order and verify again, kill -9 after an fsync and a remount
# with the fsynced file on the RBD store; a pool whose first store is the
# RBD image refused, nothing written.
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/ceph.sh"
cfs_require_fuse
cfs_ceph_require
cfs_require_cmd fio getfattr setfattr

cfs_ceph_cluster
cfs_rbd_image member 256M
rbd=$CFS_RBD
s0=$CFS_WORK/ssd0.img
mnt=$CFS_WORK/mnt
mk=$CFS_BIN/mkchunkfs
fsck=$CFS_BIN/fsck.chunkfs

cfs_mkfs "$s0" 256M -L ssd0
"$mk" -q -L ceph0 --join "$s0" "$rbd" || cfs_fail "mkchunkfs --join $s0 $rbd"
"$mk" -D "$s0" | grep -q '^store 1 .*"ceph0"' || cfs_fail "store 0's table lacks ceph0: $("$mk" -D "$s0")"
"$mk" -D "$rbd" | grep -q "store 1 (data only)" || cfs_fail "mkchunkfs -D $rbd: $("$mk" -D "$rbd")"
"$fsck" "$s0,$rbd" >"$CFS_WORK/fsck0.out" 2>&1 || { cat "$CFS_WORK/fsck0.out"; cfs_fail "fsck of the new pool"; }

cfs_mount "$s0,$rbd" "$mnt"
pool_pid=$CFS_MOUNT_PID
getfattr --only-values -n user.chunkfs.stores "$mnt" >"$CFS_WORK/stores" || cfs_fail "user.chunkfs.stores"
grep -q "^ceph0 index=1 state=active .*source=$rbd\$" "$CFS_WORK/stores" ||
	cfs_fail "the mount does not list the RBD store: $(cat "$CFS_WORK/stores")"
mkdir "$mnt/local" "$mnt/ceph"
setfattr -n user.chunkfs.store -v ssd0 "$mnt/local" || cfs_fail "place local on ssd0"
setfattr -n user.chunkfs.store -v ceph0 "$mnt/ceph" || cfs_fail "place ceph on ceph0"

engine=io_uring
fio --enghelp=io_uring >/dev/null 2>&1 || engine=libaio
run_fio() { # dir extra-args...
	local dir=$1
	shift
	fio --name="$(basename "$dir")" --directory="$dir" --filename=chunk --ioengine=$engine \
		--rw=randwrite --bsrange=4k-64k --bs_unaligned=0 --size=24M --iodepth=16 --direct=1 \
		--verify=crc32c --verify_fatal=1 --verify_state_save=0 \
		--output="$CFS_WORK/fio-$(basename "$dir").out" "$@" ||
		{ cat "$CFS_WORK/fio-$(basename "$dir").out"; cfs_fail "fio in $dir"; }
}
rbd_before=$(cfs_rbd_sum "$rbd")
for d in local ceph; do
	cfs_log "fio with verify in $d/"
	run_fio "$mnt/$d" --do_verify=1
done
[ "$(getfattr --only-values -n user.chunkfs.store "$mnt/local/chunk")" = ssd0 ] || cfs_fail "local/chunk is not on ssd0"
[ "$(getfattr --only-values -n user.chunkfs.store "$mnt/ceph/chunk")" = ceph0 ] || cfs_fail "ceph/chunk is not on ceph0"
getfattr --only-values -n user.chunkfs.stores "$mnt" >"$CFS_WORK/stores"
used() { sed -n "s/^$1 .* used=\([0-9]*\) .*/\1/p" "$CFS_WORK/stores"; }
[ "$(used ceph0)" -ge $((24 << 20)) ] || cfs_fail "ceph0 holds less than the chunk: $(cat "$CFS_WORK/stores")"
[ "$(used ssd0)" -ge $((24 << 20)) ] || cfs_fail "ssd0 holds less than the chunk: $(cat "$CFS_WORK/stores")"
cfs_log "stores: $(tr '\n' ';' <"$CFS_WORK/stores")"
[ "$(cfs_rbd_sum "$rbd")" != "$rbd_before" ] || cfs_fail "nothing reached the RBD image"

cfs_log "the member image is locked by the pool's daemon"
cfs_expect_fail_with "in use by chunkfs on host $(hostname) (pid $pool_pid" 8 "$fsck" "$rbd"
mkdir -p "$CFS_WORK/alone"
cfs_expect_fail_with "in use by chunkfs on host $(hostname) (pid $pool_pid" 32 \
	"$CFS_BIN/chunkfs" -f "$rbd" "$CFS_WORK/alone" -o wait=0

cfs_umount "$mnt" || cfs_fail "unmount"
"$fsck" "$s0,$rbd" >"$CFS_WORK/fsck1.out" 2>&1 || { cat "$CFS_WORK/fsck1.out"; cfs_fail "fsck after unmount"; }
cfs_log "$(tail -n 1 "$CFS_WORK/fsck1.out")"

cfs_log "remount in the other order, verify"
cfs_mount "$rbd,$s0" "$mnt"
for d in local ceph; do
	run_fio "$mnt/$d" --verify_only=1
done
echo "placed" >"$mnt/ceph/new" && sync "$mnt/ceph/new"
[ "$(getfattr --only-values -n user.chunkfs.store "$mnt/ceph/new")" = ceph0 ] ||
	cfs_fail "a new file in ceph/ is not on ceph0 after the remount"

cfs_log "kill -9 after an fsync, remount"
head -c 3M /dev/urandom >"$CFS_WORK/fsynced"
dd if="$CFS_WORK/fsynced" of="$mnt/ceph/fsynced" bs=1M oflag=direct conv=fsync status=none ||
	cfs_fail "write + fsync on the RBD store"
cfs_kill9 "$mnt"
cfs_mount "$s0,$rbd" "$mnt"
grep -q "is gone: breaking its lock" "$CFS_WORK/chunkfs-mnt.log" ||
	{ cfs_daemon_log "$mnt"; cfs_fail "the remount did not break the dead daemon's lock on $rbd"; }
cmp "$CFS_WORK/fsynced" "$mnt/ceph/fsynced" || cfs_fail "the fsynced file differs after kill -9"
[ "$(getfattr --only-values -n user.chunkfs.store "$mnt/ceph/fsynced")" = ceph0 ] || cfs_fail "fsynced is not on ceph0"
run_fio "$mnt/ceph" --verify_only=1
cfs_umount "$mnt" || cfs_fail "unmount"
"$fsck" "$s0,$rbd" >"$CFS_WORK/fsck2.out" 2>&1 || { cat "$CFS_WORK/fsck2.out"; cfs_fail "fsck after the crash"; }

cfs_log "an RBD image as a pool's first store: refused, nothing written"
cfs_rbd_image first 64M
"$mk" -q "$CFS_RBD" || cfs_fail "mkchunkfs $CFS_RBD"
first_sum=$(cfs_rbd_sum "$CFS_RBD")
cfs_expect_fail_with "must be a local device or image file" 1 \
	"$mk" -q -s 32M --sparse --join "$CFS_RBD" "$CFS_WORK/x.img"
[ ! -e "$CFS_WORK/x.img" ] || cfs_fail "the refused join created its image"
[ "$(cfs_rbd_sum "$CFS_RBD")" = "$first_sum" ] || cfs_fail "the refused join changed $CFS_RBD"
cfs_log "ok"
