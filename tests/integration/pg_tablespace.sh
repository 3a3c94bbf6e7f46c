#!/usr/bin/env bash
# pg_tablespace.sh — PostgreSQL 15 on chunkfs, the bounded version
# of bench/pgbench.sh: a cluster with data checksums on local disk, its
# tables and indexes in a tablespace on a chunkfs store mount (pg_tblspc/OID
# is a symlink into the mount: the chunk-symlink pattern), its temp space on
# a chunkfs RAM mount, the server running as postgres (allow_other).
#
#   pgbench -i into the tablespace, a timed pgbench run, a sort that spills
#   (every temp file PostgreSQL logs is in the RAM mount's tablespace, a
#   temp file's own statistics read while the sort runs show its writes, and
#   the RAM mount counted at least the bytes the sort says it wrote),
#   pg_amcheck clean, stop, pg_checksums clean offline, the RAM mount
#   remounted empty and its directories recreated, start, the sort again;
#   kill -9 of the postmaster and its processes under a pgbench load, start:
#   crash recovery ran, pg_amcheck clean, the pgbench balances agree; the
#   relation files' statistics (read through pg_tblspc's symlink) show the
#   writes and fsyncs.
#
# Skips (77) only when PostgreSQL is not installed. About 2 minutes;
# PG_TEST_SECONDS sets the timed run (default 20).
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
. "$CFS_ROOT/tests/lib/pg.sh"
cfs_require_fuse
pg_require
cfs_require_cmd getfattr pgrep

secs=${PG_TEST_SECONDS:-20}
scale=5
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
ram=$CFS_WORK/ram
db=bench

# Mounts first: cleanup runs in reverse, so the server stops before them.
cfs_mkfs "$img" 1G
chmod 755 "$CFS_WORK"
cfs_mount "$img" "$mnt" allow_other
cfs_mount ram "$ram" ram,size=256M,allow_other
install -d -o "$PG_USER" -g "$PG_USER" -m 700 "$mnt/pgts" "$ram/pgtemp"

pg_init "$CFS_WORK/pgdata" "shared_buffers = 32MB" "log_temp_files = 0" \
	"checkpoint_timeout = 30s" "max_wal_size = 256MB" "log_checkpoints = on"
pg_start
pg_sql "CREATE TABLESPACE cfs LOCATION '$mnt/pgts'"
pg_sql "CREATE TABLESPACE cfs_temp LOCATION '$ram/pgtemp'"
pg_sql "ALTER SYSTEM SET temp_tablespaces = 'cfs_temp'"
pg_sql "SELECT pg_reload_conf()" >/dev/null
pg_sql "CREATE DATABASE $db"
ts_oid=$(pg_sql "SELECT oid FROM pg_tablespace WHERE spcname = 'cfs'")
temp_oid=$(pg_sql "SELECT oid FROM pg_tablespace WHERE spcname = 'cfs_temp'")
[ "$(readlink "$PGDATA/pg_tblspc/$ts_oid")" = "$mnt/pgts" ] ||
	cfs_fail "pg_tblspc/$ts_oid -> $(readlink "$PGDATA/pg_tblspc/$ts_oid"), not the mount"
[ "$(readlink "$PGDATA/pg_tblspc/$temp_oid")" = "$ram/pgtemp" ] ||
	cfs_fail "pg_tblspc/$temp_oid -> $(readlink "$PGDATA/pg_tblspc/$temp_oid"), not the RAM mount"

cfs_log "pgbench -i -s $scale into the chunkfs tablespace"
pg_as "$PG_BIN/pgbench" -i -q -s $scale --tablespace=cfs --index-tablespace=cfs "$db" \
	>"$CFS_WORK/pgbench-init.log" 2>&1 ||
	{ cat "$CFS_WORK/pgbench-init.log" >&2; cfs_fail "pgbench -i"; }
# Every pgbench table and index, and nothing of them elsewhere.
inside=$(pg_sql -d $db "SELECT count(*) FROM pg_class WHERE relname LIKE 'pgbench_%' AND reltablespace = $ts_oid")
outside=$(pg_sql -d $db "SELECT count(*) FROM pg_class WHERE relname LIKE 'pgbench_%' AND reltablespace <> $ts_oid")
[ "$inside" -eq 7 ] && [ "$outside" -eq 0 ] ||
	cfs_fail "pgbench relations: $inside in the tablespace (expected 7), $outside elsewhere"
