# tests/lib/stats.sh — sourced by tests/integration/stats_*.sh after common.sh:
# reading the user.chunkfs.* statistics and comparing them.
#
#   cfs_stat PATH NAME          value of user.chunkfs.NAME (follows symlinks)
#   cfs_expect PATH NAME WANT   fail unless the value is WANT
#   cfs_expect_range PATH NAME MIN MAX
#   cfs_reset PATH              setfattr user.chunkfs.reset=1
#   stats_util ARGS...          tests/integration/stats_util.py

stats_util() { python3 "$CFS_ROOT/tests/integration/stats_util.py" "$@"; }

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
