#!/usr/bin/env bash
# kernel_state_lock.sh — tests that flip a global kernel switch
# (enable_uring) hold one lock while they depend on it and restore it:
# a second run's test waits for the first to finish, sees only the value it
# set itself, and finds the switch as the first found it; a holder killed
# with -9 lets go within seconds.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_root
[ -e "$CFS_URING_PARAM" ] || cfs_skip "kernel without FUSE over io_uring ($CFS_URING_PARAM)"
[ -w "$CFS_URING_PARAM" ] || cfs_skip "cannot write $CFS_URING_PARAM"

# A test of another run: takes the switch, sets VALUE, holds it for SECONDS
# while checking nobody changes it, and writes what it saw to OUT.
holder() { # value seconds out
	CFS_TEST_TMPDIR=$CFS_WORK bash -c '
		. "$CFS_ROOT/tests/lib/common.sh"
		cfs_uring_switch
		echo "locked $(date +%s.%N) $$ $(cat "$CFS_URING_PARAM")" >>"$3"
		echo "$1" >"$CFS_URING_PARAM"
		end=$(( $(date +%s) + $2 ))
		while [ "$(date +%s)" -lt $end ]; do
			v=$(cat "$CFS_URING_PARAM")
			[ "$v" = "$1" ] || { echo "changed to $v" >>"$3"; exit 1; }
			sleep 0.1
		done
		echo "done $(date +%s.%N)" >>"$3"
	' holder "$@"
}

cfs_log "two holders, Y then N, 2 s each"
holder Y 2 "$CFS_WORK/a" &
a=$!
# Another test run on this machine may hold the lock for minutes: wait as
# the holder does.
until grep -q locked "$CFS_WORK/a" 2>/dev/null; do
	kill -0 $a 2>/dev/null || cfs_fail "first holder exited without the lock: $(cat "$CFS_WORK/a" 2>/dev/null)"
	sleep 0.1
done
holder N 2 "$CFS_WORK/b" &
b=$!
wait $a || cfs_fail "first holder saw the switch change: $(cat "$CFS_WORK/a")"
wait $b || cfs_fail "second holder saw the switch change: $(cat "$CFS_WORK/b")"
a_done=$(awk '/^done/ { print $2 }' "$CFS_WORK/a")
b_locked=$(awk '/^locked/ { print $2 }' "$CFS_WORK/b")
awk -v d="$a_done" -v l="$b_locked" 'BEGIN { exit !(l >= d) }' ||
	cfs_fail "second holder took the lock at $b_locked, before the first let go at $a_done"
# Each holder puts back what it found: the second finds what the first
# found (another run's test may come in between; it restores too).
a_found=$(awk '/^locked/ { print $4 }' "$CFS_WORK/a")
b_found=$(awk '/^locked/ { print $4 }' "$CFS_WORK/b")
[ "$b_found" = "$a_found" ] || cfs_fail "first holder found $a_found, the second after it $b_found: not restored"

cfs_log "a holder killed with -9 lets go (on a lock of this test's own)"
# Only the lock, not the switch: a private lock file, so another run's
# tests neither wait for this part nor delay it.
export CFS_KSTATE_LOCK=$CFS_WORK/kstate.lock
bash -c '
	. "$CFS_ROOT/tests/lib/kernel_state.sh"
	cfs_kstate_lock || exit 1
	echo "locked $$" >"$1"
	sleep 60
' locker "$CFS_WORK/c" 2>/dev/null &
c=$!
until grep -q locked "$CFS_WORK/c" 2>/dev/null; do
	kill -0 $c 2>/dev/null || cfs_fail "locker exited without the lock"
	sleep 0.1
done
if ( . "$CFS_ROOT/tests/lib/kernel_state.sh"; CFS_KSTATE_WAIT=1 cfs_kstate_lock ) 2>/dev/null; then
	cfs_fail "took the lock while the locker held it"
fi
{
	kill -9 $c
	wait $c
} 2>/dev/null || true
start=$(date +%s)
( . "$CFS_ROOT/tests/lib/kernel_state.sh"; CFS_KSTATE_WAIT=10 cfs_kstate_lock && cfs_kstate_unlock ) ||
	cfs_fail "lock not free after its holder was killed"
waited=$(($(date +%s) - start))
[ $waited -le 5 ] || cfs_fail "took $waited s to get the lock of a killed holder"
cfs_log "ok (lock of a killed holder free after ${waited} s)"
