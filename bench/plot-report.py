#!/usr/bin/env python3
"""bench/plot-report.py RESULTDIR — the report of a bench/run-all.sh run.

Reads what run-all.sh left in RESULTDIR (system.txt, mounts.txt, timings.csv,
raw/perf-*.csv, checkpoint.csv, fschoice.csv, openclose.csv, meta.csv,
stats.txt, openclose-perf*.txt, pgbench.txt, and the database cases' long
CSVs pgbench-db.csv, mariadb.csv, smallappend.csv, sqlite.csv, rocksdb.csv
with their .txt), writes RESULTDIR/report.md with the tables
(medians of the repetitions) and, through gnuplot, RESULTDIR/*.png with the
data (*.dat) and scripts (*.gp) next to them. A case that did not run is
left out.
"""
import csv
import glob
import os
import statistics
import subprocess
import sys

D = sys.argv[1] if len(sys.argv) > 1 else "."
out = []


def p(s=""):
    out.append(s)


def rows(path):
    """CSV rows as dicts, '#' comment lines skipped."""
    with open(path) as f:
        return list(csv.DictReader(l for l in f if not l.startswith("#")))


def med(v):
    v = [float(x) for x in v if x not in ("", None, "nan")]
    return statistics.median(v) if v else None


def table(head, body):
    p("| " + " | ".join(head) + " |")
    p("|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|")
    for r in body:
        p("| " + " | ".join(str(x) for x in r) + " |")
    p()


def read(name):
    path = os.path.join(D, name)
    return open(path).read() if os.path.exists(path) else ""


TERM = None


def plot(name, script):
    """Run a gnuplot script writing NAME.png; note it in the report."""
    global TERM
    if TERM is None:
        ok = subprocess.run(["gnuplot", "-e", "set terminal pngcairo"],
                            capture_output=True).returncode == 0
        TERM = ("pngcairo noenhanced size 900,480 font ',10'" if ok
                else "png noenhanced size 900,480")
    gp = os.path.join(D, name + ".gp")
    with open(gp, "w") as f:
        f.write("set terminal %s\nset output '%s.png'\n%s\n" % (TERM, name, script))
    r = subprocess.run(["gnuplot", name + ".gp"], cwd=D, capture_output=True, text=True)
    if r.returncode:
        p("(chart %s failed: %s)" % (name, r.stderr.strip()[:300]))
    else:
        p("![%s](%s.png)" % (name, name))
    p()


def dat(name, lines):
    with open(os.path.join(D, name + ".dat"), "w") as f:
        f.write("\n".join(lines) + "\n")


system = read("system.txt")
p("# chunkfs benchmark report")
p()
p("Made by `bench/run-all.sh` (%s); every number is the median of the repetitions "
  "of one run, and every ratio compares numbers measured in this same run." %
  ("QUICK=1: one repetition, small sizes, for checking the script, not for quoting"
   if "quick: 1" in system else "full run"))
p()
p("```")
p(system.strip())
p("```")
p()
p("**Noise.** The machine has 2 vCPUs shared with other engineers' builds and tests; "
  "the same case varies by 15-30% (often more) from one repetition to the next. Read "
  "ratios within about ±15% of each other as equal.")
p()
summary_at = len(out)   # the headline list goes here, filled at the end
headline = []

