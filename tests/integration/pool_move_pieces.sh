#!/usr/bin/env bash
# pool_move_pieces.sh — small files move between stores too (fs/POOLS.md,
# "Moving a chunk online"): a small file lives in a piece of a unit shared
# with other small files, and its move takes a piece of the same size on the
# target.
#   - `chunkfs move` of one small file: on the target afterwards, its bytes
#     and its holes as they were, the move's total its piece's bytes;
#   - `chunkfs store remove` of a store holding 300 files of random sizes
#     (most in pieces, a few in whole units: tests/integration/small_files.py)
#     while rounds of growth (appends, overwrites across a piece's end,
#     fallocate, truncate and rewrite, unlinks) run on them and a file
#     unlinked but still open is written: the store leaves the pool, every
#     file holds what was acknowledged, fsck clean, again after a remount;
#   - kill -9 in the middle of such a removal: fsck clean, the next mount
#     resumes it and it ends, every acknowledged byte there.
# Under BUILD=tsan the daemons run with ThreadSanitizer and any report fails.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/pool.sh"
cfs_require_fuse
cfs_require_cmd getfattr setfattr python3 md5sum
cfs_tsan_watch

py="python3 $CFS_ROOT/tests/integration/small_files.py"
s0=$CFS_WORK/ssd0.img s1=$CFS_WORK/hdd0.img s2=$CFS_WORK/new0.img
mnt=$CFS_WORK/mnt
log=$CFS_WORK/chunkfs-mnt.log

cfs_mkfs "$s0" 384M -L ssd0
"$mk" -q -s 256M --sparse -L hdd0 --join "$s0" "$s1" || cfs_fail "join of hdd0 failed"
truncate -s 256M "$s2"
cfs_mount "$s0,$s1" "$mnt"

# used_on STORE: its used bytes (user.chunkfs.stores).
used_on() { field_of "$1" used; }

# --- one small file moved -------------------------------------------------------------------
mkdir "$mnt/one"
setfattr -n user.chunkfs.store -v hdd0 "$mnt/one"
head -c 20000 /dev/urandom >"$mnt/one/f"
# A hole in the piece: 4 KiB written at 40 KiB, the size 60 KiB.
dd if=/dev/urandom of="$mnt/one/f" bs=4k seek=10 count=1 conv=notrunc 2>/dev/null
truncate -s 60K "$mnt/one/f"
sync "$mnt/one/f"
sum=$(md5sum <"$mnt/one/f")
[ "$(where "$mnt/one/f")" = hdd0 ] || cfs_fail "the small file is on $(where "$mnt/one/f")"
blocks=$(stat -c %b "$mnt/one/f")
out=$("$cm" move "$mnt/one/f" ssd0) || cfs_fail "chunkfs move of a small file: $out"
[ "$(where "$mnt/one/f")" = ssd0 ] || cfs_fail "after its move the small file is on $(where "$mnt/one/f")"
[ "$(md5sum <"$mnt/one/f")" = "$sum" ] || cfs_fail "the small file changed in its move"
[ "$(stat -c %b "$mnt/one/f")" = "$blocks" ] ||
	cfs_fail "its store bytes went from $blocks to $(stat -c %b "$mnt/one/f") blocks in the move"
[[ $(progress "$mnt/one/f") =~ ^state=done\ from=hdd0\ to=ssd0\ done=65536\ total=65536\  ]] ||
	cfs_fail "the move of a 64 KiB piece says: $(progress "$mnt/one/f")"
