#!/usr/bin/env bash
# bench/sqlite.sh — SQLite 3.40 on chunkfs against ext4, on the same disk,
# in the same run (bench/dbpair.sh): bench/sqlite_load.py with 4 writer
# processes x ROWS rows in transactions of 100 and 2 readers, in WAL mode,
# with the rollback journal, and with the rollback journal and mmap_size
# 256 MiB (the database grows by ftruncate then); rows/s and the
# SQLITE_BUSY errors (after a 10 s busy timeout) of writers and readers.
# Each repetition runs the three on both filesystems, in alternating order.
#
# usage: bench/sqlite.sh [-n reps] [-r rows] [-S image-size] [-d dir]
#                        [-o out.csv] [-O chunkfs-opts]
#   -n  repetitions (default 3)      -r  rows per writer (default 20000)
#   -S  size of each image (2G)      -d  directory of the images (/var/tmp)
#   -o  long CSV (bench/dbpair.sh; default bench/results/sqlite-<time>/sqlite-<time>.csv)
#   -O  extra -o options for chunkfs
# Needs root, python3, mkfs.ext4; make first.
set -euo pipefail

reps=3 rows=20000 size=2G
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/dbpair.sh"
dbpair_options sqlite.sh "r:rows" "$@"

export CFS_TEST_TMPDIR=$dir
. "$root/tests/lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3
python3 -c 'import sqlite3' || cfs_skip "python3 without its sqlite3 module"
dbpair_start sqlite
# name journal mmap_size
cases=("wal wal 0" "rollback delete 0" "rollback_mmap delete 268435456")
for ((r = 1; r <= reps; r++)); do
	o=1
	for fs in $(dbpair_order $r); do
		for c in "${cases[@]}"; do
			read -r name journal mmap <<<"$c"
			line=$(python3 "$root/bench/sqlite_load.py" -j "$journal" -m "$mmap" -r "$rows" \
				"${DBPAIR_DIR[$fs]}/bench.db") || cfs_fail "sqlite_load $c on $fs"
			IFS=, read -r _ _ _ _ _ secs rate bw br nq <<<"$line"
			dbpair_row "$out" sqlite "${name}_rows_s" rows/s $r $o "$fs" "$rate"
			dbpair_row "$out" sqlite "${name}_busy" count $r $o "$fs" $((bw + br))
			printf '# rep %d: %-7s %-14s %9.1f rows/s (%.2f s), SQLITE_BUSY: %d writers, %d readers; %d reader queries\n' \
				$r "$fs" "$name" "$rate" "$secs" "$bw" "$br" "$nq"
		done
		o=2
	done
done
echo "# bench/sqlite_load.py (SQLite $(python3 -c 'import sqlite3; print(sqlite3.sqlite_version)')):" \
	"4 writers x $rows rows in transactions of 100, 2 readers, busy timeout 10 s"
dbpair_summary "$out"
echo "# CSV: $out"
