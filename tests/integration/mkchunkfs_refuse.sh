#!/usr/bin/env bash
# mkchunkfs_refuse.sh — every refusal, its message and exit status, and
# that a refused target is left exactly as it was.
#
# Covers: a missing path without -s, a store too small (existing image and
# new one), a character device, ext4 on an image and on a loop device (then
# -f: blkid must show no ext4 afterwards), an existing chunkfs store, a dos
# partition table on an image and on a loop device, a block device in use
# (held with O_EXCL by another process; mounted, where mount works), an
# image attached to a loop device, -D on something that is no store, and an
# image file larger than its filesystem's free space (not --sparse).
. "$(dirname "$0")/../lib/common.sh"
cfs_require_root
cfs_require_cmd losetup blkid md5sum

mk=$CFS_BIN/mkchunkfs
[ -x "$mk" ] || cfs_fail "$mk is not built"

sum() { md5sum <"$1" | cut -d' ' -f1; }
# blkid_types DEV: every TYPE/PTTYPE blkid -p sees, or nothing.
blkid_types() { blkid -p -o export "$1" 2>/dev/null | grep -E '^(PT)?TYPE=' || true; }

# An MBR with one Linux partition, written by hand (sfdisk is not always
# installed): entry at 446 (type 0x83, LBA 2048, 129024 sectors), 55 AA.
write_mbr() {
	printf '\x00\x00\x02\x00\x83\x00\x00\x00\x00\x08\x00\x00\x00\xf8\x01\x00' |
		dd of="$1" bs=1 seek=446 conv=notrunc status=none
	printf '\x55\xaa' | dd of="$1" bs=1 seek=510 conv=notrunc status=none
}

# --- missing path, too small, wrong type --------------------------------------------
missing=$CFS_WORK/missing.img
cfs_expect_fail_with "no such file or device (use -s SIZE to create an image file)" 1 \
	"$mk" "$missing"
[ ! -e "$missing" ] || cfs_fail "a refused run created $missing"

small=$(cfs_image 8M small.img)
before=$(sum "$small")
cfs_expect_fail_with "store too small: chunkfs needs at least 16 MiB" 1 "$mk" "$small"
[ "$(sum "$small")" = "$before" ] || cfs_fail "refused run changed $small"
cfs_expect_fail_with "store too small" 1 "$mk" -s 4M "$missing"
[ ! -e "$missing" ] || cfs_fail "a refused -s run created $missing"

cfs_expect_fail_with "not a block device or a regular file" 1 "$mk" /dev/null

# --- ext4 on an image ------------------------------------------------------------------
if command -v mkfs.ext4 >/dev/null 2>&1; then
	ext=$(cfs_image 64M ext4.img)
	mkfs.ext4 -q -F -L data "$ext" >/dev/null 2>&1 || cfs_fail "mkfs.ext4 failed"
	before=$(sum "$ext")
	cfs_expect_fail_with "contains an ext4 filesystem (label \"data\"); use -f to overwrite" 1 \
		"$mk" "$ext"
	[ "$(sum "$ext")" = "$before" ] || cfs_fail "refused run changed the ext4 image"
	cfs_expect_fail_with "not a chunkfs store" 3 "$mk" -D "$ext"
	"$mk" -q -f "$ext" || cfs_fail "-f over ext4 failed"
	types=$(blkid_types "$ext")
	[ -z "$types" ] || cfs_fail "blkid still sees after -f: $types"
	"$mk" -q -D "$ext" || cfs_fail "-D after -f over ext4"
	cfs_log "ext4 image: refused, then overwritten with -f; blkid sees nothing"
else
	cfs_log "no mkfs.ext4: skipped the ext4 cases"
fi

# --- ext4 on a loop device, and the device in use ------------------------------------------
extimg=$(cfs_image 64M ext4loop.img)
cfs_loop_attach "$extimg"
dev=$CFS_LOOP_DEV
if command -v mkfs.ext4 >/dev/null 2>&1; then
	mkfs.ext4 -q -F -L data "$dev" >/dev/null 2>&1 || cfs_fail "mkfs.ext4 on $dev failed"
	before=$(sum "$dev")
	cfs_expect_fail_with "$dev contains an ext4 filesystem (label \"data\"); use -f to overwrite" 1 \
		"$mk" "$dev"
	[ "$(sum "$dev")" = "$before" ] || cfs_fail "refused run changed $dev"

	mnt=$CFS_WORK/mnt
	mkdir -p "$mnt"
	if mount -t ext4 "$dev" "$mnt" 2>/dev/null; then
		cfs_defer "umount $mnt"
		cfs_expect_fail_with "$dev is in use: mounted on $mnt" 1 "$mk" -f "$dev"
		umount "$mnt"
		cfs_log "mounted device: refused"
	else
		cfs_log "mount does not work here: skipped the mounted-device case"
	fi

	"$mk" -q -f "$dev" || cfs_fail "-f over ext4 on $dev failed"
	types=$(blkid_types "$dev")
	[ -z "$types" ] || cfs_fail "blkid still sees on $dev after -f: $types"
	cfs_log "ext4 on $dev: refused, then overwritten with -f; blkid sees nothing"
