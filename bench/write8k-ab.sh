#!/usr/bin/env bash
# bench/write8k-ab.sh — 8 KiB random writes at QD1 (fio psync), buffered and
# O_DIRECT, on chunkfs built from an older revision (A) against this tree's
# build (B), in the same run on the same image: PostgreSQL's backend writes
# are buffered 8 KiB pwrite()s. A and B alternate, R rounds, 8 s per case;
# prints each result and the medians of p50 latency and IOPS.
#
# usage: bench/write8k-ab.sh [-r rounds] [-d dir] REV
#   REV  a git revision for A (built in a temporary worktree)
#   -r   rounds (default 3)   -d  directory for the image (default /var/tmp)
# Needs root, fio, python3; make first (B is build/release).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=3
dir=/var/tmp
while getopts "r:d:h" opt; do
	case $opt in
	r) rounds=$OPTARG ;;
	d) dir=$OPTARG ;;
	*) sed -n '2,13p' "$0"; exit 1 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || { sed -n '2,13p' "$0"; exit 1; }
rev=$1
bin_b=$root/build/release/chunkfs
[ -x "$bin_b" ] || { echo "make first: no $bin_b" >&2; exit 1; }

work=$(mktemp -d "$dir/write8k-ab.XXXXXX")
cleanup() {
	fusermount3 -u "$work/m" 2>/dev/null || true
	git -C "$root" worktree remove --force "$work/tree" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
git -C "$root" worktree add -q --detach "$work/tree" "$rev"
make -C "$work/tree" -j"$(nproc)" >/dev/null
bin_a=$work/tree/build/release/chunkfs
mkdir -p "$work/m"
truncate -s 2G "$work/img"
"$root/build/release/mkchunkfs" -q "$work/img"

results=$work/results
one() { # NAME BIN
	"$2" "$work/img" "$work/m"
	[ -f "$work/m/f" ] || fallocate -l 512M "$work/m/f"
	for mode in buffered direct; do
		local d=0
		[ $mode = direct ] && d=1
		fio --name=w --filename="$work/m/f" --rw=randwrite --bs=8k --size=512M \
			--ioengine=psync --direct=$d --runtime=8 --time_based --output-format=json |
			python3 -c "import json,sys; w=json.load(sys.stdin)['jobs'][0]['write']; \
print('$1 $mode %.1f %.0f' % (w['clat_ns']['percentile']['50.000000'] / 1000, w['iops']))" |
			tee -a "$results"
	done
	fusermount3 -u "$work/m"
	sleep 2 # the daemon finishes its checkpoint and releases the store
}
echo "# A = $rev ($(git -C "$root" rev-parse --short "$rev")), B = this tree; name mode p50_us iops"
for ((r = 1; r <= rounds; r++)); do
	one A "$bin_a"
	one B "$bin_b"
done
python3 - "$results" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for mode in ("buffered", "direct"):
    m = {}
    for name in ("A", "B"):
        r = [x for x in rows if x[0] == name and x[1] == mode]
        m[name] = (statistics.median(float(x[2]) for x in r), statistics.median(float(x[3]) for x in r))
        print("%-8s %s: p50 %.1f us, %.0f IOPS (medians of %d)" % (mode, name, m[name][0], m[name][1], len(r)))
    print("%-8s B/A IOPS: %.2fx" % (mode, m["B"][1] / m["A"][1]))
EOF
