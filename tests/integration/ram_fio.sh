#!/usr/bin/env bash
# ram_fio.sh — concurrent fio with --verify=crc32c on the RAM temp mount
# 4 jobs through io_uring with O_DIRECT at queue depth 16, on one
# shared file (each job its own region) and on four files, with block sizes
# from 512 B to 64 KiB (dio_align=512) and from 4 KiB (dio_align=4096);
# buffered 2 KiB writers; and a verify-only pass over the shared file after
# the other jobs rewrote their own files around it.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd fio

ram=$CFS_WORK/ram
cd "$CFS_WORK" # fio leaves files in the current directory
engine=io_uring
fio --enghelp=io_uring >/dev/null 2>&1 || engine=libaio

run_fio() { # name extra-args...
	local name=$1
	shift
	cfs_log "fio $name"
	fio --name="$name" --directory="$ram" --ioengine=$engine --iodepth=16 --numjobs=4 \
		--group_reporting --verify=crc32c --verify_fatal=1 --do_verify=1 \
		--verify_backlog=64 --verify_state_save=0 --output="$CFS_WORK/fio-$name.out" "$@" ||
		{ cat "$CFS_WORK/fio-$name.out"; cfs_fail "fio $name failed"; }
	grep -E 'WRITE:|READ:' "$CFS_WORK/fio-$name.out" | sed 's/^/#   /'
}

cfs_mount none "$ram" ram,size=512M
run_fio shared --rw=randwrite --bsrange=512-64k --blockalign=512 --direct=1 \
	--filename=shared --size=32M --offset_increment=32M
run_fio files --rw=randrw --bsrange=512-64k --blockalign=512 --direct=1 --size=32M
run_fio buffered --rw=randwrite --bs=2k --direct=0 --iodepth=1 --ioengine=psync --size=8M
cfs_log "verify-only pass over the shared file"
fio --name=shared --directory="$ram" --ioengine=$engine --iodepth=16 --numjobs=4 \
	--rw=randwrite --bsrange=512-64k --blockalign=512 --direct=1 --filename=shared \
	--size=32M --offset_increment=32M --verify=crc32c --verify_fatal=1 --verify_only=1 \
	--verify_state_save=0 --output="$CFS_WORK/fio-verify.out" ||
	{ cat "$CFS_WORK/fio-verify.out"; cfs_fail "verify-only pass failed"; }
cfs_umount "$ram" || cfs_fail "unmount"

cfs_mount none "$ram" ram,size=256M,dio_align=4096
run_fio align4k --rw=randwrite --bsrange=4k-64k --blockalign=4k --direct=1 \
	--filename=shared --size=32M --offset_increment=32M
cfs_umount "$ram" || cfs_fail "unmount"
cfs_log "ok"