fi

# Held open exclusively by another process (what a mount, md or dm does).
if command -v perl >/dev/null 2>&1; then
	fifo=$CFS_WORK/held
	mkfifo "$fifo"
	# The holder always answers on the fifo, so the read below cannot hang.
	perl -MFcntl -e 'open(my $o, ">", $ARGV[1]) or die;
		if (sysopen(my $f, $ARGV[0], O_RDONLY | O_EXCL)) {
			print $o "held\n"; close $o; sleep 120;
		} else { print $o "failed: $!\n"; }' "$dev" "$fifo" &
	holder=$!
	cfs_defer "kill $holder"
	read -r line <"$fifo"
	[ "$line" = held ] || cfs_fail "the O_EXCL holder did not start: $line"
	before=$(sum "$dev")
	cfs_expect_fail_with "$dev is in use: another program holds it open exclusively" 1 \
		"$mk" -f "$dev"
	[ "$(sum "$dev")" = "$before" ] || cfs_fail "refused run changed the held $dev"
	kill "$holder"
	wait "$holder" 2>/dev/null || true
	cfs_log "device held with O_EXCL: refused"
fi

# --- an existing chunkfs store --------------------------------------------------------------
store=$CFS_WORK/store.img
"$mk" -q -L old -s 32M "$store" || cfs_fail "format failed"
before=$(sum "$store")
cfs_expect_fail_with "contains a chunkfs store (label \"old\", uuid " 1 "$mk" "$store"
[ "$(sum "$store")" = "$before" ] || cfs_fail "refused run changed the store"
"$mk" -q -f -L new "$store" || cfs_fail "-f over a chunkfs store failed"
"$mk" -D "$store" | grep -q '^label: *"new"$' || cfs_fail "-f did not write the new store"
cfs_log "existing chunkfs store: refused, then overwritten with -f"

# --- partition tables -------------------------------------------------------------------------
pt=$(cfs_image 64M pt.img)
write_mbr "$pt"
before=$(sum "$pt")
cfs_expect_fail_with "contains a dos partition table; use -f to overwrite" 1 "$mk" "$pt"
[ "$(sum "$pt")" = "$before" ] || cfs_fail "refused run changed the partitioned image"

cfs_loop_attach "$pt"
ptdev=$CFS_LOOP_DEV
cfs_expect_fail_with "$ptdev contains a dos partition table; use -f to overwrite" 1 "$mk" "$ptdev"
"$mk" -q -f "$ptdev" || cfs_fail "-f over a partition table failed"
types=$(blkid_types "$ptdev")
[ -z "$types" ] || cfs_fail "blkid still sees on $ptdev after -f: $types"
cfs_log "partition table (image and $ptdev): refused, then erased with -f"

# --- an image attached to a loop device -----------------------------------------------------------
cfs_expect_fail_with "is attached to $ptdev" 1 "$mk" -f "$pt"
cfs_log "attached image: refused"
# --- an image larger than its filesystem's free space ----------------------------------------
# Refused at once, before a byte is written (it used to write zeros until
# the filesystem was full for everyone, then fail); --sparse still works.
small_fs=$CFS_WORK/smallfs
mkdir -p "$small_fs"
mount -t tmpfs -o size=48M tmpfs "$small_fs" || cfs_skip "cannot mount a tmpfs"
cfs_defer "umount -l '$small_fs'"
start=$(date +%s)
cfs_expect_fail_with "use --sparse" 1 "$mk" -q -s 1G "$small_fs/new.img"
[ ! -e "$small_fs/new.img" ] || cfs_fail "a refused run left $small_fs/new.img"
truncate -s 1G "$small_fs/old.img"
cfs_expect_fail_with "writing the image fully needs 1 GiB more and its filesystem has" 1 \
	"$mk" -q "$small_fs/old.img"
[ "$(stat -c %b "$small_fs/old.img")" -eq 0 ] && [ "$(stat -c %s "$small_fs/old.img")" -eq $((1 << 30)) ] ||
	cfs_fail "a refused run wrote into $small_fs/old.img"
[ $(($(date +%s) - start)) -lt 10 ] || cfs_fail "the refusals took $(($(date +%s) - start)) s"
"$mk" -q --sparse "$small_fs/old.img" >/dev/null || cfs_fail "--sparse on the small filesystem"
"$mk" -q -s 24M "$small_fs/fits.img" >/dev/null || cfs_fail "an image that fits"
cfs_log "image larger than the free space: refused at once; --sparse and one that fits work"
exit 0
