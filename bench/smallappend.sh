#!/usr/bin/env bash
# bench/smallappend.sh — small buffered writes on chunkfs against ext4, on
# the same disk, in the same run (bench/dbpair.sh): bench/small_append
# appending 200-byte and 4 KiB records to a file, and rewriting 200-byte
# records in place; microseconds per write (each write timed, the fsync
# after them timed on its own). Each repetition runs the three on both
# filesystems, in alternating order.
#
# usage: bench/smallappend.sh [-n reps] [-w writes] [-S image-size] [-d dir]
#                             [-o out.csv] [-O chunkfs-opts]
#   -n  repetitions (default 5)     -w  writes per run (default 20000)
#   -S  size of each image (2G)     -d  directory of the images (/var/tmp)
#   -o  long CSV (bench/dbpair.sh; default bench/results/smallappend-<time>/smallappend-<time>.csv)
#   -O  extra -o options for chunkfs
# Needs root, mkfs.ext4; make bench-build first.
set -euo pipefail

reps=5
writes=20000
size=2G
dir=/var/tmp
out=
cfs_opts=
root=$(cd "$(dirname "$0")/.." && pwd)

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }
while getopts "n:w:S:d:o:O:h" opt; do
	case $opt in
	n) reps=$OPTARG ;;
	w) writes=$OPTARG ;;
	S) size=$OPTARG ;;
	d) dir=$OPTARG ;;
	o) out=$OPTARG ;;
	O) cfs_opts=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
for v in reps writes; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "smallappend.sh: $v: not a positive number: ${!v}" >&2; exit 2; }
done

export CFS_TEST_TMPDIR=$dir
. "$root/tests/lib/common.sh"
. "$root/bench/dbpair.sh"
cfs_require_fuse
for b in chunkfs mkchunkfs bench/small_append; do
	[ -x "$CFS_BIN/$b" ] || { echo "smallappend.sh: make bench-build first ($CFS_BIN/$b)" >&2; exit 2; }
done
mkdir -p "$CFS_WORK/bin"
cp "$CFS_BIN/chunkfs" "$CFS_BIN/mkchunkfs" "$CFS_BIN/bench/small_append" "$CFS_WORK/bin/"
CFS_BIN=$CFS_WORK/bin
stamp=$(date -u +%Y%m%d-%H%M%S)
[ -n "$out" ] || out=$root/bench/results/smallappend-$stamp/smallappend-$stamp.csv
mkdir -p "$(dirname "$out")"

dbpair_mounts "$size" "$cfs_opts"
dbpair_csv_header "$out"
# name mode size
cases=("append200 append 200" "append4k append 4096" "overwrite200 overwrite 200")
for ((r = 1; r <= reps; r++)); do
	o=1
	for fs in $(dbpair_order $r); do
		for c in "${cases[@]}"; do
			read -r name mode bytes <<<"$c"
			line=$("$CFS_BIN/small_append" -m "$mode" -s "$bytes" -n "$writes" "${DBPAIR_DIR[$fs]}/log") ||
				cfs_fail "small_append $c on $fs"
			IFS=, read -r _ _ _ us p50 p99 _ _ fsync_ms <<<"$line"
			dbpair_row "$out" smallappend "${name}_us" us $r $o "$fs" "$us"
			dbpair_row "$out" smallappend "${name}_fsync_ms" ms $r $o "$fs" "$fsync_ms"
			printf '# rep %d: %-7s %-12s %8.2f us/write (p50 %.2f, p99 %.2f), fsync %.2f ms\n' \
				$r "$fs" "$name" "$us" "$p50" "$p99" "$fsync_ms"
		done
		o=2
	done
done
echo "# bench/small_append, $writes buffered writes per run, one fsync after them"
dbpair_summary "$out"
echo "# CSV: $out"
