#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""stress_util.py — the concurrency stress of stress_enospc.sh.

  run DIR STATE WORKERS SECONDS   WORKERS processes, each with THREADS
                                  threads, until SECONDS pass
  verify DIR STATE                every file named in STATE/*.json exists
                                  with its checksum, and nothing else is there

Every thread owns its names (w<worker>t<thread>-<n>) in a directory shared
by all (so creates, renames and unlinks contend on one directory) and in
one of its own. It loops: create a file of random size and content, write
it (in pieces; sometimes O_DIRECT), fsync; rename one of its files (over
another of its own sometimes); unlink one; fsync a directory. When a write
or create fails with ENOSPC it deletes half of its files and goes on: the
store fills and empties over and over. Each worker records the names and
SHA-256 of the files it knows to exist in STATE/w<worker>.json at the end;
ENOSPC in the middle of a file leaves that file out (it is unlinked).
"""
import errno
import hashlib
import json
import mmap
import os
import random
import sys
import threading
import time

THREADS = 4


class Thread:
    def __init__(self, root, worker, index, deadline, seed):
        self.rng = random.Random(seed)
        self.dirs = [os.path.join(root, "shared"), os.path.join(root, "w%d" % worker)]
        self.prefix = "w%dt%d-" % (worker, index)
        self.files = {}  # path -> sha256
        self.n = 0
        self.deadline = deadline
        self.enospc = 0
        self.error = None

    def new_path(self):
        self.n += 1
        return os.path.join(self.rng.choice(self.dirs), "%s%d" % (self.prefix, self.n))

    def create(self):
        path = self.new_path()
        size = self.rng.choice((0, 1, 511, 4096, 65536, 300000, 1 << 20))
        data = self.rng.randbytes(size)
        direct = size and size % 4096 == 0 and self.rng.random() < 0.5
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | (os.O_DIRECT if direct else 0),
                         0o644)
        except OSError as e:
            if e.errno in (errno.ENOSPC,):
                return False
            raise
        try:
            if direct:
                m = mmap.mmap(-1, size)
                m.write(data)
                os.write(fd, m)
                m.close()
            else:
                pos = 0
                while pos < size:
                    n = min(size - pos, self.rng.choice((1000, 4096, 100000)))
                    os.pwrite(fd, data[pos:pos + n], pos)
                    pos += n
            os.fsync(fd)
        except OSError as e:
            os.close(fd)
            os.unlink(path)
            if e.errno == errno.ENOSPC:
                return False
            raise
        os.close(fd)
        self.files[path] = hashlib.sha256(data).hexdigest()
        return True

    def shrink(self):
        self.enospc += 1
        for p in self.rng.sample(sorted(self.files), len(self.files) // 2 + 1
                                 if self.files else 0):
            os.unlink(p)
            del self.files[p]

    def step(self):
        r = self.rng.random()
        if r < 0.55 or not self.files:
            if not self.create():
                self.shrink()
        elif r < 0.75:
            old = self.rng.choice(sorted(self.files))
            if self.rng.random() < 0.3 and len(self.files) > 1:
                new = self.rng.choice([p for p in self.files if p != old])  # over its own
            else:
                new = self.new_path()
            os.rename(old, new)
            self.files[new] = self.files.pop(old)
        elif r < 0.9:
            p = self.rng.choice(sorted(self.files))
            os.unlink(p)
            del self.files[p]
        else:
            fd = os.open(self.rng.choice(self.dirs), os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(fd)
            os.close(fd)

    def run(self):
        try:
            while time.time() < self.deadline:
                self.step()
        except Exception as e:  # reported by the worker
            self.error = e


def cmd_run(args):
    root, state, workers, seconds = args[0], args[1], int(args[2]), float(args[3])
    os.makedirs(os.path.join(root, "shared"), exist_ok=True)
    os.makedirs(state, exist_ok=True)
    deadline = time.time() + seconds
    kids = []
    for w in range(workers):
        os.makedirs(os.path.join(root, "w%d" % w), exist_ok=True)
        pid = os.fork()
        if pid == 0:
            ts = [Thread(root, w, i, deadline, w * 100 + i) for i in range(THREADS)]
            th = [threading.Thread(target=t.run) for t in ts]
            for t in th:
                t.start()
            for t in th:
                t.join()
            files = {}
            for t in ts:
                files.update(t.files)
            with open(os.path.join(state, "w%d.json" % w), "w") as f:
                json.dump({"files": files, "enospc": sum(t.enospc for t in ts)}, f)
            bad = [t.error for t in ts if t.error]
            for e in bad:
                print("worker %d: %r" % (w, e), file=sys.stderr)
            os._exit(1 if bad else 0)
        kids.append(pid)
    rc = 0
    for pid in kids:
        _, status = os.waitpid(pid, 0)
        rc |= os.waitstatus_to_exitcode(status)
    sys.exit(1 if rc else 0)


def cmd_verify(args):
    root, state = args
    want, enospc = {}, 0
    for name in os.listdir(state):
        with open(os.path.join(state, name)) as f:
            d = json.load(f)
        enospc += d["enospc"]
        for p, h in d["files"].items():
            want[os.path.relpath(p, root)] = h
    seen = 0
    for dirpath, _, names in os.walk(root):
        for n in names:
            rel = os.path.relpath(os.path.join(dirpath, n), root)
            if rel not in want:
                print("FAIL: %s: a file nobody kept" % rel, file=sys.stderr)
                sys.exit(1)
            with open(os.path.join(root, rel), "rb") as f:
                if hashlib.sha256(f.read()).hexdigest() != want[rel]:
                    print("FAIL: %s: checksum differs" % rel, file=sys.stderr)
                    sys.exit(1)
            seen += 1
    if seen != len(want):
        print("FAIL: %d files expected, %d found" % (len(want), seen), file=sys.stderr)
        sys.exit(1)
    print("verified %d files; ENOSPC met %d times" % (seen, enospc))


def main():
    cmds = {"run": cmd_run, "verify": cmd_verify}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    cmds[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
