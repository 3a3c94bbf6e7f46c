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

# ram_misaligned_check FILE N: the chunk's statistics count N O_DIRECT
# requests refused for their alignment. Until the statistics xattrs exist
# (issue 5) this only says it could not check.
ram_misaligned_check() {
	cfs_log "misaligned count of $(basename "$1"): statistics not readable yet (want $2)"
}
