#!/usr/bin/env bash
# bench/pool-move-soak.sh — crash and power-loss soak of the mover.
#
# usage: bench/pool-move-soak.sh [-c CYCLES] [-p PERCENT] [-f FILES]
#   -c CYCLES   cycles to run (default 100)
#   -p PERCENT  share of cycles that end in a power loss instead of kill -9
#               (default 50)
#   -f FILES    small files moved in each cycle too (default 40; 0: none)
#
# A pool of two stores (ssd0, hdd0) holds a 24 MiB chunk whose every 4 KiB
# block carries its offset and a generation (tests/integration/
# pool_move_util.py). One cycle: mount (for a power loss with
# -o fault=volatile=1), let a writer change random blocks for 0.5 s (its
# last fsync acknowledges them), start a rate-limited move of the chunk to
# the other store (16-64 MiB/s), and 0.1-1.5 s later kill -9 the daemon or
# pull the plug (SIGUSR1: writes no flush covered are dropped, or torn);
# then fsck.chunkfs -n must be clean, the next mount must finish the move
# (or find it finished), and every block must hold the generation the
# writer acknowledged last.
#
# Small files too (-f): each cycle first writes FILES new files of random
# sizes, most of them in pieces of shared units (tests/integration/
# small_files.py: each fsynced, then written to a manifest on the host's
# disk), asks for every one's move to the other store, and starts a round
# of growth on them (appends, overwrites across a piece's end, truncates,
# unlinks) that the crash interrupts; after the remount every file is moved
# there again (a move whose placement was not durable yet is forgotten by
# the crash) and must hold what the manifest says.
#
# Stops at the first failure, keeping the stores and logs under
# /var/tmp/chunkfs-move-soak-failure.*; prints "move soak: N cycles run, N
# survived" and exits 0 only if every cycle survived. BUILD selects
# build/$BUILD. tests/integration/pool_move.sh runs 10 kill -9 cycles in
# `make check`.
. "$(dirname "$0")/../tests/lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3 getfattr setfattr

cycles=100 power=50 files=40
while getopts "c:p:f:" o; do
	case $o in
	c) cycles=$OPTARG ;;
	p) power=$OPTARG ;;
	f) files=$OPTARG ;;
	*) cfs_fail "usage: $0 [-c CYCLES] [-p PERCENT] [-f FILES]" ;;
	esac
done
small_py="python3 $CFS_ROOT/tests/integration/small_files.py"

util=$CFS_ROOT/tests/integration/pool_move_util.py
s0=$CFS_WORK/ssd0.img s1=$CFS_WORK/hdd0.img
pool=$s0,$s1
mnt=$CFS_WORK/mnt
chunk=$mnt/chunk
small=$mnt/small
bytes=$((24 << 20))
cfs_mkfs "$s0" 256M -L ssd0
"$CFS_BIN/mkchunkfs" -q -s 256M --sparse -L hdd0 --join "$s0" "$s1" || cfs_fail "join failed"

