#!/usr/bin/env bash
# bench/pgbench.sh — pgbench on chunkfs against the same on ext4, on the
# same device, in the same run (target: chunkfs >= 0.8x ext4 tps).
#
# Two image files of the same size in one directory of the disk (default
# /var/tmp), each on a loop device (--direct-io=on): one formatted ext4 and
# mounted, one formatted with mkchunkfs and mounted by chunkfs (allow_other).
# Two PostgreSQL 15 clusters (data checksums, the same postgresql.conf), one
# per filesystem, only one running at a time:
#   -m tablespace (default): the cluster (and its WAL) on local disk, the
#      pgbench database's tablespace on the filesystem: the DBA's layout,
#      pg_tblspc/OID -> the mount;
#   -m pgdata: the whole data directory, WAL included, on the filesystem
#      (keep -S at 4G or more with DBPAIR_MKCHUNKFS_OPTS=--no-pieces: a
#      fresh cluster has ~1000 files, and without pieces each one with data
#      takes a chunkfs allocation unit, 1 MiB by default).
# pgbench -i (the bulk load: timed, with the database's disk use after it,
# du) I times per cluster, then N repetitions; each runs pgbench -n
# (tpcb-like) for T seconds on both, in alternating order (ext4 first in
# odd repetitions), each run from a freshly started server after a
# checkpoint. Prints the median tps of each, the ratio of the medians and
# the median of the per-repetition ratios; writes one CSV line per run, and
# the long CSV of the database benchmarks (bench/dbpair.sh) with -L.
#
# usage: bench/pgbench.sh [-n reps] [-T seconds] [-s scale] [-c clients]
#                         [-j threads] [-S image-size] [-m tablespace|pgdata]
#                         [-d dir] [-o out.csv] [-L long.csv] [-I inits] [-F]
#                         [-O chunkfs-opts]
#   -n  repetitions (default 3)          -T  seconds per pgbench run (default 60)
#   -s  pgbench scale (default 20)       -c  clients (default 4), -j threads (2)
#   -S  size of each image (default 4G)  -d  directory of the images (/var/tmp)
#   -o  CSV (default bench/results/pgbench-<time>/pgbench-<time>.csv: the run's
#       folder, for its notes.md)
#   -L  also the long CSV (bench/dbpair.sh): tps, latency, init_s, db_du
#   -I  pgbench -i repetitions per cluster, alternated (default 3)
#   -F  afterwards, one diagnostic run on chunkfs with -d (every FUSE request
#       logged): FUSE requests per transaction, by opcode
#   -O  extra -o options for chunkfs
# Needs root, PostgreSQL 15 (PG_BIN, default /usr/lib/postgresql/15/bin),
# mkfs.ext4; make first.
set -euo pipefail

reps=3
secs=60
scale=20
clients=4
threads=2
size=4G
mode=tablespace
dir=/var/tmp
out=
fuse_diag=0
cfs_opts=
long=
inits=3
root=$(cd "$(dirname "$0")/.." && pwd)

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }

while getopts "n:T:s:c:j:S:m:d:o:L:I:FO:h" opt; do
	case $opt in
	n) reps=$OPTARG ;;
	T) secs=$OPTARG ;;
	s) scale=$OPTARG ;;
	c) clients=$OPTARG ;;
	j) threads=$OPTARG ;;
	S) size=$OPTARG ;;
	m) mode=$OPTARG ;;
	d) dir=$OPTARG ;;
	o) out=$OPTARG ;;
	L) long=$OPTARG ;;
	I) inits=$OPTARG ;;
	F) fuse_diag=1 ;;
	O) cfs_opts=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
for v in reps secs scale clients threads inits; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "pgbench.sh: -$v: not a positive number: ${!v}" >&2; exit 2; }
done
case $mode in tablespace | pgdata) ;; *) echo "pgbench.sh: -m: tablespace or pgdata, not $mode" >&2; exit 2 ;; esac

export CFS_TEST_TMPDIR=$dir
. "$root/tests/lib/common.sh"
. "$root/tests/lib/pg.sh"
. "$root/bench/dbpair.sh"
cfs_require_fuse
pg_require
cfs_require_cmd mkfs.ext4 losetup
[ -x "$CFS_BIN/chunkfs" ] && [ -x "$CFS_BIN/mkchunkfs" ] || { echo "pgbench.sh: make first" >&2; exit 2; }
# Copies: a rebuild in the tree during the run does not change what is measured.
mkdir -p "$CFS_WORK/bin"
cp "$CFS_BIN/chunkfs" "$CFS_BIN/mkchunkfs" "$CFS_WORK/bin/"
CFS_BIN=$CFS_WORK/bin

stamp=$(date -u +%Y%m%d-%H%M%S)
[ -n "$out" ] || out=$root/bench/results/pgbench-$stamp/pgbench-$stamp.csv
mkdir -p "$(dirname "$out")"
rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)

