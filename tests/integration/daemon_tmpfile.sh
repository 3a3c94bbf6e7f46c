#!/usr/bin/env bash
# daemon_tmpfile.sh — open(O_TMPFILE) on chunkfs (fs/fuse/tmpfile.h), on a
# store mount and a RAM mount:
#   - the file is created in the directory without a name (not listed, the
#     directory unchanged), regular, nlink 0, with the mode asked less the
#     umask; buffered and O_DIRECT writes and reads; a second open through
#     /proc/self/fd reads the same bytes;
#   - linkat(fd, "", ..., AT_EMPTY_PATH) and linkat of /proc/self/fd/N with
#     AT_SYMLINK_FOLLOW name it: content kept, nlink 1; on the store the
#     names and their content survive a remount;
#   - O_TMPFILE|O_EXCL: linkat gets ENOENT and nothing is named;
#   - the space of a file never named comes back at its close (df);
#   - bad input: in a removed directory ENOENT, on a file ENOTDIR, without
#     write access EINVAL; nothing created;
#   - store: kill -9 of the daemon while a fsynced unnamed file is open, then
#     fsck (the orphan is a note), remount (it is freed: the log says so, df
#     is back where it was before the file), fsck clean.
# uring_daemon_tmpfile.sh runs it again on FUSE over io_uring.
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd python3

img=$CFS_WORK/store.img
store=$CFS_WORK/store
ram=$CFS_WORK/ram
cfs_mkfs "$img" 256M
cfs_mount "$img" "$store"
cfs_mount ram "$ram" ram,size=128M

# The checks on one mount; prints the sha256 of the two named files.
tmpfile_checks() {
	python3 - "$1" <<'PY'
import ctypes, errno, hashlib, mmap, os, stat, sys, time

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, AT_SYMLINK_FOLLOW, AT_EMPTY_PATH = -100, 0x400, 0x1000
d = os.path.join(sys.argv[1], "tmp")
os.mkdir(d)

def linkat(olddirfd, oldpath, newpath, flags):
    if libc.linkat(olddirfd, oldpath.encode(), AT_FDCWD, newpath.encode(), flags) == 0:
        return 0
    return ctypes.get_errno()

def free():
    return os.statvfs(d).f_bfree

def wait_free(want, what):
    for _ in range(100):        # RELEASE and FORGET reach the daemon after close()
        if free() >= want:
            return
        time.sleep(0.05)
    sys.exit(f"{what}: free units {free()}, expected {want}")

# ---- created without a name ---------------------------------------------
os.umask(0o027)
dir0 = os.stat(d)
free0 = free()
fd = os.open(d, os.O_TMPFILE | os.O_RDWR, 0o666)
st = os.fstat(fd)
assert stat.S_ISREG(st.st_mode), oct(st.st_mode)
assert stat.S_IMODE(st.st_mode) == 0o640, oct(st.st_mode)
assert st.st_nlink == 0 and st.st_size == 0, st
assert os.listdir(d) == [], os.listdir(d)
assert os.stat(d).st_mtime_ns == dir0.st_mtime_ns, "the directory changed"

data = os.urandom(8 << 20)                      # buffered
assert os.pwrite(fd, data, 0) == len(data)
os.fsync(fd)
assert os.pread(fd, len(data), 0) == data
assert os.fstat(fd).st_size == len(data)
assert free() < free0, "no space taken by the unnamed file"
again = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)   # a second open of the inode
assert os.pread(again, len(data), 0) == data
os.close(again)

dfd = os.open(d, os.O_TMPFILE | os.O_RDWR | os.O_DIRECT, 0o600)   # O_DIRECT
wbuf, rbuf = mmap.mmap(-1, 1 << 20), mmap.mmap(-1, 1 << 20)
wbuf.write(os.urandom(1 << 20))
assert os.pwritev(dfd, [wbuf], 0) == 1 << 20
assert os.preadv(dfd, [rbuf], 0) == 1 << 20 and rbuf[:] == wbuf[:]
assert os.pwritev(dfd, [memoryview(wbuf)[:4096]], 1 << 20) == 4096

# ---- named by linkat -----------------------------------------------------
assert linkat(fd, "", os.path.join(d, "linked"), AT_EMPTY_PATH) == 0
assert linkat(AT_FDCWD, f"/proc/self/fd/{dfd}", os.path.join(d, "direct"),
              AT_SYMLINK_FOLLOW) == 0
assert sorted(os.listdir(d)) == ["direct", "linked"], os.listdir(d)
assert os.fstat(fd).st_nlink == 1 and os.stat(os.path.join(d, "linked")).st_nlink == 1
with open(os.path.join(d, "linked"), "rb") as f:
    assert f.read() == data
with open(os.path.join(d, "direct"), "rb") as f:
    direct = f.read()
assert direct == wbuf[:] + wbuf[:4096]
# Named once, it is an ordinary file: a second name is a hard link.
os.link(os.path.join(d, "linked"), os.path.join(d, "linked2"))
assert os.fstat(fd).st_nlink == 2
os.unlink(os.path.join(d, "linked2"))
os.close(fd)
os.close(dfd)

# ---- O_EXCL: never linkable ----------------------------------------------
xfd = os.open(d, os.O_TMPFILE | os.O_RDWR | os.O_EXCL, 0o600)
os.write(xfd, b"x" * 4096)
assert linkat(xfd, "", os.path.join(d, "excl"), AT_EMPTY_PATH) == errno.ENOENT
assert linkat(AT_FDCWD, f"/proc/self/fd/{xfd}", os.path.join(d, "excl"),
              AT_SYMLINK_FOLLOW) == errno.ENOENT
