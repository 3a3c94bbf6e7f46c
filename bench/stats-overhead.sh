#!/usr/bin/env bash
# bench/stats-overhead.sh — what the per-chunk statistics cost (goal: at
# most 3% of IOPS at 4 KiB QD32): the same chunkfs built twice, normally and
# with counting compiled out (make CFS_NO_STATS=1), each mounted in turn on
# the same image file and driven by fio: 4 KiB random reads, QD32, io_uring,
# O_DIRECT, one job, over a 1 GiB chunk written in full first (a read of
# never-written sectors would be answered from memory).
# Each repetition mounts both builds, in alternating order (stats first on
# odd repetitions, nostats first on even ones), so drift on a shared machine
# lands on both; the summary gives each build's median and the difference.
# Besides IOPS it records the daemon's CPU time per request (user + system,
# from /proc/PID/stat around the fio run): on a shared machine IOPS swing
# with the neighbours' load, CPU per request much less, and on two CPUs the
# daemon's CPU is what limits IOPS.
#
# usage: bench/stats-overhead.sh [-n reps] [-r seconds] [-d dir] [-o out.csv]
#                                [-b bs] [-q depth] [-w rw] [-N]
#   -n  repetitions (default 5)
#   -r  seconds per fio run (default 20)
#   -d  directory on a disk filesystem for the image (default /var/tmp)
#   -o  CSV output (default bench/results/stats-overhead-<time>/stats-overhead-<time>.csv:
#       the run's folder, for its notes.md)
#   -b  block size (default 4k); -q queue depth (default 32);
#   -w  fio rw (default randread)
#   -N  do not (re)build; use build/$BUILD and build/$BUILD-nostats as they are
# Environment: BUILD (default release).
# Needs root (FUSE), fio and python3.
set -euo pipefail

reps=5
runtime=20
dir=/var/tmp
out=
bs=4k
qd=32
rw=randread
build=1
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-release}

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }

while getopts "n:r:d:o:b:q:w:Nh" opt; do
	case $opt in
	n) reps=$OPTARG ;;
	r) runtime=$OPTARG ;;
	d) dir=$OPTARG ;;
	o) out=$OPTARG ;;
	b) bs=$OPTARG ;;
	q) qd=$OPTARG ;;
	w) rw=$OPTARG ;;
	N) build=0 ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

[ "$(id -u)" -eq 0 ] || { echo "stats-overhead: needs root (FUSE mounts)" >&2; exit 2; }
command -v fio >/dev/null || { echo "stats-overhead: needs fio" >&2; exit 2; }
command -v python3 >/dev/null || { echo "stats-overhead: needs python3" >&2; exit 2; }

if [ $build -eq 1 ]; then
	make -C "$root" -s BUILD="$BUILD" all
	make -C "$root" -s BUILD="$BUILD" CFS_NO_STATS=1 all
fi
declare -A bin=([stats]=$root/build/$BUILD/chunkfs [nostats]=$root/build/$BUILD-nostats/chunkfs)
for v in stats nostats; do
	[ -x "${bin[$v]}" ] || { echo "stats-overhead: no ${bin[$v]}" >&2; exit 2; }
done

stamp=$(date +%Y%m%d-%H%M%S)
[ -n "$out" ] || out=$root/bench/results/stats-overhead-$stamp/stats-overhead-$stamp.csv
mkdir -p "$(dirname "$out")"
work=$(mktemp -d "$dir/cfs-stats-overhead.XXXXXX")
mnt=$work/mnt
img=$work/store.img
mkdir -p "$mnt"
pid=

