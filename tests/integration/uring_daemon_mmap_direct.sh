#!/usr/bin/env bash
# uring_daemon_mmap_direct.sh — daemon_mmap_direct.sh (shared mmap next to
# O_DIRECT) again with every mount on FUSE over io_uring
# (CFS_EXTRA_MOUNT_OPTS=transport=uring).
. "$(dirname "$0")/../lib/common.sh"
cfs_rerun_on_uring daemon_mmap_direct.sh
