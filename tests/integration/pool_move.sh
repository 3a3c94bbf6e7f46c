#!/usr/bin/env bash
# pool_move.sh — the mover (fs/POOLS.md, "Moving a chunk online"): chunks
# move between the stores of a pool while they are written and read:
#   - fio --verify=crc32c, O_DIRECT QD16 randrw, on a chunk moved back and
#     forth under it; and a writer that checks every block's generation
#     (a lost write shows); verified after the moves and after a remount;
#   - holes stay holes and unwritten sectors unwritten (SEEK_DATA/SEEK_HOLE
#     and the units used, before and after); the source's image gets the
#     bytes back once the move has ended (discards wait during moves);
#   - progress in user.chunkfs.move; rate, pause, resume, cancel;
#   - bad input: not enough room on the target (ENOSPC, nothing changed),
#     two moves of one chunk (EBUSY unless the same target), an
#     unlinked-but-open chunk, bad values;
#   - kill -9 of the daemon at random points of moves (10 cycles): fsck
#     clean, the next mount resumes the move, the data is intact.
# Under BUILD=tsan the daemons run with ThreadSanitizer and any report fails
# the test. POOL_MOVE_CYCLES sets the kill -9 cycles (default 10).
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd getfattr setfattr fio python3
cfs_tsan_watch

mk=$CFS_BIN/mkchunkfs
fsck=$CFS_BIN/fsck.chunkfs
util=$(dirname "$0")/pool_move_util.py
s0=$CFS_WORK/ssd0.img s1=$CFS_WORK/hdd0.img s2=$CFS_WORK/tiny.img
mnt=$CFS_WORK/mnt
pool=$s0,$s1,$s2
MiB=1048576

cfs_mkfs "$s0" 256M -L ssd0
"$mk" -q -s 256M --sparse -L hdd0 --join "$s0" "$s1" || cfs_fail "join of hdd0 failed"
"$mk" -q -s 32M --sparse -L tiny --join "$s0" "$s2" || cfs_fail "join of tiny failed"
cfs_mount "$pool" "$mnt"

where() { getfattr --absolute-names --only-values -n user.chunkfs.store "$1"; }
progress() { getfattr --absolute-names --only-values -n user.chunkfs.move "$1"; }
used_on() {	# used bytes of store $1
	getfattr --only-values -n user.chunkfs.stores "$mnt" |
		awk -v s="$1" '$1 == s { for (i = 2; i <= NF; i++) if ($i ~ /^used=/) { sub("used=", "", $i); print $i } }'
}
# wait_moved FILE STORE: the move of FILE ends with every unit on STORE.
wait_moved() {
	local f=$1 to=$2 i p
	for ((i = 0; i < 600; i++)); do
		p=$(progress "$f")
		case $p in
		state=done* | state=none*) [ "$(where "$f")" = "$to" ] && return 0 ;;
		state=error* | state=nospace*) cfs_fail "move of $f to $to: $p" ;;
		esac
		sleep 0.05
	done
	cfs_fail "move of $f to $to did not end: $(progress "$f"), on $(where "$f")"
}
move() {	# move FILE STORE: start it and wait for it
	setfattr -n user.chunkfs.store -v "$2" "$1" || cfs_fail "setfattr store=$2 on $1 failed"
	wait_moved "$1" "$2"
}

# --- a chunk moved back and forth under fio and a checking writer --------------------
mkdir "$mnt/db"
setfattr -n user.chunkfs.store -v hdd0 "$mnt/db"
cd "$CFS_WORK"
engine=io_uring
fio --enghelp=io_uring >/dev/null 2>&1 || engine=libaio
fio_args=(--name=mv --filename="$mnt/db/fio" --ioengine=$engine --direct=1 --iodepth=16
	--bs=4k --size=24M --verify=crc32c)
fio "${fio_args[@]}" --rw=write --output="$CFS_WORK/fio-fill.out" ||
	{ cat "$CFS_WORK/fio-fill.out"; cfs_fail "fio fill failed"; }
