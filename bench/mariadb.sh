#!/usr/bin/env bash
# bench/mariadb.sh — MariaDB 10.11 sysbench oltp_read_write with the whole
# datadir on chunkfs against the same on ext4, on the same disk, in the same
# run (bench/dbpair.sh: two images of the same size on loop devices).
#
# One server per filesystem, the same option file (innodb_buffer_pool_size
# 32M, innodb_flush_method=O_DIRECT, innodb_use_native_aio=1, binary log
# off), only one running at a time. Each repetition, on both in alternating
# order (ext4 first in odd repetitions): start the server, drop and create
# the database, sysbench prepare (the bulk load: timed), sysbench
# oltp_read_write for T seconds (tps, p95 latency, and the machine's busy
# CPU time per transaction), the datadir's disk use (du) and the redo
# log's buffering as InnoDB reports it, stop.
#
# usage: bench/mariadb.sh [-n reps] [-T seconds] [-t tables] [-r rows]
#                         [-c threads] [-S image-size] [-d dir] [-o out.csv] [-O chunkfs-opts]
#                         [-R]
#   -n  repetitions (default 3)         -T  seconds of each run (default 60)
#   -t  tables (default 2)              -r  rows per table (default 100000)
#   -c  sysbench threads (default 4)    -S  size of each image (default 4G)
#   -d  directory of the images (default /var/tmp)
#   -o  long CSV (bench/dbpair.sh; default bench/results/mariadb-<time>/mariadb-<time>.csv)
#   -O  extra -o options for chunkfs
#   -R  both servers keep their redo log on the ext4 mount
#       (innodb_log_group_home_dir): what the chunkfs datadir gains when
#       the log leaves it (InnoDB writes it with O_DIRECT there)
# Needs root, mariadb-server, sysbench, mkfs.ext4; make first.
set -euo pipefail

reps=3 secs=60 tables=2 rows=100000 threads=4 size=4G redo_ext4=0
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/dbpair.sh"
dbpair_options mariadb.sh "T:secs t:tables r:rows c:threads R=redo_ext4" "$@"

export CFS_TEST_TMPDIR=$dir
. "$root/tests/lib/common.sh"
. "$root/tests/lib/mariadb.sh"
cfs_require_fuse
my_require
cfs_require_cmd sysbench
dbpair_start mariadb
for fs in ext4 chunkfs; do
	install -d -o "$MY_USER" -g "$MY_USER" -m 750 "$CFS_WORK/tmp-$fs"
	redo=()
	if [ "$redo_ext4" = 1 ]; then
		install -d -o "$MY_USER" -g "$MY_USER" -m 750 "${DBPAIR_DIR[ext4]}/redo-$fs"
		redo=("innodb_log_group_home_dir = ${DBPAIR_DIR[ext4]}/redo-$fs")
	fi
	my_init "$fs" "${DBPAIR_DIR[$fs]}/mysql" "tmpdir = $CFS_WORK/tmp-$fs" \
		"innodb_buffer_pool_size = 32M" "innodb_flush_method = O_DIRECT" \
		"innodb_use_native_aio = 1" "skip-log-bin" "max_connections = 64" ${redo[@]+"${redo[@]}"}
done

sb=(--tables="$tables" --table-size="$rows" --mysql-db=sbtest)
# Busy CPU time of the whole machine (all CPUs, clock ticks): per
# transaction, what the database, sysbench and the filesystem (chunkfs's
# daemon, or ext4's and the loop device's kernel work) took together.
cpu_busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat; }
run() { # fs rep order
	local fs=$1 rep=$2 ord=$3 log=$CFS_WORK/run-$1-$2.log t0 ms tps p95 du redo
	my_use "$fs"
	my_start
	my_sql "DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest"
	t0=$(date +%s%N)
	my_sysbench oltp_read_write "${sb[@]}" --threads="$threads" prepare >"$CFS_WORK/prepare-$fs-$rep.log" 2>&1 ||
		{ cat "$CFS_WORK/prepare-$fs-$rep.log" >&2; cfs_fail "sysbench prepare on $fs"; }
	ms=$((($(date +%s%N) - t0) / 1000000))
	busy0=$(cpu_busy_ticks)
	my_sysbench oltp_read_write "${sb[@]}" --threads="$threads" --time="$secs" --report-interval=0 \
		--percentile=95 run >"$log" 2>&1 || { cat "$log" >&2; cfs_fail "sysbench run on $fs"; }
	busy=$(($(cpu_busy_ticks) - busy0))
	tps=$(sed -nE 's/^ +transactions: +[0-9]+ +\(([0-9.]+) per sec.*/\1/p' "$log")
	ntx=$(sed -nE 's/^ +transactions: +([0-9]+) .*/\1/p' "$log")
	p95=$(sed -nE 's/^ +95th percentile: +([0-9.]+)/\1/p' "$log")
	[ -n "$tps" ] && [ -n "$p95" ] && [ "${ntx:-0}" -gt 0 ] ||
		{ cat "$log" >&2; cfs_fail "no transactions, tps or p95 in sysbench's output"; }
	my_stop
	du=$(dbpair_du "$MY_DATADIR")
	redo=$(grep -oE 'InnoDB: (Buffered log writes|File system buffers for log disabled)' "$MY_ERR" | tail -n 1)
	dbpair_row "$out" mariadb prepare_s s "$rep" "$ord" "$fs" "$(awk -v m="$ms" 'BEGIN { printf "%.3f", m / 1000 }')"
	dbpair_row "$out" mariadb tps tps "$rep" "$ord" "$fs" "$tps"
	dbpair_row "$out" mariadb cpu_per_tx us "$rep" "$ord" "$fs" \
		"$(awk -v b="$busy" -v hz="$(getconf CLK_TCK)" -v n="$ntx" 'BEGIN { printf "%.0f", b * 1e6 / hz / n }')"
	dbpair_row "$out" mariadb p95_ms ms "$rep" "$ord" "$fs" "$p95"
	dbpair_row "$out" mariadb datadir_du bytes "$rep" "$ord" "$fs" "$du"
	printf '# rep %d: %-7s prepare %6.2f s  %8.1f tps  p95 %6.2f ms  datadir %d MiB  (%s)\n' \
		"$rep" "$fs" "$(awk -v m="$ms" 'BEGIN { print m / 1000 }')" "$tps" "$p95" $((du >> 20)) "${redo#InnoDB: }"
}
for ((r = 1; r <= reps; r++)); do
	o=1
	for fs in $(dbpair_order $r); do
		run "$fs" $r $o
		o=2
	done
done
echo "# sysbench oltp_read_write: $tables tables x $rows rows, $threads threads, $secs s, buffer pool 32M, O_DIRECT$([ "$redo_ext4" = 0 ] || echo ", redo logs on ext4")"
dbpair_summary "$out"
echo "# CSV: $out"
