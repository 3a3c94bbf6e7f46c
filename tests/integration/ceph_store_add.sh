#!/usr/bin/env bash
# ceph_store_add.sh — a chunk moved from a local store onto Ceph while it is
# written, without unmounting (fs/POOLS.md, "Adding and removing stores
# online"; an RBD image as the added store):
#   - a single local store holding a chunk whose blocks carry offset and
#     generation (pool_move_util.py); a writer changes random blocks
#     (O_DIRECT, each read back) while `chunkfs store add MNT rbd:...` makes
#     the mount a pool of two and while the chunk then moves onto the image;
#     every block holds its last generation; the image is locked by this
#     daemon (fsck of it refused, naming it) and holds the chunk's bytes;
#   - refused, nothing changed: a name without a pool, no such image, an
#     image holding an ext4 filesystem (found through the copy of its ends:
#     its content unchanged), the image already in the pool;
#   - the pool afterwards: fsck of LOCAL,rbd:... clean, remounted, the
#     chunk checked, the image removed online again (the chunk moves back);
#   - kill -9 between the image's superblocks and store 0's table: the
#     local store mounts alone as before and the add goes through when asked
#     again (the dead daemon's lock broken, the interrupted add's
#     superblocks recognised through the copy).
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/ceph.sh"
. "$CFS_ROOT/tests/lib/pool.sh"
cfs_require_fuse
cfs_ceph_require
cfs_require_cmd getfattr setfattr python3 mkfs.ext4

util="python3 $CFS_ROOT/tests/integration/pool_move_util.py"
s0=$CFS_WORK/ssd0.img
mnt=$CFS_WORK/mnt
log=$CFS_WORK/chunkfs-mnt.log
bytes=$((16 << 20))

cfs_ceph_cluster
cfs_rbd_image member 128M
rbd=$CFS_RBD

cfs_mkfs "$s0" 192M -L ssd0
cfs_mount "$s0" "$mnt"
pid=$CFS_MOUNT_PID
mkdir "$mnt/db"
$util fill "$mnt/db/chunk" $bytes

# --- the add and a move onto the image, under a writer -------------------------------------
$util writer "$mnt/db/chunk" $bytes 8 "$CFS_WORK/model.json" >"$CFS_WORK/writer.out" &
writer=$!
cfs_defer "kill $writer 2>/dev/null"
sleep 1
rbd_before=$(cfs_rbd_sum "$rbd")
out=$("$cm" store add "$mnt" "$rbd" -L ceph0) || cfs_fail "store add of $rbd: $out"
[[ $out == "added $rbd to the pool on $mnt: store ceph0 (index 1)"* ]] || cfs_fail "store add said: $out"
[ "$(field_of ceph0 state)" = active ] || cfs_fail "ceph0 after the add: $(stores)"
[ "$(field_of ceph0 source)" = "$rbd" ] || cfs_fail "ceph0's source after the add: $(stores)"
grep -q "$s0 is store 0 of a pool now: mount it as $s0,$rbd from now on" "$log" ||
	cfs_fail "no log line telling how to mount the pool"
cfs_expect_fail_with "in use by chunkfs on host $(hostname) (pid $pid" 8 "$fsck" "$rbd"
out=$("$cm" move "$mnt/db/chunk" ceph0) || cfs_fail "moving the chunk onto the image: $out"
[ "$(where "$mnt/db/chunk")" = ceph0 ] || cfs_fail "the chunk is on $(where "$mnt/db/chunk")"
wait $writer || cfs_fail "the writer failed: $(cat "$CFS_WORK/writer.out")"
$util check "$mnt/db/chunk" $bytes "$CFS_WORK/model.json" || cfs_fail "the chunk after the add and the move"
[ "$(field_of ceph0 used)" -ge $bytes ] || cfs_fail "ceph0 holds less than the chunk: $(stores)"
sync "$mnt/db/chunk"
[ "$(cfs_rbd_sum "$rbd")" != "$rbd_before" ] || cfs_fail "nothing reached the RBD image"
cfs_log "a local store became a pool with $rbd under a writer; the chunk moved onto the image"

