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

reps=5 writes=20000 size=2G
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/dbpair.sh"
dbpair_options smallappend.sh "w:writes" "$@"

export CFS_TEST_TMPDIR=$dir
. "$root/tests/lib/common.sh"
cfs_require_fuse
dbpair_start smallappend bench/small_append
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
