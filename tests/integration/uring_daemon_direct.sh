#!/usr/bin/env bash
# uring_daemon_direct.sh — daemon_direct.sh (O_DIRECT sizes, unaligned writes, alignment policy) again with every mount on
# FUSE over io_uring (CFS_EXTRA_MOUNT_OPTS=transport=uring). Sets
# /sys/module/fuse/parameters/enable_uring for the run and restores it;
# uring_transport.sh checks that the rings really carry the requests.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
param=/sys/module/fuse/parameters/enable_uring
[ -e $param ] || cfs_skip "kernel without FUSE over io_uring ($param)"
[ -w $param ] || cfs_skip "cannot write $param"
old=$(cat $param)
cfs_defer "echo $old > $param"
echo Y >$param
set +e
CFS_EXTRA_MOUNT_OPTS=transport=uring "$CFS_ROOT/tests/integration/daemon_direct.sh"
rc=$?
set -e
exit $rc
