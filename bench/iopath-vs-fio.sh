#!/usr/bin/env bash
# bench/iopath-vs-fio.sh — iopath_bench against fio (ioengine=io_uring,
# direct=1) on the same image file and on a loop device over it, in the same
# run. Every case runs N times per tool, the tools alternating (ABAB, then
# BABA on the next repetition) so that drift on a shared machine lands on
# both; the table shows medians and the ratio iopath/fio.
#
# usage: bench/iopath-vs-fio.sh [-n reps] [-r seconds] [-s size] [-d dir]
#                               [-o out.csv] [-b iopath_bench] [-F "fio args"]
#                               [-c case,case...] [-L] [-k]
#   -n  repetitions per case and tool (default 3)
#   -r  runtime of each run in seconds (default 10)
#   -s  image size (default 2G); the image is written in full first (dd,
#       O_DIRECT, zeros) so no run pays for allocating extents
#   -d  directory of the image, on a disk filesystem (default /var/tmp)
#   -o  CSV output (default build/bench/iopath-vs-fio-<time>.csv)
#   -b  the iopath_bench binary (default build/release/bench/iopath_bench)
#   -F  extra fio arguments (default "--fixedbufs=1 --registerfiles=1": the
#       same registered buffers and file iopath uses; -F "" for fio's defaults)
#   -P  do not give fio huge-page buffers. By default (as root) the script
#       reserves a few 2 MiB hugetlb pages for the run and passes
#       --iomem=mmaphuge, because iopath's arena asks for transparent huge
#       pages: a 1 MiB request in 4 KiB pages needs 256 segments, more than
#       virtio-blk's max_segments (254) here, and is split in two; in huge
#       pages it is one segment. Without this, 1 MiB sequential compares
#       buffer layouts, not I/O paths. The old reservation is restored.
#   -c  only these cases (names below)
#   -L  skip the loop device (and root is not needed)
#   -k  keep the image afterwards
#
# Cases: randread-4k-qd32 randwrite-4k-qd32 seqread-1m-qd8 seqwrite-1m-qd8
#        randread-4k-qd1
#
# Both tools: one job/thread, one ring, the given depth, uniform random
# block-aligned offsets over the whole target (fio: norandommap) or a
# sequential sweep from offset 0. fio's latency is its total latency
# (lat_percentiles=1: submission to completion); iopath's is queue() to
# done(). Writes destroy the image's contents, which is the point of a
# scratch image.
set -euo pipefail

reps=3
runtime=10
size=2G
dir=/var/tmp
out=
root=$(cd "$(dirname "$0")/.." && pwd)
bench=$root/build/release/bench/iopath_bench
fio_extra="--fixedbufs=1 --registerfiles=1"
only=
use_loop=1
keep=0
fio_huge=1
hugepages_saved=

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }

while getopts "n:r:s:d:o:b:F:c:LkPh" opt; do
	case $opt in
	n) reps=$OPTARG ;;
	r) runtime=$OPTARG ;;
	s) size=$OPTARG ;;
	d) dir=$OPTARG ;;
	o) out=$OPTARG ;;
	b) bench=$OPTARG ;;
	F) fio_extra=$OPTARG ;;
	c) only=$OPTARG ;;
	L) use_loop=0 ;;
	k) keep=1 ;;
	P) fio_huge=0 ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

command -v fio >/dev/null || { echo "iopath-vs-fio: fio is not installed" >&2; exit 77; }
command -v python3 >/dev/null || { echo "iopath-vs-fio: python3 is needed to read fio's JSON" >&2; exit 77; }
[ -x "$bench" ] || { echo "iopath-vs-fio: $bench not built (make bench-build)" >&2; exit 2; }
if [ "$use_loop" = 1 ] && [ "$(id -u)" != 0 ]; then
	echo "iopath-vs-fio: not root: skipping the loop device (-L)" >&2
	use_loop=0
fi

