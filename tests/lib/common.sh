# tests/lib/common.sh — sourced by tests/integration/*.sh (bash).
#
# Gives every integration test the same contract:
#   exit 0 pass, 1 fail, 77 skip (with the reason as the last line of output);
#   a private work directory; and cleanup that runs however the test ends
#   (pass, failure, set -e, timeout's SIGTERM): mounts are unmounted, loop
#   devices detached, daemons killed, in reverse order of creation.
#
# Usage:
#   . "$(dirname "$0")/../lib/common.sh"
#   cfs_require_root
#   img=$(cfs_image 64M)             # sparse image file in the work dir
#   cfs_loop_attach "$img"; dev=$CFS_LOOP_DEV   # detached at exit
#   (never call cfs_loop_attach or cfs_defer inside $(...): a subshell's
#   cleanup registration is lost)
#   cfs_defer "some command"         # runs at exit
#   cfs_fail "message"               # exit 1 with a message
#   cfs_expect_fail_with CMD... -- "text"   # CMD must fail and print text
#   cfs_expect_exit RC CMD...        # CMD must exit RC (its output in $out)

set -euo pipefail

CFS_ROOT=${CFS_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${BUILD:-release}
CFS_BIN=${CFS_BIN:-$CFS_ROOT/build/$BUILD}
export CFS_ROOT BUILD CFS_BIN
# shellcheck source=tests/lib/kernel_state.sh
. "$(dirname "${BASH_SOURCE[0]}")/kernel_state.sh"

# The work dir lives on the disk's filesystem, not tmpfs: tmpfs ignores the
# O_DIRECT alignment rules that a real device enforces.
CFS_WORK=$(mktemp -d "${CFS_TEST_TMPDIR:-/var/tmp}/chunkfs-test.XXXXXX")
_cfs_cleanups=()

cfs_defer() { _cfs_cleanups+=("$*"); }

_cfs_run_cleanups() {
	local rc=$? i
	set +e
	for ((i = ${#_cfs_cleanups[@]} - 1; i >= 0; i--)); do
		eval "${_cfs_cleanups[$i]}" >/dev/null 2>&1
	done
	# A failed test: the daemons' last words (a crash, a sanitizer report)
	# go into its log before the work dir, and their logs, are removed.
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
		for i in "$CFS_WORK"/chunkfs-*.log; do
			[ -s "$i" ] || continue
			echo "# last lines of ${i##*/}:" >&2
			tail -n 40 "$i" >&2
		done
	fi
	rm -rf "$CFS_WORK"
	exit $rc
}
trap _cfs_run_cleanups EXIT
trap 'exit 143' TERM INT

# ThreadSanitizer: after cfs_tsan_watch, every sanitized process the test
# starts (BUILD=tsan daemons, tests/progs) writes its reports into the work
# dir, with tests/tsan.supp's suppressions (each says why);
# cfs_tsan_verdict, once those processes have ended (daemons unmounted),
# fails the test on any report. Without BUILD=tsan nothing writes any.
cfs_tsan_watch() {
	mkdir -p "$CFS_WORK/tsan"
	# halt_on_error=0, exitcode=0: collect every report and exit as
	# without them; the verdict fails on any. history_size=7 (the most):
	# the earlier access's stack is restored even after a long run, so a
	# suppression by function name (ram_write) can match it.
	export TSAN_OPTIONS="log_path=$CFS_WORK/tsan/tsan:halt_on_error=0:exitcode=0:history_size=7:suppressions=$CFS_ROOT/tests/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
}
cfs_tsan_verdict() {
	if ls "$CFS_WORK"/tsan/tsan* >/dev/null 2>&1; then
		head -n 60 "$CFS_WORK"/tsan/tsan*
		cfs_fail "ThreadSanitizer reported (above)"
	fi
	return 0
}

cfs_log() { echo "# $*"; }
cfs_fail() { echo "FAIL: $*" >&2; exit 1; }
cfs_skip() { echo "skip: $*"; exit 77; }

cfs_require_root() { [ "$(id -u)" -eq 0 ] || cfs_skip "needs root"; }
cfs_require_cmd() {
	local c
	for c in "$@"; do command -v "$c" >/dev/null 2>&1 || cfs_skip "needs $c"; done
}
cfs_require_fuse() {
	cfs_require_root
	[ -c /dev/fuse ] || cfs_skip "needs /dev/fuse"
	cfs_require_cmd fusermount3
}

# cfs_uring_switch: skip unless the kernel has FUSE over io_uring and its
# switch can be written; CFS_URING_PARAM is the switch. The test then holds
# the kernel-state lock (tests/lib/kernel_state.sh) until it exits, so a
# second test run on the machine cannot flip the switch under it, and the
# switch is restored to what it was before the lock is let go (the tests
# set it; the daemon never does).
CFS_URING_PARAM=/sys/module/fuse/parameters/enable_uring
cfs_uring_switch() {
	[ -e $CFS_URING_PARAM ] || cfs_skip "kernel without FUSE over io_uring ($CFS_URING_PARAM)"
	[ -w $CFS_URING_PARAM ] || cfs_skip "cannot write $CFS_URING_PARAM"
	cfs_kstate_lock || cfs_fail "the kernel-state lock: another test run holds it"
	cfs_defer "cfs_kstate_unlock"
	cfs_defer "echo $(cat $CFS_URING_PARAM) > $CFS_URING_PARAM"
}

# cfs_rerun_on_uring SCRIPT: run another integration test with every mount
# on FUSE over io_uring (CFS_EXTRA_MOUNT_OPTS=transport=uring); exits with
# its status.
cfs_rerun_on_uring() {
	local rc
	cfs_require_fuse
	cfs_uring_switch
	echo Y >$CFS_URING_PARAM
	set +e
	CFS_EXTRA_MOUNT_OPTS=transport=uring "$CFS_ROOT/tests/integration/$1"
	rc=$?
	set -e
	exit $rc
}

# cfs_image SIZE [NAME]: a sparse image file in the work dir; prints its path.
cfs_image() {
	local path=$CFS_WORK/${2:-store.img}
	truncate -s "$1" "$path"
	echo "$path"
}

# cfs_loop_attach FILE: attach a loop device (direct I/O to the file where the
# kernel allows it); sets CFS_LOOP_DEV=/dev/loopN and detaches it at exit.
cfs_loop_attach() {
	CFS_LOOP_DEV=$(losetup -f --show --direct-io=on "$1" 2>/dev/null ||
		losetup -f --show "$1") || cfs_skip "cannot attach a loop device"
	cfs_defer "losetup -d $CFS_LOOP_DEV"
}

# cfs_expect_fail_with TEXT EXPECTED_RC CMD...: CMD must exit EXPECTED_RC
# (or any non-zero when EXPECTED_RC is "nonzero") and print TEXT on
# stdout or stderr.
# cfs_expect_exit RC CMD...: CMD must exit RC; its output (stdout and
# stderr) is left in $out.
cfs_expect_exit() {
	local want=$1 rc
	shift
	set +e
	out=$("$@" 2>&1)
	rc=$?
	set -e
	[ $rc -eq "$want" ] || cfs_fail "'$*' exited $rc, expected $want. Output: $out"
}

cfs_expect_fail_with() {
	local text=$1 want=$2 out rc
	shift 2
	set +e
	out=$("$@" 2>&1)
	rc=$?
	set -e
	if [ "$want" = nonzero ]; then
		[ $rc -ne 0 ] || cfs_fail "'$*' succeeded; expected failure with '$text'. Output: $out"
	else
		[ $rc -eq "$want" ] || cfs_fail "'$*' exited $rc, expected $want. Output: $out"
	fi
	grep -qF -- "$text" <<<"$out" || cfs_fail "'$*' did not say '$text'. Output: $out"
	cfs_log "refused as expected (exit $rc): $(head -n 1 <<<"$out")"
}

# ---- chunkfs mounts (added for the daemon's tests) ---------------------------
#
# cfs_mkfs IMAGE SIZE [ARGS...]: format a sparse image with mkchunkfs (skips
# the test if mkchunkfs is not built yet).
cfs_mkfs() {
	local img=$1 size=$2
	shift 2
	[ -x "$CFS_BIN/mkchunkfs" ] || cfs_skip "needs $CFS_BIN/mkchunkfs"
	"$CFS_BIN/mkchunkfs" -q -s "$size" --sparse "$@" "$img" >/dev/null ||
		cfs_fail "mkchunkfs -s $size $img failed"
}

declare -A _cfs_mount_pid=()

# cfs_mount SOURCE DIR [OPTS]: start chunkfs (with CFS_EXTRA_MOUNT_OPTS too, set
# by cfs_rerun_on_uring) in the foreground (-f) in the
# background, its log in $CFS_WORK/chunkfs-<dir>.log, wait until the new
# daemon's mount is on DIR (one more chunkfs mount there than before: a
# mount left on DIR does not count), and register cleanup (unmount, wait,
# kill) for exit. Sets CFS_MOUNT_PID. Fails the test if the daemon dies or
# does not mount in 20 s. Never call it inside $(...). CFS_MOUNT_WRAP, when
# set, is a command the daemon runs under (the RBD tests: "unshare --pid
# --fork --kill-child", a daemon that looks like another host's); then
# CFS_MOUNT_PID is the wrapper's, whose death takes the daemon with it.
cfs_mount() {
	local src=$1 dir=$2 opts=${3:-} log i before
	# First: a fault=SPEC option takes the rest of the list.
	opts=${CFS_EXTRA_MOUNT_OPTS:+$CFS_EXTRA_MOUNT_OPTS${opts:+,}}$opts
	[ -x "$CFS_BIN/chunkfs" ] || cfs_skip "needs $CFS_BIN/chunkfs"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	log=$CFS_WORK/chunkfs-$(basename "$dir").log
	before=$(_cfs_mount_count "$dir")
	echo "=== chunkfs $src $dir ${opts:+-o $opts}" >>"$log"
	# shellcheck disable=SC2086 # CFS_MOUNT_WRAP: words of a command prefix
	${CFS_MOUNT_WRAP:-} "$CFS_BIN/chunkfs" -f "$src" "$dir" ${opts:+-o "$opts"} >>"$log" 2>&1 &
	CFS_MOUNT_PID=$!
	_cfs_mount_pid[$dir]=$CFS_MOUNT_PID
	cfs_defer "cfs_umount '$dir'"
	for ((i = 0; i < 200; i++)); do
		if [ "$(_cfs_mount_count "$dir")" -gt "$before" ]; then
			return 0
		fi
		if ! kill -0 "$CFS_MOUNT_PID" 2>/dev/null; then
			cat "$log" >&2
			cfs_fail "chunkfs $src $dir exited before mounting"
		fi
		sleep 0.1
	done
	cat "$log" >&2
	cfs_fail "chunkfs $src $dir did not mount within 20 s"
}

# cfs_is_mounted DIR: DIR is a chunkfs mount point now.
cfs_is_mounted() {
	[ "$(_cfs_mount_count "$1")" -gt 0 ]
}

# _cfs_mount_count DIR: how many chunkfs mounts are stacked on DIR.
_cfs_mount_count() {
	awk -v d="$1" '$2 == d && ($3 == "fuse.chunkfs" || $3 == "fuseblk.chunkfs") { n++ } END { print n + 0 }' \
		/proc/self/mounts
}

# cfs_umount DIR [SECONDS]: unmount DIR if mounted, then wait up to SECONDS
# (default 30) for its daemon to finish its checkpoint and exit; kill -9 it
# after that. Returns 1 if the daemon had to be killed or exited non-zero.
cfs_umount() {
	local dir=$1 wait=${2:-30} pid rc=0 i
	if cfs_is_mounted "$dir"; then
		fusermount3 -u "$dir" 2>/dev/null || umount "$dir" 2>/dev/null ||
			umount -l "$dir" 2>/dev/null || true
	fi
	pid=${_cfs_mount_pid[$dir]:-}
	[ -n "$pid" ] || return 0
	for ((i = 0; i < wait * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -9 "$pid" 2>/dev/null
		rc=1
	fi
	wait "$pid" 2>/dev/null || rc=1
	unset "_cfs_mount_pid[$dir]"
	return $rc
}

# cfs_kill9 DIR: kill -9 DIR's daemon (a crash), then clear the dead mount.
# Only when nothing uses DIR any more: see cfs_crash.
cfs_kill9() {
	cfs_crash "$1"
	cfs_clear_mount "$1"
}

# cfs_crash DIR: kill -9 DIR's daemon (a crash) and reap it, and leave its
# dead mount on DIR: every process still using DIR gets ENOTCONN or
# ECONNABORTED from it, also for paths it resolves from now on. Wait for
# such processes (a load under test) to end, then cfs_clear_mount DIR.
# Clearing the mount first would let them go on in the directory under the
# mount point, on the host filesystem, where writes and fsyncs succeed and
# the next mount hides them (how daemon_crash once "lost" fsynced data).
cfs_crash() {
	local dir=$1 pid=${_cfs_mount_pid[$1]:-}
	[ -n "$pid" ] || cfs_fail "cfs_crash: no daemon for $dir"
	kill -9 "$pid" 2>/dev/null || true	# not reaped yet: still our child's pid
	wait "$pid" 2>/dev/null || true
	unset "_cfs_mount_pid[$dir]"
}

# cfs_clear_mount DIR: remove the dead mount a crashed daemon left on DIR
# ("Transport endpoint is not connected"); lazily if something holds it.
cfs_clear_mount() {
	fusermount3 -u "$1" 2>/dev/null || umount -l "$1" 2>/dev/null || true
}

# cfs_daemon_log DIR: print the log of DIR's daemon(s).
cfs_daemon_log() {
	cat "$CFS_WORK/chunkfs-$(basename "$1").log" 2>/dev/null || true
}
