#!/usr/bin/env bash
# tests/golden/run.sh — mkchunkfs golden tests (the e2fsprogs m_* idea).
#
# Each case is a directory tests/golden/<case>/ with:
#   args    one line of mkchunkfs arguments (shell words, quotes allowed);
#           the word IMAGE stands for the case's image file
#   expect  the exact stdout+stderr, image path written as IMAGE, followed
#           by a last line "exit N"
#   size    optional: size of the fresh sparse image (default 1G), or
#           "none" for a path that does not exist
#   env     optional: VAR=value lines for mkchunkfs's environment
#
# Geometry is pinned with MKCHUNKFS_DEVICE_SECTSIZE=512 and
# MKCHUNKFS_DEVICE_PHYS_SECTSIZE=512 unless the case's env file says
# otherwise, so the expected output is the same on every machine.
#
# Environment: BUILD / CFS_BIN select the binary (CFS_BIN/mkchunkfs);
# GOLDEN_UPDATE=1 rewrites every expect file from the actual output;
# CFS_TEST_TMPDIR is where the images go (default /var/tmp).
# Prints "PASS name" / "FAIL name" (with a diff) per case and, last,
# "golden: N passed, N failed, 0 skipped"; exits 0 when all passed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-release}
CFS_BIN=${CFS_BIN:-$root/build/$BUILD}
mk=$CFS_BIN/mkchunkfs

work=$(mktemp -d "${CFS_TEST_TMPDIR:-/var/tmp}/chunkfs-golden.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

passed=0 failed=0

run_case() {
	local dir=$1 name img size line rc actual envs=() var
	local -a args
	name=$(basename "$dir")
	img=$work/$name.img
	size=1G
	[ -f "$dir/size" ] && size=$(<"$dir/size")
	[ "$size" = none ] || truncate -s "$size" "$img" || return 1

	envs=(MKCHUNKFS_DEVICE_SECTSIZE=512 MKCHUNKFS_DEVICE_PHYS_SECTSIZE=512)
	if [ -f "$dir/env" ]; then
		while IFS= read -r var; do
			[ -n "$var" ] && envs+=("$var")
		done <"$dir/env"
	fi

	line=$(<"$dir/args")
	line=${line//IMAGE/$img}
	eval "args=($line)"

	actual=$(cd "$work" && env "${envs[@]}" "$mk" "${args[@]}" 2>&1)
	rc=$?
	actual=${actual//$img/IMAGE}
	printf '%s\nexit %d\n' "$actual" "$rc" | sed '1{/^$/d}' >"$work/$name.out"
	rm -f "$img"

	if [ "${GOLDEN_UPDATE:-0}" = 1 ]; then
		cp "$work/$name.out" "$dir/expect"
		echo "PASS $name (updated)"
		return 0
	fi
	if diff -u "$dir/expect" "$work/$name.out" >"$work/$name.diff" 2>&1; then
		echo "PASS $name"
		return 0
	fi
	echo "FAIL $name"
	sed 's/^/    /' "$work/$name.diff"
	return 1
}

if [ ! -x "$mk" ]; then
	echo "FAIL golden: $mk is not built"
	echo "golden: 0 passed, 1 failed, 0 skipped"
	exit 1
fi

for dir in "$here"/*/; do
	dir=${dir%/}
	[ -f "$dir/args" ] || continue
	if run_case "$dir"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
done

echo "golden: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
