#!/usr/bin/env bash
# pool_store_online.sh — stores added to and removed from a mounted pool
# (fs/POOLS.md, "Adding and removing stores online"; chunkfs store):
#   - `chunkfs store add` while fio (crc32c verify, O_DIRECT) runs on a
#     chunk; a directory placed on the new store puts files there; the
#     chunk moved onto it under fio; the next mount needs the new store (a
#     mount without it is refused naming it); fsck clean;
#   - bad input, nothing written: an image with ext4 on it (its checksum
#     unchanged), a store of another pool, a single chunkfs store, a store
#     of this pool, a label in use; remove of store 0, of an unknown store,
#     of a store whose chunks the others have no room for;
#   - `chunkfs store remove` while fio verifies a chunk on the store: its
#     chunks move off, placements naming it are dropped, it leaves the
#     table, its superblocks are wiped and its lock released; the pool
#     mounts without it, fsck clean;
#   - crashes: kill -9 between the new store's superblocks and store 0's
#     table (the pool as it was; a mount given the store names it; adding it
#     again works); kill -9 in the middle of a removal (the next mount
#     resumes it; the data verified).
# Under BUILD=tsan the daemons run with ThreadSanitizer and any report fails.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/pool.sh"
cfs_require_fuse
cfs_require_cmd getfattr setfattr fio mkfs.ext4 md5sum flock
cfs_tsan_watch

s0=$CFS_WORK/ssd0.img s1=$CFS_WORK/hdd0.img s2=$CFS_WORK/new.img
mnt=$CFS_WORK/mnt
MiB=1048576

cfs_mkfs "$s0" 128M -L ssd0
"$mk" -q -s 64M --sparse -L hdd0 --join "$s0" "$s1" || cfs_fail "join of hdd0 failed"
truncate -s 64M "$s2"
cfs_mount "$s0,$s1" "$mnt"

cd "$CFS_WORK"
engine=io_uring
fio --enghelp=io_uring >/dev/null 2>&1 || engine=libaio
mkdir "$mnt/db"
fio_args=(--name=so --filename="$mnt/db/fio" --ioengine=$engine --direct=1 --iodepth=16
	--bs=4k --size=24M --verify=crc32c)
fio "${fio_args[@]}" --rw=write --output="$CFS_WORK/fio-fill.out" ||
	{ cat "$CFS_WORK/fio-fill.out"; cfs_fail "fio fill failed"; }
fio_run() {	# fio_run SECONDS: randrw with verification in the background
	fio "${fio_args[@]}" --rw=randrw --verify_backlog=64 --runtime="$1" --time_based \
		--output="$CFS_WORK/fio-run.out" &
	fio_pid=$!
	cfs_defer "kill $fio_pid 2>/dev/null"
}
fio_wait() {
	wait "$fio_pid" || { cat "$CFS_WORK/fio-run.out"; cfs_fail "fio under $1 failed"; }
}
fio_verify() {
	fio "${fio_args[@]}" --rw=write --verify_only --output="$CFS_WORK/fio-verify.out" ||
		{ cat "$CFS_WORK/fio-verify.out"; cfs_fail "fio verify $1 failed"; }
}

# --- add under fio -------------------------------------------------------------------------
fio_run 5
sleep 0.5
out=$("$cm" store add "$mnt" "$s2" -L new0) || cfs_fail "chunkfs store add failed: $out"
[[ $out == "added $s2 to the pool on $mnt: store new0 (index 2), "* ]] || cfs_fail "store add said: $out"
[ "$(field_of new0 state)" = active ] || cfs_fail "the new store: $(stores)"
[ "$(field_of new0 source)" = "$s2" ] || cfs_fail "the new store's source: $(stores)"
grep -q "store new0 (index 2, $s2) added" "$CFS_WORK/chunkfs-mnt.log" || cfs_fail "no log line for the add"
mkdir "$mnt/newdir"
setfattr -n user.chunkfs.store -v new0 "$mnt/newdir" || cfs_fail "placing a directory on new0"
dd if=/dev/urandom of="$mnt/newdir/placed" bs=1M count=4 oflag=direct 2>/dev/null
placed_sum=$(md5sum <"$mnt/newdir/placed")
[ "$(where "$mnt/newdir/placed")" = new0 ] || cfs_fail "a file placed on new0 is on $(where "$mnt/newdir/placed")"
out=$("$cm" move "$mnt/db/fio" new0) || cfs_fail "moving the fio chunk to new0: $out"
[ "$(where "$mnt/db/fio")" = new0 ] || cfs_fail "the fio chunk is on $(where "$mnt/db/fio")"
fio_wait "an add and a move"
fio_verify "after the add"
cfs_log "store add under fio: new0 active, a placed directory and a moved chunk on it"