unmount() {
	if awk -v d="$mnt" '$2 == d { f = 1 } END { exit !f }' /proc/self/mounts; then
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	fi
	# the daemon writes its checkpoint after the unmount returns
	if [ -n "$pid" ]; then
		for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		pid=
	fi
}
cleanup() {
	unmount
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' INT TERM

mount_build() {
	"${bin[$1]}" -f "$img" "$mnt" >>"$work/daemon-$1.log" 2>&1 &
	pid=$!
	for _ in $(seq 200); do
		awk -v d="$mnt" '$2 == d && $3 == "fuse.chunkfs" { f = 1 } END { exit !f }' \
			/proc/self/mounts && return 0
		kill -0 "$pid" 2>/dev/null || { cat "$work/daemon-$1.log" >&2; exit 1; }
		sleep 0.1
	done
	echo "stats-overhead: $1 did not mount" >&2
	exit 1
}

"$root/build/$BUILD/mkchunkfs" -q -s 2G --sparse "$img"
mount_build stats
dd if=/dev/urandom of="$mnt/chunk" bs=1M count=1024 oflag=direct status=none
unmount

# utime + stime of a process, in clock ticks
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

echo "rep,build,bs,qd,rw,runtime_s,iops,lat_mean_us,lat_p99_us,daemon_cpu_us_per_io,load1" >"$out"
run_one() { # build rep
	local v=$1 rep=$2 json t0 t1 load
	mount_build "$v"
	json=$work/fio-$v-$rep.json
	load=$(cut -d' ' -f1 /proc/loadavg)
	t0=$(cpu_ticks "$pid")
	fio --name=stats-overhead --filename="$mnt/chunk" --rw="$rw" --bs="$bs" \
		--iodepth="$qd" --ioengine=io_uring --direct=1 --numjobs=1 --size=1g \
		--norandommap --randrepeat=0 --time_based --runtime="$runtime" \
		--output-format=json --output="$json" >/dev/null
	t1=$(cpu_ticks "$pid")
	unmount
	python3 - "$json" "$v" "$rep" "$bs" "$qd" "$rw" "$runtime" "$((t1 - t0))" \
		"$(getconf CLK_TCK)" "$load" >>"$out" <<'EOF'
import json, sys
path, v, rep, bs, qd, rw, runtime, ticks, hz, load = sys.argv[1:]
job = json.load(open(path))["jobs"][0]
side = job["read"] if job["read"]["io_bytes"] else job["write"]
clat = side["clat_ns"]
p99 = clat.get("percentile", {}).get("99.000000", 0)
ios = side["total_ios"]
cpu_us = int(ticks) / int(hz) * 1e6 / ios if ios else 0
print(f"{rep},{v},{bs},{qd},{rw},{runtime},{side['iops']:.0f},{clat['mean']/1000:.1f},"
      f"{p99/1000:.1f},{cpu_us:.2f},{load}")
EOF
	tail -n 1 "$out"
}

for rep in $(seq "$reps"); do
	if [ $((rep % 2)) -eq 1 ]; then order="stats nostats"; else order="nostats stats"; fi
	for v in $order; do run_one "$v" "$rep"; done
done

python3 - "$out" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med, cpu = {}, {}
for v in ("nostats", "stats"):
    iops = [float(r["iops"]) for r in rows if r["build"] == v]
    lat = [float(r["lat_mean_us"]) for r in rows if r["build"] == v]
    cpus = [float(r["daemon_cpu_us_per_io"]) for r in rows if r["build"] == v]
    med[v], cpu[v] = statistics.median(iops), statistics.median(cpus)
    print(f"{v:8} median IOPS {med[v]:9.0f}  (runs: {', '.join(f'{x:.0f}' for x in iops)})")
    print(f"{'':8} median mean latency {statistics.median(lat):.1f} us, daemon CPU "
          f"{cpu[v]:.2f} us per request (runs: {', '.join(f'{x:.2f}' for x in cpus)})")
cost = (med["nostats"] - med["stats"]) / med["nostats"] * 100
print(f"statistics cost: {cost:+.2f}% of IOPS (target: at most 3%), "
      f"{cpu['stats'] - cpu['nostats']:+.2f} us of daemon CPU per request "
      f"({(cpu['stats'] - cpu['nostats']) / cpu['nostats'] * 100:+.1f}%)")
# paired: each repetition ran both builds back to back
pairs = {}
for r in rows:
    pairs.setdefault(r["rep"], {})[r["build"]] = float(r["iops"])
ratios = [p["stats"] / p["nostats"] for p in pairs.values() if len(p) == 2]
if ratios:
    # 95% bootstrap interval of the median ratio: how much the noise allows
    import random
    random.seed(1)
    boots = sorted(statistics.median(random.choices(ratios, k=len(ratios)))
                   for _ in range(2000))
    print(f"paired stats/nostats IOPS ratio: median {statistics.median(ratios):.3f}, "
          f"95% interval {boots[50]:.3f}..{boots[1949]:.3f} "
          f"(runs: {', '.join(f'{x:.3f}' for x in ratios)})")
EOF
echo "raw runs: $out"
