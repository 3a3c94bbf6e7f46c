#!/usr/bin/env bash
# daemon_mmap_direct.sh — shared mmap next to O_DIRECT (fs/fuse/ops.c, "page
# cache"; FUSE_DIRECT_IO_ALLOW_MMAP, fs/fuse/proto_ext.c): one process maps
# the file (MAP_SHARED) and reads and writes the mapping, another reads and
# writes overlapping ranges with O_DIRECT; each sees the other's last write,
# content checked against a model, as on ext4 (a mapped store is written
# back before an O_DIRECT read or write of its range; an O_DIRECT write that
# has completed shows in the mapping). Three ways in:
#   direct-first  the O_DIRECT open comes first: every later open is
#                 FOPEN_DIRECT_IO, the mapping is of a buffered descriptor;
#   direct-fd     the mapping is of a descriptor opened with O_DIRECT;
#   cached-first  the mapped buffered open comes first (the kernel's own
#                 direct path for the O_DIRECT one).
# Then the race: mapped readers while asynchronous O_DIRECT writes land
# (tests/progs/dio_coherence.c, modes mmap and mmap-cached). Store and RAM
# mounts; uring_daemon_mmap_direct.sh runs it on FUSE over io_uring.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3
prog=$CFS_BIN/tests/progs/dio_coherence
[ -x "$prog" ] || cfs_fail "needs $prog (make bench-build or make check builds it)"

img=$CFS_WORK/store.img
cfs_mkfs "$img" 256M
cfs_mount "$img" "$CFS_WORK/store"
cfs_mount ram "$CFS_WORK/ram" ram,size=128M

for mnt in "$CFS_WORK/store" "$CFS_WORK/ram"; do
	for how in direct-first direct-fd cached-first; do
		cfs_log "mount $mnt: $how"
		python3 - "$mnt/chunk-$how" "$how" <<'PY' || cfs_fail "mmap next to O_DIRECT ($how) on $mnt"
import mmap, os, random, struct, sys

path, how = sys.argv[1], sys.argv[2]
SIZE = 4 << 20
PAGE = 4096
rounds = 150
rng = random.Random(25)

def aligned(data):
    b = mmap.mmap(-1, len(data))
    b[:] = data
    return b

def send(fd, *words):
    os.write(fd, struct.pack("<4q", *(list(words) + [0] * (4 - len(words)))))

def recv(fd, n):
    buf = b""
    while len(buf) < n:
        part = os.read(fd, n - len(buf))
        if not part:
            sys.exit("the O_DIRECT process went away")
        buf += part
    return buf

to_child_r, to_child_w = os.pipe()
to_parent_r, to_parent_w = os.pipe()
pid = os.fork()
if pid == 0:
    # The O_DIRECT process: W off len byte -> write; R off len -> the bytes.
    os.close(to_child_w); os.close(to_parent_r)
    if how == "direct-first":
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
        os.pwritev(fd, [aligned(b"\0" * SIZE)], 0)
        os.fsync(fd)
    send(to_parent_w, 1)
    recv(to_child_r, 32)  # the mapping exists
    if how != "direct-first":
        fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    send(to_parent_w, 1)
    while True:
        op, off, n, byte = struct.unpack("<4q", recv(to_child_r, 32))
        if op == 0:
            os._exit(0)
        if op == 1:
            assert os.pwritev(fd, [aligned(bytes([byte]) * n)], off) == n
            send(to_parent_w, n)
        else:
            b = mmap.mmap(-1, n)
            assert os.preadv(fd, [b], off) == n
            os.write(to_parent_w, bytes(b))

os.close(to_child_r); os.close(to_parent_w)
try:
    recv(to_parent_r, 32)
    if how == "direct-first":
        fd = os.open(path, os.O_RDWR)
    elif how == "direct-fd":
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
        os.pwritev(fd, [aligned(b"\0" * SIZE)], 0)
    else:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        os.pwrite(fd, b"\0" * SIZE, 0)
    try:
        m = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    except OSError as e:
        sys.exit("mmap(MAP_SHARED) of %s: %s" % (how, e))
    send(to_child_w, 1)
    recv(to_parent_r, 32)
    model = bytearray(SIZE)
    for r in range(rounds):
        off = rng.randrange(0, SIZE // PAGE - 64) * PAGE
        n = rng.randrange(1, 64) * PAGE
        # 1. The mapping writes (no msync); O_DIRECT reads an overlapping range.
        tag = 1 + (2 * r) % 250
        m[off:off + n] = bytes([tag]) * n
        model[off:off + n] = bytes([tag]) * n
        roff = max(0, off - rng.randrange(0, 16) * PAGE)
        rn = min(SIZE - roff, n + rng.randrange(1, 32) * PAGE)
        send(to_child_w, 2, roff, rn)
        got = recv(to_parent_r, rn)
        if got != bytes(model[roff:roff + rn]):
            bad = next(i for i in range(rn) if got[i] != model[roff + i])
            sys.exit("round %d: O_DIRECT read at %d shows %d, the mapping wrote %d"
                     % (r, roff + bad, got[bad], model[roff + bad]))
        # 2. O_DIRECT writes an overlapping range; the mapping reads it.
        tag = 2 + (2 * r) % 250
        woff = min(SIZE - PAGE, off + rng.randrange(0, 32) * PAGE)
        wn = min(SIZE - woff, rng.randrange(1, 64) * PAGE)
        send(to_child_w, 1, woff, wn, tag)
        recv(to_parent_r, 32)
        model[woff:woff + wn] = bytes([tag]) * wn
        lo, hi = min(off, woff), max(off + n, woff + wn)
        got = m[lo:hi]
        if got != bytes(model[lo:hi]):
            bad = next(i for i in range(hi - lo) if got[i] != model[lo + i])
            sys.exit("round %d: the mapping at %d shows %d after an O_DIRECT write of %d"
                     % (r, lo + bad, got[bad], model[lo + bad]))
    m.close()
    os.close(fd)
    print("%s: %d rounds, content as written by both" % (how, rounds))
finally:
    send(to_child_w, 0)
    os.waitpid(pid, 0)
PY
	done
	for mode in mmap mmap-cached; do
		"$prog" "$mnt/race-$mode" 3 2 "$mode" || cfs_fail "stale mapping after an O_DIRECT write ($mode) on $mnt"
	done
done
