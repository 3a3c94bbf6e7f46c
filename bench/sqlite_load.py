#!/usr/bin/env python3
"""bench/sqlite_load.py — SQLite with concurrent writer and reader processes
on one database file (python3's sqlite3 module: Debian's libsqlite3).

    sqlite_load.py [-j wal|delete] [-m mmap_bytes] [-w writers] [-r rows]
                   [-t rows_per_tx] [-R readers] [-b busy_timeout_ms] DB

WRITERS processes each insert ROWS rows (about 100 bytes each) in
transactions of ROWS_PER_TX (BEGIN IMMEDIATE: a writer waits for the write
lock up to the busy timeout); READERS processes query the table (a count
and a lookup by key) until the writers are done. A transaction that fails
with SQLITE_BUSY ("database is locked") is counted and retried; so is a
reader's query. The database is new for every run (DB and its -wal, -shm,
-journal are removed first); journal_mode as given, synchronous FULL (the
default), mmap_size as given (0: off).

Afterwards: PRAGMA integrity_check is "ok", and every row of every writer
is there exactly once (exit 1 otherwise).

Output: one CSV line on stdout:
  journal,mmap,writers,rows,tx,seconds,rows_per_s,busy_writers,busy_readers,reader_queries
"""
import argparse
import multiprocessing as mp
import os
import sqlite3
import sys
import time


def connect(a):
    c = sqlite3.connect(a.db, timeout=a.busy / 1000.0, isolation_level=None)
    c.execute("PRAGMA mmap_size = %d" % a.mmap)
    return c


def is_busy(e):
    return "locked" in str(e) or "busy" in str(e)


def writer(a, w, q):
    c = connect(a)
    busy = 0
    pad = "p" * 80
    i = 0
    while i < a.rows:
        n = min(a.tx, a.rows - i)
        try:
            c.execute("BEGIN IMMEDIATE")
            c.executemany("INSERT INTO t (writer, seq, pad) VALUES (?, ?, ?)",
                          [(w, i + k, pad) for k in range(n)])
            c.execute("COMMIT")
            i += n
        except sqlite3.OperationalError as e:
            if not is_busy(e):
                raise
            busy += 1
            if c.in_transaction:
                c.execute("ROLLBACK")
    c.close()
    q.put(("w", busy, 0))


def reader(a, r, done, q):
    c = connect(a)
    busy = queries = 0
    k = r
    while not done.is_set():
        try:
            c.execute("SELECT count(*) FROM t").fetchone()
            c.execute("SELECT pad FROM t WHERE writer = ? AND seq = ?", (k % a.writers, k % a.rows)).fetchone()
            queries += 1
            k += 7919
        except sqlite3.OperationalError as e:
            if not is_busy(e):
                raise
            busy += 1
    c.close()
    q.put(("r", busy, queries))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-j", dest="journal", choices=("wal", "delete"), default="wal")
    ap.add_argument("-m", dest="mmap", type=int, default=0)
    ap.add_argument("-w", dest="writers", type=int, default=4)
    ap.add_argument("-r", dest="rows", type=int, default=20000)
    ap.add_argument("-t", dest="tx", type=int, default=100)
    ap.add_argument("-R", dest="readers", type=int, default=2)
    ap.add_argument("-b", dest="busy", type=int, default=10000)
    ap.add_argument("db")
    a = ap.parse_args()
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(a.db + suffix)
        except FileNotFoundError:
            pass
    c = connect(a)
    mode = c.execute("PRAGMA journal_mode = %s" % a.journal).fetchone()[0]
    if mode != a.journal:
        sys.exit("sqlite_load: journal_mode %s refused (%s)" % (a.journal, mode))
    c.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, writer INT, seq INT, pad TEXT)")
    c.execute("CREATE INDEX t_ws ON t (writer, seq)")

    q = mp.Queue()
    done = mp.Event()
    readers = [mp.Process(target=reader, args=(a, r, done, q)) for r in range(a.readers)]
    writers = [mp.Process(target=writer, args=(a, w, q)) for w in range(a.writers)]
    for p in readers:
        p.start()
    t0 = time.monotonic()
    for p in writers:
        p.start()
    for p in writers:
        p.join()
    secs = time.monotonic() - t0
    done.set()
    for p in readers:
        p.join()
    if any(p.exitcode for p in writers + readers):
        sys.exit("sqlite_load: a writer or reader failed")
    res = [q.get() for _ in writers + readers]
    bw = sum(b for k, b, _ in res if k == "w")
    br = sum(b for k, b, _ in res if k == "r")
    nq = sum(n for k, _, n in res if k == "r")

    ok = c.execute("PRAGMA integrity_check").fetchone()[0]
    if ok != "ok":
        sys.exit("sqlite_load: integrity_check: %s" % ok)
    for w in range(a.writers):
        n, d, lo, hi = c.execute("SELECT count(*), count(DISTINCT seq), min(seq), max(seq) FROM t "
                                 "WHERE writer = ?", (w,)).fetchone()
        if (n, d, lo, hi) != (a.rows, a.rows, 0, a.rows - 1):
            sys.exit("sqlite_load: writer %d: %s rows, %s distinct, seq %s..%s; expected %d"
                     % (w, n, d, lo, hi, a.rows))
    c.close()
    total = a.writers * a.rows
    print("%s,%d,%d,%d,%d,%.3f,%.1f,%d,%d,%d" % (a.journal, a.mmap, a.writers, a.rows, a.tx, secs,
                                               total / secs, bw, br, nq))


if __name__ == "__main__":
    main()
