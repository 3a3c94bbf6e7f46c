#!/usr/bin/env bash
# ram_reuse.sh — on a RAM mount, memory freed by one file and given to
# another is never seen through the first, while requests are in flight: one
# writer fills a file with 0xAB and truncates it to nothing, over and over
# (its units are freed at once and taken again); on a second file, owners
# punch their 64 KiB blocks and rewrite them with a pattern that names the
# block and the round, checking each, while readers read blocks at random
# with O_DIRECT and buffered. A reader may see zeros or some round of the
# block's own pattern (a mix of them, sector by sector, when the read races
# a rewrite), never 0xAB and never another block. RAM reads of
# written data are answered straight from the store's memory (fs/fuse/data.c,
# ram_read): this is what the I/O reference held until the reply is for.
# Then the same with dio_align=0 (unaligned requests on the general path).
# The mount is little larger than the two files (12 MiB for 2 x 4 MiB), so
# a freed unit is taken again soon rather than after the allocator's rotor
# went round the whole store (and not so small that units held back for
# reads in flight make it run out of space).
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3

ram=$CFS_WORK/ram
stress() {
	python3 - "$ram" 8 <<'PYEOF'
import ctypes, mmap, os, random, struct, sys, threading, time
d, seconds = sys.argv[1], float(sys.argv[2])
end = time.time() + seconds
libc = ctypes.CDLL(None, use_errno=True)
B, NB = 65536, 64                          # 64 blocks of one 64 KiB unit each
errors, checks = [], [0]
lock = threading.Lock()

def buf(n):
    m = mmap.mmap(-1, n)
    return m, memoryview(m)

def pattern(block, rnd):
    return struct.pack("<QQ", block, rnd) * (B // 16)

Z512 = bytes(512)

def classify(data, block):
    """A read racing a punch or a rewrite of the same block may see each
    sector before or after it (zeros, or some round of this block's
    pattern), but never another file's bytes or another block's."""
    i = data.find(b"\xab" * 16)  # a pattern's round number may hold one 0xAB byte
    if i >= 0:
        return "block %d: 0xAB of the other file at +%d" % (block, i)
    for off in range(0, B, 512):
        sec = data[off:off + 512]
        if sec == Z512:
            continue
        blk, rnd = struct.unpack_from("<QQ", sec)
        if blk != block or sec != struct.pack("<QQ", blk, rnd) * 32:
            return "block %d: sector +%d is not its own (block %d)" % (block, off, blk)
    return None

def filler():
    m, v = buf(B)
    m[:] = b"\xab" * B
    while time.time() < end:
        fd = os.open(d + "/x", os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
        for i in range(NB):
            os.pwritev(fd, [v], i * B)
        os.ftruncate(fd, 0)
        os.close(fd)

def owner(first):
    m, v = buf(B)
    fd = os.open(d + "/y", os.O_RDWR | os.O_DIRECT)
    rnd = 0
    while time.time() < end:
        rnd += 1
        for k in range(first, NB, 2):
            if libc.fallocate(fd, 3, k * B, B):
                errors.append("punch: %s" % os.strerror(ctypes.get_errno()))
            os.preadv(fd, [v], k * B)
            if bytes(v) != bytes(B):
                errors.append("block %d not zero after its punch" % k)
            m[:] = pattern(k, rnd)
            os.pwritev(fd, [v], k * B)
            os.preadv(fd, [v], k * B)
            if bytes(v) != pattern(k, rnd):
                errors.append("block %d round %d read back wrong" % (k, rnd))
    os.close(fd)

def reader(direct):
    m, v = buf(B)
    fd = os.open(d + "/y", os.O_RDONLY | (os.O_DIRECT if direct else 0))
    r = random.Random(direct)
    while time.time() < end:
        k = r.randrange(NB)
        if direct:
            n = os.preadv(fd, [v], k * B)
            data = bytes(v[:n])
        else:
            data = os.pread(fd, B, k * B)
        if len(data) == B:
            why = classify(data, k)
            if why:
                errors.append(why)
            with lock:
                checks[0] += 1
    os.close(fd)

os.close(os.open(d + "/y", os.O_RDWR | os.O_CREAT, 0o644))
os.truncate(d + "/y", NB * B)
def guarded(fn, *args):
    try:
        fn(*args)
    except OSError as e:
        errors.append("%s: %s" % (fn.__name__, e))

ts = [threading.Thread(target=guarded, args=(filler,))]
ts += [threading.Thread(target=guarded, args=(owner, i)) for i in (0, 1)]
ts += [threading.Thread(target=guarded, args=(reader, i)) for i in (1, 1, 0)]
for t in ts:
    t.start()
for t in ts:
    t.join()
if errors:
    sys.exit("FAIL: %d errors, first: %s" % (len(errors), errors[0]))
if checks[0] < 1000:
    sys.exit("FAIL: only %d reads checked" % checks[0])
print("# %d reads checked" % checks[0])
PYEOF
}

for o in ram,size=12M ram,size=12M,dio_align=0; do
	cfs_log "-o $o: 8 s of reuse under reads"
	cfs_mount none "$ram" "$o"
	stress || cfs_fail "stress with -o $o"
	cfs_umount "$ram" || cfs_fail "unmount"
done
cfs_log "ok"
