#!/usr/bin/env bash
# bench/uring-ab.sh — FUSE over io_uring (-o transport=uring) against
# /dev/fuse in the same run, on the two data-path benchmarks:
#   ram   bench/ram-vs-tmpfs.sh with a second RAM mount on the rings
#         (target ramB, RAMB_OPTS=transport=uring): ram, ramB, tmpfs, img
#   perf  bench/perf.sh with target cfsB-img on the rings (-O transport=uring)
#         next to cfs-img on /dev/fuse and the raw image file
#   db    bench/build-ab.sh with one build, A on /dev/fuse and B on the
#         rings (-B transport=uring): ROUNDS SCRIPT [ARGS...]
#   build bench/build-ab.sh with both builds on the rings, A from an older
#         revision: REV ROUNDS SCRIPT [ARGS...]
# The kernel's switch /sys/module/fuse/parameters/enable_uring is set to Y
# for the run and put back as it was at exit (the daemon never touches it).
#
# usage: bench/uring-ab.sh ram|perf|db|build [options of that script...]
#   e.g. bench/uring-ab.sh ram -n 3 -r 5 -c randread-4k-qd32,randwrite-4k-qd32
#        bench/uring-ab.sh perf -n 3 -c rr4k-qd32,rw4k-qd32,sr1m-qd8,sw1m-qd8
#        bench/uring-ab.sh db 3 bench/mariadb.sh -T 60
#        bench/uring-ab.sh build HEAD~1 5 bench/smallappend.sh
# Needs root; see the two scripts for the rest.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
param=/sys/module/fuse/parameters/enable_uring
which=${1:-}
[ $# -gt 0 ] && shift
case $which in
ram | perf | db | build) ;;
*) sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d' >&2; exit 2 ;;
esac
[ -e $param ] || { echo "uring-ab: this kernel has no FUSE over io_uring ($param)" >&2; exit 77; }
# shellcheck source=tests/lib/kernel_state.sh
. "$root/tests/lib/kernel_state.sh"
cfs_kstate_lock || exit 1	# a test run on this machine may be using the switch
old=$(cat $param)
trap 'echo "$old" >$param; cfs_kstate_unlock' EXIT
echo Y >$param

if [ "$which" = ram ]; then
	RAMB_OPTS=transport=uring "$root/bench/ram-vs-tmpfs.sh" "$@"
elif [ "$which" = db ]; then
	[ $# -ge 2 ] || { echo "usage: bench/uring-ab.sh db ROUNDS SCRIPT [ARGS...]" >&2; exit 2; }
	"$root/bench/build-ab.sh" -r "$1" -B transport=uring - "${@:2}"
elif [ "$which" = build ]; then
	[ $# -ge 3 ] || { echo "usage: bench/uring-ab.sh build REV ROUNDS SCRIPT [ARGS...]" >&2; exit 2; }
	"$root/bench/build-ab.sh" -r "$2" -A transport=uring -B transport=uring "$1" "${@:3}"
else
	"$root/bench/perf.sh" -t raw-file,cfs-img,cfsB-img -O transport=uring "$@"
fi
