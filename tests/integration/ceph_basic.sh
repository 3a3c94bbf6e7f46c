#!/usr/bin/env bash
# ceph_basic.sh — a store on a Ceph RBD image (a throw-away cluster on this
# machine, tests/lib/ceph.sh): mkchunkfs rbd:POOL/IMAGE, mount, fio with
# crc32c verify on a chunk (4 jobs at queue depth 16, O_DIRECT) and in large
# blocks, the chunk's statistics (no errors), unmount, fsck.chunkfs clean,
# remount and verify again; reads are answered on librbd's completion thread
# (the exit line counts them), a read over written and unwritten sectors of
# one run among them; then kill -9 of the daemon after an fsync, and a
# remount on this host with no -o takeover: the dead daemon's lock is broken
# (its record names this host and a process that is gone) and the fsynced
# file is there; a store add (which would make the RBD store a pool's store
# 0) is refused; mkchunkfs -D and fsck read the store afterwards.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/ceph.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_ceph_require
cfs_require_cmd fio getfattr

cfs_tsan_watch # BUILD=tsan: reads answered on librbd's thread race nothing
cfs_ceph_cluster
cfs_rbd_image basic 1G
src=$CFS_RBD
mnt=$CFS_WORK/mnt

"$CFS_BIN/mkchunkfs" -q "$src" || cfs_fail "mkchunkfs $src"
"$CFS_BIN/mkchunkfs" -D "$src" >"$CFS_WORK/print" || cfs_fail "mkchunkfs -D $src"
grep -q "RBD image, 1073741824 bytes" "$CFS_WORK/print" || cfs_fail "mkchunkfs -D: $(cat "$CFS_WORK/print")"
cfs_mount "$src" "$mnt"
grep -q "^$src $mnt fuse.chunkfs " /proc/mounts || cfs_fail "$src is not the source in /proc/mounts"

cd "$CFS_WORK"
engine=io_uring
fio --enghelp=io_uring >/dev/null 2>&1 || engine=libaio
run_fio() {	# name extra-args...
	local name=$1
	shift
	cfs_log "fio $name"
	fio --name="$name" --directory="$mnt" --ioengine=$engine --rw=randwrite \
		--bs_unaligned=0 --group_reporting --verify=crc32c --verify_fatal=1 \
		--verify_state_save=0 --direct=1 --output="$CFS_WORK/fio-$name.out" "$@" ||
		{ cat "$CFS_WORK/fio-$name.out"; cfs_fail "fio $name failed"; }
	grep -E 'WRITE:|READ:' "$CFS_WORK/fio-$name.out" | sed 's/^/#   /'
}
small=(--filename=chunk --size=8M --offset_increment=8M --numjobs=4 --iodepth=16 --bsrange=4k-16k)
large=(--filename=large --size=32M --numjobs=1 --iodepth=8 --bsrange=256k-1m)
run_fio chunk "${small[@]}" --do_verify=1 --verify_backlog=64
run_fio large "${large[@]}" --do_verify=1

for f in chunk large; do
	[ "$(cfs_stat "$mnt/$f" writes)" -gt 0 ] || cfs_fail "$f: no writes counted"
	[ "$(cfs_stat "$mnt/$f" reads)" -gt 0 ] || cfs_fail "$f: no reads counted"
	for e in err_eio err_other err_enospc; do
		cfs_expect "$mnt/$f" $e 0
	done
done
cfs_log "chunk: $(cfs_stat "$mnt/chunk" writes) writes, $(cfs_stat "$mnt/chunk" reads) reads, read p99 $(cfs_stat "$mnt/chunk" read_lat_p99_us) us"

# One device read over written and never-written sectors of one allocated
# unit: the zero map applies on librbd's thread too.
fallocate -l 1M "$mnt/sparse" || cfs_fail "fallocate"
head -c 4096 /dev/urandom >"$CFS_WORK/block"
dd if="$CFS_WORK/block" of="$mnt/sparse" bs=4k seek=1 oflag=direct conv=notrunc status=none ||
	cfs_fail "write into the unit"
{ head -c 4096 /dev/zero; cat "$CFS_WORK/block"; head -c 8192 /dev/zero; } >"$CFS_WORK/sparse.want"
dd if="$mnt/sparse" of="$CFS_WORK/sparse.got" bs=16k count=1 iflag=direct status=none ||
	cfs_fail "read over written and unwritten sectors"
cmp "$CFS_WORK/sparse.want" "$CFS_WORK/sparse.got" ||
	cfs_fail "a read over written and unwritten sectors shows other bytes than the write and zeros"

cfs_umount "$mnt" || cfs_fail "unmount"
answered=$(sed -nE "s/.*reads answered on the store's completion thread: ([0-9]+).*/\1/p" \
	"$CFS_WORK/chunkfs-mnt.log" | tail -n 1)
cfs_log "reads answered on librbd's thread: ${answered:-none}"
[ "${answered:-0}" -gt 0 ] || { cfs_daemon_log "$mnt"; cfs_fail "no read was answered on librbd's completion thread"; }
"$CFS_BIN/fsck.chunkfs" "$src" >"$CFS_WORK/fsck.out" 2>&1 || { cat "$CFS_WORK/fsck.out"; cfs_fail "fsck after unmount"; }
cfs_log "$(tail -n 1 "$CFS_WORK/fsck.out")"

cfs_mount "$src" "$mnt"
run_fio chunk "${small[@]}" --verify_only=1
run_fio large "${large[@]}" --verify_only=1

# kill -9 after an fsync; remount here without -o takeover
head -c 3M /dev/urandom >"$CFS_WORK/fsynced"
dd if="$CFS_WORK/fsynced" of="$mnt/fsynced" bs=1M conv=fsync status=none || cfs_fail "write + fsync"
cfs_kill9 "$mnt"
start=$(date +%s%N)
cfs_mount "$src" "$mnt"
cfs_log "remounted after kill -9 in $((($(date +%s%N) - start) / 1000000)) ms"
grep -q "is gone: breaking its lock" "$CFS_WORK/chunkfs-mnt.log" ||
	{ cfs_daemon_log "$mnt"; cfs_fail "the remount did not say it broke the dead daemon's lock"; }
cmp "$CFS_WORK/fsynced" "$mnt/fsynced" || cfs_fail "the fsynced file differs after kill -9"
run_fio chunk "${small[@]}" --verify_only=1
# A single store on an RBD image cannot become a pool's store 0 online.
truncate -s 64M "$CFS_WORK/local.img"
cfs_expect_fail_with "a pool's first store (it holds the metadata) must be a local device" 1 \
	"$CFS_BIN/chunkfs" store add "$mnt" "$CFS_WORK/local.img"
cfs_umount "$mnt" || cfs_fail "unmount"
"$CFS_BIN/fsck.chunkfs" "$src" >"$CFS_WORK/fsck2.out" 2>&1 || { cat "$CFS_WORK/fsck2.out"; cfs_fail "fsck after the crash"; }
cfs_tsan_verdict
cfs_log "ok"