assert not os.path.exists(os.path.join(d, "excl"))
os.close(xfd)

# ---- an unnamed file's space comes back at its close ---------------------
before = free()
ufd = os.open(d, os.O_TMPFILE | os.O_WRONLY, 0o600)
os.pwrite(ufd, os.urandom(16 << 20), 0)
os.fsync(ufd)
assert free() < before, "16 MiB written and no space taken"
os.close(ufd)
wait_free(before, "after the close of an unnamed file")

# ---- bad input: a clear error, nothing created ---------------------------
gone = os.path.join(d, "gone")
os.mkdir(gone)
keep = os.open(gone, os.O_RDONLY | os.O_DIRECTORY)
os.rmdir(gone)
try:
    os.open(".", os.O_TMPFILE | os.O_RDWR, 0o600, dir_fd=keep)
    sys.exit("O_TMPFILE in a removed directory worked")
except OSError as e:
    assert e.errno == errno.ENOENT, e
os.close(keep)
for flags, want in ((os.O_TMPFILE | os.O_RDWR, errno.ENOTDIR),   # on a file
                    (os.O_TMPFILE | os.O_RDONLY, errno.EINVAL)):  # no write access
    try:
        os.open(os.path.join(d, "linked") if want == errno.ENOTDIR else d, flags, 0o600)
        sys.exit(f"O_TMPFILE flags {flags:#o} worked")
    except OSError as e:
        assert e.errno == want, e
assert sorted(os.listdir(d)) == ["direct", "linked"], os.listdir(d)
wait_free(before, "after the refusals")
print(hashlib.sha256(data).hexdigest(), hashlib.sha256(direct).hexdigest())
PY
}

for mnt in "$store" "$ram"; do
	cfs_log "O_TMPFILE on $mnt"
	sums=$(tmpfile_checks "$mnt") || cfs_fail "O_TMPFILE on $mnt"
	[ "$mnt" = "$store" ] && store_sums=$sums
done

# ---- the names survive a remount ------------------------------------------------------
cfs_umount "$store" || cfs_fail "unmount"
cfs_mount "$img" "$store"
got="$(sha256sum <"$store/tmp/linked" | cut -d' ' -f1) $(sha256sum <"$store/tmp/direct" | cut -d' ' -f1)"
[ "$got" = "$store_sums" ] || cfs_fail "linked files after remount: $got, expected $store_sums"
[ "$(stat -c %h "$store/tmp/linked")" = 1 ] || cfs_fail "link count after remount"

# ---- kill -9 with an unnamed file open: freed at the next mount -------------------------
free0=$(stat -f -c %f "$store")
python3 - "$store/tmp" "$CFS_WORK/ready" <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_TMPFILE | os.O_WRONLY, 0o600)
os.pwrite(fd, os.urandom(24 << 20), 0)
os.fsync(fd)                    # its inode and units are in the log
open(sys.argv[2], "w").close()
time.sleep(600)
PY
holder=$!
cfs_defer "kill -9 $holder 2>/dev/null"
for ((i = 0; i < 300; i++)); do
	[ -e "$CFS_WORK/ready" ] && break
	sleep 0.1
done
[ -e "$CFS_WORK/ready" ] || cfs_fail "the unnamed file was not written"
[ "$(stat -f -c %f "$store")" -lt "$free0" ] || cfs_fail "24 MiB written and no space taken"
cfs_crash "$store"
kill -9 $holder
wait $holder 2>/dev/null || true
cfs_clear_mount "$store"
"$CFS_BIN/fsck.chunkfs" -nv "$img" >"$CFS_WORK/fsck.out" 2>&1 ||
	{ cat "$CFS_WORK/fsck.out"; cfs_fail "fsck after kill -9"; }
grep -q "orphan inode" "$CFS_WORK/fsck.out" ||
	{ cat "$CFS_WORK/fsck.out"; cfs_fail "fsck does not see the unnamed file after kill -9"; }
cfs_mount "$img" "$store"
cfs_daemon_log "$store" | grep -q "freed 1 orphan inodes" ||
	{ cfs_daemon_log "$store"; cfs_fail "the remount did not free the unnamed file"; }
[ "$(stat -f -c %f "$store")" = "$free0" ] ||
	cfs_fail "free units after the remount: $(stat -f -c %f "$store"), before the file: $free0"
[ "$(ls "$store/tmp" | tr '\n' ' ')" = "direct linked " ] || cfs_fail "tmp holds: $(ls "$store/tmp")"
cfs_umount "$store" || cfs_fail "unmount"
"$CFS_BIN/fsck.chunkfs" -nv "$img" >"$CFS_WORK/fsck.out" 2>&1 ||
	{ cat "$CFS_WORK/fsck.out"; cfs_fail "fsck after the remount"; }
grep -q "orphan" "$CFS_WORK/fsck.out" && { cat "$CFS_WORK/fsck.out"; cfs_fail "an orphan is left"; }
cfs_log "O_TMPFILE: created, written, linked, freed; kill -9: no leak, fsck clean"

# On FUSE over io_uring (uring_daemon_tmpfile.sh): the requests went over the rings.
if [[ ${CFS_EXTRA_MOUNT_OPTS:-} == *transport=uring* ]]; then
	cfs_umount "$ram" || cfs_fail "unmount"
	line=$(cfs_daemon_log "$ram" | grep "transport io_uring:" | tail -n 1)
	[[ $line =~ \ [1-9][0-9]*\ requests\ over\ io_uring ]] || cfs_fail "not on the rings: $line"
	cfs_log "RAM mount: $line"
fi
