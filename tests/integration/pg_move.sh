#!/usr/bin/env bash
# pg_move.sh — PostgreSQL 15 keeps running while its relation files move
# between the stores of a pool (fs/POOLS.md, "Moving a chunk online"):
#
#   a pool of two stores (ssd0, hdd0) mounted with allow_other, a tablespace
#   on it placed on ssd0 (tests/lib/pg.sh's cluster, data checksums on);
#   pgbench -i into it, then pgbench -c 4 running while every relation file
#   of the tablespace (the large ones in whole units, the small ones in
#   pieces of shared units) is moved to hdd0 and back with `chunkfs move`,
#   round after round until pgbench ends (at least two rounds inside the
#   run); each file is then wholly on its target; pgbench without a failed
#   transaction, pg_amcheck (heap and every index, heapallindexed) clean,
#   the balances agree and the row counts are pgbench's (history = the
#   transactions it reports);
#   then the DBA's disk swap: under pgbench again, the tablespace moved to
#   hdd0 and hdd0 removed from the pool (`chunkfs store remove`), which
#   moves every file back to ssd0; the same checks; a checkpoint, stop,
#   unmount, fsck.chunkfs -n of the pool without hdd0 clean, pg_checksums
#   clean, remount, start, and the same checks again.
#
# Skips (77) only when PostgreSQL is not installed. About a minute and a
# half; PG_TEST_SECONDS sets the first pgbench run (default 20).
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/pg.sh"
cfs_require_fuse
pg_require
cfs_require_cmd getfattr setfattr

secs=${PG_TEST_SECONDS:-20}
scale=5
s0=$CFS_WORK/ssd0.img s1=$CFS_WORK/hdd0.img
pool=$s0,$s1
mnt=$CFS_WORK/mnt
db=bench
unit=$((1 << 20))

cfs_mkfs "$s0" 768M -L ssd0
"$CFS_BIN/mkchunkfs" -q -s 768M --sparse -L hdd0 --join "$s0" "$s1" || cfs_fail "join of hdd0 failed"
chmod 755 "$CFS_WORK"
# Mounts first: cleanup runs in reverse, so the server stops before them.
cfs_mount "$pool" "$mnt" allow_other
install -d -o "$PG_USER" -g "$PG_USER" -m 700 "$mnt/pgts"
setfattr -n user.chunkfs.store -v ssd0 "$mnt/pgts"

where() { getfattr --absolute-names --only-values -n user.chunkfs.store "$1"; }
used_on() { # used bytes of store $1
	getfattr --absolute-names --only-values -n user.chunkfs.stores "$mnt" |
		awk -v s="$1" '$1 == s { for (i = 2; i <= NF; i++) if ($i ~ /^used=/) { sub("used=", "", $i); print $i } }'
}
# The relation files above one unit (whole units), largest first; all of them.
unit_files() {
	find "$mnt/pgts" -type f -size +$((unit / 1024))k -printf '%s %p\n' | sort -rn | cut -d' ' -f2-
}
all_files() { find "$mnt/pgts" -type f; }
# move_to STORE FILE...: chunkfs move of each (a file PostgreSQL removed
# meanwhile is skipped), then it is wholly on STORE.
move_to() {
	local to=$1 f
	shift
	for f in "$@"; do
		if ! "$CFS_BIN/chunkfs" move "$f" "$to" >"$CFS_WORK/move.out" 2>&1; then
			[ -e "$f" ] || continue
			cfs_fail "chunkfs move $f $to: $(cat "$CFS_WORK/move.out")"
		fi
		[ "$(where "$f")" = "$to" ] || cfs_fail "after its move $f is on $(where "$f"), not $to"
		moved=$((moved + 1))
	done
}

pg_init "$CFS_WORK/pgdata" "shared_buffers = 32MB" "checkpoint_timeout = 30s" "max_wal_size = 256MB"
pg_start
pg_sql "CREATE TABLESPACE cfs LOCATION '$mnt/pgts'"
pg_sql "CREATE DATABASE $db"
cfs_log "pgbench -i -s $scale into the pool's tablespace"
pg_as "$PG_BIN/pgbench" -i -q -s $scale --tablespace=cfs --index-tablespace=cfs "$db" \
	>"$CFS_WORK/pgbench-init.log" 2>&1 ||
	{ cat "$CFS_WORK/pgbench-init.log" >&2; cfs_fail "pgbench -i"; }
