# tests/lib/ram.sh — helpers of the RAM temp mount's tests (tests/integration/ram_*.sh),
# sourced after common.sh: the daemon's memory as the kernel accounts it.
#
#   kb=$(ram_status_kb PID RssAnon)        # a field of /proc/PID/status, in kB
#   kb=$(ram_smaps_kb PID AnonHugePages)   # a field of /proc/PID/smaps_rollup, in kB
#   ram_wait_below PID FIELD KB SECONDS    # poll until FIELD < KB; prints the last value,
#                                          # returns 1 if it never got there
#   ram_write_direct PATH MIB              # MIB MiB of non-zero bytes with O_DIRECT (dd)
#
# Why RssAnon and not VmRSS: the store is an anonymous mapping, and VmRSS
# also counts the program's file pages, which move when the page cache is
# trimmed. Why deltas with wide margins: the daemon's own buffers (the loops'
# registered arenas, libfuse's receive buffers) are resident from the start
# and stay; only the store changes when files are written and deleted.

ram_status_kb() {
	awk -v f="$2:" '$1 == f { print $2; found = 1 } END { exit !found }' "/proc/$1/status"
}

ram_smaps_kb() {
	awk -v f="$2:" '$1 == f { print $2; found = 1 } END { exit !found }' \
		"/proc/$1/smaps_rollup"
}

ram_wait_below() {
	local pid=$1 field=$2 limit=$3 seconds=$4 v i
	for ((i = 0; i <= seconds * 20; i++)); do
		v=$(ram_status_kb "$pid" "$field")
		if [ "$v" -lt "$limit" ]; then
			echo "$v"
			return 0
		fi
		sleep 0.05
	done
	echo "$v"
	return 1
}

# Random bytes would cost more CPU than the test; a repeated non-zero pattern
# is as good to the kernel (no zero-page tricks) and checksummable.
ram_write_direct() {
	local path=$1 mib=$2 i
	[ -f "$CFS_WORK/pattern-1m" ] ||
		{ yes 'chunkfs RAM test pattern 0123456789abcdef' || true; } |
			head -c 1048576 >"$CFS_WORK/pattern-1m"
	for ((i = 0; i < mib; i++)); do cat "$CFS_WORK/pattern-1m"; done |
		dd of="$path" bs=1M iflag=fullblock oflag=direct status=none
}

# ram_stat PATH KEY: one value of PATH's composite statistics line
# (user.chunkfs.stat, fs/stats/chunkstat.h), e.g. err_misaligned, writes.
ram_stat() {
	python3 - "$1" "$2" <<-'EOF'
	import os, sys
	line = os.getxattr(sys.argv[1], "user.chunkfs.stat").decode()
	kv = dict(f.split("=", 1) for f in line.split())
	if sys.argv[2] not in kv:
	    sys.exit("no %s in the statistics of %s" % (sys.argv[2], sys.argv[1]))
	print(kv[sys.argv[2]])
	EOF
}

# ram_stat_is PATH KEY N: the statistic is exactly N.
ram_stat_is() {
	local got
	got=$(ram_stat "$1" "$2") || cfs_fail "statistics of $1 unreadable"
	[ "$got" = "$3" ] || cfs_fail "$(basename "$1"): $2=$got, expected $3"
}

# ram_misaligned_check FILE N: the chunk's statistics count exactly N O_DIRECT
# requests refused for their alignment.
ram_misaligned_check() {
	ram_stat_is "$1" err_misaligned "$2"
	cfs_log "$(basename "$1"): err_misaligned=$2"
}
