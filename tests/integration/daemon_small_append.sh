#!/usr/bin/env bash
# daemon_small_append.sh — small buffered writes absorbed in held blocks
# (fs/fuse/data.c, "held blocks"): many writers appending small records with
# fsync keep every record, in order, through a remount and a kill -9 (only
# fsynced ones are promised there), and the store sees a block write per
# filled block, not a write (and a read) per record:
#   1. 4 writers x 3000 records of 40-299 bytes into their own file and one
#      shared file (O_APPEND), fsync every 50, each reading its file back
#      through O_DIRECT every 97 records; at the same time 3 random loads
#      (small and straddling writes at any offset, truncates, punched holes,
#      zeroed ranges, O_TRUNC, closes, fsyncs, buffered and O_DIRECT reads,
#      checked against a copy in memory). After unmount and mount: every record and byte.
#   2. the device requests of 4 writers x 3000 records with one fsync at
#      the end: fewer than one per 4 records (was at least one per record);
#   2b. appends each read back at once through O_DIRECT: the READs are
#      answered from the held copies, fewer than one device request per 4
#      records (each READ used to wait for a flush and read the store);
#   3. the writers again, kill -9 of the daemon under them: after a mount,
#      every fsynced record is there, whole and in order;
#   4. 1 and the random loads on a RAM mount.
# uring_daemon_small_append.sh runs it on FUSE over io_uring.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3

util="python3 $CFS_ROOT/tests/integration/small_append.py"
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
ack=$CFS_WORK/ack
log=$CFS_WORK/chunkfs-mnt.log
writers=4
records=3000
cfs_mkfs "$img" 256M

# umount_ok: unmount, and the daemon exited cleanly (else its log, and fail)
umount_ok() {
	cfs_umount "$mnt" || { tail -n 40 "$log" >&2; cfs_fail "unclean unmount"; }
}

# load DIR: the writers and the random loads at once; fails the test if any
# of them found a wrong byte.
load() {
	local d=$1 pids=() i rc=0
	rm -rf "$ack" && mkdir -p "$ack" "$d"
	$util append "$d" "$ack" $writers $records 50 & pids+=($!)
	for i in 1 2 3; do
		$util mixed "$d/mixed$i" "$ack/mixed$i" "$i" 6000 & pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	[ $rc -eq 0 ] || cfs_fail "a load found wrong bytes (above)"
}

check_all() { # DIR: everything the load wrote, as it wrote it
	local d=$1 i
	$util verify "$d" "$ack" $writers $records || cfs_fail "records lost or wrong in $d"
	for i in 1 2 3; do
		$util compare "$d/mixed$i" "$ack/mixed$i" || cfs_fail "mixed$i differs"
	done
}

# ---- 1. store mount: the loads, then a remount ---------------------------------------
cfs_mount "$img" "$mnt"
load "$mnt/one"
check_all "$mnt/one"
umount_ok
cfs_mount "$img" "$mnt"
check_all "$mnt/one"
cfs_log "1: all records and bytes after a remount"

# ---- 2. what the store saw: a write per block, not per record -------------------------
rm -rf "$ack" && mkdir -p "$ack" "$mnt/two"
umount_ok
cfs_mount "$img" "$mnt"
$util append "$mnt/two" "$ack" $writers $records $records || cfs_fail "append load"
umount_ok
line=$(grep "chunkfs: device:" "$log" | tail -n 1)
[ -n "$line" ] || cfs_fail "no device line in $log"
reqs=$(sed -E 's/.*device: ([0-9]+) requests in .*/\1/' <<<"$line")
total=$((2 * writers * records)) # each record goes to two files
cfs_log "2: $total small writes, $reqs device requests"
[ $((reqs * 4)) -lt $total ] || cfs_fail "$reqs device requests for $total small writes"
cfs_mount "$img" "$mnt"
$util verify "$mnt/two" "$ack" $writers $records || cfs_fail "records lost in 2"

# ---- 2b. READs of held blocks come from the copies -------------------------------------------
umount_ok
cfs_mount "$img" "$mnt"
$util readback "$mnt/readback" 2000 || cfs_fail "a record was not read back"
umount_ok
line=$(grep "chunkfs: device:" "$log" | tail -n 1)
reqs=$(sed -E 's/.*device: ([0-9]+) requests in .*/\1/' <<<"$line")
cfs_log "2b: 2000 appends each read back through O_DIRECT, $reqs device requests"
[ $((reqs * 4)) -lt 2000 ] || cfs_fail "$reqs device requests for 2000 appends read back"
cfs_mount "$img" "$mnt"

# ---- 3. kill -9 under the writers ----------------------------------------------------------
rm -rf "$ack" && mkdir -p "$ack" "$mnt/three"
export CRASH_FLAG="$CFS_WORK/crash-flag" # made just before the kill
$util append "$mnt/three" "$ack" $writers 100000 50 crash 2>"$CFS_WORK/crash.err" &
loadpid=$!
for ((i = 0; i < 300; i++)); do # until every writer has fsynced something
	n=$(ls "$ack" | wc -l)
	[ "$n" -lt $writers ] || break
	sleep 0.1
done
sleep 1
touch "$CRASH_FLAG"
cfs_crash "$mnt"
wait $loadpid || { cat "$CFS_WORK/crash.err" >&2; cfs_fail "the writers failed before the kill"; }
cfs_clear_mount "$mnt"
cfs_mount "$img" "$mnt"
$util verify "$mnt/three" "$ack" $writers || cfs_fail "fsynced records lost in the crash"
cfs_log "3: every fsynced record after kill -9"
umount_ok

# ---- 4. RAM mount ---------------------------------------------------------------------------
cfs_mount ram "$mnt" "ram,size=256M"
load "$mnt/four"
check_all "$mnt/four"
umount_ok
cfs_log "ok"
