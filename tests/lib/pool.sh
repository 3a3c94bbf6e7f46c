# tests/lib/pool.sh — sourced by tests/integration/pool_*.sh after common.sh:
# the programs, and reading a pool's xattrs (fs/POOLS.md). $mnt is the
# pool's mount.
#
#   $mk $fsck $cm          mkchunkfs, fsck.chunkfs, chunkfs
#   where CHUNK            the store(s) of a chunk's units (user.chunkfs.store)
#   progress CHUNK         its move (user.chunkfs.move)
#   stores                 the root's user.chunkfs.stores
#   field_of STORE FIELD   a field of STORE's line in it ("state", "left", ...)
#   has_store STORE        STORE has a line in it
#   add_killed SRCS SOURCE LABEL  mount SRCS with the daemon set to die between
#                          the new store's superblocks and store 0's table,
#                          ask for the add of SOURCE, clear the dead mount

mk=$CFS_BIN/mkchunkfs
fsck=$CFS_BIN/fsck.chunkfs
cm=$CFS_BIN/chunkfs

where() { getfattr --absolute-names --only-values -n user.chunkfs.store "$1"; }
progress() { getfattr --absolute-names --only-values -n user.chunkfs.move "$1"; }
stores() { getfattr --absolute-names --only-values -n user.chunkfs.stores "$mnt"; }
field_of() {
	stores | awk -v s="$1" -v f="$2" '$1 == s { for (i = 2; i <= NF; i++) if (index($i, f "=") == 1) { sub(f "=", "", $i); print $i } }'
}
has_store() { stores | awk -v s="$1" '$1 == s { found = 1 } END { exit !found }'; }
add_killed() {
	export CHUNKFS_TEST_KILL=store-add-written
	cfs_mount "$1" "$mnt"
	unset CHUNKFS_TEST_KILL
	cfs_expect_exit 1 "$cm" store add "$mnt" "$2" -L "$3"
	cfs_crash "$mnt"
	cfs_clear_mount "$mnt"
}
