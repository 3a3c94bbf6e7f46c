#!/usr/bin/env bash
# ram_direct.sh — O_DIRECT on the RAM temp mount: accepted at every
# aligned size with the data checked; misaligned offsets and lengths refused
# with EINVAL at the default alignment (512) and at dio_align=4096, and every
# refusal counted in the chunk's statistics; dio_align=0 accepts anything (as
# tmpfs does) and keeps the bytes right; buffered I/O has no alignment rules;
# fsync and fdatasync are accepted and counted.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/ram.sh"
cfs_require_fuse
cfs_require_cmd python3

util="python3 $CFS_ROOT/tests/integration/daemon_util.py"
ram=$CFS_WORK/ram

# ---- default: dio_align=512 ----------------------------------------------------
cfs_mount none "$ram" ram,size=64M
grep -q "^none $ram fuse.chunkfs " /proc/self/mounts || cfs_fail "RAM mount not in /proc/mounts"
for bs in 512 2048 4096 16384 65536; do
	cfs_log "O_DIRECT $bs-byte blocks, read back direct and buffered"
	$util direct "$ram/direct$bs" $bs $((2 * 1048576 / bs)) $bs
done
for bs in 2k 4k; do
	dd if=/dev/urandom of="$CFS_WORK/dd$bs" bs=$bs count=300 status=none
	dd if="$CFS_WORK/dd$bs" of="$ram/dd$bs" bs=$bs oflag=direct status=none ||
		cfs_fail "dd oflag=direct bs=$bs"
	dd if="$ram/dd$bs" of="$CFS_WORK/back$bs" bs=$bs iflag=direct status=none ||
		cfs_fail "dd iflag=direct bs=$bs"
	cmp "$CFS_WORK/dd$bs" "$CFS_WORK/back$bs" || cfs_fail "dd bs=$bs read back differs"
done

cfs_log "misaligned O_DIRECT at dio_align=512: EINVAL"
$util misaligned "$ram/mis512" 512 EINVAL
# The file still holds what the aligned write put there: nothing refused
# reached it.
cmp -n 1024 "$ram/mis512" <(python3 -c "
import sys; sys.path.insert(0, '$CFS_ROOT/tests/integration')
import daemon_util; sys.stdout.buffer.write(daemon_util.pattern(7, 0, 1024))") ||
	cfs_fail "a refused write changed the file"
# counted: ram_misaligned_count below (statistics), when available
ram_misaligned_check "$ram/mis512" 4

cfs_log "buffered I/O has no alignment rules"
printf 'abc' | dd of="$ram/buffered" bs=1 seek=7 status=none
[ "$(od -An -c -j7 "$ram/buffered" | tr -d ' ')" = abc ] || cfs_fail "buffered unaligned write"

cfs_log "fsync and fdatasync are accepted and counted"
python3 - "$ram/direct4096" <<'EOF' || cfs_fail "fsync on the RAM mount"
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_DIRECT)
os.fsync(fd)
os.fdatasync(fd)
os.close(fd)
d = os.open(os.path.dirname(sys.argv[1]), os.O_RDONLY)
os.fsync(d)
os.close(d)
EOF
ram_stat_is "$ram/direct4096" fsyncs 2
ram_stat_is "$ram/direct4096" fsync_errors 0
cfs_umount "$ram" || cfs_fail "unmount (dio_align=512)"

# ---- dio_align=4096: a 4Kn device ------------------------------------------------
cfs_mount none "$ram" ram,size=64M,dio_align=4096
cfs_log "dio_align=4096: 4 KiB and 64 KiB accepted, 512-byte offsets refused"
$util direct "$ram/direct4k" 4096 256 5
$util direct "$ram/direct64k" 65536 16 6
$util misaligned "$ram/mis4k" 4096 EINVAL
ram_misaligned_check "$ram/mis4k" 8
dd if=/dev/zero of="$ram/dd512" bs=512 count=1 oflag=direct status=none 2>"$CFS_WORK/dd.err" &&
	cfs_fail "a 512-byte O_DIRECT write passed at dio_align=4096"
grep -q "Invalid argument" "$CFS_WORK/dd.err" || cfs_fail "not EINVAL: $(cat "$CFS_WORK/dd.err")"
cfs_umount "$ram" || cfs_fail "unmount (dio_align=4096)"

# ---- dio_align=0: anything, as tmpfs ------------------------------------------------
cfs_mount none "$ram" ram,size=64M,dio_align=0
cfs_log "dio_align=0: misaligned O_DIRECT accepted"
$util misaligned "$ram/mis0" 512 ok
$util misaligned "$ram/mis0k" 4096 ok
ram_misaligned_check "$ram/mis0" 0
cfs_log "dio_align=0: random unaligned O_DIRECT and buffered writes against a model"
$util unaligned "$ram/unaligned" 3000000 3
cmp "$ram/unaligned" "$ram/unaligned.model" || cfs_fail "unaligned file differs from its model"
cfs_log "dio_align=0: 4 writers sharing sectors (read-modify-write)"
$util interleave "$ram/interleave" 4 1000 700
cfs_umount "$ram" || cfs_fail "unmount (dio_align=0)"
cfs_log "ok"
