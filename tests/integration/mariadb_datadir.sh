#!/usr/bin/env bash
# mariadb_datadir.sh — MariaDB 10.11 with its whole datadir on a chunkfs
# store mount and its tmpdir on a chunkfs RAM mount, the server running as
# mysql (allow_other), InnoDB with innodb_flush_method=O_DIRECT and
# innodb_use_native_aio=1:
#
#   native AIO in use (InnoDB falls back silently otherwise), the redo log's
#   buffering as InnoDB reports it in the error log, matching what the mount
#   offers (tests/lib/mariadb.sh, my_redo_expectation); sysbench oltp
#   prepare (the bulk load) and a short oltp_read_write run; a sort that
#   spills into tmpdir (the RAM mount counts the bytes); then twice, under
#   sysbench and two committers that record every commit the server
#   acknowledged: kill -9 of mariadbd, and kill -9 of the chunkfs daemon
#   (mariadbd loses its store as on a failed disk; the store is remounted),
#   each followed by a restart: InnoDB's crash recovery ran, CHECK TABLE
#   EXTENDED is clean on every table, every acknowledged commit is there,
#   no commit is torn (each commit writes one row to each of two tables)
#   and none has a gap before it; a clean shutdown; a second server on a
#   store on a loop device mounted with -o blkdev (fuseblk: the files'
#   st_dev is the loop device), where InnoDB must write its redo log with
#   O_DIRECT as on ext4, and a table of its own on the first store (DATA
#   DIRECTORY); unmount and fsck.chunkfs clean.
#
# Skips (77) when MariaDB or sysbench is not installed. About 1-2 minutes;
# MY_TEST_SECONDS sets the timed sysbench run (default 10).
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
. "$CFS_ROOT/tests/lib/mariadb.sh"
cfs_require_fuse
my_require
cfs_require_cmd sysbench getfattr

secs=${MY_TEST_SECONDS:-10}
rows=20000
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
ram=$CFS_WORK/ram
sb=(--tables=2 --table-size=$rows --mysql-db=sbtest)

# Mounts first: cleanup runs in reverse, so the server stops before them.
cfs_mkfs "$img" 2G
chmod 755 "$CFS_WORK"
cfs_mount "$img" "$mnt" allow_other
cfs_mount ram "$ram" ram,size=256M,allow_other
install -d -o "$MY_USER" -g "$MY_USER" -m 750 "$ram/mytmp"

my_init store "$mnt/mysql" "tmpdir = $ram/mytmp" \
	"innodb_flush_method = O_DIRECT" "innodb_use_native_aio = 1" \
	"innodb_buffer_pool_size = 32M" "innodb_log_file_size = 48M" \
	"innodb_flush_log_at_trx_commit = 1" "skip-log-bin"
my_start

# ---- what InnoDB made of the mount ------------------------------------------------
[ "$(my_sql "SELECT @@innodb_use_native_aio")" = 1 ] ||
	{ grep -i aio "$MY_ERR" >&2; cfs_fail "InnoDB fell back from native AIO on the mount"; }
[ "$(my_sql "SELECT @@innodb_flush_method")" = O_DIRECT ] || cfs_fail "innodb_flush_method is not O_DIRECT"
[ "$(my_sql "SELECT @@datadir")" = "$mnt/mysql/" ] || cfs_fail "datadir is $(my_sql "SELECT @@datadir")"
[ "$(my_sql "SELECT @@tmpdir")" = "$ram/mytmp" ] || cfs_fail "tmpdir is $(my_sql "SELECT @@tmpdir")"
redo=$(my_redo_expectation "$mnt/mysql/ib_logfile0")
grep -q "InnoDB: $redo (block size=" "$MY_ERR" ||
	{ grep -E 'InnoDB: (Buffered log|File system buffers)' "$MY_ERR" >&2; cfs_fail "the error log does not say '$redo' for the redo log ($(stat -c '%Hd:%Ld' "$mnt/mysql/ib_logfile0"))"; }
cfs_log "redo log on $(stat -c '%Hd:%Ld' "$mnt/mysql/ib_logfile0"): $(grep -oE 'InnoDB: (Buffered log|File system buffers)[^(]*\(block size=[0-9]+ bytes\)' "$MY_ERR" | tail -n 1)"