cfs_umount "$mnt" || cfs_fail "unmount"
cfs_expect_fail_with "store new0 (index 2" 32 "$cm" -f "$s0,$s1" "$mnt"
"$fsck" "$s0,$s1,$s2" >"$CFS_WORK/fsck.out" || cfs_fail "fsck after the add: $(cat "$CFS_WORK/fsck.out")"
cfs_mount "$s2,$s0,$s1" "$mnt"
fio_verify "after the remount"
[ "$(md5sum <"$mnt/newdir/placed")" = "$placed_sum" ] || cfs_fail "the placed file changed"
cfs_log "the next mount needs new0; fsck clean; data verified after the remount"

# --- bad input ------------------------------------------------------------------------------
listing=$(stores)
ext=$CFS_WORK/ext4.img
truncate -s 64M "$ext"
mkfs.ext4 -q -F -L data "$ext"
sum=$(md5sum <"$ext")
cfs_expect_fail_with "contains an ext4 filesystem (label \"data\"): chunkfs store add never overwrites it" 1 \
	"$cm" store add "$mnt" "$ext" -L x
[ "$(md5sum <"$ext")" = "$sum" ] || cfs_fail "a refused add changed the ext4 image"
o0=$CFS_WORK/other0.img o1=$CFS_WORK/other1.img
cfs_mkfs "$o0" 32M -L other0
"$mk" -q -s 32M --sparse -L other1 --join "$o0" "$o1" || cfs_fail "join of other1 failed"
sum=$(md5sum "$o0" "$o1")
cfs_expect_fail_with "is a store of another pool" 1 "$cm" store add "$mnt" "$o1"
cfs_expect_fail_with "contains a chunkfs store (label \"other0\"" 1 "$cm" store add "$mnt" "$o0"
[ "$(md5sum "$o0" "$o1")" = "$sum" ] || cfs_fail "a refused add changed another pool"
cfs_expect_fail_with "is already store hdd0 (index 1) of this pool" 1 "$cm" store add "$mnt" "$s1"
fresh=$(cfs_image 32M fresh.img)
cfs_expect_fail_with "share a label" 1 "$cm" store add "$mnt" "$fresh" -L hdd0
cfs_expect_fail_with "No such file or directory" 1 "$cm" store add "$mnt" "$CFS_WORK/nosuch.img"
cfs_expect_fail_with "holds the pool's metadata (store 0): it cannot be removed" 1 \
	"$cm" store remove "$mnt" ssd0
cfs_expect_fail_with "no store nosuch in this pool" 1 "$cm" store remove "$mnt" nosuch
cfs_expect_fail_with "Permission denied" 1 setpriv --reuid 65534 --regid 65534 \
	--clear-groups "$cm" store remove "$mnt" new0
cfs_expect_exit 2 "$cm" store remove "$mnt"
cfs_expect_exit 2 "$cm" store bogus "$mnt" x
# No room elsewhere for what new0 holds: the others filled to 8 MiB free each.
for st in ssd0 hdd0; do
	mkdir "$mnt/fill-$st"
	setfattr -n user.chunkfs.store -v $st "$mnt/fill-$st"
	fallocate -l $(($(field_of $st free) - 8 * MiB)) "$mnt/fill-$st/filler" ||
		cfs_fail "filling $st"
done
cfs_expect_fail_with "store new0 holds 28.0 MiB, more than the other stores have free: " 1 \
	"$cm" store remove "$mnt" new0
[ "$(field_of new0 state)" = active ] || cfs_fail "a refused remove changed new0: $(stores)"
rm -r "$mnt/fill-ssd0" "$mnt/fill-hdd0"
[ "$(stores | awk '{ print $1, $2 }')" = "$(awk '{ print $1, $2 }' <<<"$listing")" ] ||
	cfs_fail "bad input changed the stores: $(stores)"
cfs_log "bad input refused with its reason, nothing written"

