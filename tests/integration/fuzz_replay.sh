#!/usr/bin/env bash
# fuzz_replay.sh — every saved fuzz input through its target, built without
# libFuzzer (tests/fuzz/driver.c): the regressions (inputs that once crashed
# a target or broke one of its properties; tests/fuzz/regressions/<target>/)
# and the seed corpus. A target aborts on a finding, so any failure here is
# a regression. Runs under the build being tested (BUILD=asan: with ASan).
. "$(dirname "$0")/../lib/common.sh"

ran=0
for src in "$CFS_ROOT"/tests/fuzz/fuzz_*.c; do
	t=$(basename "$src" .c)
	bin=$CFS_BIN/tests/fuzz/$t
	[ -x "$bin" ] || cfs_skip "needs $bin (make check builds it)"
	inputs=()
	for d in "$CFS_ROOT/tests/fuzz/regressions/$t" "$CFS_ROOT/tests/fuzz/corpus/$t"; do
		[ -d "$d" ] || continue
		for f in "$d"/*; do [ -f "$f" ] && inputs+=("$f"); done
	done
	[ ${#inputs[@]} -gt 0 ] || continue
	"$bin" "${inputs[@]}" >/dev/null 2>"$CFS_WORK/$t.err" ||
		{ cat "$CFS_WORK/$t.err"; cfs_fail "$t: an input failed (see above)"; }
	cfs_log "$t: ${#inputs[@]} inputs"
	ran=$((ran + ${#inputs[@]}))
done
cfs_log "ok: $ran inputs"
