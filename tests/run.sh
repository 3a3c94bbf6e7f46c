#!/usr/bin/env bash
# tests/run.sh — run chunkfs's tests and print one closing line:
#     tests: N passed, N failed, N skipped
#
# usage: tests/run.sh [unit] [golden] [integration]     (default: all three)
#
#   unit         every Criterion binary in build/$BUILD/tests/unit/ (each test counts)
#   golden       tests/golden/run.sh (each case counts)
#   integration  every executable tests/integration/*.sh (each script counts:
#                exit 0 pass, 77 skip, anything else fail), under a timeout
#
# Environment:
#   BUILD               release | debug | asan (default release): which build/ to test
#   CFS_TEST_TIMEOUT    seconds per integration script (default 600; 900 under
#                       ASan, whose daemons run two to three times slower)
#   CFS_TEST_FILTER     run only integration scripts whose name matches this regex
#   SANITIZER_REPORTS   directory: sanitized processes write their reports there
#                       (make check-asan fails on any file in it)
#   CHUNKFS_TEST_DEV    a spare block device some tests may use (else they use loop devices)
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
export BUILD=${BUILD:-release}
export CFS_ROOT=$root
export CFS_BIN=$root/build/$BUILD
logdir=$CFS_BIN/test-logs
mkdir -p "$logdir"

if [ -n "${SANITIZER_REPORTS:-}" ]; then
	mkdir -p "$SANITIZER_REPORTS"
	export ASAN_OPTIONS="log_path=$SANITIZER_REPORTS/asan:detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
	export UBSAN_OPTIONS="log_path=$SANITIZER_REPORTS/ubsan:print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
fi

suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(unit golden integration)

passed=0 failed=0 skipped=0
failures=()

note_fail() { failures+=("$1"); }

run_unit() {
	local bin out synth tested passing
	for bin in "$CFS_BIN"/tests/unit/test_*; do
		[ -x "$bin" ] || continue
		case "$bin" in *.o | *.d) continue ;; esac
		out=$logdir/unit-$(basename "$bin").log
		"$bin" --jobs=2 >"$out" 2>&1
		local rc=$?
		synth=$(grep -a 'Synthesis: Tested:' "$out" | tail -n 1)
		if [ -z "$synth" ]; then
			echo "FAIL unit/$(basename "$bin") (no Criterion summary, exit $rc)"
			tail -n 20 "$out" | sed 's/^/    /'
			failed=$((failed + 1)); note_fail "unit/$(basename "$bin")"
			continue
		fi
		# "[====] Synthesis: Tested: 12 | Passing: 11 | Failing: 1 | Crashing: 0"
		tested=$(sed -E 's/.*Tested: ([0-9]+).*/\1/' <<<"$synth")
		passing=$(sed -E 's/.*Passing: ([0-9]+).*/\1/' <<<"$synth")
		passed=$((passed + passing))
		if [ "$passing" -ne "$tested" ] || [ $rc -ne 0 ]; then
			local bad=$((tested - passing))
			[ $bad -eq 0 ] && bad=1
			failed=$((failed + bad)); note_fail "unit/$(basename "$bin")"
			echo "FAIL unit/$(basename "$bin"): $synth"
			grep -aE '\[----\]|\[FAIL\]|CRASH|Assertion|ERROR' "$out" | head -n 30 | sed 's/^/    /'
		else
			echo "PASS unit/$(basename "$bin") ($tested tests)"
		fi
		skipped=$((skipped + $(grep -ac '\[SKIP\]' "$out")))
	done
}

