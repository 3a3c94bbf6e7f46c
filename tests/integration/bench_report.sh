#!/usr/bin/env bash
# bench_report.sh — the benchmark report in the repository is what
# bench/plot-report.py makes of the results beside it: the newest full
# `make bench` run's report.md is made again from its CSVs and tables in a
# copy and must come out the same, line for line, with every section and
# chart. So the README's headline numbers trace back to the raw results, and
# a change to the report generator that drops or breaks a section fails
# here (then make the report again and say why in the commit).
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
cfs_require_cmd python3
cfs_require_cmd gnuplot

run=$(ls -d "$CFS_ROOT"/bench/results/run-????????-?????? 2>/dev/null | sort | tail -n 1)
[ -n "$run" ] || cfs_fail "no full run in bench/results"
cfs_log "report of $(basename "$run")"
cp -r "$run" "$CFS_WORK/run"
rm -f "$CFS_WORK/run/report.md" "$CFS_WORK"/run/*.png
python3 "$CFS_ROOT/bench/plot-report.py" "$CFS_WORK/run" >/dev/null ||
	cfs_fail "plot-report.py failed"
diff -u "$run/report.md" "$CFS_WORK/run/report.md" ||
	cfs_fail "$(basename "$run")/report.md is not what plot-report.py makes of its data"

for section in "## Headlines" "## 1. Raw matrix" "## 2. Temp-table checkpoints" \
	"## 3. Filesystem choice" "## 4. Open/close scaling" "## 5. Metadata" \
	"## 6. Statistics overhead" "## 7. PostgreSQL" "Mounts seen during the run"; do
	grep -qF "$section" "$CFS_WORK/run/report.md" || cfs_fail "report without \"$section\""
done
for chart in raw checkpoint fschoice openclose; do
	[ -s "$CFS_WORK/run/$chart.png" ] || cfs_fail "chart $chart.png not made"
	grep -qF "![$chart]($chart.png)" "$CFS_WORK/run/report.md" || cfs_fail "$chart.png not in the report"
done
cfs_log "ok"
