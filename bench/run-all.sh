#!/usr/bin/env bash
# bench/run-all.sh — every benchmark in one run, with a report:
#   raw        the data-path matrix (bench/perf.sh): fio io_uring O_DIRECT on
#              the raw store (image file, loop device), ext4 files, tmpfs,
#              chunkfs on the image, on the loop device and in RAM
#   checkpoint Informix temp-table checkpoints (bench/ram-vs-tmpfs.sh -c
#              checkpoint): ext4 buffered and O_DIRECT, chunkfs image, loop,
#              RAM, tmpfs
#   fschoice   an Informix import (bench/import_load.c) on ext2, ext4 and
#              xfs on one loop device, buffered and O_DIRECT, and chunkfs on
#              the same loop device
#   openclose  128 threads opening and closing sets of 4 files,
#              1..128 sets (bench/openclose.c); chunkfs, ext4, tmpfs, and
#              a do-nothing FUSE filesystem with and without OPEN (fuse_null.c)
#   meta       10,000 chunk files: create, stat, mount time, remove
#              (bench/meta_bench.c); chunkfs, and ext4/tmpfs for comparison
#   stats      statistics overhead (bench/stats-overhead.sh)
#   pgbench    PostgreSQL 15 pgbench, tablespace on chunkfs vs on ext4
#              (bench/pgbench.sh): tps, latency, pgbench -i time, disk use
#   mariadb    MariaDB 10.11 sysbench oltp_read_write, datadir on chunkfs vs
#              on ext4 (bench/mariadb.sh): tps, p95, prepare time, disk use
#   smallappend 200-byte and 4 KiB buffered appends, 200-byte overwrites in
#              place: us per write (bench/smallappend.sh)
#   sqlite     SQLite, 4 writers and 2 readers, WAL and rollback journal:
#              rows/s and SQLITE_BUSY (bench/sqlite.sh)
#   rocksdb    RocksDB db_bench fillrandom, overwrite, readrandom
#              (bench/rocksdb.sh)
#   scale      large stores (bench/scale.sh): stores of 1, 10 and 100 TB
#              (sparse images on a tmpfs) filled with 1 GiB to 1 TiB chunks,
#              fallocated and partly written: daemon memory, chunk allocation,
#              unmount, snapshot size, fsck, mount, 4 KiB random reads in the
#              largest chunk against the 1 GiB one
#   poolmove   a chunk moved between the two stores of a pool
#              (bench/pool-move.sh): move throughput against dd, a
#              foreground fio load during moves, the daemon's memory while a
#              sparse chunk moves
#   rbd        Ceph RBD (bench/rbd.sh): chunkfs on an RBD store vs fio's rbd
#              engine in one throw-away cluster, 4 KiB QD32/QD1, 1 MiB; the
#              takeover time after kill -9 of the holder (skipped, with a line
#              in the report, when Ceph is not installed)
#   (the database cases run each database on a chunkfs store and on ext4 on
#   images of the same size on the same disk, alternated; each is skipped,
#   with a line in the report, when its database is not installed)
# then bench/plot-report.py writes report.md and the PNG charts.
#
# usage: bench/run-all.sh [-c case,case...] [-o dir] [-d dir] [-N] [-n]
#   -c  only these cases (names above)
#   -o  result directory (default bench/results/run-<time>[-quick])
#   -d  directory on a disk filesystem for images and scratch files
#       (default /var/tmp); everything goes in one cfs-bench.* directory
#   -N  do not build (make bench-build) first
#   -n  print the plan (cases and their parameters) and exit
# Environment: QUICK=1 for a short run (< 8 minutes, 1 repetition, small
# sizes), else the full run (< 45 minutes on 2 vCPUs). BUILD (default
# release).
# Needs root (mounts, loop devices), fio, python3, gnuplot, mkfs.ext2/ext4/xfs.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
BENCH_NAME=run-all
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"

