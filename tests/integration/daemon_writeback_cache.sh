#!/usr/bin/env bash
# daemon_writeback_cache.sh — -o writeback_cache: the kernel's writeback
# cache on a store mount.
#
#   - what it is for: 1000 buffered 8 KiB appends, each after
#     lseek(SEEK_END) (PostgreSQL extending a relation), reach the daemon as
#     far fewer WRITEs (the statistics count them) than without the option,
#     where every one is a WRITE;
#   - content: buffered writes, overwrites and a truncate with dirty pages,
#     read back before and after a remount, sizes and mtime kept;
#   - coherence: an O_DIRECT reader of a file with dirty pages sees them, and
#     a buffered reader sees an O_DIRECT write;
#   - a full store: the error reaches the application (write() or at the
#     latest fsync() fails with ENOSPC), the daemon lives on, the data
#     fsynced before is intact after a remount, and fsck is clean;
#   - space set aside with fallocate(FALLOC_FL_KEEP_SIZE) before the store
#     filled up (as RocksDB preallocates its log): appends into it after
#     the store is full are written and fsynced without an error, and read
#     back after a remount;
#   - space held back for the kernel's write-back (writeback_reserve=):
#     statfs leaves it out, fallocate and O_DIRECT writes get ENOSPC while
#     it is there, and buffered appends to a new file fsync into it without
#     an error, read back after a remount; a move into a store of a pool
#     is refused beyond what the store may give it, and says how much that
#     is (user.chunkfs.stores: held=).
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_require_cmd python3 getfattr

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
cfs_mkfs "$img" 96M

# appends after lseek(SEEK_END): WRITE requests the daemon counted
appends() {
	python3 - "$1" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
page = bytes(range(256)) * 32
for i in range(1000):
    end = os.lseek(fd, 0, os.SEEK_END)
    assert end == i * 8192, (end, i)
    os.pwrite(fd, page, end)
os.fsync(fd)
os.close(fd)
EOF
}
cfs_mount "$img" "$mnt"
appends "$mnt/plain"
plain=$(cfs_stat "$mnt/plain" writes)
cfs_umount "$mnt" || cfs_fail "unmount"
[ "$plain" -ge 1000 ] || cfs_fail "without writeback_cache: $plain WRITEs for 1000 appends (expected one each)"

cfs_mount "$img" "$mnt" writeback_cache
appends "$mnt/wb"
wb=$(cfs_stat "$mnt/wb" writes)
cfs_log "1000 appends of 8 KiB after lseek(SEEK_END): $plain WRITEs without writeback_cache, $wb with it"
[ "$wb" -le 100 ] || cfs_fail "with writeback_cache: $wb WRITEs for 1000 appends (expected the kernel to gather them)"
cmp "$mnt/plain" "$mnt/wb" || cfs_fail "appends: content differs"

