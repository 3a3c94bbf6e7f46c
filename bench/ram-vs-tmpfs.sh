#!/usr/bin/env bash
# bench/ram-vs-tmpfs.sh — the RAM temp mount (chunkfs -o ram) against tmpfs
# with O_DIRECT (which this kernel accepts) and against chunkfs on an image
# file (mkchunkfs on a disk filesystem):
#   fio, io_uring, O_DIRECT, one job: 4 KiB random read and write at QD1 and
#   QD32, 1 MiB sequential read and write at QD8, on a 1 GiB file written in
#   full first;
#   the temp-table checkpoint of IBM's note "DIRECT_IO for temporary dbspaces"
#   (bench/temp_checkpoint.c: 20 rounds of 80 MB of 2 KiB pages written with
#   O_DIRECT at QD32 and fdatasync'ed), on the three mounts and, for the
#   note's baseline, on the disk filesystem itself buffered and O_DIRECT.
# Every case runs N times; each repetition visits the targets in a rotated
# order so drift on a shared machine lands on all of them; the summary shows
# medians, and the RAM mount's ratios to tmpfs and to the image both as a
# ratio of medians and as the median of per-repetition ratios (the targets of one
# repetition run back to back, so a neighbour's load swings them together).
# The programs are copied first: a rebuild in the tree during the run does
# not change what is measured.
#
# usage: bench/ram-vs-tmpfs.sh [-n reps] [-r seconds] [-d dir] [-o out.csv]
#                              [-c case,case...] [-t target,target...] [-k]
#                              [-R rounds]
#   -n  repetitions (default 3)
#   -r  seconds per fio run (default 10)
#   -d  directory on a disk filesystem for the image and the baseline
#       (default /var/tmp)
#   -o  CSV output (default build/bench/ram-vs-tmpfs-<time>.csv)
#   -c  only these cases (randread-4k-qd1 randread-4k-qd32 randwrite-4k-qd1
#       randwrite-4k-qd32 seqread-1m-qd8 seqwrite-1m-qd8 checkpoint)
#   -t  only these targets (ram tmpfs img; the checkpoint also runs on
#       disk-buffered and disk-direct; not by default: loop = chunkfs on a
#       loop device, --direct-io=on, over a second image)
#   -k  keep the mounts and the image afterwards (unmount by hand)
#   -R  checkpoint rounds (default 20, as the seed)
# Environment: BUILD (default release), CHUNKFS_OPTS (extra -o options of the
# RAM mount, e.g. hugepages), RAMB_OPTS and RAMB_BIN (a second RAM mount,
# target ramB, with other options or another chunkfs binary: see below).
# Needs root (FUSE and tmpfs mounts), fio and python3; make bench-build first.
set -euo pipefail

reps=3
runtime=10
dir=/var/tmp
out=
only_cases=
only_targets=
keep=0
rounds=20
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
bin=$root/build/${BUILD:-release}
file_bytes=$((1 << 30))

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }

while getopts "n:r:d:o:c:t:R:kh" opt; do
	case $opt in
	n) reps=$OPTARG ;;
	r) runtime=$OPTARG ;;
	d) dir=$OPTARG ;;
	o) out=$OPTARG ;;
	c) only_cases=$OPTARG ;;
	t) only_targets=$OPTARG ;;
	k) keep=1 ;;
	R) rounds=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

[ "$(id -u)" = 0 ] || { echo "ram-vs-tmpfs: needs root (FUSE and tmpfs mounts)" >&2; exit 77; }
command -v fio >/dev/null || { echo "ram-vs-tmpfs: fio is not installed" >&2; exit 77; }
command -v python3 >/dev/null || { echo "ram-vs-tmpfs: needs python3" >&2; exit 77; }
for b in "$bin/chunkfs" "$bin/mkchunkfs" "$bin/bench/temp_checkpoint"; do
	[ -x "$b" ] || { echo "ram-vs-tmpfs: $b not built (make bench-build)" >&2; exit 2; }
done

