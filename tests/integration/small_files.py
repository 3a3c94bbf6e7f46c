#!/usr/bin/env python3
"""small_files.py — the files of small_files.sh: files of random sizes below
one unit and some that grow out of their piece, written through every path
(buffered small and large writes, O_DIRECT, appends, fallocate), and checked
against their expected contents.

  small_files.py write DIR MANIFEST SEED COUNT   write; MANIFEST: name size md5
  small_files.py grow DIR MANIFEST SEED          grow some files (piece to piece,
                                                 to a unit), rewrite MANIFEST
  small_files.py check DIR MANIFEST              every file as MANIFEST says
  small_files.py blocks DIR                      total st_blocks*512 of DIR's files
"""
import hashlib
import mmap
import os
import random
import sys

UNIT = 1 << 20


def data_of(rng, n):
    return rng.randbytes(n)


def write_file(path, content, how, rng):
    if how == "direct" and len(content) % 4096 == 0 and len(content) > 0:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
        buf = mmap.mmap(-1, len(content))
        buf.write(content)
        os.write(fd, buf)
        buf.close()
    elif how == "append":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        pos = 0
        while pos < len(content):
            n = rng.choice((1, 100, 200, 512, 4096, 8192, 12345))
            os.write(fd, content[pos:pos + n])
            pos += n
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, content)
    os.fsync(fd)
    os.close(fd)


def md5(b):
    return hashlib.md5(b).hexdigest()


def read_manifest(path):
    """The log of acknowledged states: "ok NAME SIZE MD5" once a file's
    change is fsynced, "begin NAME" before a change, "gone NAME" once an
    unlink is durable. A name whose last line is "begin" is uncertain (a
    crash came during its change): None."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "ok":
                out[w[1]] = (int(w[2]), w[3])
            elif w[0] == "begin":
                out[w[1]] = None
            elif w[0] == "gone":
                out.pop(w[1], None)
    return out


class Log:
    def __init__(self, path):
        self.f = open(path, "a")

    def line(self, *words):
        self.f.write(" ".join(str(w) for w in words) + "\n")
        self.f.flush()
        os.fsync(self.f.fileno())


def sizes(rng, count):
    # Mostly below 64 KiB (a database directory's maps and catalogs), some up
    # to half a unit, a few past it, and empty files.
    for i in range(count):
        r = rng.random()
        if r < 0.05:
            yield 0
        elif r < 0.7:
            yield rng.randint(1, 64 << 10)
        elif r < 0.95:
            yield rng.randint(64 << 10, UNIT // 2)
        else:
            yield rng.randint(UNIT // 2, 3 * UNIT)


def fsync_dir(d):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)


def cmd_write(d, manifest, seed, count):
    rng = random.Random(seed)
    log = Log(manifest)
    for i, size in enumerate(sizes(rng, count)):
        name = "f%05d" % i
        content = data_of(rng, size)
        how = rng.choice(("buffered", "buffered", "append", "direct"))
        if how == "direct":
            size = size // 4096 * 4096
            content = content[:size]
        log.line("begin", name)
        write_file(os.path.join(d, name), content, how, rng)
        fsync_dir(d)
        log.line("ok", name, size, md5(content))


def cmd_grow(d, manifest, seed):
    rng = random.Random(seed)
    m = read_manifest(manifest)
    log = Log(manifest)
    names = sorted(n for n in m if m[n] is not None)
    for name in rng.sample(names, min(len(names), max(1, len(names) // 4))):
        path = os.path.join(d, name)
        log.line("begin", name)
        with open(path, "rb") as f:
            content = bytearray(f.read())
        how = rng.choice(("append", "overwrite", "fallocate", "far", "direct", "truncate"))
        fd = os.open(path, os.O_RDWR)
        if how == "append":
            extra = data_of(rng, rng.choice((100, 5000, 70000, 600000)))
            os.pwrite(fd, extra, len(content))
            content += extra
        elif how == "overwrite":
            # Across the piece's end: part inside, part beyond.
            off = max(0, len(content) - 1000)
            extra = data_of(rng, rng.randint(2000, 300000))
            os.pwrite(fd, extra, off)
            content[off:off + len(extra)] = extra
        elif how == "fallocate":
            new = len(content) + rng.randint(1, UNIT)
            os.posix_fallocate(fd, 0, new)
            content += bytes(new - len(content))
            extra = data_of(rng, 3000)
            os.pwrite(fd, extra, new - 3000)
            content[new - 3000:new] = extra
        elif how == "far":
            off = rng.randint(UNIT // 2, 5 * UNIT)
            extra = data_of(rng, 4096)
            os.pwrite(fd, extra, off)
            if off > len(content):
                content += bytes(off - len(content))
            content[off:off + 4096] = extra
        elif how == "direct":
            os.close(fd)
            fd = os.open(path, os.O_RDWR | os.O_DIRECT)
            off = (len(content) + 4095) // 4096 * 4096
            n = rng.choice((4096, 65536, 262144, 524288))
            buf = mmap.mmap(-1, n)
            extra = data_of(rng, n)
            buf.write(extra)
            os.pwrite(fd, buf, off)
            buf.close()
            content += bytes(off - len(content))
            content += extra
        else:  # truncate down then write again: the piece is freed, a new one taken
            cut = len(content) // 3
            os.ftruncate(fd, cut)
            del content[cut:]
            extra = data_of(rng, rng.randint(1, 40000))
            os.pwrite(fd, extra, cut)
            content += extra
        os.fsync(fd)
        os.close(fd)
        log.line("ok", name, len(content), md5(bytes(content)))
    # Some go away: their pieces are freed.
    for name in rng.sample(names, len(names) // 10):
        log.line("begin", name)
        os.unlink(os.path.join(d, name))
        fsync_dir(d)
        log.line("gone", name)


def cmd_check(d, manifest):
    m = read_manifest(manifest)
    bad = 0
    for name, state in sorted(m.items()):
        if state is None:
            continue  # changed when the daemon was killed: old, new or between
        size, digest = state
        path = os.path.join(d, name)
        with open(path, "rb") as f:
            content = f.read()
        if len(content) != size or md5(content) != digest:
            print("%s: size %d (expected %d), md5 %s (expected %s)" %
                  (name, len(content), size, md5(content), digest), file=sys.stderr)
            bad += 1
    extra = set(os.listdir(d)) - set(m)
    if extra:
        print("files not in the manifest: %s" % sorted(extra)[:10], file=sys.stderr)
        bad += 1
    if bad:
        sys.exit(1)
    print("%d files ok" % sum(1 for v in m.values() if v is not None))


def cmd_blocks(d):
    total = 0
    for name in os.listdir(d):
        total += os.stat(os.path.join(d, name)).st_blocks * 512
    print(total)


def main():
    cmd = sys.argv[1]
    if cmd == "write":
        cmd_write(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif cmd == "grow":
        cmd_grow(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "check":
        cmd_check(sys.argv[2], sys.argv[3])
    elif cmd == "blocks":
        cmd_blocks(sys.argv[2])
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
