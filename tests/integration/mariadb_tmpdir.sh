#!/usr/bin/env bash
# mariadb_tmpdir.sh — MariaDB's temporary files on chunkfs: a server (as
# mysql, allow_other) whose tmpdir is a directory on a RAM mount and one on a
# store mount (tmpdir = A:B, used in turn), its datadir off chunkfs:
#   - the error log has no "O_TMPFILE is not supported ... (disabling future
#     attempts)": MariaDB creates its temporary files with O_TMPFILE
#     (mysys create_temp_file) and they work;
#   - the temporary files InnoDB keeps open from its start are on both
#     mounts and have no name (/proc/PID/fd: the directory, then "/"), not
#     named files unlinked after their creation (the fallback);
#   - a sort that spills to tmpdir (merge passes) returns every row in order;
#   - after a clean shutdown both mounts have their space back.
# Skips (77) when MariaDB is not installed.
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/mariadb.sh"
cfs_require_fuse
my_require

img=$CFS_WORK/store.img
store=$CFS_WORK/store
ram=$CFS_WORK/ram
rows=50000

# Mounts first: cleanup runs in reverse, so the server stops before them.
cfs_mkfs "$img" 256M
chmod 755 "$CFS_WORK"
cfs_mount "$img" "$store" allow_other
cfs_mount ram "$ram" ram,size=256M,allow_other
install -d -o "$MY_USER" -g "$MY_USER" -m 750 "$ram/mytmp" "$store/mytmp"
ram_used0=$(df -B1 --output=used "$ram" | tail -n 1)
store_free0=$(stat -f -c %f "$store")

my_init tmp "$CFS_WORK/mysql" "tmpdir = $ram/mytmp:$store/mytmp" "skip-log-bin" \
	"innodb_buffer_pool_size = 32M"
my_start
[ "$(my_sql "SELECT @@tmpdir")" = "$ram/mytmp:$store/mytmp" ] ||
	cfs_fail "tmpdir is $(my_sql "SELECT @@tmpdir")"

# ---- O_TMPFILE in use -------------------------------------------------------------
if grep "O_TMPFILE is not supported" "$MY_ERR"; then
	cfs_fail "MariaDB found no O_TMPFILE on the tmpdir"
fi
pid=$(my_pid)
for dir in "$ram/mytmp" "$store/mytmp"; do
	unnamed=0
	for fd in /proc/"$pid"/fd/*; do
		target=$(readlink "$fd" 2>/dev/null) || continue
		case $target in
		"$dir// (deleted)") unnamed=$((unnamed + 1)) ;;
		"$dir/"*) cfs_fail "mariadbd holds $target: a named temporary file, not O_TMPFILE" ;;
		esac
	done
	[ $unnamed -gt 0 ] || cfs_fail "mariadbd holds no O_TMPFILE file in $dir"
	cfs_log "$dir: $unnamed O_TMPFILE files held by mariadbd"
done

# ---- a sort through tmpdir ------------------------------------------------------------
my_sql "CREATE DATABASE t"
my_sql -d t "CREATE TABLE s (id INT PRIMARY KEY, v CHAR(32) CHARACTER SET latin1 COLLATE latin1_bin)
	ENGINE=InnoDB; INSERT INTO s SELECT seq, MD5(seq) FROM seq_1_to_$rows"
my_sql -d t "SELECT v FROM s" | LC_ALL=C sort >"$CFS_WORK/want"
my_client -N -B t >"$CFS_WORK/got" <<'SQL'
SET SESSION sort_buffer_size = 32768;
SELECT v FROM s ORDER BY v;
SQL
my_client -N -B t >"$CFS_WORK/passes" <<'SQL'
SET SESSION sort_buffer_size = 32768;
SELECT COUNT(*) FROM (SELECT v FROM s ORDER BY v LIMIT 1000000) x;
SHOW SESSION STATUS LIKE 'Sort_merge_passes';
SQL
passes=$(awk '$1 == "Sort_merge_passes" { print $2 }' "$CFS_WORK/passes")
[ "${passes:-0}" -gt 0 ] || cfs_fail "the sort did not spill to tmpdir: $(cat "$CFS_WORK/passes")"
[ "$(wc -l <"$CFS_WORK/got")" -eq $rows ] || cfs_fail "the sort returned $(wc -l <"$CFS_WORK/got") rows"
cmp -s "$CFS_WORK/want" "$CFS_WORK/got" || cfs_fail "the sort through tmpdir returned other rows"
cfs_log "a sort of $rows rows with $passes merge passes through tmpdir: in order"
if grep "O_TMPFILE is not supported" "$MY_ERR"; then
	cfs_fail "MariaDB found no O_TMPFILE on the tmpdir"
fi

# ---- space back after the server ------------------------------------------------------
my_stop
for ((i = 0; i < 50; i++)); do
	[ "$(df -B1 --output=used "$ram" | tail -n 1)" = "$ram_used0" ] &&
		[ "$(stat -f -c %f "$store")" = "$store_free0" ] && break
	sleep 0.1
done
[ "$(df -B1 --output=used "$ram" | tail -n 1)" = "$ram_used0" ] ||
	cfs_fail "RAM mount: $(df -B1 --output=used "$ram" | tail -n 1) bytes used after the server, $ram_used0 before"
[ "$(stat -f -c %f "$store")" = "$store_free0" ] ||
	cfs_fail "store mount: $(stat -f -c %f "$store") units free after the server, $store_free0 before"
cfs_log "MariaDB's tmpdir on chunkfs: O_TMPFILE, no fallback, space back"
