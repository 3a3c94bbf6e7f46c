#!/usr/bin/env bash
# daemon_mount.sh — the mount experience: every bad input refused before
# daemonizing with its message and a non-zero exit; a store held by a daemon
# refused ("store in use"), also right after umount while the old daemon
# finishes (then wait= lets the next mount wait for it); the daemonized path
# (no -f) with its clean exit after umount; the mount helper names and the
# argv shapes mount(8) and mount.fuse3 pass; mount -t fuse.chunkfs for real.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3 flock

util="python3 $CFS_ROOT/tests/integration/daemon_util.py"
chunkfs=$CFS_BIN/chunkfs
[ -x "$chunkfs" ] || cfs_skip "needs $chunkfs"
mnt=$CFS_WORK/mnt
mkdir -p "$mnt"
good=$CFS_WORK/good.img
cfs_mkfs "$good" 64M

# wait_released IMAGE: the daemon holding IMAGE has exited (its flock is gone)
wait_released() {
	local i
	for ((i = 0; i < 300; i++)); do
		flock -n "$1" true 2>/dev/null && return 0
		sleep 0.1
	done
	cfs_fail "the daemon still holds $1 after 30 s"
}

# ---- bad inputs, each with its message ---------------------------------------------
cfs_expect_fail_with "unknown option 'bogus'" 1 "$chunkfs" "$good" "$mnt" -o bogus
cfs_expect_fail_with "bad value" 1 "$chunkfs" "$good" "$mnt" -o threads=0
cfs_expect_fail_with "dev_wakeup=some: must be all or one" 1 "$chunkfs" "$good" "$mnt" -o dev_wakeup=some
cfs_expect_fail_with "needs size=" 1 "$chunkfs" none "$mnt" -o ram
cfs_expect_fail_with "writeback_reserve=lots: not a size" 1 "$chunkfs" "$good" "$mnt" -o writeback_cache,writeback_reserve=lots
cfs_expect_fail_with "writeback_reserve= is for mounts with -o writeback_cache" 1 "$chunkfs" "$good" "$mnt" -o writeback_reserve=8M
cfs_expect_fail_with "usage:" 1 "$chunkfs" "$good"
cfs_expect_fail_with "mountpoint $CFS_WORK/nodir" 32 "$chunkfs" "$good" "$CFS_WORK/nodir"
: >"$CFS_WORK/afile"
cfs_expect_fail_with "not a directory" 32 "$chunkfs" "$good" "$CFS_WORK/afile"
cfs_expect_fail_with "No such file" 32 "$chunkfs" "$CFS_WORK/missing.img" "$mnt"
mkdir "$CFS_WORK/adir"
cfs_expect_fail_with "not a block device or an image file" 32 "$chunkfs" "$CFS_WORK/adir" "$mnt"

zero=$(cfs_image 64M zero.img)
cfs_expect_fail_with "not a chunkfs store" 32 "$chunkfs" "$zero" "$mnt"

bad=$CFS_WORK/bad.img
cp --sparse=always "$good" "$bad"
$util sbcorrupt "$bad"
cfs_expect_fail_with "bad superblock checksum" 32 "$chunkfs" "$bad" "$mnt"

cp --sparse=always "$good" "$bad"
$util sbpatch "$bad" version 99
cfs_expect_fail_with "version" 32 "$chunkfs" "$bad" "$mnt"

cp --sparse=always "$good" "$bad"
$util sbpatch "$bad" incompat or:0x8000
cfs_expect_fail_with "feature" 32 "$chunkfs" "$bad" "$mnt"

cp --sparse=always "$good" "$bad"
$util sbpatch "$bad" flags or:1		# CFS_SB_INPROGRESS
cfs_expect_fail_with "mkchunkfs" 32 "$chunkfs" "$bad" "$mnt"

