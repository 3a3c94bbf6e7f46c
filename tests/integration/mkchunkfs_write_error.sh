#!/usr/bin/env bash
# mkchunkfs_write_error.sh — a format that fails after writing began exits 2,
# removes an image it created itself, and leaves an existing image marked
# unfinished so every reader refuses it.
#
# The failure is real: the image lives on a 20 MiB tmpfs and is 64 MiB, so
# the zero-fill runs out of space.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_root

mk=$CFS_BIN/mkchunkfs
[ -x "$mk" ] || cfs_fail "$mk is not built"

small=$CFS_WORK/small-fs
mkdir -p "$small"
mount -t tmpfs -o size=20M tmpfs "$small" 2>/dev/null || cfs_skip "cannot mount a tmpfs"
cfs_defer "umount $small"

# A new image: exit 2, and the image is gone.
cfs_expect_fail_with "No space left on device" 2 "$mk" -q -s 64M "$small/new.img"
[ ! -e "$small/new.img" ] || cfs_fail "the failed run left the image it created"
cfs_log "new image on a full filesystem: exit 2, image removed"

# An existing image: exit 2, and the store is refused as unfinished.
truncate -s 64M "$small/old.img"
cfs_expect_fail_with "No space left on device" 2 "$mk" -q "$small/old.img"
[ -e "$small/old.img" ] || cfs_fail "the failed run removed an image it did not create"
cfs_expect_fail_with "mkchunkfs was interrupted before it finished" 3 "$mk" -D "$small/old.img"
cfs_log "existing image on a full filesystem: exit 2, store refused as unfinished"

# The same image with --sparse needs no space for zeros and succeeds.
"$mk" -q -f --sparse "$small/old.img" || cfs_fail "--sparse format on the full filesystem failed"
"$mk" -q -D "$small/old.img" || cfs_fail "-D refused the --sparse store"
cfs_log "--sparse on the same filesystem: ok"
exit 0
