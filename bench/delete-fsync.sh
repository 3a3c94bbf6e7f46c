#!/usr/bin/env bash
# bench/delete-fsync.sh — what deleting a big chunk does to the fsyncs of
# another file on the same store: a database commits (512-byte write +
# fdatasync of a log file, every 5 ms) while a chunk of -s bytes written in
# full is deleted. On an image-file store the deleted chunk's units are
# discarded as hole punches in the image (fs/DAEMON.md "Busy units"); the
# committer does them, between the commits it answers. Measured per run: the
# fdatasync latencies of the whole run (p50, p99, max), how long the rm took,
# and how long until the image had given back 90% of the chunk's bytes to
# the host. Each repetition mounts a fresh store; with -B another build
# (e.g. one made from main before a change) takes a turn in every
# repetition, rotated, and the summary compares the medians.
#
# usage: bench/delete-fsync.sh [-n reps] [-s size] [-t seconds] [-B dir] [-d dir] [-o dir]
#   -n  repetitions (default 5)       -s  the deleted chunk (default 2G)
#   -t  seconds of fdatasyncs per run (default 8; the rm comes after 2)
#   -B  another build's programs (a directory with chunkfs and mkchunkfs): "B"
#   -d  directory on a disk filesystem (default /var/tmp)
#   -o  result directory (default bench/results/delete-fsync-<time>)
# Environment: BUILD (default release), CFS_BIN (default build/$BUILD).
# Needs root, fio, python3; make first. Take
# flock /run/lock/chunkfs-bench.lock around it.
set -euo pipefail

reps=5
size=2G
secs=8
other_bin=
dir=/var/tmp
resdir=
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-release}
BENCH_NAME=delete-fsync
. "$root/bench/lib.sh"

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }
while getopts "n:s:t:B:d:o:h" opt; do
	case $opt in
	n) reps=$OPTARG ;;
	s) size=$OPTARG ;;
	t) secs=$OPTARG ;;
	B) other_bin=$OPTARG ;;
	d) dir=$OPTARG ;;
	o) resdir=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || bench_die "needs root (FUSE mounts)"
for t in fio python3; do command -v $t >/dev/null || bench_die "needs $t"; done
bin=${CFS_BIN:-$root/build/$BUILD}
[ -x "$bin/chunkfs" ] && [ -x "$bin/mkchunkfs" ] || bench_die "make first (no $bin/chunkfs)"
if [ -n "$other_bin" ]; then
	[ -x "$other_bin/chunkfs" ] && [ -x "$other_bin/mkchunkfs" ] ||
		bench_die "no chunkfs and mkchunkfs in $other_bin"
fi
bytes=$(numfmt --from=iec "$size")
[ "$secs" -ge 4 ] || bench_die "-t: at least 4 seconds"

stamp=$(date -u +%Y%m%d-%H%M%S)
[ -n "$resdir" ] || resdir=$root/bench/results/delete-fsync-$stamp
mkdir -p "$resdir"
resdir=$(cd "$resdir" && pwd)
work=$(mktemp -d "$dir/cfs-delete-fsync.XXXXXX")
trap 'bench_cleanup; rm -rf "$work"' EXIT
trap 'exit 143' TERM INT
# Copies: a rebuild in the tree during the run does not change what is measured.
mkdir "$work/A" "$work/B"
cp "$bin/chunkfs" "$bin/mkchunkfs" "$work/A/"
builds=(A)
if [ -n "$other_bin" ]; then
	cp "$other_bin/chunkfs" "$other_bin/mkchunkfs" "$work/B/"
	builds+=(B)
fi
bench_sysinfo "$root" "$dir" >"$resdir/system.txt"
{
	echo "command: $0 $*"
	echo "A: $bin ($(md5sum <"$bin/chunkfs" | cut -c1-12))"
	[ -z "$other_bin" ] || echo "B: $other_bin ($(md5sum <"$other_bin/chunkfs" | cut -c1-12))"
} >>"$resdir/system.txt"

mnt=$work/mnt
img=$work/store.img
allocated() { echo $(($(stat -c '%b' "$img") * 512)); }
elapsed() { awk "BEGIN { printf \"%d\", $(date +%s.%N) - $1 }"; } # whole seconds since $1
csv=$resdir/delete-fsync.csv
echo "rep,build,syncs,p50_ms,p99_ms,max_ms,rm_s,space_back_s" >"$csv"

one_run() { # build rep
	local b=$1 r=$2 pid full t0 back line
	rm -f "$img"
	"$work/$b/mkchunkfs" -q -s $((bytes + 1024 * 1048576)) --sparse "$img" >/dev/null
	bench_cfs_mount "$work/$b/chunkfs" "$img" "$mnt"
	pid=$BENCH_PID
	fio --name=fill --filename="$mnt/big" --size="$bytes" --rw=write --bs=1M --direct=1 \
		--ioengine=io_uring --iodepth=8 --output=/dev/null || bench_die "fill"
	sync
	full=$(allocated)
	python3 - "$mnt/log" "$secs" >"$work/lat.txt" <<-'PY' &
	import os, sys, time
	fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
	lat, end = [], time.time() + float(sys.argv[2])
	while time.time() < end:
	    os.pwrite(fd, b"x" * 512, 0)
	    t = time.perf_counter()
	    os.fdatasync(fd)
	    lat.append(time.perf_counter() - t)
	    time.sleep(0.005)
	lat.sort()
	print("%d,%.2f,%.2f,%.2f" % (len(lat), lat[len(lat) // 2] * 1e3,
	      lat[int(len(lat) * 0.99)] * 1e3, lat[-1] * 1e3))
	PY
	local lp=$!
	sleep 2
	t0=$(date +%s.%N)
	rm "$mnt/big"
	local rm_s
	rm_s=$(awk "BEGIN { printf \"%.3f\", $(date +%s.%N) - $t0 }")
	back=nan # not back within 120 s
	while [ "$(elapsed "$t0")" -lt 120 ]; do
		if [ $((full - $(allocated))) -ge $((bytes * 9 / 10)) ]; then
			back=$(awk "BEGIN { printf \"%.2f\", $(date +%s.%N) - $t0 }")
			break
		fi
		sleep 0.05
	done
	wait $lp || bench_die "the fdatasync loop failed"
	line="$r,$b,$(cat "$work/lat.txt"),$rm_s,$back"
	echo "$line" >>"$csv"
	bench_log "rep $r $b: syncs,p50,p99,max(ms),rm(s),space back(s): ${line#*,*,}"
	bench_undo "bench_umount '$mnt' $pid"
}

for ((r = 1; r <= reps; r++)); do
	for b in $(bench_rotate $((r - 1)) "${builds[@]}"); do
		one_run "$b" "$r"
	done
done

python3 - "$csv" <<'PY' | tee "$resdir/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = lambda b, f: statistics.median(float(r[f]) for r in rows if r["build"] == b)
print("medians of %d repetitions" % len({r["rep"] for r in rows}))
print("%-6s %8s %8s %9s %8s %13s" % ("build", "p50 ms", "p99 ms", "max ms", "rm s", "space back s"))
for b in sorted({r["build"] for r in rows}):
    print("%-6s %8.2f %8.2f %9.1f %8.3f %13.2f" % (b, med(b, "p50_ms"), med(b, "p99_ms"),
          med(b, "max_ms"), med(b, "rm_s"), med(b, "space_back_s")))
PY
echo "# results: $resdir"
