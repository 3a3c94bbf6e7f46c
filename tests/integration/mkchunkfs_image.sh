#!/usr/bin/env bash
# mkchunkfs_image.sh — real formats on image files, decoded back with -D.
#
# Covers: a new image created with -s and written fully (no holes, no
# unwritten extents left for the lower filesystem to convert on first
# write), the same with --sparse, an fallocated image (unwritten extents)
# made fully written, extending an image with -s, -L/-U/-b/-a round trips,
# that the dry-run, real-run and -D summaries agree, -q, and that blkid
# reports nothing it knows on the result.
. "$(dirname "$0")/../lib/common.sh"

mk=$CFS_BIN/mkchunkfs
[ -x "$mk" ] || cfs_fail "$mk is not built"
U=3f1a2b3c-4d5e-4f60-8172-839405a6b7c8

# The part of a summary that describes the superblock (cfs_sb_print).
sb_part() { sed -n '/^label:/,/^generation:/p'; }

# allocated_bytes FILE: what the lower filesystem has allocated.
allocated_bytes() { echo $(($(stat -c '%b * %B' "$1"))); }

# no_unwritten FILE: filefrag lists no unwritten extent (skip quietly
# without filefrag or FIEMAP).
no_unwritten() {
	command -v filefrag >/dev/null 2>&1 || return 0
	local out
	out=$(filefrag -v "$1" 2>&1) || return 0
	! grep -q unwritten <<<"$out"
}

# --- 1. new image, written fully ------------------------------------------
img=$CFS_WORK/full.img
dry=$("$mk" -n -U $U -L full -s 64M "$img")
[ ! -e "$img" ] || cfs_fail "-n created $img"
out=$("$mk" -U $U -L full -s 64M "$img") || cfs_fail "format of a new image failed: $out"
[ "$(stat -c %s "$img")" -eq $((64 << 20)) ] || cfs_fail "image is not 64 MiB"
alloc=$(allocated_bytes "$img")
[ "$alloc" -ge $((64 << 20)) ] || cfs_fail "full image has holes: $alloc bytes allocated"
no_unwritten "$img" || cfs_fail "full image still has unwritten extents: $(filefrag -v "$img")"
printed=$("$mk" -D "$img") || cfs_fail "-D refused a fresh store: $printed"
grep -q '^label: *"full"$' <<<"$printed" || cfs_fail "-D lost the label: $printed"
grep -q "^uuid: *$U\$" <<<"$printed" || cfs_fail "-D lost the uuid: $printed"
grep -q '^flags: *none$' <<<"$printed" || cfs_fail "flags not clear after format: $printed"
grep -q '^slot 0: *generation 2$' <<<"$printed" || cfs_fail "slot 0 not generation 2: $printed"
grep -q '^slot 1: *generation 1$' <<<"$printed" || cfs_fail "slot 1 not generation 1: $printed"
grep -q '^snapshot: *0 records, seq 1, 64 bytes, checksum ok$' <<<"$printed" ||
	cfs_fail "-D did not verify an empty snapshot: $printed"
# Dry run, real run and -D describe the same superblock.
[ "$(sb_part <<<"$dry")" = "$(sb_part <<<"$out")" ] ||
	cfs_fail "dry-run and real summaries differ: $(diff <(sb_part <<<"$dry") <(sb_part <<<"$out"))"
[ "$(sb_part <<<"$out")" = "$(sb_part <<<"$printed")" ] ||
	cfs_fail "real and -D summaries differ: $(diff <(sb_part <<<"$out") <(sb_part <<<"$printed"))"
# blkid must not claim to know the store (no stale type is left behind).
if command -v blkid >/dev/null 2>&1; then
	if blkid -p "$img" >/dev/null 2>&1; then
		cfs_fail "blkid recognises something on a chunkfs store: $(blkid -p "$img")"
	fi
fi
cfs_log "new full image: ok ($alloc bytes allocated)"

# --- 2. new image, --sparse -----------------------------------------------
img=$CFS_WORK/sparse.img
"$mk" -q --sparse -s 256M "$img" || cfs_fail "--sparse format failed"
alloc=$(allocated_bytes "$img")
[ "$alloc" -lt $((16 << 20)) ] || cfs_fail "--sparse image has $alloc bytes allocated"
"$mk" -q -D "$img" || cfs_fail "-D refused the sparse store"
cfs_log "sparse image: ok ($alloc bytes allocated)"