# --- remove under fio ----------------------------------------------------------------------
fio_run 5
sleep 0.5
out=$("$cm" store remove "$mnt" new0) || cfs_fail "chunkfs store remove failed: $out"
[[ $out == "removed new0 from the pool on $mnt in "* ]] || cfs_fail "store remove said: $out"
has_store new0 && cfs_fail "new0 is still listed: $(stores)"
w=$(where "$mnt/db/fio")
[ "$w" = ssd0 ] || [ "$w" = hdd0 ] || cfs_fail "the fio chunk is on $w"
fio_wait "a removal"
fio_verify "after the removal"
[ "$(md5sum <"$mnt/newdir/placed")" = "$placed_sum" ] || cfs_fail "the placed file changed in the removal"
getfattr -n user.chunkfs.store "$mnt/newdir" >/dev/null 2>&1 &&
	cfs_fail "newdir is still placed: $(where "$mnt/newdir")"
flock -n "$s2" true || cfs_fail "the removed store is still locked by the daemon"
grep -q "store new0 (index 2, $s2) removed" "$CFS_WORK/chunkfs-mnt.log" || cfs_fail "no log line for the removal"
cfs_umount "$mnt" || cfs_fail "unmount"
"$fsck" "$s0,$s1" >"$CFS_WORK/fsck.out" || cfs_fail "fsck after the removal: $(cat "$CFS_WORK/fsck.out")"
cfs_expect_fail_with "not a chunkfs store" 32 "$cm" -f "$s0,$s1,$s2" "$mnt"
cfs_mount "$s0,$s1" "$mnt"
fio_verify "after the removal and a remount"
cfs_log "store remove under fio: chunks moved off, placement dropped, wiped, unlocked; fsck clean"

# --- kill -9 between the new store's superblocks and store 0's table ------------------------
cfs_umount "$mnt" || cfs_fail "unmount"
add_killed "$s0,$s1" "$s2" new1
"$fsck" "$s0,$s1" >"$CFS_WORK/fsck.out" || cfs_fail "fsck after the interrupted add: $(cat "$CFS_WORK/fsck.out")"
cfs_expect_fail_with "it was removed, or its join was interrupted" 32 "$cm" -f "$s0,$s1,$s2" "$mnt"
cfs_mount "$s0,$s1" "$mnt"
has_store new1 && cfs_fail "an interrupted add left new1 in the pool: $(stores)"
"$cm" store add "$mnt" "$s2" -L new1 >/dev/null || cfs_fail "adding the interrupted store again"
fio_verify "after the interrupted add"
cfs_log "kill -9 inside an add: the pool as it was, the store named at mount, added again"

# --- kill -9 in the middle of a removal ------------------------------------------------------
"$cm" move "$mnt/db/fio" new1 >/dev/null || cfs_fail "moving the fio chunk to new1"
dd if=/dev/urandom of="$mnt/db/big" bs=1M count=24 oflag=direct 2>/dev/null
"$cm" move "$mnt/db/big" new1 >/dev/null || cfs_fail "moving big to new1"
big_sum=$(md5sum <"$mnt/db/big")
"$cm" store remove --no-wait --rate 8M "$mnt" new1 >/dev/null || cfs_fail "store remove --no-wait"
sleep 1
[ "$(field_of new1 state)" = removing ] || cfs_fail "new1 during its removal: $(stores)"
left=$(field_of new1 left)
[ -n "$left" ] && [ "$left" -gt 0 ] || cfs_fail "nothing left to move after 1 s at 8 MiB/s: $(stores)"
cfs_kill9 "$mnt"
"$fsck" "$s0,$s1,$s2" >"$CFS_WORK/fsck.out" || cfs_fail "fsck after kill -9 in a removal: $(cat "$CFS_WORK/fsck.out")"
cfs_mount "$s0,$s1,$s2" "$mnt"
for ((i = 0; i < 300; i++)); do
	has_store new1 || break
	sleep 0.1
done
has_store new1 && cfs_fail "the resumed removal did not end: $(stores)"
grep -q "store new1 (index [0-9]*): resuming its removal" "$CFS_WORK/chunkfs-mnt.log" ||
	cfs_fail "the mount did not resume the removal"
[ "$(md5sum <"$mnt/db/big")" = "$big_sum" ] || cfs_fail "big changed in the crashed removal"
fio_verify "after the crashed removal"
cfs_umount "$mnt" || cfs_fail "unmount"
"$fsck" "$s0,$s1" >"$CFS_WORK/fsck.out" || cfs_fail "final fsck: $(cat "$CFS_WORK/fsck.out")"
cfs_mount "$s0,$s1" "$mnt"
[ "$(md5sum <"$mnt/db/big")" = "$big_sum" ] || cfs_fail "big changed after the last remount"
cfs_log "kill -9 in a removal: the next mount resumed it, fsck clean, the data intact"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_tsan_verdict
