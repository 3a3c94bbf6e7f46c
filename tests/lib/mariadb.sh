# tests/lib/mariadb.sh — a private MariaDB server for tests/integration/mariadb_*.sh
# and bench/mariadb.sh, sourced after common.sh.
#
#   my_require                        skip (77) unless root and MariaDB's programs exist
#   my_init NAME DATADIR [CONF_LINE...]
#                                     an option file $CFS_WORK/my-NAME.cnf ([mariadbd]
#                                     DATADIR, a unix socket in $CFS_WORK/myrun-NAME, no TCP, the
#                                     error log $CFS_WORK/mariadb-NAME.err, then the extra
#                                     lines) and mariadb-install-db into DATADIR, as
#                                     $MY_USER; then my_use's it
#   my_use NAME                       the server the functions below act on: sets MY_CNF,
#                                     MY_SOCK, MY_ERR, MY_DATADIR
#   my_start / my_stop                start mariadbd (waits until it answers) / shut it
#                                     down cleanly (waits until it has exited)
#   my_pid                            the running mariadbd's pid (its pid file)
#   my_crash                          kill -9 mariadbd and wait until it is gone
#   my_sql [-d DB] SQL                mariadb -N -B as root over the socket, stops on the
#                                     first error
#   my_client ARGS...                 the mariadb client on the current server
#   my_sysbench TEST ARGS...          sysbench TEST with the mysql driver on the socket
#   my_check_tables DB                CHECK TABLE ... EXTENDED on every table of DB;
#                                     fails unless each says OK
#   my_redo_expectation FILE          what InnoDB's error log must say of its redo
#                                     log's buffering for FILE (see below)
#
# Why this shape: the server runs as its own user (as in production), so
# the chunkfs mounts it uses need allow_other and directories it owns. It
# listens on a unix socket in the test's work directory only
# (skip-networking), so it never meets the distribution's server or another
# test's. Cleanup is registered by my_init: whatever the test does, the
# server is stopped (kill -9 if a clean shutdown does not end it in 60 s)
# before the mounts under it are unmounted.

MY_USER=${MY_USER:-mysql}
MY_SBIN=${MY_SBIN:-/usr/sbin}
MY_BIN=${MY_BIN:-/usr/bin}
declare -A _my_pid=()

my_require() {
	local b
	cfs_require_root
	[ -x "$MY_SBIN/mariadbd" ] ||
		cfs_skip "MariaDB not installed: no $MY_SBIN/mariadbd (Debian: apt-get install mariadb-server mariadb-client, as .ci/install-deps.sh does)"
	for b in mariadb mariadb-admin mariadb-install-db; do
		[ -x "$MY_BIN/$b" ] || cfs_skip "MariaDB not installed: no $MY_BIN/$b"
	done
	id -u "$MY_USER" >/dev/null 2>&1 || cfs_skip "no user $MY_USER for the MariaDB server"
}

my_use() {
	MY_NAME=$1
	MY_CNF=$CFS_WORK/my-$1.cnf
	MY_RUN=$CFS_WORK/myrun-$1
	MY_SOCK=$MY_RUN/mariadbd.sock
	MY_ERR=$CFS_WORK/mariadb-$1.err
	MY_DATADIR=$(sed -n 's/^datadir *= *//p' "$MY_CNF" 2>/dev/null || true)
}

my_init() {
	local name=$1 datadir=$2 line
	shift 2
	chmod 755 "$CFS_WORK"
	mkdir -p "$datadir"
	chown "$MY_USER": "$datadir"
	chmod 750 "$datadir"
	touch "$CFS_WORK/mariadb-$name.err"
	chown "$MY_USER": "$CFS_WORK/mariadb-$name.err"
	# the socket and the pid file: in a directory the server's user owns
	install -d -o "$MY_USER" -g "$MY_USER" -m 755 "$CFS_WORK/myrun-$name"
	{
		echo "[client]"
		echo "socket = $CFS_WORK/myrun-$name/mariadbd.sock"
		echo "user = root"
		echo "[mariadbd]"
		echo "datadir = $datadir"
		echo "socket = $CFS_WORK/myrun-$name/mariadbd.sock"
		echo "pid-file = $CFS_WORK/myrun-$name/mariadbd.pid"
		echo "log-error = $CFS_WORK/mariadb-$name.err"
		echo "skip-networking"
		echo "user = $MY_USER"
		for line in "$@"; do echo "$line"; done
	} >"$CFS_WORK/my-$name.cnf"
	chmod 644 "$CFS_WORK/my-$name.cnf"
	my_use "$name"
	cfs_defer "my_use '$name'; my_cleanup"
	"$MY_BIN/mariadb-install-db" --defaults-file="$MY_CNF" --auth-root-authentication-method=socket \
		--skip-test-db >"$CFS_WORK/install-db-$name.log" 2>&1 ||
		{ cat "$CFS_WORK/install-db-$name.log" "$MY_ERR" >&2; cfs_fail "mariadb-install-db into $datadir failed"; }
}

