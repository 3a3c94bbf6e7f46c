#!/usr/bin/env bash
# daemon_pagecache.sh — the kernel's page cache (fs/fuse/ops.c, "page cache"):
# buffered opens keep their pages across close and reopen (a second read of
# the same blocks reaches no READ to the daemon), and those pages are never
# older than the store, whatever mix of buffered and O_DIRECT opens wrote it:
#   1. a cached open stays open while an O_DIRECT open writes (the kernel's
#      direct path invalidates the range), read() and a shared mmap see it;
#   2. pages kept after close, an O_DIRECT write, a new buffered open sees it;
#   3. an O_DIRECT open first, then a buffered one (uncached): each sees the
#      other's writes, unaligned buffered writes included, and so does a
#      shared mmap of the buffered one;
#   5. a cached open reading a block in a loop while an O_DIRECT open writes
#      new versions of it sees each version once its write is answered;
#   4. on a RAM mount (dio_align=512) the alignment policy holds for an
#      O_DIRECT open that takes the kernel's direct path (case 1's kind).
# Run on a store mount and on a RAM mount.
#
# What can fail here depends on the kernel: before 6.6 it does not touch the
# page cache for an FOPEN_DIRECT_IO write, and cases 1, 2, 3 and 5 fail
# without open_file()'s policy; 6.6+ drops the range before sending such a
# write (not after), which leaves only case 5's race (a read missing the
# cache while the write is under way), seldom hit. Case 0 fails on any
# kernel if the pages are dropped at open.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_require_cmd python3
cfs_require_cmd getfattr

img=$CFS_WORK/store.img
cfs_mkfs "$img" 64M
cfs_mount "$img" "$CFS_WORK/store"
cfs_mount ram "$CFS_WORK/ram" ram,size=64M,dio_align=512

for mnt in "$CFS_WORK/store" "$CFS_WORK/ram"; do
	cfs_log "mount $mnt"
	python3 - "$mnt" <<'PY' || cfs_fail "coherence on $mnt"
import mmap, os, sys, time

mnt = sys.argv[1]
MIB = 1 << 20

def reads(path):
    return int(os.getxattr(path, "user.chunkfs.reads"))

def block(tag, n=4096):
    b = mmap.mmap(-1, n)        # page aligned, for O_DIRECT
    b[:] = (tag * n)[:n]
    return b

def dwrite(fd, tag, off, n=4096):
    assert os.pwritev(fd, [block(tag, n)], off) == n

def dread(fd, off, n=4096):
    b = mmap.mmap(-1, n)
    assert os.preadv(fd, [b], off) == n
    return bytes(b)

def released(path):
    # close() does not wait for the daemon to see the RELEASE: the policy
    # counts handles as the daemon sees them (user.chunkfs.opens).
    for _ in range(500):
        if int(os.getxattr(path, "user.chunkfs.opens")) == 0:
            return
        time.sleep(0.01)
    sys.exit("%s: handles still open after 5 s" % path)

def expect(got, tag, what):
    assert got == tag * len(got), "%s: got %r..., want %r" % (what, got[:8], tag)

path = os.path.join(mnt, "chunk")
fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o660)
os.pwrite(fd, b"a" * MIB, 0)
os.fsync(fd)
os.close(fd)

# 0. Pages survive close and reopen: the second pass reads nothing.
for attempt in range(2):
    b = os.open(path, os.O_RDONLY)
    expect(os.pread(b, MIB, 0), b"a", "buffered read")
    os.close(b)
    if attempt == 0:
        before = reads(path)
after = reads(path)
assert after == before, "the reopened file read again from the daemon: %d READs" % (after - before)

# 1. A cached open stays open; an O_DIRECT open writes.
b = os.open(path, os.O_RDWR)
m = mmap.mmap(b, MIB, mmap.MAP_SHARED)
expect(os.pread(b, 8192, 0), b"a", "case 1 before")
expect(m[4096:8192], b"a", "case 1 mmap before")
d = os.open(path, os.O_RDWR | os.O_DIRECT)
dwrite(d, b"b", 4096)
expect(os.pread(b, 4096, 4096), b"b", "case 1 read after the O_DIRECT write")
expect(os.pread(b, 4096, 0), b"a", "case 1 neighbour")
expect(m[4096:8192], b"b", "case 1 mmap after the O_DIRECT write")
os.pwrite(b, b"c" * 4096, 8192)        # buffered, cached: the O_DIRECT open sees it
expect(dread(d, 8192), b"c", "case 1 O_DIRECT read of a buffered write")
m.close()
os.close(d)
os.close(b)