pg_sql "CHECKPOINT"
mapfile -t files < <(unit_files)
[ ${#files[@]} -ge 2 ] || cfs_fail "only ${#files[@]} relation files of a unit or more: $(ls -lR "$mnt/pgts")"
for f in "${files[@]}"; do
	[ "$(where "$f")" = ssd0 ] || cfs_fail "$f is on $(where "$f"), not ssd0"
done
cfs_log "${#files[@]} relation files of a unit or more, $(du -cb "${files[@]}" | tail -n 1 | cut -f1) bytes, on ssd0"
hist0=$(pg_sql -d $db "SELECT count(*) FROM pgbench_history")

# counts_agree WHEN: pgbench's tables hold the rows they must.
counts_agree() {
	local c
	c=$(pg_sql -d $db "SELECT (SELECT count(*) FROM pgbench_accounts) || ' ' ||
		(SELECT count(*) FROM pgbench_tellers) || ' ' || (SELECT count(*) FROM pgbench_branches) ||
		' ' || (SELECT count(*) FROM pgbench_history)")
	[ "$c" = "$((scale * 100000)) $((scale * 10)) $scale $((hist0 + done_tx))" ] ||
		cfs_fail "$1: row counts (accounts tellers branches history) $c, expected" \
			"$((scale * 100000)) $((scale * 10)) $scale $((hist0 + done_tx))"
	cfs_log "$1: row counts $c"
}
check_all() { # WHEN
	pg_amcheck_all $db >"$CFS_WORK/amcheck.log" 2>&1 ||
		{ cat "$CFS_WORK/amcheck.log" >&2; cfs_fail "pg_amcheck $1"; }
	pgbench_balances_agree $db "$1"
	counts_agree "$1"
}

cfs_log "pgbench -T $secs while the relation files move between the stores"
# -n: no vacuum, and no truncation of pgbench_history (its rows are counted).
pg_as "$PG_BIN/pgbench" -n -c 4 -j 2 -T "$secs" "$db" >"$CFS_WORK/pgbench-run.log" 2>&1 &
pgb=$!
cfs_defer "kill $pgb"
sleep 1
rounds=0 moved=0 peak_hdd=0
while kill -0 $pgb 2>/dev/null; do
	for to in hdd0 ssd0; do
		mapfile -t all < <(all_files)
		move_to $to "${all[@]}"
		[ $to = ssd0 ] || { u=$(used_on hdd0); [ "$u" -le "$peak_hdd" ] || peak_hdd=$u; }
	done
	kill -0 $pgb 2>/dev/null && rounds=$((rounds + 1))
done
wait $pgb || { cat "$CFS_WORK/pgbench-run.log" >&2; cfs_fail "pgbench during the moves"; }
[ $rounds -ge 2 ] || cfs_fail "only $rounds rounds of moves inside the pgbench run"
[ "$peak_hdd" -ge $((${#files[@]} * unit)) ] || cfs_fail "hdd0 held only $peak_hdd bytes after a round"
done_tx=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$CFS_WORK/pgbench-run.log")
failed_tx=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' "$CFS_WORK/pgbench-run.log")
[ "${done_tx:-0}" -gt 0 ] && [ "${failed_tx:-0}" = 0 ] ||
	{ cat "$CFS_WORK/pgbench-run.log" >&2; cfs_fail "pgbench: $done_tx transactions, $failed_tx failed"; }
cfs_log "$done_tx transactions ($(sed -nE 's/^tps = ([0-9.]+) .*/\1/p' "$CFS_WORK/pgbench-run.log" | head -n 1) tps)," \
	"$moved moves in $rounds full rounds, hdd0 held up to $peak_hdd bytes"
check_all "after the moves"

cfs_log "pgbench while the tablespace moves to hdd0 and hdd0 is removed from the pool"
pg_as "$PG_BIN/pgbench" -n -c 4 -j 2 -T 12 "$db" >"$CFS_WORK/pgbench-remove.log" 2>&1 &
pgb=$!
cfs_defer "kill $pgb"
sleep 1
setfattr -n user.chunkfs.store -v hdd0 "$mnt/pgts"
mapfile -t all < <(all_files)
move_to hdd0 "${all[@]}"
"$CFS_BIN/chunkfs" store remove "$mnt" hdd0 >"$CFS_WORK/remove.out" 2>&1 ||
	cfs_fail "chunkfs store remove hdd0 under pgbench: $(cat "$CFS_WORK/remove.out")"
kill -0 $pgb 2>/dev/null || cfs_fail "pgbench ended before the removal did: make its run longer"
wait $pgb || { cat "$CFS_WORK/pgbench-remove.log" >&2; cfs_fail "pgbench during the removal"; }
getfattr --absolute-names --only-values -n user.chunkfs.stores "$mnt" | grep -q '^hdd0 ' &&
	cfs_fail "hdd0 is still in the pool"
for f in $(all_files); do
	[ "$(where "$f")" = ssd0 ] || cfs_fail "after the removal $f is on $(where "$f"), not ssd0"
done
more_tx=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$CFS_WORK/pgbench-remove.log")
failed_tx=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' "$CFS_WORK/pgbench-remove.log")
[ "${more_tx:-0}" -gt 0 ] && [ "${failed_tx:-0}" = 0 ] ||
	{ cat "$CFS_WORK/pgbench-remove.log" >&2; cfs_fail "pgbench: $more_tx transactions, $failed_tx failed"; }
done_tx=$((done_tx + more_tx))
cfs_log "${#all[@]} files moved to hdd0 and hdd0 removed under $more_tx transactions" \
	"($(sed -nE 's/^tps = ([0-9.]+) .*/\1/p' "$CFS_WORK/pgbench-remove.log" | head -n 1) tps)"
check_all "after the removal"
pool=$s0

cfs_log "checkpoint, stop, unmount, fsck, pg_checksums, remount, start"
pg_sql "CHECKPOINT"
pg_stop
cfs_umount "$mnt" || cfs_fail "unmount"
"$CFS_BIN/fsck.chunkfs" -n "$pool" >"$CFS_WORK/fsck.out" 2>&1 ||
	cfs_fail "fsck.chunkfs -n after the moves: $(cat "$CFS_WORK/fsck.out")"
cfs_mount "$pool" "$mnt" allow_other
for f in $(unit_files); do
	[ "$(where "$f")" = ssd0 ] || cfs_fail "after the remount $f is on $(where "$f"), not ssd0"
done
pg_as "$PG_BIN/pg_checksums" --check -D "$PGDATA" >"$CFS_WORK/checksums.log" 2>&1 ||
	{ cat "$CFS_WORK/checksums.log" >&2; cfs_fail "pg_checksums --check"; }
grep -q '^Bad checksums: *0$' "$CFS_WORK/checksums.log" || cfs_fail "$(cat "$CFS_WORK/checksums.log")"
pg_start
check_all "after the remount"
pg_stop
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"
