#!/usr/bin/env bash
# extent_race.sh — the extent map's concurrency cases (tests/progs/
# extent_race.c: lookups while runs split and merge, completions racing the
# fold and a clearer, lookups racing online moves), so make check-asan runs
# them under ASan/UBSan and BUILD=tsan under ThreadSanitizer, which
# Criterion's unit tests cannot run under here.
. "$(dirname "$0")/../lib/common.sh"
prog=$CFS_BIN/tests/progs/extent_race
[ -x "$prog" ] || cfs_fail "needs $prog (make bench-build or make check builds it)"
out=$("$prog" 200 2>&1) || cfs_fail "extent_race: $out"
cfs_log "$out"
cfs_log "ok"
