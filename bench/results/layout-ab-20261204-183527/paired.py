# Paired A/B of perf.sh's CSV: per repetition cfs-img / cfsB-img (IOPS), median.
import csv, statistics, sys
rows = [l.rstrip("\n").split(",") for l in open(sys.argv[1]) if not l.startswith("#")]
data = {}
for r in rows[1:]:
    data.setdefault((r[1], r[0]), {})[int(r[2])] = float(r[3])
for case in sorted({c for c, _ in data}):
    a, b = data.get((case, "cfs-img")), data.get((case, "cfsB-img"))
    if not a or not b:
        continue
    ratios = [a[k] / b[k] for k in sorted(a) if k in b]
    print(f"{case:<12} A/B per repetition {' '.join(f'{x:.2f}' for x in ratios)}  median {statistics.median(ratios):.3f}")