# --- 3. fallocated image: unwritten extents become written ------------------
img=$CFS_WORK/falloc.img
if fallocate -l 64M "$img" 2>/dev/null; then
	"$mk" -q "$img" || cfs_fail "format of an fallocated image failed"
	no_unwritten "$img" || cfs_fail "unwritten extents left: $(filefrag -v "$img")"
	cfs_log "fallocated image: ok"
else
	cfs_log "fallocate unsupported here: skipped the unwritten-extent case"
fi

# --- 4. extending an existing store with -s -----------------------------------
img=$CFS_WORK/grow.img
"$mk" -q -s 32M "$img" || cfs_fail "format 32M failed"
out=$("$mk" -s 96M "$img" 2>&1) && cfs_fail "reformat without -f succeeded: $out"
"$mk" -q -f -s 96M "$img" || cfs_fail "extend to 96M failed"
[ "$(stat -c %s "$img")" -eq $((96 << 20)) ] || cfs_fail "image not extended"
[ "$(allocated_bytes "$img")" -ge $((96 << 20)) ] || cfs_fail "extended tail left sparse"
"$mk" -D "$img" | grep -q '^store size: *100663296 bytes' || cfs_fail "-D size wrong after extend"
# Without -s the existing size is used, and a smaller -s never shrinks.
"$mk" -q -f -s 48M "$img" || cfs_fail "format with a smaller -s failed"
[ "$(stat -c %s "$img")" -eq $((96 << 20)) ] || cfs_fail "image was shrunk"
"$mk" -D "$img" | grep -q '^store size: *50331648 bytes' || cfs_fail "-s 48M not honoured"
cfs_log "extend: ok"

# --- 5. geometry options round-trip -------------------------------------------
img=$CFS_WORK/geo.img
truncate -s 200M "$img"
"$mk" -q -b 8K -a 2M -m 8M "$img" || cfs_fail "format with -b 8K -a 2M -m 8M failed"
printed=$("$mk" -D "$img")
grep -q '^block size: *8192 bytes' <<<"$printed" || cfs_fail "-b lost: $printed"
grep -q '^allocation unit: *2097152 bytes' <<<"$printed" || cfs_fail "-a lost: $printed"
grep -q '^metadata: .*size 8388608 bytes' <<<"$printed" || cfs_fail "-m lost: $printed"
cfs_log "geometry round trip: ok"

# --- 6. -q is quiet on success --------------------------------------------------
img=$CFS_WORK/quiet.img
out=$("$mk" -q -s 32M "$img" 2>&1) || cfs_fail "-q format failed"
[ -z "$out" ] || cfs_fail "-q printed: $out"
cfs_log "quiet: ok"

# --- 7. metadata region: headers always zeroed, all of it with -U ------------------
# 64M store: metadata at 1 MiB, 4 MiB long, halves A at 1 MiB and B at 3 MiB.
img=$CFS_WORK/meta.img
"$mk" -q -s 64M "$img" || cfs_fail "format failed"
dd if=/dev/urandom of="$img" bs=1M seek=1 count=4 conv=notrunc status=none
"$mk" -q -f "$img" || cfs_fail "reformat failed"
# Half A: the 64-byte empty snapshot ("CSNP"), then zeros for 64 KiB.
[ "$(dd if="$img" bs=1 skip=$((1 << 20)) count=4 status=none)" = CSNP ] ||
	cfs_fail "no snapshot at the start of half A"
cmp -s -n $((65536 - 64)) <(dd if="$img" bs=64 skip=$(((1 << 20) / 64 + 1)) status=none) /dev/zero ||
	cfs_fail "half A's first log block is not zeroed"
cmp -s -n 65536 <(dd if="$img" bs=64K skip=48 count=1 status=none) /dev/zero ||
	cfs_fail "the start of half B is not zeroed"
dd if=/dev/urandom of="$img" bs=1M seek=1 count=4 conv=notrunc status=none
"$mk" -q -f -U $U "$img" || cfs_fail "reformat with -U failed"
cmp -s -n $((4 * 1048576 - 64)) <(dd if="$img" bs=64 skip=$(((1 << 20) / 64 + 1)) status=none) /dev/zero ||
	cfs_fail "-U did not zero the whole metadata region"
"$mk" -q -D "$img" || cfs_fail "-D after the -U reformat"
cfs_log "metadata headers: ok"

# --- 8. -D refuses a store whose snapshot is damaged ----------------------------------
printf '\377' | dd of="$img" bs=1 seek=$(((1 << 20) + 20)) conv=notrunc status=none
cfs_expect_fail_with "the metadata snapshot is unusable: bad snapshot checksum" 3 "$mk" -D "$img"
cfs_log "damaged snapshot: refused by -D"
exit 0
