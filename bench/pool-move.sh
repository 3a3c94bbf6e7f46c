#!/usr/bin/env bash
# bench/pool-move.sh — what moving a chunk between the stores of a pool
# costs (fs/POOLS.md, "Moving a chunk online"). A pool of two stores, image
# files on the same disk, written in full by mkchunkfs; the units a move
# frees are discarded (holes punched in the image), so the next move into
# them writes into holes. Three parts:
#   throughput  a chunk of -s bytes, written in full, moved to the other
#               store with `chunkfs move --wait` (no rate limit), against
#               dd iflag=direct oflag=direct conv=fsync of the same number
#               of bytes between two files of that size on the same disk,
#               with bs=1M and bs=256K, and with bs=1M into a destination
#               punched to holes first (as a store's image file is where the
#               units a move freed were discarded) and with oflag=dsync (a
#               flush per MiB, as the mover's durable switch per unit); all
#               alternate (rotated order, each repetition the other
#               direction); the move's bandwidth is the daemon's own
#               (user.chunkfs.move rate=, the copy and the switches up to
#               the last durable commit) and the wall time of `chunkfs move`
#               (which polls every 200 ms);
#   foreground  fio 4 KiB randrw QD16 O_DIRECT on another chunk of the pool
#               (on the first store) for -r seconds: alone, while the big
#               chunk moves back and forth unthrottled, and while it moves
#               with --rate at half the store's bandwidth (dd bs=1M's median
#               of the throughput part, or -R); IOPS and p99 completion
#               latency against the run without a move, rotated order;
#   memory      a fresh daemon on a second pool of sparse stores: a chunk of
#               256 MiB written in full, then a sparse chunk of -S bytes
#               (default 100G) with -W bytes (default 4G) written spread
#               over it (1 MiB every S/W MiB); each moved while VmRSS is
#               sampled every 0.1 s and VmHWM is reset before the move
#               (/proc/PID/clear_refs 5): the peak during each move against
#               the daemon before it.
#
# usage: bench/pool-move.sh [-n reps] [-s size] [-r seconds] [-R rate] [-S size] [-W bytes]
#                           [-p parts] [-l] [-B dir] [-O opts] [-d dir] [-o dir]
#   -n  repetitions (default 5)            -s  the moved chunk (default 2G)
#   -r  seconds per fio run (default 10)   -R  the limited move's rate, e.g. 400M
#                                              (default: half of dd bs=1M's median)
#   -S  the sparse chunk (default 100G)    -W  bytes written in it (default 4G)
#   -p  parts, comma-separated (default throughput,foreground,memory)
#   -l  the second store of the throughput and foreground parts on a loop
#       device (losetup --direct-io=on) over its image
#   -O  mount options for the pool's daemons, e.g. nodiscard (the units a
#       move frees keep their blocks in the image, so the next move into
#       them writes into allocated space, as dd bs=1M does)
#   -B  another build's programs (a directory with chunkfs, e.g. one made
#       from main): the throughput part also moves with its daemon
#       ("move-B"), each move on a fresh mount of the pool with its daemon
# Every move of the throughput part, and every foreground case with moves, is
# followed by an unmount and mount (timed apart in the throughput part,
# "settle"): the discards of the moved chunk's source, which wait during a
# move, are done by then and do not slow the next timed step.
#   -d  directory on a disk filesystem (default /var/tmp)
#   -o  result directory (default bench/results/pool-move-<time>)
# Prints a summary (also summary.txt); lines starting "goal " compare with
# the goals: move >= 0.8x of dd bs=1M, foreground IOPS with the rate limit
# >= 0.7x of the run without a move. Environment: BUILD (default release),
# CFS_BIN (the programs measured; default build/$BUILD).
# Needs root, fio, python3, getfattr; make first. Take
# flock /run/lock/chunkfs-bench.lock around it.
set -euo pipefail

