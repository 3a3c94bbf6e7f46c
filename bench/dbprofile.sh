#!/usr/bin/env bash
# bench/dbprofile.sh — where a database's transactions go on chunkfs: one
# timed load (MariaDB sysbench oltp_read_write with the datadir on a store
# mount, PostgreSQL pgbench with its tablespace on one, or SQLite's
# bench/sqlite_load.py with its database on one) while
#   - perf records the chunkfs daemon (cycles, call graphs): its hottest
#     symbols and the share of its time in the kernel;
#   - perf records the kernel's FUSE tracepoints (fuse:fuse_request_send and
#     fuse:fuse_request_end) system-wide: the requests the kernel sent this
#     mount, by opcode, per transaction, with their latency and the sizes of
#     the WRITEs (bench/fuse_mix.py);
#   - the mount's own statistics (user.chunkfs.*) are read before and after:
#     reads, writes, fsyncs, read-modify-writes per transaction; with them
#     the daemon's CPU time and context switches (all its threads).
# Not a timing benchmark: the tracing costs time; compare the mix, not tps.
#
# usage: bench/dbprofile.sh [-w mariadb|pgbench|sqlite] [-T seconds] [-S image-size]
#                           [-d dir] [-o result-dir] [-O chunkfs-opts] [-P]
#                           [-j wal|delete] [-r rows]
#   -w  the load (default mariadb: 2 tables x 100k rows, 4 threads, buffer
#       pool 32M, O_DIRECT; pgbench: scale 20, 4 clients, shared_buffers 128MB;
#       sqlite: sqlite_load.py, 4 writers x ROWS rows in transactions of 100,
#       2 readers, as long as it takes: -T is ignored)
#   -T  seconds of the timed load (default 30)
#   -j  sqlite: the journal mode (default wal)
#   -r  sqlite: rows per writer (default 5000)
#   -P  trace the bulk load instead (sysbench prepare, pgbench -i): counts
#       per row loaded, for as long as it takes (-T is ignored)
#   -o  result directory (default bench/results/dbprofile-<load>-<time>/):
#       mix.txt, perf-daemon.txt, stats.txt, load.log
# Needs root, perf, the database, tracefs (mounted at /sys/kernel/tracing for
# the run if it is not).
set -euo pipefail

load=mariadb
secs=30
size=4G
dir=/var/tmp
res=
cfs_opts=
bulk=0
journal=wal
rows=5000
root=$(cd "$(dirname "$0")/.." && pwd)

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }
while getopts "w:T:S:d:o:O:Pj:r:h" opt; do
	case $opt in
	w) load=$OPTARG ;;
	T) secs=$OPTARG ;;
	S) size=$OPTARG ;;
	d) dir=$OPTARG ;;
	o) res=$OPTARG ;;
	O) cfs_opts=$OPTARG ;;
	P) bulk=1 ;;
	j) journal=$OPTARG ;;
	r) rows=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
case $load in mariadb | pgbench | sqlite) ;; *) echo "dbprofile.sh: -w: mariadb, pgbench or sqlite, not $load" >&2; exit 2 ;; esac
case $journal in wal | delete) ;; *) echo "dbprofile.sh: -j: wal or delete, not $journal" >&2; exit 2 ;; esac
[ $bulk = 0 ] || [ $load != sqlite ] || { echo "dbprofile.sh: -P: not for sqlite" >&2; exit 2; }
[[ $rows =~ ^[1-9][0-9]*$ ]] || { echo "dbprofile.sh: -r: not a positive number: $rows" >&2; exit 2; }
[[ $secs =~ ^[1-9][0-9]*$ ]] || { echo "dbprofile.sh: -T: not a positive number: $secs" >&2; exit 2; }

export CFS_TEST_TMPDIR=$dir
. "$root/tests/lib/common.sh"
. "$root/tests/lib/stats.sh"
cfs_require_fuse
cfs_require_cmd perf python3 getfattr
if [ "$load" = mariadb ]; then
	. "$root/tests/lib/mariadb.sh"
	my_require
	cfs_require_cmd sysbench
elif [ "$load" = sqlite ]; then
	python3 -c 'import sqlite3' || cfs_skip "python3 without its sqlite3 module"
else
	. "$root/tests/lib/pg.sh"
	pg_require
