#!/usr/bin/env bash
# bench/seqread-anatomy.sh — where a 1 MiB sequential read QD8 through
# chunkfs spends the time that the raw store does not: fio on the raw image
# file and on chunkfs mounted on an image in the same directory, alternating,
# and for each run what the disk under that directory saw (/proc/diskstats):
# how much of the run it had requests (busy), how many on average (in
# flight), and how long each took (latency). With perf installed, one more
# chunkfs run is traced for half a second (block and syscall tracepoints):
# how many device completions arrive together (a burst: less than 50 us
# apart) and how long the daemon's /dev/fuse reply of 1 MiB takes (writev:
# the kernel copying the payload to the reader).
#
# usage: bench/seqread-anatomy.sh [-n reps] [-r seconds] [-s size] [-d dir]
#                                 [-o chunkfs-options]
#   -n  repetitions (default 5); -r runtime per fio run (default 5 s)
#   -s  file size read (default 1G); -d image directory (default /var/tmp)
#   -o  chunkfs -o options (default: none; transport=dev is the default)
# CFS_BIN=dir: chunkfs and mkchunkfs from there (default build/release).
# Needs root. Output: a table on stdout (medians), and the CSV and the table in
# bench/results/seqread-anatomy-<time>/ (the run's folder, for its notes.md).
set -euo pipefail

reps=5
runtime=5
size=1G
dir=/var/tmp
cfs_opts=
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
BENCH_NAME=seqread-anatomy
bin=${CFS_BIN:-$root/build/release}

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }
while getopts "n:r:s:d:o:h" opt; do
	case $opt in
	n) reps=$OPTARG ;;
	r) runtime=$OPTARG ;;
	s) size=$OPTARG ;;
	d) dir=$OPTARG ;;
	o) cfs_opts=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || bench_die "needs root (mounts)"
command -v fio >/dev/null || { echo "$BENCH_NAME: fio is not installed" >&2; exit 77; }
[ -x "$bin/chunkfs" ] && [ -x "$bin/mkchunkfs" ] || bench_die "build first (make)"
bytes=$(numfmt --from=iec "$size") || bench_die "bad -s $size"

trap bench_cleanup EXIT
trap 'exit 130' INT TERM
work=$(mktemp -d "${TMPDIR:-/tmp}/cfs-anatomy.XXXXXX")
bench_defer "rm -rf '$work'"
raw=$dir/cfs-anatomy-raw.img
store=$dir/cfs-anatomy-store.img
bench_defer "rm -f '$raw' '$store'"
disk=$(basename "$(df --output=source "$dir" | tail -1)")
grep -q " $disk " /proc/diskstats || bench_die "no /proc/diskstats line for $disk (the disk under $dir)"
disk_mm=$(lsblk -ndo MAJ:MIN "/dev/$disk" | tr -d ' ' | tr : ,) # as perf prints it

saved=$(cat /proc/sys/vm/nr_hugepages)
echo $((saved + 16)) >/proc/sys/vm/nr_hugepages
bench_defer "echo $saved >/proc/sys/vm/nr_hugepages"

bench_log "writing the raw image and the chunkfs store ($size each) ..."
dd if=/dev/zero of="$raw" bs=1M count=$((bytes >> 20)) oflag=direct status=none
"$bin/mkchunkfs" -q -f -s $((bytes + (1 << 30))) "$store" >/dev/null
bench_cfs_mount "$bin/chunkfs" "$store" "$work/mnt" ${cfs_opts:+-o "$cfs_opts"}
fallocate -l "$bytes" "$work/mnt/c0"
dd if=/dev/zero of="$work/mnt/c0" bs=1M count=$((bytes >> 20)) oflag=direct conv=notrunc status=none

disk_stats() { # -> requests, sectors, io_ticks ms, weighted ms (reads + writes)
	awk -v d="$disk" '$3 == d { print $4 + $8, $6 + $10, $13, $14 }' /proc/diskstats
}
run() { # file label rep -> a CSV line
	local s0 s1 mbs
	s0=$(disk_stats)
	mbs=$(fio --name=seqread --filename="$1" --size="$bytes" --ioengine=io_uring --direct=1 \
		--rw=read --bs=1m --iodepth=8 --runtime="$runtime" --time_based --fixedbufs=1 \
		--registerfiles=1 --iomem=mmaphuge --output-format=terse --terse-version=3 |
		awk -F';' '{ printf "%.0f", $7 / 1000 }')
	s1=$(disk_stats)
	echo "$2,$3,$mbs,$s0,$s1" | awk -F'[, ]' -v t="$runtime" '{
		n = $8 - $4; busy = ($10 - $6) / (t * 10); w = $11 - $7
		printf "%s,%s,%s,%.0f,%.1f,%.0f\n", $1, $2, $3, busy, w / (t * 1000), n ? w * 1000 / n : 0 }'
}

