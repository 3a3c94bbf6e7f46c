#!/usr/bin/env bash
# fault_eio.sh — device errors through the daemon (-o fault=SPEC):
#   a read the store fails          -> the application's read gets EIO, the
#                                      next read works, nothing else changes
#   a data write the store fails    -> the write gets EIO, and so does the
#                                      next fsync of that file (once); a
#                                      buffered write was answered before
#                                      (write-behind): only the fsync
#   a write the store answers ENOSPC -> the write gets ENOSPC
#   a flush the store fails          -> fsync gets EIO, the mount turns
#                                      read-only (EROFS) with a log line, and
#                                      after a remount everything fsynced
#                                      before is there
# The fault rules count requests from mount on, so each case first finds
# how many requests of its kind the mount itself makes (the smallest nth
# that mounts), and the next one is the application's.
# Every failed request is counted in the chunk's statistics (README
# "Statistics"), as the application saw it: reads, writes and fsyncs with
# their *_errors, err_eio / err_enospc, errors, and the mount-wide totals.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_require_cmd python3 getfattr setfattr

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
log=$CFS_WORK/daemon.log
mkdir -p "$mnt"
cfs_mkfs "$img" 64M
cfs_mount "$img" "$mnt"
head -c 4M /dev/urandom >"$mnt/f"
sum=$(md5sum <"$mnt/f")
cfs_umount "$mnt" || cfs_fail "unclean unmount"

# mount_with SPEC: daemonized mount (exit status = verdict); 0 if mounted.
mount_with() {
	"$CFS_BIN/chunkfs" "$img" "$mnt" -o "wait=10,fault=$1" >>"$log" 2>&1
}
umount_wait() {	# the next mount waits for the lock (wait=10)
	fusermount3 -u "$mnt" 2>/dev/null || true
}
cfs_defer "fusermount3 -u '$mnt'"

# first_free OP RULE: mount with op=OP,nth=K,RULE for the smallest K that mounts
first_free() {
	local k
	for ((k = 1; k <= 40; k++)); do
		if mount_with "op=$1,nth=$k,$2"; then
			nth=$k
			cfs_log "op=$1: the mount made $((k - 1)) requests; nth=$k is the application's"
			return 0
		fi
	done
	cfs_fail "no nth up to 40 lets the mount through (op=$1)"
}

# py: the Python on stdin after py_prelude (fails()), sys.argv[1] = $mnt/f.
py() { python3 - "$mnt/f" "$@" < <(printf '%s\n' "$py_prelude"; cat); }
py_prelude='
import errno, mmap, os, sys

def fails(what, err, call, *args):
    """call(*args) must fail with errno.<err>; else the test ends."""
    try:
        call(*args)
    except OSError as e:
        if e.errno != getattr(errno, err):
            sys.exit("%s: %s, expected %s" % (what, e, err))
        return
    sys.exit("%s succeeded, expected %s" % (what, err))
'

# expect_stats PATH NAME=VALUE...: the counters of PATH
expect_stats() {
	local path=$1 kv
	shift
	for kv in "$@"; do
		cfs_expect "$path" "${kv%%=*}" "${kv#*=}"
	done
}

# ---- read EIO -----------------------------------------------------------------------
first_free read err=EIO
cfs_reset "$mnt/f"
cfs_reset "$mnt"
py <<'EOF2' || cfs_fail "read EIO"
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
m = mmap.mmap(-1, 4096)
fails("read", "EIO", os.preadv, fd, [m], 0)
assert os.preadv(fd, [m], 0) == 4096, "the next read failed"
EOF2
expect_stats "$mnt/f" reads=2 read_bytes=4096 read_errors=1 err_eio=1 errors=1 writes=0
expect_stats "$mnt" err_eio=1 errors=1
[ "$(md5sum <"$mnt/f")" = "$sum" ] || cfs_fail "content changed after a read error"
umount_wait