only=
resdir=
dir=/var/tmp
build=1
plan=0
BUILD=${BUILD:-release}
line=
QUICK=${QUICK:-0}

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }
while getopts "c:o:d:Nnh" opt; do
	case $opt in
	c) only=$OPTARG ;;
	o) resdir=$OPTARG ;;
	d) dir=$OPTARG ;;
	N) build=0 ;;
	n) plan=1 ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

# ---- parameters: the full run and the quick one ------------------------------
if [ "$QUICK" = 1 ]; then
	raw_args=(-n 1 -r 1 -s 128M)
	ckpt_reps=1 ckpt_rounds=5
	fs_reps=1 fs_chunks=2 fs_mb=32
	oc_reps=1 oc_iters=40
	meta_reps=1 meta_files=10000
	stats_args=(-n 2 -r 2)
	pg_args=(-n 1 -T 15 -s 5 -S 2G -I 1)
	my_args=(-n 1 -T 15 -r 20000 -S 2G)
	sa_args=(-n 2 -w 5000)
	sq_args=(-n 1 -r 5000)
	rk_args=(-n 1 -k 30000 -S 2G)
	scale_args=(-s 1T,10T -n 1 -r 2)
	pm_args=(-n 1 -s 512M -r 5 -S 10G -W 256M)
	rbd_args=(-n 1 -r 3 -s 512M -w 256M -t 2)
else
	raw_args=(-n 3 -r 3 -s 512M)
	ckpt_reps=2 ckpt_rounds=20
	fs_reps=2 fs_chunks=4 fs_mb=64
	oc_reps=3 oc_iters=200
	meta_reps=3 meta_files=10000
	stats_args=(-n 6 -r 8)
	pg_args=(-n 5 -T 30 -I 3)
	my_args=(-n 3 -T 60)
	sa_args=(-n 5)
	sq_args=(-n 3)
	rk_args=(-n 3)
	scale_args=(-s 1T,10T,100T -n 3 -r 5)
	pm_args=(-n 5 -s 2G -r 10)
	rbd_args=(-n 5 -r 10 -t 7)