# ---- bulk load and a short run -----------------------------------------------------
my_sql "CREATE DATABASE sbtest"
t0=$(date +%s%N)
my_sysbench oltp_read_write "${sb[@]}" prepare >"$CFS_WORK/prepare.log" 2>&1 ||
	{ cat "$CFS_WORK/prepare.log" >&2; cfs_fail "sysbench prepare"; }
cfs_log "sysbench prepare (2 tables x $rows rows): $((($(date +%s%N) - t0) / 1000000)) ms"
# FOR EXPORT: InnoDB writes the tables' dirty pages before it returns
my_sql -d sbtest "FLUSH TABLES sbtest1, sbtest2 FOR EXPORT; UNLOCK TABLES"
for t in sbtest1 sbtest2; do
	f=$mnt/mysql/sbtest/$t.ibd
	[ -f "$f" ] || cfs_fail "no $f: the table is not on the mount"
	[ "$(cfs_stat "$f" writes)" -gt 0 ] || cfs_fail "$t.ibd: no writes counted by chunkfs"
done
my_sysbench oltp_read_write "${sb[@]}" --threads=4 --time="$secs" --report-interval=0 run \
	>"$CFS_WORK/run.log" 2>&1 || { cat "$CFS_WORK/run.log" >&2; cfs_fail "sysbench run"; }
tps=$(sed -nE 's/^ +transactions: +[0-9]+ +\(([0-9.]+) per sec.*/\1/p' "$CFS_WORK/run.log")
errs=$(sed -nE 's/^ +ignored errors: +([0-9]+) .*/\1/p' "$CFS_WORK/run.log")
[ -n "$tps" ] && [ "${tps%.*}" -gt 0 ] || { cat "$CFS_WORK/run.log" >&2; cfs_fail "no transactions"; }
cfs_log "sysbench oltp_read_write 4 threads $secs s: $tps tps, $errs ignored errors, p95 $(sed -nE 's/^ +95th percentile: +([0-9.]+)/\1/p' "$CFS_WORK/run.log") ms"

# ---- a sort that spills into tmpdir (the RAM mount) --------------------------------
w0=$(cfs_stat "$ram" write_bytes)
merges0=$(my_sql "SHOW GLOBAL STATUS LIKE 'Sort_merge_passes'" | cut -f2)
my_sql -d sbtest "SET SESSION sort_buffer_size = 32768;
	SELECT count(*), sum(length(s)) FROM (SELECT c AS s FROM sbtest1 ORDER BY c, pad LIMIT 1000000) x" \
	>/dev/null || cfs_fail "the spilling sort failed"
merges=$(($(my_sql "SHOW GLOBAL STATUS LIKE 'Sort_merge_passes'" | cut -f2) - merges0))
w=$(($(cfs_stat "$ram" write_bytes) - w0))
[ "$merges" -gt 0 ] || cfs_fail "the sort did not spill (Sort_merge_passes +0)"
[ "$w" -ge $((rows * 120)) ] || cfs_fail "the sort merged $merges times, the RAM mount counted only $w bytes written"
cfs_log "sort: $merges merge passes, $w bytes written to the RAM mount (tmpdir)"

# ---- committers: what the server acknowledged --------------------------------------
my_sql "CREATE DATABASE ack;
	CREATE TABLE ack.a (writer INT, id INT, pad VARCHAR(200), PRIMARY KEY (writer, id)) ENGINE=InnoDB;
	CREATE TABLE ack.b (writer INT, id INT, PRIMARY KEY (writer, id)) ENGINE=InnoDB"
