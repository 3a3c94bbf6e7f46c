#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""soak_load.py — the mixed load of bench/soak.sh and its checker.

  load DIR ACK WRITERS SECONDS SEED   run WRITERS processes in DIR/w<i>/
  verify DIR ACK                      check DIR against the acknowledgements

Each writer loops over: create a file (O_DIRECT with aligned buffers, or
buffered in odd-sized pieces; sometimes fallocated first), fsync it, rename
it from its temporary name, fsync the directory; rename a file; unlink a
file; every step that completed durably is appended to ACK (one line,
flushed, on a filesystem that does not crash) *after* the fsync returned:
these are the fsync markers. Before a rename or an unlink, an intent line
is written, because a crash between the syscall and the directory fsync may
or may not keep it.

Every byte written is recognisable: each 16-byte group of file tag T holds
(file offset u64, T u32, magic u32), and T names the writer and the file's
sequence number, which every name carries. So the checker knows what any
byte of any file may be, acknowledged or not:
  - every acknowledged file exists (at its name, or at the name of an
    intended rename) with exactly its size and content, unless an intended
    unlink may have removed it;
  - every other file holds, byte by byte, zero or its own data at its own
    offset: never another file's bytes, never stale data.
Exit 0, or 1 with the first violation.
"""
import ctypes
import errno
import mmap
import os
import random
import struct
import sys
import time

MAGIC = 0x4B414F53  # "SOAK"
MAX_FILES = 24      # per writer: keeps the store from filling
BLOCK = 4096


def tag_of(writer, seq):
    return (writer << 24) | seq


def pattern(tag, length):
    n = (length + 15) // 16
    return b"".join(struct.pack("<QII", 16 * i, tag, MAGIC) for i in range(n))[:length]


def parse(name):
    """'f12' / 't12' / 'r12' -> 12, else None."""
    if len(name) > 1 and name[0] in "ftr" and name[1:].isdigit():
        return int(name[1:])
    return None


FUSE_SUPER_MAGIC = 0x65735546


def on_fuse(path):
    """statfs(path).f_type is FUSE's (f_type is the first field, a long)."""
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(256)
    if libc.statfs(path.encode(), buf) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)
    return ctypes.c_long.from_buffer(buf).value == FUSE_SUPER_MAGIC


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Writer:
    def __init__(self, root, ack, index, seed):
        self.dir = os.path.join(root, "w%d" % index)
        self.index = index
        self.rng = random.Random(seed * 1000 + index)
        self.ack = open(ack, "a", buffering=1)
        self.files = []  # acknowledged names in this dir
        self.seq = 0
        # Acknowledge only while root is the FUSE mount this writer started
        # on: a writer that starts late or outlives its mount would resolve
        # its paths in the directory under the mount point, on the host
        # filesystem, where fsync succeeds and the next mount hides it all.
        # (soak.sh keeps a dead mount in place until the load ended; this
        # is the second line of defence.)
        self.root = root
        if not on_fuse(root):
            die("%s is not on a FUSE mount" % root)
        self.mount_dev = os.stat(root).st_dev
        os.makedirs(self.dir, exist_ok=True)

    def mark(self, line):
        if os.stat(self.root).st_dev != self.mount_dev:
            os._exit(0)
        self.ack.write("%d %s\n" % (self.index, line))
        self.ack.flush()

    def write_file(self, path, tag, size):
        data = pattern(tag, size)
        direct = self.rng.random() < 0.5
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        if direct:
            flags |= os.O_DIRECT
            size_al = (size + BLOCK - 1) // BLOCK * BLOCK
        fd = os.open(path, flags, 0o644)
        try:
            if self.rng.random() < 0.3:
                os.posix_fallocate(fd, 0, size)
            if direct:
                # O_DIRECT: whole 4 KiB blocks from a page-aligned buffer,
                # then the size is cut to the exact length.
                m = mmap.mmap(-1, size_al)
                m.write(data + bytes(size_al - size))
                os.write(fd, m)
                m.close()
                os.ftruncate(fd, size)
            else:
                pos = 0
                while pos < size:
                    n = min(size - pos, self.rng.choice((100, 512, 1000, 4096, 65536)))
                    os.pwrite(fd, data[pos:pos + n], pos)
                    pos += n
            os.fsync(fd)
        finally:
            os.close(fd)

    def create(self):
        self.seq += 1
        seq, size = self.seq, self.rng.choice((512, 4096, 7000, 65536, 200000, 262144))
        tmp = os.path.join(self.dir, "t%d" % seq)
        self.write_file(tmp, tag_of(self.index, seq), size)
        os.rename(tmp, os.path.join(self.dir, "f%d" % seq))
        fsync_dir(self.dir)
        self.mark("C f%d %d" % (seq, size))
        self.files.append("f%d" % seq)

    def rename(self):
        old = self.rng.choice(self.files)
        if old[0] != "f":
            return
        new = "r" + old[1:]
        self.mark("P R %s %s" % (old, new))
        os.rename(os.path.join(self.dir, old), os.path.join(self.dir, new))
        fsync_dir(self.dir)
        self.mark("R %s %s" % (old, new))
        self.files[self.files.index(old)] = new

    def unlink(self):
        name = self.rng.choice(self.files)
        self.mark("P U %s" % name)
        os.unlink(os.path.join(self.dir, name))
        fsync_dir(self.dir)
        self.mark("U %s" % name)
        self.files.remove(name)

    def resume(self, ack):
        """After a crash (and a verify): settle the intent the crash left,
        drop files that were never acknowledged, never reuse a number."""
        self.seq = resume_seq(ack, self.index)
        present = set(os.listdir(self.dir))
        p = intents(ack).get(self.index)
        if p and p[0] == "R" and p[2] in present and p[1] not in present:
            self.mark("R %s %s" % (p[1], p[2]))
        elif p and p[0] == "U" and p[1] not in present:
            self.mark("U %s" % p[1])
        elif p:
            self.mark("X")  # the intended change did not happen
        self.files = sorted(expected(ack).get(self.index, {}))
        for name in present - set(self.files):
            os.unlink(os.path.join(self.dir, name))
        fsync_dir(self.dir)

    def run(self, seconds):
        end = time.time() + seconds
        while time.time() < end:
            r = self.rng.random()
            if not self.files or (r < 0.6 and len(self.files) < MAX_FILES):
                self.create()
            elif r < 0.8:
                self.rename()
            else:
                self.unlink()


