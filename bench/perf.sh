#!/usr/bin/env bash
# bench/perf.sh — the data-path matrix in one run: fio
# (ioengine=io_uring, direct=1) on the raw store (an image file on ext4,
# written in full, and a loop device over it), on ext4 O_DIRECT files on the
# same device, on chunkfs mounted on an image, and on chunkfs mounted on a
# loop device. Every case runs N times on every target, the target order
# rotating from one repetition to the next so drift on a shared machine lands
# on all of them; the table gives medians and ratios against the raw store
# (chunkfs on an image and ext4 vs the raw image file, chunkfs on a loop
# device vs the raw loop device), and the chunkfs daemon's CPU per I/O
# (utime+stime of its PID from /proc/PID/stat around each run / I/Os), and
# the whole machine's busy CPU per I/O (/proc/stat: user, nice, system, irq,
# softirq), which on a machine with few CPUs says how far any target can go.
#
# usage: bench/perf.sh [-n reps] [-r seconds] [-s size] [-d dir] [-c cases]
#                      [-t targets] [-o opts] [-B chunkfs] [-O opts] [-k]
#                      [-R resultdir] [-L MB/s]
#   -n  repetitions (default 3)
#   -r  runtime of each fio run in seconds (default 5)
#   -s  working set per job (default 1G); raw images are 2x that, chunkfs
#       stores 3x + 1G (files c0, c1 of that size, m0..m3 of a quarter)
#   -d  directory for the images, on a disk filesystem (default /var/tmp)
#   -c  only these cases (comma-separated names, see below)
#   -t  only these targets (raw-file,raw-loop,ext4,cfs-img,cfs-loop,cfsB-img,
#       cfsC-img, and not by default: tmpfs, cfs-ram = chunkfs -o ram; both
#       in memory, 3x + 1G of size, ratio against raw-file; fuse-null =
#       bench/fuse_null, a FUSE filesystem that answers READ with zeros and
#       WRITE with success without a store: the FUSE round trip alone)
#   -o  chunkfs -o options for cfs-img and cfs-loop (e.g. threads=2)
#   -B  a second chunkfs binary: adds target cfsB-img (its own store), for
#       an A/B of a code change in the same run
#   -O  chunkfs -o options for cfsB-img (default: those of -o); with -O and
#       no -B, cfsB-img runs the same binary with other options
#   -C, -Q  the same for a third variant, target cfsC-img
#   -S  swap the stores of cfs-img and cfsB-img at every repetition (both
#       remounted, not rewritten): where an image lies decides its speed
#       (up to ~20% at 1 MiB between two images of one run, bench/README.md),
#       so an A/B of two daemons should run each on both; use an even -n
#   -k  keep the images (the next run skips writing them)
#   -R  directory for the CSV and the table (default bench/results/perf-<time>/,
#       the run's folder: its notes.md goes beside them)
#   -L  a device-bound store: the block layer throttles both loop devices
#       (raw-loop's and cfs-loop's) to this many MB/s of reads and of writes
#       each (cgroup v1 blkio.throttle at the root; stores written first, at
#       full speed); targets default to raw-loop,cfs-loop. Where the store
#       is an image the host serves from its cache at memory speed, this
#       asks what a disk of that speed would give (bench/README.md)
#   CFS_BIN=dir in the environment: take chunkfs and mkchunkfs from dir
#       (default build/release of this tree)
#   -F  extra fio arguments for every run (default "--fixedbufs=1
#       --registerfiles=1 --iomem=mmaphuge"; huge pages are reserved for the
#       run and the old count restored: see bench/README.md, a 1 MiB buffer
#       in 4 KiB pages is split in two by virtio-blk's max_segments)
#
# Cases (name: what):
#   rr4k-qd32     4 KiB random read, QD32, 1 job
#   rw4k-qd32     4 KiB random write, QD32, 1 job
#   rr4k-qd32-2j  4 KiB random read, QD32, 2 jobs (each its own file/region)
#   rw4k-qd32-2j  4 KiB random write, QD32, 2 jobs
#   sr1m-qd8      1 MiB sequential read, QD8
#   sw1m-qd8      1 MiB sequential write, QD8
#   rr4k-qd1      4 KiB random read, QD1 (look at p50/p99)
#   rw4k-qd1      4 KiB random write, QD1
#   rw2k-qd32     2 KiB random write, QD32 (Informix pages)
#   mw-one        4 jobs x 4 KiB random write QD8 on ONE file (own regions)
#   mw-spread     the same on four files (raw targets: not run)
#
# Files on chunkfs and ext4 are preallocated and written in full before any
# test (an unwritten sector reads as zeros without I/O and would fake read
# numbers). Needs root (loop devices, mounts), fio, python3, and a built
# tree (make). Nothing is left mounted or attached: a trap cleans up.
# Output: table on stdout, raw CSV and the table in bench/results/perf-<time>/.
set -euo pipefail