# ---- 1. raw matrix ------------------------------------------------------------------
raw = sorted(glob.glob(os.path.join(D, "raw", "perf-*.csv")))
if raw:
    R = rows(raw[-1])
    by = {}
    for r in R:
        by.setdefault((r["case"], r["target"]), []).append(r)

    def m(c, t, f):
        return med(r[f] for r in by.get((c, t), []))
    targets = [t for t in ("raw-file", "raw-loop", "ext4", "tmpfs", "cfs-img", "cfs-loop",
                           "cfs-ram") if any(k[1] == t for k in by)]
    cases = []
    for r in R:
        if r["case"] not in cases:
            cases.append(r["case"])
    base = {"raw-loop": "raw-file", "ext4": "raw-file", "tmpfs": "raw-file",
            "cfs-img": "raw-file", "cfs-loop": "raw-loop", "cfs-ram": "raw-file"}
    names = {"raw-file": "image file", "raw-loop": "loop device", "ext4": "ext4 O_DIRECT",
             "tmpfs": "tmpfs", "cfs-img": "chunkfs image", "cfs-loop": "chunkfs loop",
             "cfs-ram": "chunkfs RAM"}
    p("## 1. Raw matrix")
    p()
    p("fio, io_uring, O_DIRECT, one job, `--norandommap`, files written in full first "
      "(`bench/perf.sh`). IOPS (MB/s for the 1 MiB cases), and in brackets the ratio to "
      "the raw store: the image file for everything except chunkfs on the loop device, "
      "which is against the loop device itself. tmpfs and chunkfs RAM are in memory: "
      "their ratio to the disk says how far memory is ahead, not a target.")
    p()
    body = []
    ratios = {}
    for c in cases:
        f = "MBps" if c.startswith("s") else "iops"
        row = [c]
        for t in targets:
            v = m(c, t, f)
            if v is None:
                row.append("-")
                continue
            s = "%.0f" % v if f == "iops" else "%.0f MB/s" % v
            b = base.get(t)
            if b and m(c, b, f):
                ratios[(c, t)] = v / m(c, b, f)
                s += " (%.2fx)" % ratios[(c, t)]
            row.append(s)
        body.append(row)
    table(["case"] + [names[t] for t in targets], body)
    p("Latency p50 / p99 in µs, and the chunkfs daemon's CPU per I/O (µs, user + system):")
    p()
    body = []
    for c in cases:
        row = [c]
        for t in targets:
            a, b = m(c, t, "lat_p50_us"), m(c, t, "lat_p99_us")
            s = "-" if a is None else "%.0f / %.0f" % (a, b)
            cpu = m(c, t, "daemon_cpu_us_per_io")
            if cpu is not None:
                s += " (cpu %.1f)" % cpu
            row.append(s)
        body.append(row)
    table(["case"] + [names[t] for t in targets], body)
    shown = [t for t in ("raw-loop", "ext4", "cfs-img", "cfs-loop", "cfs-ram", "tmpfs")
             if t in targets]
    lines = ["case " + " ".join('"%s"' % names[t] for t in shown)]
    for c in cases:
        lines.append(c + " " + " ".join("%.3f" % ratios.get((c, t), float("nan")) for t in shown))
    dat("raw", lines)
    plot("raw", "set title 'Raw matrix: throughput relative to the raw store (log scale)'\n"
         "set style data histogram\nset style histogram cluster gap 1\n"
         "set style fill solid 0.8 border -1\nset boxwidth 0.9\nset logscale y\n"
         "set yrange [0.05:*]\nset ylabel 'ratio to raw store'\nset grid ytics\n"
         "set key outside right top\nset xtics rotate by -30\n"
         "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2\n"
         "set key autotitle columnhead\n"
         "plot for [i=2:%d] 'raw.dat' using i:xtic(1)" % (len(shown) + 1))
    for c, label in (("rr4k-qd32", "4 KiB random read QD32"), ("rw4k-qd32", "4 KiB random write QD32"),
                     ("sw1m-qd8", "1 MiB sequential write")):
        if (c, "cfs-img") in ratios:
            headline.append("%s: chunkfs on the image %.2fx of the raw image%s" % (
                label, ratios[(c, "cfs-img")],
                ", on the loop device %.2fx of the loop device" % ratios[(c, "cfs-loop")]
                if (c, "cfs-loop") in ratios else ""))

