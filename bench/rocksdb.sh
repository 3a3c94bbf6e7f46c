#!/usr/bin/env bash
# bench/rocksdb.sh — RocksDB (Debian's rocksdb-tools: db_bench) on chunkfs
# against ext4, on the same disk, in the same run (bench/dbpair.sh):
# fillrandom, overwrite and readrandom of KEYS keys (100-byte values, no
# compression, one thread) into a new database, direct I/O for flush and
# compaction, the write-ahead log appended with buffered writes (RocksDB's
# default, not synced per write); ops/s of each. Each repetition runs on
# both filesystems, in alternating order, from an empty database.
#
# usage: bench/rocksdb.sh [-n reps] [-k keys] [-S image-size] [-d dir]
#                         [-o out.csv] [-O chunkfs-opts]
#   -n  repetitions (default 3)      -k  keys (default 100000)
#   -S  size of each image (4G)      -d  directory of the images (/var/tmp)
#   -o  long CSV (bench/dbpair.sh; default bench/results/rocksdb-<time>/rocksdb-<time>.csv)
#   -O  extra -o options for chunkfs
# Needs root, db_bench (apt-get install rocksdb-tools), mkfs.ext4; make first.
set -euo pipefail

reps=3 keys=100000 size=4G
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/dbpair.sh"
dbpair_options rocksdb.sh "k:keys" "$@"

export CFS_TEST_TMPDIR=$dir
. "$root/tests/lib/common.sh"
cfs_require_fuse
command -v db_bench >/dev/null || cfs_skip "no db_bench (Debian: apt-get install rocksdb-tools)"
dbpair_start rocksdb
benchmarks=fillrandom,overwrite,readrandom
for ((r = 1; r <= reps; r++)); do
	o=1
	for fs in $(dbpair_order $r); do
		db=${DBPAIR_DIR[$fs]}/rocksdb
		rm -rf "$db"
		log=$CFS_WORK/db_bench-$fs-$r.log
		db_bench --benchmarks=$benchmarks --num="$keys" --db="$db" --value_size=100 \
			--compression_type=none --threads=1 --use_direct_io_for_flush_and_compaction=true \
			--statistics=0 >"$log" 2>&1 || { tail -n 30 "$log" >&2; cfs_fail "db_bench on $fs"; }
		for b in ${benchmarks//,/ }; do
			ops=$(sed -nE "s/^$b +: +[0-9.]+ micros\/op ([0-9]+) ops\/sec.*/\1/p" "$log")
			[ -n "$ops" ] || { cat "$log" >&2; cfs_fail "no $b line in db_bench's output"; }
			dbpair_row "$out" rocksdb "${b}_ops" ops/s $r $o "$fs" "$ops"
			printf '# rep %d: %-7s %-10s %9d ops/s\n' $r "$fs" "$b" "$ops"
		done
		o=2
	done
done
echo "# db_bench $benchmarks, $keys keys, 100-byte values, direct I/O for flush and compaction"
dbpair_summary "$out"
echo "# CSV: $out"