fi
raw_cases=rr4k-qd1,rw4k-qd1,rr4k-qd32,rw4k-qd32,rw2k-qd32,sr1m-qd8,sw1m-qd8
raw_targets=raw-file,raw-loop,ext4,tmpfs,cfs-img,cfs-loop,cfs-ram
all_cases="raw checkpoint fschoice openclose meta stats pgbench mariadb smallappend sqlite rocksdb scale poolmove rbd"
want() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }
for c in ${only//,/ }; do
	[[ " $all_cases " == *" $c "* ]] || bench_die "unknown case '$c' (one of: $all_cases)"
done

if [ "$plan" = 1 ]; then
	echo "QUICK=$QUICK"
	want raw && echo "raw: bench/perf.sh ${raw_args[*]} -c $raw_cases -t $raw_targets"
	want checkpoint && echo "checkpoint: bench/ram-vs-tmpfs.sh -n $ckpt_reps -R $ckpt_rounds -c checkpoint -t ram,tmpfs,img,loop"
	want fschoice && echo "fschoice: $fs_reps x import_load -n $fs_chunks -m $fs_mb on ext2 ext4 xfs chunkfs, buffered and direct"
	want openclose && echo "openclose: $oc_reps x openclose -t 128 -i $oc_iters -f 1..128 on chunkfs ext4 tmpfs fuse-null fuse-noopen"
	want meta && echo "meta: $meta_reps x $meta_files files on chunkfs ext4 tmpfs"
	want stats && echo "stats: bench/stats-overhead.sh ${stats_args[*]}"
	want pgbench && echo "pgbench: bench/pgbench.sh ${pg_args[*]}"
	want mariadb && echo "mariadb: bench/mariadb.sh ${my_args[*]}"
	want smallappend && echo "smallappend: bench/smallappend.sh ${sa_args[*]}"
	want sqlite && echo "sqlite: bench/sqlite.sh ${sq_args[*]}"
	want rocksdb && echo "rocksdb: bench/rocksdb.sh ${rk_args[*]}"
	want scale && echo "scale: bench/scale.sh ${scale_args[*]}"
	want poolmove && echo "poolmove: bench/pool-move.sh ${pm_args[*]}"
	want rbd && echo "rbd: bench/rbd.sh ${rbd_args[*]}"
	exit 0
fi

[ "$(id -u)" = 0 ] || bench_die "needs root (mounts, loop devices)"
for t in fio python3 gnuplot mkfs.ext2 mkfs.ext4 mkfs.xfs perf; do
	command -v "$t" >/dev/null || bench_die "needs $t"
done

stamp=$(date -u +%Y%m%d-%H%M%S)
if [ -z "$resdir" ]; then
	resdir=$root/bench/results/run-$stamp
	[ "$QUICK" = 1 ] && resdir=$resdir-quick
fi
mkdir -p "$resdir"
resdir=$(cd "$resdir" && pwd)
work=$(mktemp -d "$dir/cfs-bench.XXXXXX")
bench_defer "rm -rf '$work'"
mkdir -p "$work/tmp"
export TMPDIR=$work/tmp	# the child scripts' mounts live here too
trap bench_cleanup EXIT
trap 'bench_log "interrupted: cleaning up"; exit 130' INT TERM

if [ "$build" = 1 ]; then
	make -C "$root" -s -j"$(nproc)" BUILD="$BUILD" bench-build
fi
# copies: a rebuild in the tree during the run does not change what is measured
bin=$work/bin
mkdir -p "$bin"
for b in chunkfs mkchunkfs fsck.chunkfs bench/import_load bench/openclose bench/meta_bench bench/fuse_null; do
	cp "$root/build/$BUILD/$b" "$bin/" || bench_die "build/$BUILD/$b missing (make bench-build)"
done

bench_sysinfo "$root" "$dir" >"$resdir/system.txt"
echo "quick: $QUICK" >>"$resdir/system.txt"
# every mount under the scratch directory, sampled: the report lists their options
(while :; do grep -F " $work/" /proc/self/mounts || :; sleep 2; done >"$work/mounts.raw" 2>/dev/null) &
mounts_sampled="kill $! 2>/dev/null; sort -u '$work/mounts.raw' >'$resdir/mounts.txt' 2>/dev/null"
bench_defer "$mounts_sampled"
echo "case,seconds" >"$resdir/timings.csv"

runl() { # command...: run it (bench_run), its output in $line
	bench_run "$@" >"$work/line"
	line=$(<"$work/line")
}

timed() { # case function: run it, note how long it took
	local t0=$SECONDS
	bench_log "== $1"
	"$2"
	echo "$1,$((SECONDS - t0))" >>"$resdir/timings.csv"
	bench_log "== $1 done in $((SECONDS - t0)) s"
}

# ---- 1. raw matrix ----------------------------------------------------------------
case_raw() {
	mkdir -p "$resdir/raw"
	CFS_BIN=$bin bench_run "$root/bench/perf.sh" "${raw_args[@]}" -d "$work" -R "$resdir/raw" \
		-c "$raw_cases" -t "$raw_targets" >"$resdir/raw.txt" 2>"$resdir/raw.log"
}

# ---- 2. temp-table checkpoints ---------------------------------------------------------
case_checkpoint() {
	bench_run "$root/bench/ram-vs-tmpfs.sh" -n "$ckpt_reps" -R "$ckpt_rounds" -c checkpoint -t ram,tmpfs,img,loop \
		-d "$work" -o "$resdir/checkpoint.csv" >"$resdir/checkpoint.txt" 2>"$resdir/checkpoint.log"
}

# ---- 3. filesystem choice: an Informix import -----------------------------------------------
case_fschoice() {
	local img=$work/fschoice.img loop m=$work/fschoice-mnt rep t fs mode dflag pid=
	local bytes=$(((fs_chunks * fs_mb * 3 / 2 + 256) << 20))
	dd if=/dev/zero of="$img" bs=1M count=$((bytes >> 20)) oflag=direct status=none
	bench_loop_attach "$img"
	loop=$BENCH_LOOP
	mkdir -p "$m"
	echo "target,fs,mode,rep,chunks,MB,seconds,MBps" >"$resdir/fschoice.csv"
	local targets=(ext4-buffered ext4-direct ext2-buffered ext2-direct xfs-buffered xfs-direct
		chunkfs-direct chunkfs-buffered)
	for rep in $(seq "$fs_reps"); do
		for t in $(bench_rotate "$rep" "${targets[@]}"); do
			fs=${t%-*} mode=${t#*-}
			dflag=
			[ "$mode" = direct ] && dflag=-d
			# no discard: it would punch the image sparse again
			case $fs in
			ext2) mkfs.ext2 -F -q -E nodiscard "$loop" ;;
			ext4) mkfs.ext4 -F -q -E nodiscard "$loop" ;;
			xfs) mkfs.xfs -f -q -K "$loop" ;;
			chunkfs) "$bin/mkchunkfs" -q -f -K "$loop" >/dev/null ;;
			esac
			if [ "$fs" = chunkfs ]; then
				bench_cfs_mount "$bin/chunkfs" "$loop" "$m"
				pid=$BENCH_PID
			else
				mount "$loop" "$m"
				bench_defer "bench_umount '$m'"
				pid=
			fi
			mkdir "$m/dbs"
			runl "$bin/import_load" $dflag -n "$fs_chunks" -m "$fs_mb" "$m/dbs"
			bench_undo "bench_umount '$m'${pid:+ $pid}"
			IFS=, read -r _ _ _ _ _ _ _ secs mbps <<<"$line"
			echo "$t,$fs,$mode,$rep,$fs_chunks,$fs_mb,$secs,$mbps" >>"$resdir/fschoice.csv"
			bench_log "  fschoice rep $rep $t: $secs s"
		done
	done
	bench_undo "losetup -d $loop 2>/dev/null"
	rm -f "$img"
}

