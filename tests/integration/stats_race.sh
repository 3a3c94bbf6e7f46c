#!/usr/bin/env bash
# stats_race.sh — xattr reads racing with I/O: fio runs 4 KiB O_DIRECT random
# reads and writes at QD16 on a chunk while two readers probe and read its
# statistics and the root's (size probe then a read of exactly that size:
# never ERANGE, never a torn or backward value, percentiles in order, no call
# slower than 1 s) and a third runs getfattr -d and chunkfs stat in a loop.
# fio must finish on time, and afterwards the chunk's counts equal fio's own
# exactly: readers neither lose nor add requests.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_require_cmd python3 getfattr setfattr fio

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
secs=${CFS_RACE_SECONDS:-8}
cfs_mkfs "$img" 256M
cfs_mount "$img" "$mnt"
dd if=/dev/urandom of="$mnt/c" bs=1M count=64 oflag=direct status=none
ln -s "$mnt/c" "$CFS_WORK/link"
cfs_reset "$mnt/c"
cfs_reset "$mnt"

fio --name=race --filename="$CFS_WORK/link" --rw=randrw --bs=4k --iodepth=16 \
	--ioengine=io_uring --direct=1 --size=64M --norandommap --randrepeat=0 --time_based \
	--runtime="$secs" --output-format=json --output="$CFS_WORK/fio.json" &
fio_pid=$!
cfs_defer "kill $fio_pid"
stats_util race "$CFS_WORK/link" "$mnt" "$secs" >"$CFS_WORK/r1.out" 2>&1 &
r1=$!
stats_util race "$mnt/c" "$mnt" "$secs" >"$CFS_WORK/r2.out" 2>&1 &
r2=$!
(
	end=$((SECONDS + secs))
	n=0
	while [ $SECONDS -lt $end ]; do
		getfattr -d "$CFS_WORK/link" >/dev/null 2>&1 || { echo "getfattr -d failed"; exit 1; }
		"$CFS_BIN/chunkfs" stat "$CFS_WORK/link" >/dev/null || { echo "chunkfs stat failed"; exit 1; }
		n=$((n + 1))
	done
	echo "loops=$n"
) >"$CFS_WORK/r3.out" 2>&1 &
r3=$!

start=$SECONDS
rc=0
wait $r1 || rc=1
wait $r2 || rc=1
wait $r3 || rc=1
cat "$CFS_WORK"/r[123].out
[ $rc -eq 0 ] || cfs_fail "a reader failed"
wait $fio_pid || cfs_fail "fio failed"
[ $((SECONDS - start)) -le $((secs + 30)) ] || cfs_fail "fio took $((SECONDS - start)) s for $secs s"

read -r fio_reads fio_writes iops < <(python3 - "$CFS_WORK/fio.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
print(j["read"]["total_ios"], j["write"]["total_ios"], int(j["read"]["iops"] + j["write"]["iops"]))
EOF
)
cfs_log "fio: $fio_reads reads, $fio_writes writes ($iops IOPS) while the readers ran"
[ "$fio_reads" -gt 100 ] || cfs_fail "fio did too little: $fio_reads reads"
cfs_expect "$mnt/c" reads "$fio_reads"
cfs_expect "$mnt/c" writes "$fio_writes"
cfs_expect "$mnt/c" read_bytes $((fio_reads * 4096))
cfs_expect "$mnt/c" write_bytes $((fio_writes * 4096))
cfs_expect "$mnt/c" read_lat_count "$fio_reads"
cfs_expect "$mnt/c" inflight 0
cfs_expect "$mnt/c" errors 0
cfs_expect "$mnt" reads "$fio_reads"
cfs_expect "$mnt" writes "$fio_writes"
cfs_expect "$mnt" inflight 0
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"
