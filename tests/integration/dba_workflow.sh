#!/usr/bin/env bash
# dba_workflow.sh — the DBA's chunk workflow, as an Informix DBA
# would do it (doc/DBA-GUIDE.md, "Informix chunks, step by step", is the same commands):
#   chunk files of a fixed size (fallocate) on a store mount, owned by the
#   database's user and group with mode 660, linked from a chunk directory
#   with symlinks; a 2 KiB page size set through the symlink; the temp-table
#   checkpoint of an Informix temp dbspace (bench/temp_checkpoint: O_DIRECT,
#   2 KiB pages, 32 in flight, fdatasync per round) run as that user through
#   the symlink; the statistics read through the symlinks with getfattr and
#   `chunkfs stat` match the workload exactly (writes, bytes, pages,
#   fsyncs, no reads, no errors; the untouched chunk shows nothing); the
#   last round's pages read back through the symlink carry its stamp.
#   Then the seed's move for temp dbspaces: the chunk copied to a RAM mount
#   (-o ram) and its symlink switched there atomically; the same run counts
#   the same on the RAM chunk and nothing more on the old one.
# The database user: cfsdba (created, and removed at the end, if absent).
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_require_cmd fallocate getfattr setfattr runuser useradd userdel groupadd groupdel python3
ckpt=$CFS_BIN/bench/temp_checkpoint
[ -x "$ckpt" ] || cfs_skip "needs $ckpt (make bench-build)"

dba=cfsdba
if ! id -u $dba >/dev/null 2>&1; then
	getent group $dba >/dev/null || { groupadd --system $dba && cfs_defer "groupdel $dba"; }
	useradd --system -g $dba -M -d /nonexistent -s /usr/sbin/nologin $dba ||
		cfs_fail "useradd $dba"
	cfs_defer "userdel $dba"
fi
as_dba() { (cd / && runuser -u $dba -- "$@"); }

chmod 755 "$CFS_WORK"
img=$CFS_WORK/chunks.img
chunks=$CFS_WORK/srv/chunks           # the store mount (/srv/chunks)
temp=$CFS_WORK/srv/chunks-temp        # the RAM mount (/srv/chunks-temp)
linkdir=$CFS_WORK/opt/informix/chunks # the database's chunk directory
mkdir -p "$CFS_WORK/srv" "$linkdir"
chmod -R 755 "$CFS_WORK/srv" "$CFS_WORK/opt"
chown $dba:$dba "$linkdir"
cp "$ckpt" "$CFS_WORK/temp_checkpoint" # a copy the DBA's user can run
chmod 755 "$CFS_WORK/temp_checkpoint"
ckpt=$CFS_WORK/temp_checkpoint

cfs_mkfs "$img" 256M
cfs_mount "$img" "$chunks" allow_other
cfs_mount ram "$temp" ram,size=64M,allow_other

chunk_mb=16
rounds=3
mb=8 # the temp table per round, in 10^6 bytes as temp_checkpoint counts
pages=$((mb * 1000000 / 2048))

cfs_log "chunks of ${chunk_mb} MiB, $dba:$dba 660, symlinked from the chunk directory"
for c in rootdbs tempdbs1; do
	fallocate -l ${chunk_mb}M "$chunks/$c"
	chown $dba:$dba "$chunks/$c"
	chmod 660 "$chunks/$c"
	as_dba ln -s "$chunks/$c" "$linkdir/$c"
	[ "$(stat -L -c '%s %a %U:%G' "$linkdir/$c")" = "$((chunk_mb << 20)) 660 $dba:$dba" ] ||
		cfs_fail "$c: $(stat -L -c '%s %a %U:%G' "$linkdir/$c")"
	[ "$(stat -L -c %b "$linkdir/$c")" -ge $((chunk_mb << 11)) ] ||
		cfs_fail "$c: fallocate left $(stat -L -c %b "$linkdir/$c") blocks allocated"
	as_dba setfattr -n user.chunkfs.pagesize -v 2048 "$linkdir/$c"
done
# Others get nothing: mode 660.
(cd / && runuser -u nobody -- dd if="$linkdir/tempdbs1" of=/dev/null bs=2k count=1 status=none 2>/dev/null) &&
	cfs_fail "nobody read a 660 chunk"

# checkpoint LINK: the workload as the DBA's user, through the symlink;
# prints temp_checkpoint's CSV line.
checkpoint() {
	as_dba "$ckpt" -c -r $rounds -m $mb -p 2048 -q 32 "$1" ||
		cfs_fail "temp_checkpoint on $1"
}

