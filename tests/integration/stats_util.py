#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""stats_util.py — helpers for tests/integration/stats_*.sh: the getxattr
size-probe protocol through ctypes (os.getxattr never probes), errno checks,
fsync/open/pread loops with exact counts, readers racing I/O, and a check
of `chunkfs stat --prom`'s text.

usage: stats_util.py COMMAND ARGS...   (see the cmd_* docstrings)
Exit 0 on success; 1 with "FAIL: ..." on stderr otherwise.
"""
import ctypes
import errno
import json
import mmap
import os
import re
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
libc.getxattr.restype = ctypes.c_ssize_t
libc.listxattr.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
libc.listxattr.restype = ctypes.c_ssize_t
PREFIX = "user.chunkfs."


def die(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def getx(path, name, size):
    """getxattr with an explicit buffer size: (length or -errno, bytes)."""
    buf = ctypes.create_string_buffer(max(size, 1))
    n = libc.getxattr(path.encode(), name.encode(), buf if size else None, size)
    if n < 0:
        return -ctypes.get_errno(), b""
    return n, buf.raw[:n] if size else b""


def listx(path, size):
    buf = ctypes.create_string_buffer(max(size, 1))
    n = libc.listxattr(path.encode(), buf if size else None, size)
    if n < 0:
        return -ctypes.get_errno(), b""
    return n, buf.raw[:n] if size else b""


def err_name(e):
    return errno.errorcode.get(-e, str(e)) if e < 0 else "ok"


def parse_line(text):
    out = {}
    for kv in text.split(" "):
        k, _, v = kv.partition("=")
        out[k] = v
    return out


def cmd_errno(args):
    """errno get|set|remove PATH NAME VALUE EXPECT — EXPECT: ok or ENAME"""
    op, path, name, value, expect = args
    try:
        if op == "get":
            os.getxattr(path, name)
        elif op == "set":
            os.setxattr(path, name, value.encode())
        elif op == "remove":
            os.removexattr(path, name)
        got, num = "ok", 0
    except OSError as e:
        got, num = errno.errorcode.get(e.errno, str(e.errno)), e.errno
    # by number: EOPNOTSUPP and ENOTSUP are one errno on Linux
    if (expect == "ok" and num) or (expect != "ok" and num != getattr(errno, expect)):
        die(f"{op}xattr({path}, {name}, {value!r}) = {got}, expected {expect}")


def cmd_protocol(args):
    """protocol PATH NAME... — for each name: the probe's length, a read of
    exactly that length succeeds with that many bytes, one byte less is
    ERANGE; a big buffer reads the same length. Also listxattr. Prints the
    lengths."""
    path = args[0]
    for name in args[1:]:
        n, _ = getx(path, name, 0)
        if n < 0:
            die(f"probe {name}: {err_name(n)}")
        m, value = getx(path, name, n)
        if m != n or len(value) != n:
            die(f"{name}: probe said {n}, read with {n} gave {m}")
        if n > 1:  # (a size of 0 is a probe, not a small buffer)
            e, _ = getx(path, name, n - 1)
            if e != -errno.ERANGE:
                die(f"{name}: read with {n - 1} < {n} gave {err_name(e)}, not ERANGE")
        big, v2 = getx(path, name, 65536)
        if big < 0:
            die(f"{name}: read with 64 KiB: {err_name(big)}")
        print(f"{name} {n}")
    n, _ = listx(path, 0)
    m, names = listx(path, n)
    if n < 0 or m != n:
        die(f"listxattr probe {n}, read {m}")
    if n > 1:
        e, _ = listx(path, n - 1)
        if e != -errno.ERANGE:
            die(f"listxattr with {n - 1}: {err_name(e)}, not ERANGE")
    print(f"list {n}")


def cmd_names(args):
    """names PATH — print listxattr's names, one per line"""
    n, names = listx(args[0], 65536)
    if n < 0:
        die(f"listxattr: {err_name(n)}")
    for x in names.split(b"\0"):
        if x:
            print(x.decode())


def cmd_opens(args):
    """opens PATH_DIRECT N_DIRECT PATH_BUFFERED N_BUFFERED HOLD_FILE — open
    and close N times each way, then hold one of each open while writing
    the value of user.chunkfs.opens into HOLD_FILE."""
    pd, nd, pb, nb, hold = args[0], int(args[1]), args[2], int(args[3]), args[4]
    for _ in range(nd):
        os.close(os.open(pd, os.O_RDONLY | os.O_DIRECT))
    for _ in range(nb):
        os.close(os.open(pb, os.O_RDONLY))
    a = os.open(pd, os.O_RDONLY | os.O_DIRECT)
    b = os.open(pb, os.O_RDONLY)
    with open(hold, "w") as f:
        f.write(os.getxattr(pd, PREFIX + "opens").decode())
    os.close(a)
    os.close(b)


def cmd_fsync(args):
    """fsync PATH N [write] — N fsyncs (each after a 4 KiB O_DIRECT write at
    0 when 'write' is given, so every commit has something to flush)"""
    path, n = args[0], int(args[1])
    write = len(args) > 2 and args[2] == "write"
    fd = os.open(path, os.O_RDWR | (os.O_DIRECT if write else 0))
    m = mmap.mmap(-1, 4096)
    for i in range(n):
        if write:
            m[:4] = i.to_bytes(4, "little")
            os.pwritev(fd, [m], 0)
        os.fsync(fd)
    os.close(fd)


def cmd_pread(args):
    """pread PATH OFFSET LENGTH — one O_DIRECT read; prints the length read"""
    path, off, length = args[0], int(args[1]), int(args[2])
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    m = mmap.mmap(-1, max(length, 4096))
    n = os.preadv(fd, [memoryview(m)[:length]], off)
    os.close(fd)
    print(n)