# nothing was mounted by any of them, and no daemon is left
cfs_is_mounted "$mnt" && cfs_fail "a refused mount left a mount behind"
pgrep -f "chunkfs.*$CFS_WORK" >/dev/null && cfs_fail "a refused mount left a daemon behind"

# ---- a store in use --------------------------------------------------------------
cfs_mount "$good" "$mnt"
mkdir -p "$CFS_WORK/mnt2"
cfs_expect_fail_with "store in use" 32 "$chunkfs" "$good" "$CFS_WORK/mnt2" -o wait=0
start=$(date +%s)
cfs_expect_fail_with "store in use" 32 "$chunkfs" "$good" "$CFS_WORK/mnt2" -o wait=1
[ $(($(date +%s) - start)) -ge 1 ] || cfs_fail "wait=1 did not wait"
# the same store through a loop device over the image: the same lock
cfs_loop_attach "$good"
cfs_expect_fail_with "store in use" 32 "$chunkfs" "$CFS_LOOP_DEV" "$CFS_WORK/mnt2" -o wait=0
cfs_umount "$mnt" || cfs_fail "unmount"

# ---- the daemonized path: returns once mounted, logs nothing on the terminal -------
out=$("$chunkfs" "$good" "$mnt" 2>&1) || cfs_fail "daemonized mount failed: $out"
[ -z "$out" ] || cfs_fail "the daemonized mount printed: $out"
cfs_defer "fusermount3 -u '$mnt' 2>/dev/null || umount -l '$mnt' 2>/dev/null"
cfs_is_mounted "$mnt" || cfs_fail "not mounted after chunkfs returned"
echo persisted >"$mnt/file"
fusermount3 -u "$mnt"
# umount returns before the daemon has finished; the next mount waits for it
out=$("$chunkfs" "$good" "$mnt" -o wait=30 2>&1) || cfs_fail "remount right after umount: $out"
[ "$(cat "$mnt/file")" = persisted ] || cfs_fail "data lost over a daemonized remount"
fusermount3 -u "$mnt"
wait_released "$good"

# ---- allow_other and default_permissions (the database runs as its own user) ----------
if command -v setpriv >/dev/null; then
	as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	chmod 755 "$CFS_WORK"
	cfs_mount "$good" "$mnt" allow_other
	chmod 644 "$mnt/file"
	as_nobody cat "$mnt/file" >/dev/null || cfs_fail "allow_other: another user cannot read"
	as_nobody sh -c "echo x >>'$mnt/file'" 2>/dev/null &&
		cfs_fail "default_permissions: another user wrote a 0644 root file"
	mkdir "$mnt/dbspace"
	chown 65534:65534 "$mnt/dbspace"
	as_nobody sh -c "echo chunk >'$mnt/dbspace/chunk1'" || cfs_fail "owner cannot create in its directory"
	[ "$(stat -c %u "$mnt/dbspace/chunk1")" = 65534 ] || cfs_fail "new file not owned by its creator"
	cfs_umount "$mnt" || cfs_fail "unmount"
	cfs_mount "$good" "$mnt"
	as_nobody cat "$mnt/file" >/dev/null 2>&1 && cfs_fail "without allow_other another user can read"
	cfs_umount "$mnt" || cfs_fail "unmount"
fi

# ---- read-only: readable, refuses changes, writes nothing to the store ----------------
cp --sparse=always "$good" "$CFS_WORK/before.img"
cfs_mount "$good" "$mnt" ro
grep -q " $mnt fuse.chunkfs ro," /proc/self/mounts || cfs_fail "ro not in /proc/mounts"
[ "$(cat "$mnt/file")" = persisted ] || cfs_fail "read on a read-only mount"
touch "$mnt/new" 2>/dev/null && cfs_fail "create on a read-only mount"
echo x 2>/dev/null >>"$mnt/file" && cfs_fail "write on a read-only mount"
cfs_umount "$mnt" || cfs_fail "unmount ro"
cmp "$good" "$CFS_WORK/before.img" || cfs_fail "a read-only mount changed the store"