committers=()
# committer W: one client, one transaction after the other; the client
# prints the id only after its COMMIT returned (--unbuffered: flushed at
# once), so $CFS_WORK/acked-W holds exactly the acknowledged commits.
committer() {
	local w=$1 from
	from=$(($(my_sql "SELECT coalesce(max(id), 0) FROM ack.a WHERE writer = $w") + 1))
	awk -v w="$w" -v from="$from" 'BEGIN { for (i = from; i < from + 10000000; i++)
		printf "BEGIN; INSERT INTO a VALUES (%d, %d, REPEAT(\"x\", 150)); INSERT INTO b VALUES (%d, %d); COMMIT; SELECT %d;\n", w, i, w, i, i }' |
		my_client -N -B --unbuffered ack >>"$CFS_WORK/acked-$w" 2>"$CFS_WORK/committer-$w.err" || true
}
start_load() {
	local i n
	my_sysbench oltp_read_write "${sb[@]}" --threads=4 --time=120 --report-interval=0 run \
		>"$CFS_WORK/load.log" 2>&1 &
	load_pid=$!
	cfs_defer "kill $load_pid 2>/dev/null"
	committers=()
	for w in 1 2; do
		touch "$CFS_WORK/acked-$w"
		committer $w &
		committers+=($!)
		cfs_defer "kill $! 2>/dev/null"
	done
	n=$(cat "$CFS_WORK"/acked-* | wc -l)
	for ((i = 0; i < 600; i++)); do # until both loads run (a busy machine is slow)
		sleep 0.1
		[ $(($(cat "$CFS_WORK"/acked-* | wc -l) - n)) -gt 200 ] && break
	done
	sleep 1
}
end_load() { # everything the load started has ended (the server is gone)
	local p
	for p in $load_pid "${committers[@]}"; do
		timeout 60 tail --pid="$p" -f /dev/null || cfs_fail "a client did not end after the crash"
		wait "$p" 2>/dev/null || true
	done
}
# check_recovered WHAT: after a restart: crash recovery ran, every table is
# clean, and every acknowledged commit is there, whole.
check_recovered() {
	local w last kept acked torn n
	grep -q 'Starting crash recovery from checkpoint LSN' "$CFS_WORK/err-after" ||
		{ cat "$CFS_WORK/err-after" >&2; cfs_fail "$1: no crash recovery in the error log"; }
	grep -q '\[ERROR\]' "$CFS_WORK/err-after" &&
		{ grep '\[ERROR\]' "$CFS_WORK/err-after" >&2; cfs_fail "$1: errors in the error log"; }
	for db in sbtest ack mysql; do my_check_tables $db; done
	for w in 1 2; do
		last=$(tail -n 1 "$CFS_WORK/acked-$w")
		[ -n "$last" ] || cfs_fail "$1: writer $w had no commit acknowledged"
		read -r n kept <<<"$(my_sql "SELECT count(*), coalesce(max(id), 0) FROM ack.a WHERE writer = $w")"
		# ids are committed in order by one client: the rows are 1..max
		[ "$n" = "$kept" ] || cfs_fail "$1: writer $w: $n rows but the last id is $kept (a gap)"
		[ "$kept" -ge "$last" ] || cfs_fail "$1: writer $w: acknowledged up to $last, only $kept kept"
		torn=$(my_sql "SELECT count(*) FROM ack.a a LEFT JOIN ack.b b USING (writer, id)
			WHERE a.writer = $w AND b.id IS NULL")
		[ "$torn" = 0 ] || cfs_fail "$1: writer $w: $torn commits with a row in a and none in b"
		[ "$(my_sql "SELECT count(*) FROM ack.b WHERE writer = $w")" = "$n" ] ||
			cfs_fail "$1: writer $w: b has rows a does not"
		acked=$(sort -n "$CFS_WORK/acked-$w" | uniq | wc -l)
		cfs_log "$1: writer $w: $acked acknowledged, $kept committed rows kept (last acknowledged $last)"
	done
}

# ---- kill -9 of mariadbd under load ------------------------------------------------
cfs_log "kill -9 of mariadbd under sysbench and the committers"
start_load
my_crash
end_load
off=$(stat -c %s "$MY_ERR")
my_start
tail -c +$((off + 1)) "$MY_ERR" >"$CFS_WORK/err-after"
check_recovered "mariadbd killed"

# ---- kill -9 of the chunkfs daemon under load --------------------------------------
cfs_log "kill -9 of the chunkfs daemon under sysbench and the committers"
start_load
cfs_crash "$mnt"
# mariadbd gets ENOTCONN from its store and aborts; a crash either way
my_wait_exit 60 || { cfs_log "mariadbd still runs 60 s after its store died: kill -9"; my_crash; }
end_load
cfs_clear_mount "$mnt"
cfs_mount "$img" "$mnt" allow_other
off=$(stat -c %s "$MY_ERR")
my_start
tail -c +$((off + 1)) "$MY_ERR" >"$CFS_WORK/err-after"
check_recovered "chunkfs daemon killed"

my_stop
grep -q 'Shutdown complete' "$MY_ERR" || cfs_fail "no clean shutdown in the error log"

# ---- a store on a loop device, -o blkdev: the redo log with O_DIRECT ---------------
# fuseblk: every file's st_dev is the loop device, whose sysfs entry has the
# physical block size InnoDB looks for.
truncate -s 1G "$CFS_WORK/loop.img"
cfs_loop_attach "$CFS_WORK/loop.img"
"$CFS_BIN/mkchunkfs" -q "$CFS_LOOP_DEV" >/dev/null || cfs_fail "mkchunkfs $CFS_LOOP_DEV"
cfs_mount "$CFS_LOOP_DEV" "$CFS_WORK/lmnt" allow_other,blkdev
grep -q "^$CFS_LOOP_DEV $CFS_WORK/lmnt fuseblk.chunkfs " /proc/self/mounts ||
	cfs_fail "-o blkdev: not a fuseblk mount of $CFS_LOOP_DEV: $(grep " $CFS_WORK/lmnt " /proc/self/mounts)"
my_init loop "$CFS_WORK/lmnt/mysql" "innodb_flush_method = O_DIRECT" "innodb_use_native_aio = 1" \
	"innodb_buffer_pool_size = 32M" "innodb_log_file_size = 48M" "skip-log-bin"
my_start
[ "$(stat -c '%Hd:%Ld' "$CFS_WORK/lmnt/mysql/ib_logfile0")" = "$(stat -L -c '%Hr:%Lr' "$CFS_LOOP_DEV")" ] ||
	cfs_fail "-o blkdev: ib_logfile0's st_dev is $(stat -c '%Hd:%Ld' "$CFS_WORK/lmnt/mysql/ib_logfile0"), not $CFS_LOOP_DEV's"
redo="File system buffers for log disabled"
[ "$(my_redo_expectation "$CFS_WORK/lmnt/mysql/ib_logfile0")" = "$redo" ] ||
	cfs_fail "-o blkdev: no physical block size in sysfs for $CFS_LOOP_DEV"
grep -q "InnoDB: $redo (block size=" "$MY_ERR" ||
	{ grep -E 'InnoDB: (Buffered log|File system buffers)' "$MY_ERR" >&2; cfs_fail "blkdev store: the error log does not say '$redo' for the redo log"; }
cfs_log "blkdev store, redo log on $(stat -c '%Hd:%Ld' "$CFS_WORK/lmnt/mysql/ib_logfile0"): $(grep -oE "InnoDB: $redo[^(]*\(block size=[0-9]+ bytes\)" "$MY_ERR" | tail -n 1)"
# A table of its own elsewhere: DATA DIRECTORY puts its .ibd on the other
# store mount, and an .isl file in the datadir says where (doc/DBA-GUIDE.md).
install -d -o "$MY_USER" -g "$MY_USER" -m 750 "$mnt/tables"
my_sql "CREATE DATABASE d"
my_sql -d d "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(100)) ENGINE=InnoDB
	DATA DIRECTORY = '$mnt/tables'; INSERT INTO t SELECT seq, repeat('v', 100) FROM seq_1_to_5000"
[ -f "$mnt/tables/d/t.ibd" ] || cfs_fail "DATA DIRECTORY: no $mnt/tables/d/t.ibd"
[ "$(cat "$CFS_WORK/lmnt/mysql/d/t.isl")" = "$mnt/tables/d/t.ibd" ] ||
	cfs_fail "DATA DIRECTORY: t.isl says $(cat "$CFS_WORK/lmnt/mysql/d/t.isl")"
my_stop
my_start
[ "$(my_sql "SELECT count(*) FROM d.t")" = 5000 ] || cfs_fail "DATA DIRECTORY: rows lost over a restart"
my_check_tables d
cfs_log "a table with DATA DIRECTORY on the other store: $(stat -c %s "$mnt/tables/d/t.ibd") bytes, checked after a restart"
my_stop
cfs_umount "$CFS_WORK/lmnt" || cfs_fail "unmount the loop-device store"
cfs_umount "$ram" || cfs_fail "unmount the RAM mount"
cfs_umount "$mnt" || cfs_fail "unmount the store"
"$CFS_BIN/fsck.chunkfs" -n "$img" >"$CFS_WORK/fsck.out" 2>&1 ||
	{ cat "$CFS_WORK/fsck.out" >&2; cfs_fail "fsck.chunkfs after the runs"; }
cfs_log "ok"
