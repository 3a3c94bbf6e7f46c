#!/usr/bin/env bash
# bench_perf_options.sh — bench/perf.sh, the data-path matrix: options it
# cannot honour are refused before anything is written or mounted (-L with a
# bad rate, -S without both chunkfs image targets); -S really trades the two
# stores between repetitions (an A/B of two daemons, each on both images),
# and the run leaves no mount, loop device or image behind.
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd fio
cfs_require_cmd python3
perf=$CFS_ROOT/bench/perf.sh
[ -x "$CFS_BIN/chunkfs" ] || cfs_skip "needs $CFS_BIN/chunkfs"
export CFS_BIN

dir=$CFS_WORK/stores
res=$CFS_WORK/results
mkdir -p "$dir" "$res"
cfs_defer "for m in \$(awk -v w='$CFS_WORK' 'index(\$2, w) == 1 { print \$2 }' /proc/self/mounts); do umount -l \$m; done"

cfs_log "bad options: refused, nothing written"
cfs_expect_fail_with "-L wants MB/s" 1 "$perf" -d "$dir" -R "$res" -L 2k
cfs_expect_fail_with "-L wants MB/s" 1 "$perf" -d "$dir" -R "$res" -L 0
cfs_expect_fail_with "-S swaps the stores of cfs-img and cfsB-img" 1 \
	"$perf" -d "$dir" -R "$res" -S -t raw-file,cfs-img
[ -z "$(ls -A "$dir")" ] || cfs_fail "a refused run left files: $(ls "$dir")"

cfs_log "-S: two repetitions, the stores trade places in between"
log=$CFS_WORK/perf.log
"$perf" -d "$dir" -R "$res" -s 16M -r 1 -n 2 -c rr4k-qd1 -t cfs-img,cfsB-img -B "$CFS_BIN/chunkfs" -S \
	>"$CFS_WORK/table" 2>"$log" || { cat "$log" >&2; cfs_fail "perf.sh -S failed"; }
grep -q "stores: cfs-img on cfs-perf-store3.img, cfsB-img on cfs-perf-store1.img" "$log" ||
	cfs_fail "no swap to the other store in the log: $(grep stores: "$log")"
grep -q "swapped at every repetition (-S)" "$CFS_WORK/table" || cfs_fail "table header does not say -S"
for t in cfs-img cfsB-img; do
	iops=$(awk -v t=$t '$1 == "rr4k-qd1" && $2 == t { print $3 }' "$CFS_WORK/table")
	[[ "$iops" =~ ^[0-9]+$ ]] && [ "$iops" -gt 0 ] || cfs_fail "$t: no IOPS in the table ($iops)"
done
rows=$(grep -c '^cfs.*,rr4k-qd1,' "$res"/perf-*.csv)
[ "$rows" = 4 ] || cfs_fail "$rows CSV rows, want 4 (2 targets x 2 repetitions)"

cfs_log "nothing left behind"
! grep -q "$CFS_WORK" /proc/self/mounts || cfs_fail "left mounted: $(grep "$CFS_WORK" /proc/self/mounts)"
! losetup -a | grep -q "$dir" || cfs_fail "loop device left: $(losetup -a | grep "$dir")"
[ -z "$(ls -A "$dir")" ] || cfs_fail "images left: $(ls "$dir")"
cfs_log "ok"
