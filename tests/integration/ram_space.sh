#!/usr/bin/env bash
# ram_space.sh — space and memory of the RAM temp mount:
#   - df shows the size given (rounded up to 64 KiB units) and what is used;
#   - ENOSPC at the size limit, and the space is usable again after a delete;
#   - memory goes back to the system on unlink, on truncate and on punch
#     hole, measured as the daemon's RssAnon (/proc/PID/status), and not
#     while an unlinked file is still open.
# The mount runs with commit_interval=3600 so that the committer's timer
# cannot return the memory for us by chance: only the wakeup that ops.c
# gives it after a freeing operation can, within the 3 s we wait.
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/ram.sh"
cfs_require_fuse
cfs_require_cmd python3 fallocate

ram=$CFS_WORK/ram
MiB=1024 # kB

# ---- df ------------------------------------------------------------------------
cfs_mount none "$ram" ram,size=100M
read -r size used avail <<<"$(df -B1 --output=size,used,avail "$ram" | tail -n 1)"
cfs_log "df: size $size used $used avail $avail"
[ "$size" -eq $((100 << 20)) ] || cfs_fail "df size $size, expected $((100 << 20))"
[ "$used" -eq 0 ] || cfs_fail "df used $used on an empty mount"
[ "$avail" -eq "$size" ] || cfs_fail "df avail $avail != size $size on an empty mount"
ram_write_direct "$ram/ten" 10
read -r used avail <<<"$(df -B1 --output=used,avail "$ram" | tail -n 1)"
cfs_log "df after 10 MiB: used $used avail $avail"
[ "$used" -eq $((10 << 20)) ] || cfs_fail "df used $used after writing 10 MiB"
[ "$avail" -eq $((90 << 20)) ] || cfs_fail "df avail $avail after writing 10 MiB"
cfs_umount "$ram" || cfs_fail "unmount"

# A size that is not a multiple of the 64 KiB unit is rounded up.
cfs_mount none "$ram" ram,size=1000001
size=$(df -B1 --output=size "$ram" | tail -n 1)
[ "$size" -eq 1048576 ] || cfs_fail "size=1000001: df size $size, expected 1048576"
cfs_umount "$ram" || cfs_fail "unmount"

# ---- ENOSPC at the limit, recovery --------------------------------------------------
cfs_mount none "$ram" ram,size=32M
cfs_log "ENOSPC at 32 MiB"
dd if=/dev/zero of="$ram/fill" bs=1M count=40 oflag=direct status=none 2>"$CFS_WORK/dd.err" &&
	cfs_fail "the RAM mount took more than its size"
grep -q "No space left" "$CFS_WORK/dd.err" || cfs_fail "not ENOSPC: $(cat "$CFS_WORK/dd.err")"
got=$(stat -c %s "$ram/fill")
[ "$got" -eq $((32 << 20)) ] || cfs_fail "the full file holds $got bytes, expected all 32 MiB"
read -r used avail <<<"$(df -B1 --output=used,avail "$ram" | tail -n 1)"
[ "$avail" -eq 0 ] || cfs_fail "df avail $avail on a full mount"
# A second file and a buffered writer get ENOSPC too; metadata still works.
dd if=/dev/zero of="$ram/more" bs=64k count=1 oflag=direct status=none 2>/dev/null &&
	cfs_fail "a second file got space on a full mount"
mkdir "$ram/dir" || cfs_fail "mkdir on a full mount"
rm "$ram/fill"
read -r used avail <<<"$(df -B1 --output=used,avail "$ram" | tail -n 1)"
[ "$used" -eq 0 ] || cfs_fail "df used $used after the delete"
cfs_log "after the delete the whole size is usable again"
ram_write_direct "$ram/again" 32 || cfs_fail "write of 32 MiB after the delete"
[ "$(stat -c %s "$ram/again")" -eq $((32 << 20)) ] || cfs_fail "second fill short"
cfs_umount "$ram" || cfs_fail "unmount"

# ---- memory returned ------------------------------------------------------------------
cfs_mount none "$ram" ram,size=1G,commit_interval=3600
pid=$CFS_MOUNT_PID
sync
base=$(ram_status_kb "$pid" RssAnon)
cfs_log "daemon RssAnon at start: $base kB"

