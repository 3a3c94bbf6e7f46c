#!/usr/bin/env bash
# uring_daemon_small_append.sh — daemon_small_append.sh (small writes held
# in the daemon: content through remount and kill -9, a block write per
# block) again with every mount on FUSE over io_uring, where an absorbed
# write is answered inline from the ring entry it came in.
. "$(dirname "$0")/../lib/common.sh"
cfs_rerun_on_uring daemon_small_append.sh
