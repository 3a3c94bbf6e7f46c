#!/usr/bin/env bash
# uring_daemon_dio_coherence.sh — daemon_dio_coherence.sh (asynchronous
# O_DIRECT writes next to buffered readers) again with every mount on FUSE
# over io_uring (CFS_EXTRA_MOUNT_OPTS=transport=uring).
. "$(dirname "$0")/../lib/common.sh"
cfs_rerun_on_uring daemon_dio_coherence.sh
