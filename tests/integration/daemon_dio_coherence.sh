#!/usr/bin/env bash
# daemon_dio_coherence.sh — asynchronous O_DIRECT writes next to buffered
# readers (fs/fuse/ops.c, "page cache"; fs/DAEMON.md): two processes read a
# file through buffered descriptors in a loop while a third rewrites 640 KiB
# regions with asynchronous O_DIRECT writes (io_uring) and reads each back
# through a buffered descriptor once its write has completed
# (tests/progs/dio_coherence.c). The file has cached opens, so the O_DIRECT
# open takes the kernel's own direct path, which drops the range before an
# asynchronous write and not after it: a buffered read in between re-caches
# the old bytes unless the daemon drops the range once the write is on the
# store. Store and RAM mounts; uring_daemon_dio_coherence.sh runs it again on
# FUSE over io_uring. CFS_DIO_SECONDS (default 4) per mount. Under
# BUILD=tsan (make check-tsan) any ThreadSanitizer report of the daemons
# fails it: the page-cache worker (fs/fuse/dio_inval.c) answers these
# writes from its own thread.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_tsan_watch
prog=$CFS_BIN/tests/progs/dio_coherence
[ -x "$prog" ] || cfs_fail "needs $prog (make bench-build or make check builds it)"
seconds=${CFS_DIO_SECONDS:-4}

img=$CFS_WORK/store.img
cfs_mkfs "$img" 256M
cfs_mount "$img" "$CFS_WORK/store"
cfs_mount ram "$CFS_WORK/ram" ram,size=128M

for mnt in "$CFS_WORK/store" "$CFS_WORK/ram"; do
	cfs_log "mount $mnt"
	"$prog" "$mnt/chunk" "$seconds" 2 || cfs_fail "stale data after an O_DIRECT write on $mnt"
done
cfs_umount "$CFS_WORK/store" || cfs_fail "unclean unmount of the store mount"
cfs_umount "$CFS_WORK/ram" || cfs_fail "unclean unmount of the RAM mount"
cfs_tsan_verdict
