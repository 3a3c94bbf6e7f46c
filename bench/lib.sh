# bench/lib.sh — shell functions for the benchmark scripts (source it; bash).
# shellcheck shell=bash
#
# Cleanup is a stack: every helper that sets something up (a mount, a loop
# device, a daemon) pushes the command that undoes it, and bench_cleanup
# (from an EXIT trap) runs them newest first, so nothing is left mounted or
# attached however the script ends. Long steps run through bench_run, in the
# background with the shell waiting on them: a signal to the script is then
# handled at once (bash defers traps while a foreground command runs) and
# passed on to the step as SIGTERM (background steps ignore SIGINT).

BENCH_CLEANUP=()
BENCH_CHILD=

bench_log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
bench_die() { echo "${BENCH_NAME:-bench}: $*" >&2; exit 1; }

bench_defer() { BENCH_CLEANUP+=("$1"); }

# Undo one deferred command now (the last one equal to $1) and forget it.
bench_undo() {
	local i
	for ((i = ${#BENCH_CLEANUP[@]} - 1; i >= 0; i--)); do
		if [ "${BENCH_CLEANUP[$i]}" = "$1" ]; then
			unset "BENCH_CLEANUP[$i]"
			BENCH_CLEANUP=("${BENCH_CLEANUP[@]}")
			eval "$1"
			return
		fi
	done
}

bench_cleanup() {
	local i
	set +e
	if [ -n "$BENCH_CHILD" ] && kill -0 "$BENCH_CHILD" 2>/dev/null; then
		kill -TERM "$BENCH_CHILD" 2>/dev/null
		# and what a child script runs in the foreground (fio, a load), so
		# its own trap runs now; not a chunkfs daemon: the script unmounts it
		for i in $(ps -o pid=,comm= --ppid "$BENCH_CHILD" | awk '$2 != "chunkfs" { print $1 }'); do
			kill -TERM "$i" 2>/dev/null
		done
		wait "$BENCH_CHILD" 2>/dev/null
	fi
	for ((i = ${#BENCH_CLEANUP[@]} - 1; i >= 0; i--)); do
		eval "${BENCH_CLEANUP[$i]}"
	done
	BENCH_CLEANUP=()
}

# Run a command in the background and wait for it (see above); its status.
# Not inside $(...): redirect its output to a file instead.
bench_run() {
	local rc=0
	"$@" &
	BENCH_CHILD=$!
	wait "$BENCH_CHILD" || rc=$?
	BENCH_CHILD=
	return $rc
}

bench_mounted() { awk -v d="$1" '$2 == d { f = 1 } END { exit !f }' /proc/self/mounts; }

# Unmount a directory and wait for the daemon serving it (if a pid is given:
# chunkfs writes its final snapshot after the unmount returns).
bench_umount() { # dir [pid]
	local i
	if bench_mounted "$1"; then
		umount "$1" 2>/dev/null || umount -l "$1"
	fi
	[ -n "${2:-}" ] || return 0
	for i in $(seq 300); do kill -0 "$2" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$2" 2>/dev/null && kill -9 "$2"
	wait "$2" 2>/dev/null || true
	return 0
}

# Wait until DIR is a mount point while PID lives: 0 once it is; else the
# daemon's LOG goes to stderr and 1 (the daemon died, or SECONDS passed).
bench_wait_mount() { # dir pid log [seconds]
	local i
	for i in $(seq $((${4:-30} * 10))); do
		bench_mounted "$1" && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	cat "$3" >&2
	return 1
}

# chunkfs in the foreground on SOURCE at DIR; sets BENCH_PID; the cleanup
# stack unmounts it. Extra arguments go to chunkfs (e.g. -o ram,size=1G).
bench_cfs_mount() { # chunkfs source dir [args...]
	local exe=$1 src=$2 dir=$3
	shift 3
	bench_daemon_mount "$dir" "chunkfs $src" "$exe" -f "$src" "$dir" "$@"
}

# bench/fuse_null (the do-nothing FUSE filesystem) at DIR; -n for no_open.
bench_fuse_null_mount() { # fuse_null dir [-n]
	bench_daemon_mount "$2" "fuse_null" "$1" ${3:+"$3"} "$2"
}

# A FUSE daemon COMMAND that stays in the foreground, its output in DIR.log;
# waits for DIR to be mounted; sets BENCH_PID; the cleanup stack unmounts it.
bench_daemon_mount() { # dir what command...
	local dir=$1 what=$2
	shift 2
	mkdir -p "$dir"
	"$@" >>"$dir.log" 2>&1 &
	BENCH_PID=$!
	bench_defer "bench_umount '$dir' $BENCH_PID"
	bench_wait_mount "$dir" "$BENCH_PID" "$dir.log" || bench_die "$what did not mount on $dir"
}

# A loop device over an image with direct I/O, in BENCH_LOOP (not printed:
# in a $(...) subshell the cleanup entry would be lost). The cleanup stack
# detaches it.
bench_loop_attach() { # image
	BENCH_LOOP=$(losetup -f --show --direct-io=on "$1") || bench_die "losetup $1 failed"
	bench_defer "losetup -d $BENCH_LOOP 2>/dev/null"
}

bench_tmpfs_mount() { # dir size
	mkdir -p "$1"
	mount -t tmpfs -o "size=$2" tmpfs "$1" || bench_die "tmpfs on $1 failed"
	bench_defer "bench_umount '$1'"
}

# Items rotated left by N: the order of targets changes between repetitions
# so drift on a shared machine lands on all of them.
bench_rotate() { # n items...
	local n=$1 i
	shift
	local a=("$@")
	for ((i = 0; i < ${#a[@]}; i++)); do echo "${a[$(((i + n) % ${#a[@]}))]}"; done
}

# What the numbers were measured on, one "key: value" per line.
bench_sysinfo() { # root store-dir
	local rev
	rev=$(git -C "$1" rev-parse --short HEAD 2>/dev/null || echo '?')
	git -C "$1" diff --quiet HEAD -- fs iopath bench 2>/dev/null || rev="$rev (fs/iopath/bench modified)"
	echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "git: $rev"
	echo "kernel: $(uname -r)"
	echo "cpus: $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
	echo "memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "store dir: $2 ($(df -T "$2" | awk 'NR == 2 { print $2 " on " $1 }'))"
	echo "disk: $(lsblk -dno NAME,SIZE,ROTA,MODEL "$(df "$2" | awk 'NR == 2 { print $1 }')" 2>/dev/null | xargs)"
	echo "fio: $(fio --version 2>/dev/null || echo none)"
	echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}
