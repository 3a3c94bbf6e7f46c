#!/usr/bin/env bash
# bench/rbd.sh — chunkfs on a Ceph RBD store against fio's rbd engine
# (ioengine=rbd: librbd with nothing in between) on an image of the same
# size, in one throw-away cluster on this machine (tests/lib/ceph.sh), in the
# same run; then the takeover time of a store whose holder was killed -9.
#
# The I/O cases, each on a span of -w bytes written in full first (an RBD
# object never written reads as zeros without touching a disk): fio on a
# chunk file of the mount (io_uring, O_DIRECT) and fio's rbd engine on the
# first -w bytes of a second image of the same size, alternating which goes
# first from one repetition to the next; both with librbd's cache off
# (chunkfs turns it off itself; fio gets a ceph.conf with "rbd cache =
# false", so both measure the same librbd path):
#   rr4k-qd32  4 KiB random read, QD32    rw4k-qd32  4 KiB random write, QD32
#   rr4k-qd1   4 KiB random read, QD1     sr1m-qd8   1 MiB sequential read, QD8
#   sw1m-qd8   1 MiB sequential write, QD8
# Takeover (-t repetitions): the store is mounted by a daemon in a pid
# namespace of its own (two namespaces stand for two hosts, as in
# tests/integration/ceph_takeover.sh) with a write load running; kill -9 of
# that daemon, then at once `chunkfs -o takeover` in another namespace:
# the time from the kill to the end of the standby's first 4 KiB O_DIRECT
# write + fsync, and to its mount point alone. The standby is the holder
# killed in the next repetition.
#
# With -b, a second chunkfs build ("chunkfs-B", e.g. the tree before a
# change) is mounted on a third image of the same size and takes its turn in
# every repetition, so both builds and fio's rbd engine are measured in the
# same minutes: the order rotates over the three.
#
# Goals: 4 KiB QD32 at least 0.8x of fio's rbd engine, 4 KiB read QD1 p50
# at most 50 us above it, takeover under 5 s.
#
# usage: bench/rbd.sh [-n reps] [-r seconds] [-s size] [-w span] [-t reps]
#                     [-c case,...] [-o dir] [-d dir] [-C cluster-dir] [-F "fio args"]
#                     [-b dir]
#   -n  repetitions per case and target (default 5)
#   -r  seconds per fio run (default 10)
#   -s  size of both images (default 2G)
#   -w  span the cases run over (default 1G): the chunk file's size, and
#       fio's --size on the raw image
#   -t  takeover repetitions (default 7; 0: none)
#   -c  only these cases (names above; "takeover" for the takeover alone)
#   -o  result directory (default bench/results/rbd-<UTC time>): rbd.csv,
#       takeover.csv, summary.txt (also on stdout), system.txt, daemon logs
#   -d  scratch directory for the cluster (OSD block files grow by about
#       3 x (2 x span)) and the mounts (default /var/tmp)
#   -C  use the cluster in this directory (tests/ceph-cluster.sh start DIR
#       chunkfs) instead of starting one; its pool "chunkfs"
#   -F  extra fio arguments for both targets
#   -b  a second build's chunkfs and mkchunkfs (a directory), measured as
#       "chunkfs-B" beside CFS_BIN's
#   CFS_BIN=dir: chunkfs and mkchunkfs from there (default build/release)
# Needs root, fio with the rbd engine, Debian's ceph-mon, ceph-osd and
# ceph-common; exits 77 with a "skip: " line when something is missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
BENCH_NAME=rbd
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
# shellcheck source=tests/lib/ceph.sh
. "$root/tests/lib/ceph.sh"

reps=5 runtime=10 size=2G span=1G tk_reps=7 dir=/var/tmp
only='' resdir='' cluster='' fio_extra='' bin_b=''
usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }
while getopts "n:r:s:w:t:c:o:d:C:F:b:h" opt; do
	case $opt in
	n) reps=$OPTARG ;;
	r) runtime=$OPTARG ;;
	s) size=$OPTARG ;;
	w) span=$OPTARG ;;
	t) tk_reps=$OPTARG ;;
	c) only=$OPTARG ;;
	o) resdir=$OPTARG ;;
	d) dir=$OPTARG ;;
	C) cluster=$OPTARG ;;
	F) fio_extra=$OPTARG ;;
	b) bin_b=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