# content, truncate with dirty pages, coherence with O_DIRECT
python3 - "$mnt" <<'EOF' || cfs_fail "content and coherence"
import mmap, os, sys
d = sys.argv[1]
f = os.path.join(d, "data")
fd = os.open(f, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
blob = os.urandom(3 * 1048576 + 1234)
os.write(fd, blob)
os.pwrite(fd, b"X" * 100, 4000)                 # an overwrite across a page boundary
blob = blob[:4000] + b"X" * 100 + blob[4100:]
# O_DIRECT reader while the pages may still be dirty: sees them
dfd = os.open(f, os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 1 << 20)
n = os.preadv(dfd, [buf], 0)
assert n == 1 << 20 and buf[:n] == blob[: 1 << 20], "O_DIRECT read missed dirty pages"
os.close(dfd)
# truncate down with dirty pages, then extend by a write past the end
os.ftruncate(fd, 2 * 1048576 + 7)
blob = blob[: 2 * 1048576 + 7]
os.pwrite(fd, b"tail", 2 * 1048576 + 100)
blob = blob + b"\0" * 93 + b"tail"
assert os.fstat(fd).st_size == len(blob), os.fstat(fd).st_size
assert os.pread(fd, len(blob), 0) == blob, "buffered read back"
# an O_DIRECT write into the cached file: a buffered read sees it
dfd = os.open(f, os.O_RDWR | os.O_DIRECT)
buf[:4096] = b"D" * 4096
assert os.pwritev(dfd, [memoryview(buf)[:4096]], 8192) == 4096
os.close(dfd)
blob = blob[:8192] + b"D" * 4096 + blob[12288:]
assert os.pread(fd, len(blob), 0) == blob, "buffered read after an O_DIRECT write"
os.fsync(fd)
os.close(fd)
open(os.path.join(d, "data.sum"), "wb").write(blob)
EOF
mtime=$(stat -c %Y.%y "$mnt/data")
size=$(stat -c %s "$mnt/data")
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_mount "$img" "$mnt" writeback_cache
cmp "$mnt/data" "$mnt/data.sum" || cfs_fail "content after a remount"
[ "$(stat -c %s "$mnt/data")" = "$size" ] || cfs_fail "size $(stat -c %s "$mnt/data") after a remount, was $size"
[ "$(stat -c %Y.%y "$mnt/data")" = "$mtime" ] || cfs_fail "mtime $(stat -c %y "$mnt/data") after a remount, was $mtime"
cmp "$mnt/plain" "$mnt/wb" || cfs_fail "appends after a remount"

# appends into space set aside by fallocate(KEEP_SIZE), once the store is full
python3 - "$mnt" <<'EOF' || cfs_fail "appends into fallocated space on a full store"
import ctypes, errno, os, sys
d = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
log = os.open(os.path.join(d, "log"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
if libc.fallocate(log, 1, 0, 8 << 20) != 0:  # FALLOC_FL_KEEP_SIZE
    sys.exit("fallocate: " + os.strerror(ctypes.get_errno()))
assert os.fstat(log).st_size == 0
fill = os.open(os.path.join(d, "fill"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
try:
    for i in range(150):
        os.write(fill, b"f" * 1048576)
    os.fsync(fill)
    sys.exit("the store never filled up")
except OSError as e:
    if e.errno != errno.ENOSPC:
        raise
try:
    os.close(fill)
except OSError:
    pass
record = bytes(range(256)) * 2 + b"\n" * 100  # 612 bytes, as a log's records
written = 0
while written + len(record) <= 8 << 20:
    os.write(log, record)
    written += len(record)
    if written % (1 << 20) < len(record):
        os.fsync(log)
os.fsync(log)
os.close(log)
data = open(os.path.join(d, "log"), "rb").read()
assert data == record * (written // len(record)), "read back"
print("%d bytes appended and fsynced into fallocated space on a full store" % written)
EOF
rm -f "$mnt/fill"
cp "$mnt/log" "$CFS_WORK/log.sum"

# a full store: ENOSPC reaches the application, the daemon lives on
python3 - "$mnt/fill" <<'EOF' || cfs_fail "a full store"
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
chunk = b"f" * 1048576
where = None
try:
    # more than the store holds, less than the largest file (twice the
    # store: EFBIG beyond, which writeback could then report instead)
    for i in range(150):
        os.write(fd, chunk)
    where = "never"
    os.fsync(fd)
except OSError as e:
    if e.errno != errno.ENOSPC:
        raise
    where = "write" if where is None else "fsync"
    print("ENOSPC from %s()" % where)
else:
    sys.exit("150 MiB written and fsynced on a 96 MiB store")
try:
    os.close(fd)
except OSError:
    pass                                        # the error may come again at close
EOF
cfs_is_mounted "$mnt" || cfs_fail "the mount is gone after ENOSPC"
rm -f "$mnt/fill"
echo after >"$mnt/after" && sync "$mnt/after" || cfs_fail "a write after ENOSPC and rm"
cmp "$mnt/data" "$mnt/data.sum" || cfs_fail "content after ENOSPC"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_mount "$img" "$mnt"
cmp "$mnt/data" "$mnt/data.sum" || cfs_fail "content after ENOSPC and a remount"
cmp "$mnt/log" "$CFS_WORK/log.sum" || cfs_fail "the appends into fallocated space after a remount"
[ "$(cat "$mnt/after")" = after ] || cfs_fail "the write after ENOSPC"
cfs_umount "$mnt" || cfs_fail "unmount"
"$CFS_BIN/fsck.chunkfs" -n "$img" >"$CFS_WORK/fsck.out" 2>&1 ||
	{ cat "$CFS_WORK/fsck.out" >&2; cfs_fail "fsck.chunkfs"; }

# space held back for write-back: 16 units of 1 MiB on a fresh 96 MiB store
img=$CFS_WORK/held.img
cfs_mkfs "$img" 96M
cfs_mount "$img" "$mnt" writeback_cache,writeback_reserve=16M
python3 - "$mnt" <<'EOF' || cfs_fail "space held back for write-back"
import ctypes, errno, mmap, os, sys
d = sys.argv[1]
unit = 1 << 20
def space():
    st = os.statvfs(d)
    assert st.f_frsize == unit, st.f_frsize
    return st.f_bfree, st.f_bavail
free, avail = space()
assert free - avail == 16, "statfs: %d free, %d available: expected 16 held back" % (free, avail)
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
# fill what is available with fallocate, one unit per file
n = 0
while True:
    fd = os.open(os.path.join(d, "pre%d" % n), os.O_RDWR | os.O_CREAT, 0o644)
    ret = libc.fallocate(fd, 0, 0, unit)
    err = ctypes.get_errno()
    os.close(fd)
    if ret:
        assert err == errno.ENOSPC, os.strerror(err)
        break
    n += 1
free, avail = space()
assert avail == 0 and free >= 15, "after fallocate filled the store: %d free, %d available" % (free, avail)
# an O_DIRECT write into new space: ENOSPC from the write itself
fd = os.open(os.path.join(d, "direct"), os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
buf = mmap.mmap(-1, unit)
try:
    os.pwritev(fd, [buf], 0)
    sys.exit("an O_DIRECT write took the space held back")
except OSError as e:
    assert e.errno == errno.ENOSPC, e
os.close(fd)
# buffered appends to a new file, no fallocate: the write-back takes them
record = bytes(range(256)) * 2 + b"\n" * 100
fd = os.open(os.path.join(d, "log"), os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
written = 0
while written + len(record) <= 12 * unit:
    os.write(fd, record)
    written += len(record)
os.fsync(fd)
os.close(fd)
assert open(os.path.join(d, "log"), "rb").read() == record * (written // len(record))
print("%d units fallocated, O_DIRECT refused, %d bytes of appends fsynced into the space held back" % (n, written))
EOF
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_mount "$img" "$mnt"
python3 - "$mnt/log" <<'EOF' || cfs_fail "appends into the space held back, after a remount"
import sys
record = bytes(range(256)) * 2 + b"\n" * 100
data = open(sys.argv[1], "rb").read()
sys.exit(0 if data == record * (12 * 1048576 // len(record)) else "log differs after a remount")
EOF
cfs_umount "$mnt" || cfs_fail "unmount"

# a move into a store that holds space back: refused beyond what it may
# take, and the refusal says how much that is (not the free space)
pa=$CFS_WORK/pa.img pb=$CFS_WORK/pb.img
cfs_mkfs "$pa" 96M -L pa
"$CFS_BIN/mkchunkfs" -q -s 32M -L pb --join "$pa" "$pb" || cfs_fail "join of pb failed"
cfs_mount "$pa,$pb" "$mnt" writeback_cache,writeback_reserve=4M
line=$(getfattr --only-values -n user.chunkfs.stores "$mnt" | grep '^pb ')
field() { sed -nE "s/.* $1=([0-9]+).*/\1/p" <<<"$line"; }
free=$(field free) busy=$(field busy) held=$(field held)
[ "$held" = $((4 << 20)) ] || cfs_fail "pb holds back ${held:-nothing}, not 4 MiB: $line"
room=$((free + busy - held))
mkdir "$mnt/db"
setfattr -n user.chunkfs.store -v pa "$mnt/db" || cfs_fail "placing db on pa"
dd if=/dev/urandom of="$mnt/db/c" bs=1M count=$(((room >> 20) + 2)) oflag=direct status=none ||
	cfs_fail "writing the chunk"
sum=$(md5sum <"$mnt/db/c")
out=$("$CFS_BIN/chunkfs" move "$mnt/db/c" pb 2>&1) && cfs_fail "a move into the held-back space: $out"
want=$(python3 -c "print('%.1f MiB' % ($room / 1048576))")
grep -q "not enough room on pb: it has $want free" <<<"$out" ||
	cfs_fail "a move into the held-back space said: $out (expected $want free)"
[ "$(getfattr --only-values -n user.chunkfs.store "$mnt/db/c")" = pa ] || cfs_fail "the chunk left pa"
truncate -s $(((room >> 20) - 1))M "$mnt/db/c"
sum=$(md5sum <"$mnt/db/c")
"$CFS_BIN/chunkfs" move "$mnt/db/c" pb >/dev/null || cfs_fail "a move within pb's room"
[ "$(md5sum <"$mnt/db/c")" = "$sum" ] || cfs_fail "the moved chunk differs"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"