# 2. Pages kept after close; an O_DIRECT write; a new buffered open.
b = os.open(path, os.O_RDONLY)
expect(os.pread(b, 4096, 65536), b"a", "case 2 before")
os.close(b)
released(path)
d = os.open(path, os.O_RDWR | os.O_DIRECT)
dwrite(d, b"d", 65536)
os.close(d)
b = os.open(path, os.O_RDONLY)
expect(os.pread(b, 4096, 65536), b"d", "case 2 reopened after the O_DIRECT write")
os.close(b)

# 3. O_DIRECT first, then a buffered open (uncached while the other is open).
released(path)
d = os.open(path, os.O_RDWR | os.O_DIRECT)
b = os.open(path, os.O_RDWR)
expect(os.pread(b, 4096, 131072), b"a", "case 3 before")
dwrite(d, b"e", 131072)
expect(os.pread(b, 4096, 131072), b"e", "case 3 buffered read after the O_DIRECT write")
os.pwrite(b, b"f" * 100, 131072 + 10)  # unaligned buffered write
got = dread(d, 131072)
assert got[:10] == b"e" * 10 and got[10:110] == b"f" * 100 and got[110:] == b"e" * (4096 - 110), \
    "case 3 O_DIRECT read of an unaligned buffered write"
# A shared mmap of an uncached open (FUSE_DIRECT_IO_ALLOW_MMAP) shows the
# same bytes, and an O_DIRECT write after it (daemon_mmap_direct does more).
m = mmap.mmap(b, 4096, mmap.MAP_SHARED, offset=131072)
assert m[:110] == b"e" * 10 + b"f" * 100, "case 3 shared mmap of an uncached open"
os.close(b)
dwrite(d, b"g", 131072)
expect(m[:4096], b"g", "case 3 shared mmap after an O_DIRECT write")
m.close()
os.close(d)
b = os.open(path, os.O_RDONLY)
expect(os.pread(b, 4096, 131072), b"g", "case 3 last")
os.close(b)
# 5. Race: a cached open reads a block over and over while an O_DIRECT open
# writes new versions of it. Once the last write is answered, the reader
# must see it: pages read while a write was in flight must not outlive it.
import threading
b = os.open(path, os.O_RDONLY)
d = os.open(path, os.O_RDWR | os.O_DIRECT)
stop = threading.Event()
def reader():
    while not stop.is_set():
        os.pread(b, 4096, 262144)
t = threading.Thread(target=reader)
t.start()
buf = block(b"\0")
try:
    for v in range(1, 3001):
        buf[:8] = b"%08d" % v
        assert os.pwritev(d, [buf], 262144) == 4096
        got = os.pread(b, 8, 262144)
        assert got == b"%08d" % v, "case 5: version %d written, the cached open read %r" % (v, got)
finally:
    stop.set()
    t.join()
os.close(d)
os.close(b)
print("coherent")
PY
done

# 4. RAM mount: the alignment policy on the kernel's direct path.
python3 - "$CFS_WORK/ram/chunk" <<'PY' || cfs_fail "misaligned O_DIRECT next to a cached open"
import errno, mmap, os, sys
path = sys.argv[1]
b = os.open(path, os.O_RDWR)
os.pread(b, 4096, 0)
d = os.open(path, os.O_RDWR | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
try:
    os.pwritev(d, [buf], 100)
    sys.exit("a misaligned O_DIRECT write was accepted")
except OSError as e:
    assert e.errno == errno.EINVAL, e
os.close(d)
os.close(b)
PY
cfs_expect_range "$CFS_WORK/ram/chunk" err_misaligned 1 1

cfs_umount "$CFS_WORK/ram"
cfs_umount "$CFS_WORK/store"
cfs_log "ok"
