# tests/lib/pg.sh — a private PostgreSQL cluster for tests/integration/pg_*.sh
# and bench/pgbench.sh, sourced after common.sh.
#
#   pg_require                        skip (77) unless root and PostgreSQL's programs exist
#   pg_init PGDATA [CONF_LINE...]     initdb --data-checksums as $PG_USER, extra
#                                     postgresql.conf lines; port $PG_PORT (default 5499);
#                                     then pg_use's it
#   pg_use PGDATA PORT                the cluster the functions below act on: sets PGDATA,
#                                     PGPORT, PG_LOG ($CFS_WORK/postgres-PORT.log)
#   pg_start / pg_stop [MODE]         pg_ctl start (waits) / stop (fast by default)
#   pg_sql [-d DB] SQL                psql -At as $PG_USER, stops on the first error
#   pg_as CMD...                      run CMD as $PG_USER (from /, with PGHOST/PGPORT set)
#   pg_postmaster_pid                 the running postmaster's pid (postmaster.pid)
#   pg_crash                          kill -9 the postmaster, then every process it started
#   pg_amcheck_all DB                 pg_amcheck --heapallindexed --rootdescend on DB
# pgbench's tables in DB (pgbench -i done), the crash cases:
#   pgbench_balances_agree DB WHEN    accounts, tellers, branches and history sum to the
#                                     same balance, or the test fails (WHEN names the moment)
#   pgbench_crash_under_load DB MORE SETTLE
#                                     pgbench -c 4 -j 2 on DB; once MORE transactions have
#                                     committed, SETTLE seconds later, pg_crash; PGB_HIST0 is
#                                     the count of pgbench_history before the load
#   pg_start_recovered DB             pg_start after a crash, then: crash recovery ran to
#                                     "redo done", transactions of the crashed load are kept
#                                     (more rows than PGB_HIST0), pg_amcheck clean, balances agree
#
# Why this shape: the server must run as its own user (as in production),
# so the chunkfs mounts it uses need allow_other and directories it owns.
# It listens on a unix socket in the test's own directory only
# (listen_addresses=''), so it never meets the distribution's cluster on
# port 5432 or another test's server. Cleanup is registered by pg_init:
# whatever the test does, the server is stopped (immediate, then kill -9 of
# what is left) before the mounts under it are unmounted.

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_USER=${PG_USER:-postgres}

pg_require() {
	local b
	cfs_require_root
	for b in initdb pg_ctl postgres pgbench pg_amcheck pg_checksums psql; do
		[ -x "$PG_BIN/$b" ] ||
			cfs_skip "PostgreSQL not installed: no $PG_BIN/$b (Debian: apt-get install postgresql-15, as .ci/install-deps.sh does; or set PG_BIN)"
	done
	id -u "$PG_USER" >/dev/null 2>&1 || cfs_skip "no user $PG_USER for the PostgreSQL server"
	cfs_require_cmd runuser
}

# runuser keeps the environment (PGHOST, PGPORT, PGDATA); the cwd must be
# one the server's user may enter, or initdb and pg_ctl complain.
pg_as() { (cd / && runuser -u "$PG_USER" -- "$@"); }

pg_use() {
	PGDATA=$1
	PG_PORT=$2
	PG_SOCK=$CFS_WORK/pgsock
	PG_LOG=$CFS_WORK/postgres-$PG_PORT.log
	export PGDATA PGHOST=$PG_SOCK PGPORT=$PG_PORT PGUSER=$PG_USER
}

pg_init() {
	local line
	pg_use "$1" "${PG_PORT:-5499}"
	shift
	chmod 755 "$CFS_WORK"
	mkdir -p "$PGDATA" "$PG_SOCK"
	chown "$PG_USER": "$PGDATA" "$PG_SOCK"
	chmod 700 "$PGDATA"
	touch "$PG_LOG" && chown "$PG_USER": "$PG_LOG"
	cfs_defer "pg_use '$PGDATA' $PG_PORT; pg_cleanup"
	pg_as "$PG_BIN/initdb" -D "$PGDATA" --data-checksums -A trust -U "$PG_USER" \
		-E UTF8 --locale=C.UTF-8 >"$CFS_WORK/initdb.log" 2>&1 ||
		{ cat "$CFS_WORK/initdb.log" >&2; cfs_fail "initdb failed"; }
	{
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$PG_SOCK'"
		echo "port = $PG_PORT"
		for line in "$@"; do echo "$line"; done
	} >>"$PGDATA/postgresql.conf"
}

pg_start() {
	pg_as "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$PG_LOG" -w -t 120 start >/dev/null ||
		{ tail -n 30 "$PG_LOG" >&2; cfs_fail "PostgreSQL did not start"; }
}

