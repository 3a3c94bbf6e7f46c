#!/usr/bin/env bash
# ceph_bad_input.sh — what an RBD source refuses, each with a message that
# names the cause, within seconds, and nothing written to any image:
#   no cluster reachable (a configuration whose monitor port nobody listens
#   on), a wrong key, a missing pool, a missing image, an image too small for
#   a store, an image that is not a store, an image without the
#   exclusive-lock feature, an image held by a live chunkfs (a second mount,
#   mkchunkfs and fsck.chunkfs all refused, naming its host and pid, and the
#   holder's store unharmed), malformed names and Ceph options on a local
#   store (usage errors, exit 1), an RBD image with a store of its own named
#   among a pool's stores, an RBD image as a pool's first store.
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/ceph.sh"
cfs_require_fuse
cfs_ceph_require

cfs_ceph_cluster
mnt=$CFS_WORK/mnt
mkdir -p "$mnt"

# refused CMD... -- TEXT RC SECONDS: CMD exits RC (32 for chunkfs, 1 or 8 for
# the tools), says TEXT, within SECONDS.
refused() {
	local text rc secs start took
	local -a cmd=()
	while [ "$1" != -- ]; do cmd+=("$1"); shift; done
	text=$2 rc=$3 secs=$4
	start=$(date +%s%N)
	cfs_expect_fail_with "$text" "$rc" "${cmd[@]}"
	took=$((($(date +%s%N) - start) / 1000000))
	[ $took -le $((secs * 1000)) ] || cfs_fail "'${cmd[*]}' took $took ms to refuse (more than $secs s)"
	cfs_log "  in $took ms"
	! cfs_is_mounted "$mnt" || cfs_fail "something is mounted on $mnt after '${cmd[*]}'"
}

cfs_rbd_image formatted 256M
good=$CFS_RBD
"$CFS_BIN/mkchunkfs" -q "$good" || cfs_fail "mkchunkfs $good"
good_sum=$(cfs_rbd_sum "$good")

cfs_log "no cluster reachable"
port=$(_ceph_free_port)
sed "s/^mon host = .*/mon host = v2:127.0.0.1:$port/" "$CEPH_CONF" >"$CFS_WORK/dead.conf"
for cmd in "$CFS_BIN/chunkfs -f $good $mnt -o ceph_conf=$CFS_WORK/dead.conf" \
	"$CFS_BIN/mkchunkfs -f --ceph-conf $CFS_WORK/dead.conf $good" \
	"$CFS_BIN/fsck.chunkfs --ceph-conf $CFS_WORK/dead.conf $good"; do
	# shellcheck disable=SC2086
	refused $cmd -- "no Ceph monitor answered within 10 s (mon_host v2:127.0.0.1:$port)" nonzero 20
done

cfs_log "a wrong key"
ceph_user_create cfs-wrong-$$ >/dev/null
cfs_defer "ceph_cmd auth del client.cfs-wrong-$$"
wrong=$CFS_WORK/wrong.keyring
printf '[client.cfs-wrong-%s]\n\tkey = %s\n' $$ "$(CEPH_CONF=/dev/null ceph-authtool --gen-print-key)" >"$wrong"
sed "s|^keyring = .*|keyring = $wrong|" "$CEPH_CONF" >"$CFS_WORK/wrong.conf"
refused "$CFS_BIN/chunkfs" -f "$good" "$mnt" -o "ceph_conf=$CFS_WORK/wrong.conf,ceph_id=cfs-wrong-$$" -- \
	"the cluster refused client.cfs-wrong-$$: wrong key, or no such user" 32 20
refused "$CFS_BIN/mkchunkfs" -f --ceph-conf "$CFS_WORK/wrong.conf" --id "cfs-wrong-$$" "$good" -- \
	"the cluster refused client.cfs-wrong-$$" 1 20
refused "$CFS_BIN/chunkfs" -f "$good" "$mnt" -o "ceph_id=nobody-$$" -- \
	"no key for client.nobody-$$ in the keyring" 32 20

cfs_log "a missing pool, a missing image"
refused "$CFS_BIN/chunkfs" -f "rbd:nopool-$$/img" "$mnt" -- "the cluster has no pool nopool-$$" 32 15
refused "$CFS_BIN/mkchunkfs" "rbd:nopool-$$/img" -- "the cluster has no pool nopool-$$" 1 15
refused "$CFS_BIN/chunkfs" -f "rbd:$CFS_RBD_POOL/none-$$" "$mnt" -- \
	"no image none-$$ in pool $CFS_RBD_POOL (rbd create --size SIZE $CFS_RBD_POOL/none-$$)" 32 15
refused "$CFS_BIN/fsck.chunkfs" "rbd:$CFS_RBD_POOL/none-$$" -- "no image none-$$ in pool" 8 15

cfs_log "an image too small, an image that is not a store"
cfs_rbd_image small 8M
small=$CFS_RBD
small_sum=$(cfs_rbd_sum "$small")
refused "$CFS_BIN/mkchunkfs" "$small" -- "$small: " 1 15
grep -q "too small" <<<"$("$CFS_BIN/mkchunkfs" "$small" 2>&1)" ||
	cfs_fail "mkchunkfs of an 8 MiB image does not say it is too small"
