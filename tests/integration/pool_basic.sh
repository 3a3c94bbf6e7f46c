#!/usr/bin/env bash
# pool_basic.sh — a pool of three stores (two image files and a loop
# device): mkchunkfs --join, mounted as SRC1,SRC2,SRC3 in any order, fsck
# of the whole pool, placement per directory (inherited by files and
# subdirectories, surviving a remount and a kill -9), the root's default,
# per-store xattrs, data on the store it was placed on; and every refusal
# of bad input with its message, nothing written (fs/POOLS.md).
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd getfattr setfattr

mk=$CFS_BIN/mkchunkfs
fsck=$CFS_BIN/fsck.chunkfs
s0=$CFS_WORK/ssd0.img s1=$CFS_WORK/hdd0.img s2img=$CFS_WORK/hdd1.img
mnt=$CFS_WORK/mnt
mkdir -p "$mnt"

cfs_mkfs "$s0" 256M -L ssd0
"$mk" -q -s 128M --sparse -L hdd0 --join "$s0" "$s1" || cfs_fail "join of hdd0 failed"
truncate -s 64M "$s2img"
cfs_loop_attach "$s2img"
s2=$CFS_LOOP_DEV
"$mk" -q -L hdd1 --join "$s0" "$s2" || cfs_fail "join of hdd1 (a loop device) failed"
"$mk" -D "$s0" | grep -q '^store 2 .*"hdd1"' || cfs_fail "store 0's table lacks hdd1: $("$mk" -D "$s0")"
"$fsck" "$s0,$s1,$s2" >/dev/null || cfs_fail "fsck of the new pool: $("$fsck" "$s0,$s1,$s2")"

# --- refusals before anything is written ---------------------------------------
sums() { md5sum "$s0" "$s1" "$s2"; }
before=$(sums)
cfs_expect_fail_with "store hdd0 (index 1" 32 "$CFS_BIN/chunkfs" -f "$s0,$s2" "$mnt"
cfs_expect_fail_with "store hdd1 (index 2" 32 "$CFS_BIN/chunkfs" -f "$s0,$s1" "$mnt"
cfs_expect_fail_with "is missing" 32 "$CFS_BIN/chunkfs" -f "$s0" "$mnt"
cfs_expect_fail_with "the store holding its metadata) is missing" 32 \
	"$CFS_BIN/chunkfs" -f "$s1,$s2" "$mnt"
cfs_expect_fail_with "the store holding its metadata) is missing" 32 "$CFS_BIN/chunkfs" -f "$s1" "$mnt"
cfs_expect_fail_with "given twice" 32 "$CFS_BIN/chunkfs" -f "$s0,$s1,$s1,$s2" "$mnt"
other=$CFS_WORK/other.img other1=$CFS_WORK/other1.img
cfs_mkfs "$other" 64M -L other
"$mk" -q -s 32M --sparse --join "$other" "$other1" || cfs_fail "join to the other pool failed"
cfs_expect_fail_with "a store of another pool" 32 "$CFS_BIN/chunkfs" -f "$s0,$s1,$s2,$other1" "$mnt"
cfs_expect_fail_with "are two separate stores" 32 "$CFS_BIN/chunkfs" -f "$s0,$other,$s1,$s2" "$mnt"
cfs_expect_fail_with "is missing" 8 "$fsck" "$s0,$s1"
[ "$(sums)" = "$before" ] || cfs_fail "a refused mount or fsck wrote to a store"
cfs_log "missing, foreign, duplicate and lone data stores refused, nothing written"

# --- mkchunkfs --join refusals ---------------------------------------------------
cfs_expect_fail_with "needs the pool's store 0" 1 "$mk" -q -s 32M --sparse --join "$s1" "$CFS_WORK/x.img"
cfs_expect_fail_with "share a label" 1 "$mk" -q -s 32M --sparse -L hdd0 --join "$s0" "$CFS_WORK/x.img"
cfs_expect_fail_with "has no metadata region" 1 "$mk" -q -s 32M -m 8M --join "$s0" "$CFS_WORK/x.img"
cfs_expect_fail_with "-b and -a must be the pool's" 1 "$mk" -q -s 32M -a 64K --join "$s0" "$CFS_WORK/x.img"
[ ! -e "$CFS_WORK/x.img" ] || cfs_fail "a refused join created its image"
# An interrupted join: the new store is complete, store 0 never learnt of it.
rc=0
MKCHUNKFS_TEST_KILL=joined "$mk" -q -s 32M --sparse -L late --join "$s0" "$CFS_WORK/late.img" || rc=$?
[ $rc -eq 137 ] || cfs_fail "the killed join exited $rc"
cfs_expect_fail_with "is not in pool" 32 "$CFS_BIN/chunkfs" -f "$s0,$s1,$s2,$CFS_WORK/late.img" "$mnt"
[ "$(sums)" = "$before" ] || cfs_fail "the interrupted join changed the pool"
cfs_log "join refusals; an interrupted join leaves the pool as it was"

