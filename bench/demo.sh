#!/usr/bin/env bash
# bench/demo.sh — the main job, as README.md's first command runs it (`make demo`):
# format a store on an image file and show what mkchunkfs made.
#
# Environment: BUILD (default release), DEMO_DIR (default /var/tmp/chunkfs-demo),
# DEMO_SIZE (default 1G).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/${BUILD:-release}
dir=${DEMO_DIR:-/var/tmp/chunkfs-demo}
size=${DEMO_SIZE:-1G}
image=$dir/store.img

step() { printf '\n== %s\n' "$*"; }

mkdir -p "$dir"
rm -f "$image"

step "format a ${size} store on an image file: mkchunkfs -s $size -L demo $image"
# The image is written fully (no --sparse), so the filesystem under it holds no
# unwritten extents: first writes into those pay journal commits (seeds/002).
"$bin/mkchunkfs" -s "$size" -L demo "$image"

step "read it back: mkchunkfs -D $image"
"$bin/mkchunkfs" -D "$image"

step "a second mkchunkfs on the same image is refused without -f"
if "$bin/mkchunkfs" -q "$image"; then
	echo "demo: mkchunkfs overwrote a store without -f" >&2
	exit 1
fi

echo
echo "demo: done (the store is $image)"
