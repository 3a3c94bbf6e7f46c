#!/usr/bin/env bash
# daemon_crash.sh — durability: kill -9 of the daemon during a write+fsync
# load, 20 cycles (CFS_CRASH_CYCLES), then remount and check every fsynced
# record and the metadata (files, sizes, renamed marker files); then power
# losses simulated with the fault backend (fault=volatile=1: writes not
# covered by a completed flush are lost or torn, SIGUSR1 pulls the plug).
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3

util="python3 $CFS_ROOT/tests/integration/daemon_util.py"
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
ack=$CFS_WORK/ack.log
cycles=${CFS_CRASH_CYCLES:-20}
power_cycles=${CFS_POWER_CYCLES:-5}
cfs_mkfs "$img" 256M
: >"$ack"

check_after() {	# remount and verify
	cfs_mount "$img" "$mnt" "$1"
	$util verify "$mnt/load" "$ack" || { cfs_daemon_log "$mnt" | tail -n 20; cfs_fail "$2"; }
	find "$mnt" -type f -exec cat {} + >/dev/null || cfs_fail "$2: unreadable file"
	cfs_umount "$mnt" || cfs_fail "$2: unclean unmount"
}

for ((c = 1; c <= cycles; c++)); do
	cfs_mount "$img" "$mnt"
	mkdir -p "$mnt/load"
	$util load "$mnt/load" "$ack" 12 60 2>/dev/null &
	load=$!
	# 0.2 .. 2.5 s of load, then the crash
	sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.2 + (r % 230) / 100 }')"
	cfs_kill9 "$mnt"
	wait $load 2>/dev/null || true
	cfs_log "cycle $c: $(wc -l <"$ack") acknowledged records so far"
	check_after "" "after kill -9 cycle $c"
done
grep -qiE 'assert|corrupt' "$CFS_WORK"/chunkfs-*.log && cfs_fail "the daemon logged corruption"

# ---- SIGTERM under load: an orderly stop with fsyncs in flight ----------------------
for ((c = 1; c <= 2; c++)); do
	cfs_mount "$img" "$mnt"
	pid=$CFS_MOUNT_PID
	$util load "$mnt/load" "$ack" 12 60 2>/dev/null &
	load=$!
	sleep 1
	kill -TERM "$pid"
	for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && cfs_fail "SIGTERM: the daemon did not exit"
	wait "$pid" || cfs_fail "SIGTERM: the daemon exited $?"
	cfs_kill9 "$mnt"	# nothing left to kill; forgets the pid
	wait $load 2>/dev/null || true
	check_after "" "after SIGTERM $c"
done

# ---- simulated power loss --------------------------------------------------------
for ((c = 1; c <= power_cycles; c++)); do
	torn=$((c % 2))
	cfs_mount "$img" "$mnt" "fault=volatile=1,torn=$torn,seed=$c"
	pid=$CFS_MOUNT_PID
	mkdir -p "$mnt/load"
	$util load "$mnt/load" "$ack" 12 60 2>/dev/null &
	load=$!
	sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.5 + (r % 150) / 100 }')"
	kill -USR1 "$pid"
	for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && cfs_fail "power loss: the daemon did not exit"
	cfs_kill9 "$mnt"	# clears the dead mount
	wait $load 2>/dev/null || true
	cfs_log "power loss $c (torn=$torn): $(wc -l <"$ack") acknowledged records so far"
	check_after "" "after power loss $c"
done
cfs_log "ok"
