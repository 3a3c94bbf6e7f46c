#!/usr/bin/env bash
# pool_first_add.sh — a mounted single store becomes a pool (fs/POOLS.md,
# "Adding and removing stores online"): `chunkfs store add` on a single
# store's mount makes it store 0 of a pool of two, online.
#   - a single store holding a chunk (its blocks carry offset and
#     generation: tests/integration/pool_move_util.py) and small files; a
#     writer changes random blocks of the chunk (O_DIRECT, each read back)
#     while the store is added and while the chunk then moves onto it; the
#     small files move too; every block holds its last generation, every
#     small file its bytes;
#   - the pool afterwards: the store alone no longer mounts (the missing
#     store named), fsck of both clean, the pool mounts with the chunk on
#     the new store, and the new store can be removed again (the chunk moves
#     back);
#   - kill -9 between the new store's superblocks and store 0's table: the
#     single store mounts alone as before, fsck clean, data intact, and the
#     add goes through when asked again.
# Under BUILD=tsan the daemons run with ThreadSanitizer and any report fails.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/pool.sh"
cfs_require_fuse
cfs_require_cmd getfattr setfattr python3
cfs_tsan_watch

util="python3 $CFS_ROOT/tests/integration/pool_move_util.py"
small_py="python3 $CFS_ROOT/tests/integration/small_files.py"
s0=$CFS_WORK/ssd0.img s1=$CFS_WORK/hdd0.img
mnt=$CFS_WORK/mnt
log=$CFS_WORK/chunkfs-mnt.log
bytes=$((16 << 20))

cfs_mkfs "$s0" 192M -L ssd0
truncate -s 192M "$s1"
cfs_mount "$s0" "$mnt"
mkdir "$mnt/db" "$mnt/small"
$util fill "$mnt/db/chunk" $bytes
$small_py write "$mnt/small" "$CFS_WORK/man" 1 40 >/dev/null || cfs_fail "writing the small files"

# --- the add and a move, under a writer --------------------------------------------------
$util writer "$mnt/db/chunk" $bytes 6 "$CFS_WORK/model.json" >"$CFS_WORK/writer.out" &
writer=$!
cfs_defer "kill $writer 2>/dev/null"
sleep 1
out=$("$cm" store add "$mnt" "$s1" -L hdd0) || cfs_fail "store add on a single store: $out"
[[ $out == "added $s1 to the pool on $mnt: store hdd0 (index 1)"* ]] || cfs_fail "store add said: $out"
[ "$(field_of hdd0 state)" = active ] || cfs_fail "hdd0 after the add: $(stores)"
[ "$(field_of ssd0 state)" = active ] || cfs_fail "ssd0 after the add: $(stores)"
[ "$(field_of ssd0 source)" = "$s0" ] || cfs_fail "store 0's source after the add: $(stores)"
[ "$(field_of hdd0 source)" = "$s1" ] || cfs_fail "hdd0's source after the add: $(stores)"
grep -q "$s0 is store 0 of a pool now: mount it as $s0,$s1 from now on" "$log" ||
	cfs_fail "no log line telling how to mount the pool"
out=$("$cm" move "$mnt/db/chunk" hdd0) || cfs_fail "moving the chunk to the new store: $out"
[ "$(where "$mnt/db/chunk")" = hdd0 ] || cfs_fail "the chunk is on $(where "$mnt/db/chunk")"
wait $writer || cfs_fail "the writer failed: $(cat "$CFS_WORK/writer.out")"
$util check "$mnt/db/chunk" $bytes "$CFS_WORK/model.json" || cfs_fail "the chunk after the add and the move"
for f in "$mnt"/small/*; do
	"$cm" move "$f" hdd0 >/dev/null || cfs_fail "moving $f to hdd0"
	[ "$(where "$f")" = hdd0 ] || cfs_fail "after its move $f is on $(where "$f")"
done
$small_py check "$mnt/small" "$CFS_WORK/man" >/dev/null || cfs_fail "the small files after their moves"
cfs_log "a single store became a pool of two under a writer; the chunk and the small files moved onto the new store"

# --- the pool it is now -------------------------------------------------------------------
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_expect_fail_with "of pool" 32 "$CFS_BIN/chunkfs" -f "$s0" "$mnt"
out=$("$fsck" -n "$s0,$s1" 2>&1) || cfs_fail "fsck of the new pool: $out"
cfs_mount "$s0,$s1" "$mnt"
[ "$(where "$mnt/db/chunk")" = hdd0 ] || cfs_fail "after the remount the chunk is on $(where "$mnt/db/chunk")"
$util check "$mnt/db/chunk" $bytes "$CFS_WORK/model.json" || cfs_fail "the chunk after the remount"
$small_py check "$mnt/small" "$CFS_WORK/man" >/dev/null || cfs_fail "the small files after the remount"
out=$("$cm" store remove "$mnt" hdd0) || cfs_fail "removing the added store: $out"
[ "$(where "$mnt/db/chunk")" = ssd0 ] || cfs_fail "after the removal the chunk is on $(where "$mnt/db/chunk")"
$util check "$mnt/db/chunk" $bytes "$CFS_WORK/model.json" || cfs_fail "the chunk after the removal"
$small_py check "$mnt/small" "$CFS_WORK/man" >/dev/null || cfs_fail "the small files after the removal"
cfs_umount "$mnt" || cfs_fail "unmount"
out=$("$fsck" -n "$s0" 2>&1) || cfs_fail "fsck after the removal: $out"
cfs_mount "$s0" "$mnt"
$util check "$mnt/db/chunk" $bytes "$CFS_WORK/model.json" || cfs_fail "the chunk on store 0 alone"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "the pool: store 0 alone refused while hdd0 was a member, fsck clean, hdd0 removed again"

# --- kill -9 inside the first add ------------------------------------------------------------
s2=$CFS_WORK/single.img s3=$CFS_WORK/second.img
cfs_mkfs "$s2" 96M -L one
truncate -s 96M "$s3"
cfs_mount "$s2" "$mnt"
$util fill "$mnt/chunk" $bytes
cfs_umount "$mnt" || cfs_fail "unmount"
add_killed "$s2" "$s3" two
out=$("$fsck" -n "$s2" 2>&1) || cfs_fail "fsck of the single store after the interrupted add: $out"
cfs_mount "$s2" "$mnt"
has_store two && cfs_fail "an interrupted add left two in the pool: $(stores)"
$util check "$mnt/chunk" $bytes - || cfs_fail "the chunk after the interrupted add"
"$cm" store add "$mnt" "$s3" -L two >/dev/null || cfs_fail "adding the interrupted store again"
[ "$(field_of two state)" = active ] || cfs_fail "two after the second add: $(stores)"
cfs_umount "$mnt" || cfs_fail "unmount"
out=$("$fsck" -n "$s2,$s3" 2>&1) || cfs_fail "fsck after the second add: $out"
cfs_log "kill -9 inside the first add: the single store as it was, fsck clean, added again"
cfs_tsan_verdict
