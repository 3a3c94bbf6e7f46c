#!/usr/bin/env bash
# mkchunkfs_interrupted.sh — a format killed midway leaves a store that
# every reader refuses, and a format killed after its first final
# superblock leaves a valid one.
#
# MKCHUNKFS_TEST_KILL=<stage> makes mkchunkfs SIGKILL itself right after a
# step (inprogress, data, meta, slot1); then one run is killed from outside
# while it writes a large image, as a user's Ctrl-C or the OOM killer would.
. "$(dirname "$0")/../lib/common.sh"

mk=$CFS_BIN/mkchunkfs
[ -x "$mk" ] || cfs_fail "$mk is not built"
interrupted="mkchunkfs was interrupted before it finished"

# --- stages before the store is complete: refused by the decoder -------------------
for stage in inprogress data meta; do
	img=$CFS_WORK/$stage.img
	rc=0
	MKCHUNKFS_TEST_KILL=$stage "$mk" -q -s 64M "$img" || rc=$?
	[ $rc -eq 137 ] || cfs_fail "stage $stage: expected death by SIGKILL (137), got $rc"
	[ -e "$img" ] || cfs_fail "stage $stage: the killed run left no image"
	cfs_expect_fail_with "$interrupted" 3 "$mk" -D "$img"
	# A new run refuses it without -f, and names it...
	cfs_expect_fail_with "contains an unfinished chunkfs store (mkchunkfs was interrupted); use -f" 1 \
		"$mk" "$img"
	# ...and finishes the job with -f.
	"$mk" -q -f "$img" || cfs_fail "stage $stage: -f over an unfinished store failed"
	"$mk" -q -D "$img" || cfs_fail "stage $stage: the store is not valid after -f"
	cfs_log "killed after '$stage': refused as interrupted, then reformatted"
done

# --- killed after the first final superblock: already a valid store ------------------
img=$CFS_WORK/slot1.img
rc=0
MKCHUNKFS_TEST_KILL=slot1 "$mk" -q -s 64M "$img" || rc=$?
[ $rc -eq 137 ] || cfs_fail "stage slot1: expected 137, got $rc"
printed=$("$mk" -D "$img") || cfs_fail "killed after slot 1: -D refused a complete store: $printed"
grep -q '^slot 1: *generation 1$' <<<"$printed" || cfs_fail "slot 1: $printed"
grep -q '^slot 0: *generation 0, in progress$' <<<"$printed" || cfs_fail "slot 0: $printed"
cfs_log "killed after slot 1: valid store on generation 1"

# --- reformatting a finished store and killing it: the old store must not survive ---
img=$CFS_WORK/reformat.img
"$mk" -q -L first -s 64M "$img" || cfs_fail "format failed"
rc=0
MKCHUNKFS_TEST_KILL=data "$mk" -q -f -L second "$img" || rc=$?
[ $rc -eq 137 ] || cfs_fail "reformat: expected 137, got $rc"
cfs_expect_fail_with "$interrupted" 3 "$mk" -D "$img"
cfs_log "interrupted reformat: the old store is gone, the new one refused"

# --- killed from outside while writing zeros -------------------------------------------
img=$CFS_WORK/big.img
"$mk" -q -s 2G "$img" &
pid=$!
cfs_defer "kill -9 $pid"
# Wait (bounded) until the INPROGRESS superblock is on disk, then kill.
for _ in $(seq 1 500); do
	[ "$(head -c 8 "$img" 2>/dev/null)" = "CHUNKFS!" ] && break
	sleep 0.01
done
kill -9 "$pid" 2>/dev/null || true
rc=0
wait "$pid" || rc=$?
if [ $rc -eq 137 ]; then
	cfs_expect_fail_with "$interrupted" 3 "$mk" -D "$img"
	cfs_log "killed from outside while writing: refused as interrupted"
else
	cfs_log "the 2G format finished before the kill (exit $rc): outside-kill case not exercised"
	[ $rc -eq 0 ] || cfs_fail "the 2G format failed: exit $rc"
fi
exit 0