[ "$(where "$mnt/db/fio")" = hdd0 ] || cfs_fail "the chunk is not on hdd0 but $(where "$mnt/db/fio")"
fio "${fio_args[@]}" --rw=randrw --verify_backlog=64 --runtime=6 --time_based \
	--output="$CFS_WORK/fio-move.out" &
fio_pid=$!
cfs_defer "kill $fio_pid"
sleep 0.5
moves=0
while kill -0 $fio_pid 2>/dev/null; do
	for to in ssd0 hdd0; do
		move "$mnt/db/fio" $to
		moves=$((moves + 1))
	done
done
wait $fio_pid || { cat "$CFS_WORK/fio-move.out"; cfs_fail "fio during the moves failed"; }
[ $moves -ge 4 ] || cfs_fail "only $moves moves during fio"
fio "${fio_args[@]}" --rw=write --verify_only --output="$CFS_WORK/fio-verify.out" ||
	{ cat "$CFS_WORK/fio-verify.out"; cfs_fail "fio verify after the moves failed"; }
cfs_log "fio randrw QD16 verified through $moves moves"

python3 "$util" fill "$mnt/db/gen" $((24 * MiB))
python3 "$util" writer "$mnt/db/gen" $((24 * MiB)) 5 "$CFS_WORK/gen.json" >"$CFS_WORK/writer.out" &
writer_pid=$!
cfs_defer "kill $writer_pid"
moves=0
while kill -0 $writer_pid 2>/dev/null; do
	for to in ssd0 hdd0; do
		move "$mnt/db/gen" $to
		moves=$((moves + 1))
	done
done
wait $writer_pid || cfs_fail "the checking writer failed: $(cat "$CFS_WORK/writer.out")"
python3 "$util" check "$mnt/db/gen" $((24 * MiB)) "$CFS_WORK/gen.json" || cfs_fail "after the moves"
cfs_log "every write kept through $moves moves ($(cat "$CFS_WORK/writer.out"))"

# --- holes and partly written units ----------------------------------------------------
f=$mnt/db/sparse
truncate -s $((20 * MiB)) "$f"
dd if=/dev/urandom of="$f" bs=4k count=3 seek=5 conv=notrunc oflag=direct 2>/dev/null
dd if=/dev/urandom of="$f" bs=1M count=2 seek=7 conv=notrunc oflag=direct 2>/dev/null
dd if=/dev/urandom of="$f" bs=512 count=1 seek=$((15 * 2048 + 9)) conv=notrunc oflag=direct 2>/dev/null
fallocate -o $((18 * MiB)) -l $MiB "$f"	# mapped, unwritten
sum=$(md5sum <"$f")
ext=$(python3 "$util" extents "$f")
blocks=$(stat -c %b "$f")
hdd_before=$(used_on hdd0) ssd_before=$(used_on ssd0)
hdd_image_before=$(stat -c %b "$s1")
move "$f" ssd0
# Discards wait while a move runs, then the committer's passes give the
# source's bytes back to the image: at least the 2 MiB written above.
for ((i = 0; i < 100; i++)); do
	[ $(((hdd_image_before - $(stat -c %b "$s1")) * 512)) -ge $((2 * MiB)) ] && break
	sleep 0.1
done
[ $i -lt 100 ] || cfs_fail "hdd0's image kept the moved chunk's bytes: $hdd_image_before -> $(stat -c %b "$s1") blocks"
[ "$(md5sum <"$f")" = "$sum" ] || cfs_fail "the sparse chunk changed in the move"
[ "$(python3 "$util" extents "$f")" = "$ext" ] ||
	cfs_fail "holes or unwritten sectors changed: before $ext, after $(python3 "$util" extents "$f")"
