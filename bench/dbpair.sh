# bench/dbpair.sh — what the database benchmarks (bench/pgbench.sh,
# bench/mariadb.sh, bench/smallappend.sh, bench/sqlite.sh, bench/rocksdb.sh)
# share: their options, chunkfs and ext4 side by side on the same disk, runs
# alternated, one CSV line per measurement. Sourced before
# tests/lib/common.sh (dbpair_options says where the work dir goes); all
# but dbpair_options run after it (its cleanup stack undoes everything
# however the script ends).
#
#   dbpair_options SCRIPT SPEC ARGS...
#       the options every one takes: -n reps, -S size (of each image), -d dir
#       (of the images; default /var/tmp), -o out (the CSV), -O cfs_opts
#       (more chunkfs options), -h (the script's opening comment); and its
#       own, SPEC being words "L:VAR" (-L sets VAR to a positive number) and
#       "L=VAR" (-L sets VAR to 1). The script sets reps, size and its own
#       variables to their defaults first; reps and the numbers must be
#       positive whole numbers.
#   dbpair_start NAME [PROGRAM...]
#       copies chunkfs, mkchunkfs and the PROGRAMs (paths under CFS_BIN) to
#       the work dir, so a rebuild in the tree during the run does not change
#       what is measured; out defaults to
#       bench/results/NAME-<time>/NAME-<time>.csv; then dbpair_mounts with
#       size and cfs_opts, and the CSV's header
#   dbpair_mounts SIZE [CHUNKFS_OPTS]
#       two image files of SIZE in the work dir, each on a loop device
#       (--direct-io=on); one formatted ext4 and mounted at DBPAIR_DIR[ext4],
#       one formatted by mkchunkfs and mounted by chunkfs (allow_other, plus
#       CHUNKFS_OPTS) at DBPAIR_DIR[chunkfs]; DBPAIR_DEV[fs] their devices.
#       DBPAIR_MKCHUNKFS_OPTS (environment): more mkchunkfs options, e.g.
#       --no-pieces for the space a store without pieces takes;
#       DBPAIR_CHUNKFS_IMAGE=1 (environment): chunkfs's store is its image
#       file itself, no loop device (ext4 needs one to mount an image)
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

dbpair_usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }

dbpair_options() {
	local script=$1 spec=$2 letters="n:S:d:o:O:h" word opt var numbers=(reps)
	local -A number=() flag=()
	shift 2
	for word in $spec; do
		case $word in
		?:*) number[${word:0:1}]=${word:2} letters+="${word:0:1}:" numbers+=("${word:2}") ;;
		?=*) flag[${word:0:1}]=${word:2} letters+=${word:0:1} ;;
		esac
	done
	dir=${dir:-/var/tmp} out=${out:-} cfs_opts=${cfs_opts:-}
	local OPTIND=1
	while getopts "$letters" opt; do
		case $opt in
		n) reps=$OPTARG ;;
		S) size=$OPTARG ;;
		d) dir=$OPTARG ;;
		o) out=$OPTARG ;;
		O) cfs_opts=$OPTARG ;;
		h) dbpair_usage; exit 0 ;;
		\?) dbpair_usage >&2; exit 2 ;;
		*) if [ -n "${number[$opt]:-}" ]; then printf -v "${number[$opt]}" %s "$OPTARG"; else printf -v "${flag[$opt]}" 1; fi ;;
		esac
	done
	for var in "${numbers[@]}"; do
		[[ ${!var} =~ ^[1-9][0-9]*$ ]] || { echo "$script: $var: not a positive number: ${!var}" >&2; exit 2; }
	done
}

dbpair_start() {
	local name=$1 p stamp
	shift
	for p in chunkfs mkchunkfs "$@"; do
		[ -x "$CFS_BIN/$p" ] || { echo "$name.sh: make bench-build first ($CFS_BIN/$p)" >&2; exit 2; }
	done
	mkdir -p "$CFS_WORK/bin"
	for p in chunkfs mkchunkfs "$@"; do
		cp "$CFS_BIN/$p" "$CFS_WORK/bin/"
	done
	CFS_BIN=$CFS_WORK/bin
	stamp=$(date -u +%Y%m%d-%H%M%S)
	[ -n "$out" ] || out=$CFS_ROOT/bench/results/$name-$stamp/$name-$stamp.csv
	mkdir -p "$(dirname "$out")"
	dbpair_mounts "$size" "$cfs_opts"
	dbpair_csv_header "$out"
}

dbpair_mounts() {
	local size=$1 opts=${2:-}
	cfs_require_cmd mkfs.ext4 losetup
	truncate -s "$size" "$CFS_WORK/ext4.img" "$CFS_WORK/chunkfs.img"
	cfs_loop_attach "$CFS_WORK/ext4.img"
	DBPAIR_DEV[ext4]=$CFS_LOOP_DEV
	if [ "${DBPAIR_CHUNKFS_IMAGE:-0}" = 1 ]; then
		DBPAIR_DEV[chunkfs]=$CFS_WORK/chunkfs.img
	else
		cfs_loop_attach "$CFS_WORK/chunkfs.img"
		DBPAIR_DEV[chunkfs]=$CFS_LOOP_DEV
	fi
	mkfs.ext4 -q -F "${DBPAIR_DEV[ext4]}"
	# shellcheck disable=SC2086 # words of options
	"$CFS_BIN/mkchunkfs" -q ${DBPAIR_MKCHUNKFS_OPTS:-} "${DBPAIR_DEV[chunkfs]}" >/dev/null || cfs_fail "mkchunkfs ${DBPAIR_DEV[chunkfs]}"
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