# --- bad input: refused with a reason, nothing changed ------------------------------------
before=$(stores)
refused() { # TEXT SOURCE
	cfs_expect_fail_with "$1" 1 "$cm" store add "$mnt" "$2"
	[ "$(stores)" = "$before" ] || cfs_fail "a refused add of $2 changed the pool: $(stores)"
}
refused "no pool: rbd:POOL/IMAGE" "rbd:lonely"
refused "no image none-$$ in pool $CFS_RBD_POOL" "rbd:$CFS_RBD_POOL/none-$$"
head -c 64M /dev/zero >"$CFS_WORK/ext4.img"
mkfs.ext4 -q -F -L dbdata "$CFS_WORK/ext4.img" || cfs_fail "mkfs.ext4"
rbd import --no-progress "$CFS_WORK/ext4.img" "$CFS_RBD_POOL/ext4-$$" || cfs_fail "rbd import"
cfs_defer "timeout 60 rbd rm --no-progress $CFS_RBD_POOL/ext4-$$"
ext4_sum=$(cfs_rbd_sum "rbd:$CFS_RBD_POOL/ext4-$$")
refused 'contains an ext4 filesystem (label "dbdata")' "rbd:$CFS_RBD_POOL/ext4-$$"
[ "$(cfs_rbd_sum "rbd:$CFS_RBD_POOL/ext4-$$")" = "$ext4_sum" ] || cfs_fail "the refused add changed the ext4 image"
refused "$rbd is already store ceph0 (index 1) of this pool" "$rbd"
$util check "$mnt/db/chunk" $bytes "$CFS_WORK/model.json" || cfs_fail "the chunk after the refused adds"
cfs_log "refused: a name without a pool, no such image, an ext4 image (unchanged), the member again"

# --- the pool it is now -------------------------------------------------------------------
cfs_umount "$mnt" || cfs_fail "unmount"
out=$("$fsck" -n "$s0,$rbd" 2>&1) || cfs_fail "fsck of the new pool: $out"
cfs_mount "$s0,$rbd" "$mnt"
[ "$(where "$mnt/db/chunk")" = ceph0 ] || cfs_fail "after the remount the chunk is on $(where "$mnt/db/chunk")"
$util check "$mnt/db/chunk" $bytes "$CFS_WORK/model.json" || cfs_fail "the chunk after the remount"
out=$("$cm" store remove "$mnt" ceph0) || cfs_fail "removing the image: $out"
[ "$(where "$mnt/db/chunk")" = ssd0 ] || cfs_fail "after the removal the chunk is on $(where "$mnt/db/chunk")"
$util check "$mnt/db/chunk" $bytes "$CFS_WORK/model.json" || cfs_fail "the chunk after the removal"
cfs_umount "$mnt" || cfs_fail "unmount"
out=$("$fsck" -n "$s0" 2>&1) || cfs_fail "fsck after the removal: $out"
cfs_log "the pool: fsck clean, remounted, the image removed online again"

# --- kill -9 inside the add --------------------------------------------------------------
add_killed "$s0" "$rbd" ceph1
out=$("$fsck" -n "$s0" 2>&1) || cfs_fail "fsck of the local store after the interrupted add: $out"
cfs_mount "$s0" "$mnt"
has_store ceph1 && cfs_fail "an interrupted add left ceph1 in the pool: $(stores)"
$util check "$mnt/db/chunk" $bytes "$CFS_WORK/model.json" || cfs_fail "the chunk after the interrupted add"
out=$("$cm" store add "$mnt" "$rbd" -L ceph1) || cfs_fail "adding the image again: $out"
[ "$(field_of ceph1 state)" = active ] || cfs_fail "ceph1 after the second add: $(stores)"
grep -q "is gone: breaking its lock" "$log" || cfs_fail "the second add did not break the dead daemon's lock"
cfs_umount "$mnt" || cfs_fail "unmount"
out=$("$fsck" -n "$s0,$rbd" 2>&1) || cfs_fail "fsck after the second add: $out"
cfs_log "kill -9 inside the add: the local store as it was, the image added when asked again"