[ "$(stat -c %b "$f")" = "$blocks" ] || cfs_fail "allocation changed: $blocks -> $(stat -c %b "$f") blocks"
moved=$((hdd_before - $(used_on hdd0)))
[ $moved -eq $(($(used_on ssd0) - ssd_before)) ] || cfs_fail "hdd0 lost $moved bytes, ssd0 did not gain them"
[ $moved -eq $((blocks * 512)) ] || cfs_fail "$moved bytes moved, the chunk has $((blocks * 512))"
cfs_log "holes stay holes, unwritten sectors unwritten ($(wc -l <<<"$ext") data segments, $blocks blocks)"

# --- units cut while the mover copies them ---------------------------------------------
# Unthrottled, the mover copies up to four consecutive units under one guard:
# holes punched and a truncate made while it runs land before, inside and
# after those batches. Cut units stay cut, the rest moves intact.
c=$mnt/db/cut
dd if=/dev/urandom of="$CFS_WORK/cut.ref" bs=1M count=48 2>/dev/null
for round in 1 2 3; do
	cp "$CFS_WORK/cut.ref" "$c" || cfs_fail "write $c"
	to=ssd0
	[ "$(where "$c")" = ssd0 ] && to=hdd0
	setfattr -n user.chunkfs.store -v "$to" "$c" || cfs_fail "move of $c to $to"
	for o in 5 13 14 22 30 31; do
		fallocate -p -o $((o * MiB)) -l $MiB "$c" || cfs_fail "punch at $o MiB of $c"
	done
	truncate -s $((40 * MiB)) "$c" || cfs_fail "truncate of $c"
	wait_moved "$c" "$to"
	python3 - "$CFS_WORK/cut.ref" "$c" <<'PY' || cfs_fail "round $round: $c is not the chunk with its cuts"
import sys
MiB = 1 << 20
want = bytearray(open(sys.argv[1], "rb").read()[:40 * MiB])
for o in (5, 13, 14, 22, 30, 31):
    want[o * MiB:(o + 1) * MiB] = bytes(MiB)
sys.exit(open(sys.argv[2], "rb").read() != bytes(want))
PY
	rm -f "$c"
done
cfs_log "holes punched and a truncate during moves: the cut units stay cut, the rest moved intact"

# --- progress, rate, pause, resume, cancel ---------------------------------------------
dd if=/dev/urandom of="$mnt/db/big" bs=1M count=48 oflag=direct 2>/dev/null
sum=$(md5sum <"$mnt/db/big")
setfattr -n user.chunkfs.move -v "to=ssd0 rate=8M" "$mnt/db/big"
sleep 0.5
p=$(progress "$mnt/db/big")
[[ $p == "state=moving from=hdd0 to=ssd0 "* ]] || cfs_fail "progress while moving: $p"
[ "$(where "$mnt/db/big")" = ssd0,hdd0 ] || cfs_fail "a half-moved chunk is on $(where "$mnt/db/big")"
setfattr -n user.chunkfs.move -v pause "$mnt/db/big"
sleep 0.3
p=$(progress "$mnt/db/big")
[[ $p == state=paused* ]] || cfs_fail "after pause: $p"
done1=$(sed 's/.* done=\([0-9]*\).*/\1/' <<<"$p")
sleep 0.5
done2=$(progress "$mnt/db/big" | sed 's/.* done=\([0-9]*\).*/\1/')
[ "$done1" = "$done2" ] || cfs_fail "a paused move went on: $done1 -> $done2"
[ "$done1" -gt 0 ] && [ "$done1" -lt $((48 * MiB)) ] || cfs_fail "done=$done1 after 0.5 s at 8 MiB/s"
# Two moves of one chunk: the same target is a no-op, another one is refused.
setfattr -n user.chunkfs.store -v ssd0 "$mnt/db/big" || cfs_fail "the same target again was refused"
cfs_expect_fail_with "Device or resource busy" 1 setfattr -n user.chunkfs.store -v hdd0 "$mnt/db/big"
setfattr -n user.chunkfs.move -v resume "$mnt/db/big"
sleep 0.3
[[ $(progress "$mnt/db/big") == state=moving* ]] || cfs_fail "after resume: $(progress "$mnt/db/big")"
setfattr -n user.chunkfs.move -v cancel "$mnt/db/big"
wait_moved "$mnt/db/big" hdd0
[ "$(md5sum <"$mnt/db/big")" = "$sum" ] || cfs_fail "the cancelled move changed the chunk"
[ "$(progress "$mnt/db/big")" = state=none ] || cfs_fail "after the cancel: $(progress "$mnt/db/big")"
cfs_log "progress, pause, resume and cancel (the chunk back on hdd0)"

