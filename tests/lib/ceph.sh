# tests/lib/ceph.sh — a throw-away Ceph cluster on this machine, for the RBD
# tests (tests/integration/ceph_*.sh) and bench/rbd.sh. Sourced (bash); the
# standalone front is tests/ceph-cluster.sh.
#
#   ceph_cluster_start DIR [OWNER_PID]   one monitor and three OSDs in DIR (made
#                        empty first); prints nothing, returns non-zero with the
#                        daemons' last log lines on failure. With OWNER_PID a
#                        watcher removes the cluster when that process is gone,
#                        even if it was killed -9.
#   ceph_cluster_stop DIR     kill every daemon of DIR's cluster (by its pid
#                        file), remove DIR
#   ceph_use DIR              the cluster the functions below (and the rbd, ceph
#                        and chunkfs commands, through CEPH_CONF) act on
#   ceph_cmd ARGS...          ceph ARGS on that cluster, 20 s at most
#   ceph_pool_create POOL     a replicated pool (size 3, min_size 2) for RBD
#   ceph_osd_kill N / ceph_osd_start N   kill -9 / restart osd.N
#   ceph_osd_running N        osd.N's process lives
#   ceph_pool_wait POOL SECONDS   until every placement group of POOL is active
#   ceph_user_create NAME     a cephx user allowed RBD in every pool; its keyring
#                        is DIR/ceph.client.NAME.keyring
#
# The shape, as Ceph's own vstart.sh builds a development cluster, but smaller
# and with no LVM, device-mapper or systemd: the monitor's store and each
# OSD's BlueStore block are sparse files in DIR (ceph-osd --mkfs creates the
# 4 GiB block file), one host in the CRUSH map (chooseleaf type 0, so three
# replicas go to three OSDs), cephx on, no manager (nothing here needs one).
# Every daemon binds 127.0.0.1 only, on ports chosen free now: the monitor's
# one port is probed first (and another is tried if it was taken in between),
# the OSDs take ports from a random window of 64, skipping any in use, so two
# clusters started at the same time by two test runs do not collide. Memory:
# the OSDs' cache is fixed at 64 MiB and their memory target at 512 MiB
# (about 0.3-0.5 GB each in use), the monitor keeps its defaults.
#
# Every daemon logs to DIR/<name>.log and has its admin socket in DIR.

CEPH_OSDS=${CEPH_OSDS:-3}
CEPH_OSD_BLOCK=${CEPH_OSD_BLOCK:-4G}

ceph_use() {
	CEPH_DIR=$1
	# Not CEPH_KEYRING: Ceph's programs read it too, and a daemon would
	# look for its key there. The conf names every entity's keyring.
	export CEPH_CONF=$CEPH_DIR/ceph.conf
}

ceph_cmd() {
	timeout 20 ceph --conf "$CEPH_CONF" --connect-timeout 15 "$@"
}

# A TCP port on 127.0.0.1 nobody listens on now.
_ceph_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

_ceph_write_conf() {
	local dir=$1 fsid=$2 mon_port=$3 lo=$4
	cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
ms bind port min = $lo
ms bind port max = $((lo + 63))
ms bind retry count = 1
ms bind retry delay = 1
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
keyring = $dir/ceph.\$name.keyring
run dir = $dir
pid file = $dir/\$name.pid
log file = $dir/\$name.log
mon cluster log file = $dir/cluster.log
crash dir = $dir/crash
osd pool default size = 3
osd pool default min size = 2
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool delete = true
mon allow pool size one = true
mon warn on pool no redundancy = false
mon osd down out interval = 0
mon data avail warn = 1
mon data avail crit = 0
# a client that finds no monitor says so in seconds, not in 5 minutes
client mount timeout = 15
[client]
# None: a client that finds another's socket file asks it whether it lives,
# and a frozen one (a test's stopped daemon) lets it wait 10 s; \$pid does not
# tell daemons in two pid namespaces apart (both are pid 1).
admin socket =
[mon]
admin socket = $dir/\$name.asok
mon data = $dir/\$name
keyring = $dir/\$name/keyring
[osd]
admin socket = $dir/\$name.asok
osd data = $dir/\$name
osd objectstore = bluestore
bluestore block create = true
bluestore block size = $(numfmt --from=iec "$CEPH_OSD_BLOCK")
bluestore fsck on mkfs = false
bluestore fsck on mount = false
bluestore cache autotune = false
bluestore cache size = 67108864
osd memory target = 536870912
osd memory base = 268435456
osd memory cache min = 33554432
osd op num shards = 1
osd op num threads per shard = 2
osd check max object name len on startup = false
osd max object name len = 460
osd max object namespace len = 64
bluestore rocksdb options = compression=kNoCompression,max_write_buffer_number=2,min_write_buffer_number_to_merge=1,write_buffer_size=16777216,max_background_compactions=1
EOF
}