csv=$work/runs.csv
echo "target,rep,MBps,busy_pct,in_flight,latency_us" >"$csv"
for r in $(seq "$reps"); do
	bench_log "rep $r/$reps"
	for t in $(bench_rotate "$r" raw chunkfs); do
		f=$raw
		[ "$t" = chunkfs ] && f=$work/mnt/c0
		run "$f" "$t" "$r" >>"$csv"
	done
done

trace=
if command -v perf >/dev/null && perf list 2>/dev/null | grep block:block_rq_complete >/dev/null; then
	bench_log "tracing a chunkfs run for 0.5 s ..."
	fio --name=seqread --filename="$work/mnt/c0" --size="$bytes" --ioengine=io_uring --direct=1 \
		--rw=read --bs=1m --iodepth=8 --runtime=3 --time_based --fixedbufs=1 --registerfiles=1 \
		--iomem=mmaphuge --output-format=terse >/dev/null &
	fio_pid=$!
	sleep 1
	perf record -q -a -o "$work/perf.data" -e block:block_rq_complete \
		-e syscalls:sys_enter_writev -e syscalls:sys_exit_writev -- sleep 0.5 >/dev/null 2>&1 || true
	wait $fio_pid || true
	trace=$work/trace.txt
	perf script -i "$work/perf.data" -F comm,tid,time,event,trace >"$trace" 2>/dev/null || trace=
fi

stamp=$(date +%Y%m%d-%H%M%S)
resdir=$root/bench/results/seqread-anatomy-$stamp
mkdir -p "$resdir"
cp "$csv" "$resdir/seqread-anatomy-$stamp.csv"
python3 - "$csv" "${trace:-}" "$disk" "$disk_mm" <<'EOF' | tee "$resdir/seqread-anatomy-$stamp.txt"
import csv, re, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = lambda t, k: st.median(float(r[k]) for r in rows if r["target"] == t)
raw = med("raw", "MBps")
print("1 MiB sequential read QD8, medians of %d runs; disk %s" % (len(rows) // 2, sys.argv[3]))
print("%-8s %8s %6s %9s %9s %11s" % ("target", "MB/s", "ratio", "disk busy", "in flight", "latency us"))
for t in ("raw", "chunkfs"):
    print("%-8s %8.0f %5.2fx %8.0f%% %9.1f %11.0f" % (t, med(t, "MBps"), med(t, "MBps") / raw,
          med(t, "busy_pct"), med(t, "in_flight"), med(t, "latency_us")))
if sys.argv[2]:
    done, enter, bursts, copies = [], {}, [], []
    for line in open(sys.argv[2]):
        m = re.match(r"\s*(\S+)\s+(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)", line)
        if not m:
            continue
        comm, tid, ts, ev, rest = m.group(1), m.group(2), float(m.group(3)), m.group(4), m.group(5)
        if ev == "block:block_rq_complete" and rest.split()[0] == sys.argv[4]:
            done.append(ts)
        elif comm == "chunkfs" and ev == "syscalls:sys_enter_writev":
            enter[tid] = ts
        elif comm == "chunkfs" and ev == "syscalls:sys_exit_writev" and tid in enter:
            ret = int(rest.split()[0], 16)
            if ret >= 1 << 20:
                copies.append((ts - enter[tid]) * 1e6)
    n = 1
    for a, b in zip(done, done[1:]):
        if b - a < 50e-6:
            n += 1
        else:
            bursts.append(n)
            n = 1
    if bursts:
        print("device completions per burst (< 50 us apart): median %d, mean %.1f, %d bursts"
              % (st.median(bursts), st.mean(bursts), len(bursts)))
    if copies:
        print("chunkfs reply of 1 MiB (writev to /dev/fuse): median %.0f us, p90 %.0f us, %d replies"
              % (st.median(copies), sorted(copies)[int(len(copies) * 0.9)], len(copies)))
EOF
