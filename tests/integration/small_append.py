#!/usr/bin/env python3
"""small_append.py — loads and checks of tests/integration/daemon_small_append.sh.

  append DIR ACKDIR WRITERS RECORDS FSYNC_EVERY [crash]
      WRITERS processes each append RECORDS small records (40-299 bytes) to
      DIR/wN and to DIR/shared (O_APPEND), fsync both every FSYNC_EVERY
      records and then note the record count in ACKDIR/wN (on the local
      disk, fsynced): what a crash may not lose. Every 97 records a writer
      reads its whole file back through an O_DIRECT open (the daemon, not
      the page cache) and checks every record it has written. With "crash",
      any error once the file named by $CRASH_FLAG exists ends a writer
      quietly (the daemon was killed: what a dying daemon's kernel answers
      varies, ECANCELED over io_uring included); before it, only a
      disconnect does.
  verify DIR ACKDIR WRITERS [RECORDS]
      Every record up to the noted count is in DIR/wN, whole and in order,
      and each writer's records in DIR/shared are in order; with RECORDS
      (after a clean unmount) exactly RECORDS records each and nothing else.
  mixed PATH WANT SEED OPS
      Random writes (1 byte to 9 KiB, any offset, mostly small), truncates,
      punched holes and zeroed ranges, O_TRUNC reopens, last closes, fsyncs,
      buffered and O_DIRECT reads checked against a copy in memory, which
      goes to WANT at the end.
  compare PATH WANT
      PATH holds exactly the bytes of WANT.
  readback PATH RECORDS
      Appends RECORDS records to PATH (buffered) and after each one reads
      the 4 KiB block holding its end through an O_DIRECT open (a READ the
      daemon answers while the block is held) and checks the record's
      bytes there.
"""
import ctypes
import errno
import mmap
import os
import random
import sys

HDR = 15  # b"R" + writer (2) + seq (8) + length (4)
LIBC = ctypes.CDLL(None, use_errno=True)
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE = 0x01, 0x02, 0x10


def fallocate(fd, mode, off, length):
    if LIBC.fallocate(fd, mode, ctypes.c_long(off), ctypes.c_long(length)):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
GONE = (errno.ENOTCONN, errno.ECONNABORTED, errno.EIO, errno.ENODEV)


def record(w, s):
    n = 40 + (s * 37 + w * 11) % 260
    body = bytes([65 + (s + w) % 26]) * (n - HDR - 1)
    return b"R%02d%08d%04d" % (w, s, n) + body + b"\n"


def parse(data):
    """Whole records from the start of data: [(writer, seq)], end offset."""
    out, pos = [], 0
    while pos + HDR <= len(data):
        h = data[pos:pos + HDR]
        if h[:1] != b"R" or not h[1:].isdigit():
            break
        w, s, n = int(h[1:3]), int(h[3:11]), int(h[11:15])
        if pos + n > len(data) or data[pos:pos + n] != record(w, s):
            break
        out.append((w, s))
        pos += n
    return out, pos


