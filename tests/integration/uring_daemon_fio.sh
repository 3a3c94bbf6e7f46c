#!/usr/bin/env bash
# uring_daemon_fio.sh — daemon_fio.sh (fio --verify, 4 jobs, store and RAM mounts) again with every mount on
# FUSE over io_uring (CFS_EXTRA_MOUNT_OPTS=transport=uring). Sets
# /sys/module/fuse/parameters/enable_uring for the run and restores it;
# uring_transport.sh checks that the rings really carry the requests.
. "$(dirname "$0")/../lib/common.sh"
cfs_rerun_on_uring daemon_fio.sh