# Wait for FILE to exist (a daemon's pid file) and its process to live.
_ceph_wait_pid() {
	local file=$1 i
	for ((i = 0; i < 100; i++)); do
		[ -s "$file" ] && kill -0 "$(cat "$file")" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

_ceph_fail() {
	echo "ceph cluster in $CEPH_DIR: $*" >&2
	local f
	for f in "$CEPH_DIR"/*.log; do
		[ -f "$f" ] || continue
		echo "--- $f" >&2
		tail -n 15 "$f" >&2
	done
	return 1
}

_ceph_start_mon() {
	local dir=$1 fsid=$2 try port
	for try in 1 2 3 4 5; do
		port=$(_ceph_free_port)
		_ceph_write_conf "$dir" "$fsid" "$port" "$((20000 + RANDOM % 600 * 64))"
		rm -rf "$dir/mon.a" "$dir/monmap"
		CEPH_CONF=/dev/null monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$port]" \
			"$dir/monmap" >/dev/null || return 1
		ceph-mon --conf "$dir/ceph.conf" --mkfs -i a --monmap "$dir/monmap" \
			--keyring "$dir/ceph.mon.keyring" >>"$dir/mkfs.log" 2>&1 || return 1
		ceph-mon --conf "$dir/ceph.conf" -i a >>"$dir/mkfs.log" 2>&1 || return 1
		_ceph_wait_pid "$dir/mon.a.pid" || return 1
		# The port may have been taken between probe and bind: the
		# monitor then exits; try another.
		sleep 0.3
		if kill -0 "$(cat "$dir/mon.a.pid")" 2>/dev/null && ceph_cmd mon stat >/dev/null 2>&1; then
			return 0
		fi
		kill -9 "$(cat "$dir/mon.a.pid" 2>/dev/null)" 2>/dev/null
		rm -f "$dir/mon.a.pid"
	done
	return 1
}

_ceph_osd_mkfs() {
	local n=$1 uuid key try
	uuid=$(cat /proc/sys/kernel/random/uuid)
	key=$(CEPH_CONF=/dev/null ceph-authtool --gen-print-key)
	mkdir -p "$CEPH_DIR/osd.$n"
	printf '[osd.%s]\n\tkey = %s\n' "$n" "$key" >"$CEPH_DIR/ceph.osd.$n.keyring"
	echo "{\"cephx_secret\": \"$key\"}" >"$CEPH_DIR/osd.$n.json"
	[ "$(ceph_cmd osd new "$uuid" "$n" -i "$CEPH_DIR/osd.$n.json" 2>>"$CEPH_DIR/mkfs.log")" = "$n" ] ||
		return 1
	# The first authentication of a key the monitor has just added is
	# sometimes refused ("failed to decode CephXAuthenticate"): try again.
	for try in 1 2 3; do
		rm -rf "${CEPH_DIR:?}/osd.$n"/*
		ceph-osd --conf "$CEPH_CONF" -i "$n" --mkfs --osd-uuid "$uuid" \
			>>"$CEPH_DIR/mkfs.log" 2>&1 && return 0
		sleep 0.5
	done
	return 1
}

ceph_osd_start() {
	ceph-osd --conf "$CEPH_CONF" -i "$1" >>"$CEPH_DIR/mkfs.log" 2>&1 &&
		_ceph_wait_pid "$CEPH_DIR/osd.$1.pid"
}

ceph_osd_running() {
	local pid
	pid=$(cat "$CEPH_DIR/osd.$1.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null
}

ceph_osd_kill() {
	local pid
	pid=$(cat "$CEPH_DIR/osd.$1.pid" 2>/dev/null) || return 1
	kill -9 "$pid"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
	rm -f "$CEPH_DIR/osd.$1.pid"
}

# Until every placement group of POOL serves I/O (tests/lib/ceph_pool_ready.py:
# there is no manager to ask).
ceph_pool_wait() {
	timeout $(($2 + 20)) /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/ceph_pool_ready.py" \
		"$CEPH_CONF" "$1" "$2"
}

# Until N OSDs are up.
_ceph_wait_osds_up() {
	local want=$1 i
	for ((i = 0; i < 120; i++)); do
		[ "$(ceph_cmd osd stat -f json 2>/dev/null |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["num_up_osds"])' 2>/dev/null)" = "$want" ] &&
			return 0
		sleep 0.5
	done
	return 1
}

ceph_pool_create() {
	ceph_cmd osd pool create "$1" 16 16 replicated >/dev/null 2>&1 &&
		ceph_cmd osd pool application enable "$1" rbd >/dev/null 2>&1 &&
		ceph_pool_wait "$1" 60
}

ceph_user_create() {
	ceph_cmd auth get-or-create "client.$1" mon 'profile rbd' osd 'profile rbd' \
		>"$CEPH_DIR/ceph.client.$1.keyring"
}

ceph_cluster_start() {
	local dir=$1 owner=${2:-} fsid n pids=() failed=
	ceph_use "$dir"
	rm -rf "$dir"
	mkdir -p "$dir/crash"
	fsid=$(cat /proc/sys/kernel/random/uuid)
	# (no ceph.conf yet: the tools must not look for one)
	CEPH_CONF=/dev/null ceph-authtool --create-keyring "$dir/ceph.mon.keyring" --gen-key \
		-n mon. --cap mon 'allow *' >/dev/null || return 1
	CEPH_CONF=/dev/null ceph-authtool --create-keyring "$dir/ceph.client.admin.keyring" --gen-key \
		-n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' \
		>/dev/null || return 1
	CEPH_CONF=/dev/null ceph-authtool "$dir/ceph.mon.keyring" --import-keyring \
		"$dir/ceph.client.admin.keyring" >/dev/null || return 1
	if [ -n "$owner" ]; then
		# Removes the cluster when the owner is gone, however it ended;
		# only this cluster (DIR may have been removed and made again).
		echo "$fsid" >"$dir/fsid"
		(
			trap '' TERM INT HUP
			while kill -0 "$owner" 2>/dev/null && [ "$(cat "$dir/fsid" 2>/dev/null)" = "$fsid" ]; do
				sleep 1
			done
			[ "$(cat "$dir/fsid" 2>/dev/null)" = "$fsid" ] && ceph_cluster_stop "$dir"
		) </dev/null >/dev/null 2>&1 &
	fi
	_ceph_start_mon "$dir" "$fsid" || { _ceph_fail "the monitor did not start"; return 1; }
	# The OSDs are made and started side by side (each mostly waits).
	for ((n = 0; n < CEPH_OSDS; n++)); do
		{ _ceph_osd_mkfs $n && ceph_osd_start $n; } &
		pids+=($!)
	done
	for n in "${!pids[@]}"; do
		wait "${pids[$n]}" || failed+=" osd.$n"
	done
	[ -z "$failed" ] || { _ceph_fail "mkfs or start failed:$failed"; return 1; }
	_ceph_wait_osds_up "$CEPH_OSDS" || { _ceph_fail "not all OSDs came up"; return 1; }
}

ceph_cluster_stop() {
	local dir=$1 f pid pids=() i
	[ -f "$dir/ceph.conf" ] || return 0
	for f in "$dir"/osd.*.pid "$dir"/mon.*.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f" 2>/dev/null) || continue
		# Only a Ceph daemon of this cluster: pid files outlive their process.
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir/ceph.conf" ||
			continue
		kill -9 "$pid" 2>/dev/null && pids+=("$pid")
	done
	for pid in "${pids[@]}"; do
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
	done
	rm -rf "$dir"
}

# ---- for tests/integration/ceph_*.sh (after common.sh) ----------------------
#
#   cfs_ceph_require          skip (77) unless root and Ceph's programs are here
#                        (and with BUILD=tsan, load tests/tsan-ceph.supp)
#   cfs_ceph_cluster          the cluster tests/run.sh started for every Ceph
#                        test ($CFS_CEPH_DIR), or, run alone, one of the test's
#                        own (removed at exit); its pool is $CFS_RBD_POOL
#   cfs_rbd_image NAME SIZE   a new image of the pool, removed at exit; sets
#                        CFS_RBD=rbd:POOL/NAME-PID (never call it in $(...))
#   cfs_rbd_sum IMAGE_SOURCE  md5 of the image's whole content (rbd export)

CFS_RBD_POOL=chunkfs

cfs_ceph_require() {
	local c
	cfs_require_root
	for c in ceph-mon ceph-osd ceph rbd monmaptool ceph-authtool; do
		command -v $c >/dev/null 2>&1 ||
			cfs_skip "needs $c (Debian: ceph-mon ceph-osd ceph-common, as .ci/install-deps.sh installs)"
	done
	/usr/bin/python3 -c 'import rados' 2>/dev/null || cfs_skip "needs python3-rados (ceph-common)"
	# BUILD=tsan: Ceph's libraries are not instrumented (tests/tsan-ceph.supp)
	if [ "${BUILD:-}" = tsan ]; then
		export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$CFS_ROOT/tests/tsan-ceph.supp"
	fi
}

# The shared cluster answers if its monitor does.
_cfs_ceph_alive() {
	[ -f "$1/ceph.conf" ] && [ -f "$1/mon.a.pid" ] && kill -0 "$(cat "$1/mon.a.pid")" 2>/dev/null
}

cfs_ceph_cluster() {
	local s
	if [ -n "${CFS_CEPH_DIR:-}" ] && _cfs_ceph_alive "$CFS_CEPH_DIR"; then
		ceph_use "$CFS_CEPH_DIR"
		cfs_log "Ceph: the shared cluster in $CFS_CEPH_DIR"
		return 0
	fi
	s=$(date +%s)
	cfs_defer "ceph_cluster_stop '$CFS_WORK/ceph'"
	ceph_cluster_start "$CFS_WORK/ceph" $$ || cfs_fail "the Ceph cluster did not start"
	ceph_pool_create $CFS_RBD_POOL || cfs_fail "pool $CFS_RBD_POOL not created"
	cfs_log "Ceph: a cluster of this test in $CFS_WORK/ceph, up in $(($(date +%s) - s)) s"
}

cfs_rbd_image() {
	local name=$1-$$ size=$2
	rbd create --size "$size" "$CFS_RBD_POOL/$name" || cfs_fail "rbd create $CFS_RBD_POOL/$name"
	cfs_defer "timeout 60 rbd rm --no-progress $CFS_RBD_POOL/$name"
	CFS_RBD=rbd:$CFS_RBD_POOL/$name
}

cfs_rbd_sum() {
	rbd export --no-progress "${1#rbd:}" - 2>/dev/null | md5sum | cut -d' ' -f1
}
