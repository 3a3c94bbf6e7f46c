#!/usr/bin/env bash
# bench/scale.sh — large stores: what the daemon's memory, mount, snapshot,
# fsck and chunk allocation cost as a store grows to 100 TB, and whether a
# 4 KiB random read costs more in a 1 TiB chunk than in a 1 GiB one.
#
# For each store size (default 1T, 10T, 100T): mkchunkfs --sparse on an image
# file on a tmpfs of the script's own (ext4 caps a file at 16 TiB; a sparse
# tmpfs file takes memory only for what is written, and this kernel accepts
# O_DIRECT on tmpfs, so chunkfs opens it as it opens a disk image), mount,
# then chunks of 1 GiB, 10 GiB, 100 GiB and 1 TiB (1 TiB chunks until about
# 90% of the store is allocated) made with fallocate(1), each written in its
# first W MiB (sequential 1 MiB direct writes) and at 64 random 4 KiB places
# (partly written units: the written-state bitmaps). Then it measures:
#   rss_empty_kib, rss_kib       daemon VmRSS after mounting the empty store,
#                                and with every chunk allocated and written
#   alloc_s_<size>               fallocate time of the first chunk of a size
#   rr4k_small_iops, rr4k_large_iops
#                                fio 4 KiB random reads, QD32, 1 job, over the
#                                whole 1 GiB chunk and the whole largest chunk
#                                (mostly unwritten: the map lookup and zero
#                                fill), alternated, median of -n repetitions
#   umount_s                     umount until the daemon has exited (final
#                                snapshot written)
#   snapshot_bytes               the snapshot of the active half (mkchunkfs -D)
#   fsck_s, fsck_rss_kib         fsck.chunkfs -n: time and peak memory
#   mount_s, rss_mounted_kib     a remount: chunkfs started until the mount
#                                point is there, and VmRSS then
#
# usage: bench/scale.sh [-s sizes] [-n reps] [-r seconds] [-w MiB] [-d dir]
#                       [-B dir] [-M size] [-o csv]
#   -s  store sizes, comma-separated (default 1T,10T,100T)
#   -n  repetitions of the read case (default 3)
#   -r  seconds per fio run (default 5)
#   -w  MiB written at the start of each chunk (default 8)
#   -d  work directory (default /var/tmp); the tmpfs is mounted under it
#   -B  a directory with another build's chunkfs, mkchunkfs and fsck.chunkfs
#       (e.g. the previous commit's build/release): variant "B", the same
#       steps, run after "A" for each size
#   -M  largest store size for -B (default 10T: a daemon that keeps a record
#       per unit needs ~8 GB for 100 TB)
#   -o  CSV output (default bench/results/scale-<time>.csv): variant,store,
#       metric,value
#   CFS_BIN=dir: this build's binaries (default build/release of this tree)
# Needs root, fio, and memory for the tmpfs (what is written: ~W MiB a chunk).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
BENCH_NAME=scale
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

sizes=1T,10T,100T reps=3 runtime=5 wmib=8 dir=/var/tmp bdir= bmax=10T out=
while getopts "s:n:r:w:d:B:M:o:" opt; do
	case $opt in
	s) sizes=$OPTARG ;;
	n) reps=$OPTARG ;;
	r) runtime=$OPTARG ;;
	w) wmib=$OPTARG ;;
	d) dir=$OPTARG ;;
	B) bdir=$OPTARG ;;
	M) bmax=$OPTARG ;;
	o) out=$OPTARG ;;
	*) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || bench_die "needs root (mounts)"
command -v fio >/dev/null || bench_die "needs fio"
abin=${CFS_BIN:-$root/build/release}
for b in chunkfs mkchunkfs fsck.chunkfs; do
	[ -x "$abin/$b" ] || bench_die "no $abin/$b (make all)"
	[ -z "$bdir" ] || [ -x "$bdir/$b" ] || bench_die "no $bdir/$b"
done
[ -n "$out" ] || out=$root/bench/results/scale-$(date -u +%Y%m%d-%H%M%S).csv
mkdir -p "$(dirname "$out")"
echo "variant,store,metric,value" >"$out"

to_bytes() { numfmt --from=iec "$1"; }
GIB=$((1 << 30))
TIB=$((1 << 40))

work=$(mktemp -d "$dir/cfs-scale.XXXXXX")
bench_defer "rm -rf '$work'"
# Only what is written takes memory: W MiB per chunk plus metadata.
bench_tmpfs_mount "$work/tmpfs" 16G
mnt=$work/mnt
mkdir -p "$mnt"

record() { echo "$1,$2,$3,$4" >>"$out"; bench_log "$1 $2 $3 = $4"; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }

# Start chunkfs on IMAGE at $mnt; sets CFS_PID and MOUNT_S (seconds until
# the mount point is there). Not in $(...): the cleanup entry must stay.
cfs_start() { # bin image
	local t0 i
	t0=$(now)
	"$1/chunkfs" -f "$2" "$mnt" >>"$work/daemon.log" 2>&1 &
	CFS_PID=$!
	bench_defer "bench_umount '$mnt' $CFS_PID"
	for i in $(seq 6000); do
		bench_mounted "$mnt" && { MOUNT_S=$(since "$t0"); return 0; }
		kill -0 "$CFS_PID" 2>/dev/null || break
		sleep 0.01
	done
	cat "$work/daemon.log" >&2
	bench_die "chunkfs did not mount $2"
}

