#!/usr/bin/env bash
# uring_daemon_tmpfile.sh — daemon_tmpfile.sh (open(O_TMPFILE)) again with
# every mount on FUSE over io_uring.
. "$(dirname "$0")/../lib/common.sh"
cfs_rerun_on_uring daemon_tmpfile.sh
