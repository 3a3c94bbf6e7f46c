#!/usr/bin/env bash
# uring_transport.sh — FUSE over io_uring (-o transport=uring):
# refused with a clear error while the kernel has it disabled; with it
# enabled, the rings really carry the requests (the daemon's exit line counts
# requests over io_uring and reads of /dev/fuse); content checks; unmount with
# I/O just done and SIGTERM never hang; kill -9 leaves a dead mount that
# cfs_umount clears. (uring_daemon_direct.sh, uring_daemon_fio.sh and
# uring_ram_fio.sh run the content-checking loads again on the rings.)
# Sets /sys/module/fuse/parameters/enable_uring for the test and restores it.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd fio
cfs_uring_switch
param=$CFS_URING_PARAM

# The exit line of a daemon that ran on the rings: N requests over io_uring,
# M reads of /dev/fuse (INIT, FORGET, INTERRUPT only).
check_counts() {
	local log=$1 min_ring=$2 line ring dev
	line=$(grep "transport io_uring:" "$log" | tail -n 1)
	[ -n "$line" ] || cfs_fail "no io_uring transport line in $log: $(tail -n 5 "$log")"
	ring=$(sed -E 's/.* ([0-9]+) requests over io_uring.*/\1/' <<<"$line")
	dev=$(sed -E 's/.*, ([0-9]+) reads of .*/\1/' <<<"$line")
	cfs_log "$line"
	[ "$ring" -ge "$min_ring" ] || cfs_fail "only $ring requests over io_uring (want >= $min_ring)"
	# Forgets and the INIT only: a tiny fraction of the requests.
	[ "$dev" -le $((ring / 20 + 20)) ] ||
		cfs_fail "$dev reads of /dev/fuse against $ring ring requests: rings not in use?"
}

ram=$CFS_WORK/ram
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt

cfs_log "disabled in the kernel: transport=uring refused, auto falls back"
echo N >$param
mkdir -p "$ram"
cfs_expect_fail_with "enable_uring is N" 32 "$CFS_BIN/chunkfs" -o ram,size=64M,uring none "$ram"
cfs_mount none "$ram" ram,size=64M,transport=auto
echo data >"$ram/f"
[ "$(cat "$ram/f")" = data ] || cfs_fail "auto on a disabled kernel: bad read back"
cfs_umount "$ram" || cfs_fail "unmount (auto, disabled)"
if grep -q "transport io_uring" "$CFS_WORK/chunkfs-ram.log"; then
	cfs_fail "auto used the rings while enable_uring was N"
fi
cfs_expect_fail_with "must be dev, uring or auto" 1 "$CFS_BIN/chunkfs" -o ram,size=64M,transport=x \
	none "$ram"

echo Y >$param
cfs_log "RAM mount on the rings: content, counts"
cfs_mount none "$ram" ram,size=256M,transport=uring
dd if=/dev/urandom of="$CFS_WORK/src" bs=1M count=16 status=none
cp "$CFS_WORK/src" "$ram/a"
dd if="$CFS_WORK/src" of="$ram/b" bs=4k oflag=direct status=none
cmp "$CFS_WORK/src" "$ram/a" || cfs_fail "buffered copy differs"
dd if="$ram/b" of="$CFS_WORK/back" bs=64k iflag=direct status=none
cmp "$CFS_WORK/src" "$CFS_WORK/back" || cfs_fail "O_DIRECT copy differs"
mkdir "$ram/d"
for i in $(seq 1 200); do echo $i >"$ram/d/f$i"; done
[ "$(ls "$ram/d" | wc -l)" -eq 200 ] || cfs_fail "readdir after 200 creates"
rm -r "$ram/d"
fio --name=r --filename="$ram/c" --size=32M --rw=randrw --bs=4k --direct=1 \
	--ioengine=io_uring --iodepth=32 --verify=crc32c --do_verify=1 >"$CFS_WORK/fio.out" 2>&1 ||
	cfs_fail "fio verify on the rings: $(tail -n 20 "$CFS_WORK/fio.out")"
sync
cfs_umount "$ram" || cfs_fail "unmount right after I/O hung or failed"
check_counts "$CFS_WORK/chunkfs-ram.log" 8000

cfs_log "store mount on the rings: fsync (answered by the committer thread), remount"
cfs_mkfs "$img" 256M
cfs_mount "$img" "$mnt" uring
dd if="$CFS_WORK/src" of="$mnt/s" bs=1M oflag=direct conv=fsync status=none ||
	cfs_fail "dd with fsync"
python3 -c "import os,sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)
for i in range(50):
    os.pwrite(fd, b'x' * 4096, i * 4096)
    os.fsync(fd)
os.close(fd)" "$mnt/fs" || cfs_fail "fsync loop"
cfs_umount "$mnt" || cfs_fail "unmount store"
check_counts "$CFS_WORK/chunkfs-mnt.log" 100
cfs_mount "$img" "$mnt" uring
cmp "$CFS_WORK/src" "$mnt/s" || cfs_fail "differs after remount"