reps=5
size=2G
runtime=10
rate=
sparse_size=100G
sparse_written=4G
parts=throughput,foreground,memory
dir=/var/tmp
resdir=
loop=0
other_bin=
mount_opts=
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-release}
BENCH_NAME="pool-move"
. "$root/bench/lib.sh"

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }
while getopts "n:s:r:R:S:W:p:lB:O:d:o:h" opt; do
	case $opt in
	n) reps=$OPTARG ;;
	s) size=$OPTARG ;;
	r) runtime=$OPTARG ;;
	R) rate=$OPTARG ;;
	S) sparse_size=$OPTARG ;;
	W) sparse_written=$OPTARG ;;
	p) parts=$OPTARG ;;
	l) loop=1 ;;
	B) other_bin=$OPTARG ;;
	O) mount_opts=$OPTARG ;;
	d) dir=$OPTARG ;;
	o) resdir=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
want() { [[ ",$parts," == *",$1,"* ]]; }
[ "$(id -u)" -eq 0 ] || bench_die "needs root (FUSE mounts)"
for t in fio python3 getfattr setfattr; do
	command -v $t >/dev/null || bench_die "needs $t"
done
bin=${CFS_BIN:-$root/build/$BUILD}
[ -x "$bin/chunkfs" ] && [ -x "$bin/mkchunkfs" ] || bench_die "make first (no $bin/chunkfs)"

MiB=1048576
bytes=$(numfmt --from=iec "$size")
sparse_bytes=$(numfmt --from=iec "$sparse_size")
sparse_w=$(numfmt --from=iec "$sparse_written")
fg_bytes=$((256 * MiB))
[ $((bytes % MiB)) = 0 ] && [ $((sparse_w % MiB)) = 0 ] || bench_die "sizes in whole MiB"
[ "$sparse_w" -lt "$sparse_bytes" ] || bench_die "-W must be below -S"

stamp=$(date -u +%Y%m%d-%H%M%S)
[ -n "$resdir" ] || resdir=$root/bench/results/pool-move-$stamp
mkdir -p "$resdir"
resdir=$(cd "$resdir" && pwd)
work=$(mktemp -d "$dir/cfs-pool-move.XXXXXX")
trap 'bench_cleanup; rm -rf "$work"' EXIT
trap 'exit 143' TERM INT
# Copies: a rebuild in the tree during the run does not change what is measured.
cp "$bin/chunkfs" "$bin/mkchunkfs" "$work/"
cfs=$work/chunkfs
if [ -n "$other_bin" ]; then
	[ -x "$other_bin/chunkfs" ] || bench_die "no $other_bin/chunkfs"
	cp "$other_bin/chunkfs" "$work/chunkfs-B"
	echo "move-B: $other_bin/chunkfs ($(md5sum <"$other_bin/chunkfs" | cut -c1-12))" >>"$resdir/system.txt"
fi
bench_sysinfo "$root" "$dir" >"$resdir/system.txt"
echo "command: $0 $*" >>"$resdir/system.txt"

mnt=$work/mnt
where() { getfattr --absolute-names --only-values -n user.chunkfs.store "$1"; }
progress() { getfattr --absolute-names --only-values -n user.chunkfs.move "$1"; }
field() { sed -nE "s/.*(^| )$1=([^ ]*).*/\2/p"; } # field NAME <<< "a=1 b=2"
fill() { # file bytes: written in full with 1 MiB O_DIRECT writes
	fio --name=fill --filename="$1" --size="$2" --rw=write --bs=1M --direct=1 \
		--ioengine=io_uring --iodepth=8 --output=/dev/null || bench_die "fill $1"
}
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
other() { [ "$1" = st0 ] && echo st1 || echo st0; }

