#!/usr/bin/env bash
# stats_latency.sh — latency percentiles against delays injected by the fault
# backend: every device read takes at least 1 ms, every 20th 20 ms more
# (rules add up), every flush 5 ms. 400 O_DIRECT reads at QD1 therefore hold
# exactly 20 slow ones (400 consecutive reads contain 20 multiples of 20):
# p50 and p90 near 1 ms, p99 and p99.9 near 21 ms, min near 1 ms, max near
# 21 ms. An fsync commits with two flushes: at least 10 ms. Bounds allow the
# histogram's bucket width (6.25%) plus daemon and FUSE time on a busy
# machine; the slow and fast groups are 20 times apart, so the bounds still
# tell them apart. p99.9 and max of 400 samples are one sample each: on a
# shared machine one of them can be delayed by tens of ms (seen: 48 ms), so
# their upper bounds only catch nonsense.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_require_cmd python3 getfattr setfattr

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
cfs_mkfs "$img" 64M
cfs_mount "$img" "$mnt"
dd if=/dev/urandom of="$mnt/c" bs=64k count=32 oflag=direct status=none
cfs_umount "$mnt" || cfs_fail "unmount"

cfs_mount "$img" "$mnt" \
	"fault=op=read,every=1,delay_us=1000;op=read,every=1,nth=20,delay_us=20000;op=flush,every=1,delay_us=5000"
cfs_reset "$mnt/c"
cfs_reset "$mnt"
out=$(stats_util reads "$mnt/c" 400 4096)
[ "$out" = "ok=400 eio=0 other=0" ] || cfs_fail "reads: $out"
cfs_expect "$mnt/c" read_lat_count 400
getfattr --only-values -n user.chunkfs.stat "$mnt/c" | tr ' ' '\n' | grep '^read_lat'
cfs_expect_range "$mnt/c" read_lat_min_us 1000 1500
cfs_expect_range "$mnt/c" read_lat_p50_us 1000 2000
cfs_expect_range "$mnt/c" read_lat_p90_us 1000 5000
cfs_expect_range "$mnt/c" read_lat_p99_us 21000 40000
cfs_expect_range "$mnt/c" read_lat_p999_us 21000 200000
cfs_expect_range "$mnt/c" read_lat_max_us 21000 200000
# sum: 380 x ~1 ms + 20 x ~21 ms = ~800 ms
cfs_expect_range "$mnt/c" read_lat_sum_us 800000 2000000
cfs_expect_range "$mnt/c" read_lat_avg_us 2000 5000
# the histogram: 400 reads, the 20 slow ones at 21 ms or more (fast ones
# slowed down by a loaded machine may join them: at most 10 allowed),
# nothing below 1 ms
hist=$(cfs_stat "$mnt/c" read_hist)
python3 - "$hist" <<'EOF' || cfs_fail "read_hist: $hist"
import sys
pairs = [tuple(map(int, p.split(":"))) for p in sys.argv[1].split()]
total = sum(c for up, c in pairs)
slow = sum(c for up, c in pairs if up >= 21_000_000)
assert total == 400 and 20 <= slow <= 30, (total, slow)
assert min(up for up, c in pairs) >= 1_000_000, pairs
EOF
# the root saw the same reads
cfs_expect_range "$mnt" read_lat_p99_us 21000 40000

cfs_log "fsync: a commit flushes twice, 5 ms each"
stats_util fsync "$mnt/c" 10 write
cfs_expect "$mnt/c" fsyncs 10
cfs_expect_range "$mnt/c" fsync_lat_min_us 10000 60000
cfs_expect_range "$mnt/c" fsync_lat_p50_us 10000 60000
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"
