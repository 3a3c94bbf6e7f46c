#!/usr/bin/env bash
# daemon_noflush.sh — close() costs no FLUSH round trip (FOPEN_NOFLUSH):
# opening and closing a chunk is OPEN + RELEASE only, for buffered and
# O_DIRECT opens, and data written before close is there after it
# (what bench/openclose.c measures).
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
cfs_mkfs "$img" 64M
cfs_mount "$img" "$mnt" debug

python3 - "$mnt/chunk" <<'PY' || cfs_fail "open/close load"
import mmap, os, sys
path = sys.argv[1]
fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o660)
os.close(fd)
buf = mmap.mmap(-1, 4096)
for i in range(50):
    for flags in (os.O_RDWR, os.O_RDWR | os.O_DIRECT):
        fd = os.open(path, flags)
        buf[:8] = b"%08d" % i
        os.pwritev(fd, [buf], 0)
        os.close(fd)
fd = os.open(path, os.O_RDONLY)
got = os.pread(fd, 8, 0)
os.close(fd)
assert got == b"%08d" % 49, got
PY

log=$(cfs_daemon_log "$mnt")
opens=$(grep -c 'opcode: OPEN ' <<<"$log" || true)
flushes=$(grep -c 'opcode: FLUSH ' <<<"$log" || true)
cfs_log "OPEN requests: $opens, FLUSH requests: $flushes"
[ "$opens" -ge 100 ] || cfs_fail "expected >= 100 OPEN requests in the debug log, saw $opens"
[ "$flushes" -eq 0 ] || cfs_fail "close sent $flushes FLUSH requests (FOPEN_NOFLUSH not set?)"
cfs_umount "$mnt"
cfs_log "ok"