run_golden() {
	local out=$logdir/golden.log line
	[ -x "$root/tests/golden/run.sh" ] || return 0
	"$root/tests/golden/run.sh" >"$out" 2>&1
	grep -aE '^(PASS|FAIL) ' "$out" | sed 's/^\(PASS\|FAIL\) /\1 golden\//'
	line=$(grep -aE '^golden: [0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
	if [ -z "$line" ]; then
		echo "FAIL golden (no summary line)"; tail -n 20 "$out" | sed 's/^/    /'
		failed=$((failed + 1)); note_fail golden
		return
	fi
	passed=$((passed + $(sed -E 's/^golden: ([0-9]+) passed.*/\1/' <<<"$line")))
	local f; f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
	failed=$((failed + f))
	[ "$f" -gt 0 ] && { note_fail golden; grep -aA15 '^FAIL ' "$out" | head -n 60 | sed 's/^/    /'; }
}

# The Ceph tests (ceph_*.sh) share one throw-away cluster (tests/lib/ceph.sh),
# started once before the first of them when Ceph is installed and stopped
# after the last, so the other tests do not run beside its daemons; a test
# run alone starts its own. Removed by its watcher if this script is killed.
ceph_shared_tried=
ceph_shared_t0=
ceph_shared_start() {
	local start
	[ -z "$ceph_shared_tried" ] || return 0
	ceph_shared_tried=1
	ceph_shared_t0=$(date +%s)
	[ "$(id -u)" -eq 0 ] && command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null ||
		return 0
	CFS_CEPH_DIR=$(mktemp -d "${CFS_TEST_TMPDIR:-/var/tmp}/chunkfs-ceph.XXXXXX")
	export CFS_CEPH_DIR
	start=$(date +%s)
	if ( . "$root/tests/lib/ceph.sh" && ceph_cluster_start "$CFS_CEPH_DIR" $$ &&
		ceph_pool_create chunkfs ) >"$logdir/ceph-cluster.log" 2>&1; then
		echo "ceph: shared cluster up in $(($(date +%s) - start)) s ($CFS_CEPH_DIR)"
	else
		echo "ceph: the shared cluster did not start (the Ceph tests start their own): $logdir/ceph-cluster.log"
		( . "$root/tests/lib/ceph.sh" && ceph_cluster_stop "$CFS_CEPH_DIR" )
		unset CFS_CEPH_DIR
	fi
}

ceph_shared_stop() {
	if [ -n "$ceph_shared_t0" ]; then
		echo "ceph: the Ceph tests took $(($(date +%s) - ceph_shared_t0)) s, the cluster's start included"
		ceph_shared_t0=
	fi
	[ -n "${CFS_CEPH_DIR:-}" ] || return 0
	( . "$root/tests/lib/ceph.sh" && ceph_cluster_stop "$CFS_CEPH_DIR" )
	unset CFS_CEPH_DIR
}

# A script whose header says "# make check-asan: once" is not repeated under
# ASan: a database or cluster run, a soak, or a check of files and docs, whose
# chunkfs code paths the other tests already run sanitized and which would
# take a large part of CI's time (.ci/run runs make check, then check-asan).
once_under_asan() {
	head -n 40 "$1" | grep -q '^# make check-asan: once'
}

run_integration() {
	local t name out rc start default_timeout=600
	[ "$BUILD" = asan ] && default_timeout=900
	for t in "$root"/tests/integration/*.sh; do
		[ -x "$t" ] || continue
		name=$(basename "$t" .sh)
		if [ -n "${CFS_TEST_FILTER:-}" ] && ! [[ $name =~ $CFS_TEST_FILTER ]]; then
			continue
		fi
		if [ "$BUILD" = asan ] && once_under_asan "$t"; then
			echo "SKIP integration/$name: runs once, in make check (no code of its own under ASan)"
			skipped=$((skipped + 1))
			continue
		fi
		case $name in
		ceph_*) ceph_shared_start ;;
		*) ceph_shared_stop ;;
		esac
		out=$logdir/integration-$name.log
		start=$(date +%s)
		timeout -k 20 "${CFS_TEST_TIMEOUT:-$default_timeout}" "$t" </dev/null >"$out" 2>&1
		rc=$?
		local secs=$(($(date +%s) - start))
		case $rc in
		0) echo "PASS integration/$name (${secs}s)"; passed=$((passed + 1)) ;;
		77) echo "SKIP integration/$name: $(tail -n 1 "$out")"; skipped=$((skipped + 1)) ;;
		*)
			[ $rc -eq 124 ] && echo "FAIL integration/$name (timed out after ${secs}s)" ||
				echo "FAIL integration/$name (exit $rc, ${secs}s)"
			tail -n 30 "$out" | sed 's/^/    /'
			failed=$((failed + 1)); note_fail "integration/$name"
			;;
		esac
	done
	ceph_shared_stop
}

for s in "${suites[@]}"; do
	case $s in
	unit) run_unit ;;
	golden) run_golden ;;
	integration) run_integration ;;
	*) echo "tests/run.sh: unknown suite '$s' (unit, golden, integration)" >&2; exit 2 ;;
	esac
done

[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "logs: $logdir"
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
