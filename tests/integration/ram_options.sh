#!/usr/bin/env bash
# ram_options.sh — the RAM temp mount's options and the ways to mount it:
#   - bad options get one clear line and a non-zero exit, before anything is
#     mounted or left running: size missing, zero, garbage, larger than the
#     memory of the machine (also with mlock: RAM only), dio_align not 0 or a
#     power of two from 512 to 4096, RAM options on a store mount, ro;
#   - `mount -t fuse.chunkfs ram DIR -o ram,size=64M` and an /etc/fstab line
#     (a private fstab, `mount -T FILE DIR`), with the same errors through
#     mount(8).
# mount(8) runs its helpers without PATH, so mount.fuse3's `sh -c chunkfs`
# looks in the shell's default PATH; to use this build's chunkfs without
# installing it, those mounts run in a private mount namespace whose
# /usr/local/sbin is a tmpfs holding a link to build/$BUILD/chunkfs.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd unshare

chunkfs=$CFS_BIN/chunkfs
[ -x "$chunkfs" ] || cfs_skip "needs $chunkfs"
dir=$CFS_WORK/ram
mkdir -p "$dir"

# Nothing mounted on DIR and no daemon of ours running for it.
nothing_left() {
	! awk -v d="$dir" '$2 == d { f = 1 } END { exit !f }' /proc/self/mounts ||
		cfs_fail "$dir is mounted after a refused mount"
	! pgrep -f -- "chunkfs .*$dir" >/dev/null || cfs_fail "a daemon for $dir is still running"
}

refuse() { # TEXT CMD...: exit 1 (usage) with TEXT, nothing left behind
	cfs_expect_fail_with "$1" 1 "${@:2}"
	nothing_left
}

mem_kb=$(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo)
swap_kb=$(awk '$1 == "SwapTotal:" { print $2 }' /proc/meminfo)
too_big=$(((mem_kb + swap_kb) / 1048576 * 2 + 2))G

refuse "needs size=" "$chunkfs" none "$dir" -o ram
refuse "size=0: a RAM mount needs a size above 0" "$chunkfs" none "$dir" -o ram,size=0
refuse "size=lots: not a size" "$chunkfs" none "$dir" -o ram,size=lots
refuse "size=-1: not a size" "$chunkfs" none "$dir" -o ram,size=-1
refuse "size=4Q: not a size" "$chunkfs" none "$dir" -o ram,size=4Q
refuse "is larger than the memory of this machine" "$chunkfs" none "$dir" -o ram,size=$too_big
refuse "is larger than the memory of this machine" \
	"$chunkfs" none "$dir" -o ram,size=$too_big,mlock
if [ "$swap_kb" -gt 1048576 ]; then
	# fits RAM + swap, but locked pages cannot go to swap
	refuse "mlock: swap cannot hold locked pages" \
		"$chunkfs" none "$dir" -o ram,size=$((mem_kb / 1048576 + 1))G,mlock
fi
for a in 3000 256 8192 1 abc -512; do
	refuse "dio_align=$a: must be 0 (accept any alignment) or a power of two from 512 to 4096" \
		"$chunkfs" none "$dir" -o ram,size=64M,dio_align=$a
done
refuse "are for RAM mounts" "$chunkfs" "$CFS_WORK/none.img" "$dir" -o size=1G
refuse "are for RAM mounts" "$chunkfs" "$CFS_WORK/none.img" "$dir" -o dio_align=4096
refuse "are for RAM mounts" "$chunkfs" "$CFS_WORK/none.img" "$dir" -o mlock
refuse "cannot be read-only" "$chunkfs" none "$dir" -o ram,size=64M,ro
cfs_expect_fail_with "mountpoint $CFS_WORK/missing" 32 \
	"$chunkfs" none "$CFS_WORK/missing" -o ram,size=64M

