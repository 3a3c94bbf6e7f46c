#!/usr/bin/env bash
# kernel_state_lock.sh — tests that flip a global kernel switch
# (enable_uring) hold one lock while they depend on it and restore it:
# a second run's test waits for the first to finish, sees the value it set
# itself, and the switch is back to what it was when both are done; a
# holder killed with -9 lets go within seconds.
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
		echo "locked $(date +%s.%N) $$" >>"$3"
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

orig=$(cat "$CFS_URING_PARAM")
cfs_log "switch is $orig; two holders, Y then N, 2 s each"
holder Y 2 "$CFS_WORK/a" &
a=$!
for _ in $(seq 1 50); do [ -s "$CFS_WORK/a" ] && break; sleep 0.1; done
grep -q locked "$CFS_WORK/a" || cfs_fail "first holder did not take the lock"
holder N 2 "$CFS_WORK/b" &
b=$!
wait $a || cfs_fail "first holder saw the switch change: $(cat "$CFS_WORK/a")"
wait $b || cfs_fail "second holder saw the switch change: $(cat "$CFS_WORK/b")"
a_done=$(awk '/^done/ { print $2 }' "$CFS_WORK/a")
b_locked=$(awk '/^locked/ { print $2 }' "$CFS_WORK/b")
awk -v d="$a_done" -v l="$b_locked" 'BEGIN { exit !(l >= d) }' ||
	cfs_fail "second holder took the lock at $b_locked, before the first let go at $a_done"
[ "$(cat "$CFS_URING_PARAM")" = "$orig" ] || cfs_fail "switch left at $(cat "$CFS_URING_PARAM"), was $orig"

cfs_log "a holder killed with -9 lets go"
holder Y 60 "$CFS_WORK/c" 2>/dev/null &
c=$!
for _ in $(seq 1 50); do [ -s "$CFS_WORK/c" ] && break; sleep 0.1; done
grep -q locked "$CFS_WORK/c" || cfs_fail "third holder did not take the lock"
{
	kill -9 "$(awk '/^locked/ { print $3 }' "$CFS_WORK/c")"
	wait $c
} 2>/dev/null || true
start=$(date +%s)
( . "$CFS_ROOT/tests/lib/kernel_state.sh"; cfs_kstate_lock && cfs_kstate_unlock ) ||
	cfs_fail "lock not free after its holder was killed"
waited=$(($(date +%s) - start))
[ $waited -le 5 ] || cfs_fail "took $waited s to get the lock of a killed holder"
# A killed test cannot restore the switch: put it back ourselves.
echo "$orig" >"$CFS_URING_PARAM"
cfs_log "ok (lock of a killed holder free after ${waited} s)"
