#!/usr/bin/env bash
# daemon_space_wait.sh — a full store whose only space is units a punch gave
# back while a read of the same file was in flight (fs/DAEMON.md, "Waiting
# for space"): the units come back when that read ends, and a write or
# fallocate that asks meanwhile waits for them instead of failing with
# ENOSPC. With nothing coming back, ENOSPC at once. Every read of the store
# is delayed (-o fault=...,delay_us) so the read is surely in flight.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
cfs_mkfs "$img" 32M
cfs_mount "$img" "$mnt" "fault=op=read,every=1,delay_us=300000"

python3 - "$mnt" <<'EOF' || cfs_fail "space wait"
import ctypes, errno, mmap, os, sys, threading, time
mnt = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
PUNCH_KEEP = 0x03
MIB = 1 << 20

def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)

buf = mmap.mmap(-1, MIB)
buf.write(b"x" * MIB)
a = os.open(os.path.join(mnt, "a"), os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
units = 0
while True:
    try:
        os.pwritev(a, [buf], units * MIB)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            fail(f"filling: {e}")
        break
    units += 1
os.fsync(a)
b = os.open(os.path.join(mnt, "b"), os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
c = os.open(os.path.join(mnt, "c"), os.O_RDWR | os.O_CREAT, 0o644)
t0 = time.time()
try:
    os.pwritev(b, [buf], 0)
    fail("a full store took a write")
except OSError as e:
    if e.errno != errno.ENOSPC:
        fail(f"full store: {e}")
if time.time() - t0 > 0.5:
    fail(f"ENOSPC with nothing coming back took {time.time() - t0:.2f} s")

def punch_under_read(what):
    """Punch a's first units while a read of a is in flight, then `what`."""
    rbuf = mmap.mmap(-1, 4096)
    got = []
    t = threading.Thread(target=lambda: got.append(os.preadv(a, [rbuf], MIB)))
    t.start()
    time.sleep(0.05)  # the read waits in the daemon (delay_us)
    if libc.fallocate(a, PUNCH_KEEP, 0, 4 * MIB):
        fail(f"punch: {os.strerror(ctypes.get_errno())}")
    if not t.is_alive():
        fail("the read was not in flight during the punch")
    t1 = time.time()
    try:
        what()
    except OSError as e:
        fail(f"{what.__name__} on units coming back: {e}")
    t.join()
    return time.time() - t1

def write_b():
    os.pwritev(b, [buf], 0)

def fallocate_c():
    if libc.fallocate(c, 0, 0, 2 * MIB):
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

waited = punch_under_read(write_b)
print(f"{units} units filled; a write waited {waited:.2f} s for the punched units")
# Refill a's punched units so the store is full again, then the same for
# fallocate.
for u in range(1, 4):
    os.pwritev(a, [buf], u * MIB)
os.fsync(a)
waited = punch_under_read(fallocate_c)
print(f"a fallocate waited {waited:.2f} s")
if os.fstat(c).st_size != 2 * MIB:
    fail("fallocate size")
rbuf = mmap.mmap(-1, 4096)
os.preadv(b, [rbuf], 0)
if rbuf[:] != b"x" * 4096:
    fail("b's bytes")
EOF
cfs_umount "$mnt" || cfs_fail "unclean unmount"
"$CFS_BIN/fsck.chunkfs" -n "$img" >"$CFS_WORK/fsck.out" 2>&1 || {
	cat "$CFS_WORK/fsck.out"
	cfs_fail "fsck after the waits"
}
cfs_log "ok"