my_pid() {
	[ -f "$MY_RUN/mariadbd.pid" ] && head -n 1 "$MY_RUN/mariadbd.pid"
}

my_client() { "$MY_BIN/mariadb" --defaults-file="$MY_CNF" "$@"; }

# mariadbd itself stays our child (no mysqld_safe: nothing restarts it
# behind the test's back after a kill -9).
my_start() {
	local pid i
	rm -f "$MY_RUN/mariadbd.pid"
	(cd / && exec "$MY_SBIN/mariadbd" --defaults-file="$MY_CNF") >>"$MY_ERR" 2>&1 &
	pid=$!
	_my_pid[$MY_NAME]=$pid
	for ((i = 0; i < 1200; i++)); do
		"$MY_BIN/mariadb-admin" --defaults-file="$MY_CNF" ping >/dev/null 2>&1 && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	tail -n 40 "$MY_ERR" >&2
	cfs_fail "mariadbd ($MY_NAME) did not start"
}

# Waits for the pid we started: mariadb-admin shutdown returns before the
# server has closed its files.
my_stop() {
	local pid=${_my_pid[$MY_NAME]:-} i
	"$MY_BIN/mariadb-admin" --defaults-file="$MY_CNF" shutdown >/dev/null 2>&1 ||
		{ tail -n 30 "$MY_ERR" >&2; cfs_fail "mariadb-admin shutdown ($MY_NAME)"; }
	[ -n "$pid" ] || return 0
	for ((i = 0; i < 1200; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && { tail -n 30 "$MY_ERR" >&2; cfs_fail "mariadbd ($MY_NAME) did not exit in 120 s"; }
	wait "$pid" 2>/dev/null || true
	unset "_my_pid[$MY_NAME]"
}

my_crash() {
	local pid=${_my_pid[$MY_NAME]:-}
	[ -n "$pid" ] || cfs_fail "my_crash: no mariadbd ($MY_NAME) started by this test"
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	unset "_my_pid[$MY_NAME]"
}

# my_wait_exit SECONDS: wait for the server to die by itself (after its
# store went away); 1 if it still runs.
my_wait_exit() {
	local pid=${_my_pid[$MY_NAME]:-} i
	[ -n "$pid" ] || return 0
	for ((i = 0; i < $1 * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; unset "_my_pid[$MY_NAME]"; return 0; }
		sleep 0.1
	done
	return 1
}

my_cleanup() {
	local pid=${_my_pid[$MY_NAME]:-} i
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
	"$MY_BIN/mariadb-admin" --defaults-file="$MY_CNF" shutdown >/dev/null 2>&1 &
	for ((i = 0; i < 600; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 0
}

my_sql() {
	local db=()
	if [ "$1" = -d ]; then
		db=("$2")
		shift 2
	fi
	my_client -N -B -e "$1" "${db[@]}"
}

my_sysbench() {
	local t=$1
	shift
	sysbench "$t" --db-driver=mysql --mysql-socket="$MY_SOCK" --mysql-user=root "$@"
}

my_check_tables() {
	local db=$1 t out
	for t in $(my_sql -d "$db" "SHOW TABLES"); do
		out=$(my_sql -d "$db" "CHECK TABLE \`$t\` EXTENDED") || cfs_fail "CHECK TABLE $db.$t failed"
		# one line per message; the last one says OK for a clean table
		grep -q $'\tstatus\tOK$' <<<"$out" && ! grep -qv $'\tstatus\tOK$' <<<"$out" ||
			cfs_fail "CHECK TABLE $db.$t EXTENDED: $out"
	done
}

# InnoDB opens its redo log with O_DIRECT ("File system buffers for log
# disabled") only when it can find the physical block size of the device
# that holds it: /sys/dev/block/MAJ:MIN/queue/physical_block_size for the
# file's st_dev. A FUSE mount's anonymous device (0:NN) has no such entry,
# and InnoDB writes its log buffered ("Buffered log writes"). Prints the
# message the error log must have for FILE on its filesystem as it is now.
my_redo_expectation() {
	local dev
	dev=$(stat -c '%Hd:%Ld' "$1") || cfs_fail "stat $1"
	if [ -e "/sys/dev/block/$dev/queue/physical_block_size" ]; then
		echo "File system buffers for log disabled"
	else
		echo "Buffered log writes"
	fi
}