# move FILE STORE [RATE]: chunkfs move --wait; prints "wall_s daemon_Bps moved_bytes"
move() {
	local t0 t1 p
	t0=$(now)
	"$cfs" move ${3:+--rate "$3"} "$1" "$2" >"$work/move.out" 2>&1 ||
		bench_die "chunkfs move $1 $2: $(cat "$work/move.out")"
	t1=$(now)
	p=$(progress "$1")
	[ "$(where "$1")" = "$2" ] || bench_die "after the move $1 is on $(where "$1"), not $2"
	echo "$(calc "$t1 - $t0") $(field rate <<<"$p") $(field "done" <<<"$p")"
}

# ---- the pool of the throughput and foreground parts ----------------------------------------
if want throughput || want foreground; then
	store_bytes=$((bytes + fg_bytes + 1024 * MiB))
	bench_log "two stores of $((store_bytes / MiB)) MiB, written in full"
	"$work/mkchunkfs" -q -s "$store_bytes" -L st0 "$work/st0.img" >/dev/null
	st1=$work/st1.img
	if [ "$loop" = 1 ]; then
		truncate -s "$store_bytes" "$st1"
		bench_loop_attach "$st1"
		st1=$BENCH_LOOP
		echo "second store: $st1 (loop device, direct I/O) over $work/st1.img" >>"$resdir/system.txt"
	fi
	size_arg=(-s "$store_bytes")
	[ "$loop" = 0 ] || size_arg=() # the whole device
	"$work/mkchunkfs" -q "${size_arg[@]}" -L st1 --join "$work/st0.img" "$st1" >/dev/null
	pool=$work/st0.img,$st1
	bench_cfs_mount "$cfs" "$pool" "$mnt" ${mount_opts:+-o "$mount_opts"}
	pid=$BENCH_PID
	mkdir "$mnt/m" "$mnt/fg"
	setfattr -n user.chunkfs.store -v st0 "$mnt/m"
	setfattr -n user.chunkfs.store -v st0 "$mnt/fg"
	chunk=$mnt/m/chunk
	bench_log "the chunk: $size written in full"
	fill "$chunk" "$bytes"
	fill "$mnt/fg/data" "$fg_bytes"
	[ "$(where "$chunk")" = st0 ] || bench_die "the chunk is on $(where "$chunk"), not st0"
fi

# remount EXE: the pool mounted again by the chunkfs EXE
remount() {
	bench_undo "bench_umount '$mnt' $pid"
	bench_cfs_mount "$1" "$pool" "$mnt" ${mount_opts:+-o "$mount_opts"}
	pid=$BENCH_PID
}

# ---- throughput ------------------------------------------------------------------------------
if want throughput; then
	fill "$work/dd-a" "$bytes"
	fill "$work/dd-b" "$bytes"
	echo "rep,what,direction,seconds,MBps,daemon_MBps" >"$resdir/throughput.csv"
	whats=(move dd-1M dd-256K dd-1M-holes dd-1M-dsync)
	[ -z "$other_bin" ] || whats+=(move-B)
	for ((r = 1; r <= reps; r++)); do
		for what in $(bench_rotate $((r - 1)) "${whats[@]}"); do
			if [ -n "$other_bin" ] && [ "$what" = move ]; then
				remount "$cfs"
			elif [ "$what" = move-B ]; then
				remount "$work/chunkfs-B"
			fi
			if [[ $what == move* ]]; then
				to=$(other "$(where "$chunk")")
				read -r secs dbps moved < <(move "$chunk" "$to")
				[ "$moved" = "$bytes" ] || bench_die "the move copied $moved bytes, not $bytes"
				mbps=$(calc "$bytes / $secs / 1000000")
				echo "$r,$what,to-$to,$secs,$mbps,$(calc "$dbps / 1000000")" >>"$resdir/throughput.csv"
				# The discards of the freed source (held during a move,
				# or still queued) must not land on the next timed step:
				# an unmount does them all. Its time is kept apart.
				exe=$cfs
				[ "$what" = move-B ] && exe=$work/chunkfs-B
				t0=$(now)
				remount "$exe"
				settle=$(calc "$(now) - $t0")
				echo "$r,$what-settle,to-$to,$settle,," >>"$resdir/throughput.csv"
				bench_log "rep $r: $what to $to: $(printf %.2f "$secs") s, daemon $((dbps / 1000000)) MB/s; unmount and mount after it $(printf %.2f "$settle") s"
			else
				src=$work/dd-a dst=$work/dd-b
				[ $((r % 2)) = 0 ] && src=$work/dd-b dst=$work/dd-a
				bs=${what#dd-} oflag=direct
				case $what in
				dd-1M-holes) # the destination as the mover finds a store's freed units
					bs=1M
					fallocate -p -o 0 -l "$bytes" "$dst" ;;
				dd-1M-dsync) bs=1M oflag=direct,dsync ;; # a flush per MiB
				esac
				t0=$(now)
				dd if="$src" of="$dst" bs="$bs" iflag=direct oflag="$oflag" \
					conv=notrunc,fsync status=none || bench_die "dd $what"
				secs=$(calc "$(now) - $t0")
				mbps=$(calc "$bytes / $secs / 1000000")
				echo "$r,$what,$(basename "$src")-to-$(basename "$dst"),$secs,$mbps," >>"$resdir/throughput.csv"
				bench_log "rep $r: $what: $(printf %.2f "$secs") s"
			fi
		done
	done
	[ -z "$other_bin" ] || remount "$cfs"
