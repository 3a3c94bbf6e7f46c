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

reps=3
keys=100000
size=4G
dir=/var/tmp
out=
cfs_opts=
root=$(cd "$(dirname "$0")/.." && pwd)

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }
while getopts "n:k:S:d:o:O:h" opt; do
	case $opt in
	n) reps=$OPTARG ;;
	k) keys=$OPTARG ;;
	S) size=$OPTARG ;;
	d) dir=$OPTARG ;;
	o) out=$OPTARG ;;
	O) cfs_opts=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
for v in reps keys; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "rocksdb.sh: $v: not a positive number: ${!v}" >&2; exit 2; }
done

export CFS_TEST_TMPDIR=$dir
. "$root/tests/lib/common.sh"
. "$root/bench/dbpair.sh"
cfs_require_fuse
command -v db_bench >/dev/null || cfs_skip "no db_bench (Debian: apt-get install rocksdb-tools)"
[ -x "$CFS_BIN/chunkfs" ] && [ -x "$CFS_BIN/mkchunkfs" ] || { echo "rocksdb.sh: make first" >&2; exit 2; }
mkdir -p "$CFS_WORK/bin"
cp "$CFS_BIN/chunkfs" "$CFS_BIN/mkchunkfs" "$CFS_WORK/bin/"
CFS_BIN=$CFS_WORK/bin
stamp=$(date -u +%Y%m%d-%H%M%S)
[ -n "$out" ] || out=$root/bench/results/rocksdb-$stamp/rocksdb-$stamp.csv
mkdir -p "$(dirname "$out")"

dbpair_mounts "$size" "$cfs_opts"
dbpair_csv_header "$out"
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
