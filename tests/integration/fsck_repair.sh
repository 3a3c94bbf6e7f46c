#!/usr/bin/env bash
# fsck_repair.sh — metadata whose framing is valid but whose contents are
# wrong (records appended by fsck_util.py with correct checksums), and an
# orphan left by a crash:
#   two files sharing a data unit      -> 4, and -y leaves it (4)
#   a wrong link count                 -> 4 with -n; -y fixes it (1), then 0
#   an inode without an entry          -> -y links it into /lost+found
#   an entry naming a missing inode    -> -y removes it
#   an orphan (unlinked while open, then kill -9) -> a note: 0 with -n;
#                                         -y frees it (1)
# After each repair the store mounts and the other files read back intact.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3
[ -x "$CFS_BIN/fsck.chunkfs" ] || cfs_skip "needs $CFS_BIN/fsck.chunkfs"

fsck=$CFS_BIN/fsck.chunkfs
util="python3 $CFS_ROOT/tests/integration/fsck_util.py"
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
REG=$((0100644))

cfs_mkfs "$img" 64M
cfs_mount "$img" "$mnt"
mkdir "$mnt/d"
head -c 3M /dev/urandom >"$mnt/d/a"
head -c 100k /dev/urandom >"$mnt/b"
echo keep >"$mnt/c"
ia=$(stat -c %i "$mnt/d/a")
ib=$(stat -c %i "$mnt/b")
ic=$(stat -c %i "$mnt/c")
sum=$(cat "$mnt/d/a" "$mnt/b" | md5sum)
cfs_umount "$mnt" || cfs_fail "unclean unmount"
cp --sparse=always "$img" "$CFS_WORK/pristine.img"

check_data() {
	cfs_mount "$img" "$mnt"
	[ "$(cat "$mnt/d/a" "$mnt/b" | md5sum)" = "$sum" ] || cfs_fail "$1: data changed"
	[ "$(cat "$mnt/c")" = keep ] || cfs_fail "$1: c changed"
	cfs_umount "$mnt" || cfs_fail "$1: unclean unmount"
}

fresh() { cp --sparse=always "$CFS_WORK/pristine.img" "$img"; }

# ---- two files share a unit --------------------------------------------------------
units=$($util units "$img")
$util append "$img" "map:$ib:10:0:$units"
cfs_expect_fail_with "is mapped by inode" 4 "$fsck" -n "$img"
cfs_expect_fail_with "is mapped by inode" 4 "$fsck" -y "$img"

# ---- wrong link count ---------------------------------------------------------------
fresh
$util append "$img" "nlink:$ic:$REG:3:5"
cfs_expect_exit 4 "$fsck" -n "$img"
grep -q "inode $ic has link count 3, should be 1" <<<"$out" || cfs_fail "nlink: $out"
cfs_expect_exit 1 "$fsck" -y "$img"
cfs_expect_exit 0 "$fsck" -n "$img"
check_data "nlink"

# ---- an inode without an entry -> /lost+found ------------------------------------------
fresh
$util append "$img" "unlink:1:c"
cfs_expect_exit 4 "$fsck" -n "$img"
grep -q "inode $ic has link count 1 but no directory entry" <<<"$out" || cfs_fail "lost: $out"
cfs_expect_exit 1 "$fsck" -y "$img"
cfs_expect_exit 0 "$fsck" -n "$img"
cfs_mount "$img" "$mnt"
[ "$(cat "$mnt/lost+found/#$ic")" = keep ] || cfs_fail "lost+found/#$ic: $(ls -la "$mnt/lost+found")"
mv "$mnt/lost+found/#$ic" "$mnt/c"
cfs_umount "$mnt" || cfs_fail "unclean unmount"
cfs_expect_exit 0 "$fsck" -n "$img"
check_data "lost+found"

# ---- an entry naming a missing inode ------------------------------------------------------
fresh
$util append "$img" "dirent:1:ghost:999999:$REG"
cfs_expect_fail_with "names missing inode 999999" 4 "$fsck" -n "$img"
cfs_expect_exit 1 "$fsck" -y "$img"
cfs_expect_exit 0 "$fsck" -n "$img"
check_data "dangling entry"

# ---- an orphan after a crash ------------------------------------------------------------------
fresh
cfs_mount "$img" "$mnt"
echo tmp >"$mnt/o"
exec 3<"$mnt/o"
rm "$mnt/o"
python3 -c "import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)" "$mnt/c"
cfs_kill9 "$mnt"
exec 3<&-
cfs_expect_exit 0 "$fsck" -n "$img"
cfs_expect_exit 0 "$fsck" -nv "$img"
grep -q "orphan inode" <<<"$out" || cfs_fail "no orphan note: $out"
cfs_expect_exit 1 "$fsck" -y "$img"
cfs_expect_exit 0 "$fsck" -nv "$img"
grep -q "orphan" <<<"$out" && cfs_fail "orphan left: $out"
check_data "orphan"
cfs_log "ok"