stamp=$(date +%Y%m%d-%H%M%S)
[ -n "$out" ] || { mkdir -p "$root/build/bench"; out=$root/build/bench/ram-vs-tmpfs-$stamp.csv; }
work=$(mktemp -d "${TMPDIR:-/tmp}/ram-vs-tmpfs.XXXXXX")
img=$dir/cfs-ram-vs-tmpfs.img
loop_img=$dir/cfs-ram-vs-tmpfs-loop.img
loopdev=
base=$dir/cfs-ram-vs-tmpfs.base
declare -A mnt=([ram]=$work/ram [tmpfs]=$work/tmpfs [img]=$work/img [loop]=$work/loop)
declare -A pid=()
mkdir -p "$work/bin"
cp "$bin/chunkfs" "$bin/mkchunkfs" "$bin/bench/temp_checkpoint" "$work/bin/"
bin=$work/bin
exeB=$bin/chunkfs
if [ -n "${RAMB_BIN:-}" ]; then
	cp "$RAMB_BIN" "$bin/chunkfsB"
	exeB=$bin/chunkfsB
fi
ckpt=$bin/temp_checkpoint

selected() { # list item
	[ -z "$1" ] || [[ ",$1," == *",$2,"* ]]
}

mounted() { bench_mounted "$1"; }

start_chunkfs() { # name source opts [chunkfs binary]
	local name=$1 src=$2 opts=$3 exe=${4:-$bin/chunkfs}
	mkdir -p "${mnt[$name]}"
	"$exe" -f "$src" "${mnt[$name]}" -o "$opts" >"$work/$name.log" 2>&1 &
	pid[$name]=$!
	bench_wait_mount "${mnt[$name]}" "${pid[$name]}" "$work/$name.log" 10 && return 0
	echo "ram-vs-tmpfs: chunkfs $src did not mount" >&2
	exit 1
}

cleanup() {
	set +e
	[ "$keep" = 1 ] && { echo "kept: ${mnt[*]} $img" >&2; return; }
	for name in ram img loop tmpfs; do
		mounted "${mnt[$name]}" && umount "${mnt[$name]}"
	done
	[ -z "${mnt[ramB]:-}" ] || ! mounted "${mnt[ramB]}" || umount "${mnt[ramB]}"
	for name in "${!pid[@]}"; do
		wait "${pid[$name]}" 2>/dev/null
	done
	[ -z "$loopdev" ] || losetup -d "$loopdev"
	rm -f "$img" "$loop_img" "$base"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the three mounts ------------------------------------------------------------
targets=()
for t in ram tmpfs img; do selected "$only_targets" $t && targets+=("$t"); done
[ -n "$only_targets" ] && selected "$only_targets" loop && targets+=(loop)
if selected "$only_targets" ram; then
	start_chunkfs ram ram "ram,size=2G${CHUNKFS_OPTS:+,$CHUNKFS_OPTS}"
fi
# RAMB_OPTS=opts and/or RAMB_BIN=chunkfs: a second RAM mount with these -o
# options (e.g. transport=uring with enable_uring set: bench/uring-ab.sh), or
# from another build of chunkfs (an A/B of a code change), measured in the
# same run, in a table of its own at the end.
if [ -n "${RAMB_OPTS:-}${RAMB_BIN:-}" ]; then
	mnt[ramB]=$work/ramB
	targets+=(ramB)
	start_chunkfs ramB ram "ram,size=2G${RAMB_OPTS:+,$RAMB_OPTS}" "$exeB"
fi
if selected "$only_targets" tmpfs; then
	mkdir -p "${mnt[tmpfs]}"
	mount -t tmpfs -o size=2G tmpfs "${mnt[tmpfs]}"
fi
if selected "$only_targets" img; then
	rm -f "$img"
	"$bin/mkchunkfs" -q -s 4G "$img" >/dev/null
	start_chunkfs img "$img" rw
fi
if [[ " ${targets[*]} " == *" loop "* ]]; then
	rm -f "$loop_img"
	"$bin/mkchunkfs" -q -s 4G "$loop_img" >/dev/null
	loopdev=$(losetup -f --show --direct-io=on "$loop_img")
	start_chunkfs loop "$loopdev" rw
fi
fio_cases=0
for c in randread-4k-qd1 randread-4k-qd32 randwrite-4k-qd1 randwrite-4k-qd32 seqread-1m-qd8 \
	seqwrite-1m-qd8; do
	selected "$only_cases" $c && fio_cases=1
done
for t in "${targets[@]}"; do
	[ "$fio_cases" = 1 ] || break
	# the fio file, written in full: nothing is allocated while timed
	dd if=/dev/zero of="${mnt[$t]}/fio.dat" bs=1M count=$((file_bytes >> 20)) oflag=direct \
		status=none
done

# name fio-rw bs qd
cases=(
	"randread-4k-qd1 randread 4k 1"
	"randread-4k-qd32 randread 4k 32"
	"randwrite-4k-qd1 randwrite 4k 1"
	"randwrite-4k-qd32 randwrite 4k 32"
	"seqread-1m-qd8 read 1M 8"
	"seqwrite-1m-qd8 write 1M 8"
)

run_fio() { # file rw bs qd -> "iops MBps p50_us p99_us"
	local json=$work/fio.json
	fio --name=b --filename="$1" --ioengine=io_uring --direct=1 --rw="$2" --bs="$3" \
		--iodepth="$4" --runtime="$runtime" --time_based --numjobs=1 --norandommap \
		--randrepeat=0 --lat_percentiles=1 --size=$file_bytes --output-format=json \
		--output="$json" >/dev/null
	python3 - "$json" <<-'EOF'
	import json, sys
	text = open(sys.argv[1]).read()
	job = json.loads(text[text.find("{"):])["jobs"][0]
	d = job["write"] if job["write"]["io_bytes"] > job["read"]["io_bytes"] else job["read"]
	pct = d["lat_ns"].get("percentile", {})
	print("%.0f %.1f %.1f %.1f" % (d["iops"], d["bw_bytes"] / 1e6,
	      pct.get("50.000000", 0) / 1e3, pct.get("99.000000", 0) / 1e3))
	EOF
}

run_ckpt() { # target -> "avg_ms worst_ms"
	local path flags=
	case $1 in
	disk-buffered) path=$base flags=-b ;;
	disk-direct) path=$base ;;
	*) path=${mnt[$1]}/temp_chunk ;;
	esac
	rm -f "$path"
	# shellcheck disable=SC2086
	"$ckpt" -r "$rounds" $flags "$path" | awk -F, '{ print $6, $7 }'
	rm -f "$path"
}

