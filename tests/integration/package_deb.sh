#!/usr/bin/env bash
# package_deb: the Debian package, end to end, on this machine.
#
#   make deb (dpkg-buildpackage, its build-time tests, lintian: no errors or
#   warnings); dpkg -i; the installed files (programs, mount helpers, man
#   pages that name every option and every statistic, the fstab and systemd
#   examples, which systemd parses); mount through an /etc/fstab line with
#   the options fstab and systemd use (defaults, nofail, _netdev, noauto,
#   x-systemd.*), served by the installed /usr/bin/chunkfs; write, read,
#   getfattr; unmount; debian/tests/mount (the autopkgtest: mount -t
#   fuse.chunkfs and -t chunkfs, fsck, RAM mount); dpkg --purge, and nothing
#   of the package is left under /usr or /etc.
#
# /etc/fstab is restored and the package purged however the test ends. One
# run at a time per machine (dpkg, /etc/fstab and build/deb are shared).
# The package is built with its own flags (debian/rules), whatever $BUILD
# is; its build-time tests (unit + golden) run when BUILD=release, and the
# other passes (make check-asan) build with DEB_BUILD_OPTIONS=nocheck rather
# than run them a second time. CFS_DEB_NOCHECK=1 does that for any BUILD;
# CFS_DEB=FILE.deb tests that package instead of building one (no build, no
# lintian).
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"

cfs_require_root
command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null ||
	cfs_skip "needs dpkg-buildpackage and debhelper (apt install dpkg-dev debhelper fakeroot)"
cfs_require_fuse
cfs_require_cmd getfattr flock

exec 9>/var/lock/chunkfs-package-test.lock
flock -w 240 9 ||
	cfs_skip "another package_deb run on this machine held dpkg and /etc/fstab (/var/lock/chunkfs-package-test.lock) for 240 s"

export PATH=/usr/sbin:/usr/bin:/sbin:/bin
start=$(date +%s)
mnt=/var/tmp/cfs-pkg-mnt
ram=/var/tmp/cfs-pkg-ram
img=$CFS_WORK/store.img
man8=/usr/share/man/man8
doc=/usr/share/doc/chunkfs

# ---- build -----------------------------------------------------------------
if [ -n "${CFS_DEB:-}" ]; then
	[ -f "$CFS_DEB" ] || cfs_fail "CFS_DEB=$CFS_DEB: no such file"
	cp "$CFS_DEB" "$CFS_WORK/"
	deb=$CFS_WORK/$(basename "$CFS_DEB")
	cfs_log "testing $CFS_DEB (not built here)"
else
	[ "$BUILD" = release ] || CFS_DEB_NOCHECK=1
	opts="parallel=2"
	[ "${CFS_DEB_NOCHECK:-0}" = 1 ] && opts="$opts nocheck"
	cfs_log "make deb (DEB_BUILD_OPTIONS=$opts)"
	if ! DEB_BUILD_OPTIONS=$opts make -C "$CFS_ROOT" deb DEB_JOBS=2 >"$CFS_WORK/build.log" 2>&1; then
		tail -n 60 "$CFS_WORK/build.log" >&2
		cfs_fail "make deb failed (lintian errors or warnings fail it too)"
	fi
	grep -qE '^tests: [0-9]+ passed, 0 failed' "$CFS_WORK/build.log" ||
		[ "${CFS_DEB_NOCHECK:-0}" = 1 ] || cfs_fail "the package build ran no build-time tests"
	grep -E '^tests: ' "$CFS_WORK/build.log" | sed 's/^/# build-time /' || true
	grep -qE '^lintian ' "$CFS_WORK/build.log" || cfs_fail "make deb did not run lintian"
	deb=$(ls "$CFS_ROOT"/build/deb/chunkfs_*_"$(dpkg --print-architecture)".deb)
	cp "$deb" "$CFS_WORK/" # a concurrent make deb may remove build/deb
	deb=$CFS_WORK/$(basename "$deb")
	cfs_log "built $(basename "$deb") in $(($(date +%s) - start)) s"
	lintian -I -E --pedantic "$deb" 2>/dev/null | sed 's/^/# lintian: /' || true
fi