accounts=$PGDATA/$(pg_sql -d $db "SELECT pg_relation_filepath('pgbench_accounts')")
case $(readlink -f "$accounts") in
"$mnt"/pgts/PG_15_*) ;;
*) cfs_fail "pgbench_accounts is $(readlink -f "$accounts"), not on the mount" ;;
esac
size=$(stat -L -c %s "$accounts")
[ "$size" -ge $((scale * 100000 * 100)) ] || cfs_fail "pgbench_accounts is only $size bytes"
cfs_log "pgbench_accounts: $size bytes, $(readlink -f "$accounts")"

cfs_log "pgbench -T $secs"
# -n: no vacuum, and above all no truncation of pgbench_history, whose
# deltas must keep adding up to the balances across the crash below.
pg_as "$PG_BIN/pgbench" -n -c 4 -j 2 -T "$secs" "$db" >"$CFS_WORK/pgbench-run.log" 2>&1 ||
	{ cat "$CFS_WORK/pgbench-run.log" >&2; cfs_fail "pgbench run"; }
tps=$(sed -nE 's/^tps = ([0-9.]+) .*without initial.*/\1/p' "$CFS_WORK/pgbench-run.log")
done_tx=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$CFS_WORK/pgbench-run.log")
[ "${done_tx:-0}" -gt 0 ] || { cat "$CFS_WORK/pgbench-run.log" >&2; cfs_fail "no transactions"; }
cfs_log "tps $tps, $done_tx transactions"

# spill WHEN: a sort that spills into the temp tablespace on the RAM mount:
# every temp file PostgreSQL logs is there, and the RAM mount counted at
# least the bytes the sort and pg_stat_database say were written.
spill() {
	local ram_w0 ram_r0 tmp0 log_off plan disk_kb ram_w tmp sort_pid seen seen_w seen_name f w
	cfs_log "a sort that spills into the RAM mount ($1)"
	ram_w0=$(cfs_stat "$ram" write_bytes)
	ram_r0=$(cfs_stat "$ram" reads)
	tmp0=$(pg_sql "SELECT temp_bytes FROM pg_stat_database WHERE datname = '$db'")
	log_off=$(stat -c %s "$PG_LOG")
	pg_sql -d $db "SET work_mem = '64kB';
		EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
		SELECT * FROM pgbench_accounts ORDER BY bid DESC, abalance, filler, aid DESC" \
		>"$CFS_WORK/plan" 2>&1 &
	sort_pid=$!
	# While it runs: the temp files' own statistics (they go with the files).
	seen=0 seen_w=0 seen_name=
	while kill -0 $sort_pid 2>/dev/null; do
		for f in "$ram"/pgtemp/PG_15_*/pgsql_tmp/pgsql_tmp*; do
			w=$(getfattr --only-values -n user.chunkfs.write_bytes "$f" 2>/dev/null) || continue
			seen=1
			[ "$w" -le "$seen_w" ] || { seen_w=$w; seen_name=$(basename "$f"); }
		done
		sleep 0.05
	done
	wait $sort_pid || cfs_fail "the sort failed: $(cat "$CFS_WORK/plan")"
	plan=$(cat "$CFS_WORK/plan")
	[ $seen = 1 ] && [ "$seen_w" -gt 0 ] ||
		cfs_fail "no temp file with written bytes seen on the RAM mount during the sort"
	cfs_log "during the sort: $seen_name had user.chunkfs.write_bytes=$seen_w"
	# One Sort line per process (a parallel sort has its workers' lines too).
	disk_kb=$(sed -nE 's/.*Sort Method: external merge +Disk: ([0-9]+)kB.*/\1/p' <<<"$plan" |
		awk '{ s += $1 } END { if (NR) print s }')
	[ -n "$disk_kb" ] || cfs_fail "the sort did not spill: $plan"
	ram_w=$(($(cfs_stat "$ram" write_bytes) - ram_w0))
	sleep 0.6 # the backend's statistics reach pg_stat_database when it exits
	tmp=$(($(pg_sql "SELECT temp_bytes FROM pg_stat_database WHERE datname = '$db'") - tmp0))
	cfs_log "sort: Disk ${disk_kb} kB; temp_bytes $tmp; RAM mount write_bytes $ram_w"
	[ "$ram_w" -ge $((disk_kb * 1024)) ] ||
		cfs_fail "the RAM mount counted $ram_w bytes written, the sort spilled $disk_kb kB"
	[ "$tmp" -gt 0 ] && [ "$ram_w" -ge "$tmp" ] ||
		cfs_fail "temp_bytes $tmp, but the RAM mount counted $ram_w"
	tail -c +$((log_off + 1)) "$PG_LOG" | grep 'temporary file: path' >"$CFS_WORK/tempfiles" ||
		cfs_fail "no temporary file logged"
	grep -v "\"pg_tblspc/$temp_oid/PG_15_[0-9]*/pgsql_tmp/" "$CFS_WORK/tempfiles" &&
		cfs_fail "temporary files outside the RAM tablespace (above)"
	# The merge reads the runs back, mostly from the page cache (they were
	# written through it moments before, and chunkfs keeps it): such reads
	# never reach the mount, so they are shown, not required.
	cfs_log "RAM mount reads during the sort: $(($(cfs_stat "$ram" reads) - ram_r0))"
	cfs_log "$(wc -l <"$CFS_WORK/tempfiles") temp files, all in pg_tblspc/$temp_oid (the RAM mount)"
}
spill "after the run"

