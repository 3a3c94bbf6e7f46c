#!/usr/bin/env bash
# ram_memory.sh — the RAM temp mount's memory options:
#   - mlock: the store is locked as it is written (smaps Locked grows with
#     the data, VmLck covers the whole size at once since it is locked on
#     fault), and deleted data still goes back to the system;
#   - without mlock nothing is locked;
#   - hugepages: written data sits in transparent huge pages (AnonHugePages
#     grows with it) and still goes back on delete; skipped where THP is
#     off. Without the option (THP in "madvise" mode) the store stays in
#     4 KiB pages.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/ram.sh"
cfs_require_fuse

ram=$CFS_WORK/ram
MiB=1024 # kB

# ---- mlock -------------------------------------------------------------------------
cfs_mount none "$ram" ram,size=512M,mlock,commit_interval=3600
pid=$CFS_MOUNT_PID
vmlck=$(ram_status_kb "$pid" VmLck)
locked0=$(ram_smaps_kb "$pid" Locked)
cfs_log "mlock: VmLck $vmlck kB, Locked $locked0 kB before writing"
[ "$vmlck" -ge $((512 * MiB)) ] || cfs_fail "mlock: VmLck $vmlck kB, expected the 512 MiB store"
[ "$locked0" -lt $((16 * MiB)) ] || cfs_fail "mlock: $locked0 kB locked before anything was written"
ram_write_direct "$ram/a" 128
locked=$(ram_smaps_kb "$pid" Locked)
cfs_log "mlock: Locked $locked kB after writing 128 MiB"
[ $((locked - locked0)) -ge $((120 * MiB)) ] || cfs_fail "mlock: only $locked kB locked"
full=$(ram_status_kb "$pid" RssAnon)
rm "$ram/a"
after=$(ram_wait_below "$pid" RssAnon $((full - 120 * MiB)) 3) ||
	cfs_fail "mlock: RssAnon still $after kB 3 s after unlink (had $full)"
locked=$(ram_smaps_kb "$pid" Locked)
cfs_log "mlock: after unlink RssAnon $after kB, Locked $locked kB"
[ "$locked" -lt $((locked0 + 8 * MiB)) ] || cfs_fail "mlock: $locked kB still locked after unlink"
# the store stays locked for what is written next
ram_write_direct "$ram/b" 64
locked=$(ram_smaps_kb "$pid" Locked)
[ $((locked - locked0)) -ge $((60 * MiB)) ] || cfs_fail "mlock: rewritten data not locked ($locked kB)"
cfs_umount "$ram" || cfs_fail "unmount (mlock)"

cfs_mount none "$ram" ram,size=512M
pid=$CFS_MOUNT_PID
ram_write_direct "$ram/a" 64
[ "$(ram_status_kb "$pid" VmLck)" -eq 0 ] || cfs_fail "VmLck without mlock"
[ "$(ram_smaps_kb "$pid" Locked)" -eq 0 ] || cfs_fail "Locked without mlock"
cfs_umount "$ram" || cfs_fail "unmount (no mlock)"

# ---- hugepages ----------------------------------------------------------------------
thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo "[never]")
cfs_log "transparent huge pages: $thp"
case $thp in
*"[never]"*)
	cfs_log "THP disabled: hugepages not tested"
	cfs_log "ok"
	exit 0
	;;
esac

cfs_mount none "$ram" ram,size=512M,hugepages,commit_interval=3600
pid=$CFS_MOUNT_PID
huge0=$(ram_smaps_kb "$pid" AnonHugePages)
ram_write_direct "$ram/a" 128
huge=$(ram_smaps_kb "$pid" AnonHugePages)
cfs_log "hugepages: AnonHugePages $huge0 -> $huge kB after writing 128 MiB"
# Huge pages need free 2 MiB blocks: a fragmented machine may fall back
# for some, not for most.
[ $((huge - huge0)) -ge $((96 * MiB)) ] ||
	cfs_fail "hugepages: only $((huge - huge0)) kB of 128 MiB in huge pages"
full=$(ram_status_kb "$pid" RssAnon)
rm "$ram/a"
after=$(ram_wait_below "$pid" RssAnon $((full - 120 * MiB)) 3) ||
	cfs_fail "hugepages: RssAnon still $after kB 3 s after unlink (had $full)"
cfs_log "hugepages: after unlink RssAnon $after kB (-$((full - after)))"
cfs_umount "$ram" || cfs_fail "unmount (hugepages)"

case $thp in
*"[madvise]"*)
	cfs_mount none "$ram" ram,size=512M
	pid=$CFS_MOUNT_PID
	huge0=$(ram_smaps_kb "$pid" AnonHugePages)
	ram_write_direct "$ram/a" 128
	huge=$(ram_smaps_kb "$pid" AnonHugePages)
	cfs_log "no hugepages: AnonHugePages $huge0 -> $huge kB"
	[ $((huge - huge0)) -lt $((16 * MiB)) ] ||
		cfs_fail "huge pages used for the store without the option"
	cfs_umount "$ram" || cfs_fail "unmount"
	;;
esac
cfs_log "ok"
