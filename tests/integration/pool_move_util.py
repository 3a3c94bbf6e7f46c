#!/usr/bin/env python3
"""pool_move_util.py — helpers of pool_move.sh (and bench/pool-move-soak.sh).

  fill PATH BYTES                 write every 4 KiB block of PATH with its
                                  generation-0 pattern (O_DIRECT)
  writer PATH BYTES SECONDS MODEL random 4 KiB O_DIRECT writes for SECONDS,
                                  each block's newest generation kept in
                                  MODEL (JSON); every write is checked back
                                  with a read of the same block
  check PATH BYTES MODEL          every block holds the generation MODEL
                                  says (0 when absent): exit 1 naming the
                                  first block that does not
  extents PATH                    the data segments (SEEK_DATA/SEEK_HOLE),
                                  one "start end" a line

A block's pattern is (offset, generation) repeated, so a lost write (an old
generation), a block from elsewhere (another offset) and zeros all show.
"""
import json
import mmap
import os
import random
import struct
import sys
import time

BLOCK = 4096


def pattern(off, gen):
    return struct.pack("<QQ", off, gen) * (BLOCK // 16)


def aligned():
    return mmap.mmap(-1, BLOCK)


def pwrite_block(fd, buf, off, gen):
    buf.seek(0)
    buf.write(pattern(off, gen))
    if os.pwritev(fd, [buf], off) != BLOCK:
        raise SystemExit(f"short write at {off}")


def pread_block(fd, buf, off):
    if os.preadv(fd, [buf], off) != BLOCK:
        raise SystemExit(f"short read at {off}")
    return bytes(buf)


def describe(data):
    off, gen = struct.unpack_from("<QQ", data)
    return f"(offset {off}, generation {gen})"


def fill(path, size):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    buf = aligned()
    for off in range(0, size, BLOCK):
        pwrite_block(fd, buf, off, 0)
    os.fsync(fd)
    os.close(fd)


def writer(path, size, seconds, model_path):
    fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    buf, back = aligned(), aligned()
    model = {}
    rng = random.Random(os.getpid())
    end = time.monotonic() + seconds
    gen = 0
    while time.monotonic() < end:
        gen += 1
        off = rng.randrange(0, size // BLOCK) * BLOCK
        pwrite_block(fd, buf, off, gen)
        model[off] = gen
        got = pread_block(fd, back, off)
        if got != pattern(off, gen):
            raise SystemExit(f"block {off}: wrote generation {gen}, read {describe(got)}")
    os.fsync(fd)
    os.close(fd)
    with open(model_path, "w") as f:
        json.dump({str(k): v for k, v in model.items()}, f)
    print(f"{gen} writes")


def check(path, size, model_path):
    model = {}
    if model_path != "-":
        with open(model_path) as f:
            model = {int(k): v for k, v in json.load(f).items()}
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = aligned()
    for off in range(0, size, BLOCK):
        want = model.get(off, 0)
        got = pread_block(fd, buf, off)
        if got != pattern(off, want):
            raise SystemExit(f"{path}: block {off} holds {describe(got)}, not generation {want}")
    os.close(fd)


def extents(path):
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    off = 0
    while off < size:
        try:
            start = os.lseek(fd, off, os.SEEK_DATA)
        except OSError:
            break
        end = os.lseek(fd, start, os.SEEK_HOLE)
        print(start, end)
        off = end
    os.close(fd)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "fill":
        fill(args[0], int(args[1]))
    elif cmd == "writer":
        writer(args[0], int(args[1]), float(args[2]), args[3])
    elif cmd == "check":
        check(args[0], int(args[1]), args[2])
    elif cmd == "extents":
        extents(args[0])
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
