#!/usr/bin/env bash
# mkchunkfs_write_error.sh — a format that fails after writing began exits 2,
# removes an image it created itself, and leaves an existing image marked
# unfinished so every reader refuses it.
#
# The failure is real: mkchunkfs runs with a file size limit (ulimit -f, 20
# MiB; SIGXFSZ ignored) and the image is 64 MiB, so extending a new image
# fails, and the zero-fill of an existing one fails with EFBIG once it passes
# 20 MiB. (A filesystem too small for the image is refused before anything
# is written: mkchunkfs_refuse.)
. "$(dirname "$0")/../lib/common.sh"
cfs_require_root

mk=$CFS_BIN/mkchunkfs
[ -x "$mk" ] || cfs_fail "$mk is not built"
# limited CMD...: CMD with writes past 20 MiB of any file failing (EFBIG).
limited() { (ulimit -f 20480 && trap '' XFSZ && exec "$@"); }

dir=$CFS_WORK/images
mkdir -p "$dir"

# A new image: exit 2, and the image is gone.
cfs_expect_fail_with "File too large" 2 limited "$mk" -q -s 64M "$dir/new.img"
[ ! -e "$dir/new.img" ] || cfs_fail "the failed run left the image it created"
cfs_log "new image that cannot be written: exit 2, image removed"

# An existing image: exit 2, and the store is refused as unfinished.
truncate -s 64M "$dir/old.img"
cfs_expect_fail_with "File too large" 2 limited "$mk" -q "$dir/old.img"
[ -e "$dir/old.img" ] || cfs_fail "the failed run removed an image it did not create"
[ "$(stat -c %b "$dir/old.img")" -gt 0 ] || cfs_fail "the run failed before writing began"
cfs_expect_fail_with "mkchunkfs was interrupted before it finished" 3 "$mk" -D "$dir/old.img"
cfs_log "existing image whose zero-fill fails: exit 2, store refused as unfinished"

# The same image formatted again without the limit succeeds.
"$mk" -q -f "$dir/old.img" || cfs_fail "format after the failed one"
"$mk" -q -D "$dir/old.img" || cfs_fail "-D refused the store"
cfs_log "formatted again: ok"
exit 0