# expect_workload LINK: its statistics are exactly one checkpoint() run.
expect_workload() {
	local l=$1
	cfs_expect "$l" writes $((rounds * pages))
	cfs_expect "$l" write_bytes $((rounds * pages * 2048))
	cfs_expect "$l" page_writes $((rounds * pages))
	cfs_expect "$l" fsyncs $rounds
	cfs_expect "$l" reads 0
	cfs_expect "$l" errors 0
	cfs_expect "$l" pagesize 2048
	cfs_expect_range "$l" inflight_max 1 32
	cfs_expect_range "$l" write_lat_avg_us 1 10000000
	# the same through the stat command, as the DBA's user, by the link
	as_dba "$CFS_BIN/chunkfs" stat --json "$l" >"$CFS_WORK/stat.json" ||
		cfs_fail "chunkfs stat --json $l"
	python3 - "$CFS_WORK/stat.json" "$l" $((rounds * pages)) $rounds <<-'EOF' || cfs_fail "chunkfs stat: $(cat "$CFS_WORK/stat.json")"
	import json, sys
	doc = json.loads(open(sys.argv[1]).read().splitlines()[0])
	t = [t for t in doc["targets"] if t["path"] == sys.argv[2]]
	assert len(t) == 1, "no row for %s" % sys.argv[2]
	c = t[0]["counters"]
	want = {"writes": int(sys.argv[3]), "fsyncs": int(sys.argv[4]), "reads": 0}
	for k, v in want.items():
	    assert int(c[k]) == v, "%s=%s, expected %d" % (k, c[k], v)
	assert t[0]["kind"] == "chunk"
	EOF
	as_dba "$CFS_BIN/chunkfs" stat "$l" >"$CFS_WORK/stat.txt" || cfs_fail "chunkfs stat $l"
	grep -q "^$l " "$CFS_WORK/stat.txt" || cfs_fail "chunkfs stat: no row for $l: $(cat "$CFS_WORK/stat.txt")"
	cat "$CFS_WORK/stat.txt"
}

# last_round_ok LINK: every page read back through the link holds its own
# number and the last round's stamp (temp_checkpoint.c, fill_page).
last_round_ok() {
	as_dba python3 - "$1" $pages $rounds <<-'EOF' || cfs_fail "$1: pages read back wrong"
	import struct, sys
	path, pages, rnd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
	with open(path, "rb") as f:
	    for i in range(pages):
	        f.seek(i * 2048)
	        idx, r = struct.unpack("<QQ", f.read(16))
	        assert (idx, r) == (i, rnd), "page %d: index %d round %d" % (i, idx, r)
	EOF
}

cfs_log "the checkpoint workload on the store chunk, through $linkdir/tempdbs1"
as_dba setfattr -n user.chunkfs.reset -v 1 "$linkdir/tempdbs1"
cfs_log "store: $(checkpoint "$linkdir/tempdbs1")"
getfattr -d "$linkdir/tempdbs1"
expect_workload "$linkdir/tempdbs1"
cfs_expect "$linkdir/rootdbs" writes 0
last_round_ok "$linkdir/tempdbs1"
store_writes=$(cfs_stat "$linkdir/tempdbs1" writes)

cfs_log "move tempdbs1 to the RAM mount: copy, switch the symlink atomically"
touch "$temp/tempdbs1"
chown $dba:$dba "$temp/tempdbs1"
chmod 660 "$temp/tempdbs1"
as_dba dd if="$chunks/tempdbs1" of="$temp/tempdbs1" bs=1M iflag=direct oflag=direct \
	conv=notrunc status=none
cmp "$chunks/tempdbs1" "$temp/tempdbs1" || cfs_fail "the copy on the RAM mount differs"
as_dba ln -s "$temp/tempdbs1" "$linkdir/.tempdbs1.new"
as_dba mv -T "$linkdir/.tempdbs1.new" "$linkdir/tempdbs1"
[ "$(readlink "$linkdir/tempdbs1")" = "$temp/tempdbs1" ] || cfs_fail "symlink not switched"
[ "$(getfattr --only-values -n user.chunkfs.backend "$temp")" = ram ] || cfs_fail "not a RAM mount"
as_dba setfattr -n user.chunkfs.pagesize -v 2048 "$linkdir/tempdbs1"
as_dba setfattr -n user.chunkfs.reset -v 1 "$linkdir/tempdbs1"

cfs_log "the same workload on the RAM chunk"
cfs_log "RAM: $(checkpoint "$linkdir/tempdbs1")"
expect_workload "$linkdir/tempdbs1"
last_round_ok "$linkdir/tempdbs1"
cfs_expect "$chunks/tempdbs1" writes "$store_writes" # the old chunk saw nothing more
cfs_expect "$linkdir/rootdbs" writes 0
"$CFS_BIN/chunkfs" stat "$chunks" "$temp" || cfs_fail "chunkfs stat of both mounts"

cfs_umount "$temp" || cfs_fail "unmount the RAM mount"
cfs_umount "$chunks" || cfs_fail "unmount the store"
cfs_log "ok"
