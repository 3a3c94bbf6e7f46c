#!/usr/bin/env bash
# daemon_submit_batch.sh — how the event loops hand device I/O to the store
# (fs/fuse/data.c, ctx_continue): while the device is busy, the requests of one
# batch received from /dev/fuse (or from the rings) go to it in one submit (a
# virtio notify is a VM exit); while it is idle, each request at once (no
# latency added at queue depth 1). The daemon's exit line counts device
# requests and the submits that carried them. Content is checked on the way:
# fio --verify at QD32, then again after a remount.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd fio

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
log=$CFS_WORK/chunkfs-mnt.log
cfs_mkfs "$img" 256M

# reqs, subs: device requests and submits of the last daemon that ran on $mnt
counts() {
	local line
	line=$(grep "chunkfs: device:" "$log" | tail -n 1)
	[ -n "$line" ] || cfs_fail "no device line in $log: $(tail -n 5 "$log")"
	cfs_log "$line"
	reqs=$(sed -E 's/.*device: ([0-9]+) requests in .*/\1/' <<<"$line")
	subs=$(sed -E 's/.* in ([0-9]+) submits.*/\1/' <<<"$line")
}

run_fio() { # name fio-args...
	local name=$1
	shift
	fio --name="$name" --filename="$mnt/f" --size=32M --ioengine=io_uring --direct=1 --bs=4k \
		--randrepeat=0 --output="$CFS_WORK/fio-$name.out" "$@" ||
		{ cat "$CFS_WORK/fio-$name.out"; cfs_fail "fio $name failed"; }
}

cfs_log "QD32: random writes, then every block read back and verified"
cfs_mount "$img" "$mnt"
run_fio qd32 --rw=randwrite --iodepth=32 --verify=crc32c --verify_fatal=1 --do_verify=1 \
	--verify_state_save=0
cfs_umount "$mnt" || cfs_fail "unmount"
counts
[ "$reqs" -ge 16384 ] || cfs_fail "only $reqs device requests for 8192 writes and 8192 reads"
# One submit per request would be 1.00; batches of a few under load.
ratio=$(awk -v r="$reqs" -v s="$subs" 'BEGIN { printf "%.2f", r / s }')
cfs_log "QD32: $ratio requests per submit"
awk -v r="$ratio" 'BEGIN { exit !(r >= 1.5) }' ||
	cfs_fail "QD32: $ratio requests per submit: the device is told about each request alone"

cfs_log "QD1: each request reaches the device at once"
cfs_mount "$img" "$mnt"
run_fio qd1 --rw=randread --iodepth=1 --number_ios=2000 --norandommap
cfs_umount "$mnt" || cfs_fail "unmount"
counts
[ "$reqs" -ge 2000 ] || cfs_fail "only $reqs device requests for 2000 reads"
awk -v r="$reqs" -v s="$subs" 'BEGIN { exit !(r / s <= 1.1) }' ||
	cfs_fail "QD1: $reqs requests in $subs submits: requests held back while the device idled"

cfs_log "verify after remount"
cfs_mount "$img" "$mnt"
run_fio verify --rw=randwrite --iodepth=32 --verify=crc32c --verify_fatal=1 --verify_only=1 \
	--verify_state_save=0
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"