cfs_stop() { # sets UMOUNT_S: seconds until the daemon exited
	local t0
	t0=$(now)
	bench_undo "bench_umount '$mnt' $CFS_PID"
	UMOUNT_S=$(since "$t0")
}

fio_iops() { # file seconds
	fio --name=rr --filename="$1" --rw=randread --bs=4k --iodepth=32 --ioengine=io_uring \
		--direct=1 --time_based --runtime="$2" --numjobs=1 --randrepeat=0 \
		--output-format=json 2>/dev/null |
		python3 -c 'import json,sys; print(int(json.load(sys.stdin)["jobs"][0]["read"]["iops"]))'
}

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

run_variant() { # name bin size
	local v=$1 bin=$2 size=$3 bytes img left csize i n t0 small large
	local -A seen=()
	bytes=$(to_bytes "$size")
	img=$work/tmpfs/store.img
	rm -f "$img"
	"$bin/mkchunkfs" -q -f --sparse -s "$size" "$img" || bench_die "mkchunkfs $size"
	cfs_start "$bin" "$img"
	record "$v" "$size" rss_empty_kib "$(rss_kib "$CFS_PID")"
	# Chunks: 1G, 10G, 100G, then 1T ones (the last one what is left) up
	# to ~90% of the store.
	left=$((bytes * 9 / 10))
	local chunks=()
	for csize in $GIB $((10 * GIB)) $((100 * GIB)); do
		[ "$left" -ge "$csize" ] || continue
		chunks+=("$csize")
		left=$((left - csize))
	done
	while [ "$left" -ge $GIB ]; do
		csize=$TIB
		[ "$csize" -gt "$left" ] && csize=$((left / GIB * GIB))
		chunks+=("$csize")
		left=$((left - csize))
	done
	n=0
	for csize in "${chunks[@]}"; do
		local label
		label=$(numfmt --to=iec "$csize")
		t0=$(now)
		fallocate -l "$csize" "$mnt/c$n"
		if [ -z "${seen[$label]:-}" ]; then
			seen[$label]=1
			record "$v" "$size" "alloc_s_$label" "$(since "$t0")"
		fi
		dd if=/dev/urandom of="$mnt/c$n" bs=1M count="$wmib" oflag=direct conv=notrunc \
			status=none
		fio --name=w --filename="$mnt/c$n" --rw=randwrite --bs=4k --direct=1 \
			--ioengine=psync --number_ios=64 --norandommap --randrepeat=0 \
			--size="$csize" >/dev/null 2>&1 || bench_die "fio write c$n"
		n=$((n + 1))
	done
	small=$mnt/c0
	large=$mnt/c$((n - 1))
	record "$v" "$size" chunks "$n"
	record "$v" "$size" allocated_bytes "$(du -B1 --apparent-size -s "$mnt" | cut -f1)"
	sync -f "$mnt"
	sleep 1
	record "$v" "$size" rss_kib "$(rss_kib "$CFS_PID")"
	local sm=() la=()
	for i in $(seq "$reps"); do
		if [ $((i % 2)) = 1 ]; then
			sm+=("$(fio_iops "$small" "$runtime")")
			la+=("$(fio_iops "$large" "$runtime")")
		else
			la+=("$(fio_iops "$large" "$runtime")")
			sm+=("$(fio_iops "$small" "$runtime")")
		fi
	done
	record "$v" "$size" rr4k_small_iops "$(printf '%s\n' "${sm[@]}" | median)"
	record "$v" "$size" rr4k_large_iops "$(printf '%s\n' "${la[@]}" | median)"
	cfs_stop
	record "$v" "$size" umount_s "$UMOUNT_S"
	record "$v" "$size" snapshot_bytes \
		"$("$bin/mkchunkfs" -D "$img" | sed -n 's/^active half: .*snapshot \([0-9]*\) bytes.*/\1/p')"
	t0=$(now)
	/usr/bin/time -f %M -o "$work/fsck.mem" "$bin/fsck.chunkfs" -n -q "$img" >/dev/null ||
		bench_die "fsck.chunkfs found problems in the $size store"
	record "$v" "$size" fsck_s "$(since "$t0")"
	record "$v" "$size" fsck_rss_kib "$(cat "$work/fsck.mem")"
	cfs_start "$bin" "$img"
	record "$v" "$size" mount_s "$MOUNT_S"
	record "$v" "$size" rss_mounted_kib "$(rss_kib "$CFS_PID")"
	cfs_stop
	rm -f "$img"
}

bench_sysinfo "$root" "$work/tmpfs" >"${out%.csv}.system.txt"
IFS=, read -ra list <<<"$sizes"
for size in "${list[@]}"; do
	run_variant A "$abin" "$size"
	if [ -n "$bdir" ] && [ "$(to_bytes "$size")" -le "$(to_bytes "$bmax")" ]; then
		run_variant B "$bdir" "$size"
	fi
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"${out%.csv}.system.txt"
column -s, -t "$out"
