#!/usr/bin/env bash
# tests/ceph-cluster.sh — a throw-away Ceph cluster on this machine, by hand
# (the tests and bench/rbd.sh source tests/lib/ceph.sh, which does the work).
#
#   tests/ceph-cluster.sh start DIR [POOL...]   one monitor, three OSDs (BlueStore
#                                       on sparse files in DIR), cephx, 127.0.0.1
#                                       only; POOLs for RBD; prints the line to
#                                       paste: export CEPH_CONF=DIR/ceph.conf
#   tests/ceph-cluster.sh stop DIR      kill its daemons, remove DIR
#
# Needs root (the daemons write to DIR, which is made empty), and Debian's
# ceph-mon, ceph-osd and ceph-common (.ci/install-deps.sh). About 15 s and
# 0.3-0.5 GB of memory per OSD; the OSDs' block files grow with the data.
# With CEPH_CLUSTER_OWNER=PID the cluster is removed when that process ends.
set -euo pipefail
. "$(dirname "$0")/lib/ceph.sh"

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || {
	sed -n '3,8p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
case $cmd in
start)
	for c in ceph-mon ceph-osd ceph monmaptool ceph-authtool; do
		command -v $c >/dev/null || { echo "$0: $c not found (install ceph-mon ceph-osd ceph-common)" >&2; exit 1; }
	done
	ceph_cluster_start "$dir" "${CEPH_CLUSTER_OWNER:-}" || exit 1
	shift 2
	for pool in "$@"; do
		ceph_pool_create "$pool" || { echo "$0: pool $pool: not created" >&2; exit 1; }
	done
	echo "export CEPH_CONF=$dir/ceph.conf"
	;;
stop)
	ceph_cluster_stop "$dir"
	;;
*)
	echo "$0: start or stop" >&2
	exit 2
	;;
esac
