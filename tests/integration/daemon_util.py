#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""daemon_util.py — system-call helpers for the chunkfs daemon's integration
tests (tests/integration/daemon_*.sh), for what the shell tools cannot do:
renameat2 flags, O_DIRECT with aligned (and deliberately misaligned) buffers,
and the write+fsync load of the crash tests with its checker.

Every subcommand exits 0 on success and prints the reason and exits 1 on a
mismatch, so the shell scripts only check the status.
"""
import ctypes
import errno
import hashlib
import mmap
import os
import random
import struct
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
# errno 95 is both; errorcode names it ENOTSUP, the tests say EOPNOTSUPP
errno.errorcode[errno.EOPNOTSUPP] = "EOPNOTSUPP"

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
AT_FDCWD = -100


def die(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def renameat2(old, new, flags):
    """Returns 0 or the errno."""
    f = libc.renameat2
    f.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    r = f(AT_FDCWD, old.encode(), AT_FDCWD, new.encode(), flags)
    return 0 if r == 0 else ctypes.get_errno()


def cmd_rename(args):
    """rename OLD NEW none|noreplace|exchange EXPECT (ok or an errno name)"""
    old, new, how, expect = args
    flags = {"none": 0, "noreplace": RENAME_NOREPLACE, "exchange": RENAME_EXCHANGE}[how]
    e = renameat2(old, new, flags)
    got = "ok" if e == 0 else errno.errorcode[e]
    if got != expect:
        die(f"renameat2({old}, {new}, {how}) = {got}, expected {expect}")


def pattern(tag, offset, length):
    """Deterministic bytes for (tag, offset): every 16-byte group names its
    absolute file offset, so a misplaced or stale block is recognisable."""
    out = bytearray(length)
    base = offset - offset % 16
    for pos in range(base, offset + length, 16):
        chunk = struct.pack("<QII", pos, tag & 0xffffffff, 0x43464b53)
        for i in range(16):
            p = pos + i
            if offset <= p < offset + length:
                out[p - offset] = chunk[i]
    return bytes(out)


def aligned_buf(length, misalign=0):
    """An mmap (page-aligned) buffer; a memoryview starting misalign bytes in."""
    m = mmap.mmap(-1, length + 4096)
    return m, memoryview(m)[misalign:misalign + length]


def free_buf(m, view):
    view.release()
    m.close()


def cmd_direct(args):
    """direct PATH BS COUNT TAG: O_DIRECT writes of COUNT blocks of BS bytes
    at BS-aligned offsets (in a shuffled order), then O_DIRECT and buffered
    reads of everything, compared with the pattern."""
    path, bs, count, tag = args[0], int(args[1]), int(args[2]), int(args[3])
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    m, buf = aligned_buf(bs)
    order = list(range(count))
    random.Random(tag).shuffle(order)
    for k in order:
        buf[:] = pattern(tag, k * bs, bs)
        n = os.pwritev(fd, [buf], k * bs)
        if n != bs:
            die(f"short O_DIRECT write {n} of {bs} at {k * bs}")
    for k in range(count):
        buf[:] = b"\xee" * bs
        n = os.preadv(fd, [buf], k * bs)
        if n != bs or bytes(buf) != pattern(tag, k * bs, bs):
            die(f"O_DIRECT read back of {bs} at {k * bs} differs (got {n} bytes)")
    os.close(fd)
    free_buf(m, buf)
    with open(path, "rb") as f:
        data = f.read()
    if data != pattern(tag, 0, bs * count)[: len(data)] or len(data) != bs * count:
        die(f"buffered read of {path} differs from the O_DIRECT writes")


def cmd_direct_check(args):
    """direct_check PATH BS COUNT TAG: only the O_DIRECT read-back (after a
    remount)."""
    path, bs, count, tag = args[0], int(args[1]), int(args[2]), int(args[3])
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    m, buf = aligned_buf(bs)
    for k in range(count):
        n = os.preadv(fd, [buf], k * bs)
        if n != bs or bytes(buf) != pattern(tag, k * bs, bs):
            die(f"{path}: block {k} of {bs} bytes differs after remount")
    os.close(fd)
    free_buf(m, buf)


def cmd_misaligned(args):
    """misaligned PATH ALIGN EXPECT: O_DIRECT I/O whose offset, length or
    buffer is off by 512 (or by 1 byte in memory) must give EXPECT (ok or
    EINVAL); aligned I/O must always work."""
    path, align, expect = args[0], int(args[1]), args[2]
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    m, buf = aligned_buf(2 * align)
    buf[:] = pattern(7, 0, 2 * align)
    if os.pwritev(fd, [buf], 0) != 2 * align:
        die("aligned O_DIRECT write failed")
    cases = []
    if align > 512:
        cases.append(("offset", 512, 2 * align, 0))
        cases.append(("length", 0, align + 512, 0))
    cases.append(("offset+1", 1, align, 0))
    cases.append(("length+1", 0, align + 1, 0))
    for name, off, length, mis in cases:
        for op in ("write", "read"):
            mm, b = aligned_buf(length, mis)
            try:
                if op == "write":
                    b[:] = pattern(9, off, length)
                    os.pwritev(fd, [b], off)
                else:
                    os.preadv(fd, [b], off)
                got = "ok"
            except OSError as e:
                got = errno.errorcode[e.errno]
            free_buf(mm, b)
            if got != expect:
                die(f"O_DIRECT {op} with misaligned {name} (align {align}) = {got}, expected {expect}")
    os.close(fd)
    free_buf(m, buf)


def cmd_unaligned(args):
    """unaligned PATH SIZE SEED: buffered and O_DIRECT writes at random byte
    offsets and lengths mirrored into a model; every read must match."""
    path, size, seed = args[0], int(args[1]), int(args[2])
    rng = random.Random(seed)
    model = bytearray(size)
    with open(path, "wb") as f:
        f.truncate(size)
    fdb = os.open(path, os.O_RDWR)
    fdd = os.open(path, os.O_RDWR | os.O_DIRECT)
    for i in range(300):
        off = rng.randrange(0, size - 1)
        length = rng.randrange(1, min(70000, size - off) + 1)
        data = bytes(rng.getrandbits(8) for _ in range(min(length, 64))) * (length // 64 + 1)
        data = data[:length]
        if i % 2:
            m, b = aligned_buf(length, rng.randrange(0, 8))
            b[:] = data
            n = os.pwritev(fdd, [b], off)
            free_buf(m, b)
        else:
            n = os.pwrite(fdb, data, off)
        if n != length:
            die(f"short write {n} of {length} at {off}")
        model[off:off + length] = data
        roff = rng.randrange(0, size - 1)
        rlen = rng.randrange(1, min(70000, size - roff) + 1)
        if i % 3 == 0:
            m, b = aligned_buf(rlen, 3)
            n = os.preadv(fdd, [b], roff)
            got = bytes(b[:n])
            free_buf(m, b)
        else:
            got = os.pread(fdb, rlen, roff)
        if got != bytes(model[roff:roff + rlen]):
            die(f"read of {rlen} at {roff} after {i + 1} writes differs from the model")
    os.close(fdb)
    os.close(fdd)
    with open(path, "rb") as f:
        if f.read() != bytes(model):
            die("final content differs from the model")
    with open(path + ".model", "wb") as f:
        f.write(model)


def cmd_interleave(args):
    """interleave PATH NPROC COUNT RECSIZE: NPROC processes write COUNT
    records each, record k of process i at (k * NPROC + i) * RECSIZE, so
    neighbouring records of different writers share sectors (concurrent
    read-modify-writes of one sector: no update may be lost). Half of the
    writers use O_DIRECT. Then every record is checked."""
    path, nproc, count, rec = args[0], int(args[1]), int(args[2]), int(args[3])
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
    pids = []
    for i in range(nproc):
        pid = os.fork()
        if pid == 0:
            rc = 0
            try:
                fd = os.open(path, os.O_RDWR | (os.O_DIRECT if i % 2 else 0))
                m, buf = aligned_buf(rec, 1)
                for k in range(count):
                    off = (k * nproc + i) * rec
                    buf[:] = pattern(i + 1, off, rec)
                    if os.pwritev(fd, [buf], off) != rec:
                        rc = 1
                os.close(fd)
            except OSError as e:
                print(f"writer {i}: {e}", file=sys.stderr)
                rc = 1
            os._exit(rc)
        pids.append(pid)
    for pid in pids:
        _, st = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(st) != 0:
            die("a writer failed")
    with open(path, "rb") as f:
        data = f.read()
    for k in range(count):
        for i in range(nproc):
            off = (k * nproc + i) * rec
            if data[off:off + rec] != pattern(i + 1, off, rec):
                die(f"record {k} of writer {i} at {off} lost or damaged")


def cmd_churn(args):
    """churn PATH SECONDS: 4 writers/readers (2 O_DIRECT) at random offsets
    while another thread truncates, fallocates and punches the same file:
    units unmapped under I/O in flight must neither crash the daemon nor
    fail the I/O (only ENOSPC would be acceptable)."""
    import threading
    path, seconds = args[0], float(args[1])
    end = time.time() + seconds
    errors = []
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
    falloc = libc.fallocate
    falloc.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]

    def io(i):
        fd = os.open(path, os.O_RDWR | (os.O_DIRECT if i % 2 else 0))
        m, buf = aligned_buf(65536)
        r = random.Random(i)
        while time.time() < end:
            n = r.choice((512, 4096, 65536))
            off = r.randrange(0, 8 << 20) // 512 * 512
            try:
                os.pwritev(fd, [buf[:n]], off)
                os.preadv(fd, [buf[:n]], off)
            except OSError as e:
                errors.append(f"io: {e}")
        os.close(fd)

    def shape():
        r = random.Random(99)
        fd = os.open(path, os.O_RDWR)
        while time.time() < end:
            k = r.randrange(3)
            off, ln = r.randrange(0, 8 << 20), r.randrange(1, 2 << 20)
            if k == 0:
                os.ftruncate(fd, off)
            elif k == 1:
                if falloc(fd, 0, off, ln):
                    errors.append(f"fallocate: {os.strerror(ctypes.get_errno())}")
            elif falloc(fd, 3, off, ln):   # PUNCH_HOLE | KEEP_SIZE
                errors.append(f"punch: {os.strerror(ctypes.get_errno())}")
        os.close(fd)

    ts = [threading.Thread(target=io, args=(i,)) for i in range(4)]
    ts.append(threading.Thread(target=shape))
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        die(f"{len(errors)} errors, first: {errors[0]}")
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


# ---- the crash load --------------------------------------------------------
# Records: 4096 bytes = header (magic, file number, sequence, length) +
# payload derived from them + sha256 of the rest. A record is acknowledged
# (one line "file seq" appended to the ack log, flushed) only after the
# fsync that covers it returned. Files are created under DIR/dNN/ with an
# fsync of the directory before their first acknowledgement, and a rename of
# a finished file is acknowledged after fsync of the directory.

REC = 4096
MAGIC = 0x52464b43


def record(fileno, seq):
    body = struct.pack("<IIQ", MAGIC, fileno, seq)
    seed = hashlib.sha256(body).digest()
    payload = (seed * (REC // 32))[: REC - len(body) - 32]
    rec = body + payload
    return rec + hashlib.sha256(rec).digest()


FUSE_SUPER_MAGIC = 0x65735546


def on_fuse(path):
    """statfs(path).f_type is FUSE's (f_type is the first field, a long)."""
    buf = ctypes.create_string_buffer(256)
    if libc.statfs(path.encode(), buf) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)
    return ctypes.c_long.from_buffer(buf).value == FUSE_SUPER_MAGIC


