#!/usr/bin/env bash
# ceph_errors.sh — an error librbd returns reaches the application and the
# chunk's statistics, and nothing else: the OSDs are told to refuse every
# write (osd_max_object_size 1 byte: each write fails with EFBIG, reads and
# flushes are untouched), then
#   an O_DIRECT write into a chunk      -> EIO, and EIO to the next fsync of
#                                          the file (once), as on a local store
#   the chunk's and the mount's counters -> write_errors 1, fsync_errors 1,
#                                          err_eio 2, errors 2
#   reads meanwhile                     -> the chunk as it was
#   the mount                           -> not read-only, and writes work again
#                                          once the OSDs accept them
# and after an unmount fsck is clean and the chunk holds what was acknowledged.
# The OSD setting is put back however the test ends (the cluster may be the
# one all Ceph tests share).
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/ceph.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_ceph_require
cfs_require_cmd python3 getfattr setfattr

cfs_ceph_cluster
cfs_rbd_image errors 256M
src=$CFS_RBD
mnt=$CFS_WORK/mnt
"$CFS_BIN/mkchunkfs" -q "$src" || cfs_fail "mkchunkfs $src"
cfs_mount "$src" "$mnt"
head -c 4M /dev/urandom >"$CFS_WORK/before"
cp "$CFS_WORK/before" "$mnt/f" && sync "$mnt/f" || cfs_fail "writing the chunk"
head -c 4096 /dev/urandom >"$CFS_WORK/page"

# osd_max_object_size on every OSD; what it was, to put it back.
osd_max() {
	local n
	for ((n = 0; n < CEPH_OSDS; n++)); do
		ceph_cmd tell "osd.$n" config set osd_max_object_size "$1" >/dev/null || return 1
	done
}
was=$(ceph_cmd tell osd.0 config get osd_max_object_size |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["osd_max_object_size"])') ||
	cfs_fail "cannot read osd_max_object_size"
cfs_defer "osd_max $was"
cfs_log "the OSDs refuse every write (osd_max_object_size 1, was $was)"
osd_max 1 || cfs_fail "cannot set osd_max_object_size"
cfs_reset "$mnt/f"
cfs_reset "$mnt"

# O_DIRECT: the write reaches the store while the application waits.
python3 - "$mnt/f" "$CFS_WORK/page" <<'EOF' || cfs_fail "the refused write did not fail as it should"
import errno, mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
buf.write(open(sys.argv[2], "rb").read())
try:
    os.pwrite(fd, buf, 1 << 20)
    sys.exit("the write succeeded")
except OSError as e:
    if e.errno != errno.EIO:
        sys.exit("the write failed with %s, not EIO" % e)
try:
    os.fsync(fd)
    sys.exit("the fsync after the failed write succeeded")
except OSError as e:
    if e.errno != errno.EIO:
        sys.exit("the fsync failed with %s, not EIO" % e)
os.fsync(fd)  # the error is reported once
EOF
for kv in writes=1 write_bytes=0 write_errors=1 fsyncs=2 fsync_errors=1 err_eio=2 errors=2; do
	cfs_expect "$mnt/f" "${kv%%=*}" "${kv#*=}"
done
cfs_expect "$mnt" err_eio 2
cfs_expect "$mnt" errors 2
cfs_expect "$mnt" readonly 0
cfs_log "EIO to the write and to the next fsync, counted (write_errors, fsync_errors, err_eio):" \
	"$(cfs_stat "$mnt/f" write_errors) $(cfs_stat "$mnt/f" fsync_errors) $(cfs_stat "$mnt/f" err_eio)"
dd if="$mnt/f" of="$CFS_WORK/during" bs=1M iflag=direct status=none || cfs_fail "reads fail too"
cmp "$CFS_WORK/before" "$CFS_WORK/during" || cfs_fail "the chunk changed after a refused write"

cfs_log "the OSDs accept writes again"
osd_max "$was" || cfs_fail "cannot put osd_max_object_size back"
dd if="$CFS_WORK/page" of="$mnt/f" bs=4096 seek=256 oflag=direct conv=notrunc,fsync status=none ||
	cfs_fail "writes still fail once the OSDs accept them"
cfs_expect "$mnt/f" write_errors 1
cfs_umount "$mnt" || cfs_fail "unmount"
"$CFS_BIN/fsck.chunkfs" "$src" >"$CFS_WORK/fsck.out" 2>&1 || { cat "$CFS_WORK/fsck.out"; cfs_fail "fsck"; }
cp "$CFS_WORK/before" "$CFS_WORK/want"
dd if="$CFS_WORK/page" of="$CFS_WORK/want" bs=4096 seek=256 conv=notrunc status=none
cfs_mount "$src" "$mnt"
cmp "$CFS_WORK/want" "$mnt/f" || cfs_fail "after a remount the chunk is not what was acknowledged"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"
