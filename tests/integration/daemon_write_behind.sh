#!/usr/bin/env bash
# daemon_write_behind.sh — buffered writes are answered before they reach
# the store (fs/fuse/data.c, "write-behind"), and nothing can tell, except the
# writer's wait:
#   1. a buffered write returns before the store has it (every device write
#      takes 60 ms here: fault backend delay_us), an O_DIRECT write and a
#      buffered one with -o writethrough do not;
#   2. a read that reaches the daemon (O_DIRECT) while the page's
#      write-behind is in flight returns the new bytes, also when the page
#      was rewritten twice in between, and rewrites land in order (every
#      second device write is 200 ms slower);
#   3. SEEK_DATA finds a page whose write-behind is in flight;
#   4. ftruncate into a sector whose write-behind is in flight: the cut bytes
#      read back as zeros (the zeroing lands after the write);
#   5. fsync waits for the file's write-behinds: every page written and
#      fsynced is there after a simulated power loss (volatile store: writes
#      the device had not flushed are dropped);
#   6. ENOSPC still fails the write() itself, and what was written before is
#      intact after a remount.
# uring_daemon_write_behind.sh runs it on FUSE over io_uring.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
delay_ms=60
# volatile: a write reaches the store's image when it completes, so writes
# land in the order they complete
slow="fault=volatile=1;op=write,every=1,delay_us=$((delay_ms * 1000));op=write,every=1,nth=2,delay_us=200000"
cfs_mkfs "$img" 64M

py() { python3 - "$mnt" "$delay_ms" "$@"; }

# ---- 1, 2, 3, 4: with every device write taking 60 ms --------------------------------
cfs_mount "$img" "$mnt" "$slow"
py <<'EOF' || cfs_fail "write-behind with a slow store"
import mmap, os, sys, time
mnt, delay = sys.argv[1], float(sys.argv[2]) / 1000
P = 8192

def page(tag, n):
    return (b"%-16s%08d" % (tag.encode(), n)).ljust(P, b".")

buf = mmap.mmap(-1, P)

def read_store(path, off):
    """Read P bytes at off from the daemon: an O_DIRECT open (while a
    buffered one is open, the kernel's direct path) never reads the page
    cache."""
    d = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        n = os.preadv(d, [buf], off)
    finally:
        os.close(d)
    return bytes(buf[:n])

# 1. buffered: answered before the store; O_DIRECT: after. The file is made
# a unit's size first: a small file's piece grows by copy, after its writes
# in flight (chunkfs(8), "Space"), which this is not about.
fd = os.open(mnt + "/a", os.O_CREAT | os.O_RDWR, 0o600)
os.ftruncate(fd, 1 << 20)
times = []
for i in range(5):
    t = time.monotonic()
    os.pwrite(fd, page("a", i), i * P)
    times.append(time.monotonic() - t)
times.sort()
print("# buffered write, median %.1f ms (store: %.0f ms)" % (times[2] * 1000, delay * 1000))
assert times[2] < delay / 2, "buffered writes waited for the store: %s" % times
dfd = os.open(mnt + "/d", os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o600)
m = mmap.mmap(-1, P)
m.write(page("d", 0))
t = time.monotonic()
os.pwritev(dfd, [m], 0)
took = time.monotonic() - t
print("# O_DIRECT write %.1f ms" % (took * 1000))
assert took >= delay * 0.9, "an O_DIRECT write was answered before the store: %.3f s" % took
os.close(dfd)

# 2. reads that reach the daemon see the write in flight (also over a
# sector written before), and overlapping writes land in order: every
# second device write takes 200 ms longer here, so of three writes of one
# page in flight, an unordered second or third would land last
for v in range(8):
    os.pwrite(fd, page("v", v), (3 + v % 2) * P)
    if v >= 4:
        os.pwrite(fd, page("v", v + 100), (3 + v % 2) * P)
        os.pwrite(fd, page("v", v + 200), (3 + v % 2) * P)
        v += 200
    got = read_store(mnt + "/a", (3 + v % 2) * P)
    assert got == page("v", v), "read %r, wrote %r" % (got[:24], page("v", v)[:24])
time.sleep(0.5)  # all on the store: nothing in flight to order a read
for p3, want in ((3, page("v", 206)), (4, page("v", 207))):
    got = read_store(mnt + "/a", p3 * P)
    assert got == want, "page %d: %r, wrote %r last" % (p3, got[:24], want[:24])