# ---- install ----------------------------------------------------------------
# Cleanups run last-registered first: unmount, then /etc/fstab, then purge.
cfs_defer "dpkg --purge chunkfs"
cp -p /etc/fstab "$CFS_WORK/fstab.orig"
cfs_defer "cat '$CFS_WORK/fstab.orig' >/etc/fstab"
cfs_defer "umount '$mnt'; umount '$ram'; flock -w 60 '$img' true; rmdir '$mnt' '$ram'"

if dpkg -s chunkfs >/dev/null 2>&1; then
	cfs_log "chunkfs $(dpkg-query -W -f='${Version}' chunkfs) was installed before this test (reinstalled, purged at the end)"
fi
dpkg -i "$deb" >"$CFS_WORK/dpkg.log" 2>&1 || { cat "$CFS_WORK/dpkg.log" >&2; cfs_fail "dpkg -i failed"; }
[ "$(dpkg-query -W -f='${Status}' chunkfs)" = "install ok installed" ] || cfs_fail "chunkfs is not installed"

for f in /usr/bin/chunkfs /usr/sbin/mkchunkfs /usr/sbin/fsck.chunkfs; do
	[ -f "$f" ] && [ -x "$f" ] || cfs_fail "$f missing or not executable"
done
for f in /usr/sbin/mount.chunkfs /usr/sbin/mount.fuse.chunkfs; do
	[ "$(readlink -f "$f")" = /usr/bin/chunkfs ] || cfs_fail "$f does not lead to /usr/bin/chunkfs"
done
/usr/bin/chunkfs --version | grep -q '^chunkfs ' || cfs_fail "chunkfs --version"
for p in chunkfs mount.chunkfs mount.fuse.chunkfs mkchunkfs fsck.chunkfs; do
	[ -e "$man8/$p.8.gz" ] || cfs_fail "no man page $man8/$p.8.gz"
	[ "$(readlink -f "$(man -w "$p")")" = "$(readlink -f "$man8/$p.8.gz")" ] ||
		cfs_fail "man -w $p: $(man -w "$p" 2>&1)"
	warn=$(MANWIDTH=80 man --warnings "$p" 2>&1 >/dev/null)
	[ -z "$warn" ] || cfs_fail "man $p: groff warnings: $warn"
done
for f in copyright examples/fstab examples/srv-chunks.mount examples/postgresql-chunkfs.conf \
	examples/informix-chunkfs.conf; do
	[ -f "$doc/$f" ] || cfs_fail "$doc/$f missing"
done

# The examples are what systemd reads: the fstab lines become fuse.chunkfs
# mount units, and the mount unit and the database drop-in verify cleanly
# (the drop-in's RequiresMountsFor= finds the mount unit).
gen=$CFS_WORK/generator
mkdir -p "$gen"
if [ -x /lib/systemd/system-generators/systemd-fstab-generator ]; then
	SYSTEMD_FSTAB=$doc/examples/fstab /lib/systemd/system-generators/systemd-fstab-generator \
		"$gen" "$gen" "$gen" 2>"$CFS_WORK/gen.err" || cfs_fail "fstab example: $(cat "$CFS_WORK/gen.err")"
	[ "$(grep -l '^Type=fuse.chunkfs$' "$gen"/*.mount | wc -l)" -eq 3 ] ||
		cfs_fail "fstab example: expected 3 fuse.chunkfs mount units, got: $(ls "$gen")"
	grep -q '^RequiresMountsFor=/srv/ssd$' "$gen/srv-chunks2.mount" ||
		cfs_fail "fstab example: x-systemd.requires-mounts-for not seen by systemd"
fi
if command -v systemd-analyze >/dev/null; then
	units=$CFS_WORK/units
	mkdir -p "$units/postgresql@.service.d"
	cp "$doc/examples/srv-chunks.mount" "$units/"
	cp "$doc/examples/postgresql-chunkfs.conf" "$units/postgresql@.service.d/chunkfs.conf"
	printf '[Service]\nExecStart=/bin/true\n' >"$units/postgresql@.service"
	out=$(cd "$units" && SYSTEMD_UNIT_PATH=$units: systemd-analyze verify --man=no \
		"$units/srv-chunks.mount" "$units/postgresql@15-main.service" 2>&1) ||
		cfs_fail "systemd-analyze verify: $out"
	[ -z "$out" ] || cfs_fail "systemd-analyze verify of the examples: $out"
fi

