#!/usr/bin/env bash
# stats_xattr.sh — the xattr side of the statistics: the size-probe protocol
# (probe length, exact read, ERANGE one byte short) for every listed name and
# the composite line, on a chunk and on the root, and for listxattr;
# EOPNOTSUPP on writing or removing read-only names; the page size (invalid
# values, default, removexattr) and plain user.* xattrs persisted across a
# remount, with counters starting again; reset by the owner or root and
# EPERM for anyone else (allow_other, as nobody); what lists the names and
# what does not (subdirectories, symlinks without following); -o hide_stats;
# cp -a copies the listed names out, and what happens when they come back.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_require_cmd python3 getfattr setfattr setpriv

as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
chmod 755 "$CFS_WORK"
cfs_mkfs "$img" 64M
cfs_mount "$img" "$mnt" allow_other
c=$mnt/chunk
dd if=/dev/urandom of="$c" bs=4k count=64 oflag=direct status=none
dd if="$c" of=/dev/null bs=4k iflag=direct status=none
ln -s "$c" "$CFS_WORK/link"

cfs_log "size-probe protocol"
names=$(stats_util names "$c" | grep '^user\.chunkfs\.')
[ "$(wc -l <<<"$names")" -eq 17 ] || cfs_fail "a chunk lists $(wc -l <<<"$names") names"
# shellcheck disable=SC2086
stats_util protocol "$CFS_WORK/link" $names user.chunkfs.stat user.chunkfs.read_hist \
	user.chunkfs.read_lat_p999_us >"$CFS_WORK/proto" || cfs_fail "protocol on a chunk"
grep -q '^user.chunkfs.stat [0-9]\{4\}$' "$CFS_WORK/proto" || cfs_fail "stat line length: $(cat "$CFS_WORK/proto")"
rnames=$(stats_util names "$mnt" | grep '^user\.chunkfs\.')
[ "$(wc -l <<<"$rnames")" -eq 18 ] || cfs_fail "the root lists $(wc -l <<<"$rnames") names"
# shellcheck disable=SC2086
stats_util protocol "$mnt" $rnames user.chunkfs.stat user.chunkfs.write_hist >/dev/null ||
	cfs_fail "protocol on the root"

cfs_log "unknown and read-only names"
for n in reads stat read_hist nonsense opens reset_time; do
	stats_util errno set "$c" user.chunkfs.$n 5 EOPNOTSUPP
	stats_util errno remove "$c" user.chunkfs.$n - EOPNOTSUPP
done
for n in source backend free_bytes pagesize; do
	stats_util errno set "$mnt" user.chunkfs.$n 4096 EOPNOTSUPP
done
stats_util errno get "$c" user.chunkfs.nonsense - ENODATA
stats_util errno get "$c" user.chunkfs.reset - ENODATA # write-only
stats_util errno get "$c" user.chunkfs.source - ENODATA # the root's
stats_util errno get "$mnt" user.chunkfs.pagesize - ENODATA
stats_util errno set "$c" user.chunkfs.reset 2 EINVAL
stats_util errno set "$c" user.chunkfs.reset yes EINVAL

cfs_log "page size"
cfs_expect "$c" pagesize 4096 # the default
for bad in 0x800 1000 256 2097152 -1 "" 99999999999999999999999; do
	stats_util errno set "$c" user.chunkfs.pagesize "$bad" EINVAL
done
setfattr -n user.chunkfs.pagesize -v 16384 "$CFS_WORK/link"
cfs_expect "$c" pagesize 16384
cfs_expect "$c" page_reads 16 # 64 x 4 KiB read
setfattr -x user.chunkfs.pagesize "$c"
cfs_expect "$c" pagesize 4096
cfs_expect "$c" page_reads 64
stats_util errno set "$c" user.chunkfs.pagesize $'2048\n' ok # as `echo` would give it
cfs_expect "$c" pagesize 2048
setfattr -n user.dba.note -v "rootdbs, do not move" "$c"
setfattr -n user.dir.note -v "chunks" "$mnt"
cfs_expect "$c" reads 65
getfattr -d "$c" 2>/dev/null | grep -qx 'user.dba.note="rootdbs, do not move"' ||
	cfs_fail "user xattr not listed next to the statistics"

cfs_log "remount: page size and user xattrs persist, counters start again"
cfs_umount "$mnt" || cfs_fail "unmount"
before=$(date +%s)
cfs_mount "$img" "$mnt" allow_other
cfs_expect "$c" pagesize 2048
[ "$(getfattr --only-values -n user.dba.note "$c")" = "rootdbs, do not move" ] ||
	cfs_fail "user.dba.note lost"
[ "$(getfattr --only-values -n user.dir.note "$mnt")" = chunks ] || cfs_fail "user.dir.note lost"
cfs_expect "$c" reads 0
cfs_expect "$c" writes 0
rt=$(cfs_stat "$c" reset_time)
[ "${rt%.*}" -ge $((before - 1)) ] || cfs_fail "reset_time $rt is before the mount ($before)"
[ "$rt" = "$(cfs_stat "$mnt" mount_time)" ] || cfs_fail "a fresh chunk counts since the mount"

