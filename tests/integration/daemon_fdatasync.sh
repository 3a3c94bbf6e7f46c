#!/usr/bin/env bash
# daemon_fdatasync.sh — fdatasync of a file whose writes changed only its
# times (overwrites: a database's redo log, its data pages) costs the store
# one flush and no log write; fsync, and fdatasync after writes that grew the
# file or wrote new sectors, still commit their records. On a loop-device
# store, the device's own counters (/sys/block/loopN/stat: write requests,
# flush requests) say what each costs:
#   - 200 x (4 KiB overwrite + fdatasync): about one write and one flush each;
#   - 200 x (4 KiB overwrite + fsync): the log write and a second flush too;
#   - 200 x (4 KiB append + fdatasync): the size is logged, as before.
# Then what fdatasync promised survives kill -9 of the daemon: overwrites and
# appends, each acknowledged only after its fdatasync returned, are all there
# after a remount (size included), and fsck is clean. And while fdatasyncs
# of overwrites keep coming (no commit of their own), a file nobody syncs
# still has its size logged within commit_interval: after kill -9 it has the
# size it had 3 s before.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3 losetup

img=$(cfs_image 256M)
cfs_loop_attach "$img"
dev=$CFS_LOOP_DEV
mnt=$CFS_WORK/mnt
"$CFS_BIN/mkchunkfs" -q -f "$dev" >/dev/null || cfs_fail "mkchunkfs $dev"
# one commit per 60 s at most from the timer: the counts are the syncs'
cfs_mount "$dev" "$mnt" commit_interval=60

# run MODE N FILE: N writes of 4 KiB, each followed by fdatasync or fsync;
# prints "writes flushes" the device counted meanwhile (a flush is an empty
# write with REQ_PREFLUSH to the block layer: counted in both, so writes are
# the second field minus the first's flushes)
run() {
	python3 - "$1" "$2" "$3" "/sys/block/$(basename "$dev")/stat" <<'EOF'
import os, sys
mode, n, path, stat = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def counts():
    f = open(stat).read().split()
    return int(f[4]), int(f[15])        # write requests, flush requests
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
if os.fstat(fd).st_size < 1 << 20:
    os.pwrite(fd, b"\0" * (1 << 20), 0)
    os.fsync(fd)
page = b"p" * 4096
w0, f0 = counts()
for i in range(n):
    if mode == "append":
        os.pwrite(fd, page, os.fstat(fd).st_size)
        os.fdatasync(fd)
    else:
        os.pwrite(fd, page, (i * 4096 * 7) % (1 << 20))
        (os.fdatasync if mode == "datasync" else os.fsync)(fd)
w1, f1 = counts()
os.close(fd)
print((w1 - w0) - (f1 - f0), f1 - f0)
EOF
}
n=200
read -r dw df <<<"$(run datasync $n "$mnt/redo")"
read -r sw sf <<<"$(run fsync $n "$mnt/redo")"
read -r aw af <<<"$(run append $n "$mnt/log")"
cfs_log "$n x 4 KiB overwrite + fdatasync: $dw device writes, $df flushes"
cfs_log "$n x 4 KiB overwrite + fsync:     $sw device writes, $sf flushes"
cfs_log "$n x 4 KiB append + fdatasync:    $aw device writes, $af flushes"
# (a few more for the timer's commit and the loop device's own requests)
[ "$df" -le $((n + 10)) ] || cfs_fail "fdatasync of overwrites: $df flushes for $n (expected one each)"
[ "$dw" -le $((n + 10)) ] || cfs_fail "fdatasync of overwrites: $dw device writes for $n (expected the data only)"
[ "$sf" -ge $((2 * n)) ] || cfs_fail "fsync of overwrites: $sf flushes for $n (expected the commit's two each: times are logged)"
[ "$sw" -ge $((2 * n)) ] || cfs_fail "fsync of overwrites: $sw device writes for $n (expected data and log)"
[ "$af" -ge $((2 * n)) ] || cfs_fail "fdatasync of appends: $af flushes for $n (expected the commit's two each: the size is logged)"

