# tests/lib/common.sh — sourced by tests/integration/*.sh (bash).
#
# Gives every integration test the same contract:
#   exit 0 pass, 1 fail, 77 skip (with the reason as the last line of output);
#   a private work directory; and cleanup that runs however the test ends
#   (pass, failure, set -e, timeout's SIGTERM): mounts are unmounted, loop
#   devices detached, daemons killed, in reverse order of creation.
#
# Usage:
#   . "$(dirname "$0")/../lib/common.sh"
#   cfs_require_root
#   img=$(cfs_image 64M)             # sparse image file in the work dir
#   cfs_loop_attach "$img"; dev=$CFS_LOOP_DEV   # detached at exit
#   (never call cfs_loop_attach or cfs_defer inside $(...): a subshell's
#   cleanup registration is lost)
#   cfs_defer "some command"         # runs at exit
#   cfs_fail "message"               # exit 1 with a message
#   cfs_expect_fail_with CMD... -- "text"   # CMD must fail and print text

set -euo pipefail

CFS_ROOT=${CFS_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${BUILD:-release}
CFS_BIN=${CFS_BIN:-$CFS_ROOT/build/$BUILD}
export CFS_ROOT BUILD CFS_BIN

# The work dir lives on the disk's filesystem, not tmpfs: tmpfs ignores the
# O_DIRECT alignment rules that a real device enforces.
CFS_WORK=$(mktemp -d "${CFS_TEST_TMPDIR:-/var/tmp}/chunkfs-test.XXXXXX")
_cfs_cleanups=()

cfs_defer() { _cfs_cleanups+=("$*"); }

_cfs_run_cleanups() {
	local rc=$? i
	set +e
	for ((i = ${#_cfs_cleanups[@]} - 1; i >= 0; i--)); do
		eval "${_cfs_cleanups[$i]}" >/dev/null 2>&1
	done
	rm -rf "$CFS_WORK"
	exit $rc
}
trap _cfs_run_cleanups EXIT
trap 'exit 143' TERM INT

cfs_log() { echo "# $*"; }
cfs_fail() { echo "FAIL: $*" >&2; exit 1; }
cfs_skip() { echo "skip: $*"; exit 77; }

cfs_require_root() { [ "$(id -u)" -eq 0 ] || cfs_skip "needs root"; }
cfs_require_cmd() {
	local c
	for c in "$@"; do command -v "$c" >/dev/null 2>&1 || cfs_skip "needs $c"; done
}
cfs_require_fuse() {
	cfs_require_root
	[ -c /dev/fuse ] || cfs_skip "needs /dev/fuse"
	cfs_require_cmd fusermount3
}

# cfs_image SIZE [NAME]: a sparse image file in the work dir; prints its path.
cfs_image() {
	local path=$CFS_WORK/${2:-store.img}
	truncate -s "$1" "$path"
	echo "$path"
}

# cfs_loop_attach FILE: attach a loop device (direct I/O to the file where the
# kernel allows it); sets CFS_LOOP_DEV=/dev/loopN and detaches it at exit.
cfs_loop_attach() {
	CFS_LOOP_DEV=$(losetup -f --show --direct-io=on "$1" 2>/dev/null ||
		losetup -f --show "$1") || cfs_skip "cannot attach a loop device"
	cfs_defer "losetup -d $CFS_LOOP_DEV"
}

# cfs_expect_fail_with TEXT EXPECTED_RC CMD...: CMD must exit EXPECTED_RC
# (or any non-zero when EXPECTED_RC is "nonzero") and print TEXT on
# stdout or stderr.
cfs_expect_fail_with() {
	local text=$1 want=$2 out rc
	shift 2
	set +e
	out=$("$@" 2>&1)
	rc=$?
	set -e
	if [ "$want" = nonzero ]; then
		[ $rc -ne 0 ] || cfs_fail "'$*' succeeded; expected failure with '$text'. Output: $out"
	else
		[ $rc -eq "$want" ] || cfs_fail "'$*' exited $rc, expected $want. Output: $out"
	fi
	grep -qF -- "$text" <<<"$out" || cfs_fail "'$*' did not say '$text'. Output: $out"
	cfs_log "refused as expected (exit $rc): $(head -n 1 <<<"$out")"
}
