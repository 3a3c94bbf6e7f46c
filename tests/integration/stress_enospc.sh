#!/usr/bin/env bash
# stress_enospc.sh — concurrency: 3 processes x 4 threads create, write
# (buffered and O_DIRECT), rename (also over their own files), unlink and
# fsync files and directories in one shared directory and their own, on a
# 48 MiB store (1 MiB units) that runs into ENOSPC again and again (each
# thread then deletes half its files and goes on). Then every file is
# checked by SHA-256 live, after fsck.chunkfs -n (clean) and a remount.
# Under BUILD=tsan the daemon runs with ThreadSanitizer and any report
# fails the test. CFS_STRESS_SECONDS sets the load time (default 40).
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3

util="python3 $CFS_ROOT/tests/integration/stress_util.py"
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
cfs_tsan_watch

cfs_mkfs "$img" 48M
cfs_mount "$img" "$mnt"
$util run "$mnt/load" "$CFS_WORK/state" 3 "${CFS_STRESS_SECONDS:-40}" ||
	{ cfs_daemon_log "$mnt" | tail -n 20; cfs_fail "the load failed"; }
out=$($util verify "$mnt/load" "$CFS_WORK/state") || cfs_fail "live: $out"
cfs_log "live: $out"
grep -q "ENOSPC met 0 times" <<<"$out" && cfs_fail "the store never filled up"
df -k "$mnt" | tail -n 1
cfs_umount "$mnt" || cfs_fail "unclean unmount"
if [ -x "$CFS_BIN/fsck.chunkfs" ]; then
	"$CFS_BIN/fsck.chunkfs" -n "$img" || cfs_fail "fsck.chunkfs -n found problems"
fi
cfs_mount "$img" "$mnt"
out=$($util verify "$mnt/load" "$CFS_WORK/state") || cfs_fail "after remount: $out"
cfs_umount "$mnt" || cfs_fail "unclean unmount"
cfs_tsan_verdict
cfs_log "ok: $out"