# The filesystems: two images, two loop devices, the same size.
dbpair_mounts "$size" "$cfs_opts"
cfs_dev=${DBPAIR_DEV[chunkfs]}
declare -A fsdir=([ext4]=${DBPAIR_DIR[ext4]} [chunkfs]=${DBPAIR_DIR[chunkfs]})
declare -A port=([ext4]=5501 [chunkfs]=5502)

# track_io_timing: where a backend's time goes (blk_read_time, blk_write_time).
conf=("shared_buffers = 128MB" "max_wal_size = 1GB" "checkpoint_timeout = 5min"
	"log_checkpoints = on" "track_io_timing = on")
for fs in ext4 chunkfs; do
	install -d -o "$PG_USER" -g "$PG_USER" -m 700 "${fsdir[$fs]}/pg"
	if [ "$mode" = pgdata ]; then
		PG_PORT=${port[$fs]} pg_init "${fsdir[$fs]}/pg/data" "${conf[@]}"
	else
		PG_PORT=${port[$fs]} pg_init "$CFS_WORK/data-$fs" "${conf[@]}"
	fi
	pg_start
	if [ "$mode" = pgdata ]; then
		pg_sql "CREATE DATABASE bench"
	else
		pg_sql "CREATE TABLESPACE bench LOCATION '${fsdir[$fs]}/pg'"
		pg_sql "CREATE DATABASE bench TABLESPACE bench"
	fi
	pg_stop
done

# pgbench -i, alternated: the bulk load's time and the database's disk use
[ -z "$long" ] || dbpair_csv_header "$long"
datadir() { if [ "$mode" = pgdata ]; then echo "${fsdir[$1]}/pg/data"; else echo "$CFS_WORK/data-$1"; fi; }
# the bench database's files: the tablespace, or base/OID of the data directory
dbfiles() {
	if [ "$mode" = pgdata ]; then
		echo "$(datadir "$1")/base/$(pg_sql "SELECT oid FROM pg_database WHERE datname = 'bench'")"
	else
		echo "${fsdir[$1]}/pg"
	fi
}
for ((r = 1; r <= inits; r++)); do
	o=1
	for fs in $(dbpair_order $r); do
		pg_use "$(datadir "$fs")" "${port[$fs]}"
		pg_start
		t0=$(date +%s%N)
		pg_as "$PG_BIN/pgbench" -i -q -s "$scale" bench >"$CFS_WORK/init-$fs.log" 2>&1 ||
			{ cat "$CFS_WORK/init-$fs.log" >&2; cfs_fail "pgbench -i on $fs"; }
		pg_sql "CHECKPOINT"
		ms=$((($(date +%s%N) - t0) / 1000000))
		du=$(dbpair_du "$(dbfiles "$fs")")
		echo "# $fs: pgbench -i -s $scale in $ms ms with its checkpoint" \
			"($(pg_sql -d bench "SELECT pg_size_pretty(pg_database_size('bench'))"), du $((du >> 20)) MiB):" \
			"$(sed -n 's/^done in //p' "$CFS_WORK/init-$fs.log")"
		pg_stop
		if [ -n "$long" ]; then
			dbpair_row "$long" pgbench init_s s $r $o "$fs" "$(awk -v m="$ms" 'BEGIN { printf "%.3f", m / 1000 }')"
			dbpair_row "$long" pgbench db_du bytes $r $o "$fs" "$du"
		fi
		o=2
	done
done