# grew: the store takes memory as it is written, not at mount
ram_write_direct "$ram/a" 256
full=$(ram_status_kb "$pid" RssAnon)
cfs_log "after writing 256 MiB: $full kB (+$((full - base)))"
[ $((full - base)) -ge $((230 * MiB)) ] ||
	cfs_fail "RssAnon grew by $((full - base)) kB for 256 MiB written"

# unlink while open: the data stays until the last close
exec {fd}<"$ram/a"
rm "$ram/a"
sleep 0.5
open_kb=$(ram_status_kb "$pid" RssAnon)
[ $((full - open_kb)) -lt $((64 * MiB)) ] ||
	cfs_fail "memory of an unlinked file still open went back early ($open_kb kB)"
exec {fd}<&-
after=$(ram_wait_below "$pid" RssAnon $((full - 230 * MiB)) 3) ||
	cfs_fail "RssAnon still $after kB 3 s after the unlinked file was closed (had $full)"
cfs_log "after unlink and close: $after kB (-$((full - after)))"

# unlink of a closed file
ram_write_direct "$ram/b" 256
full=$(ram_status_kb "$pid" RssAnon)
rm "$ram/b"
after=$(ram_wait_below "$pid" RssAnon $((full - 230 * MiB)) 3) ||
	cfs_fail "RssAnon still $after kB 3 s after unlink (had $full)"
cfs_log "after unlink: $after kB (-$((full - after)))"

# truncate 256 MiB -> 64 MiB: 192 MiB back, the first 64 MiB intact
ram_write_direct "$ram/c" 256
head -c $((64 << 20)) "$ram/c" | md5sum >"$CFS_WORK/c.md5"
full=$(ram_status_kb "$pid" RssAnon)
truncate -s 64M "$ram/c"
after=$(ram_wait_below "$pid" RssAnon $((full - 172 * MiB)) 3) ||
	cfs_fail "RssAnon still $after kB 3 s after truncating 192 MiB away (had $full)"
[ $((full - after)) -le $((200 * MiB)) ] ||
	cfs_fail "truncate gave back $((full - after)) kB, more than the 192 MiB cut"
cfs_log "after truncate to 64 MiB: $after kB (-$((full - after)))"
md5sum <"$ram/c" | cmp -s - "$CFS_WORK/c.md5" || cfs_fail "truncate damaged the data kept"
rm "$ram/c"
ram_wait_below "$pid" RssAnon $((after - 58 * MiB)) 3 >/dev/null ||
	cfs_fail "the rest of the truncated file was not given back"

# punch 128 MiB out of the middle of 256 MiB: 128 MiB back, the rest intact
ram_write_direct "$ram/d" 256
full=$(ram_status_kb "$pid" RssAnon)
{ head -c $((64 << 20)) "$ram/d"; head -c $((128 << 20)) /dev/zero
  tail -c $((64 << 20)) "$ram/d"; } | md5sum >"$CFS_WORK/d.md5"
fallocate -p -o 64M -l 128M "$ram/d"
after=$(ram_wait_below "$pid" RssAnon $((full - 115 * MiB)) 3) ||
	cfs_fail "RssAnon still $after kB 3 s after punching 128 MiB (had $full)"
[ $((full - after)) -le $((136 * MiB)) ] ||
	cfs_fail "punch gave back $((full - after)) kB, more than the 128 MiB punched"
cfs_log "after punching 128 MiB: $after kB (-$((full - after)))"
md5sum <"$ram/d" | cmp -s - "$CFS_WORK/d.md5" || cfs_fail "punch: content differs"
[ "$(stat -c %s "$ram/d")" -eq $((256 << 20)) ] || cfs_fail "punch changed the size"
blocks=$(stat -c %b "$ram/d")
[ "$blocks" -eq $((128 << 11)) ] || cfs_fail "punched file has $blocks blocks, expected $((128 << 11))"
rm "$ram/d"
# Under ASan the last 128 MiB can stay resident after the rm (also with 15 s
# of waiting; the release build returns them), so the ASan run only logs it.
if ! final=$(ram_wait_below "$pid" RssAnon $((base + 32 * MiB)) 3); then
	[ "${BUILD:-release}" = asan ] || cfs_fail "RssAnon $final kB at the end, started at $base"
	cfs_log "ASan build: RssAnon $final kB at the end, started at $base (not returned)"
fi
cfs_log "at the end: $final kB (started at $base)"
cfs_umount "$ram" || cfs_fail "unmount"
cfs_log "ok"
