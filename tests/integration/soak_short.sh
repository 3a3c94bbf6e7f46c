#!/usr/bin/env bash
# soak_short.sh — the CI length of bench/soak.sh: up to 50 crash cycles
# (half kill -9, half simulated power loss, torn or not), within 200 s of
# cycles so the test stays under 4 minutes on 2 busy cores; every cycle run
# must survive (fsck clean, every acknowledged file exact, no foreign
# bytes), and at least 10 must have run. CFS_SOAK_CYCLES and
# CFS_SOAK_SECONDS change the limits.
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
out=$CFS_WORK/soak.out
set +e
CFS_TEST_TMPDIR=$CFS_WORK "$CFS_ROOT/bench/soak.sh" -c "${CFS_SOAK_CYCLES:-50}" \
	-t "${CFS_SOAK_SECONDS:-200}" >"$out" 2>&1
rc=$?
set -e
tail -n 3 "$out"
[ $rc -eq 77 ] && cfs_skip "$(tail -n 1 "$out")"
# The daemons' last log lines follow the failure in $out: name it apart.
[ $rc -eq 0 ] || { tail -n 30 "$out"; cfs_fail "soak failed: $(grep -E '^FAIL' "$out" | tail -n 1)"; }
ran=$(sed -nE 's/.*soak: ([0-9]+) cycles run.*/\1/p' "$out" | tail -n 1)
[ "${ran:-0}" -ge 10 ] || cfs_fail "only ${ran:-0} cycles ran"
cfs_log "ok"
