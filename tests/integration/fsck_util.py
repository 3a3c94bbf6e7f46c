#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""fsck_util.py — corrupt a chunkfs store on purpose, for fsck_*.sh.

Reads the layout from the superblock (fs/format/FORMAT.md section 3) and writes
records with valid framing and checksums (section 5), so that what fsck
sees is a store whose *contents* are wrong — the corruptions a checksum
cannot catch (a software bug, or a misdirected write of valid bytes):

  sbflip IMAGE SLOT            flip a byte of one superblock copy (bad checksum)
  snapflip IMAGE               flip a byte of the active snapshot's body
  append IMAGE REC...          append one transaction to the active log, REC:
      map:INO:FILE_UNIT:STORE_UNIT:COUNT      EXTENT_MAP
      nlink:INO:MODE:NLINK:SIZE               INODE_UPDATE (other fields 0)
      dirent:DIR:NAME:INO:MODE                DIRENT_ADD (cookie 1000+)
      unlink:DIR:NAME                         DIRENT_REMOVE
  units IMAGE                  print the data unit count

The store must not be mounted. Exits 0, or 1 with the reason.
"""
import ctypes
import struct
import sys

_x = ctypes.CDLL("libxxhash.so.0")
_x.XXH3_64bits_withSeed.restype = ctypes.c_uint64
_x.XXH3_64bits_withSeed.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]

LOG_MAGIC = 0x474F4C43
SNAP_HEADER = 64


def xxh(data, seed=0):
    return _x.XXH3_64bits_withSeed(bytes(data), len(data), seed)


def die(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


class Store:
    def __init__(self, path):
        self.f = open(path, "r+b")
        best = None
        for slot in (0, 1):
            self.f.seek(slot * 4096)
            b = bytearray(self.f.read(4096))
            c = bytearray(b)
            c[4088:4096] = bytes(8)
            ok = struct.unpack_from("<Q", b, 0)[0] == 0x2153464B4E554843 and \
                struct.unpack_from("<Q", b, 4088)[0] == xxh(c)
            gen = struct.unpack_from("<Q", b, 48)[0]
            if ok and (best is None or gen > best[0]):
                best = (gen, b)
        if best is None:
            die("no valid superblock")
        sb = best[1]
        self.uuid = bytes(sb[56:72])
        self.block = struct.unpack_from("<I", sb, 12)[0]
        self.units = struct.unpack_from("<Q", sb, 224)[0]
        self.active = struct.unpack_from("<I", sb, 172)[0]
        self.meta_off, self.meta_size, self.snap_len, self.seq_start = \
            struct.unpack_from("<QQQQ", sb, 176)
        self.half = self.meta_size // 2
        self.half_off = self.meta_off + self.active * self.half
        self.seed = xxh(self.uuid, LOG_MAGIC)
        self.log_off = self.half_off + (self.snap_len + self.block - 1) // self.block * self.block
        self.log_end = self.half_off + self.half

    def read(self, off, n):
        self.f.seek(off)
        return self.f.read(n)

    def write(self, off, data):
        self.f.seek(off)
        self.f.write(data)

    def log_tail(self):
        """(offset, next seq) after the last valid record."""
        off, seq = self.log_off, self.seq_start
        while off + 32 <= self.log_end:
            h = self.read(off, 32)
            magic, typ, flags, n, res, s, ck = struct.unpack("<IHHIIQQ", h)
            if magic != LOG_MAGIC or n > 65536 or s != seq or typ == 0:
                break
            p = self.read(off + 32, n)
            hz = bytearray(h)
            hz[24:32] = bytes(8)
            if xxh(bytes(hz) + p, self.seed) != ck:
                break
            off += (32 + n + 7) & ~7
            seq += 1
        return off, seq

    def record(self, typ, flags, seq, payload):
        h = bytearray(struct.pack("<IHHIIQQ", LOG_MAGIC, typ, flags, len(payload), 0, seq, 0))
        struct.pack_into("<Q", h, 24, xxh(bytes(h) + payload, self.seed))
        out = bytes(h) + payload
        return out + bytes(((len(out) + 7) & ~7) - len(out))


def payload(spec):
    kind, *a = spec.split(":")
    if kind == "map":
        ino, fu, su, n = (int(v, 0) for v in a)
        return 64, struct.pack("<QQQQ", ino, fu, su, n)
    if kind == "nlink":
        ino, mode, nlink, size = (int(v, 0) for v in a)
        return 17, struct.pack("<QQIIIIQQqqqIIQ", ino, 1, mode, nlink, 0, 0, 0, size,
                               0, 0, 0, 0, 0, 0)
    if kind == "dirent":
        d, name, ino, mode = int(a[0], 0), a[1].encode(), int(a[2], 0), int(a[3], 0)
        return 19, struct.pack("<QQQII", d, ino, 1000 + ino, mode, len(name)) + name
    if kind == "unlink":
        d, name = int(a[0], 0), a[1].encode()
        return 20, struct.pack("<QII", d, len(name), 0) + name
    die("unknown record " + spec)


def cmd_append(args):
    s = Store(args[0])
    off, seq = s.log_tail()
    recs = [payload(r) for r in args[1:]]
    blob = b""
    for i, (typ, p) in enumerate(recs):
        blob += s.record(typ, 1 if i + 1 < len(recs) else 0, seq + i, p)
    if off + len(blob) > s.log_end:
        die("no room in the log")
    # The daemon pads every commit to the physical sector: zero after us
    # so no stale bytes follow.
    s.write(off, blob + bytes(512))


def cmd_sbflip(args):
    s = Store(args[0])
    off = int(args[1]) * 4096 + 100
    b = s.read(off, 1)
    s.write(off, bytes([b[0] ^ 0x5A]))


def cmd_snapflip(args):
    s = Store(args[0])
    if s.snap_len <= SNAP_HEADER:
        die("empty snapshot")
    off = s.half_off + SNAP_HEADER + (s.snap_len - SNAP_HEADER) // 2
    b = s.read(off, 1)
    s.write(off, bytes([b[0] ^ 0xFF]))


def cmd_units(args):
    print(Store(args[0]).units)


def main():
    cmds = {k[4:]: v for k, v in globals().items() if k.startswith("cmd_")}
    if len(sys.argv) < 3 or sys.argv[1] not in cmds:
        print("usage: fsck_util.py {" + ",".join(sorted(cmds)) + "} IMAGE ...", file=sys.stderr)
        sys.exit(2)
    cmds[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