cfs_log "pg_amcheck"
pg_amcheck_all $db >"$CFS_WORK/amcheck.log" 2>&1 ||
	{ cat "$CFS_WORK/amcheck.log" >&2; cfs_fail "pg_amcheck after the run"; }

pgbench_balances_agree $db "after the run"

cfs_log "stop, pg_checksums offline, the RAM mount remounted (empty), start"
pg_stop
pg_as "$PG_BIN/pg_checksums" --check -D "$PGDATA" >"$CFS_WORK/checksums.log" 2>&1 ||
	{ cat "$CFS_WORK/checksums.log" >&2; cfs_fail "pg_checksums --check"; }
grep -q '^Bad checksums: *0$' "$CFS_WORK/checksums.log" || cfs_fail "$(cat "$CFS_WORK/checksums.log")"
cfs_log "$(grep -E '^Blocks scanned' "$CFS_WORK/checksums.log")"
# As after a reboot: the RAM mount comes back empty, and the DBA recreates
# the temp tablespace's directories (doc/DBA-GUIDE.md, "PostgreSQL").
catdir=$(basename "$(echo "$ram"/pgtemp/PG_15_*)")
cfs_umount "$ram" || cfs_fail "unmount the RAM mount"
cfs_mount ram "$ram" ram,size=256M,allow_other
[ -z "$(ls -A "$ram")" ] || cfs_fail "the RAM mount is not empty after a remount"
install -d -o "$PG_USER" -g "$PG_USER" -m 700 "$ram/pgtemp" "$ram/pgtemp/$catdir"
pg_start
spill "after the RAM mount's remount"

cfs_log "kill -9 under load, crash recovery"
pgbench_crash_under_load $db 200 2
pg_start_recovered $db

cfs_log "statistics of the relation files (through pg_tblspc's symlink)"
pg_sql "CHECKPOINT"
for rel in pgbench_accounts pgbench_accounts_pkey pgbench_history; do
	f=$PGDATA/$(pg_sql -d $db "SELECT pg_relation_filepath('$rel')")
	getfattr -d "$f" >"$CFS_WORK/stat-$rel" 2>/dev/null || cfs_fail "getfattr -d $f"
	for k in writes write_bytes fsyncs; do
		v=$(cfs_stat "$f" $k)
		[ "$v" -gt 0 ] || cfs_fail "$rel: $k = $v: $(cat "$CFS_WORK/stat-$rel")"
	done
	cfs_log "$rel: writes $(cfs_stat "$f" writes), write_bytes $(cfs_stat "$f" write_bytes), fsyncs $(cfs_stat "$f" fsyncs), reads $(cfs_stat "$f" reads)"
done
"$CFS_BIN/chunkfs" stat "$mnt" >"$CFS_WORK/stat-table" || cfs_fail "chunkfs stat $mnt"
grep -q '(all)' "$CFS_WORK/stat-table" || cfs_fail "chunkfs stat: no totals row: $(cat "$CFS_WORK/stat-table")"
for k in writes fsyncs; do
	[ "$(cfs_stat "$mnt" $k)" -gt 0 ] || cfs_fail "store mount: $k = 0"
done
# Reads of temp files may all come from the page cache (see the sort above).
[ "$(cfs_stat "$ram" writes)" -gt 0 ] || cfs_fail "RAM mount: writes = 0"
cfs_log "RAM mount: writes $(cfs_stat "$ram" writes), reads $(cfs_stat "$ram" reads)"

pg_stop
cfs_umount "$ram" || cfs_fail "unmount the RAM mount"
cfs_umount "$mnt" || cfs_fail "unmount the store"
cfs_log "ok"