# --- mounted in any order; placement -------------------------------------------------
cfs_mount "$s2,$s0,$s1" "$mnt"
cfs_expect_fail_with "in use" 1 "$mk" -q -s 32M --sparse --join "$s0" "$CFS_WORK/y.img"
stores=$(getfattr --only-values -n user.chunkfs.stores "$mnt")
for l in ssd0 hdd0 hdd1; do
	grep -q "^$l index=.* state=active" <<<"$stores" || cfs_fail "user.chunkfs.stores lacks $l: $stores"
done
total=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^data=/) { sub("data=", "", $i); t += $i } } END { print t }' <<<"$stores")
df_bytes=$(($(stat -f -c '%b*%S' "$mnt")))
[ "$df_bytes" -eq "$total" ] || cfs_fail "df shows $df_bytes bytes, the stores hold $total"
getfattr -d "$mnt" | grep -q '^user.chunkfs.stores=' || cfs_fail "the root does not list user.chunkfs.stores"

mkdir "$mnt/arch" "$mnt/fast"
setfattr -n user.chunkfs.store -v hdd1 "$mnt/arch"
setfattr -n user.chunkfs.store -v 0 "$mnt/fast"   # by index
[ "$(getfattr --only-values -n user.chunkfs.store "$mnt/fast")" = ssd0 ] || cfs_fail "a store named by index"
cfs_expect_fail_with "Invalid argument" 1 setfattr -n user.chunkfs.store -v nosuch "$mnt/arch"
cfs_expect_fail_with "Permission denied" 1 setpriv --reuid 65534 --regid 65534 --clear-groups \
	setfattr -n user.chunkfs.store -v hdd0 "$mnt/arch"
mkdir "$mnt/arch/2024"
used_before=$(du -k "$s2img" | cut -f1)
dd if=/dev/urandom of="$CFS_WORK/data" bs=1M count=8 2>/dev/null
cp "$CFS_WORK/data" "$mnt/arch/2024/chunk1"
dd if="$CFS_WORK/data" of="$mnt/fast/chunk2" bs=1M oflag=direct 2>/dev/null
cp "$CFS_WORK/data" "$mnt/plain"
sync "$mnt/arch/2024/chunk1"
[ "$(getfattr --only-values -n user.chunkfs.store "$mnt/arch/2024")" = hdd1 ] || cfs_fail "subdirectory did not inherit"
[ "$(getfattr --only-values -n user.chunkfs.store "$mnt/arch/2024/chunk1")" = hdd1 ] || cfs_fail "chunk1 not on hdd1"
[ "$(getfattr --only-values -n user.chunkfs.store "$mnt/fast/chunk2")" = ssd0 ] || cfs_fail "chunk2 not on ssd0"
used_after=$(du -k "$s2img" | cut -f1)
[ $((used_after - used_before)) -ge 8192 ] || cfs_fail "hdd1's image grew by $((used_after - used_before)) KiB, not 8 MiB"
getfattr -d "$mnt/fast/chunk2" | grep -q '^user.chunkfs.store="ssd0"' || cfs_fail "a chunk does not list user.chunkfs.store"
# The root's default: new files outside placed directories go there.
setfattr -n user.chunkfs.store -v hdd0 "$mnt"
[ "$(getfattr --only-values -n user.chunkfs.store "$mnt")" = hdd0 ] || cfs_fail "root default"
dd if="$CFS_WORK/data" of="$mnt/dflt" bs=1M oflag=direct 2>/dev/null
[ "$(getfattr --only-values -n user.chunkfs.store "$mnt/dflt")" = hdd0 ] || cfs_fail "dflt not on the default"
cfs_log "placement inherited, default from the root, data on its store"

# A placed chunk that is already on its store is just placed; removexattr unplaces.
setfattr -n user.chunkfs.store -v hdd1 "$mnt/arch/2024/chunk1"
setfattr -x user.chunkfs.store "$mnt/fast"
cfs_expect_fail_with "No such attribute" 1 getfattr -n user.chunkfs.store "$mnt/fast"

# --- survives a remount and a crash --------------------------------------------------
cfs_umount "$mnt" || cfs_fail "unmount"
"$fsck" "$s0,$s1,$s2" >/dev/null || cfs_fail "fsck after the unmount: $("$fsck" "$s0,$s1,$s2")"
cfs_mount "$s1,$s2,$s0" "$mnt"
for f in arch/2024/chunk1 fast/chunk2 plain dflt; do
	cmp "$CFS_WORK/data" "$mnt/$f" || cfs_fail "$f differs after the remount"
done
[ "$(getfattr --only-values -n user.chunkfs.store "$mnt/arch")" = hdd1 ] || cfs_fail "placement lost"
mkdir "$mnt/arch/2025"
sync "$mnt/arch"
python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$mnt/arch"
cfs_kill9 "$mnt"
"$fsck" "$s0,$s1,$s2" >/dev/null || cfs_fail "fsck after kill -9: $("$fsck" "$s0,$s1,$s2")"
cfs_mount "$s0,$s1,$s2" "$mnt"
[ "$(getfattr --only-values -n user.chunkfs.store "$mnt/arch/2025")" = hdd1 ] || cfs_fail "placement of a directory made before kill -9 lost"
[ "$(getfattr --only-values -n user.chunkfs.store "$mnt")" = hdd0 ] || cfs_fail "the root default lost"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "placement and data survive a remount and kill -9; fsck clean"
cfs_log "ok"