# ---- 2. checkpoints ---------------------------------------------------------------------
if os.path.exists(os.path.join(D, "checkpoint.csv")):
    R = [r for r in rows(os.path.join(D, "checkpoint.csv")) if r["case"] == "checkpoint"]
    hdr = [l for l in open(os.path.join(D, "checkpoint.csv")) if "checkpoint rounds" in l]
    rounds = hdr[0].split("checkpoint rounds ")[1].split(",")[0] if hdr else "20"
    names = [("disk-buffered", "ext4 buffered (write, fsync)"), ("disk-direct", "ext4 O_DIRECT"),
             ("img", "chunkfs image"), ("loop", "chunkfs loop"), ("ram", "chunkfs RAM"),
             ("tmpfs", "tmpfs O_DIRECT")]
    a = {t: med(r["avg_ms"] for r in R if r["target"] == t) for t, _ in names}
    w = {t: med(r["worst_ms"] for r in R if r["target"] == t) for t, _ in names}
    n = {t: sum(1 for r in R if r["target"] == t) for t, _ in names}
    b = a.get("disk-buffered")
    p("## 2. Temp-table checkpoints (Informix temp dbspaces)")
    p()
    p("`bench/temp_checkpoint.c` via `bench/ram-vs-tmpfs.sh -c checkpoint`: %s rounds of "
      "80 MB written as 2 KiB pages (ascending offsets) into a temp chunk, then fdatasync; "
      "a round's flush time runs from the first write to the end of the fdatasync. ext4 "
      "buffered is the baseline of IBM's DIRECT_IO note (Informix AIO in a file system: "
      "pwrite per page, one fsync); every other target writes O_DIRECT through io_uring at QD32 (DIRECT_IO 5). "
      "ext4 = the disk filesystem holding the images. The note: DIRECT_IO 5 -6%% to -30%% flush "
      "time, RAM disk -67%%." % rounds)
    p()
    body = []
    for t, label in names:
        if a.get(t) is None:
            continue
        body.append([label, "%.1f" % a[t], "%.1f" % w[t],
                     "%+.1f%%" % ((a[t] - b) / b * 100) if b else "-",
                     "%+.1f%%" % ((w[t] - w["disk-buffered"]) / w["disk-buffered"] * 100) if b else "-",
                     n[t]])
    table(["target", "avg flush ms", "worst flush ms", "avg: % change vs ext4 buffered",
           "worst: % change", "runs"], body)
    dat("checkpoint", ['"%s" %.1f %.1f' % (label, a[t], w[t]) for t, label in names if a.get(t) is not None])
    plot("checkpoint", "set title 'Temp-table checkpoint: flush time per round (ms)'\n"
         "set style data histogram\nset style histogram cluster gap 1\n"
         "set style fill solid 0.8 border -1\nset ylabel 'ms'\nset grid ytics\n"
         "set yrange [0:*]\nset xtics rotate by -20\n"
         "plot 'checkpoint.dat' using 2:xtic(1) title 'average', '' using 3 title 'worst'")
    for t, label in (("ram", "chunkfs RAM"), ("img", "chunkfs image")):
        if a.get(t) is not None and b:
            headline.append("checkpoint flush, %s: %+.0f%% against ext4 buffered (tmpfs %s)" % (
                label, (a[t] - b) / b * 100,
                "%+.0f%%" % ((a["tmpfs"] - b) / b * 100) if a.get("tmpfs") else "-"))

# ---- 3. filesystem choice -----------------------------------------------------------------
if os.path.exists(os.path.join(D, "fschoice.csv")):
    R = rows(os.path.join(D, "fschoice.csv"))
    s = {}
    for r in R:
        s.setdefault(r["target"], []).append(float(r["seconds"]))
    mb = int(R[0]["chunks"]) * int(R[0]["MB"]) if R else 0
    article = {"ext4-buffered": ("Test 1", "91m41s", 1.0),
               "ext4-direct": ("Test 2", "195m57s", 195.95 / 91.68),
               "ext2-buffered": ("Test 3", "54m49s", 54.82 / 91.68), "ext2-direct": ("Test 4", "49m54s", 49.9 / 91.68)}
    order = ["ext4-buffered", "ext4-direct", "ext2-buffered", "ext2-direct", "xfs-buffered",
             "xfs-direct", "chunkfs-buffered", "chunkfs-direct"]
    t1 = med(s.get("ext4-buffered", []))
    p("## 3. Filesystem choice (the Informix filesystem article)")
    p()
    p("`bench/import_load.c`: an import into %s new chunk files of %s MB (%d MB): data pages "
      "(2 KiB) appended 16 per write, index pages (25%% of each chunk) written one by one at "
      "random places, interleaved, then fsync; one session, synchronous writes. Each "
      "filesystem is made fresh on the same loop device (`--direct-io=on`, over an image "
      "written in full) before each run; DIRECT_IO 1 = O_DIRECT. Elapsed seconds; the article's "
      "times (1.7 GB dbimport) for its four tests beside." %
      (R[0]["chunks"] if R else "?", R[0]["MB"] if R else "?", mb))
    p()
    body = []
    for t in order:
        if t not in s:
            continue
        v = med(s[t])
        sd = article.get(t, ("", "", None))
        fs, mode = t.split("-")
        body.append([sd[0] or "-", "%s, DIRECT_IO %d" % (fs, mode == "direct"), "%.2f" % v,
                     "%.0f" % (mb / v), "%.2fx" % (v / t1) if t1 else "-",
                     sd[1] or "-", "%.2fx" % sd[2] if sd[2] else "-", len(s[t])])
    table(["article test", "filesystem", "seconds", "MB/s", "vs test 1", "article time",
           "article vs test 1", "runs"], body)
    dat("fschoice", ['"%s" %.3f' % (t.replace("-", " "), med(s[t])) for t in order if t in s])
    plot("fschoice", "set title 'Import load: elapsed seconds, lower is better'\n"
         "set style fill solid 0.8 border -1\nset boxwidth 0.7\nset ylabel 's'\n"
         "set grid ytics\nset yrange [0:*]\nset xtics rotate by -20\n"
         "plot 'fschoice.dat' using 0:2:xtic(1) with boxes notitle")
    if "chunkfs-direct" in s and "ext4-direct" in s:
        headline.append("import load with O_DIRECT: chunkfs %.1f s, ext4 %.1f s, ext2 %s s, xfs %s s "
                        "(buffered ext4: %.1f s)" % (
                            med(s["chunkfs-direct"]), med(s["ext4-direct"]),
                            "%.1f" % med(s["ext2-direct"]) if "ext2-direct" in s else "-",
                            "%.1f" % med(s["xfs-direct"]) if "xfs-direct" in s else "-", t1 or 0))