fi

# ---- foreground load ---------------------------------------------------------------------------
fio_fg() { # out.json
	fio --name=fg --filename="$mnt/fg/data" --size="$fg_bytes" --rw=randrw --bs=4k \
		--direct=1 --ioengine=io_uring --iodepth=16 --runtime="$runtime" --time_based \
		--output-format=json --output="$1" || bench_die "fio on the foreground chunk"
}
# the big chunk moved back and forth until $work/stop exists (the last move ends)
mover_loop() { # rate (or "")
	local n=0
	while [ ! -e "$work/stop" ]; do
		move "$chunk" "$(other "$(where "$chunk")")" ${1:+"$1"} >>"$work/moves.log"
		n=$((n + 1))
	done
	echo "$n" >"$work/moves.count"
}
if want foreground; then
	if [ -z "$rate" ]; then
		rate=$(python3 - "$resdir/throughput.csv" <<'PY'
import csv, statistics, sys
try:
    v = [float(r["MBps"]) for r in csv.DictReader(open(sys.argv[1])) if r["what"] == "dd-1M"]
except OSError:
    v = []
print("%dM" % (statistics.median(v) * 1e6 / 2 / 1048576) if v else "")
PY
)
		[ -n "$rate" ] || bench_die "no dd bs=1M bandwidth measured: give -R"
	fi
	echo "rate for the limited moves: $rate" >>"$resdir/system.txt"
	echo "rep,case,iops,read_iops,write_iops,read_p99_us,write_p99_us,moves,move_MBps" >"$resdir/foreground.csv"
	for ((r = 1; r <= reps; r++)); do
		for c in $(bench_rotate $((r - 1)) none move rate); do
			rm -f "$work/stop" "$work/moves.log" "$work/moves.count"
			touch "$work/moves.log"
			ml=
			if [ "$c" != none ]; then
				mover_loop "$([ "$c" = rate ] && echo "$rate")" &
				ml=$!
				bench_defer "touch '$work/stop'; wait $ml 2>/dev/null"
				sleep 0.5
			fi
			fio_fg "$work/fg.json"
			n=0
			if [ -n "$ml" ]; then
				bench_undo "touch '$work/stop'; wait $ml 2>/dev/null"
				n=$(cat "$work/moves.count")
				# The moves' discards (held while they ran) are done
				# before the next case: an unmount does them all.
				remount "$cfs"
			fi
			line=$(python3 - "$work/fg.json" "$work/moves.log" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
r, w = j["read"], j["write"]
p99 = lambda d: d["clat_ns"]["percentile"]["99.000000"] / 1000
moves = [l.split() for l in open(sys.argv[2]) if l.strip()]
mbps = sum(float(m[1]) for m in moves) / len(moves) / 1e6 if moves else 0
print("%.0f,%.0f,%.0f,%.1f,%.1f,%d,%.0f" % (r["iops"] + w["iops"], r["iops"], w["iops"],
      p99(r), p99(w), len(moves), mbps))
PY
)
			echo "$r,$c,$line" >>"$resdir/foreground.csv"
			bench_log "rep $r: foreground with $c: $line"
		done
	done