# The good ones mount (and say nothing).
for o in ram,size=64M ram,size=64M,dio_align=0 ram,size=64M,dio_align=4096 \
	ram,size=64M,mlock ram,size=64M,hugepages ram,size=1m; do
	cfs_mount none "$dir" "$o"
	cfs_umount "$dir" || cfs_fail "unmount ($o)"
	if grep -v -e '^===' -e ' mounted on ' -e 'hugepages: transparent huge pages are disabled' \
		"$CFS_WORK/chunkfs-ram.log" | grep -q .; then
		cfs_fail "-o $o printed: $(cat "$CFS_WORK/chunkfs-ram.log")"
	fi
	rm -f "$CFS_WORK/chunkfs-ram.log"
done

# ---- mount(8) and fstab, in a private mount namespace ------------------------------
cfs_require_cmd mount.fuse3
cat >"$CFS_WORK/fstab" <<EOF
# a private fstab for mount -T
ram   $dir   fuse.chunkfs   ram,size=32M,dio_align=4096,noauto,nofail,x-test   0 0
EOF
cat >"$CFS_WORK/in-ns.sh" <<'EOF'
set -euo pipefail
chunkfs=$1 dir=$2 fstab=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
log() { echo "# $*"; }
daemon_gone() { # wait for the detached daemon to finish after umount
	for _ in $(seq 100); do
		pgrep -f -- "chunkfs ram $dir" >/dev/null || return 0
		sleep 0.1
	done
	fail "the daemon for $dir did not exit after umount"
}
cleanup() {
	if awk -v d="$dir" '$2 == d { f = 1 } END { exit !f }' /proc/self/mounts; then
		umount "$dir" || umount -l "$dir"
	fi
	daemon_gone
}
trap cleanup EXIT
mount -t tmpfs -o size=1m tmpfs /usr/local/sbin
ln -s "$chunkfs" /usr/local/sbin/chunkfs

log "mount -t fuse.chunkfs ram $dir -o ram,size=64M"
mount -t fuse.chunkfs ram "$dir" -o ram,size=64M || fail "mount -t fuse.chunkfs"
line=$(awk -v d="$dir" '$2 == d' /proc/self/mounts)
log "$line"
[ "$(awk '{ print $1, $3 }' <<<"$line")" = "ram fuse.chunkfs" ] || fail "/proc/mounts: $line"
[ "$(df -B1 --output=size "$dir" | tail -n 1)" -eq $((64 << 20)) ] || fail "df size"
dd if=/dev/urandom of="$dir/x" bs=4k count=16 oflag=direct status=none || fail "O_DIRECT write"
[ "$(df -B1 --output=used "$dir" | tail -n 1)" -eq $((64 << 10)) ] || fail "df used"
umount "$dir"
daemon_gone

log "mount -T fstab $dir"
mount -T "$fstab" "$dir" || fail "mount through the fstab line"
awk -v d="$dir" '$2 == d && $1 == "ram" && $3 == "fuse.chunkfs" { f = 1 } END { exit !f }' \
	/proc/self/mounts || fail "fstab mount not in /proc/mounts"
[ "$(df -B1 --output=size "$dir" | tail -n 1)" -eq $((32 << 20)) ] || fail "fstab: df size"
# dio_align=4096 from the fstab line: a 512-byte O_DIRECT write is refused
if dd if=/dev/zero of="$dir/y" bs=512 count=1 oflag=direct status=none 2>/dev/null; then
	fail "fstab options not applied (512-byte O_DIRECT accepted at dio_align=4096)"
fi
umount "$dir"
daemon_gone

log "mount -t fuse.chunkfs with bad options"
for o in ram ram,size=0 ram,size=junk ram,size=64M,dio_align=1000; do
	if out=$(mount -t fuse.chunkfs ram "$dir" -o "$o" 2>&1); then
		fail "mount -o $o succeeded"
	fi
	grep -q "chunkfs: " <<<"$out" || fail "mount -o $o: no message from chunkfs: $out"
	log "mount -o $o: $(head -n 1 <<<"$out")"
	! awk -v d="$dir" '$2 == d { f = 1 } END { exit !f }' /proc/self/mounts ||
		fail "mounted after a refusal"
done
EOF
unshare -m --propagation private bash "$CFS_WORK/in-ns.sh" "$chunkfs" "$dir" "$CFS_WORK/fstab" ||
	cfs_fail "mount(8) and fstab"
nothing_left
cfs_log "ok"