def cmd_load(args):
    root, ack, writers, seconds, seed = args[0], args[1], int(args[2]), float(args[3]), int(args[4])
    if not on_fuse(root):
        die("%s is not on a FUSE mount: not writing under a mount point" % root)
    kids = []
    for i in range(writers):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                w = Writer(root, ack, i, seed)
                w.resume(ack)
                w.run(seconds)
            except OSError as e:
                # The daemon died under us: the crash this load is for.
                # What a dying daemon answers is not part of any promise
                # (a real power loss kills the application too), so any
                # error after the crash flag (SOAK_CRASH_FLAG, created by
                # soak.sh just before it crashes the daemon) is the crash;
                # before it, only a disconnect could be.
                crashed = os.path.exists(os.environ.get("SOAK_CRASH_FLAG", "/nonexistent"))
                code = 0 if crashed or e.errno in (errno.ENOTCONN, errno.ECONNABORTED,
                                                    errno.ESHUTDOWN, errno.ENODEV) else 3
                if code or not crashed:
                    print("writer %d: %s%s" % (i, e, "" if code else " (crash)"),
                          file=sys.stderr)
            os._exit(code)
        kids.append(pid)
    bad = 0
    for pid in kids:
        _, status = os.waitpid(pid, 0)
        bad |= os.waitstatus_to_exitcode(status) != 0
    sys.exit(1 if bad else 0)


def read_ack(ack):
    try:
        with open(ack) as f:
            return [l.split() for l in f if l.strip()]
    except FileNotFoundError:
        return []


def resume_seq(ack, writer):
    top = 0
    for parts in read_ack(ack):
        if int(parts[0]) == writer:
            for p in parts[2:]:
                s = parse(p)
                if s is not None:
                    top = max(top, s)
    # A crash may have left an unacknowledged file with a higher number.
    return top + 1000


def expected(ack):
    """{writer: {name: size}} of acknowledged files, and pending intents."""
    state, sizes = {}, {}
    for parts in read_ack(ack):
        w, op = int(parts[0]), parts[1]
        files = state.setdefault(w, {})
        if op == "C":
            files[parts[2]] = int(parts[3])
        elif op == "R":
            files[parts[3]] = files.pop(parts[2])
        elif op == "U":
            files.pop(parts[2], None)
    return state


def intents(ack):
    """{writer: ('R', old, new) | ('U', name)}: the last unfinished one."""
    pend = {}
    for parts in read_ack(ack):
        w, op = int(parts[0]), parts[1]
        if op == "P":
            pend[w] = tuple(parts[2:])
        elif op in ("R", "U", "C", "X"):
            pend.pop(w, None)
    return pend


def die(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check_bytes(path, writer, name, data, exact_size=None):
    seq = parse(name)
    if seq is None:
        die("%s: a name the load never used" % path)
    want = pattern(tag_of(writer, seq), len(data))
    if exact_size is not None:
        if len(data) != exact_size:
            die("%s: size %d, acknowledged %d" % (path, len(data), exact_size))
        if data != want:
            die("%s: acknowledged content differs" % path)
        return
    # Byte by byte: writes of odd sizes may have persisted up to any byte,
    # so a byte is its own value or zero (never written, or unwritten state).
    for i in range(0, len(data), 4096):
        if data[i:i + 4096] == want[i:i + 4096]:
            continue
        for j in range(i, min(i + 4096, len(data))):
            if data[j] != want[j] and data[j] != 0:
                die("%s: the byte at %d was never written to this file: %r" %
                    (path, j, data[j - j % 16:j - j % 16 + 16]))


def cmd_verify(args):
    root, ack = args
    state, pend = expected(ack), intents(ack)
    checked = 0
    for w in sorted(set(state) | set(pend)):
        d = os.path.join(root, "w%d" % w)
        present = set(os.listdir(d)) if os.path.isdir(d) else set()
        files = state.get(w, {})
        p = pend.get(w)
        for name, size in files.items():
            where = name
            if name not in present:
                if p and p[0] == "R" and p[1] == name and p[2] in present:
                    where = p[2]
                elif p and p[0] == "U" and p[1] == name:
                    continue
                else:
                    die("%s/%s: acknowledged, missing" % (d, name))
            with open(os.path.join(d, where), "rb") as f:
                check_bytes(os.path.join(d, where), w, where, f.read(), size)
            checked += 1
        for name in present:
            seq = parse(name)
            if name in files or (p and p[0] == "R" and p[2] == name):
                continue
            with open(os.path.join(d, name), "rb") as f:
                check_bytes(os.path.join(d, name), w, name, f.read())
            checked += 1
            if name[0] != "t" and seq is not None and p is None:
                # A final name is given only after its fsync, and is
                # acknowledged right after the directory fsync: a finished
                # create that was not acknowledged was in flight.
                pass
    print("verified %d files" % checked)


def main():
    cmds = {"load": cmd_load, "verify": cmd_verify}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    cmds[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
