#!/usr/bin/env bash
# bench/dio-inval.sh — what an O_DIRECT write costs when the file also has
# buffered opens: chunkfs then sends it through the kernel's own direct path
# and answers it only after the page-cache worker (fs/fuse/dio_inval.c) has
# dropped its range from the page cache. fio, 4 KiB random O_DIRECT writes
# through io_uring at QD32 and QD1, one job, on a file written in full first:
# a chunk of chunkfs on an image file, and a file on the disk filesystem
# that holds the image (ext4: the kernel drops the range itself). Each in
# three states:
#   alone   the O_DIRECT open is the file's only one (chunkfs answers it
#           FOPEN_DIRECT_IO: no page cache, nothing to drop);
#   open    another process holds a buffered open of the file, nothing cached;
#   cached  the same, with the whole file read into the page cache just
#           before the run (the writes drop what they cover as they go).
# Every repetition visits the targets in a rotated order, so drift on a
# shared machine lands on all of them; the summary gives medians of IOPS and
# p50 latency, and each state's IOPS as a ratio to `alone` on the same
# filesystem (of medians, and the median of the per-repetition ratios).
#
# usage: bench/dio-inval.sh [-n reps] [-r seconds] [-s size] [-d dir] [-o out.csv]
#   -n  repetitions (default 3)         -r  seconds per fio run (default 5)
#   -s  the file's size (default 256M)  -d  directory on a disk filesystem (/var/tmp)
#   -o  CSV (default bench/results/dio-inval-<time>/dio-inval-<time>.csv)
# Environment: BUILD (default release). Needs root, fio, python3; make first.
set -euo pipefail

reps=3
runtime=5
size=256M
dir=/var/tmp
out=
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-release}
BENCH_NAME=dio-inval
. "$root/bench/lib.sh"

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }
while getopts "n:r:s:d:o:h" opt; do
	case $opt in
	n) reps=$OPTARG ;;
	r) runtime=$OPTARG ;;
	s) size=$OPTARG ;;
	d) dir=$OPTARG ;;
	o) out=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || bench_die "needs root (FUSE mounts)"
command -v fio >/dev/null || bench_die "needs fio"
command -v python3 >/dev/null || bench_die "needs python3"
bin=$root/build/$BUILD
[ -x "$bin/chunkfs" ] && [ -x "$bin/mkchunkfs" ] || bench_die "make first (no $bin/chunkfs)"

stamp=$(date -u +%Y%m%d-%H%M%S)
[ -n "$out" ] || out=$root/bench/results/dio-inval-$stamp/dio-inval-$stamp.csv
mkdir -p "$(dirname "$out")"
work=$(mktemp -d "$dir/cfs-dio-inval.XXXXXX")
trap 'bench_cleanup; rm -rf "$work"' EXIT
trap 'exit 143' TERM INT
# Copies: a rebuild in the tree during the run does not change what is measured.
cp "$bin/chunkfs" "$bin/mkchunkfs" "$work/"
bench_sysinfo "$root" "$dir" >"${out%.csv}.system.txt"

size_bytes=$(numfmt --from=iec "$size")
truncate -s $((size_bytes * 2 + (256 << 20))) "$work/store.img"
"$work/mkchunkfs" -q "$work/store.img" >/dev/null
bench_cfs_mount "$work/chunkfs" "$work/store.img" "$work/mnt"
mkdir -p "$work/ext4"
declare -A file=([chunkfs]=$work/mnt/f [ext4]=$work/ext4/f)
for fs in chunkfs ext4; do
	fio --name=fill --filename="${file[$fs]}" --size="$size" --rw=write --bs=1M --direct=1 \
		--ioengine=io_uring --iodepth=8 --output=/dev/null || bench_die "fill ${file[$fs]}"
done

holder=
hold_open() { # file: a buffered open in another process until release_open
	local i
	sleep infinity <"$1" &
	holder=$!
	for i in $(seq 100); do # open before fio's: that decides fio's path
		[ "$(readlink "/proc/$holder/fd/0" 2>/dev/null)" = "$1" ] && return 0
		sleep 0.01
	done
	bench_die "the buffered open of $1 did not happen"
}
uncache() { # file: its pages out of the page cache (the file's, not the machine's)
	python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)' "$1"
}
release_open() {
	[ -z "$holder" ] || { kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null || true; }
	holder=
}
bench_defer release_open

run_fio() { # file depth: "iops p50_us"
	fio --name=w --filename="$1" --size="$size" --rw=randwrite --bs=4k --direct=1 \
		--ioengine=io_uring --iodepth="$2" --runtime="$runtime" --time_based \
		--output-format=json | python3 -c 'import json, sys
w = json.load(sys.stdin)["jobs"][0]["write"]
print("%.0f %.1f" % (w["iops"], w["clat_ns"]["percentile"]["50.000000"] / 1000))'
}

echo "rep,fs,state,depth,iops,p50_us" >"$out"
targets=(chunkfs:alone chunkfs:open chunkfs:cached ext4:alone ext4:open ext4:cached)
for ((r = 1; r <= reps; r++)); do
	for t in $(bench_rotate $((r - 1)) "${targets[@]}"); do
		fs=${t%%:*} state=${t#*:}
		f=${file[$fs]}
		uncache "$f"
		[ "$state" = alone ] || hold_open "$f"
		for depth in 32 1; do
			[ "$state" != cached ] || cat "$f" >/dev/null
			read -r iops p50 < <(run_fio "$f" "$depth")
			echo "$r,$fs,$state,$depth,$iops,$p50" >>"$out"
			bench_log "rep $r: $fs $state QD$depth: $iops IOPS, p50 $p50 us"
		done
		release_open
	done
done

python3 - "$out" <<'PY' | tee "${out%.csv}.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = statistics.median
print("%-8s %-7s %5s %10s %9s %9s %9s" % ("fs", "state", "depth", "IOPS", "p50_us", "vs_alone", "(paired)"))
for fs in ("chunkfs", "ext4"):
    for depth in ("32", "1"):
        alone = {r["rep"]: float(r["iops"]) for r in rows
                 if r["fs"] == fs and r["depth"] == depth and r["state"] == "alone"}
        for state in ("alone", "open", "cached"):
            sel = [r for r in rows if r["fs"] == fs and r["depth"] == depth and r["state"] == state]
            if not sel:
                continue
            iops = med(float(r["iops"]) for r in sel)
            p50 = med(float(r["p50_us"]) for r in sel)
            ratio = iops / med(alone.values()) if alone else float("nan")
            paired = med(float(r["iops"]) / alone[r["rep"]] for r in sel if r["rep"] in alone)
            print("%-8s %-7s %5s %10.0f %9.1f %8.2fx %8.2fx" % (fs, state, depth, iops, p50, ratio, paired))
print("medians of %d repetitions" % len({r["rep"] for r in rows}))
PY
echo "# CSV: $out"