# ---- 4. open/close scaling ----------------------------------------------------------------
if os.path.exists(os.path.join(D, "openclose.csv")):
    R = rows(os.path.join(D, "openclose.csv"))
    s = {}
    for r in R:
        s.setdefault((r["target"], int(r["files"])), []).append(float(r["seconds"]))
    files = sorted({k[1] for k in s})
    # ratio columns: chunkfs against ext4, the FUSE floor against ext4, chunkfs against the floor
    OC_RATIOS = (("chunkfs", "ext4"), ("fuse-null", "ext4"), ("chunkfs", "fuse-null"))
    tg = [t for t in ("chunkfs", "ext4", "tmpfs", "fuse-null", "fuse-noopen")
          if any(k[0] == t for k in s)]
    it = R[0]["iterations"] if R else "?"
    p("## 4. Open/close scaling (FairCom's open/close test)")
    p()
    p("`bench/openclose.c`: 128 threads, each %s times opening (O_RDWR | O_DIRECT) and "
      "closing a file set of one data and three index files; file sets 1..128, thread k "
      "on set k %% sets. Total seconds, the table shape of FairCom's note (it ran 2000 "
      "iterations; its Centos 6 column: 3.07 s for 1 set, 21.3 s for 128). ext4 = a "
      "directory on the disk filesystem. fuse-null = `bench/fuse_null.c`, a FUSE "
      "filesystem that answers OPEN and RELEASE as chunkfs does and does nothing else: "
      "the floor under any FUSE filesystem that sees opens; fuse-noopen = the same "
      "answering OPEN with ENOSYS, the kernel's no_open mode (no request per open or "
      "close; chunkfs cannot use it, see bench/README.md). Target: chunkfs's worst "
      "case (128 sets) within 2x of ext4." % it)
    p()
    body = []
    for f in files:
        row = [f] + ["%.3f" % med(s[(t, f)]) if (t, f) in s else "-" for t in tg]
        for a, b in OC_RATIOS:
            if (a, f) in s and (b, f) in s:
                row.append("%.1fx" % (med(s[(a, f)]) / med(s[(b, f)])))
            elif any(k[0] == a for k in s) and any(k[0] == b for k in s):
                row.append("-")
        body.append(row)
    ratios = [a + " / " + b for a, b in OC_RATIOS if a in tg and b in tg]
    table(["file sets"] + tg + ratios, body)
    lines = ["files " + " ".join(tg)]
    for f in files:
        lines.append("%d " % f + " ".join("%.4f" % med(s[(t, f)]) if (t, f) in s else "nan"
                                           for t in tg))
    dat("openclose", lines)
    plot("openclose", "set title 'Open/close scaling: 128 threads, total seconds'\n"
         "set logscale x 2\nset logscale y\nset xlabel 'file sets'\nset ylabel 's'\n"
         "set grid\nset key top left\n"
         "plot for [i=2:%d] 'openclose.dat' using 1:i with linespoints lw 2 title columnhead(i)"
         % (len(tg) + 1))
    if ("chunkfs", 128) in s and ("ext4", 128) in s:
        c, e = med(s[("chunkfs", 128)]), med(s[("ext4", 128)])
        ops = 128 * int(it) * 4
        headline.append("open/close, 128 threads on 128 sets: chunkfs %.2f s, ext4 %.2f s = %.1fx "
                        "(target 2x: %s)" % (c, e, c / e, "met" if c / e <= 2 else "**not met**"))
        p("Wall time per open+close pair (all 128 threads together): chunkfs %.1f µs, ext4 "
          "%.1f µs." % (c / ops * 1e6, e / ops * 1e6))
        p()
        if ("fuse-null", 128) in s:
            n = med(s[("fuse-null", 128)])
            headline.append("open/close floor: a do-nothing FUSE filesystem %.2f s = %.1fx ext4; "
                            "chunkfs %.1fx of it" % (n, n / e, c / n))
    prof = read("openclose-perf-dso.txt")
    if prof:
        p("Where the daemon's time goes (`perf record -g -p <chunkfs pid>` during a "
          "128-set run, by object, then the top symbols):")
        p()
        p("```")
        p(prof.rstrip())
        p()
        p("\n".join(read("openclose-perf.txt").rstrip().splitlines()[:25]))
        p("```")
        p()

