#!/usr/bin/env bash
# ram_stats.sh — a RAM temp mount carries the same statistics as a
# store-backed mount: the same user.chunkfs.*
# names on a chunk and on the root, and the same counts for the same
# workload (O_DIRECT writes and reads, which the RAM mount serves straight
# from its memory, a hole, an unaligned buffered write, fsync, a punched
# hole); then what only a RAM mount refuses: misaligned O_DIRECT and ENOSPC
# at its size, each counted in the chunk's statistics.
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/ram.sh"
cfs_require_fuse
cfs_require_cmd python3

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
ram=$CFS_WORK/ram
cfs_mkfs "$img" 256M
cfs_mount "$img" "$mnt"
cfs_mount none "$ram" ram,size=64M

# The same workload on both mounts; prints nothing, fails loudly.
workload() {
	python3 - "$1/chunk" <<'PYEOF'
import mmap, os, sys
path = sys.argv[1]
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
m = mmap.mmap(-1, 1 << 20)
m[:] = bytes(range(256)) * 4096
view = memoryview(m)
for i in range(8):                        # 8 x 4 KiB written
    assert os.pwritev(fd, [view[:4096]], i * 4096) == 4096
assert os.pwritev(fd, [view[:65536]], 1 << 20) == 65536     # a 64 KiB write
for i in range(8):                        # 8 x 2 KiB read, all written
    assert os.preadv(fd, [view[:2048]], i * 2048) == 2048
assert os.preadv(fd, [view[:4096]], 512 << 10) == 4096      # a hole: zeros
assert bytes(view[:4096]) == bytes(4096)
os.fsync(fd)
os.fdatasync(fd)
os.close(fd)
fd = os.open(path, os.O_RDWR)             # buffered, unaligned: read-modify-write
assert os.pwrite(fd, b"abc", 7) == 3
os.fsync(fd)
os.close(fd)
fd = os.open(path, os.O_RDWR)
libc = __import__("ctypes").CDLL(None, use_errno=True)
assert libc.fallocate(fd, 3, 1 << 20, 65536) == 0           # punch the 64 KiB
os.close(fd)
PYEOF
}

workload "$mnt" || cfs_fail "workload on the store mount"
workload "$ram" || cfs_fail "workload on the RAM mount"

cfs_log "the same statistics names"
names() { getfattr -d -m '^user\.chunkfs\.' --absolute-names "$1" 2>/dev/null | sed -n 's/=.*//p' | sort; }
keys() { python3 -c "import os,sys; print('\n'.join(sorted(f.split('=')[0] for f in os.getxattr(sys.argv[1], 'user.chunkfs.stat').decode().split())))" "$1"; }
for what in chunk root; do
	if [ $what = chunk ]; then a=$mnt/chunk b=$ram/chunk; else a=$mnt b=$ram; fi
	diff <(names "$a") <(names "$b") >"$CFS_WORK/names.diff" ||
		cfs_fail "$what: listed statistics differ (store < > RAM): $(cat "$CFS_WORK/names.diff")"
	[ "$(names "$b" | wc -l)" -gt 10 ] || cfs_fail "$what: few statistics on RAM: $(names "$b")"
done
diff <(keys "$mnt/chunk") <(keys "$ram/chunk") >"$CFS_WORK/keys.diff" ||
	cfs_fail "the stat line's keys differ (store < > RAM): $(cat "$CFS_WORK/keys.diff")"

cfs_log "the same counts for the same workload"
for k in writes write_bytes page_writes reads read_bytes page_reads fsyncs fsync_errors \
	discards discard_bytes rmw errors; do
	s=$(ram_stat "$mnt/chunk" $k) r=$(ram_stat "$ram/chunk" $k)
	cfs_log "  $k: store $s, RAM $r"
	[ "$s" = "$r" ] || cfs_fail "$k: store mount $s, RAM mount $r"
done
ram_stat_is "$ram/chunk" writes 10
ram_stat_is "$ram/chunk" write_bytes $((8 * 4096 + 65536 + 3))
ram_stat_is "$ram/chunk" reads 9
ram_stat_is "$ram/chunk" read_bytes $((8 * 2048 + 4096))
ram_stat_is "$ram/chunk" fsyncs 3
ram_stat_is "$ram/chunk" discards 1
ram_stat_is "$ram/chunk" rmw 1
[ "$(getfattr --absolute-names --only-values -n user.chunkfs.backend "$ram")" = ram ] || cfs_fail "root: backend"
[ "$(getfattr --absolute-names --only-values -n user.chunkfs.store_bytes "$ram")" = $((64 << 20)) ] ||
	cfs_fail "root: store_bytes"
[ "$(getfattr --absolute-names --only-values -n user.chunkfs.dio_align_bytes "$ram")" = 512 ] ||
	cfs_fail "root: dio_align_bytes"

cfs_log "RAM only: misaligned O_DIRECT and ENOSPC, counted"
dd if=/dev/zero of="$ram/chunk" bs=512 count=1 seek=1 oflag=direct conv=notrunc status=none
dd if=/dev/zero of="$ram/chunk" bs=1000 count=1 oflag=direct conv=notrunc status=none \
	2>/dev/null && cfs_fail "a 1000-byte O_DIRECT write passed"
dd if="$ram/chunk" of=/dev/null bs=1000 count=1 iflag=direct status=none 2>/dev/null &&
	cfs_fail "a 1000-byte O_DIRECT read passed"
ram_misaligned_check "$ram/chunk" 2
dd if=/dev/zero of="$ram/fill" bs=1M count=80 oflag=direct status=none 2>/dev/null &&
	cfs_fail "80 MiB fit a 64 MiB RAM mount"
enospc=$(ram_stat "$ram/fill" err_enospc)
[ "$enospc" -ge 1 ] || cfs_fail "ENOSPC not counted ($enospc)"
cfs_log "fill: err_enospc=$enospc"
ram_stat_is "$ram/fill" errors "$enospc"
rm "$ram/fill"
cfs_umount "$ram" || cfs_fail "unmount ram"
cfs_umount "$mnt" || cfs_fail "unmount store"
cfs_log "ok"
