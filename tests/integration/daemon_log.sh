#!/usr/bin/env bash
# daemon_log.sh — where the daemon logs once it has detached, when no syslog
# daemon listens on /dev/log (containers, minimal VMs): the kernel log
# (/dev/kmsg), so its mount and exit lines are in dmesg with chunkfs[PID]
# (fs/fuse/main.c, "logging"; chunkfs(8)). Before, syslog(3) dropped them.
# Where /dev/log is a socket, the daemon runs in a private mount namespace
# with /dev/null bound over it.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd dmesg unshare
[ -w /dev/kmsg ] || cfs_skip "no writable /dev/kmsg"

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
cfs_mkfs "$img" 64M
mkdir -p "$mnt"
cfs_defer "fusermount3 -u '$mnt'"

# In its own mount namespace: the mount and its unmount happen there.
IMG=$img MNT=$mnt CHUNKFS=$CFS_BIN/chunkfs unshare -m --propagation private bash -c '
set -eu
trap "fusermount3 -u \"\$MNT\" 2>/dev/null || true" EXIT   # the mount lives in here
[ ! -S /dev/log ] || mount --bind /dev/null /dev/log
"$CHUNKFS" "$IMG" "$MNT"      # no -f: detaches once mounted
line=
for _ in $(seq 100); do
	line=$(dmesg | grep -F "chunkfs: $IMG mounted on $MNT" | tail -n 1) && [ -n "$line" ] && break
	sleep 0.1
done
[ -n "$line" ] || { echo "FAIL: no mount line in the kernel log" >&2; exit 1; }
echo "# kernel log: $line"
pid=$(sed -E "s/.*chunkfs\[([0-9]+)\]: .*/\1/" <<<"$line")
dd if=/dev/zero of="$MNT/chunk" bs=64k count=16 oflag=direct status=none
fusermount3 -u "$MNT"
for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$pid" 2>/dev/null || { echo "FAIL: daemon $pid still running" >&2; exit 1; }
dmesg | grep -F "chunkfs[$pid]: chunkfs: device: " ||
	{ echo "FAIL: no exit line of chunkfs[$pid] in the kernel log" >&2; exit 1; }
' || cfs_fail "the detached daemon's log lines are not in the kernel log"
