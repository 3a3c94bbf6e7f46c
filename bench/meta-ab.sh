#!/usr/bin/env bash
# bench/meta-ab.sh — the metadata engine of two chunkfs binaries in one run:
# many chunk files created, stat'ed, mounted again (snapshot load: every
# inode and entry back into the namespace's tables) and removed, through
# bench/meta_bench.c, with A and B alternating (A B, then B A, ...) so drift
# on a shared machine lands on both. Each variant has its own image, made
# anew for every repetition by this tree's mkchunkfs.
#
# usage: bench/meta-ab.sh -B chunkfs [-n reps] [-f files] [-d dir] [-R resultdir]
#   -B  the other chunkfs binary (B); A is this tree's (CFS_BIN, default
#       build/release)
#   -n  repetitions (default 5)
#   -f  chunk files per repetition (default 10000), 64 KiB each
#   -d  directory for the images, on a disk filesystem (default /var/tmp)
#   -R  directory for meta-ab.csv and the table (default
#       bench/results/meta-ab-<time>/, the run's folder: notes.md beside them)
# Output: per operation the median seconds of A and of B and B/A (above 1: B
# is slower). Needs root (FUSE mounts). Nothing is left mounted.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
BENCH_NAME=meta-ab
bin=${CFS_BIN:-$root/build/release}
reps=5 files=10000 dir=/var/tmp resdir= bin_b=

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }
while getopts "B:n:f:d:R:h" opt; do
	case $opt in
	B) bin_b=$OPTARG ;;
	n) reps=$OPTARG ;;
	f) files=$OPTARG ;;
	d) dir=$OPTARG ;;
	R) resdir=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || bench_die "needs root (FUSE mounts)"
[ -n "$bin_b" ] || bench_die "-B: the chunkfs binary to compare with"
[ -x "$bin_b" ] || bench_die "$bin_b is not executable"
for b in chunkfs mkchunkfs bench/meta_bench; do
	[ -x "$bin/$b" ] || bench_die "build first (make all bench-build): no $bin/$b"
done
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || bench_die "-n wants a count"
[[ "$files" =~ ^[1-9][0-9]*$ ]] || bench_die "-f wants a count"
resdir=${resdir:-$root/bench/results/meta-ab-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$resdir"
work=$(mktemp -d "$dir/cfs-meta-ab.XXXXXX")
trap 'bench_cleanup; rm -rf "$work"' EXIT
trap 'exit 143' TERM INT

declare -A exe=([A]=$bin/chunkfs [B]=$bin_b)
{
	bench_sysinfo "$root" "$dir"
	echo "A: ${exe[A]}"
	echo "B: ${exe[B]}"
	echo "files: $files x 64 KiB, repetitions: $reps"
} >"$resdir/sysinfo.txt"
csv=$resdir/meta-ab.csv
echo "variant,op,files,rep,seconds" >"$csv"

runl() { bench_run "$@" >"$work/line"; line=$(<"$work/line"); }

one() { # variant rep
	local v=$1 rep=$2 img=$work/$1.img m=$work/$1-mnt pid op
	mkdir -p "$m"
	"$bin/mkchunkfs" -q -f -s $(((files + 2048) << 20)) -m 64M --sparse "$img" >/dev/null
	runl "$bin/bench/meta_bench" mount "$m" . -- "${exe[$v]}" -f "$img" "$m" 2>>"$work/$v.log"
	pid=${line##*,}
	bench_defer "bench_umount '$m' $pid"
	echo "$v,mount-empty,0,$rep,$(cut -d, -f3 <<<"$line")" >>"$csv"
	for op in create stat; do
		runl "$bin/bench/meta_bench" "$op" -s 65536 "$files" "$m"
		echo "$v,$op,$files,$rep,$(cut -d, -f3 <<<"$line")" >>"$csv"
	done
	bench_undo "bench_umount '$m' $pid"
	runl "$bin/bench/meta_bench" mount "$m" "c$(printf %05d $((files - 1)))" -- \
		"${exe[$v]}" -f "$img" "$m" 2>>"$work/$v.log"
	pid=${line##*,}
	bench_defer "bench_umount '$m' $pid"
	echo "$v,mount,$files,$rep,$(cut -d, -f3 <<<"$line")" >>"$csv"
	for op in stat remove; do
		runl "$bin/bench/meta_bench" "$op" "$files" "$m"
		echo "$v,$op-after-mount,$files,$rep,$(cut -d, -f3 <<<"$line")" >>"$csv"
	done
	bench_undo "bench_umount '$m' $pid"
	rm -f "$img"
}

for rep in $(seq "$reps"); do
	order="A B"
	[ $((rep % 2)) = 0 ] && order="B A"
	for v in $order; do
		one "$v" "$rep"
	done
	bench_log "rep $rep: $(grep ",$rep," "$csv" | cut -d, -f1,2,5 | tr '\n' ' ')"
done

python3 - "$csv" >"$resdir/table.txt" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ops = []
for r in rows:
    if r["op"] not in ops:
        ops.append(r["op"])
print(f"{'op':<22}{'A median s':>12}{'B median s':>12}{'B/A':>8}")
for op in ops:
    med = {v: statistics.median(float(r["seconds"]) for r in rows if r["op"] == op and r["variant"] == v)
           for v in "AB"}
    ratio = med["B"] / med["A"] if med["A"] > 0 else float("nan")
    print(f"{op:<22}{med['A']:>12.4f}{med['B']:>12.4f}{ratio:>8.3f}")
EOF
cat "$resdir/table.txt"
echo "results: $resdir" >&2
