#!/usr/bin/env bash
# ceph_takeover.sh — failover of a store on RBD between two hosts, with the
# old holder fenced. Daemons in separate pid namespaces (unshare --pid) stand
# for separate hosts: chunkfs tells hosts apart by boot id and pid namespace.
#
#   A (this namespace) runs a write+fsync load (tests/integration/
#   daemon_util.py: every record acknowledged only after its fsync) and is
#   killed -9. B ("another host") is refused without -o takeover, naming A's
#   pid, and mounts with it; every acknowledged record is there.
#   Then the fencing: B is frozen (SIGSTOP, a host cut off) while a write
#   into its mount waits; C ("a third host") takes over; B thaws: the waiting
#   write fails with EIO, B logs once that it was blocklisted (and the
#   cluster's blocklist has its client), its reads and writes fail from then
#   on, and nothing it wrote after the takeover is on the store: C and a
#   later mount see the data as it was, fsck is clean.
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/ceph.sh"
cfs_require_fuse
cfs_ceph_require
cfs_require_cmd unshare python3 cmp
unshare --pid --fork --kill-child true 2>/dev/null || cfs_skip "cannot unshare a pid namespace"

util="python3 $CFS_ROOT/tests/integration/daemon_util.py"
other_host="unshare --pid --fork --kill-child"
cfs_ceph_cluster
cfs_rbd_image takeover 1G
src=$CFS_RBD
"$CFS_BIN/mkchunkfs" -q "$src" || cfs_fail "mkchunkfs $src"
ack=$CFS_WORK/ack.log
: >"$ack"

cfs_log "A: a write+fsync load, then kill -9"
cfs_mount "$src" "$CFS_WORK/a"
a_pid=$CFS_MOUNT_PID
mkdir "$CFS_WORK/a/load"
$util load "$CFS_WORK/a/load" "$ack" 8 60 2>"$CFS_WORK/load.err" &
load=$!
for ((i = 0; i < 600; i++)); do
	[ "$(wc -l <"$ack")" -gt 20 ] && break
	kill -0 $load 2>/dev/null || { cat "$CFS_WORK/load.err"; cfs_fail "the load ended"; }
	sleep 0.1
done
[ "$(wc -l <"$ack")" -gt 20 ] || cfs_fail "the load acknowledged too little in 60 s"
cfs_crash "$CFS_WORK/a"
killed=$(date +%s%N)
for ((i = 0; i < 300; i++)); do kill -0 $load 2>/dev/null || break; sleep 0.1; done
kill -9 $load 2>/dev/null && cfs_fail "the load outlived its daemon by 30 s"
wait $load 2>/dev/null || true
cfs_clear_mount "$CFS_WORK/a"
cfs_log "A killed after $(wc -l <"$ack") acknowledged records"

cfs_log "B, another host: refused without -o takeover, naming A"
mkdir -p "$CFS_WORK/b"
# shellcheck disable=SC2086
cfs_expect_fail_with "in use by chunkfs on host $(hostname) (pid $a_pid, client.admin at" 32 \
	$other_host "$CFS_BIN/chunkfs" -f "$src" "$CFS_WORK/b" -o wait=0
cfs_log "B: -o takeover"
CFS_MOUNT_WRAP=$other_host cfs_mount "$src" "$CFS_WORK/b" takeover
b_wrap=$CFS_MOUNT_PID
echo first-write >"$CFS_WORK/b/after-takeover" && sync "$CFS_WORK/b/after-takeover" ||
	cfs_fail "B cannot write after the takeover"
cfs_log "kill -9 of A to B's first fsynced write: $((($(date +%s%N) - killed) / 1000000)) ms"
grep -q "taking over from chunkfs on host $(hostname) (pid $a_pid" "$CFS_WORK/chunkfs-b.log" ||
	{ cfs_daemon_log "$CFS_WORK/b"; cfs_fail "B did not say whom it took the store from"; }
$util verify "$CFS_WORK/b/load" "$ack" || cfs_fail "acknowledged records missing after the takeover"

cfs_log "fencing: B frozen with a write waiting, C takes over, B thaws"
head -c 1M /dev/urandom >"$CFS_WORK/old"
head -c 1M /dev/urandom >"$CFS_WORK/new"
dd if="$CFS_WORK/old" of="$CFS_WORK/b/fenced" bs=1M oflag=direct conv=fsync status=none ||
	cfs_fail "B: write + fsync"
b_daemon=$(pgrep -P "$b_wrap" -x chunkfs) || cfs_fail "B's daemon not found under $b_wrap"
kill -STOP "$b_daemon"
cfs_defer "kill -CONT $b_daemon"
dd if="$CFS_WORK/new" of="$CFS_WORK/b/fenced" bs=1M oflag=direct conv=notrunc,fsync status=none \
	2>"$CFS_WORK/b-write.err" &