fi
if want throughput || want foreground; then
	bench_undo "bench_umount '$mnt' $pid"
	[ "$loop" = 0 ] || bench_undo "losetup -d $st1 2>/dev/null"
	rm -f "$work/st0.img" "$work/st1.img" "$work/dd-a" "$work/dd-b"
fi

# ---- memory --------------------------------------------------------------------------------
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
if want memory; then
	sb=$((sparse_w + fg_bytes + 2048 * MiB))
	[ "$sb" -gt $((sparse_bytes + MiB * 1024)) ] || sb=$((sparse_bytes + MiB * 1024))
	"$work/mkchunkfs" -q --sparse -s "$sb" -L st0 "$work/sp0.img" >/dev/null
	"$work/mkchunkfs" -q --sparse -s "$sb" -L st1 --join "$work/sp0.img" "$work/sp1.img" >/dev/null
	bench_cfs_mount "$cfs" "$work/sp0.img,$work/sp1.img" "$mnt"
	pid=$BENCH_PID
	setfattr -n user.chunkfs.store -v st0 "$mnt"
	fill "$mnt/small" "$fg_bytes"
	truncate -s "$sparse_bytes" "$mnt/big"
	stride=$((sparse_bytes / (sparse_w / MiB)))
	bench_log "the sparse chunk: $sparse_size, 1 MiB written every $((stride / MiB)) MiB"
	fio --name=spread --filename="$mnt/big" --size="$sparse_bytes" --io_size="$sparse_w" \
		--rw=write:$((stride - MiB)) --bs=1M --direct=1 --ioengine=io_uring --iodepth=8 \
		--output=/dev/null || bench_die "fio on the sparse chunk"
	echo "chunk,size,written,rss_before_kB,hwm_during_kB,rss_max_sampled_kB,rss_after_kB,seconds,moved_bytes" \
		>"$resdir/memory.csv"
	for c in small big; do
		f=$mnt/$c
		sync
		before=$(status_kb "$pid" VmRSS)
		echo 5 >"/proc/$pid/clear_refs" # VmHWM := VmRSS
		(while :; do status_kb "$pid" VmRSS; sleep 0.1; done >"$work/rss.samples") &
		sampler=$!
		read -r secs _ moved < <(move "$f" st1)
		kill "$sampler"
		wait "$sampler" 2>/dev/null || true
		hwm=$(status_kb "$pid" VmHWM)
		after=$(status_kb "$pid" VmRSS)
		smax=$(sort -n "$work/rss.samples" | tail -n 1)
		echo "$c,$(stat -c %s "$f"),$(($(stat -c %b "$f") * 512)),$before,$hwm,$smax,$after,$secs,$moved" \
			>>"$resdir/memory.csv"
		bench_log "move of $c: VmRSS $before kB before, VmHWM $hwm kB during, $after kB after ($secs s)"
	done
	bench_undo "bench_umount '$mnt' $pid"
fi

python3 - "$resdir" <<'PY' | tee "$resdir/summary.txt"
import csv, os, statistics, sys
D = sys.argv[1]
med = statistics.median
def rows(name):
    p = os.path.join(D, name)
    return list(csv.DictReader(open(p))) if os.path.exists(p) else []