# ---- the man pages name every option and every statistic ----------------------
# ASCII (LC_ALL=C), one line per paragraph, no hyphenation (HY=0).
man_text() { LC_ALL=C MANWIDTH=1000 MANROFFOPT=-rHY=0 man "$1" 2>/dev/null | col -b; }
man_text chunkfs >"$CFS_WORK/chunkfs.txt"
man_text mkchunkfs >"$CFS_WORK/mkchunkfs.txt"
man_text fsck.chunkfs >"$CFS_WORK/fsck.txt"
in_man() { grep -qwF -- "$2" "$1"; } # FILE WORD
missing=()
# Every option the programs' help lists: chunkfs's -o NAME, and the option
# lines ("  -x ..." / "  --name ...") of chunkfs stat -h, mkchunkfs -h and
# fsck.chunkfs -h.
for o in $(/usr/bin/chunkfs --help | grep -oE -- '-o [a-z_]+' | awk '$2 != "opt" { print $2 }' | sort -u); do
	in_man "$CFS_WORK/chunkfs.txt" "$o" || missing+=("chunkfs(8): -o $o")
done
for o in $(/usr/bin/chunkfs stat -h | grep -oE -- '^  (-[a-zA-Z]|--[a-z-]+)' | sort -u); do
	in_man "$CFS_WORK/chunkfs.txt" "$o" || missing+=("chunkfs(8): chunkfs stat $o")
done
for o in $(/usr/sbin/mkchunkfs -h | grep -oE -- '^  (-[a-zA-Z]|--[a-z-]+)' | sort -u); do
	in_man "$CFS_WORK/mkchunkfs.txt" "$o" || missing+=("mkchunkfs(8): $o")
done
for o in $(/usr/sbin/fsck.chunkfs -h | grep -oE -- '^  -[a-zA-Z]' | sort -u) -h; do
	in_man "$CFS_WORK/fsck.txt" "$o" || missing+=("fsck.chunkfs(8): $o")
done

# ---- mount through /etc/fstab ------------------------------------------------
mkchunkfs -q -s 128M --sparse -L pkgtest "$img" || cfs_fail "installed mkchunkfs failed"
mkdir -p "$mnt" "$ram"
# mount(8) keeps some fstab options to itself; the helper, called the way
# mount(8) calls it (-f: check everything, mount nothing), must accept all of
# them, and still refuse an option it does not know.
fstab_opts=defaults,nofail,_netdev,noauto,auto,user,nouser,x-systemd.automount,x-systemd.requires-mounts-for=/var/tmp,comment=cfs,relatime
for helper in mount.fuse.chunkfs mount.chunkfs; do
	out=$("/usr/sbin/$helper" "$img" "$mnt" -f -n -o "$fstab_opts" 2>&1) ||
		cfs_fail "$helper -o $fstab_opts refused: $out"
done
cfs_expect_fail_with "unknown option 'no_such_option'" 1 \
	/usr/sbin/mount.chunkfs "$img" "$mnt" -f -o defaults,no_such_option
{
	echo "# package_deb test $$ (restored at exit)"
	echo "$img $mnt fuse.chunkfs defaults,nofail,_netdev,noauto,noatime,allow_other,x-systemd.requires-mounts-for=/var/tmp,x-systemd.device-timeout=10s,comment=cfs 0 0"
	echo "cfs-pkg-ram $ram chunkfs noauto,nofail,ram,size=64M,dio_align=4096,x-systemd.automount 0 0"
} >>/etc/fstab
mount "$mnt" || cfs_fail "mount $mnt (the /etc/fstab line) failed"
awk -v d="$mnt" -v s="$img" '$1 == s && $2 == d && $3 == "fuse.chunkfs" { f = 1 } END { exit !f }' \
	/proc/self/mounts || cfs_fail "$mnt is not a fuse.chunkfs mount of $img: $(grep "$mnt" /proc/self/mounts)"
# The daemon serving it is the installed one, not a build tree's.
exe=""
for pid in $(fuser "$img" 2>/dev/null); do
	exe=$(readlink "/proc/$pid/exe")
done
[ "$exe" = /usr/bin/chunkfs ] || cfs_fail "the daemon holding $img is '$exe', not /usr/bin/chunkfs"
mount "$ram" || cfs_fail "mount $ram (the RAM /etc/fstab line, type chunkfs) failed"
grep -q "^cfs-pkg-ram $ram fuse.chunkfs " /proc/self/mounts || cfs_fail "$ram is not a RAM chunkfs mount"

