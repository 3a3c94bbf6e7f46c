#!/usr/bin/env bash
# bench/smallappend.sh — small buffered writes on chunkfs against ext4, on
# the same disk, in the same run (bench/dbpair.sh): bench/small_append
# appending 200-byte and 4 KiB records to a file, and rewriting 200-byte
# records in place; microseconds per write (each write timed, the fsync
# after them timed on its own). Each repetition runs the three on both
# filesystems, in alternating order.
#
# usage: bench/smallappend.sh [-n reps] [-w writes] [-N] [-S image-size] [-d dir]
#                             [-o out.csv] [-O chunkfs-opts]
#   -n  repetitions (default 5)     -w  writes per run (default 20000)
#   -N  also the FUSE floor: the same writes on bench/fuse_null (fs
#       "fuse-null": every write answered at once, nothing stored), in each
#       repetition, first or last in turn; /dev/fuse only
#   -S  size of each image (2G)     -d  directory of the images (/var/tmp)
#   -o  long CSV (bench/dbpair.sh; default bench/results/smallappend-<time>/smallappend-<time>.csv)
#   -O  extra -o options for chunkfs
# Needs root, mkfs.ext4; make bench-build first.
set -euo pipefail

reps=5 writes=20000 size=2G floor=0
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/dbpair.sh"
dbpair_options smallappend.sh "w:writes N=floor" "$@"

export CFS_TEST_TMPDIR=$dir
. "$root/tests/lib/common.sh"
# bench_wait_mount only: the cleanup stack is common.sh's (cfs_defer)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
cfs_require_fuse
programs=(small_append)
((floor)) && programs+=(fuse_null)
dbpair_start smallappend "${programs[@]/#/bench/}"
if ((floor)); then
	# Every name on it is a file of 1 GiB (writes past its end fail).
	DBPAIR_DIR[fuse-null]=$CFS_WORK/fuse-null
	mkdir -p "${DBPAIR_DIR[fuse-null]}"
	"$CFS_BIN/fuse_null" -s 1g "${DBPAIR_DIR[fuse-null]}" >"$CFS_WORK/fuse-null.log" 2>&1 &
	null_pid=$!
	cfs_defer "umount '${DBPAIR_DIR[fuse-null]}' 2>/dev/null || umount -l '${DBPAIR_DIR[fuse-null]}' 2>/dev/null; wait $null_pid 2>/dev/null"
	bench_wait_mount "${DBPAIR_DIR[fuse-null]}" $null_pid "$CFS_WORK/fuse-null.log" 10 ||
		cfs_fail "fuse_null did not mount"
fi
# name mode size
cases=("append200 append 200" "append4k append 4096" "overwrite200 overwrite 200")
for ((r = 1; r <= reps; r++)); do
	o=1
	targets=$(dbpair_order $r)
	if ((floor)); then
		if ((r % 2)); then targets="fuse-null $targets"; else targets+=" fuse-null"; fi
	fi
	for fs in $targets; do
		for c in "${cases[@]}"; do
			read -r name mode bytes <<<"$c"
			args=(-m "$mode" -s "$bytes" -n "$writes")
			[ "$fs" != fuse-null ] || args+=(-x)
			line=$("$CFS_BIN/small_append" "${args[@]}" "${DBPAIR_DIR[$fs]}/log") ||
				cfs_fail "small_append $c on $fs"
			IFS=, read -r _ _ _ us p50 p99 _ _ fsync_ms <<<"$line"
			dbpair_row "$out" smallappend "${name}_us" us $r $o "$fs" "$us"
			if [ "$fs" = fuse-null ]; then
				printf '# rep %d: %-9s %-12s %8.2f us/write (p50 %.2f, p99 %.2f)\n' \
					$r "$fs" "$name" "$us" "$p50" "$p99"
				continue
			fi
			dbpair_row "$out" smallappend "${name}_fsync_ms" ms $r $o "$fs" "$fsync_ms"
			printf '# rep %d: %-9s %-12s %8.2f us/write (p50 %.2f, p99 %.2f), fsync %.2f ms\n' \
				$r "$fs" "$name" "$us" "$p50" "$p99" "$fsync_ms"
		done
		o=$((o + 1))
	done
done
echo "# bench/small_append, $writes buffered writes per run, one fsync after them"
dbpair_summary "$out"
echo "# CSV: $out"
