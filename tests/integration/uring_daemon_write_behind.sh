#!/usr/bin/env bash
# uring_daemon_write_behind.sh — daemon_write_behind.sh (buffered writes
# answered before the store, ordered, covered by fsync) again with every
# mount on FUSE over io_uring, where a write's payload sits in the ring
# entry that its early reply hands back.
. "$(dirname "$0")/../lib/common.sh"
cfs_rerun_on_uring daemon_write_behind.sh