head -c 3M /dev/urandom >"$CFS_WORK/data"
for m in "$mnt" "$ram"; do
	dd if="$CFS_WORK/data" of="$m/chunk" bs=1M oflag=direct conv=fsync status=none ||
		cfs_fail "O_DIRECT write on $m"
	cmp "$CFS_WORK/data" <(dd if="$m/chunk" bs=1M iflag=direct status=none) ||
		cfs_fail "data read back on $m differs"
	[ "$(getfattr --absolute-names --only-values -n user.chunkfs.write_bytes "$m/chunk")" = 3145728 ] ||
		cfs_fail "$m: user.chunkfs.write_bytes is not 3145728"
done

# Every statistic a chunk and a mount root carry, and every Prometheus metric,
# is named in chunkfs(8); latency rows as op_lat_... for read/write/fsync/discard.
keys=$( (getfattr --absolute-names --only-values -n user.chunkfs.stat "$mnt/chunk"
	echo; getfattr --absolute-names --only-values -n user.chunkfs.stat "$mnt") |
	tr ' ' '\n' | sed -n 's/=.*//p' | sort -u)
[ "$(wc -w <<<"$keys")" -gt 40 ] || cfs_fail "user.chunkfs.stat has only: $keys"
for k in $keys stat reset; do
	case $k in
	read_lat_* | write_lat_* | fsync_lat_* | discard_lat_*) k=op_lat_${k#*_lat_} ;;
	*_hist) k=op_hist ;;
	esac
	in_man "$CFS_WORK/chunkfs.txt" "$k" || missing+=("chunkfs(8): statistic $k")
done
for k in $(chunkfs stat --prom "$mnt" | sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p'); do
	in_man "$CFS_WORK/chunkfs.txt" "$k" || missing+=("chunkfs(8): Prometheus metric $k")
done
[ ${#missing[@]} -eq 0 ] || cfs_fail "not in the man pages: ${missing[*]}"
cfs_log "man pages name every option, $(wc -w <<<"$keys") statistics and every Prometheus metric"

umount "$mnt"
umount "$ram"
flock -w 60 "$img" true || cfs_fail "the daemon did not release $img within 60 s of umount"
cat "$CFS_WORK/fstab.orig" >/etc/fstab

# ---- the autopkgtest: mount -t fuse.chunkfs / -t chunkfs, fsck, RAM ---------
mkdir -p "$CFS_WORK/autopkgtest"
AUTOPKGTEST_TMP=$CFS_WORK/autopkgtest "$CFS_ROOT/debian/tests/mount" ||
	cfs_fail "debian/tests/mount (autopkgtest) failed against the installed package"

# ---- purge: nothing left behind -------------------------------------------------
dpkg -L chunkfs >"$CFS_WORK/files"
for pid in $(ls /proc | grep -E '^[0-9]+$'); do
	case $(readlink "/proc/$pid/exe" 2>/dev/null) in
	/usr/bin/chunkfs*) cfs_fail "a chunkfs daemon ($pid) still runs after every unmount" ;;
	esac
done
dpkg --purge chunkfs >>"$CFS_WORK/dpkg.log" 2>&1 || { cat "$CFS_WORK/dpkg.log" >&2; cfs_fail "dpkg --purge failed"; }
dpkg -s chunkfs >/dev/null 2>&1 && cfs_fail "dpkg still knows chunkfs after --purge"
left=()
while read -r f; do
	[ "$f" != /. ] || continue
	[ -e "$f" ] || [ -L "$f" ] || continue
	# a directory other packages also own (/usr/bin) stays
	[ -d "$f" ] && [ ! -L "$f" ] && dpkg -S "$f" >/dev/null 2>&1 && continue
	left+=("$f")
done <"$CFS_WORK/files"
[ ${#left[@]} -eq 0 ] || cfs_fail "left after purge: ${left[*]}"
etc=$(find /etc -name '*chunkfs*' 2>/dev/null)
[ -z "$etc" ] || cfs_fail "left in /etc after purge: $etc"
cmp -s /etc/fstab "$CFS_WORK/fstab.orig" || cfs_fail "/etc/fstab differs from before the test"
cfs_log "installed $(wc -l <"$CFS_WORK/files") paths, purged without a trace; $(($(date +%s) - start)) s in all"