fi
# tracefs: mounted for the run if it is not (and unmounted again at exit)
if [ ! -d /sys/kernel/tracing/events ] && mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then
	cfs_defer "umount /sys/kernel/tracing"
fi
[ -d /sys/kernel/tracing/events/fuse ] || cfs_skip "no fuse tracepoints in this kernel (tracefs)"
[ -x "$CFS_BIN/chunkfs" ] || { echo "dbprofile.sh: make first" >&2; exit 2; }
mkdir -p "$CFS_WORK/bin"
cp "$CFS_BIN/chunkfs" "$CFS_BIN/mkchunkfs" "$CFS_WORK/bin/"
CFS_BIN=$CFS_WORK/bin
stamp=$(date -u +%Y%m%d-%H%M%S)
[ -n "$res" ] || res=$root/bench/results/dbprofile-$load$([ $load != sqlite ] || echo "-$journal")$([ $bulk = 0 ] || echo -bulk)-$stamp
mkdir -p "$res"
res=$(cd "$res" && pwd)

truncate -s "$size" "$CFS_WORK/chunkfs.img"
cfs_loop_attach "$CFS_WORK/chunkfs.img"
"$CFS_BIN/mkchunkfs" -q "$CFS_LOOP_DEV" >/dev/null || cfs_fail "mkchunkfs"
mnt=$CFS_WORK/chunkfs
chmod 755 "$CFS_WORK"
cfs_mount "$CFS_LOOP_DEV" "$mnt" "allow_other${cfs_opts:+,$cfs_opts}"
daemon=$CFS_MOUNT_PID
# the tracepoint's connection: the kernel's dev_t of the mount
read -r maj min <<<"$(stat -c '%Hd %Ld' "$mnt")"
conn=$(((maj << 20) | min))

# ---- the database and its data, untraced -------------------------------------------
if [ "$load" = mariadb ]; then
	my_init cfs "$mnt/mysql" "innodb_buffer_pool_size = 32M" "innodb_flush_method = O_DIRECT" \
		"innodb_use_native_aio = 1" "skip-log-bin"
	my_start
	my_sql "CREATE DATABASE sbtest"
	sb=(--tables=2 --table-size=100000 --mysql-db=sbtest --threads=4)
	prepare() { my_sysbench oltp_read_write "${sb[@]}" prepare >"$1" 2>&1 || cfs_fail "sysbench prepare"; }
	if [ $bulk = 1 ]; then
		run_load() { prepare "$res/load.log"; }
		transactions() { echo 200000; }
	else
		prepare "$res/prepare.log"
		run_load() {
			my_sysbench oltp_read_write "${sb[@]}" --time="$secs" --report-interval=0 run >"$res/load.log" 2>&1
		}
		transactions() { sed -nE 's/^ +transactions: +([0-9]+) .*/\1/p' "$res/load.log"; }
	fi
elif [ "$load" = sqlite ]; then
	# the writers' transactions (the readers' queries are in load.log)
	run_load() {
		python3 "$root/bench/sqlite_load.py" -j "$journal" -r "$rows" "$mnt/bench.db" >"$res/load.log" 2>&1
	}
	transactions() { echo $((4 * rows / 100)); }