# 3. SEEK_DATA over a hole, to a page still in flight
os.pwrite(fd, page("s", 0), 64 * P)
at = os.lseek(fd, 40 * P, os.SEEK_DATA)
assert at == 64 * P, "SEEK_DATA found %d, expected %d" % (at, 64 * P)

# 4. ftruncate into the sector of a write in flight, then grow again
t = os.open(mnt + "/t", os.O_CREAT | os.O_RDWR, 0o600)
os.pwrite(t, b"T" * P, 0)
os.ftruncate(t, 1000)
os.ftruncate(t, P)
got = read_store(mnt + "/t", 0)
assert got == b"T" * 1000 + b"\0" * (P - 1000), \
    "after truncate to 1000 and back: %d non-zero bytes past 1000" % \
    sum(1 for b in got[1000:] if b)
os.close(t)

# every page of "a" as written last
for i in range(5):
    want = {3: page("v", 206), 4: page("v", 207)}.get(i, page("a", i))
    assert read_store(mnt + "/a", i * P) == want, "page %d" % i
os.close(fd)
EOF
cfs_umount "$mnt" || cfs_fail "unclean unmount"

# ---- 1 again: -o writethrough ------------------------------------------------------------
cfs_mount "$img" "$mnt" "writethrough,$slow"
py <<'EOF' || cfs_fail "writethrough"
import os, sys, time
mnt, delay = sys.argv[1], float(sys.argv[2]) / 1000
fd = os.open(mnt + "/w", os.O_CREAT | os.O_RDWR, 0o600)
t = time.monotonic()
os.pwrite(fd, b"w" * 8192, 0)
took = time.monotonic() - t
print("# writethrough: buffered write %.1f ms" % (took * 1000))
assert took >= delay * 0.9, "writethrough answered before the store: %.3f s" % took
EOF
cfs_umount "$mnt" || cfs_fail "unclean unmount"

# ---- 5. fsync covers the write-behinds: power loss after it ---------------------------------
cfs_mount "$img" "$mnt" "$slow"
pid=$CFS_MOUNT_PID
py <<'EOF' || cfs_fail "fsync then power loss: the load"
import os, sys
mnt = sys.argv[1]
fd = os.open(mnt + "/p", os.O_CREAT | os.O_RDWR, 0o600)
for i in range(24):
    os.pwrite(fd, (b"p%06d" % i).ljust(8192, b"p"), i * 8192)
os.fsync(fd)
os.close(fd)
EOF
kill -USR1 "$pid" # power loss: the store drops every write not flushed
for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
cfs_crash "$mnt"
cfs_clear_mount "$mnt"
cfs_mount "$img" "$mnt"
py <<'EOF' || cfs_fail "fsync then power loss: pages lost"
import os, sys
fd = os.open(sys.argv[1] + "/p", os.O_RDONLY)
for i in range(24):
    got = os.pread(fd, 8192, i * 8192)
    assert got == (b"p%06d" % i).ljust(8192, b"p"), "page %d: %r" % (i, got[:8])
EOF
cfs_umount "$mnt" || cfs_fail "unclean unmount"

# ---- 6. ENOSPC from write() itself ----------------------------------------------------------
small=$CFS_WORK/small.img
cfs_mkfs "$small" 16M
cfs_mount "$small" "$mnt"
py "$CFS_WORK/count" <<'EOF' || cfs_fail "ENOSPC"
import errno, os, sys
mnt = sys.argv[1]
fd = os.open(mnt + "/fill", os.O_CREAT | os.O_RDWR, 0o600)
n = 0
try:
    while True:
        os.pwrite(fd, (b"f%07d" % n).ljust(65536, b"f"), n * 65536)
        n += 1
except OSError as e:
    assert e.errno == errno.ENOSPC, "write: %s" % e
assert n > 16, "ENOSPC after only %d writes" % n
os.fsync(fd)  # nothing failed on the store
print("# ENOSPC from write() after %d x 64 KiB" % n)
with open(sys.argv[3], "w") as f:  # the store is full
    f.write(str(n))
EOF
cfs_umount "$mnt" || cfs_fail "unclean unmount"
cfs_mount "$small" "$mnt"
py "$CFS_WORK/count" <<'EOF' || cfs_fail "ENOSPC: data after remount"
import os, sys
mnt = sys.argv[1]
n = int(open(sys.argv[3]).read())
fd = os.open(mnt + "/fill", os.O_RDONLY)
for i in range(n):
    assert os.pread(fd, 65536, i * 65536) == (b"f%07d" % i).ljust(65536, b"f"), "chunk %d" % i
EOF
cfs_umount "$mnt" || cfs_fail "unclean unmount"
cfs_log "ok"