# ---- 4. open/close scaling --------------------------------------------------------------------
# fuse-null / fuse-noopen: the floor under any FUSE filesystem (bench/fuse_null.c
# answers OPEN and RELEASE and does nothing; with -n the kernel's no_open mode).
case_openclose() {
	local img=$work/oc.img rep t f secs pid null_pid noopen_pid
	declare -A d=([chunkfs]=$work/oc-cfs [ext4]=$work/oc-ext4 [tmpfs]=$work/oc-tmpfs
		[fuse-null]=$work/oc-null [fuse-noopen]=$work/oc-noopen)
	"$bin/mkchunkfs" -q -s 2G "$img" >/dev/null
	bench_cfs_mount "$bin/chunkfs" "$img" "${d[chunkfs]}"
	pid=$BENCH_PID
	mkdir -p "${d[ext4]}"
	bench_tmpfs_mount "${d[tmpfs]}" 256M
	bench_fuse_null_mount "$bin/fuse_null" "${d[fuse-null]}"
	null_pid=$BENCH_PID
	bench_fuse_null_mount "$bin/fuse_null" "${d[fuse-noopen]}" -n
	noopen_pid=$BENCH_PID
	for t in chunkfs ext4 tmpfs; do "$bin/openclose" -c -f 128 "${d[$t]}"; done
	echo "target,threads,files,iterations,set,rep,seconds" >"$resdir/openclose.csv"
	for rep in $(seq "$oc_reps"); do
		for f in 1 2 4 8 16 32 64 128; do
			for t in $(bench_rotate "$rep" chunkfs ext4 tmpfs fuse-null fuse-noopen); do
				runl "$bin/openclose" -d -t 128 -f "$f" -i "$oc_iters" "${d[$t]}"
				secs=${line##*,}
				echo "$t,128,$f,$oc_iters,4,$rep,$secs" >>"$resdir/openclose.csv"
				bench_log "  openclose rep $rep $t files $f: $secs s"
			done
		done
	done
	# where the daemon's time goes in the worst case
	perf record -q -g -p "$pid" -o "$work/oc.perf" -- sleep 4 >/dev/null 2>&1 &
	local perf_pid=$!
	sleep 0.5
	bench_run "$bin/openclose" -d -t 128 -f 128 -i $((oc_iters * 2)) "${d[chunkfs]}" >/dev/null || true
	wait "$perf_pid" 2>/dev/null || true
	perf report -i "$work/oc.perf" --stdio --no-children -g none --sort dso,sym --percent-limit 1.5 \
		2>/dev/null | grep -v '^$' | grep -E '^ +[0-9]' >"$resdir/openclose-perf.txt" || true
	perf report -i "$work/oc.perf" --stdio --no-children -g none --sort dso --percent-limit 0.5 \
		2>/dev/null | grep -E '^ +[0-9]' >"$resdir/openclose-perf-dso.txt" || true
	bench_undo "bench_umount '${d[fuse-noopen]}' $noopen_pid"
	bench_undo "bench_umount '${d[fuse-null]}' $null_pid"
	bench_undo "bench_umount '${d[chunkfs]}' $pid"
	bench_undo "bench_umount '${d[tmpfs]}'"
	rm -rf "${d[ext4]}" "$img"
}

# ---- 5. metadata: 10,000 chunk files ---------------------------------------------------------
case_meta() {
	local img=$work/meta.img m=$work/meta-cfs rep t op pid secs dd
	echo "target,op,files,rep,seconds" >"$resdir/meta.csv"
	mkdir -p "$m" "$work/meta-ext4"
	bench_tmpfs_mount "$work/meta-tmpfs" 2G
	for rep in $(seq "$meta_reps"); do
		# 1 MiB each (one allocation unit): 10 GiB, sparse
		"$bin/mkchunkfs" -q -f -s $(((meta_files + 2048) << 20)) -m 64M --sparse "$img" >/dev/null
		runl "$bin/meta_bench" mount "$m" . -- "$bin/chunkfs" -f "$img" "$m" 2>>"$work/meta.log"
		pid=${line##*,}
		bench_defer "bench_umount '$m' $pid"
		secs=$(cut -d, -f3 <<<"$line")
		echo "chunkfs,mount-empty,0,$rep,$secs" >>"$resdir/meta.csv"
		for t in chunkfs ext4 tmpfs; do
			dd=$m
			[ "$t" = ext4 ] && dd=$work/meta-ext4
			[ "$t" = tmpfs ] && dd=$work/meta-tmpfs
			for op in create stat; do
				runl "$bin/meta_bench" "$op" -s 65536 "$meta_files" "$dd"
				echo "$t,$op,$meta_files,$rep,$(cut -d, -f3 <<<"$line")" >>"$resdir/meta.csv"
			done
			[ "$t" = chunkfs ] && continue
			runl "$bin/meta_bench" remove "$meta_files" "$dd"
			echo "$t,remove,$meta_files,$rep,$(cut -d, -f3 <<<"$line")" >>"$resdir/meta.csv"
		done
		# unmount (final snapshot) and mount the store holding the files
		bench_undo "bench_umount '$m' $pid"
		runl "$bin/meta_bench" mount "$m" "c$(printf %05d $((meta_files - 1)))" -- \
			"$bin/chunkfs" -f "$img" "$m" 2>>"$work/meta.log"
		pid=${line##*,}
		bench_defer "bench_umount '$m' $pid"
		secs=$(cut -d, -f3 <<<"$line")
		echo "chunkfs,mount,$meta_files,$rep,$secs" >>"$resdir/meta.csv"
		runl "$bin/meta_bench" stat "$meta_files" "$m"
		echo "chunkfs,stat-after-mount,$meta_files,$rep,$(cut -d, -f3 <<<"$line")" >>"$resdir/meta.csv"
		runl "$bin/meta_bench" remove "$meta_files" "$m"
		echo "chunkfs,remove,$meta_files,$rep,$(cut -d, -f3 <<<"$line")" >>"$resdir/meta.csv"
		bench_undo "bench_umount '$m' $pid"
		bench_log "  meta rep $rep: $(grep ",$rep," "$resdir/meta.csv" | cut -d, -f1,2,5 | tr '\n' ' ')"
	done
	bench_undo "bench_umount '$work/meta-tmpfs'"
	rm -rf "$img" "$work/meta-ext4"
}

# ---- 6. statistics overhead ------------------------------------------------------------------
case_stats() {
	BUILD=$BUILD bench_run "$root/bench/stats-overhead.sh" "${stats_args[@]}" -d "$work" \
		-o "$resdir/stats-overhead.csv" >"$resdir/stats.txt" 2>"$resdir/stats.log"
}

# ---- 7. PostgreSQL ---------------------------------------------------------------------------
case_pgbench() {
	local pg_bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
	if [ ! -x "$pg_bin/pgbench" ]; then
		echo "skipped: PostgreSQL 15 is not installed ($pg_bin/pgbench)" >"$resdir/pgbench.txt"
		return 0
	fi
	chmod o+x "$work" # the postgres user walks through it to its clusters
	bench_run "$root/bench/pgbench.sh" "${pg_args[@]}" -d "$work" -o "$resdir/pgbench.csv" \
		-L "$resdir/pgbench-db.csv" >"$resdir/pgbench.txt" 2>"$resdir/pgbench.log"
}

# ---- 8-11. the other databases (bench/dbpair.sh: the long CSV <case>.csv) -------------------
# db_case NAME ARGS...: bench/NAME.sh; when it skips (exit 77: its database
# is not installed), its reason stays in NAME.txt and the report says so.
db_case() {
	local name=$1 rc=0
	shift
	chmod o+x "$work" # the database servers' users walk through it
	bench_run "$root/bench/$name.sh" "$@" -d "$work" -o "$resdir/$name.csv" \
		>"$resdir/$name.txt" 2>"$resdir/$name.log" || rc=$?
	[ $rc = 77 ] && sed -i 's/^skip: /skipped: /' "$resdir/$name.txt" && return 0
	return $rc
}
case_mariadb() { db_case mariadb "${my_args[@]}"; }
case_smallappend() { db_case smallappend "${sa_args[@]}"; }
case_sqlite() { db_case sqlite "${sq_args[@]}"; }
case_rocksdb() { db_case rocksdb "${rk_args[@]}"; }

# ---- large stores ------------------------------------------------------------------------------
case_scale() {
	CFS_BIN=$bin bench_run "$root/bench/scale.sh" "${scale_args[@]}" -d "$work" \
		-o "$resdir/scale.csv" >"$resdir/scale.txt" 2>"$resdir/scale.log"
}

# ---- moving a chunk between the stores of a pool ---------------------------------------------------
case_poolmove() {
	CFS_BIN=$bin bench_run "$root/bench/pool-move.sh" "${pm_args[@]}" -d "$work" -o "$resdir/poolmove" \
		>"$resdir/poolmove.txt" 2>"$resdir/poolmove.log"
}

# ---- Ceph RBD ------------------------------------------------------------------------------
# Skipped (exit 77), with its reason in rbd.txt, when Ceph is not installed.
case_rbd() {
	local rc=0
	CFS_BIN=$bin bench_run "$root/bench/rbd.sh" "${rbd_args[@]}" -d "$work" -o "$resdir/rbd" \
		>"$resdir/rbd.txt" 2>"$resdir/rbd.log" || rc=$?
	[ $rc = 77 ] && sed -i 's/^skip: /skipped: /' "$resdir/rbd.txt" && rm -rf "$resdir/rbd" && return 0
	return $rc
}

for c in $all_cases; do
	want "$c" && timed "$c" "case_$c"
done

bench_undo "$mounts_sampled" # mounts.txt, before the report that lists it
python3 "$root/bench/plot-report.py" "$resdir"
bench_log "report: $resdir/report.md"