refused "$CFS_BIN/mkchunkfs" -s 512M "$good" -- "-s 512 MiB is larger than the image (256 MiB); grow it with rbd resize" 1 15
refused "$CFS_BIN/chunkfs" -f "$small" "$mnt" -- "$small: not a chunkfs store" 32 15
[ "$(cfs_rbd_sum "$small")" = "$small_sum" ] || cfs_fail "the refused image changed"

cfs_log "an image without the exclusive-lock feature"
rbd create --size 64M --image-feature layering "$CFS_RBD_POOL/nolock-$$" || cfs_fail "rbd create"
cfs_defer "timeout 60 rbd rm --no-progress $CFS_RBD_POOL/nolock-$$"
refused "$CFS_BIN/mkchunkfs" "rbd:$CFS_RBD_POOL/nolock-$$" -- \
	"the image has no exclusive-lock feature, which chunkfs needs to keep other hosts from writing to it (rbd feature enable $CFS_RBD_POOL/nolock-$$ exclusive-lock)" 1 15

cfs_log "an image held by a live chunkfs"
[ "$(cfs_rbd_sum "$good")" = "$good_sum" ] || cfs_fail "the refusals above changed $good"
holder=$CFS_WORK/holder
cfs_mount "$good" "$holder"
echo "the holder's data" >"$holder/file" && sync "$holder/file"
refused "$CFS_BIN/chunkfs" -f "$good" "$mnt" -o wait=0 -- \
	"$good: in use by chunkfs on host $(hostname) (pid $CFS_MOUNT_PID, client.admin at" 32 10
refused "$CFS_BIN/chunkfs" -f "$good" "$mnt" -- "take it over here with -o takeover" 32 12
refused "$CFS_BIN/chunkfs" -f "$good" "$mnt" -o takeover -- \
	"which is running on this host: unmount it instead of taking it over" 32 10
refused "$CFS_BIN/mkchunkfs" -f "$good" -- "in use by chunkfs on host $(hostname) (pid $CFS_MOUNT_PID" 1 10
refused "$CFS_BIN/fsck.chunkfs" "$good" -- "in use by chunkfs on host $(hostname) (pid $CFS_MOUNT_PID" 8 10
[ "$(cat "$holder/file")" = "the holder's data" ] || cfs_fail "the holder's file changed"
echo more >>"$holder/file" || cfs_fail "the holder cannot write after the refusals"
cfs_umount "$holder" || cfs_fail "unmount the holder"
"$CFS_BIN/fsck.chunkfs" "$good" >"$CFS_WORK/fsck.out" 2>&1 || { cat "$CFS_WORK/fsck.out"; cfs_fail "fsck"; }

cfs_log "malformed names, Ceph options on a local store"
refused "$CFS_BIN/chunkfs" "rbd:onlypool" "$mnt" -- "no pool: rbd:POOL/IMAGE or rbd:POOL/NAMESPACE/IMAGE" 1 5
refused "$CFS_BIN/chunkfs" "rbd:p/img@snap" "$mnt" -- "snapshots (IMAGE@SNAP) cannot hold a store" 1 5
refused "$CFS_BIN/mkchunkfs" "rbd:a/b/c/d" -- "too many '/'" 1 5
refused "$CFS_BIN/mkchunkfs" --sparse "$good" -- "--sparse is for image files" 1 5
img=$(cfs_image 64M)
refused "$CFS_BIN/chunkfs" "$img" "$mnt" -o takeover -- "are for RBD stores (rbd:POOL/IMAGE)" 1 5
refused "$CFS_BIN/mkchunkfs" --id admin "$img" -- "--ceph-conf, --id and --cluster are for RBD images" 1 5
refused "$CFS_BIN/fsck.chunkfs" --ceph-conf /etc/ceph/ceph.conf "$img" -- "are for RBD stores" 16 5

cfs_log "an RBD image with a store of its own named among a pool's stores; one as a pool's first store"
local_store=$CFS_WORK/local.img
"$CFS_BIN/mkchunkfs" -q -s 64M --sparse "$local_store" || cfs_fail "mkchunkfs $local_store"
good_sum=$(cfs_rbd_sum "$good")
local_sum=$(md5sum <"$local_store")
separate="are two separate stores (each holds its own metadata): not stores of one pool"
refused "$CFS_BIN/chunkfs" -f "$local_store,$good" "$mnt" -- "$local_store and $good $separate" 32 10
refused "$CFS_BIN/chunkfs" -f "$good,$local_store" "$mnt" -- "$good and $local_store $separate" 32 10
refused "$CFS_BIN/fsck.chunkfs" "$local_store,$good" -- "$separate" 8 10
refused "$CFS_BIN/mkchunkfs" -L d1 --join "$local_store" "$good" -- "$good contains a chunkfs store" 1 10
refused "$CFS_BIN/mkchunkfs" -L d1 --join "$good" "$img" -- \
	"--join $good: a pool's first store holds its metadata and must be a local device or image file" 1 5
refused "$CFS_BIN/chunkfs" "rbd:p/a,rbd:p/a" "$mnt" -- "rbd:p/a: given twice" 32 5
[ "$(cfs_rbd_sum "$good")" = "$good_sum" ] || cfs_fail "the refusals changed $good"
[ "$(md5sum <"$local_store")" = "$local_sum" ] || cfs_fail "the refusals changed $local_store"
cfs_log "ok"