# ---- the mount helper names and the argv mount(8) passes --------------------------------
bin=$CFS_WORK/bin
mkdir -p "$bin"
ln -s "$chunkfs" "$bin/mount.chunkfs"
ln -s "$chunkfs" "$bin/mount.fuse.chunkfs"
ln -s "$chunkfs" "$bin/chunkfs"
# -f is "fake" for a helper: everything checked, nothing mounted
"$bin/mount.chunkfs" "$good" "$mnt" -f -o rw,nosuid || cfs_fail "helper -f (fake)"
cfs_is_mounted "$mnt" && cfs_fail "helper -f mounted"
cfs_expect_fail_with "not a chunkfs store" 32 "$bin/mount.chunkfs" "$zero" "$mnt" -o rw
"$bin/mount.chunkfs" "$good" "$mnt" -o rw,nosuid,nodev,noexec,noatime,_netdev,nofail,auto,user,x-systemd.automount,defaults ||
	cfs_fail "mount.chunkfs with mount(8)'s flags"
opts=$(awk -v d="$mnt" '$2 == d { print $4 }' /proc/self/mounts)
cfs_log "mount.chunkfs: $opts"
for o in nosuid nodev noexec noatime; do
	grep -qw $o <<<"${opts//,/ }" || cfs_fail "$o not applied: $opts"
done
fusermount3 -u "$mnt"
wait_released "$good"
"$bin/mount.fuse.chunkfs" "$good" "$mnt" -n -o rw,dev,suid -t fuse.chunkfs || cfs_fail "mount.fuse.chunkfs"
cfs_is_mounted "$mnt" || cfs_fail "mount.fuse.chunkfs did not mount"
fusermount3 -u "$mnt"
wait_released "$good"
# unknown options: refused, unless mount(8) says sloppy (-s)
cfs_expect_fail_with "unknown option" 1 "$bin/mount.chunkfs" "$good" "$mnt" -o rw,frobnicate
"$bin/mount.chunkfs" "$good" "$mnt" -s -o rw,frobnicate || cfs_fail "sloppy"
fusermount3 -u "$mnt"
wait_released "$good"

# fstab type fuse.chunkfs: mount(8) -> mount.fuse3 -> sh -c 'chunkfs SOURCE DIR -o ...'.
# mount(8) runs helpers with its own PATH, so without an installed chunkfs we
# call mount.fuse3 the way mount(8) does; with one, mount(8) itself.
if command -v mount.fuse3 >/dev/null; then
	if [ "$(command -v chunkfs)" = "$chunkfs" ]; then
		mount -t fuse.chunkfs "$good" "$mnt" -o noatime,allow_other
	else
		PATH=$bin:$PATH mount.fuse3 "$good" "$mnt" -t fuse.chunkfs -o rw,noatime,allow_other
	fi || cfs_fail "mount -t fuse.chunkfs"
	line=$(awk -v d="$mnt" '$2 == d' /proc/self/mounts)
	cfs_log "mount -t fuse.chunkfs: $line"
	[ "$(awk '{print $1, $3}' <<<"$line")" = "$good fuse.chunkfs" ] ||
		cfs_fail "/proc/mounts: $line"
	grep -q allow_other <<<"$line" || cfs_fail "allow_other not applied: $line"
	[ "$(cat "$mnt/file")" = persisted ] || cfs_fail "data through mount -t"
	umount "$mnt"
	wait_released "$good"
fi

# ---- RAM mount through the same paths --------------------------------------------------
"$bin/mount.chunkfs" none "$mnt" -o ram,size=16M,dio_align=4096 || cfs_fail "RAM mount via helper"
grep -q "^none $mnt fuse.chunkfs" /proc/self/mounts || cfs_fail "RAM mount in /proc/mounts"
fusermount3 -u "$mnt"
cfs_log "ok"
