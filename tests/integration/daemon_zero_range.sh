#!/usr/bin/env bash
# daemon_zero_range.sh — fallocate(FALLOC_FL_ZERO_RANGE), with and without
# KEEP_SIZE (fs/meta/namespace.h, cfs_ns_fallocate): the range reads as
# zeros at once and after a remount, the bytes around it are untouched,
# whole sectors are only marked unwritten (the store image still holds their
# old bytes: no data I/O), cut sectors at the ends are zeroed, the size
# grows past the end only without KEEP_SIZE; COLLAPSE_RANGE and INSERT_RANGE
# get EOPNOTSUPP and change nothing. Store and RAM mounts;
# uring_daemon_zero_range.sh runs it on FUSE over io_uring.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3 fallocate

img=$CFS_WORK/store.img
cfs_mkfs "$img" 64M
cfs_mount "$img" "$CFS_WORK/store"
cfs_mount ram "$CFS_WORK/ram" ram,size=64M

check() { # MNT PHASE: the model kept in $CFS_WORK/model-<name>
	python3 - "$1" "$2" <<'PY'
import ctypes, errno, os, sys
mnt, phase = sys.argv[1], sys.argv[2]
path = os.path.join(mnt, "chunk")
libc = ctypes.CDLL(None, use_errno=True)
KEEP, PUNCH, COLLAPSE, ZERO, INSERT = 0x01, 0x02, 0x08, 0x10, 0x20
MIB = 1 << 20

def falloc(fd, mode, off, n):
    if libc.fallocate(fd, mode, ctypes.c_long(off), ctypes.c_long(n)) != 0:
        return ctypes.get_errno()
    return 0

def marker(n):
    # every 16 bytes "ZR@<offset:013d>", findable in the store image
    return b"".join(b"ZR@%013d" % o for o in range(0, n, 16))

def expect(fd, model, what):
    got = os.pread(fd, len(model) + 4096, 0)
    if got != bytes(model):
        bad = next((i for i in range(min(len(got), len(model))) if got[i] != model[i]), None)
        sys.exit("%s: size %d (want %d), first difference at %s" % (what, len(got), len(model), bad))

if phase == "write":
    model = bytearray(marker(MIB))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(fd, bytes(model), 0)
    os.fsync(fd)
    # 1. whole sectors (256 KiB at 256 KiB) and cut ones (4096+100 .. 12288-7)
    for off, n in ((256 << 10, 256 << 10), (4096 + 100, 8192 - 107)):
        assert falloc(fd, ZERO, off, n) == 0, "ZERO_RANGE %d+%d" % (off, n)
        model[off:off + n] = bytes(n)
    expect(fd, model, "after ZERO_RANGE")
    # 2. past the end: KEEP_SIZE keeps the size, plain ZERO_RANGE extends it
    assert falloc(fd, ZERO | KEEP, MIB - 4096, 64 << 10) == 0
    model[MIB - 4096:] = bytes(4096)
    expect(fd, model, "ZERO_RANGE|KEEP_SIZE past the end")
    assert falloc(fd, ZERO, MIB - 100, 8192) == 0
    model[MIB - 100:] = bytes(100)
    model += bytes(8192 - 100)
    expect(fd, model, "ZERO_RANGE past the end")
    # 3. modes that move data: refused, nothing changed
    for mode in (COLLAPSE, INSERT):
        e = falloc(fd, mode, 64 << 10, 64 << 10)
        assert e == errno.EOPNOTSUPP, "mode %#x: %s" % (mode, os.strerror(e))
    expect(fd, model, "after the refused modes")
    os.fsync(fd)
    os.close(fd)
    open(os.path.join(os.environ["CFS_WORK"], "model-" + os.path.basename(mnt)), "wb").write(model)
else:
    model = open(os.path.join(os.environ["CFS_WORK"], "model-" + os.path.basename(mnt)), "rb").read()
    fd = os.open(path, os.O_RDONLY)
    expect(fd, bytearray(model), "after remount")
    os.close(fd)
print("%s %s: content as modelled" % (mnt, phase))
PY
}

export CFS_WORK
check "$CFS_WORK/store" write || cfs_fail "ZERO_RANGE on the store mount"
check "$CFS_WORK/ram" write || cfs_fail "ZERO_RANGE on the RAM mount"

# No data I/O for the whole sectors: their old bytes are still in the image.
cfs_umount "$CFS_WORK/store" || cfs_fail "unmount"
grep -c -a -F "ZR@0000000300000" "$img" >/dev/null ||
	cfs_fail "the zeroed whole sectors were written (their old bytes are gone from the image)"
cfs_mount "$img" "$CFS_WORK/store"
check "$CFS_WORK/store" remount || cfs_fail "ZERO_RANGE after remount"
cfs_umount "$CFS_WORK/store" || cfs_fail "unmount"
"$CFS_BIN/fsck.chunkfs" -n "$img" >/dev/null || cfs_fail "fsck after ZERO_RANGE"