# ---- 5. metadata ----------------------------------------------------------------------------
if os.path.exists(os.path.join(D, "meta.csv")):
    R = rows(os.path.join(D, "meta.csv"))
    s = {}
    for r in R:
        s.setdefault((r["target"], r["op"]), []).append(float(r["seconds"]))
    nf = max((int(r["files"]) for r in R), default=0)
    p("## 5. Metadata: %d chunk files" % nf)
    p()
    p("`bench/meta_bench.c`: create %d files (each fallocated to 64 KiB: one 1 MiB "
      "allocation unit on chunkfs), stat them all, remove them. chunkfs: the store is "
      "unmounted after the stats and mounted again; mount time runs from starting "
      "`chunkfs -f` to the first stat of a file through the mount succeeding "
      "(\"mount-empty\": the same on the freshly made empty store). Seconds; target: mount "
      "under 1 s." % nf)
    p()
    ops = ["create", "stat", "mount-empty", "mount", "stat-after-mount", "remove"]
    tg = ["chunkfs", "ext4", "tmpfs"]
    body = []
    for o in ops:
        if not any((t, o) in s for t in tg):
            continue
        body.append([o] + ["%.3f" % med(s[(t, o)]) if (t, o) in s else "-" for t in tg] +
                    ["%.0f" % (med(s[("chunkfs", o)]) / nf * 1e6) if ("chunkfs", o) in s and
                     not o.startswith("mount") else "-"])
    table(["operation", "chunkfs s", "ext4 s", "tmpfs s", "chunkfs µs per file"], body)
    if ("chunkfs", "mount") in s:
        v = med(s[("chunkfs", "mount")])
        headline.append("mount of a store holding %d chunk files: %.3f s (target 1 s: %s)" % (
            nf, v, "met" if v < 1 else "**not met**"))

# ---- 6. statistics overhead ----------------------------------------------------------------
st = read("stats.txt")
if st:
    p("## 6. Statistics overhead")
    p()
    p("`bench/stats-overhead.sh`: chunkfs built normally and with `CFS_NO_STATS=1`, "
      "alternately mounted on one image; fio 4 KiB random read QD32. Its summary:")
    p()
    p("```")
    p(st.strip())
    p("```")
    p()
    import re
    for l in st.splitlines():
        g = re.match(r"statistics cost: (\S+) of IOPS .*?, (\S+ us) of daemon CPU per request \((\S+)\)", l)
        if g:
            headline.append("statistics: IOPS cost %s (target at most 3%%), daemon CPU %s per "
                            "request (%s)" % g.groups())

