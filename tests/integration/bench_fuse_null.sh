#!/usr/bin/env bash
# bench_fuse_null.sh — bench/fuse_null, the do-nothing FUSE filesystem the
# benchmarks measure as the floor under chunkfs (open/close, and fio in
# bench/perf.sh), answers what the benchmarks ask of it and nothing more:
# every name is a file of -s bytes; O_DIRECT and buffered reads return zeros
# and stop at the end of the file; writes inside the file succeed, past it
# fail with EFBIG; a bad -s is refused before mounting; -n (no_open) still
# serves reads. A floor that silently failed its I/O would report any speed.
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
null=$CFS_BIN/bench/fuse_null
[ -x "$null" ] || cfs_skip "needs $null (make bench-build)"

mnt=$CFS_WORK/mnt
mkdir -p "$mnt"

null_mounted() { awk -v d="$mnt" '$2 == d { f = 1 } END { exit !f }' /proc/self/mounts; }

null_mount() { # args...: fuse_null in the background on $mnt, unmounted at exit
	"$null" "$@" "$mnt" >>"$CFS_WORK/null.log" 2>&1 &
	local pid=$!
	cfs_defer "umount '$mnt' 2>/dev/null || umount -l '$mnt'; wait $pid"
	for _ in $(seq 100); do
		null_mounted && return 0
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
	cat "$CFS_WORK/null.log" >&2
	cfs_fail "fuse_null $* did not mount"
}
null_umount() {
	umount "$mnt"
	for _ in $(seq 100); do
		null_mounted || return 0
		sleep 0.1
	done
	cfs_fail "fuse_null still mounted"
}

cfs_log "bad sizes are refused, nothing is mounted"
for bad in 0 x 12q -5k 99999999999999999999g; do
	rc=0
	"$null" -s "$bad" "$mnt" >"$CFS_WORK/out" 2>&1 || rc=$?
	[ "$rc" = 2 ] || cfs_fail "-s $bad: exit $rc, expected 2"
	grep -q "not a size" "$CFS_WORK/out" || cfs_fail "-s $bad: $(cat "$CFS_WORK/out")"
done
rc=0
"$null" -q "$mnt" >"$CFS_WORK/out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q usage "$CFS_WORK/out" || cfs_fail "unknown option: exit $rc"
! null_mounted || cfs_fail "mounted after a bad option"

cfs_log "-s 3m: every name is a 3 MiB file of zeros"
null_mount -s 3m
[ "$(stat -c %s "$mnt/any-name")" = $((3 << 20)) ] ||
	cfs_fail "size $(stat -c %s "$mnt/any-name"), expected 3 MiB"
dd if="$mnt/c0" of="$CFS_WORK/direct" bs=1M iflag=direct status=none
dd if="$mnt/c0" of="$CFS_WORK/buffered" bs=64k status=none
head -c $((3 << 20)) /dev/zero >"$CFS_WORK/zeros"
cmp "$CFS_WORK/direct" "$CFS_WORK/zeros" || cfs_fail "O_DIRECT read is not 3 MiB of zeros"
cmp "$CFS_WORK/buffered" "$CFS_WORK/zeros" || cfs_fail "buffered read is not 3 MiB of zeros"
n=$(dd if="$mnt/c0" bs=1M skip=2 iflag=direct status=none | wc -c)
[ "$n" = $((1 << 20)) ] || cfs_fail "read from 2 MiB: $n bytes, expected 1 MiB (to the end)"

cfs_log "writes inside the file succeed, past its end fail with EFBIG"
dd if=/dev/urandom of="$mnt/c0" bs=1M count=3 oflag=direct conv=notrunc status=none ||
	cfs_fail "O_DIRECT write of 3 MiB failed"
rc=0
dd if=/dev/zero of="$mnt/c0" bs=1M count=1 seek=3 oflag=direct conv=notrunc \
	2>"$CFS_WORK/err" || rc=$?
[ "$rc" != 0 ] && grep -q "File too large" "$CFS_WORK/err" ||
	cfs_fail "write past the end: rc $rc, $(cat "$CFS_WORK/err")"
if command -v fio >/dev/null; then
	fio --name=n --filename="$mnt/c0" --ioengine=io_uring --direct=1 --rw=randrw --bs=4k \
		--iodepth=16 --size=3m --io_size=8m --allow_file_create=0 --fallocate=none \
		--output-format=terse >"$CFS_WORK/fio" 2>&1 || cfs_fail "fio: $(cat "$CFS_WORK/fio")"
fi
null_umount

cfs_log "-n (no_open) serves reads too"
null_mount -n -s 1m
n=$(dd if="$mnt/x" bs=64k iflag=direct status=none | tr -d '\0' | wc -c)
[ "$n" = 0 ] || cfs_fail "no_open read: $n non-zero bytes"
[ "$(dd if="$mnt/x" bs=64k iflag=direct status=none | wc -c)" = $((1 << 20)) ] ||
	cfs_fail "no_open read: not 1 MiB"
null_umount
cfs_log "ok"
