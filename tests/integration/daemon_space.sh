#!/usr/bin/env bash
# daemon_space.sh — space: statfs numbers, ENOSPC reached cleanly and
# recovered after deletes (store and RAM mounts), unlink of an open file frees
# its space at the last close, fallocate (0, KEEP_SIZE, PUNCH_HOLE; others
# EOPNOTSUPP) with SEEK_DATA / SEEK_HOLE.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3 fallocate

util="python3 $CFS_ROOT/tests/integration/daemon_util.py"
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
cfs_mkfs "$img" 64M
cfs_mount "$img" "$mnt"

free_bytes() { echo $(($(stat -f -c '%a*%S' "$1"))); }
MiB=1048576

total=$(($(stat -f -c '%b*%S' "$mnt")))
free0=$(free_bytes "$mnt")
cfs_log "statfs: total $total, free $free0"
[ "$free0" -eq "$total" ] || cfs_fail "an empty store has $free0 of $total free"

# ---- statfs follows allocation ----------------------------------------------------
dd if=/dev/zero of="$mnt/ten" bs=1M count=10 status=none
sync "$mnt/ten"
free1=$(free_bytes "$mnt")
[ $((free0 - free1)) -eq $((10 * MiB)) ] || cfs_fail "10 MiB written, free dropped by $((free0 - free1))"
[ "$(stat -c %b "$mnt/ten")" -eq $((10 * MiB / 512)) ] || cfs_fail "st_blocks of a 10 MiB file"
rm "$mnt/ten"
[ "$(free_bytes "$mnt")" -eq "$free0" ] || cfs_fail "space not back after rm"

# ---- ENOSPC, cleanly, then recovered -------------------------------------------------
dd if=/dev/urandom of="$mnt/filler" bs=1M count=$((total / MiB + 5)) status=none 2>"$CFS_WORK/dd.err" &&
	cfs_fail "writing more than the store held succeeded"
grep -q "No space left" "$CFS_WORK/dd.err" || cfs_fail "not ENOSPC: $(cat "$CFS_WORK/dd.err")"
[ "$(free_bytes "$mnt")" -lt $MiB ] || cfs_fail "ENOSPC with $(free_bytes "$mnt") bytes free"
size=$(stat -c %s "$mnt/filler")
cfs_log "filled $size bytes"
# the file system still works: metadata, reads, O_DIRECT ENOSPC too
mkdir "$mnt/stillworks"
cmp -n 4096 "$mnt/filler" "$mnt/filler" || cfs_fail "read of a full store"
python3 - "$mnt/d" <<'EOF' || cfs_fail "O_DIRECT write on a full store did not fail with ENOSPC"
import errno, mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_DIRECT)
m = mmap.mmap(-1, 1 << 20)
try:
    os.pwritev(fd, [m], 0)
    sys.exit(1)
except OSError as e:
    sys.exit(0 if e.errno == errno.ENOSPC else 1)
EOF
rm "$mnt/filler" "$mnt/d"
dd if=/dev/urandom of="$mnt/after" bs=1M count=20 status=none || cfs_fail "write after freeing space"
cmp -n 1 "$mnt/after" "$mnt/after"
rm "$mnt/after"

# ---- unlink of an open file frees its space at the last close -------------------------
exec 3<>"$mnt/open"
dd if=/dev/zero bs=1M count=16 status=none >&3
before=$(free_bytes "$mnt")
rm "$mnt/open"
[ "$(free_bytes "$mnt")" -eq "$before" ] || cfs_fail "space freed while the file is still open"
head -c 5 <&3 >/dev/null || true
exec 3>&-
sleep 0.2
[ "$(free_bytes "$mnt")" -eq $((before + 16 * MiB)) ] ||
	cfs_fail "space not freed at the last close ($(free_bytes "$mnt") vs $((before + 16 * MiB)))"