# ---- 7. PostgreSQL --------------------------------------------------------------------------
pg = read("pgbench.txt")
if pg:
    p("## 7. PostgreSQL: pgbench, tablespace on chunkfs vs on ext4")
    p()
    p("`bench/pgbench.sh` (bench/README.md). Its summary:")
    p()
    p("```")
    p(pg.strip())
    p("```")
    p()
    import re
    for l in pg.splitlines():
        g = re.match(r"\s*ratio chunkfs/ext4: (\S+) \(of medians\), (\S+) \(median of paired", l)
        if g:
            headline.append("pgbench chunkfs/ext4: %s of medians, %s paired (target 0.8x)" % g.groups())
        if l.startswith("skipped"):
            headline.append("pgbench: " + l)

# ---- 7-11. the databases: bench/dbpair.sh's long CSVs ----------------------------------
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dbsummary  # noqa: E402

# the goals for the databases: (case, metric) -> (kind, value); "ratio>="
# and "ratio<=" compare chunkfs/ext4 of the medians, "abs<=" chunkfs's
# median, "ext4<=" says chunkfs may not have more than ext4
DB_TARGETS = {
    ("pgbench", "tps"): ("ratio>=", 0.9), ("pgbench", "init_s"): ("ratio<=", 1.5),
    ("pgbench", "db_du"): ("ratio<=", 1.1),
    ("mariadb", "tps"): ("ratio>=", 0.9), ("mariadb", "prepare_s"): ("ratio<=", 1.5),
    ("mariadb", "datadir_du"): ("ratio<=", 1.1),
    ("smallappend", "append200_us"): ("abs<=", 30.0),
    ("sqlite", "wal_rows_s"): ("ratio>=", 0.5), ("sqlite", "rollback_rows_s"): ("ratio>=", 0.5),
    ("sqlite", "wal_busy"): ("ext4<=", 0), ("sqlite", "rollback_busy"): ("ext4<=", 0),
    ("sqlite", "rollback_mmap_busy"): ("ext4<=", 0),
    ("rocksdb", "fillrandom_ops"): ("ratio>=", 0.4),
}


def db_target(case, metric, e, k, ratio):
    """(text, met) of the goal for this row, or ("", None)."""
    t = DB_TARGETS.get((case, metric))
    if not t or k is None:
        return "", None
    kind, v = t
    if kind == "abs<=":
        return "<= %g" % v, k <= v
    if kind == "ext4<=":
        return "<= ext4's", e is not None and k <= e
    if ratio is None:
        return "", None
    return ("%s %gx" % (kind[5:], v), ratio >= v if kind == "ratio>=" else ratio <= v)


def db_table(case, csvfile):
    R = rows(csvfile)
    body = []
    for c, metric, unit, e, k, ratio, paired, n in dbsummary.summarize(R):
        text, met = db_target(c, metric, e, k, ratio)
        body.append([metric, unit, dbsummary.fmtu(e, unit), dbsummary.fmtu(k, unit),
                     (dbsummary.fmt(ratio) + "x") if ratio else "-",
                     (dbsummary.fmt(paired) + "x") if paired else "-",
                     dbsummary.better(unit), (text + (": met" if met else ": NOT met")) if text else ""])
        if text:
            headline.append("%s %s: chunkfs %s, ext4 %s%s (goal %s: %s)" % (
                case, metric, dbsummary.fmtu(k, unit), dbsummary.fmtu(e, unit),
                ", %sx" % dbsummary.fmt(ratio) if ratio else "", text, "met" if met else "NOT met"))
    table(["metric", "unit", "ext4", "chunkfs", "chunkfs/ext4", "paired", "better", "goal"], body)


if os.path.exists(os.path.join(D, "pgbench-db.csv")):
    p("pgbench's bulk load (`pgbench -i` with its checkpoint), the database's disk use after it "
      "(du) and the runs above, medians (`bench/dbpair.sh`'s long CSV, pgbench-db.csv):")
    p()
    db_table("pgbench", os.path.join(D, "pgbench-db.csv"))

