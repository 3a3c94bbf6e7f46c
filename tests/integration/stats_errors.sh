#!/usr/bin/env bash
# stats_errors.sh — errors by kind, exactly: EIO injected by the fault backend
# on every 1000th device read (the mount's own reads are far fewer, so 1500
# reads of the chunk meet exactly one), ENOSPC from a store that fills up,
# misaligned O_DIRECT refused by a RAM mount with dio_align=4096, and the
# mount-wide totals of each.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_require_cmd python3 getfattr setfattr

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt

cfs_log "EIO: every 1000th device read fails"
cfs_mkfs "$img" 64M
cfs_mount "$img" "$mnt"
dd if=/dev/urandom of="$mnt/c" bs=64k count=16 oflag=direct status=none
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_mount "$img" "$mnt" "fault=op=read,every=1,nth=1000,err=EIO"
cfs_reset "$mnt/c"
out=$(stats_util reads "$mnt/c" 1500 4096)
[ "$out" = "ok=1499 eio=1 other=0" ] || cfs_fail "reads: $out"
cfs_expect "$mnt/c" reads 1500
cfs_expect "$mnt/c" read_errors 1
cfs_expect "$mnt/c" err_eio 1
cfs_expect "$mnt/c" errors 1
cfs_expect "$mnt/c" read_bytes $((1499 * 4096))
cfs_expect "$mnt/c" read_lat_count 1500
cfs_expect "$mnt" err_eio 1
cfs_expect "$mnt" backend "fault(uring)"
cfs_umount "$mnt" || cfs_fail "unmount"

cfs_log "ENOSPC: write until the store is full"
rm -f "$img"
cfs_mkfs "$img" 32M
cfs_mount "$img" "$mnt"
set +e
dd if=/dev/zero of="$mnt/fill" bs=1M count=64 oflag=direct status=none 2>"$CFS_WORK/dd.err"
rc=$?
set -e
[ $rc -ne 0 ] && grep -q 'No space left' "$CFS_WORK/dd.err" || cfs_fail "dd did not hit ENOSPC (rc $rc)"
w=$(cfs_stat "$mnt/fill" writes)
cfs_expect "$mnt/fill" write_errors 1
cfs_expect "$mnt/fill" err_enospc 1
cfs_expect "$mnt/fill" errors 1
cfs_expect "$mnt/fill" write_bytes $(((w - 1) * 1048576))
cfs_expect "$mnt" err_enospc 1
cfs_umount "$mnt" || cfs_fail "unmount"

cfs_log "misaligned O_DIRECT on a RAM mount that enforces 4 KiB"
ram=$CFS_WORK/ram
cfs_mount none "$ram" ram,size=64M,dio_align=4096
dd if=/dev/zero of="$ram/c" bs=4k count=4 oflag=direct status=none
cfs_reset "$ram/c"
set +e
dd if="$ram/c" of=/dev/null bs=512 count=1 iflag=direct status=none 2>/dev/null
r1=$?
dd if=/dev/zero of="$ram/c" bs=512 seek=1 count=1 oflag=direct conv=notrunc status=none 2>/dev/null
r2=$?
set -e
[ $r1 -ne 0 ] && [ $r2 -ne 0 ] || cfs_fail "misaligned O_DIRECT was accepted ($r1 $r2)"
cfs_expect "$ram/c" err_misaligned 2
cfs_expect "$ram/c" read_errors 1
cfs_expect "$ram/c" write_errors 1
cfs_expect "$ram/c" reads 1
cfs_expect "$ram/c" writes 1
cfs_expect "$ram/c" errors 2
cfs_expect "$ram" dio_align_bytes 4096
cfs_expect "$ram" dio_align_enforced 1
cfs_expect "$ram" backend ram
cfs_expect "$ram" source none
cfs_umount "$ram" || cfs_fail "unmount ram"
cfs_log "ok"
