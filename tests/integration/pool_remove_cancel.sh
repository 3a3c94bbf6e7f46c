#!/usr/bin/env bash
# pool_remove_cancel.sh — a store removal cancelled online (fs/POOLS.md,
# "Adding and removing stores online"; chunkfs store remove --cancel):
#   - a rate-limited removal of a store holding a few chunks, fio
#     (crc32c verify, O_DIRECT) writing one of them, cancelled: the store
#     active again, the removal's moves cancelled (the chunk being moved goes
#     back whole), the placements it dropped stay dropped, the data intact,
#     the chunks readable and writable, new chunks go to the store again, a
#     `store remove` waiting on it says it was cancelled; fsck clean after
#     the unmount and the remount does not resume the removal;
#   - bad input: cancel of an unknown store, of store 0, of a store not
#     being removed, of a finished removal, by a user who is not root, usage
#     errors;
#   - crashes: kill -9 right after the cancel's answer (the next mount has
#     the store active, no removal resumed, the data intact); kill -9 after
#     the moves were cancelled but before store 0's table (the next mount
#     resumes the removal; a cancel then works, every chunk whole).
# Under BUILD=tsan the daemons run with ThreadSanitizer and any report fails.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/pool.sh"
cfs_require_fuse
cfs_require_cmd getfattr setfattr fio md5sum setpriv
cfs_tsan_watch

s0=$CFS_WORK/ssd0.img s1=$CFS_WORK/hdd0.img s2=$CFS_WORK/new.img
mnt=$CFS_WORK/mnt
log=$CFS_WORK/chunkfs-mnt.log
pool=$s0,$s1

cfs_mkfs "$s0" 128M -L ssd0
"$mk" -q -s 96M --sparse -L hdd0 --join "$s0" "$s1" || cfs_fail "join of hdd0 failed"
truncate -s 32M "$s2"
cfs_mount "$pool" "$mnt"