reps=3
runtime=5
ws=1G
dir=/var/tmp
only=
only_targets=
cfs_opts=
cfsb_bin=
cfsb_opts=
cfsb_opts_set=0
cfsc_bin=
cfsc_opts=
cfsc_opts_set=0
keep=0
resdir=
throttle_mbps=
swap_stores=0
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
bin=${CFS_BIN:-$root/build/release}
fio_extra="--fixedbufs=1 --registerfiles=1 --iomem=mmaphuge"

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }

while getopts "n:r:s:d:c:t:o:B:O:C:Q:F:R:L:Skh" opt; do
	case $opt in
	n) reps=$OPTARG ;;
	r) runtime=$OPTARG ;;
	s) ws=$OPTARG ;;
	d) dir=$OPTARG ;;
	c) only=$OPTARG ;;
	t) only_targets=$OPTARG ;;
	o) cfs_opts=$OPTARG ;;
	B) cfsb_bin=$OPTARG ;;
	O) cfsb_opts=$OPTARG; cfsb_opts_set=1 ;;
	C) cfsc_bin=$OPTARG ;;
	Q) cfsc_opts=$OPTARG; cfsc_opts_set=1 ;;
	F) fio_extra=$OPTARG ;;
	k) keep=1 ;;
	R) resdir=$OPTARG ;;
	L) throttle_mbps=$OPTARG ;;
	S) swap_stores=1 ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
[ "$cfsb_opts_set" = 1 ] || cfsb_opts=$cfs_opts
[ "$cfsc_opts_set" = 1 ] || cfsc_opts=$cfs_opts

