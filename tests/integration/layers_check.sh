#!/usr/bin/env bash
# layers_check.sh — tests/layers.sh, the check of the Makefile's layer table:
# the tree as built passes; a table that forbids what the code does fails,
# naming the object and symbol, the file and line of the include, the system
# library; two modules calling each other fail as a circle unless the line
# allows it.
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
check=$CFS_ROOT/tests/layers.sh
obj=$CFS_BIN/obj
[ -e "$obj/fs/meta/namespace.o" ] || cfs_skip "needs a build in $CFS_BIN"

cfs_log "the tree as built follows its table"
"$check" -m "$CFS_ROOT/Makefile" -s "$CFS_ROOT" "$obj" || cfs_fail "layers.sh fails on the tree"

# A copy of the Makefile's table with one line changed by sed expression $1.
table() {
	sed -n '1,/^[^#]/p' "$CFS_ROOT/Makefile" | sed -E "$1" >"$CFS_WORK/Makefile"
	cmp -s "$CFS_WORK/Makefile" <(sed -n '1,/^[^#]/p' "$CFS_ROOT/Makefile") &&
		cfs_fail "the sed expression '$1' changed nothing"
	return 0
}

# refused TEXT: the check of the tree against that table fails, saying TEXT.
refused() { cfs_expect_fail_with "$1" 1 "$check" -m "$CFS_WORK/Makefile" -s "$CFS_ROOT" "$obj"; }

cfs_log "the metadata engine without the statistics layer: calls and includes named"
table 's|^(#   fs/meta/ .*-> )fs/stats/ |\1|'
refused "fs/meta/namespace.o uses cfs_cs_"
line=$(grep -n '^#include "fs/stats/chunkstat.h"' "$CFS_ROOT/fs/meta/namespace.h" | cut -d: -f1)
refused "fs/meta/namespace.h:$line includes \"fs/stats/chunkstat.h\" of fs/stats/, which fs/meta/ may not use"

cfs_log "the metadata engine without xxhash: the system library named"
table 's|^(#   fs/meta/ .*)\[c xxhash blkid\]|\1[c blkid]|'
refused "from -lxxhash, which fs/meta/ may not link"
refused "includes <xxhash.h> of -lxxhash, which fs/meta/ may not link"

cfs_log "the FUSE front without libfuse"
table 's|^(#   fs/fuse/ .*)\[c fuse3 uring\]|\1[c uring]|'
refused "from -lfuse3, which fs/fuse/ may not link"

cfs_log "iopath without its circles allowed: the core and its backends form one"
table 's|^(#   iopath/ .*\]) \(circles:[^)]*\)|\1|'
refused "modules of iopath/ call each other in a circle"

cfs_log "a made-up tree: two modules calling each other, a layer above calling down"
src=$CFS_WORK/src
mkdir -p "$src/low" "$src/high" "$CFS_WORK/obj/low" "$CFS_WORK/obj/high"
printf 'int low_b(int);\nint low_a(int x) { return x ? low_b(x - 1) : 0; }\n' >"$src/low/a.c"
printf 'int low_a(int);\nint low_b(int x) { return low_a(x); }\n' >"$src/low/b.c"
printf '#include "low/x.h"\nint low_a(int);\nint high_c(void) { return low_a(1); }\n' >"$src/high/c.c"
touch "$src/low/x.h"
for f in low/a low/b high/c; do
	${CC:-cc} -I"$src" -c -o "$CFS_WORK/obj/$f.o" "$src/$f.c" || cfs_fail "cannot compile $f.c"
done
cat >"$CFS_WORK/Makefile.toy" <<'EOF'
#   low/     libcfs_low.a   -> [c]
#   high/    libcfs_high.a  -> low/ [c]
EOF
cfs_expect_fail_with "modules of low/ call each other in a circle: low/a.o low/b.o" 1 \
	"$check" -m "$CFS_WORK/Makefile.toy" -s "$src" "$CFS_WORK/obj"
sed -i 's|^\(#   low/ .*\)$|\1 (circles: a toy)|' "$CFS_WORK/Makefile.toy"
"$check" -m "$CFS_WORK/Makefile.toy" -s "$src" "$CFS_WORK/obj" >/dev/null ||
	cfs_fail "a circle the table allows still fails"
cfs_log "the layer below calling up"
printf 'int high_c(void);\nint low_d(void) { return high_c(); }\n' >"$src/low/d.c"
${CC:-cc} -I"$src" -c -o "$CFS_WORK/obj/low/d.o" "$src/low/d.c"
cfs_expect_fail_with "low/d.o uses high_c of high/, which low/ may not use" 1 \
	"$check" -m "$CFS_WORK/Makefile.toy" -s "$src" "$CFS_WORK/obj"
cfs_log "a source whose object is missing: the check refuses rather than passes"
touch "$src/low/e.c"
cfs_expect_fail_with "low/e.o missing (build first)" 2 \
	"$check" -m "$CFS_WORK/Makefile.toy" -s "$src" "$CFS_WORK/obj"
cfs_log "ok"