else
	install -d -o "$PG_USER" -g "$PG_USER" -m 700 "$mnt/pg"
	PG_PORT=5503 pg_init "$CFS_WORK/pgdata" "shared_buffers = 128MB" "max_wal_size = 1GB"
	pg_start
	pg_sql "CREATE TABLESPACE bench LOCATION '$mnt/pg'"
	pg_sql "CREATE DATABASE bench TABLESPACE bench"
	prepare() { pg_as "$PG_BIN/pgbench" -i -q -s 20 bench >"$1" 2>&1 && pg_sql "CHECKPOINT"; }
	if [ $bulk = 1 ]; then
		run_load() { prepare "$res/load.log"; }
		transactions() { echo 2000000; }
	else
		prepare "$res/prepare.log" || cfs_fail "pgbench -i"
		run_load() { pg_as "$PG_BIN/pgbench" -n -c 4 -j 2 -T "$secs" bench >"$res/load.log" 2>&1; }
		transactions() { sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$res/load.log"; }
	fi
fi

# ---- the traced load ---------------------------------------------------------------
keys=(reads writes fsyncs rmw read_bytes write_bytes)
declare -A s0
for k in "${keys[@]}"; do s0[$k]=$(cfs_stat "$mnt" "$k"); done
# The daemon's CPU time (clock ticks) and context switches, summed over its
# threads (the loops, the committer, io_uring's workers): what it takes
# from a database that shares the CPUs.
daemon_cpu() {
	cat /proc/"$daemon"/task/*/stat 2>/dev/null | awk '{ t += $14 + $15 } END { print t }'
}
daemon_switches() {
	cat /proc/"$daemon"/task/*/status 2>/dev/null |
		awk '/^(non)?voluntary_ctxt_switches:/ { n += $2 } END { print n }'
}
cpu0=$(daemon_cpu) sw0=$(daemon_switches)
# perf runs as long as the load (SIGINT ends a recording cleanly)
perf record -q -g -p "$daemon" -o "$CFS_WORK/daemon.perf" >/dev/null 2>&1 &
perf_d=$!
cfs_defer "kill $perf_d 2>/dev/null"
perf record -q -a -e fuse:fuse_request_send -e fuse:fuse_request_end -o "$CFS_WORK/fuse.perf" \
	>/dev/null 2>&1 &
perf_t=$!
cfs_defer "kill $perf_t 2>/dev/null"
sleep 1 # perf is attached
t0=$(date +%s%N)
run_load || { cat "$res/load.log" >&2; cfs_fail "the load failed"; }
secs=$((($(date +%s%N) - t0) / 1000000000))
kill -INT $perf_d $perf_t
wait $perf_d || true
wait $perf_t || true
cpu1=$(daemon_cpu) sw1=$(daemon_switches)
n=$(transactions)
what=transactions per=transaction
[ $bulk = 0 ] || { what="rows loaded"; per=row; }
{
	echo "# mount statistics during the load, $n $what"
	for k in "${keys[@]}"; do
		v=$(($(cfs_stat "$mnt" "$k") - s0[$k]))
		printf '%-12s %12d  %8.2f per %s\n' "$k" "$v" "$(awk -v v="$v" -v n="$n" 'BEGIN { print v / n }')" "$per"
	done
	awk -v t=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" -v s="$secs" -v n="$n" -v per="$per" 'BEGIN {
		ms = t * 1000 / hz
		printf "daemon CPU   %9.0f ms  %8.1f us per %s (%.0f%% of one CPU; traced)\n", ms, ms * 1000 / n, per, s ? ms / s / 10 : 0 }'
	printf 'daemon ctxsw  %12d  %8.2f per %s\n' $((sw1 - sw0)) \
		"$(awk -v v=$((sw1 - sw0)) -v n="$n" 'BEGIN { print v / n }')" "$per"
} >"$res/stats.txt"
perf script -i "$CFS_WORK/fuse.perf" 2>/dev/null >"$CFS_WORK/fuse.txt"
{
	echo "# FUSE requests to the mount (kernel tracepoints), $n $what in $secs s (per tx: per $per)"
	python3 "$root/bench/fuse_mix.py" "$CFS_WORK/fuse.txt" "$conn" "$n"
} >"$res/mix.txt"
{
	echo "# chunkfs daemon, $secs s, by symbol (self time, >= 1%)"
	perf report -i "$CFS_WORK/daemon.perf" --stdio --no-children -g none --sort dso,sym \
		--percent-limit 1 2>/dev/null | grep -E '^ +[0-9]'
	echo "# inclusive (with children), top 30"
	perf report -i "$CFS_WORK/daemon.perf" --stdio --children -g none --sort sym \
		2>/dev/null | grep -E '^ +[0-9]' | sed -n 1,30p
	echo "# by shared object"
	perf report -i "$CFS_WORK/daemon.perf" --stdio --no-children -g none --sort dso \
		--percent-limit 0.5 2>/dev/null | grep -E '^ +[0-9]'
} >"$res/perf-daemon.txt"
cat "$res/load.log" | grep -E 'transactions:|tps =|95th|latency average|^(wal|delete),' || true
cat "$res/stats.txt" "$res/mix.txt"
sed -n 1,25p "$res/perf-daemon.txt"
echo "# results: $res"
