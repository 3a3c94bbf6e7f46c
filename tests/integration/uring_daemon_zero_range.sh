#!/usr/bin/env bash
# uring_daemon_zero_range.sh — daemon_zero_range.sh (fallocate ZERO_RANGE)
# again with every mount on FUSE over io_uring.
. "$(dirname "$0")/../lib/common.sh"
cfs_rerun_on_uring daemon_zero_range.sh
