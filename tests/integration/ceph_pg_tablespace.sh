#!/usr/bin/env bash
# ceph_pg_tablespace.sh — PostgreSQL 15 with its tablespace on a store on a
# Ceph RBD image (as pg_tablespace.sh does on an image file): a cluster with
# data checksums on local disk, pgbench's tables and indexes in a tablespace
# on the RBD store mount, served as postgres (allow_other).
#
#   pgbench -i into the tablespace, a timed pgbench run, pg_amcheck clean;
#   kill -9 of the postmaster under load, then kill -9 of the chunkfs daemon
#   too (the database host's storage side dies with it), a remount of the
#   store on this host (no takeover needed: the dead daemon was ours), start:
#   crash recovery ran, pg_amcheck clean, the pgbench balances agree, and
#   the relation files' statistics show the writes; stop, pg_checksums clean
#   offline.
#
# Skips (77) when PostgreSQL or Ceph is not installed. About a minute;
# PG_TEST_SECONDS sets the timed run (default 10).
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/ceph.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
. "$CFS_ROOT/tests/lib/pg.sh"
cfs_require_fuse
cfs_ceph_require
pg_require
cfs_require_cmd getfattr

secs=${PG_TEST_SECONDS:-10}
scale=3
mnt=$CFS_WORK/mnt
db=bench

cfs_ceph_cluster
cfs_rbd_image pg 1G
src=$CFS_RBD
"$CFS_BIN/mkchunkfs" -q "$src" || cfs_fail "mkchunkfs $src"
chmod 755 "$CFS_WORK"
cfs_mount "$src" "$mnt" allow_other
install -d -o "$PG_USER" -g "$PG_USER" -m 700 "$mnt/pgts"

pg_init "$CFS_WORK/pgdata" "shared_buffers = 32MB" "checkpoint_timeout = 30s" \
	"max_wal_size = 256MB"
pg_start
pg_sql "CREATE TABLESPACE rbd LOCATION '$mnt/pgts'"
pg_sql "CREATE DATABASE $db"
ts_oid=$(pg_sql "SELECT oid FROM pg_tablespace WHERE spcname = 'rbd'")

cfs_log "pgbench -i -s $scale into the tablespace on $src"
pg_as "$PG_BIN/pgbench" -i -q -s $scale --tablespace=rbd --index-tablespace=rbd "$db" \
	>"$CFS_WORK/pgbench-init.log" 2>&1 ||
	{ cat "$CFS_WORK/pgbench-init.log" >&2; cfs_fail "pgbench -i"; }
inside=$(pg_sql -d $db "SELECT count(*) FROM pg_class WHERE relname LIKE 'pgbench_%' AND reltablespace = $ts_oid")
[ "$inside" -eq 7 ] || cfs_fail "$inside pgbench relations in the tablespace, expected 7"
accounts=$PGDATA/$(pg_sql -d $db "SELECT pg_relation_filepath('pgbench_accounts')")
case $(readlink -f "$accounts") in
"$mnt"/pgts/PG_15_*) ;;
*) cfs_fail "pgbench_accounts is $(readlink -f "$accounts"), not on the RBD store" ;;
esac

cfs_log "pgbench -T $secs"
pg_as "$PG_BIN/pgbench" -n -c 4 -j 2 -T "$secs" "$db" >"$CFS_WORK/pgbench-run.log" 2>&1 ||
	{ cat "$CFS_WORK/pgbench-run.log" >&2; cfs_fail "pgbench run"; }
cfs_log "$(grep -E '^tps' "$CFS_WORK/pgbench-run.log" | head -n 1)"
pg_amcheck_all $db >"$CFS_WORK/amcheck.log" 2>&1 ||
	{ cat "$CFS_WORK/amcheck.log" >&2; cfs_fail "pg_amcheck after the run"; }

pgbench_balances_agree $db "after the run"

cfs_log "kill -9 of the postmaster under load, then of the chunkfs daemon"
pgbench_crash_under_load $db 100 1
cfs_kill9 "$mnt"
cfs_mount "$src" "$mnt" allow_other
pg_start_recovered $db

pg_sql "CHECKPOINT"
for rel in pgbench_accounts pgbench_history; do
	f=$PGDATA/$(pg_sql -d $db "SELECT pg_relation_filepath('$rel')")
	for k in writes fsyncs; do
		[ "$(cfs_stat "$f" $k)" -gt 0 ] || cfs_fail "$rel: $k = 0"
	done
	cfs_expect "$f" err_eio 0
	cfs_log "$rel: writes $(cfs_stat "$f" writes), fsyncs $(cfs_stat "$f" fsyncs), write p99 $(cfs_stat "$f" write_lat_p99_us) us"
done
pg_stop
pg_as "$PG_BIN/pg_checksums" --check -D "$PGDATA" >"$CFS_WORK/checksums.log" 2>&1 ||
	{ cat "$CFS_WORK/checksums.log" >&2; cfs_fail "pg_checksums --check"; }
grep -q '^Bad checksums: *0$' "$CFS_WORK/checksums.log" || cfs_fail "$(cat "$CFS_WORK/checksums.log")"
cfs_umount "$mnt" || cfs_fail "unmount the store"
"$CFS_BIN/fsck.chunkfs" "$src" >"$CFS_WORK/fsck.out" 2>&1 || { cat "$CFS_WORK/fsck.out"; cfs_fail "fsck"; }
cfs_log "ok"
