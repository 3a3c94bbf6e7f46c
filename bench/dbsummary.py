#!/usr/bin/env python3
"""bench/dbsummary.py CSV... — medians and same-run ratios of the database
benchmarks' long CSVs (bench/dbpair.sh: rev,case,metric,unit,rep,order,fs,
value), one line per case and metric:

    case metric unit  ext4-median  chunkfs-median  ratio-of-medians  paired

ratio = chunkfs / ext4 for every unit; "better" says which way is better
(higher for rates, lower for times and bytes). paired = the median of the
per-repetition ratios (the two runs of one repetition ran back to back).
bench/plot-report.py imports summarize() for the report's tables.

bench/dbsummary.py --ab CSV... — the same for two builds of chunkfs in one
CSV (bench/build-ab.sh), side by side, with chunkfs B/A.

Rows of fs "fuse-null" (bench/smallappend.sh -N: the same writes on
bench/fuse_null, the FUSE round trip with nothing behind it) add a table of
chunkfs against that floor: both medians, chunkfs minus the floor, and the
paired ratio.
"""
import csv
import statistics
import sys

HIGHER_BETTER = {"tps", "rows/s", "ops/s", "MB/s", "qps", "iops"}


def better(unit):
    return "higher" if unit in HIGHER_BETTER else "lower"


def load(paths):
    out = []
    for p in paths:
        with open(p) as f:
            out += list(csv.DictReader(l for l in f if not l.startswith("#")))
    return out


def summarize(rows):
    """[(case, metric, unit, ext4_median, chunkfs_median, ratio, paired, n)]"""
    keys = []
    for r in rows:
        k = (r["case"], r["metric"], r["unit"])
        if k not in keys:
            keys.append(k)
    res = []
    for k in keys:
        sel = [r for r in rows if (r["case"], r["metric"], r["unit"]) == k]
        by = {fs: {r["rep"]: float(r["value"]) for r in sel if r["fs"] == fs}
              for fs in ("ext4", "chunkfs")}
        m = {fs: statistics.median(v.values()) if v else None for fs, v in by.items()}
        ratio = m["chunkfs"] / m["ext4"] if m["ext4"] and m["chunkfs"] is not None else None
        pairs = [by["chunkfs"][rep] / by["ext4"][rep] for rep in by["ext4"]
                 if rep in by["chunkfs"] and by["ext4"][rep]]
        paired = statistics.median(pairs) if pairs else None
        res.append(k + (m["ext4"], m["chunkfs"], ratio, paired,
                        max(len(by["ext4"]), len(by["chunkfs"]))))
    return res


def fmt(v):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return "%.0f" % v
    if abs(v) >= 10:
        return "%.1f" % v
    return "%.3g" % v


def fmtu(v, unit):
    """fmt, with bytes shown in MiB."""
    if unit == "bytes" and v is not None:
        return "%.1f MiB" % (v / 1048576)
    return fmt(v)


FLOOR = "fuse-null"


def print_floor(rows, label=""):
    """chunkfs against the FUSE floor, for the metrics that have one."""
    keys = []
    for r in rows:
        k = (r["case"], r["metric"], r["unit"])
        if r["fs"] == FLOOR and k not in keys:
            keys.append(k)
    if not keys:
        return
    print("# chunkfs against %s, the FUSE round trip alone%s" % (FLOOR, label))
    print("%-12s %-22s %-7s %10s %10s %10s %8s" %
          ("case", "metric", "unit", FLOOR, "chunkfs", "difference", "paired"))
    for k in keys:
        sel = [r for r in rows if (r["case"], r["metric"], r["unit"]) == k]
        by = {fs: {r["rep"]: float(r["value"]) for r in sel if r["fs"] == fs}
              for fs in (FLOOR, "chunkfs")}
        if not by["chunkfs"]:
            continue
        f = statistics.median(by[FLOOR].values())
        c = statistics.median(by["chunkfs"].values())
        pairs = [by["chunkfs"][rep] / by[FLOOR][rep] for rep in by[FLOOR]
                 if rep in by["chunkfs"] and by[FLOOR][rep]]
        print("%-12s %-22s %-7s %10s %10s %10s %8s" %
              (k + (fmt(f), fmt(c), fmt(c - f),
                    fmt(statistics.median(pairs)) + "x" if pairs else "-")))


def main_ab(paths):
    """Two builds in one CSV (bench/build-ab.sh: rev "A:..." and "B:..."):
    per case and metric the medians of each build and of ext4 beside it,
    chunkfs B/A, and each build against its ext4."""
    rows = load(paths)
    revs = sorted({r["rev"] for r in rows})
    if len(revs) != 2:
        raise SystemExit("dbsummary --ab: %d builds in the CSV, want 2" % len(revs))
    res = {rev: {k[:3]: k[3:] for k in summarize([r for r in rows if r["rev"] == rev])}
           for rev in revs}
    a, b = revs
    print("# A = %s, B = %s (medians; each against the ext4 of its own runs)" % (a, b))
    print("%-12s %-22s %-7s %10s %10s %8s %10s %10s %8s %8s" %
          ("case", "metric", "unit", "ext4(A)", "chunkfs A", "A/ext4", "ext4(B)", "chunkfs B",
           "B/ext4", "B/A"))
    for k in res[a]:
        if k not in res[b]:
            continue
        ea, ka, ra = res[a][k][:3]
        eb, kb, rb = res[b][k][:3]
        print("%-12s %-22s %-7s %10s %10s %8s %10s %10s %8s %8s" %
              (k + (fmtu(ea, k[2]), fmtu(ka, k[2]), fmt(ra) + "x" if ra else "-",
                    fmtu(eb, k[2]), fmtu(kb, k[2]), fmt(rb) + "x" if rb else "-",
                    fmt(kb / ka) + "x" if ka and kb is not None else "-")))
    for rev in revs:
        print_floor([r for r in rows if r["rev"] == rev], " (%s)" % rev)


def main():
    if sys.argv[1:2] == ["--ab"]:
        main_ab(sys.argv[2:])
        return
    rows = load(sys.argv[1:])
    print("%-12s %-22s %-7s %12s %12s %8s %8s %s" %
          ("case", "metric", "unit", "ext4", "chunkfs", "ratio", "paired", "(medians; better)"))
    for c, met, unit, e, k, ratio, paired, n in summarize(rows):
        print("%-12s %-22s %-7s %12s %12s %8s %8s %s, %d reps" %
              (c, met, unit, fmtu(e, unit), fmtu(k, unit), fmt(ratio) + "x" if ratio else "-",
               fmt(paired) + "x" if paired else "-", better(unit), n))
    print_floor(rows)


if __name__ == "__main__":
    main()
