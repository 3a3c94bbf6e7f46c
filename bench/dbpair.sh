# bench/dbpair.sh — what the database benchmarks (bench/pgbench.sh,
# bench/mariadb.sh, bench/smallappend.sh, bench/sqlite.sh, bench/rocksdb.sh)
# share: chunkfs and ext4 side by side on the same disk, runs alternated, one
# CSV line per measurement. Sourced after tests/lib/common.sh (its cleanup
# stack undoes everything however the script ends).
#
#   dbpair_mounts SIZE [CHUNKFS_OPTS]
#       two image files of SIZE in the work dir, each on a loop device
#       (--direct-io=on); one formatted ext4 and mounted at DBPAIR_DIR[ext4],
#       one formatted by mkchunkfs and mounted by chunkfs (allow_other, plus
#       CHUNKFS_OPTS) at DBPAIR_DIR[chunkfs]; DBPAIR_DEV[fs] their devices
#   dbpair_order REP       "ext4 chunkfs" for odd repetitions, the reverse
#                          for even ones: drift on a shared machine lands on both
#   dbpair_csv_header FILE the header of the long CSV (below)
#   dbpair_row FILE CASE METRIC UNIT REP ORDER FS VALUE
#                          one measurement
#   dbpair_du DIR          bytes allocated under DIR (du: st_blocks)
#   dbpair_summary FILE    medians per filesystem and the chunkfs/ext4 ratios
#                          (bench/dbsummary.py)
#
# The long CSV: rev,case,metric,unit,rep,order,fs,value. bench/dbsummary.py
# and bench/plot-report.py read it; whether higher or lower is better
# follows from the unit.

declare -A DBPAIR_DIR=() DBPAIR_DEV=()

dbpair_mounts() {
	local size=$1 opts=${2:-}
	cfs_require_cmd mkfs.ext4 losetup
	truncate -s "$size" "$CFS_WORK/ext4.img" "$CFS_WORK/chunkfs.img"
	cfs_loop_attach "$CFS_WORK/ext4.img"
	DBPAIR_DEV[ext4]=$CFS_LOOP_DEV
	cfs_loop_attach "$CFS_WORK/chunkfs.img"
	DBPAIR_DEV[chunkfs]=$CFS_LOOP_DEV
	mkfs.ext4 -q -F "${DBPAIR_DEV[ext4]}"
	"$CFS_BIN/mkchunkfs" -q "${DBPAIR_DEV[chunkfs]}" >/dev/null || cfs_fail "mkchunkfs ${DBPAIR_DEV[chunkfs]}"
	DBPAIR_DIR[ext4]=$CFS_WORK/ext4
	DBPAIR_DIR[chunkfs]=$CFS_WORK/chunkfs
	mkdir -p "${DBPAIR_DIR[ext4]}"
	mount "${DBPAIR_DEV[ext4]}" "${DBPAIR_DIR[ext4]}"
	cfs_defer "umount '${DBPAIR_DIR[ext4]}'"
	chmod 755 "$CFS_WORK"
	cfs_mount "${DBPAIR_DEV[chunkfs]}" "${DBPAIR_DIR[chunkfs]}" "allow_other${opts:+,$opts}"
}

dbpair_order() { if (($1 % 2)); then echo ext4 chunkfs; else echo chunkfs ext4; fi; }

dbpair_csv_header() { echo "rev,case,metric,unit,rep,order,fs,value" >"$1"; }

dbpair_row() {
	local f=$1
	shift
	local IFS=,
	echo "${DBPAIR_REV:=$(git -C "$CFS_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)},$*" >>"$f"
}

dbpair_du() { du -s --block-size=1 "$1" | cut -f1; }

dbpair_summary() { python3 "$CFS_ROOT/bench/dbsummary.py" "$@"; }