rotate() { # rep items... -> items rotated by rep
	local r=$1
	shift
	local a=("$@") n=$#
	for ((i = 0; i < n; i++)); do echo "${a[$(((i + r) % n))]}"; done
}

echo "target,case,rep,iops,MBps,lat_p50_us,lat_p99_us,avg_ms,worst_ms" >"$out"
{
	echo "# ram-vs-tmpfs $stamp: kernel $(uname -r), $(nproc) cpus, fio $(fio --version)"
	echo "# dir $dir ($(df -T "$dir" | awk 'NR==2 { print $2 " on " $1 }')), runtime ${runtime}s, reps $reps, checkpoint rounds $rounds, RAM options: ram,size=2G${CHUNKFS_OPTS:+,$CHUNKFS_OPTS}"
	echo "# git $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
} >>"$out"

ckpt_targets=()
for t in disk-buffered disk-direct "${targets[@]}"; do ckpt_targets+=("$t"); done
for rep in $(seq 1 "$reps"); do
	for c in "${cases[@]}"; do
		read -r name rw bs qd <<<"$c"
		selected "$only_cases" "$name" || continue
		for t in $(rotate "$rep" "${targets[@]}"); do
			res=$(run_fio "${mnt[$t]}/fio.dat" "$rw" "$bs" "$qd")
			echo "$t,$name,$rep,${res// /,},," >>"$out"
			echo "  rep $rep $name $t: $res" >&2
		done
	done
	if selected "$only_cases" checkpoint; then
		for t in $(rotate "$rep" "${ckpt_targets[@]}"); do
			res=$(run_ckpt "$t")
			echo "$t,checkpoint,$rep,,,,,${res// /,}" >>"$out"
			echo "  rep $rep checkpoint $t: avg/worst ms $res" >&2
		done
	fi
done

