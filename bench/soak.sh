#!/usr/bin/env bash
# bench/soak.sh — crash and power-loss soak of a chunkfs store.
#
# usage: bench/soak.sh [-c CYCLES] [-t SECONDS] [-w WRITERS] [-s SIZE] [-p PERCENT]
#   -c CYCLES   cycles to run (default 50)
#   -t SECONDS  start no new cycle after this many seconds (default: no limit)
#   -w WRITERS  writer processes of the load (default 4)
#   -s SIZE     store size (default 256M; 64 KiB allocation units)
#   -p PERCENT  share of cycles that end in a power loss instead of kill -9
#               (default 50)
#
# One cycle: mount; run bench/soak_load.py (writers creating files with
# O_DIRECT or buffered writes, some fallocated first, fsync, rename into
# place, directory fsync, renames, unlinks; each durable step acknowledged
# in a log outside the store); 0.3-2 s after its first acknowledgement
# either kill -9 the daemon or pull the plug (-o fault=volatile=1,torn=0|1
# and SIGUSR1: writes no flush covered are dropped, or torn at sector
# granularity); the load ends on the dead mount's errors before that mount
# is cleared, and nothing may have been written under the mount point;
# then fsck.chunkfs -n must find no error, and a fresh mount must show every
# acknowledged file with its exact content and no byte any file was never
# given. (Clearing the dead mount while the load still ran, or crashing
# before a slow-starting load had begun, let the load write to the host
# directory under the mount point: acknowledged there, hidden by the next
# mount — tests/integration/daemon_crash.sh has the story.)
#
# Stops at the first failure, keeping the store image and the logs under
# /var/tmp/chunkfs-soak-failure.*; prints "soak: N cycles run, N survived"
# and exits 0 only if every cycle survived. BUILD selects build/$BUILD.
. "$(dirname "$0")/../tests/lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3
[ -x "$CFS_BIN/fsck.chunkfs" ] || cfs_skip "needs $CFS_BIN/fsck.chunkfs"

cycles=50 budget=0 writers=4 size=256M power=50
while getopts "c:t:w:s:p:" o; do
	case $o in
	c) cycles=$OPTARG ;;
	t) budget=$OPTARG ;;
	w) writers=$OPTARG ;;
	s) size=$OPTARG ;;
	p) power=$OPTARG ;;
	*) sed -n '3,9p' "$0" >&2; exit 2 ;;
	esac
done

load="python3 $CFS_ROOT/bench/soak_load.py"
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
ack=$CFS_WORK/ack.log
cfs_mkfs "$img" "$size" -a 64K
: >"$ack"
run=0 survived=0 kills=0 powers=0 start=$SECONDS

report() {
	cfs_log "soak: $run cycles run, $survived survived ($kills kill -9, $powers power losses)," \
		"$(grep -c ' C ' "$ack") files acknowledged, $((SECONDS - start)) s"
}

failed() {	# keep what is needed to look into it
	local keep
	keep=$(mktemp -d /var/tmp/chunkfs-soak-failure.XXXXXX)
	cp --sparse=always "$img" "$CFS_WORK/crashed.img" "$keep/" 2>/dev/null || true
	cp "$ack" "$CFS_WORK"/chunkfs-*.log "$CFS_WORK"/*.out "$keep/" 2>/dev/null || true
	report
	cfs_fail "cycle $run: $1 (store, logs and acknowledgements kept in $keep)"
}

start_load() {	# the load in the background ($lpid); wait for its first acknowledgement
	local n0 i
	n0=$(wc -l <"$ack")
	SOAK_CRASH_FLAG=$CFS_WORK/crashed $load load "$mnt" "$ack" "$writers" 60 "$run" 2>"$CFS_WORK/load.out" &
	lpid=$!
	for ((i = 0; i < 600; i++)); do
		[ "$(wc -l <"$ack")" -gt "$n0" ] && return 0
		kill -0 "$lpid" 2>/dev/null || failed "the load ended before acknowledging anything: $(tail -n 3 "$CFS_WORK/load.out")"
		sleep 0.1
	done
	failed "the load acknowledged nothing within 60 s"
}

stop_load() {	# the writers see ENOTCONN and end; make sure of it
	local pid=$1 i
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		pkill -9 -P "$pid" 2>/dev/null || true
		kill -9 "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null
}

for ((run = 1; run <= cycles; run++)); do
	if [ "$budget" -gt 0 ] && [ $((SECONDS - start)) -ge "$budget" ]; then
		run=$((run - 1))
		break
	fi
	opts=
	if [ $((RANDOM % 100)) -lt "$power" ]; then
		mode=power
		opts="fault=volatile=1,torn=$((RANDOM % 2)),seed=$run"
	else
		mode=kill9
	fi
	cfs_mount "$img" "$mnt" "$opts"
	pid=$CFS_MOUNT_PID
	rm -f "$CFS_WORK/crashed"
	start_load
	sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.3 + (r % 170) / 100 }')"
	: >"$CFS_WORK/crashed"
	if [ $mode = power ]; then
		kill -USR1 "$pid" 2>/dev/null ||
			failed "the daemon had exited before the power loss: $(tail -n 20 "$CFS_WORK/chunkfs-mnt.log")"
		for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$pid" 2>/dev/null && failed "power loss: the daemon did not exit"
		powers=$((powers + 1))
	else
		kills=$((kills + 1))
	fi
	cfs_crash "$mnt"	# the crash, or reaping the daemon after a power loss
	set +e
	stop_load "$lpid"
	lrc=$?
	set -e
	cfs_clear_mount "$mnt"	# only now: the load is gone
	[ $lrc -eq 0 ] || failed "the load failed (exit $lrc): $(tail -n 3 "$CFS_WORK/load.out")"
	cfs_is_mounted "$mnt" && failed "$mnt is still mounted after the crash"
	[ -z "$(ls -A "$mnt")" ] || failed "written under the mount point: $(find "$mnt" | head -n 5 | tr '\n' ' ')"
	# The store as the crash left it, before fsck and the mount change it.
	cp --sparse=always "$img" "$CFS_WORK/crashed.img"

	set +e
	"$CFS_BIN/fsck.chunkfs" -n "$img" >"$CFS_WORK/fsck.out" 2>&1
	frc=$?
	set -e
	[ $frc -eq 0 ] || failed "fsck.chunkfs -n exited $frc: $(head -n 5 "$CFS_WORK/fsck.out")"

	cfs_mount "$img" "$mnt"
	$load verify "$mnt" "$ack" >"$CFS_WORK/verify.out" 2>&1 ||
		failed "after $mode: $(tail -n 2 "$CFS_WORK/verify.out")"
	cfs_umount "$mnt" || failed "unclean unmount after verifying"
	survived=$((survived + 1))
	echo "# cycle $run ($mode): $(tail -n 1 "$CFS_WORK/verify.out"); $(tail -n 1 "$CFS_WORK/fsck.out" | sed 's/.*: clean, //')"
done
[ "$run" -gt "$cycles" ] && run=$cycles
grep -qiE 'assert|corrupt' "$CFS_WORK"/chunkfs-*.log && failed "the daemon logged corruption"
report