DB_CASES = [
    ("mariadb", "8. MariaDB: sysbench oltp_read_write, datadir on chunkfs vs on ext4",
     "`bench/mariadb.sh`: MariaDB 10.11, innodb_buffer_pool_size 32M, O_DIRECT, native AIO; "
     "sysbench prepare (the bulk load), then oltp_read_write; the datadir's du after the run."),
    ("smallappend", "9. Small buffered writes",
     "`bench/smallappend.sh` (bench/small_append.c): buffered pwrite()s of 200 bytes and 4 KiB "
     "appended to a file, 200 bytes rewritten in place; microseconds per write, then one fsync."),
    ("sqlite", "10. SQLite: 4 writers, 2 readers",
     "`bench/sqlite.sh` (bench/sqlite_load.py): 4 writer processes inserting in transactions of "
     "100, 2 readers querying; WAL mode, rollback journal, rollback journal with mmap_size 256 MiB; "
     "SQLITE_BUSY counted after a 10 s busy timeout."),
    ("rocksdb", "11. RocksDB: db_bench",
     "`bench/rocksdb.sh`: db_bench fillrandom, overwrite, readrandom, direct I/O for flush and "
     "compaction, the write-ahead log buffered."),
]
for case, title, what in DB_CASES:
    txt = read(case + ".txt")
    csvfile = os.path.join(D, case + ".csv")
    if not txt and not os.path.exists(csvfile):
        continue
    p("## " + title)
    p()
    p(what + " Each on a chunkfs store and on ext4, images of the same size on the same disk, "
      "runs alternated; medians of the repetitions.")
    p()
    if os.path.exists(csvfile):
        db_table(case, csvfile)
    else:
        skipped = [l for l in txt.splitlines() if l.startswith("skipped")]
        p(skipped[0] if skipped else "(no results: see %s.log)" % case)
        p()
        headline.append("%s: %s" % (case, skipped[0] if skipped else "no results"))

# ---- 12. Ceph RBD: bench/rbd.sh's summary ----------------------------------------------
rb = read("rbd.txt")
if rb:
    p("## 12. Ceph RBD: chunkfs on an RBD store vs fio's rbd engine")
    p()
    skipped = [l for l in rb.splitlines() if l.startswith("skipped")]
    if skipped:
        p(skipped[0])
        p()
        headline.append("rbd: " + skipped[0])
    else:
        p("`bench/rbd.sh` (bench/README.md): one throw-away cluster on this machine (three OSDs, "
          "three replicas), fio on a chunk file of a store on one image and fio's rbd engine on a "
          "second image of the same size, alternated; the takeover time after kill -9 of the "
          "holder. Its summary (raw runs in rbd/):")
        p()
        p("```")
        p(rb.strip())
        p("```")
        p()
        for l in rb.splitlines():
            if l.startswith("goal "):
                headline.append("rbd " + l[5:])

# ---- 13. moving a chunk between the stores of a pool: bench/pool-move.sh's summary ----------
pm = read("poolmove.txt")
if pm:
    p("## 13. Moving a chunk between the stores of a pool")
    p()
    p("`bench/pool-move.sh` (bench/README.md): two stores of one pool on image files on this "
      "disk; a chunk moved unthrottled against dd of the same bytes, a 4 KiB randrw QD16 load on "
      "another chunk without and during moves, the daemon's memory while a sparse chunk moves. "
      "Its summary (data in poolmove/):")
    p()
    p("```")
    p(pm.strip())
    p("```")
    p()
    for l in pm.splitlines():
        if l.startswith("goal "):
            headline.append("poolmove " + l[5:])

# ---- the run itself -------------------------------------------------------------------
tm = read("timings.csv")
if tm:
    p("## The run")
    p()
    body = [l.split(",") for l in tm.strip().splitlines()[1:]]
    table(["case", "seconds"], body + [["total", str(sum(int(b[1]) for b in body))]])
mo = read("mounts.txt")
if mo:
    p("Mounts seen during the run (`/proc/mounts`, sampled every 2 s; paths under the "
      "run's scratch directory):")
    p()
    p("```")
    seen = set()
    for l in mo.splitlines():
        f = l.split()
        key = (f[2], f[3]) if len(f) > 3 else l
        if key not in seen:
            seen.add(key)
            p(l)
    p("```")
    p()

out[summary_at:summary_at] = (["## Headlines", ""] + ["- " + h for h in headline] + [""]
                              if headline else [])
with open(os.path.join(D, "report.md"), "w") as f:
    f.write("\n".join(out) + "\n")
print(os.path.join(D, "report.md"))