die() { echo "perf.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (loop devices, FUSE mounts)"
command -v fio >/dev/null || { echo "perf.sh: fio is not installed" >&2; exit 77; }
command -v python3 >/dev/null || die "python3 is needed to read fio's JSON"
[ -x "$bin/chunkfs" ] && [ -x "$bin/mkchunkfs" ] || die "build first (make)"
[ -z "$cfsb_bin" ] || [ -x "$cfsb_bin" ] || die "$cfsb_bin is not executable"
[ -z "$cfsc_bin" ] || [ -x "$cfsc_bin" ] || die "$cfsc_bin is not executable"
throttle_dir=/sys/fs/cgroup/blkio
if [ -n "$throttle_mbps" ]; then
	[[ "$throttle_mbps" =~ ^[1-9][0-9]*$ ]] || die "-L wants MB/s, a whole number (got '$throttle_mbps')"
	[ -w "$throttle_dir/blkio.throttle.read_bps_device" ] ||
		die "-L needs the cgroup v1 blkio controller ($throttle_dir/blkio.throttle.*)"
	only_targets=${only_targets:-raw-loop,cfs-loop}
fi

wsb=$(numfmt --from=iec "$ws")
quarter=$((wsb / 4))
raw_bytes=$((2 * wsb))
cfs_bytes=$((3 * wsb + (1 << 30)))
stamp=$(date +%Y%m%d-%H%M%S)
resdir=${resdir:-$root/bench/results/perf-$stamp}
mkdir -p "$resdir"
out=$resdir/perf-$stamp.csv
table=$resdir/perf-$stamp.txt
work=$(mktemp -d "${TMPDIR:-/tmp}/cfs-perf.XXXXXX")
raw_img=$dir/cfs-perf-raw.img
ext4_dir=$dir/cfs-perf-ext4
declare -A cfs_img=([cfs-img]=$dir/cfs-perf-store1.img [cfs-loop]=$dir/cfs-perf-store2.img
	[cfsB-img]=$dir/cfs-perf-store3.img [cfsC-img]=$dir/cfs-perf-store4.img)
declare -A mnt=() pid=() loop_of=()
raw_loop=
throttled=()
hugepages_saved=

# ---- cleanup: unmount, wait for the daemons, detach, restore ----------------
cleanup() {
	set +e
	for d in "${throttled[@]}"; do throttle "$d" 0; done
	for t in "${!mnt[@]}"; do
		if mountpoint -q "${mnt[$t]}"; then
			umount "${mnt[$t]}" 2>/dev/null || umount -l "${mnt[$t]}"
		fi
	done
	for t in "${!pid[@]}"; do
		for _ in $(seq 300); do kill -0 "${pid[$t]}" 2>/dev/null || break; sleep 0.1; done
		kill -0 "${pid[$t]}" 2>/dev/null && kill -9 "${pid[$t]}"
	done
	for t in "${!loop_of[@]}"; do losetup -d "${loop_of[$t]}" 2>/dev/null; done
	[ -z "$raw_loop" ] || losetup -d "$raw_loop" 2>/dev/null
	[ -z "$hugepages_saved" ] || echo "$hugepages_saved" >/proc/sys/vm/nr_hugepages
	if [ "$keep" != 1 ]; then
		rm -f "$raw_img" "${cfs_img[@]}"
		rm -rf "$ext4_dir"
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

want_target() { [ -z "$only_targets" ] || [[ ",$only_targets," == *",$1,"* ]]; }
want_case() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

targets=()
for t in raw-file raw-loop ext4 cfs-img cfs-loop; do
	want_target "$t" && targets+=("$t")
done
for t in tmpfs cfs-ram fuse-null; do	# only when asked for
	[ -n "$only_targets" ] && want_target "$t" && targets+=("$t")
done
if [ -n "$cfsb_bin" ] || [ "$cfsb_opts_set" = 1 ]; then
	want_target cfsB-img && targets+=(cfsB-img)
fi
if [ -n "$cfsc_bin" ] || [ "$cfsc_opts_set" = 1 ]; then
	want_target cfsC-img && targets+=(cfsC-img)
fi
[ ${#targets[@]} -gt 0 ] || die "no target selected"
has() { [[ " ${targets[*]} " == *" $1 "* ]]; }
[ "$swap_stores" = 0 ] || { has cfs-img && has cfsB-img; } ||
	die "-S swaps the stores of cfs-img and cfsB-img: run both targets (cfsB-img needs -B or -O)"

# the files the selected cases use (name:bytes): c1 only for two jobs, m0..m3
# only for mw-spread; writing the others would only cost time
fio_files=("c0:$wsb")
if want_case rr4k-qd32-2j || want_case rw4k-qd32-2j; then fio_files+=("c1:$wsb"); fi
if want_case mw-spread; then
	fio_files+=("m0:$quarter" "m1:$quarter" "m2:$quarter" "m3:$quarter")
fi

write_full() {	# file bytes: write every byte with O_DIRECT (zeros)
	dd if=/dev/zero of="$1" bs=1M count=$(($2 >> 20)) oflag=direct conv=notrunc status=none
}

# ---- the raw store ----------------------------------------------------------
if has raw-file || has raw-loop; then
	if [ ! -f "$raw_img" ] || [ "$(stat -c %s "$raw_img")" != "$raw_bytes" ]; then
		echo "writing raw image $raw_img ..." >&2
		rm -f "$raw_img"
		write_full "$raw_img" "$raw_bytes"
	fi
	if has raw-loop; then
		raw_loop=$(losetup -f --show --direct-io=on "$raw_img")
	fi
fi

# ---- ext4 O_DIRECT files on the same device ---------------------------------
if has ext4; then
	mkdir -p "$ext4_dir"
	for f in "${fio_files[@]}"; do
		p=$ext4_dir/${f%%:*} b=${f#*:}
		if [ ! -f "$p" ] || [ "$(stat -c %s "$p")" != "$b" ]; then
			rm -f "$p"
			write_full "$p" "$b"
		fi
	done
fi

# ---- chunkfs: a fresh store each run, files preallocated and written --------
mount_cfs() {	# target [reuse: mount the store as it is]
	local t=$1 reuse=${2:-} img=${cfs_img[$1]:-} src m exe=$bin/chunkfs opts=$cfs_opts log
	[ "$t" = cfsB-img ] && { exe=${cfsb_bin:-$bin/chunkfs}; opts=$cfsb_opts; }
	[ "$t" = cfsC-img ] && { exe=${cfsc_bin:-$bin/chunkfs}; opts=$cfsc_opts; }
	if [ "$t" = cfs-ram ]; then
		src=ram
		opts="ram,size=$cfs_bytes${opts:+,$opts}"
	else
		if [ -z "$reuse" ]; then
			if [ ! -f "$img" ] || [ "$(stat -c %s "$img")" != "$cfs_bytes" ]; then
				rm -f "$img"
				echo "writing chunkfs store $img ..." >&2
			fi
			"$bin/mkchunkfs" -q -f -s "$cfs_bytes" "$img" >/dev/null
		fi
		src=$img
	fi
	if [ "$t" = cfs-loop ]; then
		loop_of[$t]=$(losetup -f --show --direct-io=on "$img")
		src=${loop_of[$t]}
	fi
	m=$work/mnt-$t
	mkdir -p "$m"
	mnt[$t]=$m
	log=$work/chunkfs-$t.log
	"$exe" -f "$src" "$m" ${opts:+-o "$opts"} >"$log" 2>&1 &
	pid[$t]=$!
	bench_wait_mount "$m" "${pid[$t]}" "$log" 20 || die "chunkfs $t did not mount"
	[ -n "$reuse" ] || fill_files "$m"
}
swap_cfs_stores() {	# cfs-img and cfsB-img trade stores (-S)
	local img
	for t in cfs-img cfsB-img; do bench_umount "${mnt[$t]}" "${pid[$t]}"; done
	img=${cfs_img[cfs-img]}
	cfs_img[cfs-img]=${cfs_img[cfsB-img]}
	cfs_img[cfsB-img]=$img
	for t in cfs-img cfsB-img; do mount_cfs "$t" reuse; done
	echo "  stores: cfs-img on ${cfs_img[cfs-img]##*/}, cfsB-img on ${cfs_img[cfsB-img]##*/}" >&2
}
fill_files() {	# dir: the fio files, preallocated and written in full
	for f in "${fio_files[@]}"; do
		fallocate -l "${f#*:}" "$1/${f%%:*}"
		write_full "$1/${f%%:*}" "${f#*:}"
	done
}
for t in cfs-img cfs-loop cfsB-img cfsC-img cfs-ram; do
	has "$t" && mount_cfs "$t"
done
if has fuse-null; then
	[ -x "$root/build/release/bench/fuse_null" ] || die "fuse-null: make bench-build first"
	cp "$root/build/release/bench/fuse_null" "$work/"
	mnt[fuse-null]=$work/mnt-fuse-null
	mkdir -p "${mnt[fuse-null]}"
	# every name is a file of this size; nothing to fill
	"$work/fuse_null" -s "$cfs_bytes" "${mnt[fuse-null]}" >"$work/fuse-null.log" 2>&1 &
	pid[fuse-null]=$!
	bench_wait_mount "${mnt[fuse-null]}" "${pid[fuse-null]}" "$work/fuse-null.log" 20 ||
		die "fuse_null did not mount"
fi
if has tmpfs; then
	mnt[tmpfs]=$work/mnt-tmpfs
	mkdir -p "${mnt[tmpfs]}"
	mount -t tmpfs -o size=$cfs_bytes tmpfs "${mnt[tmpfs]}"
	fill_files "${mnt[tmpfs]}"
fi

# ---- fio's buffers in huge pages (like the daemon's arena) ------------------
if [[ "$fio_extra" == *mmaphuge* ]]; then
	hugepages_saved=$(cat /proc/sys/vm/nr_hugepages)
	echo $((hugepages_saved + 64)) >/proc/sys/vm/nr_hugepages
	if [ "$(cat /proc/sys/vm/nr_hugepages)" -lt $((hugepages_saved + 32)) ]; then
		echo "perf.sh: could not reserve huge pages: fio uses small pages" >&2
		fio_extra=${fio_extra//--iomem=mmaphuge/}
	fi
fi

# ---- a device-bound store (-L) ------------------------------------------------
throttle() {	# device MB/s (0: none) -> reads and writes of the device limited
	local mm
	mm=$(lsblk -ndo MAJ:MIN "$1" | tr -d ' ')
	echo "$mm $(($2 * 1000000))" >"$throttle_dir/blkio.throttle.read_bps_device"
	echo "$mm $(($2 * 1000000))" >"$throttle_dir/blkio.throttle.write_bps_device"
}
if [ -n "$throttle_mbps" ]; then
	for d in "$raw_loop" "${loop_of[cfs-loop]:-}"; do
		[ -n "$d" ] || continue
		throttled+=("$d")
		throttle "$d" "$throttle_mbps"
	done
	[ ${#throttled[@]} -gt 0 ] || die "-L throttles loop devices: select raw-loop or cfs-loop"
fi

# name rw bs qd jobs layout (layout: 1j = own 1 ws file/region per job,
# one = regions of a quarter in one file, spread = a quarter-size file per job)
cases=(
	"rr4k-qd32 randread 4k 32 1 1j"
	"rw4k-qd32 randwrite 4k 32 1 1j"
	"rr4k-qd32-2j randread 4k 32 2 1j"
	"rw4k-qd32-2j randwrite 4k 32 2 1j"
	"sr1m-qd8 read 1m 8 1 1j"
	"sw1m-qd8 write 1m 8 1 1j"
	"rr4k-qd1 randread 4k 1 1 1j"
	"rw4k-qd1 randwrite 4k 1 1 1j"
	"rw2k-qd32 randwrite 2k 32 1 1j"
	"mw-one randwrite 4k 8 4 one"
	"mw-spread randwrite 4k 8 4 spread"
)

fio_where() {	# target layout -> fio arguments naming the files
	local t=$1 layout=$2 dev
	case $t in
	raw-file | raw-loop)
		dev=$raw_img
		[ "$t" = raw-loop ] && dev=$raw_loop
		case $layout in
		1j) echo "--filename=$dev --size=$wsb --offset_increment=$wsb" ;;
		*) echo "--filename=$dev --size=$quarter --offset_increment=$quarter" ;;
		esac ;;
	*)
		local d=$ext4_dir
		[ "$t" = ext4 ] || d=${mnt[$t]}
		case $layout in
		1j) echo "--directory=$d --filename_format=c\$jobnum --size=$wsb" ;;
		one) echo "--filename=$d/c0 --size=$quarter --offset_increment=$quarter" ;;
		spread) echo "--directory=$d --filename_format=m\$jobnum --size=$quarter" ;;
		esac ;;
	esac
}

cpu_ticks() {	# pid -> utime+stime of the whole process (all threads)
	awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}
busy_ticks() {	# -> the machine's busy time: user nice system irq softirq
	awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat
}
hz=$(getconf CLK_TCK)

run_fio() {	# target case-fields... -> "iops MBps p50 p99 daemon_cpu machine_cpu" (us per I/O)
	local t=$1 rw=$2 bs=$3 qd=$4 jobs=$5 layout=$6 json=$work/fio.json where
	local c0=0 c1=0 p=${pid[$1]:-} b0 b1
	where=$(fio_where "$t" "$layout")
	[ -z "$p" ] || c0=$(cpu_ticks "$p")
	b0=$(busy_ticks)
	# shellcheck disable=SC2086
	fio --name=perf --ioengine=io_uring --direct=1 --rw="$rw" --bs="$bs" \
		--iodepth="$qd" --numjobs="$jobs" --group_reporting --runtime="$runtime" \
		--time_based --norandommap --randrepeat=0 --lat_percentiles=1 \
		--allow_file_create=0 --fallocate=none $where $fio_extra \
		--output-format=json --output="$json" >/dev/null
	b1=$(busy_ticks)
	[ -z "$p" ] || c1=$(cpu_ticks "$p")
	python3 - "$json" "$((c1 - c0))" "$hz" "$p" "$((b1 - b0))" <<-'EOF'
	import json, sys
	text = open(sys.argv[1]).read()
	job = json.loads(text[text.find("{"):])["jobs"][0]	# skip any warning line
	d = job["write"] if job["write"]["io_bytes"] > job["read"]["io_bytes"] else job["read"]
	pct = d["lat_ns"].get("percentile", {})
	ios = job["read"]["total_ios"] + job["write"]["total_ios"]
	ticks, hz = int(sys.argv[2]), int(sys.argv[3])
	cpu = ticks * 1e6 / hz / ios if sys.argv[4] and ios else float("nan")
	busy = int(sys.argv[5]) * 1e6 / hz / ios if ios else float("nan")
	print("%.0f %.1f %.1f %.1f %.2f %.2f" % (d["iops"], d["bw_bytes"] / 1e6,
	      pct.get("50.000000", 0) / 1e3, pct.get("99.000000", 0) / 1e3, cpu, busy))
	EOF
}

rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')
git -C "$root" diff --quiet HEAD -- fs iopath 2>/dev/null || rev="$rev+dirty(fs,iopath)"
{
	echo "# perf.sh $stamp: kernel $(uname -r), $(nproc) cpus ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(fio --version), git $rev"
	echo "# store dir $dir ($(df -T "$dir" | awk 'NR==2 { print $2 " on " $1 }')), working set $ws per job, runtime ${runtime}s, reps $reps"
	[ -z "$throttle_mbps" ] || echo "# loop devices throttled to $throttle_mbps MB/s each way (blkio.throttle)"
	[ "$swap_stores" = 0 ] || echo "# stores of cfs-img and cfsB-img swapped at every repetition (-S)"
	echo "# fio extra: ${fio_extra:-none}; chunkfs -o ${cfs_opts:-(defaults)}; cfsB: ${cfsb_bin:-same binary} -o ${cfsb_opts:-(defaults)}; cfsC: ${cfsc_bin:-same binary} -o ${cfsc_opts:-(defaults)}"
	echo "target,case,rep,iops,MBps,lat_p50_us,lat_p99_us,daemon_cpu_us_per_io,machine_cpu_us_per_io"
} >"$out"

for c in "${cases[@]}"; do
	read -r name rw bs qd jobs layout <<<"$c"
	want_case "$name" || continue
	for rep in $(seq 1 "$reps"); do
		[ "$swap_stores" = 0 ] || [ "$rep" = 1 ] || swap_cfs_stores
		# rotate the order of the targets from one repetition to the next
		order=("${targets[@]:$(((rep - 1) % ${#targets[@]}))}" "${targets[@]:0:$(((rep - 1) % ${#targets[@]}))}")
		for t in "${order[@]}"; do
			if [ "$layout" = spread ] && [[ $t == raw-* ]]; then
				continue
			fi
			res=$(run_fio "$t" "$rw" "$bs" "$qd" "$jobs" "$layout")
			echo "$t,$name,$rep,${res// /,}" >>"$out"
			echo "  $name rep $rep $t: $res" >&2
		done
	done
done

# ---- medians, ratios -------------------------------------------------------------
python3 - "$out" <<-'EOF' | tee "$table"
import csv, statistics, sys
rows = [l for l in open(sys.argv[1]) if not l.startswith("#")]
head = [l.rstrip("\n") for l in open(sys.argv[1]) if l.startswith("#")]
data = {}
for r in csv.DictReader(rows):
    data.setdefault((r["case"], r["target"]), []).append(r)
def med(case, t, f):
    v = [float(r[f]) for r in data.get((case, t), [])]
    return statistics.median(v) if v else None
base = {"raw-file": None, "raw-loop": None, "ext4": "raw-file", "cfs-img": "raw-file",
        "cfs-loop": "raw-loop", "cfsB-img": "raw-file", "cfsC-img": "raw-file",
        "tmpfs": "raw-file", "cfs-ram": "raw-file", "fuse-null": "raw-file"}
order = ["raw-file", "raw-loop", "ext4", "cfs-img", "cfs-loop", "cfsB-img", "cfsC-img",
         "tmpfs", "cfs-ram", "fuse-null"]
cases = []
for (c, t) in data:
    if c not in cases:
        cases.append(c)
for h in head:
    print(h)
print()
print("%-13s %-9s %9s %8s %-20s %7s %7s %11s %7s %7s" % ("case", "target", "IOPS", "MB/s",
      "ratio", "p50 us", "p99 us", "p50/p99-raw", "cpu/io", "all/io"))
for c in cases:
    for t in order:
        if (c, t) not in data:
            continue
        iops, mbps = med(c, t, "iops"), med(c, t, "MBps")
        p50, p99 = med(c, t, "lat_p50_us"), med(c, t, "lat_p99_us")
        cpu = med(c, t, "daemon_cpu_us_per_io")
        busy = med(c, t, "machine_cpu_us_per_io") if "machine_cpu_us_per_io" in data[(c, t)][0] else None
        b = base[t]
        if c == "mw-spread" and b:
            b = None
        ratio = lat = ""
        if b and (c, b) in data:
            ratio = "%.2fx" % (mbps / med(c, b, "MBps"))
            lat = "%+.0f/%.1fx" % (p50 - med(c, b, "lat_p50_us"), p99 / med(c, b, "lat_p99_us"))
        if c == "mw-one" and (("mw-spread", t) in data):
            ratio += " (%.2fx spread)" % (mbps / med("mw-spread", t, "MBps"))
        print("%-13s %-9s %9.0f %8.1f %-20s %7.0f %7.0f %11s %7s %7s" % (c, t, iops, mbps, ratio,
              p50, p99, lat, "" if cpu != cpu else "%.1f" % cpu,
              "" if busy is None else "%.1f" % busy))
print()
print("medians of the repetitions; ratio = MB/s vs raw-file (ext4, cfs-img, cfsB/C-img,")
print("tmpfs, cfs-ram, fuse-null) or raw-loop (cfs-loop); p50/p99-raw = p50 minus raw, p99 over raw;")
print("cpu/io = the FUSE daemon's (chunkfs, fuse_null) utime+stime per I/O in microseconds")
print("(1/CLK_TCK resolution); all/io = the whole machine's busy CPU (user, nice, system, irq,")
print("softirq: fio, kernel, daemon) per I/O in microseconds")
EOF
echo "raw runs: $out; table: $table" >&2