b_write=$!
sleep 0.5
kill -0 $b_write 2>/dev/null || cfs_fail "the write into frozen B did not wait"
CFS_MOUNT_WRAP=$other_host cfs_mount "$src" "$CFS_WORK/c" takeover
grep -q "taking over from chunkfs on host $(hostname) (pid 1," "$CFS_WORK/chunkfs-c.log" ||
	{ cfs_daemon_log "$CFS_WORK/c"; cfs_fail "C did not say it took the store from B"; }
kill -CONT "$b_daemon"
# Bounded: a write the fenced daemon never answers fails here, not at the
# suite's timeout with the mount left behind.
for ((i = 0; i < 600; i++)); do kill -0 $b_write 2>/dev/null || break; sleep 0.1; done
kill -0 $b_write 2>/dev/null &&
	{ cfs_daemon_log "$CFS_WORK/b"; cfs_fail "B's write still waits 60 s after B thawed (fenced: it must fail with EIO)"; }
wait $b_write && cfs_fail "B's write succeeded after C took the store over"
grep -q "Input/output error" "$CFS_WORK/b-write.err" ||
	cfs_fail "B's write failed, but not with EIO: $(cat "$CFS_WORK/b-write.err")"
for ((i = 0; i < 50; i++)); do
	grep -q "blocklisted by the cluster" "$CFS_WORK/chunkfs-b.log" && break
	sleep 0.1
done
[ "$(grep -c "this client was fenced" "$CFS_WORK/chunkfs-b.log")" = 1 ] ||
	{ cfs_daemon_log "$CFS_WORK/b"; cfs_fail "B did not log its fencing exactly once"; }
cfs_log "B: $(grep "this client was fenced" "$CFS_WORK/chunkfs-b.log")"
dd if="$CFS_WORK/new" of="$CFS_WORK/b/fenced" bs=1M oflag=direct conv=notrunc status=none 2>/dev/null &&
	cfs_fail "B wrote again after it was fenced"
# (O_DIRECT: past the page cache, which may still hold what B read before)
dd if="$CFS_WORK/b/fenced" of=/dev/null bs=1M iflag=direct status=none 2>/dev/null &&
	cfs_fail "B read from the store after it was fenced"
b_addr=$(sed -n 's/.*taking over from chunkfs on host .* (pid 1, client\.admin at \([^)]*\)).*/\1/p' \
	"$CFS_WORK/chunkfs-c.log")
[ -n "$b_addr" ] || cfs_fail "C's log does not name B's address"
ceph_cmd osd blocklist ls 2>/dev/null | grep -qF "$b_addr" ||
	cfs_fail "B ($b_addr) is not in the cluster's blocklist: $(ceph_cmd osd blocklist ls 2>&1)"
cfs_log "B's client $b_addr is blocklisted"
cmp "$CFS_WORK/old" "$CFS_WORK/c/fenced" || { cmp "$CFS_WORK/new" "$CFS_WORK/c/fenced" && echo IS-NEW; od -An -tx1 "$CFS_WORK/c/fenced" | head -3; ls -la "$CFS_WORK/c/"; cat "$CFS_WORK/chunkfs-b.log" "$CFS_WORK/chunkfs-c.log"; cfs_fail "a write of fenced B reached the store"; }
$util verify "$CFS_WORK/c/load" "$ack" || cfs_fail "acknowledged records missing on C"
echo "C's data" >"$CFS_WORK/c/c-file" && sync "$CFS_WORK/c/c-file" || cfs_fail "C cannot write"

cfs_umount "$CFS_WORK/b" || true # its checkpoint cannot be written: fenced
cfs_umount "$CFS_WORK/c" || cfs_fail "unmount C"
"$CFS_BIN/fsck.chunkfs" "$src" >"$CFS_WORK/fsck.out" 2>&1 ||
	{ cat "$CFS_WORK/fsck.out"; cfs_fail "fsck after the takeovers"; }
cfs_mount "$src" "$CFS_WORK/a"
cmp "$CFS_WORK/old" "$CFS_WORK/a/fenced" || cfs_fail "the store changed after C unmounted"
[ "$(cat "$CFS_WORK/a/c-file")" = "C's data" ] || cfs_fail "C's fsynced file is not there"
$util verify "$CFS_WORK/a/load" "$ack" || cfs_fail "acknowledged records missing at the end"
cfs_umount "$CFS_WORK/a" || cfs_fail "unmount"
cfs_log "ok"