# ---- write EIO, reported to the next fsync ------------------------------------------------
first_free write err=EIO
cfs_reset "$mnt/f"
cfs_reset "$mnt"
py <<'EOF2' || cfs_fail "write EIO"
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_DIRECT)
m = mmap.mmap(-1, 4096)
m.write(b"x" * 4096)
fails("write", "EIO", os.pwritev, fd, [m], 0)
fails("fsync after a failed write", "EIO", os.fsync, fd)
os.fsync(fd)  # reported once
assert os.pwritev(fd, [m], 0) == 4096
os.fsync(fd)
EOF2
# the write's EIO, and again the fsync's that reported it
expect_stats "$mnt/f" writes=2 write_bytes=4096 write_errors=1 fsyncs=3 fsync_errors=1 \
	err_eio=2 errors=2 reads=0
expect_stats "$mnt" err_eio=2 errors=2
umount_wait

# ---- a buffered write's EIO: write() was answered, fsync reports it ---------------------------
# Buffered writes are answered before they reach the store (write-behind),
# so the store's error can only go to the next fsync, as Linux reports a
# writeback error.
first_free write err=EIO
cfs_reset "$mnt/f"
cfs_reset "$mnt"
py <<'EOF2' || cfs_fail "write-behind EIO"
fd = os.open(sys.argv[1], os.O_WRONLY)
assert os.pwrite(fd, b"b" * 4096, 0) == 4096, "short buffered write"
fails("fsync after a failed write-behind", "EIO", os.fsync, fd)
os.fsync(fd)  # reported once
assert os.pwrite(fd, b"b" * 4096, 0) == 4096
os.fsync(fd)
EOF2
# the write is counted when the store answered it (with its error); the
# fsync that reported it too
expect_stats "$mnt/f" writes=2 write_bytes=4096 write_errors=1 fsyncs=3 fsync_errors=1 \
	err_eio=2 errors=2 reads=0
umount_wait

# ---- write ENOSPC from the store ---------------------------------------------------------
first_free write err=ENOSPC
cfs_reset "$mnt/f"
py <<'EOF2' || cfs_fail "write ENOSPC"
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_DIRECT)
m = mmap.mmap(-1, 4096)
m.write(b"y" * 4096)
fails("write", "ENOSPC", os.pwritev, fd, [m], 8192)
EOF2
expect_stats "$mnt/f" writes=1 write_bytes=0 write_errors=1 err_enospc=1 err_eio=0 errors=1
umount_wait

# ---- flush EIO: read-only, said in the log ---------------------------------------------------
# In the foreground this time, so the daemon's log line is in its log file
# (a daemonized chunkfs logs to syslog).
first_free flush err=EIO
umount_wait
cfs_mount "$img" "$mnt" "wait=10,fault=op=flush,nth=$nth,err=EIO"
cfs_reset "$mnt/f"
py <<'EOF2' || cfs_fail "flush EIO"
fd = os.open(sys.argv[1], os.O_WRONLY)
os.pwrite(fd, b"z" * 100, 0)
fails("fsync with a failed flush", "EIO", os.fsync, fd)
fails("create after a failed metadata write", "EROFS", open,
      os.path.join(os.path.dirname(sys.argv[1]), "h"), "w")
EOF2
expect_stats "$mnt/f" writes=1 write_errors=0 fsyncs=1 fsync_errors=1 err_eio=1 errors=1
expect_stats "$mnt" readonly=1
cfs_umount "$mnt" || true
cfs_daemon_log "$mnt" | grep -q "failed (.*): the filesystem is read-only from now on" ||
	{ cfs_daemon_log "$mnt"; cfs_fail "no log line about read-only"; }
cfs_log "$(cfs_daemon_log "$mnt" | grep -m1 "read-only from now on")"
cfs_mount "$img" "$mnt" "wait=10"
[ -f "$mnt/f" ] || cfs_fail "f lost"
cfs_umount "$mnt" || cfs_fail "unclean unmount"
[ ! -x "$CFS_BIN/fsck.chunkfs" ] || "$CFS_BIN/fsck.chunkfs" -n "$img" >/dev/null ||
	cfs_fail "fsck after the faults"
cfs_log "ok"