stamp=$(date +%Y%m%d-%H%M%S)
[ -n "$out" ] || { mkdir -p "$root/build/bench"; out=$root/build/bench/iopath-vs-fio-$stamp.csv; }
img=$dir/cfs-iopath-vs-fio.img
loopdev=
work=$(mktemp -d "${TMPDIR:-/tmp}/iopath-vs-fio.XXXXXX")

cleanup() {
	if [ -n "$hugepages_saved" ]; then
		echo "$hugepages_saved" >/proc/sys/vm/nr_hugepages || true
	fi
	if [ -n "$loopdev" ]; then
		losetup -d "$loopdev" 2>/dev/null || true
	fi
	[ "$keep" = 1 ] || rm -f "$img"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the image: fully written, so extents exist before anything is timed ---
bytes=$(numfmt --from=iec "$size")
if [ ! -f "$img" ] || [ "$(stat -c %s "$img")" != "$bytes" ]; then
	echo "writing $size image $img ..." >&2
	dd if=/dev/zero of="$img" bs=1M count=$((bytes >> 20)) oflag=direct status=none
	sync
fi
targets=("file:$img")
if [ "$use_loop" = 1 ]; then
	# direct-io=on: the loop device reads the image with O_DIRECT too, so
	# neither tool is measuring the page cache of the backing file.
	if loopdev=$(losetup -f --show --direct-io=on "$img" 2>/dev/null); then
		targets+=("loop:$loopdev")
	else
		echo "iopath-vs-fio: losetup failed: skipping the loop device" >&2
		loopdev=
	fi
fi

# ---- fio's buffers in huge pages, like iopath's arena -------------------------
if [ "$fio_huge" = 1 ]; then
	if [ "$(id -u)" = 0 ] && [ -w /proc/sys/vm/nr_hugepages ]; then
		hugepages_saved=$(cat /proc/sys/vm/nr_hugepages)
		echo $((hugepages_saved + 16)) >/proc/sys/vm/nr_hugepages
		if [ "$(cat /proc/sys/vm/nr_hugepages)" -ge $((hugepages_saved + 8)) ]; then
			fio_extra="$fio_extra --iomem=mmaphuge"
		else
			echo "iopath-vs-fio: could not reserve huge pages: fio uses small pages" >&2
		fi
	else
		echo "iopath-vs-fio: not root: fio uses small pages (see -P)" >&2
	fi
fi

# name fio-rw iopath-flags bs qd
cases=(
	"randread-4k-qd32 randread -w0 4096 32"
	"randwrite-4k-qd32 randwrite -w100 4096 32"
	"seqread-1m-qd8 read -w0.-s 1048576 8"
	"seqwrite-1m-qd8 write -w100.-s 1048576 8"
	"randread-4k-qd1 randread -w0 4096 1"
)

run_iopath() {	# target bs qd flags -> "iops mbps p50 p99"
	local target=$1 bs=$2 qd=$3 flags=${4//./ } line
	# shellcheck disable=SC2086
	line=$("$bench" -b "$bs" -d "$qd" -r "$runtime" $flags "$target")
	awk -F, '{ print $9, $10, $11, $12 }' <<<"$line"
}

run_fio() {	# target bs qd rw -> "iops mbps p50 p99"
	local target=$1 bs=$2 qd=$3 rw=$4 json=$work/fio.json
	# shellcheck disable=SC2086
	fio --name=cmp --filename="$target" --ioengine=io_uring --direct=1 --rw="$rw" \
		--bs="$bs" --iodepth="$qd" --runtime="$runtime" --time_based --numjobs=1 \
		--norandommap --randrepeat=0 --lat_percentiles=1 --size="$bytes" \
		$fio_extra --output-format=json --output="$json" >/dev/null
	python3 - "$json" <<-'EOF'
	import json, sys
	text = open(sys.argv[1]).read()
	job = json.loads(text[text.find("{"):])["jobs"][0]	# skip any warning line
	d = job["write"] if job["write"]["io_bytes"] > job["read"]["io_bytes"] else job["read"]
	pct = d["lat_ns"].get("percentile", {})
	print("%.0f %.1f %.1f %.1f" % (d["iops"], d["bw_bytes"] / 1e6,
	      pct.get("50.000000", 0) / 1e3, pct.get("99.000000", 0) / 1e3))
	EOF
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "tool,target,case,rep,iops,MBps,lat_p50_us,lat_p99_us" >"$out"
{
	echo "# iopath-vs-fio $stamp: kernel $(uname -r), $(nproc) cpus, fio $(fio --version)"
	echo "# image $img ($size, $(df -T "$dir" | awk 'NR==2 { print $2 " on " $1 }')), runtime ${runtime}s, reps $reps, fio extra: ${fio_extra:-none}"
	echo "# git $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
} >>"$out"

for t in "${targets[@]}"; do
	kind=${t%%:*} target=${t#*:}
	for c in "${cases[@]}"; do
		read -r name rw flags bs qd <<<"$c"
		if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then
			continue
		fi
		for rep in $(seq 1 "$reps"); do
			if [ $((rep % 2)) = 1 ]; then order="iopath fio"; else order="fio iopath"; fi
			for tool in $order; do
				if [ "$tool" = iopath ]; then
					res=$(run_iopath "$target" "$bs" "$qd" "$flags")
				else
					res=$(run_fio "$target" "$bs" "$qd" "$rw")
				fi
				echo "$tool,$kind,$name,$rep,${res// /,}" >>"$out"
				echo "  $kind $name rep $rep $tool: $res" >&2
			done
		done
	done
done

# ---- medians and the table -------------------------------------------------
col() { grep -v '^#' "$out" | awk -F, -v tool="$1" -v kind="$2" -v c="$3" -v f="$4" \
	'$1 == tool && $2 == kind && $3 == c && $4 != "median" { print $f }' | median; }

printf '\n%-5s %-18s %10s %10s %6s %9s %9s %6s %15s %15s\n' target case "fio IOPS" "iopath" ratio \
	"fio MB/s" "iopath" ratio "fio p50/p99 us" "iopath p50/p99"
for t in "${targets[@]}"; do
	kind=${t%%:*}
	for c in "${cases[@]}"; do
		read -r name _ <<<"$c"
		if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then
			continue
		fi
		fi_iops=$(col fio "$kind" "$name" 5) io_iops=$(col iopath "$kind" "$name" 5)
		fi_mbps=$(col fio "$kind" "$name" 6) io_mbps=$(col iopath "$kind" "$name" 6)
		fi_p50=$(col fio "$kind" "$name" 7) io_p50=$(col iopath "$kind" "$name" 7)
		fi_p99=$(col fio "$kind" "$name" 8) io_p99=$(col iopath "$kind" "$name" 8)
		for tool in fio iopath; do
			if [ $tool = fio ]; then v="$fi_iops,$fi_mbps,$fi_p50,$fi_p99"; else v="$io_iops,$io_mbps,$io_p50,$io_p99"; fi
			echo "$tool,$kind,$name,median,$v" >>"$out"
		done
		awk -v k="$kind" -v n="$name" -v fi="$fi_iops" -v ii="$io_iops" -v fm="$fi_mbps" \
			-v im="$io_mbps" -v f5="$fi_p50" -v f9="$fi_p99" -v i5="$io_p50" -v i9="$io_p99" \
			'BEGIN { printf "%-5s %-18s %10.0f %10.0f %5.2fx %9.1f %9.1f %5.2fx %7.0f/%-7.0f %7.0f/%-7.0f\n",
				k, n, fi, ii, fi ? ii / fi : 0, fm, im, fm ? im / fm : 0, f5, f9, i5, i9 }'
	done
done
echo
echo "medians of $reps runs of ${runtime}s each; raw runs and medians in $out"