def mkdir_under(d):
    """mkdir d, fine if it exists; never its parent (os.makedirs would
    recreate a missing top directory under a vanished mount point)."""
    try:
        os.mkdir(d)
    except FileExistsError:
        pass


def cmd_load(args):
    """load DIR ACKLOG NFILES [SECONDS]: write+fsync records forever (or for
    SECONDS), mixing O_DIRECT and buffered files and 2 KiB/4 KiB/16 KiB
    fsync batches."""
    top, acklog, nfiles = args[0], args[1], int(args[2])
    seconds = float(args[3]) if len(args) > 3 else 1e9
    ack = open(acklog, "a", buffering=1)
    rng = random.Random(os.getpid())
    # Records are acknowledged only while DIR is on the FUSE mount this load
    # started on. A load that starts late (python on a busy machine can take
    # seconds) or outlives its mount would otherwise resolve its paths in
    # the directory under the mount point, on the host filesystem, where
    # fsync succeeds and the next mount hides everything: acknowledged and
    # "lost". The tests keep the dead mount in place until the load ended
    # (cfs_crash), so this is the second line of defence.
    if not on_fuse(top):
        die(f"{top} is not on a FUSE mount: not writing under a mount point")
    mount_dev = os.stat(top).st_dev

    def still_mounted():
        if os.stat(top).st_dev != mount_dev:
            sys.exit(0)
    fds, seqs = {}, {}
    end = time.time() + seconds
    m, buf = aligned_buf(4 * REC)
    gen = 0
    while time.time() < end:
        f = rng.randrange(nfiles)
        if f not in fds:
            d = os.path.join(top, "d%02d" % (f % 4))
            mkdir_under(d)
            name = os.path.join(d, "chunk%03d" % f)
            flags = os.O_RDWR | os.O_CREAT | (os.O_DIRECT if f % 2 else 0)
            fd = os.open(name, flags, 0o640)
            dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(dfd)
            os.close(dfd)
            fds[f] = fd
            # Continue after the last valid record: a crash may have left an
            # unacknowledged tail (zeros or a partial record) to overwrite.
            seq = 0
            with open(name, "rb") as rf:
                while rf.read(REC) == record(f, seq):
                    seq += 1
            seqs[f] = seq
        fd = fds[f]
        n = rng.choice((1, 1, 2, 4))
        recs = b"".join(record(f, seqs[f] + i) for i in range(n))
        buf[: len(recs)] = recs
        w = os.pwritev(fd, [buf[: len(recs)]], seqs[f] * REC)
        if w != len(recs):
            die(f"short write {w}")
        if rng.random() < 0.5:
            os.fdatasync(fd)
        else:
            os.fsync(fd)
        still_mounted()
        for i in range(n):
            ack.write("%d %d\n" % (f, seqs[f] + i))
        seqs[f] += n
        gen += 1
        if gen % 50 == 0:
            # metadata churn: a renamed, fsynced marker file per 50 batches
            d = os.path.join(top, "meta")
            mkdir_under(d)
            tmp = os.path.join(d, "tmp")
            with open(tmp, "wb") as t:
                t.write(struct.pack("<Q", gen) * 64)
                t.flush()
                os.fsync(t.fileno())
            os.rename(tmp, os.path.join(d, "gen%06d" % gen))
            dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(dfd)
            os.close(dfd)
            still_mounted()
            ack.write("meta %d\n" % gen)


