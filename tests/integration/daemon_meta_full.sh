#!/usr/bin/env bash
# daemon_meta_full.sh — a full metadata region (fs/BAD-INPUT.md): the
# smallest region (-m 4M: two 2 MiB halves, 2048 inodes) filled two ways,
#   inodes: creates until ENOSPC; then deletes work and make room again;
#   bytes:  four writers setting 64 KiB xattrs with no fsync, as fast as
#           they can, until ENOSPC;
# and in both every refusal is ENOSPC (never EROFS: the mount stays
# read-write), deletes and overwrites of mapped data still work, writes
# that need new units get ENOSPC, and nothing that was accepted is lost:
# after a clean unmount (checkpoint written, fsck clean) and after a kill -9
# while full, every file and every accepted xattr is there.
# Before the fix in fs/meta/journal.c, the unsynced burst outgrew the region
# before the next snapshot saw it: the snapshot failed, the mount turned
# read-only, the unmount checkpoint failed and accepted xattrs were lost.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3 getfattr

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
state=$CFS_WORK/xattrs.txt
cfs_mkfs "$img" 64M -m 4M -a 64K
cfs_mount "$img" "$mnt"

# Data that must survive: 8 files of 256 KiB.
for i in 0 1 2 3 4 5 6 7; do
	head -c 256K /dev/urandom >"$mnt/data$i"
done
sync -f "$mnt/data0"
(cd "$mnt" && md5sum data*) >"$CFS_WORK/data.md5"

readonly_is() {
	[ "$(getfattr --only-values -n user.chunkfs.readonly "$mnt")" = "$1" ] ||
		{ cfs_daemon_log "$mnt" | tail -n 5; cfs_fail "$2: user.chunkfs.readonly is not $1"; }
}

# ---- inodes ------------------------------------------------------------------------------
python3 - "$mnt" <<'EOF' || cfs_fail "inode limit"
import errno, os, sys
m = sys.argv[1]
n = 0
while True:
    try:
        open(os.path.join(m, "e%05d" % n), "w").close()
    except OSError as e:
        if e.errno != errno.ENOSPC:
            sys.exit("create %d: %s, expected ENOSPC" % (n, e))
        break
    n += 1
st = os.statvfs(m)
if st.f_ffree != 0 or n + 8 + 1 != st.f_files:   # 8 data files and the root
    sys.exit("after %d creates: %d inodes of %d free" % (n, st.f_ffree, st.f_files))
for what, call in (("mkdir", lambda: os.mkdir(os.path.join(m, "d"))),
                   ("symlink", lambda: os.symlink("data0", os.path.join(m, "s")))):
    try:
        call()
        sys.exit("%s succeeded with no inode left" % what)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            sys.exit("%s: %s, expected ENOSPC" % (what, e))
for k in range(10):
    os.unlink(os.path.join(m, "e%05d" % k))
for k in range(10):
    open(os.path.join(m, "again%d" % k), "w").close()   # room again
for k in range(10, n):
    os.unlink(os.path.join(m, "e%05d" % k))
print("# %d empty files until ENOSPC; deletes made room again" % n)
EOF
readonly_is 0 "inode limit"

# ---- bytes: a burst of 64 KiB xattrs, no fsync --------------------------------------------
python3 - "$mnt" "$state" <<'EOF' || cfs_fail "metadata bytes"
import errno, mmap, os, sys
m, state = sys.argv[1], sys.argv[2]
def value(w, k):
    return bytes([(w * 37 + k) % 251 + 1]) * 65536
kids = []
for w in range(4):
    pid = os.fork()
    if pid == 0:
        path = os.path.join(m, "data%d" % w)
        ok = 0
        with open("%s.%d" % (state, w), "w") as out:
            while True:
                try:
                    os.setxattr(path, "user.v%d" % ok, value(w, ok))
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        print("writer %d, xattr %d: %s, expected ENOSPC" % (w, ok, e))
                        os._exit(1)
                    break
                out.write("data%d user.v%d %d\n" % (w, ok, (w * 37 + ok) % 251 + 1))
                ok += 1
        os._exit(0)
    kids.append(pid)
bad = 0
for pid in kids:
    bad |= os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
if bad:
    sys.exit("a writer got something other than ENOSPC")
total = sum(1 for w in range(4) for _ in open("%s.%d" % (state, w)))
if total < 10:
    sys.exit("only %d xattrs of 64 KiB fit in a 2 MiB half" % total)
print("# %d xattrs of 64 KiB set before ENOSPC" % total)

def expect(what, call, want):
    try:
        call()
        got = "ok"
    except OSError as e:
        got = errno.errorcode[e.errno]
    if got != want:
        sys.exit("%s while full: %s, expected %s" % (what, got, want))