def read_direct(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        size = os.fstat(fd).st_size
        buf = mmap.mmap(-1, 1 << 20)
        parts, off = [], 0
        while off < size:
            n = os.preadv(fd, [buf], off)
            if n <= 0:
                break
            parts.append(bytes(buf[:n]))
            off += n
        return b"".join(parts)
    finally:
        os.close(fd)


def note(path, count):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.write(fd, b"%d\n" % count)
    os.fsync(fd)
    os.close(fd)


def writer(d, ackdir, w, records, every, crash):
    own = os.path.join(d, "w%d" % w)
    try:
        fo = os.open(own, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
        fs = os.open(os.path.join(d, "shared"), os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
        for s in range(records):
            r = record(w, s)
            if os.write(fo, r) != len(r) or os.write(fs, r) != len(r):
                if crash:
                    return 0  # the daemon died between the write's requests
                raise SystemExit("w%d: short write" % w)
            if (s + 1) % every == 0 or s + 1 == records:
                os.fsync(fo)
                os.fsync(fs)
                note(os.path.join(ackdir, "w%d" % w), s + 1)
            if s % 97 == 96:
                got, _ = parse(read_direct(own))
                if got != [(w, i) for i in range(s + 1)]:
                    raise SystemExit("w%d: O_DIRECT read after record %d: %d records back, "
                                     "first wrong at %d" % (w, s, len(got), next(
                                         (i for i, x in enumerate(got) if x != (w, i)),
                                         len(got))))
    except OSError as e:
        killed = os.path.exists(os.environ.get("CRASH_FLAG", "/nonexistent"))
        if crash and (killed or e.errno in GONE):
            return 0
        raise
    return 0


def append(d, ackdir, writers, records, every, crash):
    pids = []
    for w in range(writers):
        pid = os.fork()
        if pid == 0:
            rc = 1
            try:
                rc = writer(d, ackdir, w, records, every, crash)
            except SystemExit as e:
                print(e, file=sys.stderr)
            except BaseException as e:  # noqa: BLE001 - reported, child exits
                print("w%d: %r" % (w, e), file=sys.stderr)
            finally:
                os._exit(rc)
        pids.append(pid)
    bad = 0
    for pid in pids:
        _, st = os.waitpid(pid, 0)
        bad += os.waitstatus_to_exitcode(st) != 0
    return 1 if bad else 0


def acked(ackdir, w):
    try:
        return int(open(os.path.join(ackdir, "w%d" % w)).read())
    except FileNotFoundError:
        return 0


def verify(d, ackdir, writers, records):
    ok = True
    seen = {w: [] for w in range(writers)}
    data = open(os.path.join(d, "shared"), "rb").read()
    got, end = parse(data)
    for w, s in got:
        seen.setdefault(w, []).append(s)
    if records is not None and end != len(data):
        print("shared: %d bytes after the last whole record at %d" % (len(data) - end, end))
        ok = False
    for w in range(writers):
        want = acked(ackdir, w) if records is None else records
        own = open(os.path.join(d, "w%d" % w), "rb").read()
        recs, end = parse(own)
        n = len(recs)
        if recs != [(w, i) for i in range(n)]:
            print("w%d: records out of order" % w)
            ok = False
        if n < want or (records is not None and (n != records or end != len(own))):
            print("w%d: %d records (%d bytes of %d), want %s%d" %
                  (w, n, end, len(own), "" if records is not None else ">= ", want))
            ok = False
        s = seen[w]
        if s != list(range(len(s))) or len(s) < want or (records is not None and len(s) != records):
            print("shared: writer %d has %d records (want %d), in order: %s" %
                  (w, len(s), want, s == list(range(len(s)))))
            ok = False
        print("# w%d: %d records, %d fsynced" % (w, n, acked(ackdir, w)))
    return 0 if ok else 1


def mixed(path, wantpath, seed, ops):
    rnd = random.Random(seed)
    want = bytearray()
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    buf = mmap.mmap(-1, 1 << 16)
    limit = 256 << 10

    def check(how, off, n):
        n = max(0, min(n, len(want) - off))
        if how == "direct":
            off -= off % 512
            n = min(-(-n // 512) * 512, 1 << 16)
            d = os.open(path, os.O_RDONLY | os.O_DIRECT)
            try:
                got = bytes(buf[:os.preadv(d, [buf], off)])
            finally:
                os.close(d)
        else:
            got = os.pread(fd, n, off)
        exp = bytes(want[off:off + len(got)])
        if got != exp or len(got) < min(n, max(0, len(want) - off)):
            first = next((i for i in range(min(len(got), len(exp))) if got[i] != exp[i]), None)
            raise SystemExit("%s read at %d+%d: %d bytes back, first difference at +%s" %
                             (how, off, n, len(got), first))

    for i in range(ops):
        op = rnd.random()
        if op < 0.70:
            size = rnd.randint(1, 600) if op < 0.55 else rnd.randint(600, 9216)
            if rnd.random() < 0.3:
                off = len(want)  # append
            elif rnd.random() < 0.2:
                off = rnd.randrange(0, limit, 4096)
                size = 4096 * rnd.randint(1, 2)
            else:
                off = rnd.randint(0, min(limit, len(want) + 4096))
            data = bytes([rnd.randint(1, 255)]) * size
            if os.pwrite(fd, data, off) != size:
                raise SystemExit("short write")
            if off > len(want):
                want.extend(b"\0" * (off - len(want)))
            want[off:off + size] = data
        elif op < 0.73:
            size = rnd.randint(0, min(limit, len(want) + 8192))
            os.ftruncate(fd, size)
            if size < len(want):
                del want[size:]
            else:
                want.extend(b"\0" * (size - len(want)))
        elif op < 0.75:
            # punch a hole or zero a range inside the file (sizes kept)
            off = rnd.randint(0, max(0, len(want)))
            n = rnd.randint(1, 12000)
            mode = rnd.choice((FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE)) | FALLOC_FL_KEEP_SIZE
            fallocate(fd, mode, off, n)
            end = min(off + n, len(want))
            if end > off:
                want[off:end] = b"\0" * (end - off)
        elif op < 0.85:
            check("direct", rnd.randint(0, max(0, len(want))), rnd.randint(1, 65536))
        elif op < 0.92:
            check("buffered", rnd.randint(0, max(0, len(want))), rnd.randint(1, 65536))
        elif op < 0.97:
            os.fsync(fd)
        elif op < 0.995:
            os.close(fd)  # the last close of the file: held blocks go
            fd = os.open(path, os.O_RDWR)
        else:
            os.close(fd)
            fd = os.open(path, os.O_RDWR | os.O_TRUNC)
            del want[:]
    check("direct", 0, len(want))
    os.close(fd)
    got = read_direct(path)
    if got != bytes(want):
        raise SystemExit("%s: %d bytes, want %d" % (path, len(got), len(want)))
    with open(wantpath, "wb") as f:
        f.write(want)
    return 0


def compare(path, wantpath):
    got, want = read_direct(path), open(wantpath, "rb").read()
    if got != want:
        first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), None)
        print("%s: %d bytes, want %d, first difference at %s" % (path, len(got), len(want), first))
        return 1
    return 0


def readback(path, records):
    fo = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 8192)
    end = 0
    try:
        for s in range(records):
            r = record(0, s)
            os.write(fo, r)
            start, end = end, end + len(r)
            block = (end - 1) // 4096 * 4096
            lo = min(start, block)
            n = os.preadv(fd, [buf], lo // 4096 * 4096)
            got = bytes(buf[:n])
            want_at = start - lo // 4096 * 4096
            if got[want_at:want_at + len(r)] != r:
                sys.stderr.write("readback: record %d at %d not read back (got %d bytes)\n"
                                 % (s, start, n))
                return 1
    finally:
        os.close(fd)
        os.close(fo)
    return 0


def main(argv):
    cmd = argv[1]
    if cmd == "append":
        return append(argv[2], argv[3], int(argv[4]), int(argv[5]), int(argv[6]),
                      len(argv) > 7 and argv[7] == "crash")
    if cmd == "verify":
        return verify(argv[2], argv[3], int(argv[4]), int(argv[5]) if len(argv) > 5 else None)
    if cmd == "mixed":
        return mixed(argv[2], argv[3], int(argv[4]), int(argv[5]))
    if cmd == "compare":
        return compare(argv[2], argv[3])
    if cmd == "readback":
        return readback(argv[2], int(argv[3]))
    raise SystemExit("unknown command " + cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