sums() { md5sum "$mnt"/db/c* | sed "s|$mnt/||"; }
# moves_end: every chunk's move has ended (the walks back of cancelled moves).
moves_end() {
	local f i busy
	for ((i = 0; i < 300; i++)); do
		busy=
		for f in "$mnt"/db/*; do
			case $(progress "$f") in
			state=none* | state=done*) ;;
			state=error* | state=nospace*) cfs_fail "$f: $(progress "$f")" ;;
			*) busy=$f ;;
			esac
		done
		[ -z "$busy" ] && return 0
		sleep 0.1
	done
	cfs_fail "the moves did not end: $busy $(progress "$busy")"
}
# removing_with_progress: a move of the removal has copied something.
removing_with_progress() {
	local i f
	for ((i = 0; i < 100; i++)); do
		for f in "$mnt"/db/*; do
			[[ $(progress "$f") =~ ^state=moving\ from=hdd0\ .*\ done=[1-9] ]] && return 0
		done
		sleep 0.1
	done
	cfs_fail "nothing moved off hdd0 in 10 s at 2 MiB/s: $(stores)"
}
# whole: every chunk is whole on one store.
whole() {
	local f
	for f in "$mnt"/db/c*; do
		[[ $(where "$f") != *,* ]] || cfs_fail "$1: $f is on $(where "$f")"
	done
}
# on_hdd0: every chunk is whole on hdd0.
on_hdd0() {
	local f
	for f in "$mnt"/db/c*; do
		[ "$(where "$f")" = hdd0 ] || cfs_fail "$1: $f is on $(where "$f")"
	done
}

cd "$CFS_WORK"
engine=io_uring
fio --enghelp=io_uring >/dev/null 2>&1 || engine=libaio
mkdir "$mnt/db"
setfattr -n user.chunkfs.store -v hdd0 "$mnt/db"
for c in c1 c2 c3; do
	dd if=/dev/urandom of="$mnt/db/$c" bs=1M count=16 oflag=direct status=none
done
fio_args=(--name=rc --filename="$mnt/db/fio" --ioengine=$engine --direct=1 --iodepth=8
	--bs=4k --size=8M --verify=crc32c)
fio "${fio_args[@]}" --rw=write --output="$CFS_WORK/fio-fill.out" ||
	{ cat "$CFS_WORK/fio-fill.out"; cfs_fail "fio fill failed"; }
fio_verify() {
	fio "${fio_args[@]}" --rw=write --verify_only --output="$CFS_WORK/fio-verify.out" ||
		{ cat "$CFS_WORK/fio-verify.out"; cfs_fail "fio verify $1 failed"; }
}
before=$(sums)
on_hdd0 "before the removal"

# --- cancel under fio ------------------------------------------------------------------------
fio "${fio_args[@]}" --rw=randrw --verify_backlog=64 --runtime=4 --time_based \
	--output="$CFS_WORK/fio-run.out" &
fio_pid=$!
cfs_defer "kill $fio_pid 2>/dev/null"
# A remover that waits, as a DBA's terminal would.
"$cm" store remove --rate 2M "$mnt" hdd0 >"$CFS_WORK/remove.out" 2>&1 &
remove_pid=$!
cfs_defer "kill $remove_pid 2>/dev/null"
removing_with_progress
[ "$(field_of hdd0 state)" = removing ] || cfs_fail "hdd0 during its removal: $(stores)"
getfattr -n user.chunkfs.store "$mnt/db" >/dev/null 2>&1 &&
	cfs_fail "the removal kept db's placement: $(where "$mnt/db")"
out=$("$cm" store remove --cancel "$mnt" hdd0) || cfs_fail "chunkfs store remove --cancel failed: $out"
[[ $out =~ ^"removal of hdd0 cancelled: "[0-9.]+" MiB had moved off it; "[0-9]+" moves"?" off it cancelled: the units already moved go back onto it"$ ]] ||
	cfs_fail "the cancel said: $out"
[ "$(field_of hdd0 state)" = active ] || cfs_fail "hdd0 after the cancel: $(stores)"
[ -z "$(field_of hdd0 left)" ] && [ -z "$(field_of hdd0 stopped)" ] ||
	cfs_fail "hdd0's line after the cancel: $(stores)"
rc=0
wait $remove_pid || rc=$?
[ $rc -eq 1 ] || cfs_fail "the waiting store remove exited $rc: $(cat "$CFS_WORK/remove.out")"
grep -q "chunkfs store remove: the removal of hdd0 was cancelled" "$CFS_WORK/remove.out" ||
	cfs_fail "the waiting store remove said: $(cat "$CFS_WORK/remove.out")"
grep -q "store hdd0 (index 1): removal of hdd0 cancelled" "$log" || cfs_fail "no log line for the cancel"
wait $fio_pid || { cat "$CFS_WORK/fio-run.out"; cfs_fail "fio under the removal and its cancel failed"; }
moves_end
on_hdd0 "after the cancel"
fio_verify "after the cancel"
[ "$(sums)" = "$before" ] || cfs_fail "the chunks changed: $(sums)"
getfattr -n user.chunkfs.store "$mnt/db" >/dev/null 2>&1 &&
	cfs_fail "a placement the removal dropped came back: $(where "$mnt/db")"
cfs_log "cancel under fio: hdd0 active, the chunk being moved back whole, data intact"

# Readable, writable, and the store takes new chunks again.
dd if=/dev/urandom of="$mnt/db/c1" bs=1M count=1 seek=16 oflag=direct conv=notrunc status=none ||
	cfs_fail "writing c1 after the cancel"
[ "$(stat -c %s "$mnt/db/c1")" -eq $((17 * 1048576)) ] || cfs_fail "c1's size after the write"
before=$(sums)
mkdir "$mnt/again"
setfattr -n user.chunkfs.store -v hdd0 "$mnt/again" || cfs_fail "placing a directory on hdd0 again"
dd if=/dev/urandom of="$mnt/again/new" bs=1M count=4 oflag=direct status=none
[ "$(where "$mnt/again/new")" = hdd0 ] || cfs_fail "a new chunk went to $(where "$mnt/again/new")"
new_sum=$(md5sum <"$mnt/again/new")
cfs_log "after the cancel: chunks written, a new chunk on hdd0"

cfs_umount "$mnt" || cfs_fail "unmount"
"$fsck" "$pool" >"$CFS_WORK/fsck.out" || cfs_fail "fsck after the cancel: $(cat "$CFS_WORK/fsck.out")"
resumed=$(grep -c "resuming its removal" "$log" || true)
cfs_mount "$pool" "$mnt"
sleep 1
[ "$(grep -c "resuming its removal" "$log" || true)" = "$resumed" ] || cfs_fail "the remount resumed the removal"
[ "$(field_of hdd0 state)" = active ] || cfs_fail "hdd0 after the remount: $(stores)"
on_hdd0 "after the remount"
[ "$(sums)" = "$before" ] || cfs_fail "the chunks changed after the remount"
[ "$(md5sum <"$mnt/again/new")" = "$new_sum" ] || cfs_fail "the new chunk changed after the remount"
fio_verify "after the remount"
cfs_log "fsck clean; the remount has hdd0 active and resumes nothing"

# --- bad input -------------------------------------------------------------------------------
listing=$(stores)
cfs_expect_fail_with "no store nosuch in this pool" 1 "$cm" store remove --cancel "$mnt" nosuch
cfs_expect_fail_with "store hdd0 is not being removed" 1 "$cm" store remove --cancel "$mnt" hdd0
cfs_expect_fail_with "store ssd0 is not being removed" 1 "$cm" store remove --cancel "$mnt" 0
cfs_expect_fail_with "Permission denied" 1 setpriv --reuid 65534 --regid 65534 \
	--clear-groups "$cm" store remove --cancel "$mnt" hdd0
cfs_expect_exit 2 "$cm" store remove --cancel --rate 1M "$mnt" hdd0
cfs_expect_exit 2 "$cm" store remove --cancel --no-wait "$mnt" hdd0
cfs_expect_exit 2 "$cm" store add --cancel "$mnt" "$s2"
cfs_expect_exit 2 "$cm" store remove --cancel "$mnt"
for v in "cancel-remove" "cancel-remove hdd0 ssd0" "cancel-removes hdd0"; do
	cfs_expect_fail_with "Invalid argument" 1 setfattr -n user.chunkfs.stores -v "$v" "$mnt"
done
# A finished removal: said so, nothing to cancel.
"$cm" store add "$mnt" "$s2" -L new0 >/dev/null || cfs_fail "adding new0"
"$cm" store remove "$mnt" new0 >/dev/null || cfs_fail "removing new0"
cfs_expect_fail_with "the removal of new0 has finished: it is no longer in the pool" 1 \
	"$cm" store remove --cancel "$mnt" new0
[ "$(stores | awk '{ print $1, $2, $3 }')" = "$(awk '{ print $1, $2, $3 }' <<<"$listing")" ] ||
	cfs_fail "bad input changed the stores: $(stores)"
cfs_log "bad input refused with its reason"

# --- kill -9 right after the cancel's answer ---------------------------------------------------
"$cm" store remove --no-wait --rate 2M "$mnt" hdd0 >/dev/null || cfs_fail "store remove --no-wait"
removing_with_progress
"$cm" store remove --cancel "$mnt" hdd0 >/dev/null || cfs_fail "the cancel before kill -9"
cfs_kill9 "$mnt"
"$fsck" "$pool" >"$CFS_WORK/fsck.out" || cfs_fail "fsck after kill -9: $(cat "$CFS_WORK/fsck.out")"
resumed=$(grep -c "resuming its removal" "$log" || true)
cfs_mount "$pool" "$mnt"
sleep 1
[ "$(grep -c "resuming its removal" "$log" || true)" = "$resumed" ] ||
	cfs_fail "the mount after kill -9 resumed the cancelled removal"
[ "$(field_of hdd0 state)" = active ] || cfs_fail "hdd0 after kill -9 and a remount: $(stores)"
moves_end
on_hdd0 "after kill -9 and a remount"
[ "$(sums)" = "$before" ] || cfs_fail "the chunks changed in the crash"
fio_verify "after kill -9"
cfs_log "kill -9 after the cancel's answer: hdd0 active at the next mount, the moves went back"

# --- kill -9 inside the cancel, before store 0's table -----------------------------------------
cfs_umount "$mnt" || cfs_fail "unmount"
export CHUNKFS_TEST_KILL=store-cancel-moves
cfs_mount "$pool" "$mnt"
unset CHUNKFS_TEST_KILL
"$cm" store remove --no-wait --rate 2M "$mnt" hdd0 >/dev/null || cfs_fail "store remove --no-wait"
removing_with_progress
cfs_expect_exit 1 "$cm" store remove --cancel "$mnt" hdd0
cfs_crash "$mnt"
cfs_clear_mount "$mnt"
"$fsck" "$pool" >"$CFS_WORK/fsck.out" || cfs_fail "fsck after a crashed cancel: $(cat "$CFS_WORK/fsck.out")"
resumed=$(grep -c "resuming its removal" "$log" || true)
cfs_mount "$pool" "$mnt"
[ "$(grep -c "resuming its removal" "$log" || true)" -gt "$resumed" ] ||
	cfs_fail "a cancel killed before the table did not leave the removal in place"
[ "$(field_of hdd0 state)" = removing ] || cfs_fail "hdd0 after a crashed cancel: $(stores)"
out=$("$cm" store remove --cancel "$mnt" hdd0) || cfs_fail "the cancel after a crashed one: $out"
[[ $out == *"had moved off it since this mount resumed the removal"* ]] || cfs_fail "the cancel said: $out"
[ "$(field_of hdd0 state)" = active ] || cfs_fail "hdd0 after the second cancel: $(stores)"
moves_end
# The resumed removal turned the cancelled moves around again (moves heading
# for a store being removed); the second cancel leaves those on their way.
whole "after the crashed cancel and a second one"
[ "$(sums)" = "$before" ] || cfs_fail "the chunks changed in the crashed cancel"
fio_verify "after the crashed cancel"
cfs_umount "$mnt" || cfs_fail "unmount"
"$fsck" "$pool" >"$CFS_WORK/fsck.out" || cfs_fail "final fsck: $(cat "$CFS_WORK/fsck.out")"
cfs_log "kill -9 inside the cancel: the removal resumed at the next mount, cancelled again"
cfs_tsan_verdict
