#!/usr/bin/env bash
# bench/demo.sh — the main job, as README.md's first command runs it (`make demo`):
# format a store on an image file, mount it, lay out chunk files and the
# symlinks a DBA points the database at, run a short database-like load
# (2 KiB and 4 KiB O_DIRECT pages with fsync), show each chunk's statistics
# (getfattr through a symlink, chunkfs stat), show that the data survives a
# remount, add a second store online (the store becomes a pool) and move a
# chunk to it under a load (chunkfs move, with its progress), verify again
# after a remount of the pool, and unmount. Needs root (FUSE mount), fio and getfattr (attr).
#
# Environment: BUILD (default release), DEMO_DIR (default /var/tmp/chunkfs-demo),
# DEMO_SIZE (default 1G), DEMO_SECONDS (default 10: length of the load).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/${BUILD:-release}
dir=${DEMO_DIR:-/var/tmp/chunkfs-demo}
size=${DEMO_SIZE:-1G}
seconds=${DEMO_SECONDS:-10}
image=$dir/store.img
image2=$dir/store2.img
source=$image			# the pool's stores, once the second one joins
mnt=$dir/mnt
links=$dir/chunks		# what the database is configured with
daemon=

step() { printf '\n== %s\n' "$*"; }

mount_store() {
	"$bin/chunkfs" -f "$source" "$mnt" &
	daemon=$!
	for _ in $(seq 100); do
		grep -q " $mnt fuse.chunkfs " /proc/mounts && return 0
		kill -0 "$daemon" 2>/dev/null || { echo "demo: chunkfs exited" >&2; exit 1; }
		sleep 0.1
	done
	echo "demo: chunkfs did not mount" >&2
	exit 1
}

# umount returns before a FUSE daemon has finished: wait for its checkpoint.
unmount_store() {
	umount "$mnt"
	wait "$daemon"
	daemon=
}

cleanup() {
	if grep -q " $mnt fuse.chunkfs " /proc/mounts 2>/dev/null; then
		umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	fi
	[ -n "$daemon" ] && wait "$daemon" 2>/dev/null || true
}
trap cleanup EXIT

[ "$(id -u)" -eq 0 ] || { echo "demo: run as root (it mounts a FUSE filesystem)" >&2; exit 1; }
mkdir -p "$dir"
rm -f "$image" "$image2"
mkdir -p "$mnt" "$links"

step "format a $size store on an image file: mkchunkfs -s $size -L demo $image"
# The image is written fully (no --sparse), so the filesystem under it holds no
# unwritten extents: first writes into those pay journal commits.
"$bin/mkchunkfs" -s "$size" -L demo "$image"

step "a second mkchunkfs on the same image is refused without -f"
if "$bin/mkchunkfs" -q "$image"; then
	echo "demo: mkchunkfs overwrote a store without -f" >&2
	exit 1
fi

step "mount it: chunkfs $image $mnt"
mount_store
grep " $mnt " /proc/mounts
df -h "$mnt"

step "create chunks of fixed size, as a DBA does, and symlink them"
for c in rootdbs datadbs1 tempdbs1; do
	fallocate -l 128M "$mnt/$c"
	chmod 660 "$mnt/$c"
	ln -sfn "$mnt/$c" "$links/$c"
done
ls -l "$links" "$mnt"

step "database-like load for ${seconds}s through the symlinks: 2 KiB and 4 KiB O_DIRECT pages, fsync"
fio --output-format=terse --terse-version=3 --group_reporting \
	--ioengine=io_uring --direct=1 --time_based --runtime="$seconds" \
	--name=rootdbs-2k --filename="$links/rootdbs" --bs=2k --rw=randrw --rwmixread=70 --iodepth=16 --fsync=64 \
	--name=datadbs1-4k --filename="$links/datadbs1" --bs=4k --rw=randrw --rwmixread=70 --iodepth=16 --fsync=64 \
	--name=tempdbs1-seq --filename="$links/tempdbs1" --bs=64k --rw=write --iodepth=4 --fsync=16 |
	awk -F';' '{ printf "reads: %d IOPS, %d KiB/s   writes: %d IOPS, %d KiB/s\n", $8, $7, $49, $48 }'
sync "$mnt/rootdbs"

step "per-chunk statistics through the DBA's symlink: getfattr -d $links/rootdbs"
getfattr -d "$links/rootdbs"

step "every chunk of the mount, as onstat -g iof shows them: chunkfs stat $mnt"
"$bin/chunkfs" stat "$mnt"

step "checksums before unmount"
( cd "$mnt" && md5sum rootdbs datadbs1 tempdbs1 ) | tee "$dir/sums"

step "unmount, mount again, and compare"
unmount_store
mount_store
( cd "$mnt" && md5sum -c "$dir/sums" )
df -h "$mnt"

step "a second store joins online, making a pool: chunkfs store add $mnt $image2 -L demo2"
truncate -s "$size" "$image2"
"$bin/chunkfs" store add "$mnt" "$image2" -L demo2
source=$image,$image2 # how the pool mounts from now on
getfattr --absolute-names --only-values -n user.chunkfs.stores "$mnt"
echo

step "move datadbs1 to demo2 online, under a load on it: chunkfs move --rate 32M $links/datadbs1 demo2"
fio --output=/dev/null --ioengine=io_uring --direct=1 --time_based --runtime=5 \
	--name=datadbs1-4k --filename="$links/datadbs1" --bs=4k --rw=randrw --rwmixread=70 --iodepth=16 --fsync=64 &
load=$!
sleep 0.5
# The limit counts the bytes copied: sectors the chunk never had written
# are not copied, so the progress can run ahead of it.
if [ -t 1 ]; then
	"$bin/chunkfs" move --rate 32M "$links/datadbs1" demo2 # a progress line on a terminal
else
	"$bin/chunkfs" move --no-wait --rate 32M "$links/datadbs1" demo2
	for _ in $(seq 120); do # the same progress, one line a second
		st=$("$bin/chunkfs" move --status "$links/datadbs1")
		echo "$st"
		case $st in
		state=done*) break ;;
		state=error* | state=nospace*) echo "demo: the move failed" >&2; exit 1 ;;
		esac
		sleep 1
	done
fi
wait $load
echo "datadbs1 is on: $(getfattr --absolute-names --only-values -n user.chunkfs.store "$links/datadbs1")"
getfattr --absolute-names --only-values -n user.chunkfs.stores "$mnt"
echo

step "checksums, unmount, mount the pool again, and compare"
sync "$mnt/datadbs1"
( cd "$mnt" && md5sum rootdbs datadbs1 tempdbs1 ) | tee "$dir/sums"
unmount_store
mount_store
( cd "$mnt" && md5sum -c "$dir/sums" )

step "unmount"
unmount_store
echo
echo "demo: done (stores: $image, $image2; rerun with DEMO_SECONDS=60 for a longer load)"