# --- bad input --------------------------------------------------------------------------
before_tiny=$(used_on tiny)
cfs_expect_fail_with "No space left on device" 1 setfattr -n user.chunkfs.store -v tiny "$mnt/db/big"
[ "$(where "$mnt/db/big")" = hdd0 ] || cfs_fail "a refused move left the chunk on $(where "$mnt/db/big")"
[ "$(used_on tiny)" = "$before_tiny" ] || cfs_fail "a refused move kept units on tiny"
[ "$(progress "$mnt/db/big")" = state=none ] || cfs_fail "a refused move left $(progress "$mnt/db/big")"
grep -q "store tiny has .* GiB free, the chunk needs" "$CFS_WORK/chunkfs-mnt.log" ||
	cfs_fail "no log line for the refused move"
for v in "to=nosuch" "rate=fast" "to=ssd0 rate=-1" "pause now" "bogus"; do
	cfs_expect_fail_with "Invalid argument" 1 setfattr -n user.chunkfs.move -v "$v" "$mnt/db/big"
done
cfs_expect_fail_with "No such file or directory" 1 setfattr -n user.chunkfs.move -v pause "$mnt/db/big"
cfs_expect_fail_with "Permission denied" 1 setpriv --reuid 65534 --regid 65534 --clear-groups \
	setfattr -n user.chunkfs.store -v ssd0 "$mnt/db/big"
[ "$(md5sum <"$mnt/db/big")" = "$sum" ] || cfs_fail "bad input changed the chunk"
# An unlinked chunk still open moves too (through /proc/PID/fd).
exec 7<"$mnt/db/big"
rm "$mnt/db/big"
setfattr -n user.chunkfs.store -v ssd0 /proc/$$/fd/7 || cfs_fail "moving an unlinked, open chunk"
wait_moved /proc/$$/fd/7 ssd0
[ "$(md5sum </proc/$$/fd/7)" = "$sum" ] || cfs_fail "the unlinked chunk changed in its move"
exec 7<&-
cfs_log "bad input refused cleanly; an unlinked, open chunk moved"

# --- chunkfs move ----------------------------------------------------------------------------
cm=$CFS_BIN/chunkfs
dd if=/dev/urandom of="$mnt/db/cli" bs=1M count=40 oflag=direct 2>/dev/null
sum=$(md5sum <"$mnt/db/cli")
out=$("$cm" move "$mnt/db/cli" ssd0) || cfs_fail "chunkfs move failed: $out"
[[ $out == "moved $mnt/db/cli to ssd0: 40.0 MiB in "* ]] || cfs_fail "chunkfs move said: $out"
[ "$(where "$mnt/db/cli")" = ssd0 ] || cfs_fail "chunkfs move left the chunk on $(where "$mnt/db/cli")"
"$cm" move "$mnt/db/cli" ssd0 >/dev/null || cfs_fail "chunkfs move to the store it is on failed"
"$cm" move --no-wait --rate 2M "$mnt/db/cli" hdd0 || cfs_fail "chunkfs move --no-wait failed"
st=$("$cm" move --status "$mnt/db/cli")
[[ $st == "state=moving from=ssd0 to=hdd0 "*" limit=2097152" ]] || cfs_fail "chunkfs move --status: $st"
cfs_expect_exit 1 "$cm" move "$mnt/db/cli" ssd0
grep -q "is being moved to another store" <<<"$out" || cfs_fail "a second move said: $out"
"$cm" move --pause "$mnt/db/cli" || cfs_fail "chunkfs move --pause"
"$cm" move --resume "$mnt/db/cli" || cfs_fail "chunkfs move --resume"
"$cm" move --cancel "$mnt/db/cli" || cfs_fail "chunkfs move --cancel"
wait_moved "$mnt/db/cli" ssd0
cfs_expect_exit 1 "$cm" move "$mnt/db/cli" tiny
grep -q "not enough room on tiny: it has .* free, the chunk needs up to 40.0 MiB; nothing was changed" \
	<<<"$out" || cfs_fail "chunkfs move to a full store said: $out"