survived=0 kills=0 powers=0 resumed=0
start=$SECONDS
failed() {
	local keep
	keep=$(mktemp -d /var/tmp/chunkfs-move-soak-failure.XXXXXX)
	cp --sparse=always "$s0" "$s1" "$CFS_WORK"/chunkfs-*.log "$CFS_WORK"/*.json "$keep/" 2>/dev/null || true
	cfs_log "move soak: $run cycles run, $survived survived"
	cfs_fail "cycle $run: $1 (stores and logs kept in $keep)"
}
where() { getfattr --absolute-names --only-values -n user.chunkfs.store "$1"; }
wait_moved() {	# the move of the chunk ends with every unit on $1
	local i p
	for ((i = 0; i < 1200; i++)); do
		p=$(getfattr --absolute-names --only-values -n user.chunkfs.move "$chunk")
		case $p in
		state=done* | state=none*) [ "$(where "$chunk")" = "$1" ] && return 0 ;;
		state=error* | state=nospace*) failed "the move to $1: $p" ;;
		esac
		sleep 0.05
	done
	failed "the move to $1 did not end: $p"
}
# move_small STORE: ask for the move of every small file there (a file the
# growth unlinked meanwhile is skipped).
move_small() {
	local f
	for f in "$small"/*; do
		[ -e "$f" ] || continue
		setfattr -n user.chunkfs.move -v "to=$1" "$f" 2>/dev/null || [ ! -e "$f" ] ||
			failed "the move of $f to $1 did not start"
	done
}
# small_moved STORE: every small file's move ended with the file on STORE.
small_moved() {
	local f i p busy
	for ((i = 0; i < 1200; i++)); do
		busy=
		for f in "$small"/*; do
			[ -e "$f" ] || continue
			p=$(getfattr --absolute-names --only-values -n user.chunkfs.move "$f")
			case $p in
			state=done* | state=none*) [ "$(where "$f")" = "$1" ] || failed "$f is on $(where "$f") after its move to $1" ;;
			state=error* | state=nospace*) failed "the move of $f to $1: $p" ;;
			*) busy=$f ;;
			esac
		done
		[ -z "$busy" ] && return 0
		sleep 0.05
	done
	failed "the move of $busy to $1 did not end: $p"
}

cfs_mount "$pool" "$mnt"
python3 "$util" fill "$chunk" $bytes
echo '{}' >"$CFS_WORK/model.json"
cfs_umount "$mnt" || cfs_fail "unmount"
to=ssd0
for ((run = 1; run <= cycles; run++)); do
	opts=
	mode=kill9
	if [ $((RANDOM % 100)) -lt "$power" ]; then
		mode=power
		opts="fault=volatile=1,torn=$((RANDOM % 2)),seed=$run"
	fi
	cfs_mount "$pool" "$mnt" "$opts"
	pid=$CFS_MOUNT_PID
	# A new model only once the writer's fsync acknowledged it.
	python3 "$util" writer "$chunk" $bytes 0.5 "$CFS_WORK/next.json" >/dev/null ||
		failed "the writer failed"
	python3 - "$CFS_WORK/model.json" "$CFS_WORK/next.json" <<'EOF'
import json, sys
model = json.load(open(sys.argv[1]))
model.update(json.load(open(sys.argv[2])))
json.dump(model, open(sys.argv[1], "w"))
EOF
	grower=
	if [ "$files" -gt 0 ]; then
		rm -rf "$small" "$CFS_WORK/small.man"
		mkdir "$small"
		$small_py write "$small" "$CFS_WORK/small.man" "$run" "$files" >/dev/null ||
			failed "writing the small files"
		move_small $to
		$small_py grow "$small" "$CFS_WORK/small.man" "$run" >/dev/null 2>&1 &
		grower=$!
	fi
	setfattr -n user.chunkfs.move -v "to=$to rate=$((16 + RANDOM % 49))M" "$chunk" ||
		failed "the move to $to did not start"
	sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.1 + (r % 140) / 100 }')"
	if [ $mode = power ]; then
		kill -USR1 "$pid" 2>/dev/null || failed "the daemon had exited before the power loss"
		for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$pid" 2>/dev/null && failed "power loss: the daemon did not exit"
		powers=$((powers + 1))
	else
		kills=$((kills + 1))
	fi
	cfs_kill9 "$mnt"
	[ -z "$grower" ] || wait "$grower" 2>/dev/null || true
	"$CFS_BIN/fsck.chunkfs" -n "$pool" >"$CFS_WORK/fsck.out" 2>&1 ||
		failed "fsck after the crash: $(cat "$CFS_WORK/fsck.out")"
	cfs_mount "$pool" "$mnt"
	grep -qE "mover: [0-9]+ moves? to finish" <(tail -n 3 "$CFS_WORK/chunkfs-mnt.log") && resumed=$((resumed + 1))
	wait_moved $to
	python3 "$util" check "$chunk" $bytes "$CFS_WORK/model.json" || failed "the chunk after the crash"
	if [ "$files" -gt 0 ]; then
		move_small $to
		small_moved $to
		$small_py check "$small" "$CFS_WORK/small.man" >/dev/null ||
			failed "the small files after the crash"
	fi
	cfs_umount "$mnt" || failed "unmount"
	survived=$((survived + 1))
	to=$([ $to = ssd0 ] && echo hdd0 || echo ssd0)
done
cfs_log "move soak: $((run - 1)) cycles run, $survived survived ($kills kill -9, $powers power losses;" \
	"$resumed moves resumed by the next mount), $((SECONDS - start)) s"