cfs_log "reset: owner or root; EPERM for others"
dd if="$c" of=/dev/null bs=4k count=8 iflag=direct status=none
chmod 666 "$c" # nobody may write it, and so reach the daemon with a setxattr
as_nobody setfattr -n user.chunkfs.reset -v 1 "$c" 2>"$CFS_WORK/err" &&
	cfs_fail "nobody reset root's chunk"
grep -q 'Operation not permitted' "$CFS_WORK/err" || cfs_fail "not EPERM: $(cat "$CFS_WORK/err")"
cfs_expect "$c" reads 8
as_nobody setfattr -n user.chunkfs.reset -v 1 "$mnt" 2>/dev/null &&
	cfs_fail "nobody reset the mount totals"
chmod 644 "$c" # without write permission the kernel refuses first (EACCES)
as_nobody setfattr -n user.chunkfs.reset -v 1 "$c" 2>"$CFS_WORK/err" && cfs_fail "reset on 0644"
grep -q 'Permission denied' "$CFS_WORK/err" || cfs_fail "not EACCES: $(cat "$CFS_WORK/err")"
# but reading needs only read permission
[ "$(as_nobody getfattr --only-values -n user.chunkfs.reads "$c")" = 8 ] ||
	cfs_fail "nobody cannot read the statistics of a 0644 chunk"
chown 65534 "$c"
as_nobody setfattr -n user.chunkfs.reset -v 1 "$c" || cfs_fail "the owner cannot reset"
cfs_expect "$c" reads 0
chown 0 "$c"
dd if="$c" of=/dev/null bs=4k count=3 iflag=direct status=none
setfattr -n user.chunkfs.reset -v 1 "$CFS_WORK/link" # root, through the symlink
cfs_expect "$c" reads 0
cfs_expect_range "$mnt" reads 11 11
setfattr -n user.chunkfs.reset -v 1 "$mnt"
cfs_expect "$mnt" reads 0

cfs_log "who carries statistics"
mkdir "$mnt/sub"
mknod "$mnt/fifo" p
ln -s chunk "$mnt/sym"
[ -z "$(stats_util names "$mnt/sub")" ] || cfs_fail "a subdirectory lists statistics"
[ -z "$(getfattr -h -d "$mnt/sym" 2>/dev/null)" ] || cfs_fail "a symlink itself (-h) has statistics"
getfattr -d "$mnt/sym" 2>/dev/null | grep -q 'user.chunkfs.reads' || cfs_fail "through the symlink"
[ -z "$(stats_util names "$mnt/fifo")" ] || cfs_fail "a fifo lists statistics"
stats_util errno get "$mnt/fifo" user.chunkfs.reads - ENODATA
stats_util errno set "$mnt/sub" user.chunkfs.reset 1 EOPNOTSUPP

cfs_log "cp -a copies the listed names out (and they do not come back)"
out=$CFS_WORK/copy
mkdir "$out"
cp -a "$c" "$out/chunk"
if getfattr -d "$out/chunk" 2>/dev/null | grep -q '^user.chunkfs.reads='; then
	cfs_log "the copy on $(stat -f -c %T "$out") carries a snapshot of the statistics"
	# back on chunkfs cp -a keeps going (it does not report xattrs it cannot
	# set); the page size travels, the counters are the new chunk's own
	cp -a "$out/chunk" "$mnt/back" || cfs_fail "cp -a back into chunkfs failed"
	cfs_expect "$mnt/back" pagesize 2048
	cfs_expect "$mnt/back" reads 0
	cfs_expect "$mnt/back" reset_time "$(cfs_stat "$mnt" mount_time)"
	[ "$(getfattr --only-values -n user.chunkfs.reset_time "$out/chunk")" != \
		"$(cfs_stat "$mnt/back" reset_time)" ] || cfs_fail "the snapshot came back"
	[ "$(getfattr --only-values -n user.dba.note "$mnt/back")" = "rootdbs, do not move" ] ||
		cfs_fail "cp -a lost user.dba.note"
	# an explicit --preserve=xattr reports them
	cp --preserve=xattr "$out/chunk" "$mnt/back2" 2>"$CFS_WORK/err" &&
		cfs_fail "cp --preserve=xattr of read-only names succeeded"
	grep -q 'Operation not supported' "$CFS_WORK/err" || cfs_fail "cp said: $(cat "$CFS_WORK/err")"
else
	cfs_log "no user xattrs on $(stat -f -c %T "$out"): cp -a part skipped"
fi
cfs_umount "$mnt" || cfs_fail "unmount"

cfs_log "-o hide_stats: nothing listed, everything readable by name"
cfs_mount "$img" "$mnt" hide_stats
[ "$(stats_util names "$c")" = user.dba.note ] || cfs_fail "hide_stats lists: $(stats_util names "$c")"
[ "$(stats_util names "$mnt")" = user.dir.note ] || cfs_fail "hide_stats lists on the root"
cfs_expect "$c" pagesize 2048
cfs_expect "$mnt" backend uring
rm -rf "$out" && mkdir "$out"
cp -a "$c" "$out/chunk"
getfattr -d "$out/chunk" 2>/dev/null | grep -q user.chunkfs && cfs_fail "hide_stats: cp -a copied statistics"
cp --preserve=xattr "$c" "$mnt/copy" || cfs_fail "hide_stats: cp --preserve=xattr within chunkfs"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"
