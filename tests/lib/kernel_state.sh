# tests/lib/kernel_state.sh — one lock for the kernel's global switches that
# tests and benchmarks change (today /sys/module/fuse/parameters/enable_uring).
# Sourced by tests/lib/common.sh and bench/lib.sh (bash).
#
# Two test runs (or a test run and a benchmark) may share a machine. Whoever
# sets a global switch holds this lock for as long as it depends on the
# value, and puts the value back before letting go; the other run waits.
#
#   cfs_kstate_lock            take the lock (waits up to CFS_KSTATE_WAIT
#                              seconds, default 1800: 30 min); returns
#                              at once if this shell already holds it
#   cfs_kstate_unlock          let it go (also: when the shell exits)
#
# The lock is held by a small background process, not by a descriptor of
# the shell: daemons the test starts inherit none of it, and if the shell is
# killed (even -9) the holder sees its parent gone and lets go within a
# second, so a crashed run never blocks the next one.

CFS_KSTATE_LOCK=${CFS_KSTATE_LOCK:-/run/lock/chunkfs-kernel-state.lock}
_cfs_kstate_holder=

cfs_kstate_lock() {
	[ -n "$_cfs_kstate_holder" ] && kill -0 "$_cfs_kstate_holder" 2>/dev/null && return 0
	local dir fifo fd parent=$$ got=
	mkdir -p "$(dirname "$CFS_KSTATE_LOCK")"
	dir=$(mktemp -d "${TMPDIR:-/tmp}/chunkfs-kstate.XXXXXX")
	fifo=$dir/ready
	mkfifo "$fifo"
	(
		exec 9>>"$CFS_KSTATE_LOCK"
		flock -w "${CFS_KSTATE_WAIT:-1800}" 9 || exit 1
		echo locked >"$fifo"
		while kill -0 "$parent" 2>/dev/null; do sleep 0.5; done
	) </dev/null >/dev/null 2>&1 &
	_cfs_kstate_holder=$!
	# Open read-write: never blocks, even if the holder gives up.
	exec {fd}<>"$fifo"
	until read -r -t 1 -u "$fd" got; do
		kill -0 "$_cfs_kstate_holder" 2>/dev/null && continue
		read -r -t 0.1 -u "$fd" got || true	# it may have written, then gone
		break
	done
	exec {fd}<&-
	rm -rf "$dir"
	if [ "$got" != locked ]; then
		_cfs_kstate_holder=
		echo "could not take $CFS_KSTATE_LOCK in ${CFS_KSTATE_WAIT:-1800} s (another test run holds it)" >&2
		return 1
	fi
}

cfs_kstate_unlock() {
	[ -n "$_cfs_kstate_holder" ] || return 0
	kill "$_cfs_kstate_holder" 2>/dev/null || true
	# its status is SIGTERM's: not the caller's (an EXIT trap under set -e
	# would make it the script's)
	wait "$_cfs_kstate_holder" 2>/dev/null || true
	_cfs_kstate_holder=
}
