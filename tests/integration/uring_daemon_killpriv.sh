#!/usr/bin/env bash
# uring_daemon_killpriv.sh — daemon_killpriv.sh (suid/sgid cleared by the
# daemon, no GETXATTR per buffered write) again with every mount on FUSE over
# io_uring, where requests reach fs/fuse/proto_ext.c from the rings.
. "$(dirname "$0")/../lib/common.sh"
cfs_rerun_on_uring daemon_killpriv.sh