# ---- summary: medians -----------------------------------------------------------------
python3 - "$out" "$rounds" <<'EOF'
import csv, statistics, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if not l.startswith("#"))][1:]
med = {}
for t, c, rep, iops, mbps, p50, p99, avg, worst in rows:
    key = (t, c)
    med.setdefault(key, []).append([float(x) if x else 0.0 for x in (iops, mbps, p50, p99, avg, worst)])
reps = {}
for t, c, rep, iops, mbps, p50, p99, avg, worst in rows:
    reps.setdefault((c, rep), {})[t] = float(iops or 0), float(mbps or 0)
def m(t, c, i):
    v = med.get((t, c))
    return statistics.median(x[i] for x in v) if v else None
def paired(a, b, c, i):
    """Median over the repetitions of a/b measured back to back."""
    r = [v[a][i] / v[b][i] for (cc, _), v in reps.items()
         if cc == c and a in v and b in v and v[b][i]]
    return "%.2fx" % statistics.median(r) if r else "-"
cases = [c for c in ("randread-4k-qd1", "randread-4k-qd32", "randwrite-4k-qd1",
                     "randwrite-4k-qd32", "seqread-1m-qd8", "seqwrite-1m-qd8")
         if any(k[1] == c for k in med)]
if cases:
    print("fio, medians: IOPS (MB/s for 1 MiB) and p50/p99 latency in us")
    print("%-18s %10s %10s %10s %9s %9s %8s   %-13s %-13s %-13s" % ("case", "ram", "tmpfs",
          "img", "ram/tmpfs", "(paired)", "ram/img", "ram p50/p99", "tmpfs p50/p99",
          "img p50/p99"))
    for c in cases:
        i = 1 if c.startswith("seq") else 0
        v = {t: m(t, c, i) for t in ("ram", "tmpfs", "img")}
        lat = {t: ("%.0f/%.0f" % (m(t, c, 2), m(t, c, 3))) if v[t] is not None else "-"
               for t in v}
        fmt = lambda x: "-" if x is None else ("%.0f" % x if i == 0 else "%.1f" % x)
        ratio = lambda a, b: "-" if a is None or not b else "%.2fx" % (a / b)
        print("%-18s %10s %10s %10s %9s %9s %8s   %-13s %-13s %-13s" % (c, fmt(v["ram"]),
              fmt(v["tmpfs"]), fmt(v["img"]), ratio(v["ram"], v["tmpfs"]),
              paired("ram", "tmpfs", c, i), ratio(v["ram"], v["img"]), lat["ram"],
              lat["tmpfs"], lat["img"]))
if any(k[0] == "ramB" for k in med):
    print()
    print("ramB = RAM mount with RAMB_OPTS; medians, and (paired) = median of back-to-back ratios")
    print("%-18s %10s %10s %9s %9s %11s %9s" % ("case", "ram", "ramB", "ramB/ram", "(paired)",
          "ramB/tmpfs", "(paired)"))
    for c in cases:
        i = 1 if c.startswith("seq") else 0
        a, b, t = m("ram", c, i), m("ramB", c, i), m("tmpfs", c, i)
        fmt = lambda x: "-" if x is None else ("%.0f" % x if i == 0 else "%.1f" % x)
        ratio = lambda x, y: "-" if x is None or not y else "%.2fx" % (x / y)
        print("%-18s %10s %10s %9s %9s %11s %9s" % (c, fmt(a), fmt(b), ratio(b, a),
              paired("ramB", "ram", c, i), ratio(b, t), paired("ramB", "tmpfs", c, i)))
ck = [t for t in ("disk-buffered", "disk-direct", "tmpfs", "img", "loop", "ram")
      if (t, "checkpoint") in med]
if ck:
    b = m("disk-buffered", "checkpoint", 4)
    print()
    print("checkpoint (%s x 80 MB of 2 KiB pages + fdatasync), medians over the repetitions"
          % sys.argv[2])
    print("%-14s %12s %12s %16s" % ("target", "avg flush ms", "worst ms", "% vs disk buffered"))
    for t in ck:
        a, w = m(t, "checkpoint", 4), m(t, "checkpoint", 5)
        print("%-14s %12.1f %12.1f %16s" % (t, a, w, "%+.1f" % ((a - b) / b * 100) if b else "-"))
EOF
echo "raw runs: $out" >&2
