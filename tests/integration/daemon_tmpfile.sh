#!/usr/bin/env bash
# daemon_tmpfile.sh — open(O_TMPFILE) on a chunkfs directory gets EOPNOTSUPP
# (chunkfs(8), NOTES, says why), leaves nothing behind, and the fallback an
# application takes (MariaDB: a named temporary file, unlinked while open)
# works: written, read back through its descriptor, gone from the directory,
# its space back once closed. Store and RAM mounts.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3

img=$CFS_WORK/store.img
cfs_mkfs "$img" 64M
cfs_mount "$img" "$CFS_WORK/store"
cfs_mount ram "$CFS_WORK/ram" ram,size=64M

for mnt in "$CFS_WORK/store" "$CFS_WORK/ram"; do
	cfs_log "mount $mnt"
	python3 - "$mnt" <<'PY' || cfs_fail "O_TMPFILE on $mnt"
import errno, os, sys, time
d = os.path.join(sys.argv[1], "tmp")
os.mkdir(d)
for attempt in range(2):        # the kernel remembers the answer: same both times
    try:
        fd = os.open(d, os.O_TMPFILE | os.O_RDWR, 0o600)
        sys.exit("O_TMPFILE worked: update chunkfs(8) and this test")
    except OSError as e:
        assert e.errno == errno.EOPNOTSUPP, e
assert os.listdir(d) == [], os.listdir(d)
free0 = os.statvfs(d).f_bfree
fd = os.open(os.path.join(d, "#sql-tmp"), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
os.unlink(os.path.join(d, "#sql-tmp"))
data = os.urandom(4 << 20)
os.pwrite(fd, data, 0)
assert os.pread(fd, len(data), 0) == data
assert os.listdir(d) == []
os.close(fd)
for _ in range(100):            # the RELEASE reaches the daemon after close()
    if os.statvfs(d).f_bfree >= free0:
        break
    time.sleep(0.05)
assert os.statvfs(d).f_bfree >= free0, "the unlinked file's space did not come back"
print("O_TMPFILE: EOPNOTSUPP; unlinked temporary file: ok")
PY
done
