#!/bin/sh
# Installs the Debian packages chunkfs needs to build, test and benchmark.
# Idempotent and non-interactive: safe to run on every CI run and by hand.
# librbd-dev, librados-dev: the rbd backend (stores on Ceph RBD images);
# ceph-common, ceph-mon, ceph-osd: the throw-away cluster of the RBD tests
# and benchmark (tests/lib/ceph.sh), no kernel module needed.
set -eu

PACKAGES="
build-essential pkg-config make gcc clang clang-format
libfuse3-dev fuse3 liburing-dev libxxhash-dev libblkid-dev
libcriterion-dev
util-linux mount procps python3 e2fsprogs xfsprogs attr fio
dpkg-dev debhelper fakeroot lintian
gnuplot-nox
postgresql-15 postgresql-client-15
mariadb-server mariadb-client sysbench rocksdb-tools sqlite3 linux-perf
librbd-dev librados-dev ceph-common ceph-mon ceph-osd
"

missing=""
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing="$missing $p"
done

if [ -z "$missing" ]; then
	echo "install-deps: all packages present"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing:$missing (run as root to install them)" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
echo "install-deps: installed:$missing"
