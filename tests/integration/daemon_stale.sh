#!/usr/bin/env bash
# daemon_stale.sh — a block freed by one file never shows its old data in
# another file: not through fallocate, not around small (read-modify-write)
# writes into never-written sectors, not after a crash (kill -9) that loses
# the last written-state changes.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3 fallocate

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
cfs_mkfs "$img" 64M
cfs_mount "$img" "$mnt"

# A: every byte 0xAB, filling the store; then deleted and committed
python3 - "$mnt/A" <<'EOF2'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
try:
    while True:
        os.write(fd, b"\xab" * (1 << 20))
except OSError:
    pass
os.close(fd)
EOF2
rm -f "$mnt/A"
python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)" "$mnt"

check() {	# FILE MODEL: FILE equals MODEL, and holds no 0xAB anywhere
	python3 - "$1" "$2" <<'EOF2' || cfs_fail "$3"
import sys
data = open(sys.argv[1], "rb").read()
model = open(sys.argv[2], "rb").read()
if b"\xab" in data:
    print("stale byte of the deleted file at %d" % data.index(b"\xab"), file=sys.stderr)
    sys.exit(1)
if data != model[:len(data)] or len(data) != len(model):
    print("content differs from the model", file=sys.stderr)
    sys.exit(1)
EOF2
}

# B: fallocated over A's old units, then small writes into unwritten sectors
fallocate -l 20M "$mnt/B"
head -c $((20 << 20)) /dev/zero >"$CFS_WORK/B.model"
python3 - "$mnt/B" "$CFS_WORK/B.model" <<'EOF2'
import mmap, os, sys
writes = [(100, b"x"), (5000, b"hello"), ((1 << 20) + 3, b"z" * 10), (7 << 20, b"q" * 4097)]
fd = os.open(sys.argv[1], os.O_RDWR)
for off, data in writes:
    os.pwrite(fd, data, off)
os.close(fd)
# O_DIRECT, unaligned (read-modify-write on a store mount)
fd = os.open(sys.argv[1], os.O_RDWR | os.O_DIRECT)
m = mmap.mmap(-1, 4096)
m[:700] = b"d" * 700
os.pwritev(fd, [memoryview(m)[:700]], (3 << 20) + 513)
os.close(fd)
writes.append(((3 << 20) + 513, b"d" * 700))
with open(sys.argv[2], "r+b") as f:
    for off, data in writes:
        f.seek(off)
        f.write(data)
EOF2
check "$mnt/B" "$CFS_WORK/B.model" "B shows stale data or differs"
python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)" "$mnt/B"
# unsynced writes into never-written sectors, then a crash
printf 'late' | dd of="$mnt/B" bs=1 seek=$((9 << 20)) conv=notrunc status=none
cfs_kill9 "$mnt"
cfs_mount "$img" "$mnt"
python3 - "$mnt/B" "$CFS_WORK/B.model" <<'EOF2'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
# the unsynced write may or may not be there: take it out of the comparison
late = 9 << 20
if data[late:late + 4] == b"late":
    data[late:late + 4] = bytes(4)
model = open(sys.argv[2], "rb").read()
if b"\xab" in data:
    sys.exit("stale byte after the crash at %d" % data.index(b"\xab"))
if bytes(data) != model:
    sys.exit("B differs from its model after the crash")
EOF2
[ $? -eq 0 ] || cfs_fail "after the crash"
# C: new allocations after the crash
fallocate -l 30M "$mnt/C"
head -c $((30 << 20)) /dev/zero >"$CFS_WORK/C.model"
check "$mnt/C" "$CFS_WORK/C.model" "C shows stale data"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"
