#!/usr/bin/env bash
# daemon_killpriv.sh — the daemon clears suid/sgid itself
# (FUSE_HANDLE_KILLPRIV_V2, fs/fuse/killpriv.h), exactly where the kernel's VFS
# would: a write, a truncate or an open(O_TRUNC) by a user without
# CAP_FSETID (and fallocate by anyone but root), and any chown; sgid only
# with group execute; never on directories. In exchange, buffered writes no
# longer cost a security.capability GETXATTR round trip each (counted in the
# debug log).
. "$(dirname "$0")/../lib/common.sh"
cfs_require_fuse
cfs_require_cmd setpriv python3 dd fallocate
[ -x /usr/bin/python3 ] || cfs_skip "needs /usr/bin/python3 (run as nobody)"

as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
chmod 755 "$CFS_WORK" # nobody reaches the mount point
cfs_mkfs "$img" 64M
cfs_mount "$img" "$mnt" allow_other,debug
mkdir "$mnt/d"
chown 65534:65534 "$mnt/d"

mode_is() { # FILE MODE WHAT
	local got
	got=$(stat -c %a "$1")
	[ "$got" = "$2" ] || cfs_fail "$3: mode $got, expected $2"
	cfs_log "$3: $got"
}
fresh() { # FILE MODE: a 64 KiB file of nobody's with MODE
	rm -f "$1"
	as_nobody dd if=/dev/zero of="$1" bs=64k count=1 status=none || cfs_fail "create $1"
	chmod "$2" "$1"
}
# write4k FILE [direct]: one 4 KiB pwrite (O_DIRECT with "direct")
cat >"$CFS_WORK/write4k.py" <<'EOF'
import mmap, os, sys
flags = os.O_WRONLY | (os.O_DIRECT if sys.argv[2:] == ["direct"] else 0)
fd = os.open(sys.argv[1], flags)
buf = mmap.mmap(-1, 4096)
buf.write(b"k" * 4096)
os.pwritev(fd, [buf], 4096)
os.close(fd)
EOF
write4k() { python3 "$CFS_WORK/write4k.py" "$@"; }
nobody_write4k() { as_nobody /usr/bin/python3 "$CFS_WORK/write4k.py" "$@" || cfs_fail "write as nobody: $*"; }

f=$mnt/d/f
fresh "$f" 6777
nobody_write4k "$f"
mode_is "$f" 777 "buffered write by nobody"
fresh "$f" 6767
nobody_write4k "$f"
mode_is "$f" 2767 "buffered write by nobody, sgid without group execute"
fresh "$f" 6777
nobody_write4k "$f" direct
mode_is "$f" 777 "O_DIRECT write by nobody"
fresh "$f" 6777
write4k "$f"
write4k "$f" direct
mode_is "$f" 6777 "writes by root (CAP_FSETID)"
fresh "$f" 6777
as_nobody truncate -s 4096 "$f" || cfs_fail "truncate as nobody"
mode_is "$f" 777 "truncate by nobody"
fresh "$f" 6777
truncate -s 4096 "$f"
mode_is "$f" 6777 "truncate by root"
fresh "$f" 6777
as_nobody sh -c ": >'$f'" || cfs_fail "open(O_TRUNC) as nobody"
mode_is "$f" 777 "open(O_TRUNC) by nobody"
[ "$(stat -c %s "$f")" = 0 ] || cfs_fail "open(O_TRUNC) did not truncate"
fresh "$f" 6777
: >"$f"
mode_is "$f" 6777 "open(O_TRUNC) by root"
fresh "$f" 6777
as_nobody fallocate -l 1M "$f" || cfs_fail "fallocate as nobody"
mode_is "$f" 777 "fallocate by nobody"
fresh "$f" 6777
fallocate -l 1M "$f"
mode_is "$f" 6777 "fallocate by root"
fresh "$f" 6777
chown 0:0 "$f"
mode_is "$f" 777 "chown by root"
fresh "$f" 6767
chgrp 0 "$f"
mode_is "$f" 2767 "chgrp, sgid without group execute"
mkdir "$mnt/sgid-dir"
chmod 2775 "$mnt/sgid-dir"
chown 65534:65534 "$mnt/sgid-dir"
mode_is "$mnt/sgid-dir" 2775 "chown of a directory"
fresh "$f" 6777
cat "$f" >/dev/null
mode_is "$f" 6777 "read by root"

# Durable like any other mode change.
fresh "$mnt/d/kept" 6777
nobody_write4k "$mnt/d/kept"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_mount "$img" "$mnt" allow_other,debug
mode_is "$mnt/d/kept" 777 "after a remount"
mode_is "$mnt/sgid-dir" 2775 "directory after a remount"

# 200 buffered 8 KiB writes: no GETXATTR (security.capability) between them.
dd if=/dev/zero of="$mnt/chunk" bs=8k count=1 status=none
before=$(cfs_daemon_log "$mnt" | grep -c 'opcode: GETXATTR ' || true)
writes_before=$(cfs_daemon_log "$mnt" | grep -c 'opcode: WRITE ' || true)
dd if=/dev/zero of="$mnt/chunk" bs=8k count=200 conv=notrunc status=none
sleep 0.5 # the debug log is written by the daemon
getx=$(($(cfs_daemon_log "$mnt" | grep -c 'opcode: GETXATTR ' || true) - before))
writes=$(($(cfs_daemon_log "$mnt" | grep -c 'opcode: WRITE ' || true) - writes_before))
cfs_log "200 buffered writes: $writes WRITE and $getx GETXATTR requests"
[ "$writes" -ge 200 ] || cfs_fail "expected 200 WRITE requests in the debug log, saw $writes"
[ "$getx" -le 1 ] || cfs_fail "buffered writes still cost a GETXATTR each ($getx for 200)"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"