cfs_expect_exit 1 "$cm" move "$mnt/db/cli" nosuch
grep -q "no store nosuch in this pool" <<<"$out" || cfs_fail "chunkfs move to no store said: $out"
cfs_expect_exit 1 "$cm" move --cancel "$mnt/db/cli"
grep -q "no move to change" <<<"$out" || cfs_fail "a cancel without a move said: $out"
cfs_expect_exit 2 "$cm" move "$mnt/db/cli"
cfs_expect_exit 2 "$cm" move --pause --cancel "$mnt/db/cli"
cfs_expect_exit 2 "$cm" move "$mnt/db/cli" ssd0 extra
[ "$(md5sum <"$mnt/db/cli")" = "$sum" ] || cfs_fail "chunkfs move changed the chunk"
cfs_log "chunkfs move: wait, --no-wait, --status, --rate, pause, resume, cancel, refusals"

cfs_umount "$mnt" || cfs_fail "unmount"
"$fsck" "$pool" >/dev/null || cfs_fail "fsck after the moves: $("$fsck" "$pool")"
cfs_mount "$pool" "$mnt"
fio "${fio_args[@]}" --rw=write --verify_only --output="$CFS_WORK/fio-verify2.out" ||
	{ cat "$CFS_WORK/fio-verify2.out"; cfs_fail "fio verify after the remount failed"; }
python3 "$util" check "$mnt/db/gen" $((24 * MiB)) "$CFS_WORK/gen.json" || cfs_fail "after the remount"
[ "$(python3 "$util" extents "$f")" = "$ext" ] || cfs_fail "the sparse chunk changed in the remount"
cfs_log "fsck clean; everything verified after a remount"

# --- kill -9 at random points of moves ----------------------------------------------------
cycles=${POOL_MOVE_CYCLES:-10}
k=$mnt/db/gen
to=ssd0
[ "$(where "$k")" = ssd0 ] && to=hdd0
for ((c = 1; c <= cycles; c++)); do
	setfattr -n user.chunkfs.move -v "to=$to rate=32M" "$k" || cfs_fail "cycle $c: the move did not start"
	sleep "0.$((RANDOM % 7 + 1))"
	cfs_kill9 "$mnt"
	"$fsck" "$pool" >"$CFS_WORK/fsck.out" || cfs_fail "cycle $c: fsck after kill -9: $(cat "$CFS_WORK/fsck.out")"
	cfs_mount "$pool" "$mnt"
	wait_moved "$k" $to	# resumed by the mount, or finished before the kill
	python3 "$util" check "$k" $((24 * MiB)) "$CFS_WORK/gen.json" || cfs_fail "cycle $c: data after the crash"
	to=$([ $to = ssd0 ] && echo hdd0 || echo ssd0)
done
grep -q "mover: 1 move to finish" "$CFS_WORK/chunkfs-mnt.log" || cfs_fail "no mount resumed a move"
cfs_log "$cycles kill -9 cycles: fsck clean, the move resumed, the data intact"
cfs_umount "$mnt" || cfs_fail "unmount"
"$fsck" "$pool" >/dev/null || cfs_fail "final fsck: $("$fsck" "$pool")"
cfs_tsan_verdict
