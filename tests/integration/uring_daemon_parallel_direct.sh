#!/usr/bin/env bash
# uring_daemon_parallel_direct.sh — daemon_parallel_direct.sh (synchronous
# O_DIRECT writers of one chunk side by side) again with every mount on FUSE
# over io_uring, whose replies fs/fuse/proto_ext.c patches in the rings' hook.
. "$(dirname "$0")/../lib/common.sh"
cfs_rerun_on_uring daemon_parallel_direct.sh