pg_stop() {
	pg_as "$PG_BIN/pg_ctl" -D "$PGDATA" -m "${1:-fast}" -w -t 120 stop >/dev/null ||
		{ tail -n 30 "$PG_LOG" >&2; cfs_fail "PostgreSQL did not stop"; }
}

pg_postmaster_pid() {
	[ -f "$PGDATA/postmaster.pid" ] && head -n 1 "$PGDATA/postmaster.pid"
}

# The children first listed, then the postmaster killed, then the children:
# nothing the postmaster started is left to write after a crash.
pg_crash() {
	local pm kids i
	pm=$(pg_postmaster_pid) || cfs_fail "pg_crash: no postmaster.pid"
	kids=$(pgrep -P "$pm" || true)
	kill -9 "$pm"
	# shellcheck disable=SC2086
	[ -z "$kids" ] || kill -9 $kids 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pm" 2>/dev/null || break
		sleep 0.1
	done
	! kill -0 "$pm" 2>/dev/null || cfs_fail "postmaster $pm survived kill -9"
}

pg_cleanup() {
	local pm
	pm=$(pg_postmaster_pid) || return 0
	kill -0 "$pm" 2>/dev/null || return 0
	pg_as "$PG_BIN/pg_ctl" -D "$PGDATA" -m immediate -w -t 30 stop >/dev/null 2>&1 && return 0
	pg_crash
}

pg_sql() {
	local db=postgres
	if [ "$1" = -d ]; then
		db=$2
		shift 2
	fi
	pg_as "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$db" -c "$1"
}

pg_amcheck_all() {
	pg_as "$PG_BIN/pg_amcheck" --install-missing --heapallindexed --rootdescend -d "$1"
}

pgbench_balances_agree() {
	local b a t br h
	b=$(pg_sql -d "$1" "SELECT (SELECT sum(abalance) FROM pgbench_accounts) || ' ' ||
		(SELECT sum(tbalance) FROM pgbench_tellers) || ' ' ||
		(SELECT sum(bbalance) FROM pgbench_branches) || ' ' ||
		(SELECT coalesce(sum(delta), 0) FROM pgbench_history)")
	read -r a t br h <<<"$b"
	[ "$a" = "$t" ] && [ "$t" = "$br" ] && [ "$br" = "$h" ] ||
		cfs_fail "$2: pgbench balances disagree (accounts tellers branches history): $b"
	cfs_log "$2: balances agree ($b)"
}

pgbench_crash_under_load() {
	local db=$1 more=$2 settle=$3 pid i n
	PGB_HIST0=$(pg_sql -d "$db" "SELECT count(*) FROM pgbench_history")
	pg_as "$PG_BIN/pgbench" -n -c 4 -j 2 -T 60 "$db" >"$CFS_WORK/pgbench-crash.log" 2>&1 &
	pid=$!
	for ((i = 0; i < 300; i++)); do # until the load has committed something
		sleep 0.1
		n=$(pg_sql -d "$db" "SELECT count(*) FROM pgbench_history" 2>/dev/null) || continue
		[ "$n" -gt $((PGB_HIST0 + more)) ] && break
	done
	sleep "$settle"
	pg_crash
	wait $pid && cfs_fail "pgbench did not notice the crash"
	return 0
}

pg_start_recovered() {
	local db=$1 log_off hist1
	log_off=$(stat -c %s "$PG_LOG")
	pg_start
	tail -c +$((log_off + 1)) "$PG_LOG" >"$CFS_WORK/recovery.log"
	grep -q 'not properly shut down; automatic recovery in progress' "$CFS_WORK/recovery.log" ||
		{ cat "$CFS_WORK/recovery.log" >&2; cfs_fail "no crash recovery in the log"; }
	grep -q 'redo done' "$CFS_WORK/recovery.log" ||
		{ cat "$CFS_WORK/recovery.log" >&2; cfs_fail "crash recovery did not finish redo"; }
	hist1=$(pg_sql -d "$db" "SELECT count(*) FROM pgbench_history")
	[ "$hist1" -gt "$PGB_HIST0" ] ||
		cfs_fail "no transaction of the crashed load survived ($PGB_HIST0 -> $hist1)"
	cfs_log "recovered: $((hist1 - PGB_HIST0)) committed transactions of the crashed load kept"
	pg_amcheck_all "$db" >"$CFS_WORK/amcheck-recovered.log" 2>&1 ||
		{ cat "$CFS_WORK/amcheck-recovered.log" >&2; cfs_fail "pg_amcheck after the crash"; }
	pgbench_balances_agree "$db" "after the crash"
}