def cmd_reads(args):
    """reads PATH COUNT BS — COUNT O_DIRECT reads of BS bytes at consecutive
    offsets (wrapping over the file), QD1, errors counted, not fatal.
    Prints "ok=N eio=N other=N"."""
    path, count, bs = args[0], int(args[1]), int(args[2])
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    size = os.fstat(fd).st_size
    m = mmap.mmap(-1, bs)
    ok = eio = other = 0
    for i in range(count):
        try:
            os.preadv(fd, [m], (i * bs) % size)
            ok += 1
        except OSError as e:
            if e.errno == errno.EIO:
                eio += 1
            else:
                other += 1
    os.close(fd)
    print(f"ok={ok} eio={eio} other={other}")


def cmd_race(args):
    """race PATH ROOT SECONDS — until SECONDS pass, read user.chunkfs.*
    values of PATH and ROOT the way a careful program does (size probe, then
    a read with exactly that size) while I/O runs. Fails on any ERANGE or
    error, an unparsable or torn value, a counter going backwards, disordered
    percentiles, or one call slower than 1 s (a stall). Prints calls and the
    slowest call."""
    path, root, seconds = args[0], args[1], float(args[2])
    names = [(path, "stat"), (path, "reads"), (path, "writes"), (path, "read_bytes"),
             (path, "read_lat_p99_us"), (path, "read_hist"), (root, "stat"),
             (root, "reads"), (path, "inflight")]
    last = {}
    calls = 0
    slowest = 0.0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for p, name in names:
            full = PREFIX + name
            t0 = time.monotonic()
            n, _ = getx(p, full, 0)
            if n < 0:
                die(f"probe {p} {name}: {err_name(n)}")
            if n == 0:
                # An empty value (a histogram before the first request): a
                # read with size 0 would be another probe, not a read.
                continue
            m, value = getx(p, full, n)
            dt = time.monotonic() - t0
            slowest = max(slowest, dt)
            calls += 2
            if m < 0:
                die(f"{p} {name}: read with the probed size {n}: {err_name(m)}")
            if m != n:
                die(f"{p} {name}: probe {n} bytes, read {m}")
            text = value.decode()
            if dt > 1.0:
                die(f"{p} {name}: {dt:.3f} s for a probe and a read")
            if name == "stat":
                kv = parse_line(text)
                for k in ("reads", "writes", "read_bytes", "write_bytes", "read_lat_count"):
                    if not kv.get(k, "").isdigit():
                        die(f"{p}: stat line has {k}={kv.get(k)!r}")
                    key = (p, k)
                    v = int(kv[k])
                    if v < last.get(key, 0):
                        die(f"{p}: {k} went back from {last[key]} to {v}")
                    last[key] = v
                if int(kv["read_bytes"]) % 4096 or int(kv["write_bytes"]) % 4096:
                    die(f"{p}: bytes not whole 4 KiB requests: {text}")
                q = [int(kv[f"read_lat_{x}_us"]) for x in ("p50", "p90", "p99", "p999", "max")]
                if q != sorted(q):
                    die(f"{p}: percentiles out of order {q}")
            elif name == "read_hist":
                for pair in text.split():
                    a, _, b = pair.partition(":")
                    if not (a.isdigit() and b.isdigit()):
                        die(f"hist pair {pair!r}")
            else:
                if not text.isdigit():
                    die(f"{p} {name} = {text!r}")
                if name not in ("inflight", "read_lat_p99_us"):
                    v = int(text)
                    key = (p, name)
                    if v < last.get(key, 0):
                        die(f"{p}: {name} went back from {last[key]} to {v}")
                    last[key] = v
    print(f"calls={calls} slowest_ms={slowest * 1000:.1f}")


PROM_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\} (\S+)$')
PROM_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def cmd_prom(args):
    """prom FILE — check Prometheus text (each family's HELP and TYPE once,
    before its samples; every sample inside its family; no label twice; a
    number) and print it as JSON: {"types": {family: type}, "samples":
    [[name, {label: value}, value], ...]} (label values unescaped)"""
    helps, types, samples, family = set(), {}, [], None
    for line in open(args[0]).read().splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            if name in helps:
                die("HELP twice: " + name)
            helps.add(name)
            family = name
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            if name != family or name in types:
                die("TYPE out of place: " + line)
            types[name] = kind
        else:
            m = PROM_SAMPLE.match(line)
            if not m:
                die("bad sample line: " + line)
            name, labels, value = m.groups()
            pairs = PROM_LABEL.findall(labels)
            if len(pairs) != len({k for k, _ in pairs}):
                die("a label twice: " + line)
            base = re.sub(r"_(sum|count)$", "", name) if types.get(family) == "summary" else name
            if base != family:
                die(f"{name} outside its family {family}")
            unescape = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
            labels = {k: re.sub(r'\\[\\"n]', lambda e: unescape[e.group()], v) for k, v in pairs}
            samples.append([name, labels, float(value)])
    print(json.dumps({"types": types, "samples": samples}))


def prom_one(prom, name, **labels):
    """The value of the one sample of name with exactly these labels, in
    cmd_prom's JSON (for the tests' own checks: import stats_util)."""
    got = [v for n, l, v in prom["samples"] if n == name and l == labels]
    assert len(got) == 1, (name, labels, got)
    return got[0]


def main():
    if len(sys.argv) < 2:
        die("usage: stats_util.py COMMAND ARGS...")
    fn = globals().get("cmd_" + sys.argv[1])
    if not fn:
        die(f"unknown command {sys.argv[1]}")
    fn(sys.argv[2:])


if __name__ == "__main__":
    main()
