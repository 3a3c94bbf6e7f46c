#!/usr/bin/env bash
# small_files.sh — files below one allocation unit take pieces of units
# (fs/meta/piece.h): 300 files of random sizes (most below 64 KiB, some up to
# half a unit, a few past it, empty ones) written buffered, by small appends
# and with O_DIRECT, checked; then rounds that grow a quarter of them out of
# their pieces (appends, overwrites across the piece's end, fallocate, a write
# past the first unit, O_DIRECT, truncate and rewrite) and unlink a tenth,
# each followed by a check, a remount or a kill -9 of the daemon in the
# middle of the round (CFS_SMALL_CRASH_CYCLES), and fsck. The store's space
# for the files (st_blocks, and the allocator's units) stays below 1.5 times
# their bytes, where a unit per file took 300 MiB; a store made with
# --no-pieces still gives every file a whole unit.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3
[ -x "$CFS_BIN/fsck.chunkfs" ] || cfs_skip "needs $CFS_BIN/fsck.chunkfs"

py="python3 $CFS_ROOT/tests/integration/small_files.py"
fsck=$CFS_BIN/fsck.chunkfs
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
man=$CFS_WORK/manifest
cycles=${CFS_SMALL_CRASH_CYCLES:-6}

cfs_mkfs "$img" 2G
cfs_mount "$img" "$mnt"
mkdir "$mnt/d"
$py write "$mnt/d" "$man" 1 300 || cfs_fail "writing the files"
$py check "$mnt/d" "$man" || cfs_fail "check after writing"

# Space: pieces are powers of two, so at most twice the bytes of each file,
# plus the few files past half a unit in whole units.
bytes=$(du -sb --apparent-size "$mnt/d" | cut -f1)
blocks=$($py blocks "$mnt/d")
cfs_log "300 files: $bytes bytes, $blocks bytes of store"
[ "$blocks" -le $((bytes * 3 / 2 + 16 * 1048576)) ] ||
	cfs_fail "files of $bytes bytes take $blocks bytes of store"
used=$(df -B1 --output=used "$mnt" | tail -1)
[ "$used" -le $((bytes * 2 + 64 * 1048576)) ] ||
	cfs_fail "statfs says $used bytes used for $bytes bytes of files"

cfs_umount "$mnt" || cfs_fail "unclean unmount"
out=$("$fsck" -n "$img" 2>&1) || cfs_fail "fsck after writing: $out"
cfs_mount "$img" "$mnt"
$py check "$mnt/d" "$man" || cfs_fail "check after remount"

for ((i = 1; i <= cycles; i++)); do
	if ((i % 2)); then
		# kill -9 in the middle of a round of growth.
		$py grow "$mnt/d" "$man" $((100 + i)) 2>"$CFS_WORK/grow.err" &
		load=$!
		sleep "0.$((RANDOM % 8 + 2))"
		cfs_crash "$mnt"
		wait $load 2>/dev/null || true
		cfs_clear_mount "$mnt"
		out=$("$fsck" -n "$img" 2>&1) || cfs_fail "fsck after kill -9 (cycle $i): $out"
		cfs_mount "$img" "$mnt"
		$py check "$mnt/d" "$man" || cfs_fail "check after kill -9 (cycle $i)"
	else
		$py grow "$mnt/d" "$man" $((100 + i)) || cfs_fail "growing (cycle $i)"
		$py check "$mnt/d" "$man" || cfs_fail "check after growing (cycle $i)"
		cfs_umount "$mnt" || cfs_fail "unclean unmount (cycle $i)"
		out=$("$fsck" -n "$img" 2>&1) || cfs_fail "fsck (cycle $i): $out"
		cfs_mount "$img" "$mnt"
		$py check "$mnt/d" "$man" || cfs_fail "check after remount (cycle $i)"
	fi
done
# Whatever the crashes left half done: a last clean round.
$py grow "$mnt/d" "$man" 999 || cfs_fail "growing"
$py check "$mnt/d" "$man" || cfs_fail "check after the last round"
cfs_umount "$mnt" || cfs_fail "unclean unmount"
out=$("$fsck" -n "$img" 2>&1) || cfs_fail "fsck at the end: $out"
cfs_log "$out"

# ---- without pieces: a unit per file, as before -----------------------------------
old=$CFS_WORK/old.img
cfs_mkfs "$old" 1G --no-pieces
cfs_mount "$old" "$mnt"
mkdir "$mnt/d"
$py write "$mnt/d" "$CFS_WORK/manifest-old" 7 20 || cfs_fail "writing without pieces"
$py check "$mnt/d" "$CFS_WORK/manifest-old" || cfs_fail "check without pieces"
for f in "$mnt"/d/*; do
	[ -s "$f" ] || continue
	[ $(($(stat -c %b "$f") * 512 % 1048576)) -eq 0 ] ||
		cfs_fail "$f has a piece on a store without pieces: $(stat -c %b "$f") blocks"
done
cfs_umount "$mnt" || cfs_fail "unclean unmount without pieces"
out=$("$fsck" -n "$old" 2>&1) || cfs_fail "fsck without pieces: $out"
cfs_log "ok"