skip() { echo "skip: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (FUSE mounts, the cluster's daemons)"
for c in ceph-mon ceph-osd ceph rbd monmaptool ceph-authtool; do
	command -v $c >/dev/null || skip "Ceph is not installed ($c; Debian: ceph-mon ceph-osd ceph-common)"
done
command -v fio >/dev/null || skip "fio is not installed"
fio --enghelp=rbd >/dev/null 2>&1 || skip "this fio has no rbd engine"
command -v unshare >/dev/null || skip "needs unshare (util-linux)"
bin=${CFS_BIN:-$root/build/release}
for b in chunkfs mkchunkfs; do
	[ -x "$bin/$b" ] || bench_die "no $bin/$b (make)"
	[ -z "$bin_b" ] || [ -x "$bin_b/$b" ] || bench_die "no $bin_b/$b (-b)"
done

cases=(
	"rr4k-qd32 randread 4k 32"
	"rw4k-qd32 randwrite 4k 32"
	"rr4k-qd1 randread 4k 1"
	"sr1m-qd8 read 1m 8"
	"sw1m-qd8 write 1m 8"
)
want() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }
for c in ${only//,/ }; do
	[[ " rr4k-qd32 rw4k-qd32 rr4k-qd1 sr1m-qd8 sw1m-qd8 takeover " == *" $c "* ]] ||
		bench_die "unknown case '$c'"
done
want takeover || tk_reps=0

stamp=$(date -u +%Y%m%d-%H%M%S)
[ -n "$resdir" ] || resdir=$root/bench/results/rbd-$stamp
mkdir -p "$resdir"
resdir=$(cd "$resdir" && pwd)
work=$(mktemp -d "$dir/cfs-rbd.XXXXXX")
trap bench_cleanup EXIT
trap 'bench_log "interrupted: cleaning up"; exit 130' INT TERM
bench_defer "rm -rf '$work'"

# ---- the cluster and the two images -------------------------------------------------
pool=$CFS_RBD_POOL
if [ -n "$cluster" ]; then
	ceph_use "$(cd "$cluster" && pwd)"
	ceph_cmd mon stat >/dev/null 2>&1 || bench_die "no cluster answers in $cluster"
else
	t0=$SECONDS
	bench_defer "ceph_cluster_stop '$work/ceph'"
	ceph_cluster_start "$work/ceph" $$ || bench_die "the Ceph cluster did not start"
	ceph_pool_create "$pool" || bench_die "pool $pool not created"
	bench_log "cluster up in $((SECONDS - t0)) s"
fi
# fio's librbd with the cache off, as chunkfs's (backend_rbd.c)
fio_conf=$work/fio-ceph.conf
sed '/^\[client\]$/a rbd cache = false' "$CEPH_CONF" >"$fio_conf"
grep -q '^rbd cache = false' "$fio_conf" || printf '[client]\nrbd cache = false\n' >>"$fio_conf"

cfs_img=cfs-bench-$$ raw_img=raw-bench-$$ b_img=cfsb-bench-$$
src=rbd:$pool/$cfs_img src_b=rbd:$pool/$b_img
for i in $cfs_img $raw_img ${bin_b:+$b_img}; do
	rbd create --size "$size" "$pool/$i" || bench_die "rbd create $pool/$i"
	bench_defer "timeout 120 rbd rm --no-progress $pool/$i >/dev/null 2>&1"
done
"$bin/mkchunkfs" -q "$src" || bench_die "mkchunkfs $src"
[ -z "$bin_b" ] || "$bin_b/mkchunkfs" -q "$src_b" || bench_die "mkchunkfs $src_b"

bench_sysinfo "$root" "$dir" >"$resdir/system.txt"
{
	echo "ceph: $(ceph --version | cut -d' ' -f1-3), $CEPH_OSDS OSDs (BlueStore on sparse files in $dir), 3 replicas, 16 PGs"
	echo "images: $size each; span $span; runtime ${runtime}s; reps $reps; takeover reps $tk_reps"
	echo "fio extra: ${fio_extra:-none}"
	echo "chunkfs: $bin${bin_b:+; chunkfs-B: $bin_b}"
} >>"$resdir/system.txt"

mnt=$work/mnt
bench_cfs_mount "$bin/chunkfs" "$src" "$mnt"
cfs_pid=$BENCH_PID
chunk=$mnt/chunk
targets=(chunkfs fio-rbd)
if [ -n "$bin_b" ]; then
	mnt_b=$work/mnt-b
	bench_cfs_mount "$bin_b/chunkfs" "$src_b" "$mnt_b"
	cfs_pid_b=$BENCH_PID
	targets=(chunkfs chunkfs-B fio-rbd)
fi
hz=$(getconf CLK_TCK)
TIMEFORMAT='%U %S'
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# fio TARGET RW BS QD [extra...] -> "iops MBps p50 p99 daemon_cpu client_cpu"
# (CPU in us per I/O: the chunkfs daemon's; fio's own, with librbd's threads)
run_fio() {
	local t=$1 rw=$2 bs=$3 qd=$4 json=$work/fio.json c0=0 c1=0 pid=${cfs_pid_b:-}
	shift 4
	local where=(--filename="$chunk" --ioengine=io_uring --direct=1 --allow_file_create=0)
	[ "$t" = fio-rbd ] && where=(--ioengine=rbd --clientname=admin --pool="$pool" --rbdname="$raw_img")
	[ "$t" = chunkfs-B ] && where=(--filename="$mnt_b/chunk" --ioengine=io_uring --direct=1 --allow_file_create=0)
	[ "$t" = chunkfs ] && pid=$cfs_pid
	[ "$t" != fio-rbd ] && c0=$(cpu_ticks "$pid")
	# (bash's time: user and system time of fio and every thread it ran)
	# shellcheck disable=SC2086
	{ time CEPH_CONF=$fio_conf fio --name=rbd "${where[@]}" --rw="$rw" --bs="$bs" \
		--iodepth="$qd" --size="$span" --numjobs=1 --norandommap --randrepeat=0 \
		--lat_percentiles=1 $fio_extra "$@" --output-format=json --output="$json" \
		>/dev/null 2>"$work/fio.err"; } 2>"$work/fio.time" || { cat "$work/fio.err" >&2; return 1; }
	[ "$t" != fio-rbd ] && c1=$(cpu_ticks "$pid")
	python3 - "$json" "$((c1 - c0))" "$hz" "$t" "$(<"$work/fio.time")" <<-'EOF'
	import json, sys
	text = open(sys.argv[1]).read()
	job = json.loads(text[text.find("{"):])["jobs"][0]	# skip any warning line
	d = job["write"] if job["write"]["io_bytes"] > job["read"]["io_bytes"] else job["read"]
	pct = d["lat_ns"].get("percentile", {})
	ios = job["read"]["total_ios"] + job["write"]["total_ios"]
	ticks, hz = int(sys.argv[2]), int(sys.argv[3])
	daemon = ticks * 1e6 / hz / ios if sys.argv[4] != "fio-rbd" and ios else float("nan")
	client = sum(map(float, sys.argv[5].split())) * 1e6 / ios if ios else float("nan")
	print("%.0f %.1f %.1f %.1f %.2f %.2f" % (d["iops"], d["bw_bytes"] / 1e6,
	      pct.get("50.000000", 0) / 1e3, pct.get("99.000000", 0) / 1e3, daemon, client))
	EOF
}

# ---- the I/O cases -----------------------------------------------------------------------
csv=$resdir/rbd.csv
echo "target,case,rep,order,iops,MBps,lat_p50_us,lat_p99_us,daemon_cpu_us_per_io,client_cpu_us_per_io,load1" >"$csv"
io_cases=0
for c in "${cases[@]}"; do want "${c%% *}" && io_cases=1; done
if [ "$io_cases" = 1 ]; then
	# Both spans written in full, 1 MiB at QD8, so no case allocates objects
	# or reads holes.
	fallocate -l "$span" "$chunk" || bench_die "fallocate $span on the mount"
	[ -z "$bin_b" ] || fallocate -l "$span" "$mnt_b/chunk" || bench_die "fallocate $span on B's mount"
	for t in "${targets[@]}"; do
		bench_log "filling $span on $t"
		run_fio $t write 1m 8 >/dev/null
	done
fi
for c in "${cases[@]}"; do
	read -r name rw bs qd <<<"$c"
	want "$name" || continue
	for rep in $(seq "$reps"); do
		order=1
		for t in $(bench_rotate "$rep" "${targets[@]}"); do
			load=$(cut -d' ' -f1 /proc/loadavg)
			res=$(run_fio "$t" "$rw" "$bs" "$qd" --runtime="$runtime" --time_based)
			echo "$t,$name,$rep,$order,${res// /,},$load" >>"$csv"
			bench_log "  $name rep $rep $t: $res (load $load)"
			order=$((order + 1))
		done
	done
done
bench_undo "bench_umount '$mnt' $cfs_pid"
cp "$mnt.log" "$resdir/chunkfs.log" 2>/dev/null || true
if [ -n "$bin_b" ]; then
	bench_undo "bench_umount '$mnt_b' $cfs_pid_b"
	cp "$mnt_b.log" "$resdir/chunkfs-B.log" 2>/dev/null || true
fi

# ---- takeover ----------------------------------------------------------------------------
tk_csv=$resdir/takeover.csv
echo "rep,kill_to_mounted_ms,kill_to_first_write_ms" >"$tk_csv"
ns_mount() { # dir [options]: chunkfs in a pid namespace of its own; sets NS_PID (the wrapper)
	mkdir -p "$1"
	unshare --pid --fork --kill-child "$bin/chunkfs" -f "$src" "$1" ${2:+-o "$2"} >>"$1.log" 2>&1 &
	NS_PID=$!
	bench_defer "bench_umount '$1' $NS_PID"
}
now_ns() { date +%s%N; }
if [ "$tk_reps" -gt 0 ]; then
	head -c 4096 /dev/urandom >"$work/block"
	ns_mount "$work/tk0"
	bench_wait_mount "$work/tk0" "$NS_PID" "$work/tk0.log" || bench_die "chunkfs did not mount $src"
	holder=$work/tk0 holder_ns=$NS_PID
	for rep in $(seq "$tk_reps"); do
		standby=$work/tk$rep
		# the holder busy: a database writing and syncing when its host dies
		fio --name=load --filename="$holder/load" --ioengine=io_uring --direct=1 --rw=randwrite \
			--bs=8k --iodepth=4 --size=64M --fsync=16 --time_based --runtime=60 \
			--output="$work/load.out" >/dev/null 2>&1 &
		load_pid=$!
		sleep 2
		daemon=$(pgrep -P "$holder_ns" -x chunkfs) || bench_die "the holder's daemon is gone"
		t0=$(now_ns)
		kill -9 "$daemon"
		ns_mount "$standby" takeover
		mounted=
		while :; do
			if bench_mounted "$standby"; then
				mounted=$(now_ns)
				break
			fi
			kill -0 "$NS_PID" 2>/dev/null || { cat "$standby.log" >&2; bench_die "the takeover failed"; }
			[ $((($(now_ns) - t0) / 1000000000)) -lt 60 ] || bench_die "no takeover in 60 s"
			sleep 0.01
		done
		dd if="$work/block" of="$standby/first-write-$rep" bs=4k oflag=direct conv=fsync status=none ||
			bench_die "the standby's first write failed"
		t1=$(now_ns)
		echo "$rep,$(((mounted - t0) / 1000000)),$(((t1 - t0) / 1000000))" >>"$tk_csv"
		bench_log "  takeover rep $rep: mounted $(((mounted - t0) / 1000000)) ms, first write $(((t1 - t0) / 1000000)) ms after the kill"
		kill "$load_pid" 2>/dev/null || true
		wait "$load_pid" 2>/dev/null || true
		bench_undo "bench_umount '$holder' $holder_ns" # the dead one's mount
		grep -q "taking over from" "$standby.log" || { cat "$standby.log" >&2; bench_die "the standby did not take over"; }
		holder=$standby holder_ns=$NS_PID
	done
	cat "$work"/tk*.log >"$resdir/takeover-daemons.log"
	bench_undo "bench_umount '$holder' $holder_ns"
fi

# ---- the summary -------------------------------------------------------------------------
python3 - "$csv" "$tk_csv" "$resdir/system.txt" <<-'EOF' | tee "$resdir/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
tk = list(csv.DictReader(open(sys.argv[2])))
med = statistics.median
def vals(t, c, f):
    return [float(r[f]) for r in rows if r["target"] == t and r["case"] == c]
def per_rep(c, f, t, u, op):
    """median over the repetitions of op(t's value, u's value) in the same repetition"""
    out = []
    for rep in sorted({r["rep"] for r in rows if r["case"] == c}):
        a = [float(r[f]) for r in rows if r["case"] == c and r["rep"] == rep and r["target"] == t]
        b = [float(r[f]) for r in rows if r["case"] == c and r["rep"] == rep and r["target"] == u]
        if a and b and (b[0] or op != "ratio"):
            out.append(a[0] / b[0] if op == "ratio" else a[0] - b[0])
    return med(out) if out else float("nan")
for l in open(sys.argv[3]):
    if l.startswith(("date", "git", "ceph", "images", "load", "chunkfs")):
        print("# " + l.rstrip())
mounts = [t for t in ("chunkfs", "chunkfs-B") if any(r["target"] == t for r in rows)]
print()
print("%-10s %-9s %9s %9s %6s %7s %9s %9s %9s %10s %8s %8s" % ("case", "target", "fio-rbd",
      "chunkfs", "ratio", "paired", "p50 rbd", "p50 cfs", "p50 diff", "p99 rbd/cfs", "cpu/io",
      "fio/io"))
goals = []
for c in ["rr4k-qd32", "rw4k-qd32", "rr4k-qd1", "sr1m-qd8", "sw1m-qd8"]:
    for t in mounts:
        if not vals(t, c, "iops") or not vals("fio-rbd", c, "iops"):
            continue
        f = "MBps" if c.endswith("qd8") else "iops"
        unit = " MB/s" if f == "MBps" else ""
        a, b = med(vals(t, c, f)), med(vals("fio-rbd", c, f))
        p50a, p50b = med(vals(t, c, "lat_p50_us")), med(vals("fio-rbd", c, "lat_p50_us"))
        p99a, p99b = med(vals(t, c, "lat_p99_us")), med(vals("fio-rbd", c, "lat_p99_us"))
        cpu = med(vals(t, c, "daemon_cpu_us_per_io"))
        cl_a, cl_b = med(vals(t, c, "client_cpu_us_per_io")), med(vals("fio-rbd", c, "client_cpu_us_per_io"))
        pr = per_rep(c, f, t, "fio-rbd", "ratio")
        print("%-10s %-9s %9.0f %9.0f %5.2fx %6.2fx %9.0f %9.0f %+9.0f %5.0f/%-5.0f %8.1f %4.1f/%-4.1f%s" % (
              c, t, b, a, a / b, pr, p50b, p50a, p50a - p50b, p99b, p99a, cpu, cl_b, cl_a, unit))
        if c in ("rr4k-qd32", "rw4k-qd32"):
            goals.append("%s: %s %.0f IOPS, fio rbd %.0f: %.2fx (paired %.2fx), goal 0.8x: %s" % (
                c, t, a, b, a / b, pr, "met" if a / b >= 0.8 else "NOT met"))
        if c == "rr4k-qd1":
            d = per_rep(c, "lat_p50_us", t, "fio-rbd", "diff")
            goals.append("rr4k-qd1: p50 %s %.0f us, fio rbd %.0f us: %+.0f us (paired %+.0f us), "
                         "goal +50 us: %s" % (t, p50a, p50b, p50a - p50b, d,
                                              "met" if p50a - p50b <= 50 else "NOT met"))
        if c in ("sr1m-qd8", "sw1m-qd8"):
            goals.append("%s: %s %.0f MB/s, fio rbd %.0f MB/s: %.2fx" % (c, t, a, b, a / b))
    if len(mounts) == 2 and vals("chunkfs", c, "iops") and vals("chunkfs-B", c, "iops"):
        f = "MBps" if c.endswith("qd8") else "iops"
        goals.append("%s: chunkfs / chunkfs-B %.2fx (paired), p50 chunkfs minus chunkfs-B %+.0f us "
                     "(paired)" % (c, per_rep(c, f, "chunkfs", "chunkfs-B", "ratio"),
                                   per_rep(c, "lat_p50_us", "chunkfs", "chunkfs-B", "diff")))
if tk:
    m = [float(r["kill_to_mounted_ms"]) for r in tk]
    w = [float(r["kill_to_first_write_ms"]) for r in tk]
    print()
    print("takeover, kill -9 of the holder to: mounted %.0f ms, first write + fsync %.0f ms "
          "(medians of %d; first write %.0f..%.0f ms)" % (med(m), med(w), len(w), min(w), max(w)))
    goals.append("takeover: %.0f ms from kill -9 to the standby's first write (median of %d), goal < 5 s: %s" % (
        med(w), len(w), "met" if med(w) < 5000 else "NOT met"))
print()
print("medians of the repetitions; ratio = chunkfs / fio's rbd engine (IOPS, MB/s at 1 MiB),")
print("paired = median of the per-repetition ratios (or differences); p50 diff = chunkfs minus")
print("fio rbd (us); cpu/io = the chunkfs daemon's CPU per I/O (us); fio/io = fio's own CPU per")
print("I/O, rbd/chunkfs (for the rbd engine it includes librbd's threads)")
print()
for g in goals:
    print("goal " + g)
EOF
echo "$(date -u '+%H:%M:%S') load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$resdir/system.txt"
bench_log "results in $resdir"
