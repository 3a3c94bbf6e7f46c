#!/usr/bin/env bash
# daemon_fio.sh — fio --verify=crc32c with 4 concurrent jobs: on one file
# (each job its own region, all at queue depth 16 through io_uring with
# O_DIRECT), on four files, in 256 KiB-1 MiB blocks at queue depth 8,
# buffered, and on a RAM mount; then the verify passes again after a remount.
. "$(dirname "$0")/../lib/common.sh"
# (uring_daemon_fio.sh runs it again with transport=uring: cfs_mount adds
# CFS_EXTRA_MOUNT_OPTS to every mount.)
cfs_require_fuse
cfs_require_cmd fio

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
cfs_mkfs "$img" 512M
cfs_mount "$img" "$mnt"

cd "$CFS_WORK"	# fio leaves files in the current directory
engine=io_uring
fio --enghelp=io_uring >/dev/null 2>&1 || engine=libaio

run_fio() {	# name dir extra-args...
	local name=$1 dir=$2
	shift 2
	cfs_log "fio $name"
	fio --name="$name" --directory="$dir" --ioengine=$engine --iodepth=16 \
		--rw=randwrite --bsrange=4k-16k --bs_unaligned=0 --numjobs=4 --group_reporting \
		--verify=crc32c --verify_fatal=1 --do_verify=1 --verify_backlog=64 --verify_state_save=0 \
		--output="$CFS_WORK/fio-$name.out" "$@" ||
		{ cat "$CFS_WORK/fio-$name.out"; cfs_fail "fio $name failed"; }
	grep -E 'WRITE:|READ:' "$CFS_WORK/fio-$name.out" | sed 's/^/#   /'
}

# one file, 4 jobs, each on its own 24 MiB region of it
run_fio onefile "$mnt" --filename=shared --size=24M --offset_increment=24M --direct=1
# four files
run_fio fourfiles "$mnt" --size=24M --direct=1
# large blocks at queue depth 8, 2 jobs: several large READ replies wait at
# once, and the loop receives new requests between them (data.c, YIELD_...)
run_fio large "$mnt" --filename=large --size=32M --offset_increment=32M --direct=1 \
	--bsrange=256k-1m --numjobs=2 --iodepth=8
# buffered, 4 jobs on their own files, 2 KiB blocks (unaligned to the page)
run_fio buffered "$mnt" --size=8M --direct=0 --bsrange=2k-2k --iodepth=1 --ioengine=psync

# verify only, after a remount: the data is on the store
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_mount "$img" "$mnt"
cfs_log "fio verify after remount"
fio --name=onefile --directory="$mnt" --ioengine=$engine --iodepth=16 --rw=randwrite \
	--bsrange=4k-16k --numjobs=4 --filename=shared --size=24M --offset_increment=24M \
	--direct=1 --verify=crc32c --verify_fatal=1 --verify_only=1 --verify_state_save=0 \
	--output="$CFS_WORK/fio-verify.out" ||
	{ cat "$CFS_WORK/fio-verify.out"; cfs_fail "verify after remount failed"; }
fio --name=large --directory="$mnt" --ioengine=$engine --iodepth=8 --rw=randwrite \
	--bsrange=256k-1m --bs_unaligned=0 --numjobs=2 --filename=large --size=32M \
	--offset_increment=32M --direct=1 --verify=crc32c --verify_fatal=1 --verify_only=1 \
	--verify_state_save=0 --output="$CFS_WORK/fio-verify-large.out" ||
	{ cat "$CFS_WORK/fio-verify-large.out"; cfs_fail "large-block verify after remount failed"; }
cfs_umount "$mnt" || cfs_fail "unmount"

ram=$CFS_WORK/ram
cfs_mount none "$ram" ram,size=256M
run_fio ram "$ram" --filename=shared --size=16M --offset_increment=16M --direct=1
cfs_umount "$ram" || cfs_fail "unmount ram"
cfs_log "ok"
