# tests/lib/stats.sh — sourced by tests/integration/stats_*.sh after common.sh:
# reading the user.chunkfs.* statistics and comparing them.
#
#   cfs_stat PATH NAME          value of user.chunkfs.NAME (follows symlinks)
#   cfs_expect PATH NAME WANT   fail unless the value is WANT
#   cfs_expect_range PATH NAME MIN MAX
#   cfs_reset PATH              setfattr user.chunkfs.reset=1
#   stats_util ARGS...          tests/integration/stats_util.py
#   stats_all OUT MOUNT...      `chunkfs stat` of every mount into OUT (and
#                               OUT.err): fail unless each MOUNT is listed
#                               and no error names it
#   stats_prom OUT TARGET...    chunkfs stat --prom TARGET... checked by
#                               stats_util.py prom: the text in OUT.txt, its
#                               JSON in OUT (the tests' Python imports
#                               stats_util for prom_one)

stats_util() { python3 "$CFS_ROOT/tests/integration/stats_util.py" "$@"; }

# Other tests' mounts share /proc/self/mounts: one may be dead (cfs_crash)
# or unmounting, which makes the exit status 2 with a line on stderr naming
# it. Only the given mounts must be read.
stats_all() {
	local out=$1 rc=0 m
	shift
	"$CFS_BIN/chunkfs" stat >"$out" 2>"$out.err" || rc=$?
	cat "$out.err" >&2
	[ $rc -eq 0 ] || { [ $rc -eq 2 ] && [ -s "$out.err" ]; } ||
		cfs_fail "chunkfs stat (all mounts): exit $rc"
	for m; do
		! grep -qF "$m" "$out.err" || cfs_fail "chunkfs stat (all mounts) could not read $m"
		grep -qF "$m" "$out" || cfs_fail "chunkfs stat (all mounts) does not list $m"
	done
}

cfs_stat() {
	getfattr --only-values -n "user.chunkfs.$2" "$1" 2>/dev/null ||
		cfs_fail "getfattr -n user.chunkfs.$2 $1 failed"
}

cfs_expect() {
	local got
	got=$(cfs_stat "$1" "$2")
	[ "$got" = "$3" ] || cfs_fail "$1: user.chunkfs.$2 = '$got', expected '$3'"
}

cfs_expect_range() {
	local got
	got=$(cfs_stat "$1" "$2")
	[[ $got =~ ^[0-9]+$ ]] || cfs_fail "$1: user.chunkfs.$2 = '$got', not a number"
	[ "$got" -ge "$3" ] && [ "$got" -le "$4" ] ||
		cfs_fail "$1: user.chunkfs.$2 = $got, expected $3..$4"
	cfs_log "$2 = $got (expected $3..$4)"
}

cfs_reset() {
	setfattr -n user.chunkfs.reset -v 1 "$1" || cfs_fail "reset $1"
}

stats_prom() {
	local out=$1
	shift
	"$CFS_BIN/chunkfs" stat --prom "$@" >"$out.txt" || cfs_fail "chunkfs stat --prom $*"
	stats_util prom "$out.txt" >"$out" || cfs_fail "Prometheus text: $(head -n 40 "$out.txt")"
}