expect("create", lambda: open(os.path.join(m, "new"), "w"), "ENOSPC")
expect("link", lambda: os.link(os.path.join(m, "data0"), os.path.join(m, "ln")), "ENOSPC")
expect("setxattr", lambda: os.setxattr(os.path.join(m, "data7"), "user.x", b"1"), "ENOSPC")
# Writes: over mapped data they work, into a hole they need a new mapping.
fd = os.open(os.path.join(m, "data5"), os.O_RDWR | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
buf.write(b"\x5a" * 4096)
expect("overwrite", lambda: os.pwritev(fd, [buf], 0), "ok")
expect("write into a hole", lambda: os.pwritev(fd, [buf], 8 << 20), "ENOSPC")
os.close(fd)
expect("read", lambda: open(os.path.join(m, "data1"), "rb").read(), "ok")
# Deletes work while full, and make room once durable.
expect("unlink", lambda: os.unlink(os.path.join(m, "again0")), "ok")
# Two 64 KiB xattrs: how many writers' xattrs were accepted at the boundary
# depends on timing (the estimate counts batches in flight), so one freed
# xattr can leave the estimate just over the line (seen once in CI: 25 set).
for _ in range(2):
    w = next(w for w in range(4) if os.path.getsize("%s.%d" % (state, w)))
    lines = open("%s.%d" % (state, w)).readlines()
    f, name, _ = lines[0].split()
    expect("removexattr", lambda: os.removexattr(os.path.join(m, f), name), "ok")
    open("%s.%d" % (state, w), "w").writelines(lines[1:])
fd = os.open(m, os.O_RDONLY)
os.fsync(fd)
os.close(fd)
expect("create after deletes", lambda: open(os.path.join(m, "again0"), "w").close(), "ok")
EOF
readonly_is 0 "metadata bytes"
cat "$state".? >"$state"
# data5's first 4 KiB were overwritten on purpose
(cd "$mnt" && md5sum data*) >"$CFS_WORK/data.md5"

check_all() {	# WHAT: every file and every accepted xattr
	(cd "$mnt" && md5sum --quiet -c "$CFS_WORK/data.md5") || cfs_fail "$1: data changed"
	python3 - "$mnt" "$state" <<'EOF' || cfs_fail "$1: xattrs"
import os, sys
m, state = sys.argv[1], sys.argv[2]
n = 0
for line in open(state):
    f, name, b = line.split()
    try:
        v = os.getxattr(os.path.join(m, f), name)
    except OSError as e:
        sys.exit("%s %s: %s (it was accepted)" % (f, name, e))
    if v != bytes([int(b)]) * 65536:
        sys.exit("%s %s: value differs" % (f, name))
    n += 1
for k in range(10):
    if not os.path.exists(os.path.join(m, "again%d" % k)):
        sys.exit("again%d missing" % k)
print("# %d xattrs and 10 files checked" % n)
EOF
}

cfs_umount "$mnt" || cfs_fail "unclean unmount while full"
cfs_daemon_log "$mnt" | grep -q "read-only" && { cfs_daemon_log "$mnt"; cfs_fail "went read-only"; }
"$CFS_BIN/fsck.chunkfs" -n "$img" >"$CFS_WORK/fsck.out" 2>&1 ||
	{ cat "$CFS_WORK/fsck.out"; cfs_fail "fsck after a full region"; }
cfs_mount "$img" "$mnt"
check_all "after a clean unmount"
readonly_is 0 "remount"

# ---- kill -9 while full: the log and the mount's snapshot must still fit ---------------------
python3 - "$mnt" "$state" <<'EOF' || cfs_fail "refill"
import errno, os, sys
m, state = sys.argv[1], sys.argv[2]
# Make room for a few (removals are allowed while full), then fill it again.
lines = open(state).read().splitlines(True)
drop = [l for l in lines if l.startswith("data0 ")][:6]
for l in drop:
    os.removexattr(os.path.join(m, "data0"), l.split()[1])
open(state, "w").writelines(l for l in lines if l not in drop)
fd = os.open(m, os.O_RDONLY)
os.fsync(fd)
os.close(fd)
path = os.path.join(m, "data6")
added = 0
with open(state, "a") as out:
    for k in range(1000):
        try:
            os.setxattr(path, "user.w%d" % k, bytes([k % 251 + 1]) * 65536)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                sys.exit("setxattr: %s, expected ENOSPC" % e)
            break
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)   # durable: it must survive the crash
        os.close(fd)
        out.write("data6 user.w%d %d\n" % (k, k % 251 + 1))
        added += 1
# Deletes must make room. How much depends on when the next snapshot
# settles the estimate (it counts log written since the last one): 2 to 8
# were seen here after removing 6.
if added < 1:
    sys.exit("nothing fits after removing 6 xattrs")
print("# removed 6 xattrs, added %d (each fsynced), then ENOSPC; now kill -9" % added)
EOF
cfs_kill9 "$mnt"
"$CFS_BIN/fsck.chunkfs" -n "$img" >"$CFS_WORK/fsck.out" 2>&1 ||
	{ cat "$CFS_WORK/fsck.out"; cfs_fail "fsck after kill -9 while full"; }
cfs_mount "$img" "$mnt"
check_all "after kill -9 while full"
readonly_is 0 "remount after kill -9"
cfs_umount "$mnt" || cfs_fail "unclean unmount"
cfs_daemon_log "$mnt" | grep -q "read-only" && { cfs_daemon_log "$mnt"; cfs_fail "went read-only"; }
cfs_log "ok"