# CPUs in a list like "0-2,5" (/proc/PID/task/TID/status, Cpus_allowed_list).
expand_cpus() {
	local part out=
	for part in ${1//,/ }; do
		if [[ $part == *-* ]]; then
			out+=" $(seq -s ' ' "${part%-*}" "${part#*-}")"
		else
			out+=" $part"
		fi
	done
	echo "$out"
}

# check_ring_loops PID LOOPS: the daemon's ring loops run on the CPUs of the
# queues they own (queue = CPU; loop i owns the queues q with q mod LOOPS =
# i), so exactly min(LOOPS, CPUs) threads are pinned when LOOPS > 1, each
# to its own CPUs, none when one loop owns every queue; and each loop's ring
# payloads (entries x (1 MiB + 4 KiB)) are advised for huge pages.
check_ring_loops() {
	local pid=$1 loops=$2 all t list cpu pinned=0 seen="" want regions
	all=$(awk '/^Cpus_allowed_list/ {print $2}' "/proc/$pid/status")
	for t in /proc/"$pid"/task/*; do
		list=$(awk '/^Cpus_allowed_list/ {print $2}' "$t/status")
		[ "$list" = "$all" ] && continue
		pinned=$((pinned + 1))
		want=
		for cpu in $(expand_cpus "$list"); do
			[ -z "$want" ] && want=$((cpu % loops))
			[ $((cpu % loops)) -eq "$want" ] ||
				cfs_fail "thread $(basename "$t") on CPUs $list: queues of two loops"
			[[ " $seen " == *" $cpu "* ]] && cfs_fail "CPU $cpu given to two loops"
			seen+=" $cpu"
		done
	done
	want=$(nproc)
	[ "$loops" -lt "$want" ] && want=$loops
	[ "$loops" -eq 1 ] && want=0
	[ "$pinned" -eq "$want" ] ||
		cfs_fail "$pinned threads pinned with $loops loops on $(nproc) CPUs (want $want)"
	# The payload regions (64 entries x (1 MiB + 4 KiB) per queue, a queue
	# per possible CPU) advised for huge pages: adjacent regions may merge
	# into one mapping, so count kB. The loops' 32 MiB arenas are advised
	# too, and alone stay below this.
	[ -e /sys/kernel/mm/transparent_hugepage/enabled ] || return 0
	want=$(($(sed -E 's/.*[-,]//' /sys/devices/system/cpu/possible) + 1))
	want=$((want * 64 * 1028))
	regions=$(awk '/^[0-9a-f]+-[0-9a-f]+ / {size = 0} /^Size:/ {size = $2}
		/^VmFlags:.* hg/ {kb += size} END {print kb + 0}' "/proc/$pid/smaps")
	[ "$regions" -ge "$want" ] ||
		cfs_fail "$regions kB advised for huge pages (ring payloads alone: $want kB)"
}

if [ "$(nproc)" -ge 2 ]; then
	cfs_umount "$mnt" || cfs_fail "unmount after the remount check"
	for loops in 2 1; do
		cfs_log "threads=$loops: ring loops on their queues' CPUs, payloads in huge pages"
		cfs_mount "$img" "$mnt" uring,threads=$loops
		dd if="$mnt/s" of=/dev/null bs=1M iflag=direct status=none || cfs_fail "read on the rings"
		check_ring_loops "${_cfs_mount_pid[$(cd "$mnt" && pwd)]}" $loops
		cmp "$CFS_WORK/src" "$mnt/s" || cfs_fail "differs (threads=$loops)"
		cfs_umount "$mnt" || cfs_fail "unmount (threads=$loops)"
	done
	cfs_mount "$img" "$mnt" uring
fi

cfs_log "SIGTERM: the daemon unmounts and exits"
kill -TERM "${_cfs_mount_pid[$(cd "$mnt" && pwd)]}"
for ((i = 0; i < 100; i++)); do
	cfs_is_mounted "$mnt" || break
	sleep 0.1
done
cfs_is_mounted "$mnt" && cfs_fail "still mounted 10 s after SIGTERM"
cfs_umount "$mnt" || cfs_fail "daemon did not exit after SIGTERM"

cfs_log "kill -9 with I/O running: a dead mount, cleared by cfs_umount"
cfs_mount none "$ram" ram,size=256M,transport=uring
fio --name=k --filename="$ram/k" --size=64M --rw=randwrite --bs=4k --direct=1 \
	--ioengine=io_uring --iodepth=32 --time_based --runtime=30 >/dev/null 2>&1 &
fio_pid=$!
sleep 2
pid=${_cfs_mount_pid[$(cd "$ram" && pwd)]}
kill -9 "$pid"
# fio must see errors and end, not hang on requests the dead daemon held.
for ((i = 0; i < 100; i++)); do
	kill -0 $fio_pid 2>/dev/null || break
	sleep 0.1
done
kill -0 $fio_pid 2>/dev/null && {
	kill -9 $fio_pid
	cfs_fail "fio still running 10 s after the daemon was killed"
}
wait $fio_pid 2>/dev/null || true
timeout 10 stat "$ram" >/dev/null 2>&1 && cfs_fail "the dead mount still answers"
cfs_umount "$ram" || true # the daemon was killed: its exit status is not ours
cfs_is_mounted "$ram" && cfs_fail "dead mount left after cfs_umount"

exit 0