def cmd_verify(args):
    """verify DIR ACKLOG: every acknowledged record is present and intact,
    every file holds only whole valid records (or zeros past the
    acknowledged ones, from a torn but unacknowledged write), and every
    acknowledged marker file exists with its content."""
    top, acklog = args
    last = {}
    metas = []
    with open(acklog) as f:
        for line in f:
            p = line.split()
            if len(p) != 2:
                continue  # a torn last line from the kill
            if p[0] == "meta":
                metas.append(int(p[1]))
            else:
                a, b = int(p[0]), int(p[1])
                last[a] = max(last.get(a, -1), b)
    checked = 0
    for fno, top_seq in last.items():
        name = os.path.join(top, "d%02d" % (fno % 4), "chunk%03d" % fno)
        try:
            with open(name, "rb") as f:
                data = f.read()
        except OSError as e:
            die(f"{name}: {e} (acknowledged records up to {top_seq})")
        if len(data) < (top_seq + 1) * REC:
            die(f"{name}: {len(data)} bytes, but records up to {top_seq} were acknowledged")
        for s in range(len(data) // REC):
            got = data[s * REC:(s + 1) * REC]
            if got == record(fno, s):
                checked += 1
                continue
            if s <= top_seq:
                die(f"{name}: acknowledged record {s} is damaged")
            # Unacknowledged: each 512-byte sector is the record's or zeros
            # (data written but its written-state not yet committed), never
            # anybody else's bytes.
            want = record(fno, s)
            for o in range(0, REC, 512):
                if got[o:o + 512] not in (want[o:o + 512], bytes(512)):
                    die(f"{name}: unacknowledged record {s} holds foreign bytes at {o}")
    for g in metas:
        name = os.path.join(top, "meta", "gen%06d" % g)
        try:
            with open(name, "rb") as f:
                if f.read() != struct.pack("<Q", g) * 64:
                    die(f"{name}: content differs")
        except OSError as e:
            die(f"{name}: {e} (acknowledged)")
    print(f"verified {checked} records in {len(last)} files, {len(metas)} markers")


def cmd_seek(args):
    """seek PATH WHENCE OFFSET EXPECT: lseek SEEK_DATA/SEEK_HOLE result
    (a number or ENXIO)."""
    path, whence, off, expect = args[0], args[1], int(args[2]), args[3]
    fd = os.open(path, os.O_RDONLY)
    w = {"data": os.SEEK_DATA, "hole": os.SEEK_HOLE}[whence]
    try:
        got = str(os.lseek(fd, off, w))
    except OSError as e:
        got = errno.errorcode[e.errno]
    os.close(fd)
    if got != expect:
        die(f"lseek({path}, {off}, SEEK_{whence.upper()}) = {got}, expected {expect}")


def cmd_xattr_errno(args):
    """xattr_errno get|set|list|remove PATH NAME EXPECT"""
    op, path, name, expect = args
    try:
        if op == "get":
            os.getxattr(path, name)
        elif op == "set":
            os.setxattr(path, name, b"v")
        elif op == "remove":
            os.removexattr(path, name)
        else:
            os.listxattr(path)
        got = "ok"
    except OSError as e:
        got = errno.errorcode[e.errno]
    if got != expect:
        die(f"{op}xattr({path}, {name}) = {got}, expected {expect}")


def cmd_errno(args):
    """errno EXPECT CALL ARGS...: os.CALL(*ARGS) must fail with EXPECT
    (or succeed if EXPECT is ok)."""
    expect, call = args[0], args[1]
    conv = [int(a, 0) if a.lstrip("-").isdigit() or a.startswith("0x") else a for a in args[2:]]
    try:
        getattr(os, call)(*conv)
        got = "ok"
    except OSError as e:
        got = errno.errorcode[e.errno]
    if got != expect:
        die(f"os.{call}{tuple(args[2:])} = {got}, expected {expect}")


# ---- superblock surgery for the bad-mount tests ------------------------------
# Offsets from fs/format/format.h (struct cfs_dsb): version u32 @8, incompat u64 @32,
# flags u64 @40, checksum u64 @4088 = XXH3-64 (seed 0) of the 4096-byte block
# with the checksum field zero. Both slots (0 and 4096) are patched.

SB_FIELDS = {"version": (8, "<I"), "incompat": (32, "<Q"), "flags": (40, "<Q")}


def sb_checksum(block):
    x = ctypes.CDLL("libxxhash.so.0")
    x.XXH3_64bits.restype = ctypes.c_uint64
    x.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    b = bytearray(block)
    b[4088:4096] = bytes(8)
    return x.XXH3_64bits(bytes(b), 4096)


def cmd_sbpatch(args):
    """sbpatch IMAGE FIELD VALUE|or:BITS: set a superblock field in both
    slots and fix the checksums (FIELD: version, incompat, flags)."""
    img, field, value = args
    off, fmt = SB_FIELDS[field]
    with open(img, "r+b") as f:
        for slot in (0, 4096):
            f.seek(slot)
            b = bytearray(f.read(4096))
            if value.startswith("or:"):
                v = struct.unpack_from(fmt, b, off)[0] | int(value[3:], 0)
            else:
                v = int(value, 0)
            struct.pack_into(fmt, b, off, v)
            struct.pack_into("<Q", b, 4088, sb_checksum(b))
            f.seek(slot)
            f.write(b)


def cmd_sbcorrupt(args):
    """sbcorrupt IMAGE: flip a byte of the label in both slots (magic intact,
    checksums now wrong)."""
    with open(args[0], "r+b") as f:
        for slot in (0, 4096):
            f.seek(slot + 100)
            c = f.read(1)
            f.seek(slot + 100)
            f.write(bytes([c[0] ^ 0x5a]))


def main():
    cmds = {k[4:]: v for k, v in globals().items() if k.startswith("cmd_")}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print("usage: daemon_util.py {" + ",".join(sorted(cmds)) + "} ...", file=sys.stderr)
        sys.exit(2)
    cmds[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
