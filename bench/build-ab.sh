#!/usr/bin/env bash
# bench/build-ab.sh — one of the database benchmarks (bench/smallappend.sh,
# bench/sqlite.sh, bench/rocksdb.sh, bench/mariadb.sh, bench/pgbench.sh:
# chunkfs and ext4 on the same disk, bench/dbpair.sh) run with chunkfs built
# from an older revision (A) and from this tree (B), alternated: each round
# runs the script once (-n 1) with each build, A first in odd rounds, B
# first in even ones, so drift on a shared machine lands on both. Prints
# the medians per build, B/A for chunkfs and each build against ext4.
#
# usage: bench/build-ab.sh [-r rounds] [-o out.csv] [-b dir] [-A opts] [-B opts]
#                          REV SCRIPT [ARGS...]
#   REV     git revision for A (built in a temporary worktree); "-": A is B's
#           build too (then -A/-B tell them apart)
#   SCRIPT  a bench/dbpair.sh script, e.g. bench/smallappend.sh; ARGS go to
#           it (not -n or -o)
#   -r      rounds (default 5)
#   -o      the long CSV (default bench/results/build-ab-<time>/build-ab-<time>.csv);
#           its rev column is "A:<rev>" or "B:<rev>"
#   -b      B's programs (default build/release; its bench/ programs serve A too)
#   -A, -B  chunkfs -o options of A's and B's runs (the script's -O)
# Needs root; make bench-build first (B is build/release; A uses B's bench
# programs, so only chunkfs and mkchunkfs differ).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=5
out=
usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//; /^set -euo/d'; }
bin_b=$root/build/release
opts_a=
opts_b=
while getopts "r:o:b:A:B:h" opt; do
	case $opt in
	A) opts_a=$OPTARG ;;
	B) opts_b=$OPTARG ;;
	r) rounds=$OPTARG ;;
	o) out=$OPTARG ;;
	b) bin_b=$(cd "$OPTARG" && pwd) ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || { usage >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "build-ab.sh: -r: not a positive number: $rounds" >&2; exit 2; }
rev=$1
script=$2
shift 2
[ -x "$script" ] || script=$root/$script
[ -x "$script" ] || { echo "build-ab.sh: no script $2" >&2; exit 2; }
[ -x "$bin_b/chunkfs" ] && [ -d "$bin_b/bench" ] || { echo "build-ab.sh: make bench-build first" >&2; exit 2; }
rev_b=$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- fs iopath || echo +)
if [ "$rev" = - ]; then
	rev_a=$rev_b
else
	rev_a=$(git -C "$root" rev-parse --short "$rev")
fi
label_a="A:$rev_a${opts_a:+ -o ${opts_a//,/+}}"
label_b="B:$rev_b${opts_b:+ -o ${opts_b//,/+}}"
stamp=$(date -u +%Y%m%d-%H%M%S)
[ -n "$out" ] || out=$root/bench/results/build-ab-$stamp/build-ab-$stamp.csv
mkdir -p "$(dirname "$out")"

work=$(mktemp -d "${CFS_TEST_TMPDIR:-/var/tmp}/build-ab.XXXXXX")
cleanup() {
	git -C "$root" worktree remove --force "$work/tree" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
# Both builds copied now: a rebuild of this tree during the run changes nothing.
mkdir -p "$work/a" "$work/b"
cp -r "$bin_b/bench" "$bin_b/chunkfs" "$bin_b/mkchunkfs" "$work/b/"
cp -r "$bin_b/bench" "$work/a/"
if [ "$rev" = - ]; then
	cp "$bin_b/chunkfs" "$bin_b/mkchunkfs" "$work/a/"
else
	git -C "$root" worktree add -q --detach "$work/tree" "$rev_a"
	make -C "$work/tree" -j"$(nproc)" >/dev/null
	cp "$work/tree/build/release/chunkfs" "$work/tree/build/release/mkchunkfs" "$work/a/"
fi
bin_b=$work/b

echo "rev,case,metric,unit,rep,order,fs,value" >"$out"
# The long CSV is -o of every database script but pgbench.sh, whose -o is its
# own one line per run.
long_flag=-o
[ "$(basename "$script")" = pgbench.sh ] && long_flag=-L
one() { # ROUND LABEL BIN OPTS ARGS...
	local round=$1 label=$2 bin=$3 opts=$4 csv=$work/one.csv
	shift 4
	echo "# round $round: $label"
	CFS_BIN=$bin "$script" -n 1 $long_flag "$csv" ${opts:+-O "$opts"} "$@" >"$work/one.log" 2>&1 ||
		{ cat "$work/one.log" >&2; exit 1; }
	grep '^# rep\|^# [a-z0-9]*: pgbench -i' "$work/one.log" || true
	# rep 1 of that run is round ROUND here; rev is the build
	awk -F, -v OFS=, -v r="$round" -v l="$label" 'NR > 1 && !/^#/ { $1 = l; $5 = r; print }' \
		"$csv" >>"$out"
}
for ((r = 1; r <= rounds; r++)); do
	if ((r % 2)); then
		one $r "$label_a" "$work/a" "$opts_a" "$@"
		one $r "$label_b" "$bin_b" "$opts_b" "$@"
	else
		one $r "$label_b" "$bin_b" "$opts_b" "$@"
		one $r "$label_a" "$work/a" "$opts_a" "$@"
	fi
done
echo "# $(basename "$script") $*, $rounds rounds; load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$root/bench/dbsummary.py" --ab "$out"
echo "# CSV: $out"
