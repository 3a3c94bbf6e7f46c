#!/usr/bin/env bash
# uring_daemon_submit_batch.sh — daemon_submit_batch.sh (device submits batched
# under load, immediate at queue depth 1, fio --verify) again with the mount
# on FUSE over io_uring (CFS_EXTRA_MOUNT_OPTS=transport=uring), where a batch
# is the CQEs of one pass. Sets /sys/module/fuse/parameters/enable_uring for
# the run and restores it.
. "$(dirname "$0")/../lib/common.sh"
cfs_rerun_on_uring daemon_submit_batch.sh