t = rows("throughput.csv")
if t:
    print("throughput: MB/s, medians of %d repetitions (min-max)" % len({r["rep"] for r in t}))
    mb = {}
    moves = [w for w in ("move", "move-B") if any(r["what"] == w for r in t)]
    dds = [w for w in ("dd-1M", "dd-256K", "dd-1M-holes", "dd-1M-dsync") if any(r["what"] == w for r in t)]
    for what in dds + moves:
        v = [float(r["MBps"]) for r in t if r["what"] == what]
        mb[what] = med(v)
        print("  %-22s %8.0f  (%.0f-%.0f)" % (what + (" (wall)" if what.startswith("move") else ""),
                                            med(v), min(v), max(v)))
        if what.startswith("move"):
            d = [float(r["daemon_MBps"]) for r in t if r["what"] == what]
            mb[what + " daemon"] = med(d)
            print("  %-22s %8.0f  (%.0f-%.0f)" % (what + " (daemon rate)", med(d), min(d), max(d)))
    for w in moves:
        for k, name in ((w + " daemon", w + " (daemon rate)"), (w, w + " (wall)")):
            print("  %s / %s" % (name, ", / ".join("%s %.2fx" % (d, mb[k] / mb[d]) for d in dds)))
    for w in moves:
        v = [float(r["seconds"]) for r in t if r["what"] == w + "-settle"]
        if v:
            print("  %s: unmount and mount after it (its discards done) %.1f s (%.1f-%.1f)"
                  % (w, med(v), min(v), max(v)))
    if "move-B" in mb:
        for k in ("", " daemon"):
            print("  move / move-B%s %.2fx" % (k and " (daemon rate)" or " (wall)", mb["move" + k] / mb["move-B" + k]))
    g = mb["move"] / mb["dd-1M"]
    print("goal move (wall) / dd bs=1M %.2fx (>= 0.8x): %s" % (g, "met" if g >= 0.8 else "NOT met"))
f = rows("foreground.csv")
if f:
    print("foreground: fio 4 KiB randrw QD16 O_DIRECT on another chunk, medians of %d repetitions"
          % len({r["rep"] for r in f}))
    base = med(float(r["iops"]) for r in f if r["case"] == "none")
    br = med(float(r["read_p99_us"]) for r in f if r["case"] == "none")
    bw = med(float(r["write_p99_us"]) for r in f if r["case"] == "none")
    print("  %-22s %9s %7s %12s %8s %13s %8s %6s %9s" % ("case", "IOPS", "ratio", "read p99 us", "ratio",
          "write p99 us", "ratio", "moves", "move MB/s"))
    for c, name in (("none", "no move"), ("move", "move, unthrottled"), ("rate", "move, --rate")):
        s = [r for r in f if r["case"] == c]
        i = med(float(r["iops"]) for r in s)
        rp = med(float(r["read_p99_us"]) for r in s)
        wp = med(float(r["write_p99_us"]) for r in s)
        mv = sum(int(r["moves"]) for r in s)
        ms = med(float(r["move_MBps"]) for r in s)
        print("  %-22s %9.0f %6.2fx %12.0f %7.2fx %13.0f %7.2fx %6d %9.0f" % (name, i, i / base, rp, rp / br,
              wp, wp / bw, mv, ms))
    g = med(float(r["iops"]) for r in f if r["case"] == "rate") / base
    print("goal foreground IOPS with --rate / without a move %.2fx (>= 0.7x): %s" % (g, "met" if g >= 0.7 else "NOT met"))
m = rows("memory.csv")
if m:
    print("memory: the daemon's VmRSS while a chunk moves (kB)")
    print("  %-6s %12s %12s %10s %10s %10s %10s %8s" % ("chunk", "size", "written", "before", "peak", "peak-before",
          "after", "seconds"))
    for r in m:
        print("  %-6s %12s %12s %10s %10s %10d %10s %8.1f" % (r["chunk"], r["size"], r["written"],
              r["rss_before_kB"], r["hwm_during_kB"], int(r["hwm_during_kB"]) - int(r["rss_before_kB"]),
              r["rss_after_kB"], float(r["seconds"])))
PY
echo "# results: $resdir"