python3 $CFS_ROOT/tests/integration/pool_move_util.py extents "$mnt/one/f" >"$CFS_WORK/extents"
[ "$(cat "$CFS_WORK/extents")" = "0 20480
40960 45056" ] || cfs_fail "the moved piece's data segments: $(cat "$CFS_WORK/extents")"
cfs_log "one small file moved: on ssd0, same bytes, same holes, done=total=its piece"

# --- store remove under growth and an unlinked open file ------------------------------------
mkdir "$mnt/d"
setfattr -n user.chunkfs.store -v hdd0 "$mnt/d"
$py write "$mnt/d" "$CFS_WORK/man" 1 300 || cfs_fail "writing the files"
used=$(used_on hdd0)
[ "$used" -gt $((16 << 20)) ] || cfs_fail "hdd0 holds only $used bytes"
# An unlinked file held open: written before the removal and after it.
exec {held}<>"$mnt/d/held"
head -c 30000 /dev/urandom >&$held
rm "$mnt/d/held"
$py grow "$mnt/d" "$CFS_WORK/man" 11 || cfs_fail "growing before the removal"
"$cm" store remove --no-wait "$mnt" hdd0 >/dev/null || cfs_fail "store remove --no-wait"
for seed in 12 13 14; do
	$py grow "$mnt/d" "$CFS_WORK/man" $seed || cfs_fail "growing during the removal"
done
head -c 1000 /dev/urandom >&$held
for ((i = 0; i < 600; i++)); do
	has_store hdd0 || break
	[ "$(field_of hdd0 stopped)" = "" ] || cfs_fail "the removal stopped: $(stores)"
	sleep 0.1
done
has_store hdd0 && cfs_fail "the removal of hdd0 did not end in 60 s: $(stores)"
$py check "$mnt/d" "$CFS_WORK/man" || cfs_fail "the files after the removal"
[ "$(md5sum <"$mnt/one/f")" = "$sum" ] || cfs_fail "the moved small file changed in the removal"
[ "$(stat -L -c %s /proc/self/fd/$held)" = 31000 ] || cfs_fail "the unlinked file's size"
exec {held}>&-
grep -q "store hdd0 (index 1, $s1) removed" "$log" || cfs_fail "no log line for the removal"
cfs_umount "$mnt" || cfs_fail "unmount"
out=$("$fsck" -n "$s0" 2>&1) || cfs_fail "fsck after the removal: $out"
cfs_mount "$s0" "$mnt"
$py check "$mnt/d" "$CFS_WORK/man" || cfs_fail "the files after a remount"
cfs_log "store remove of 300 small files under growth: every file whole, fsck clean"

# --- kill -9 in the middle of a removal of small files --------------------------------------
"$cm" store add "$mnt" "$s2" -L new0 >/dev/null || cfs_fail "adding new0"
mkdir "$mnt/e"
setfattr -n user.chunkfs.store -v new0 "$mnt/e"
$py write "$mnt/e" "$CFS_WORK/man-e" 2 300 || cfs_fail "writing the files on new0"
$py grow "$mnt/e" "$CFS_WORK/man-e" 21 || cfs_fail "growing on new0"
sync -f "$mnt"
# At 16 MiB/s the removal takes about 7 s: the kill comes in the middle.
"$cm" store remove --no-wait --rate 16M "$mnt" new0 >/dev/null || cfs_fail "store remove --no-wait new0"
sleep "1.$((RANDOM % 10))"
has_store new0 || cfs_fail "the removal of new0 ended within a second: nothing left to crash in"
cfs_kill9 "$mnt"
out=$("$fsck" -n "$s0,$s2" 2>&1) || cfs_fail "fsck after kill -9 in a removal: $out"
cfs_mount "$s0,$s2" "$mnt"
for ((i = 0; i < 600; i++)); do
	has_store new0 || break
	sleep 0.1
done
has_store new0 && cfs_fail "the resumed removal did not end in 60 s: $(stores)"
grep -q "store new0 (index [0-9]*): resuming its removal" "$log" ||
	cfs_fail "the mount did not resume the removal"
$py check "$mnt/e" "$CFS_WORK/man-e" || cfs_fail "the files after the crashed removal"
$py check "$mnt/d" "$CFS_WORK/man" || cfs_fail "the other files after the crashed removal"
cfs_umount "$mnt" || cfs_fail "unmount"
out=$("$fsck" -n "$s0" 2>&1) || cfs_fail "fsck at the end: $out"
cfs_log "kill -9 in a removal of small files: resumed, ended, every file whole, fsck clean"
cfs_tsan_verdict