# ---- fallocate and SEEK_DATA / SEEK_HOLE ----------------------------------------------
f=$mnt/falloc
fallocate -l 8M "$f"
[ "$(stat -c %s "$f")" -eq $((8 * MiB)) ] || cfs_fail "fallocate size"
[ "$(stat -c %b "$f")" -eq $((8 * MiB / 512)) ] || cfs_fail "fallocate blocks"
cmp -n $((8 * MiB)) /dev/zero "$f" || cfs_fail "fallocated range not zeros"
$util seek "$f" data 0 ENXIO	# allocated but unwritten is a hole
$util seek "$f" hole 0 0
printf 'data' | dd of="$f" bs=1 seek=$((3 * MiB)) conv=notrunc status=none
$util seek "$f" data 0 $((3 * MiB))
$util seek "$f" hole $((3 * MiB)) $((3 * MiB + 512))
$util seek "$f" data $((3 * MiB + 4096)) ENXIO
$util seek "$f" hole $((8 * MiB)) ENXIO
# KEEP_SIZE
: >"$mnt/keep"
fallocate -n -o 0 -l 4M "$mnt/keep"
[ "$(stat -c %s "$mnt/keep")" -eq 0 ] || cfs_fail "KEEP_SIZE changed the size"
[ "$(stat -c %b "$mnt/keep")" -eq $((4 * MiB / 512)) ] || cfs_fail "KEEP_SIZE did not allocate"
# PUNCH_HOLE: whole units are freed, partial ones read as zeros
dd if=/dev/urandom of="$mnt/punch" bs=1M count=8 status=none
cp "$mnt/punch" "$CFS_WORK/punch"
b0=$(free_bytes "$mnt")
fallocate -p -o $((2 * MiB)) -l $((4 * MiB)) "$mnt/punch"
fallocate -p -o 1000 -l 3000 "$mnt/punch"
python3 - "$CFS_WORK/punch" <<'EOF'
import sys
MiB = 1 << 20
with open(sys.argv[1], "r+b") as f:
    f.seek(2 * MiB); f.write(bytes(4 * MiB))
    f.seek(1000); f.write(bytes(3000))
EOF
cmp "$CFS_WORK/punch" "$mnt/punch" || cfs_fail "punched file differs from its model"
[ "$(stat -c %s "$mnt/punch")" -eq $((8 * MiB)) ] || cfs_fail "punch changed the size"
sleep 0.1
sync -f "$mnt"
b1=$(free_bytes "$mnt")
[ $((b1 - b0)) -eq $((4 * MiB)) ] || cfs_fail "punching 4 whole units freed $((b1 - b0)) bytes"
$util seek "$mnt/punch" hole 0 1024
$util seek "$mnt/punch" data $((2 * MiB)) $((6 * MiB))
# modes that move blocks are refused (ZERO_RANGE works: daemon_zero_range)
fallocate -c -o 0 -l $MiB "$mnt/punch" 2>/dev/null && cfs_fail "COLLAPSE_RANGE accepted"
fallocate -i -o 0 -l $MiB "$mnt/punch" 2>/dev/null && cfs_fail "INSERT_RANGE accepted"
# more than the whole store: ENOSPC as on ext4 (not the map's EFBIG), and the
# file keeps its size, its blocks and its bytes
b2=$(free_bytes "$mnt")
fallocate -o $MiB -l 200M "$mnt/punch" 2>"$CFS_WORK/falloc.err" && cfs_fail "fallocate of 200M on a 64M store"
grep -q "No space left" "$CFS_WORK/falloc.err" || cfs_fail "fallocate past the store: $(cat "$CFS_WORK/falloc.err")"
[ "$(stat -c %s "$mnt/punch")" -eq $((8 * MiB)) ] || cfs_fail "a refused fallocate changed the size"
[ "$(free_bytes "$mnt")" -eq "$b2" ] || cfs_fail "a refused fallocate took space"
cmp "$CFS_WORK/punch" "$mnt/punch" || cfs_fail "a refused fallocate changed the bytes"

# ---- I/O in flight while the same file is truncated, fallocated, punched -------------
cfs_log "churn: I/O against truncate/fallocate/punch for 10 s"
$util churn "$mnt/churn" 10 || cfs_fail "churn"
rm "$mnt/churn"

# ---- the same after a remount -------------------------------------------------------
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_mount "$img" "$mnt"
cmp "$CFS_WORK/punch" "$mnt/punch" || cfs_fail "punched file differs after remount"
[ "$(stat -c %b "$mnt/keep")" -eq $((4 * MiB / 512)) ] || cfs_fail "KEEP_SIZE allocation lost"
$util seek "$mnt/falloc" data 0 $((3 * MiB))
cfs_umount "$mnt" || cfs_fail "unmount"

# ---- RAM mount: ENOSPC at the size limit, recovered after unlink ---------------------
ram=$CFS_WORK/ram
cfs_mount none "$ram" ram,size=32M
# one chunk filling the mount: ENOSPC (not EFBIG: a file may be as large as
# the store, and the map has room beyond it)
dd if=/dev/zero of="$ram/fill" bs=1M count=40 status=none 2>"$CFS_WORK/dd.err" &&
	cfs_fail "RAM mount took more than its size"
grep -q "No space left" "$CFS_WORK/dd.err" || cfs_fail "RAM: not ENOSPC: $(cat "$CFS_WORK/dd.err")"
rm "$ram/fill"
dd if=/dev/zero of="$ram/again" bs=1M count=16 status=none || cfs_fail "RAM: write after unlink"
cfs_umount "$ram" || cfs_fail "unmount ram"
cfs_log "ok"
