#!/usr/bin/env bash
# daemon_dev_wakeup.sh — how requests on /dev/fuse reach the event loops
# (fs/fuse/main.c, dev_wakeup=): by default every idle loop is woken and
# each loop runs pinned to its share of the CPUs (loop i on the CPUs c with
# c mod loops == i), so the loop on the caller's CPU takes the request;
# dev_wakeup=one wakes one loop and pins none; one loop is never pinned.
# Checked from /proc (the loops' CPU lists) and, under each mode, with
# concurrent writers whose data is verified, then read back after a remount.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd fio

[ "$(nproc)" -ge 2 ] || cfs_skip "needs 2 CPUs to tell pinned loops apart"
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
cfs_mkfs "$img" 256M

# The daemon's own threads (not io_uring's workers) that may not run on
# every CPU this test may use, as "tid:cpus" lines.
pinned_threads() {
	local pid=$1 t list
	for t in /proc/"$pid"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = chunkfs ] || continue
		list=$(awk '/^Cpus_allowed_list:/ { print $2 }' "$t/status" 2>/dev/null) || continue
		[ "$list" = "$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status)" ] ||
			echo "${t##*/}:$list"
	done
}

# CPU lists as /proc prints them ("0-2,5"), one per line, expanded and
# sorted: "0,1,2,5|..."
cpu_lists() {
	python3 -c '
import sys
def expand(s):
    out = []
    for part in s.split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return ",".join(map(str, out))
print("|".join(sorted((expand(l.strip()) for l in sys.stdin if l.strip()), key=lambda x: int(x.split(",")[0]))))'
}

# Writers on four files at once, each block verified after writing it.
load() {
	fio --name=w --directory="$mnt" --nrfiles=1 --numjobs=4 --size=16M --bs=4k \
		--rw=randwrite --ioengine=psync --direct="$1" --verify=crc32c --verify_fatal=1 \
		--do_verify=1 --verify_state_save=0 --group_reporting \
		--output="$CFS_WORK/fio-$2.out" ||
		{ cat "$CFS_WORK/fio-$2.out"; cfs_fail "fio $2 failed"; }
}

for mode in default one all; do
	opts=threads=2
	[ "$mode" = default ] || opts+=,dev_wakeup=$mode
	cfs_mount "$img" "$mnt" "$opts"
	pid=$CFS_MOUNT_PID
	got=
	if [ "$mode" = one ]; then
		pins=$(pinned_threads "$pid")
		[ -z "$pins" ] || cfs_fail "dev_wakeup=one pinned threads: $pins"
	else
		# two loops: one on the even CPUs, one on the odd ones of
		# those this test may use (each pins itself when it starts,
		# which may be after the mount)
		want=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status | cpu_lists |
			python3 -c 'import sys
cpus = [int(c) for c in sys.stdin.read().strip().split(",")]
sets = [",".join(str(c) for c in cpus if c % 2 == i) for i in (0, 1)]
print("|".join(sets) if all(sets) else "")')
		[ -n "$want" ] || cfs_skip "the CPUs this test may use are not both even and odd"
		for ((i = 0; i < 50; i++)); do
			got=$(pinned_threads "$pid" | cut -d: -f2 | cpu_lists)
			[ "$got" != "$want" ] || break
			sleep 0.1
		done
		[ "$got" = "$want" ] || cfs_fail "$mode: loops pinned to '$got', want '$want'"
	fi
	cfs_log "$mode: the loops' CPUs: ${got:-not pinned}"
	load 0 "$mode-buffered"
	load 1 "$mode-direct"
	cfs_umount "$mnt" || cfs_fail "unmount after $mode"
done

cfs_log "one loop: never pinned"
cfs_mount "$img" "$mnt" threads=1
pins=$(pinned_threads "$CFS_MOUNT_PID")
[ -z "$pins" ] || cfs_fail "threads=1 pinned threads: $pins"
cfs_log "the files of the last run read back after the remount"
fio --name=w --directory="$mnt" --nrfiles=1 --numjobs=4 --size=16M --bs=4k --rw=randwrite \
	--ioengine=psync --direct=1 --verify=crc32c --verify_only --verify_state_save=0 \
	--output="$CFS_WORK/fio-reread.out" ||
	{ cat "$CFS_WORK/fio-reread.out"; cfs_fail "read back after remount"; }
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"