# The backends' I/O during a run, summed over the database and the server:
# blocks read from the kernel and their time, blocks written by backends
# (evicting dirty buffers) and their time, by the checkpointer and bgwriter.
io_counters() {
	pg_sql "SELECT d.blks_read, d.blks_hit, round(d.blk_read_time), round(d.blk_write_time),
		b.buffers_backend, b.buffers_checkpoint + b.buffers_clean
		FROM pg_stat_database d, pg_stat_bgwriter b WHERE d.datname = 'bench'" | tr '|' ' '
}
echo "rev,mode,rep,order,fs,scale,clients,threads,seconds,tps,latency_ms,transactions,blks_read,blks_hit,blk_read_time_ms,blk_write_time_ms,buffers_backend,buffers_ckpt_bgwriter" >"$out"
run() { # fs rep order
	local fs=$1 log=$CFS_WORK/run-$1-$2.log tps lat n io0 io1 io= i
	pg_use "$(datadir "$fs")" "${port[$fs]}"
	pg_start
	pg_sql "CHECKPOINT"
	read -ra io0 <<<"$(io_counters)"
	pg_as "$PG_BIN/pgbench" -n -c "$clients" -j "$threads" -T "$secs" bench >"$log" 2>&1 ||
		{ cat "$log" >&2; cfs_fail "pgbench on $fs"; }
	sleep 0.6 # the backends' statistics are flushed when they exit
	read -ra io1 <<<"$(io_counters)"
	for i in 0 1 2 3 4 5; do io+=,$((io1[i] - io0[i])); done
	pg_stop
	tps=$(sed -nE 's/^tps = ([0-9.]+) .*/\1/p' "$log")
	lat=$(sed -nE 's/^latency average = ([0-9.]+) ms/\1/p' "$log")
	n=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$log")
	[ -n "$tps" ] || { cat "$log" >&2; cfs_fail "no tps in pgbench's output"; }
	echo "$rev,$mode,$2,$3,$fs,$scale,$clients,$threads,$secs,$tps,$lat,$n$io" >>"$out"
	if [ -n "$long" ]; then
		dbpair_row "$long" pgbench tps tps "$2" "$3" "$fs" "$tps"
		dbpair_row "$long" pgbench latency_ms ms "$2" "$3" "$fs" "$lat"
	fi
	printf '# rep %d: %-7s %10.1f tps  %7.2f ms  (reads %d in %d ms, backend writes %d in %d ms)\n' \
		"$2" "$fs" "$tps" "$lat" "$((io1[0] - io0[0]))" "$((io1[2] - io0[2]))" \
		"$((io1[4] - io0[4]))" "$((io1[3] - io0[3]))"
}
for ((r = 1; r <= reps; r++)); do
	if ((r % 2)); then order=(ext4 chunkfs); else order=(chunkfs ext4); fi
	run "${order[0]}" $r 1
	run "${order[1]}" $r 2
done

python3 - "$out" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
tps = {fs: [float(r["tps"]) for r in rows if r["fs"] == fs] for fs in ("ext4", "chunkfs")}
lat = {fs: [float(r["latency_ms"]) for r in rows if r["fs"] == fs] for fs in ("ext4", "chunkfs")}
reps = sorted({r["rep"] for r in rows})
paired = [float(next(r["tps"] for r in rows if r["rep"] == k and r["fs"] == "chunkfs")) /
          float(next(r["tps"] for r in rows if r["rep"] == k and r["fs"] == "ext4")) for k in reps]
m = {fs: statistics.median(v) for fs, v in tps.items()}
r0 = rows[0]
print(f"pgbench -n -c {r0['clients']} -j {r0['threads']} -T {r0['seconds']}, scale {r0['scale']}, "
      f"mode {r0['mode']}, {len(reps)} repetitions")
for fs in ("ext4", "chunkfs"):
    print(f"  {fs:8s} median {m[fs]:9.1f} tps  (runs: {' '.join(f'{x:.1f}' for x in tps[fs])})"
          f"  latency median {statistics.median(lat[fs]):.2f} ms")
    per = lambda k: statistics.median(float(r[k]) / float(r["transactions"]) for r in rows if r["fs"] == fs)
    print(f"  {'':8s} per transaction (medians): {per('blks_read'):.2f} blocks read in "
          f"{per('blk_read_time_ms'):.3f} ms, {per('buffers_backend'):.3f} backend writes in "
          f"{per('blk_write_time_ms'):.3f} ms")
ratio = m["chunkfs"] / m["ext4"]
print(f"  ratio chunkfs/ext4: {ratio:.2f}x (of medians), {statistics.median(paired):.2f}x "
      f"(median of paired: {' '.join(f'{x:.2f}' for x in paired)}); target 0.80x: "
      f"{'met' if ratio >= 0.8 else 'NOT met'}")
EOF
echo "# CSV: $out"
[ -z "$long" ] || { dbpair_summary "$long"; echo "# long CSV: $long"; }

if [ "$fuse_diag" = 1 ]; then
	# The same load once more, on chunkfs with every FUSE request logged:
	# what the kernel asks the daemon per transaction (not a timing run).
	cfs_umount "${fsdir[chunkfs]}" || true
	cfs_mount "$cfs_dev" "${fsdir[chunkfs]}" "allow_other,debug${cfs_opts:+,$cfs_opts}"
	pg_use "$(datadir chunkfs)" "${port[chunkfs]}"
	pg_start
	pg_sql "CHECKPOINT"
	dlog=$CFS_WORK/chunkfs-chunkfs.log
	from=$(wc -l <"$dlog")
	pg_as "$PG_BIN/pgbench" -n -c "$clients" -j "$threads" -T 20 bench >"$CFS_WORK/diag.log" 2>&1
	to=$(wc -l <"$dlog")
	pg_stop
	n=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$CFS_WORK/diag.log")
	echo "# FUSE requests during a 20 s run with -d ($n transactions; -d slows the daemon):"
	sed -n "$((from + 1)),${to}p" "$dlog" | sed -nE 's/.*opcode: ([A-Z_]+) .*/\1/p' | sort | uniq -c |
		sort -rn | awk -v n="$n" '{ printf "#   %-12s %8d  %6.2f per transaction\n", $2, $1, $1 / n }'
fi