# what fdatasync promised survives a crash
: >"$CFS_WORK/acked"
python3 - "$mnt" "$CFS_WORK/acked" <<'EOF' &
import os, sys
d, acked = sys.argv[1], open(sys.argv[2], "w")
over = os.open(os.path.join(d, "over"), os.O_RDWR | os.O_CREAT, 0o644)
app = os.open(os.path.join(d, "app"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.pwrite(over, b"\0" * (256 * 4096), 0)
os.fsync(over)
i = 0
try:
    while True:
        rec = (b"%08d" % i) * 512
        os.pwrite(over, rec, (i % 256) * 4096)
        os.fdatasync(over)
        os.pwrite(app, rec, i * 4096)
        os.fdatasync(app)
        acked.write("%d\n" % i)
        acked.flush()
        i += 1
except OSError:
    pass
EOF
load=$!
for _ in $(seq 300); do
	[ "$(wc -l <"$CFS_WORK/acked" 2>/dev/null || echo 0)" -gt 300 ] && break
	sleep 0.1
done
[ "$(wc -l <"$CFS_WORK/acked")" -gt 300 ] || cfs_fail "the fdatasync load acknowledged little in 30 s"
cfs_crash "$mnt"
wait $load 2>/dev/null || true
cfs_clear_mount "$mnt"
cfs_mount "$dev" "$mnt"
python3 - "$mnt" "$CFS_WORK/acked" <<'EOF' || cfs_fail "after kill -9: fdatasynced data missing"
import os, sys
d = sys.argv[1]
ids = [int(x) for x in open(sys.argv[2]).read().split()]
last = ids[-1]
app = open(os.path.join(d, "app"), "rb").read()
over = open(os.path.join(d, "over"), "rb").read()
assert len(app) >= (last + 1) * 4096, "app: %d bytes, acknowledged %d records" % (len(app), last + 1)
for i in range(last + 1):
    assert app[i * 4096:(i + 1) * 4096] == (b"%08d" % i) * 512, "app record %d" % i
for slot in range(256):
    # the newest acknowledged record of this slot, or a later one
    acked = [i for i in range(max(0, last - 255), last + 1) if i % 256 == slot]
    if not acked:
        continue
    got = int(over[slot * 4096:slot * 4096 + 8])
    assert got >= acked[-1] and got % 256 == slot, "over slot %d: %d, acknowledged %d" % (slot, got, acked[-1])
print("after kill -9: %d appends and the last overwrite of each slot kept" % (last + 1))
EOF
# flush-only syncs without end, and a file written but never synced
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_mount "$dev" "$mnt" commit_interval=1
# its units mapped (and that logged) before the syncs start, so that writing
# it changes only what a capture logs: its written sectors and its size
touch "$mnt/unsynced"
fallocate -n -l 1M "$mnt/unsynced"
sync -f "$mnt"
python3 - "$mnt/redo" <<'EOF' &
import os, sys
i = 0
try:
    fd = os.open(sys.argv[1], os.O_RDWR)
    while True:
        os.pwrite(fd, b"r" * 4096, (i % 256) * 4096)
        os.fdatasync(fd)
        i += 1
except OSError:
    pass
EOF
syncer=$!
sleep 1
head -c 1048576 /dev/urandom >"$CFS_WORK/unsynced"
dd if="$CFS_WORK/unsynced" of="$mnt/unsynced" bs=64k conv=notrunc status=none
sleep 3
cfs_crash "$mnt"
wait $syncer 2>/dev/null || true
cfs_clear_mount "$mnt"
cfs_mount "$dev" "$mnt"
[ "$(stat -c %s "$mnt/unsynced")" = 1048576 ] ||
	cfs_fail "a file written 3 s before kill -9, never synced, has $(stat -c %s "$mnt/unsynced") bytes (commit_interval=1 while fdatasyncs kept coming)"
cmp "$mnt/unsynced" "$CFS_WORK/unsynced" || cfs_fail "the unsynced file's content after kill -9"
cfs_umount "$mnt" || cfs_fail "unmount"
"$CFS_BIN/fsck.chunkfs" -n "$dev" >"$CFS_WORK/fsck.out" 2>&1 ||
	{ cat "$CFS_WORK/fsck.out" >&2; cfs_fail "fsck.chunkfs"; }
cfs_log "ok"
