#!/usr/bin/env bash
# stats_cmd.sh — `chunkfs stat` against a known workload, in each format:
# the table (one row per chunk however many names it is given by, plus the
# mount's "(all)" row; columns and counts), JSON (raw counters exact, rates
# consistent with them), Prometheus text (well-formed exposition, each family
# once, no label twice, values exact), -i/-c interval reports (the
# interval's reads add up to the workload run during them), -z (resets;
# refused for nobody but the others still shown), and a non-root user
# reading a chunk it may read. A single store: JSON names each chunk's store
# and sums them in one "stores" entry; the table and Prometheus show no
# store (stats_pool.sh: a pool).
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_require_cmd python3 getfattr setfattr setpriv

as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
stat_cmd() { "$CFS_BIN/chunkfs" stat "$@"; }
img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
chmod 755 "$CFS_WORK"
cfs_mkfs "$img" 128M
cfs_mount "$img" "$mnt" allow_other
mkdir "$mnt/dbs"
truncate -s 1M "$mnt/dbs/c1"
truncate -s 1M "$mnt/dbs/c2"
ln -s "$mnt/dbs/c1" "$CFS_WORK/rootdbs"
setfattr -n user.chunkfs.pagesize -v 2048 "$mnt/dbs/c1"
cfs_reset "$mnt/dbs/c1"
cfs_reset "$mnt/dbs/c2"
cfs_reset "$mnt"

# the workload: c1 100 writes + 50 reads + 3 fsyncs, c2 10 writes
dd if=/dev/urandom of="$CFS_WORK/rootdbs" bs=4k count=100 oflag=direct conv=notrunc status=none
dd if="$CFS_WORK/rootdbs" of=/dev/null bs=4k count=50 iflag=direct status=none
stats_util fsync "$mnt/dbs/c1" 3
dd if=/dev/urandom of="$mnt/dbs/c2" bs=4k count=10 oflag=direct conv=notrunc status=none

cfs_log "table"
stat_cmd "$mnt" "$CFS_WORK/rootdbs" "$mnt/dbs/c1" >"$CFS_WORK/table" || cfs_fail "chunkfs stat"
cat "$CFS_WORK/table"
head -n 2 "$CFS_WORK/table" | tail -n 1 | grep -q \
	'^chunk *r/s *rMB/s *r_await *r_p99 *w/s *wMB/s *w_await *w_p99 *fsync/s *f_await *inflt *maxq *err *size$' ||
	cfs_fail "table header"
[ "$(grep -c "^$mnt/dbs/c1 " "$CFS_WORK/table")" -eq 1 ] || cfs_fail "c1 not exactly once"
[ "$(grep -c "^$mnt/dbs/c2 " "$CFS_WORK/table")" -eq 1 ] || cfs_fail "c2 not exactly once"
[ "$(grep -c "^$mnt (all) " "$CFS_WORK/table")" -eq 1 ] || cfs_fail "no (all) row"
[ "$(grep -c "rootdbs" "$CFS_WORK/table")" -eq 0 ] || cfs_fail "the symlink got its own row"
[ "$(awk -v c="$mnt/dbs/c1" '$1 == c { print $NF }' "$CFS_WORK/table")" = 1.0M ] ||
	cfs_fail "c1 size column"
# only the symlink: its own name, one row
stat_cmd "$CFS_WORK/rootdbs" "$mnt/dbs/c1" >"$CFS_WORK/table2"
[ "$(grep -c "^$CFS_WORK/rootdbs " "$CFS_WORK/table2")" -eq 1 ] && [ "$(wc -l <"$CFS_WORK/table2")" -eq 4 ] ||
	cfs_fail "symlink + path: $(cat "$CFS_WORK/table2")"

cfs_log "JSON: raw counters"
stat_cmd --json "$mnt" >"$CFS_WORK/json" || cfs_fail "chunkfs stat --json"
python3 - "$CFS_WORK/json" "$mnt" <<'EOF' || cfs_fail "JSON: $(cat "$CFS_WORK/json")"
import json, sys
j = json.load(open(sys.argv[1]))
mnt = sys.argv[2]
t = {x["path"]: x for x in j["targets"]}
c1, c2, all_ = t[mnt + "/dbs/c1"], t[mnt + "/dbs/c2"], t[mnt]
assert j["since_reset"] is True
assert c1["kind"] == "chunk" and all_["kind"] == "mount" and c1["mount"] == mnt
k = c1["counters"]
assert (k["writes"], k["write_bytes"], k["reads"], k["read_bytes"]) == (100, 409600, 50, 204800), k
assert (k["page_writes"], k["page_reads"], k["pagesize"], k["fsyncs"]) == (200, 100, 2048, 3), k
assert k["read_lat_count"] == 50 and k["errors"] == 0 and k["size"] == 1048576, k
assert isinstance(k["reset_time"], float) and k["time"] >= k["reset_time"]
assert c2["counters"]["writes"] == 10 and c2["counters"]["reads"] == 0
a = all_["counters"]
assert a["writes"] == 110 and a["reads"] == 50 and a["fsyncs"] == 3, a
assert a["backend"] == "uring" and isinstance(a["source"], str) and a["source"].endswith("store.img")
# a single store: each chunk's store (unlabelled: its index), one sum of them
assert c1["store"] == "0" and c2["store"] == "0", (c1["store"], c2["store"])
assert [(s["label"], s["chunks"]) for s in all_["stores"]] == [("0", 2)], all_["stores"]
s = all_["stores"][0]["counters"]
assert (s["writes"], s["reads"], s["size"]) == (110, 50, 2 * 1048576), s
assert "pagesize" not in s and "read_lat_p99_us" not in s, s
r = c1["rates"]
assert abs(r["r_s"] * r["seconds"] - 50) < 0.5, r
assert abs(r["w_s"] * r["seconds"] - 100) < 0.5, r
assert abs(r["r_await_ms"] - k["read_lat_sum_us"] / 50 / 1000) < 0.01, r
EOF

cfs_log "Prometheus text"
stats_prom "$CFS_WORK/prom" "$mnt"
python3 - "$CFS_WORK/prom" "$mnt" <<'EOF' || cfs_fail "Prometheus: $(head -n 40 "$CFS_WORK/prom.txt")"
import json, os, sys
sys.path.insert(0, os.environ["CFS_ROOT"] + "/tests/integration")
from stats_util import prom_one
p = json.load(open(sys.argv[1]))
mnt = sys.argv[2]
types = p["types"]
assert types["chunkfs_reads_total"] == "counter"
assert types["chunkfs_read_latency_seconds"] == "summary"
assert types["chunkfs_inflight"] == "gauge"
def v(name, path, kind="chunk", **extra):
    return prom_one(p, name, path=path, kind=kind, mount=mnt, **extra)
c1 = mnt + "/dbs/c1"
assert v("chunkfs_reads_total", c1) == 50
assert v("chunkfs_writes_total", c1) == 100
assert v("chunkfs_page_writes_total", c1) == 200
assert v("chunkfs_fsyncs_total", c1) == 3
assert v("chunkfs_read_latency_seconds_count", c1) == 50
assert v("chunkfs_read_latency_seconds", c1, quantile="0.99") > 0
assert v("chunkfs_errors_total", c1, error="eio") == 0
assert v("chunkfs_writes_total", mnt, "mount") == 110
assert any(n == "chunkfs_info" and l.get("backend") == "uring" for n, l, _ in p["samples"]), "info"
# a single store: no store label, no per-store series
assert not any("store" in l or n.startswith("chunkfs_store_c") for n, l, _ in p["samples"])
EOF

cfs_log "-i 1 -c 4: interval reports"
# 200 reads right after the first report (waited for: a sanitized build on a
# busy machine takes more than a second to print it); three 1 s intervals
# leave a busy machine time to finish them before the last
stat_cmd -i 1 -c 4 --json "$mnt/dbs/c2" >"$CFS_WORK/intervals" &
sp=$!
for ((i = 0; i < 300; i++)); do
	[ -s "$CFS_WORK/intervals" ] && break
	sleep 0.05
done
[ -s "$CFS_WORK/intervals" ] || cfs_fail "chunkfs stat -i printed no first report in 15 s"
dd if="$mnt/dbs/c2" of=/dev/null bs=4k count=200 iflag=direct status=none
wait $sp || cfs_fail "chunkfs stat -i"
python3 - "$CFS_WORK/intervals" <<'EOF' || cfs_fail "intervals: $(cat "$CFS_WORK/intervals")"
import json, sys
reports = [json.loads(l) for l in open(sys.argv[1])]
assert len(reports) == 4, len(reports)
assert reports[0]["since_reset"] and not reports[1]["since_reset"]
reads = [r["targets"][0]["counters"]["reads"] for r in reports]
assert reads[3] - reads[0] == 200, reads
moved = sum(r["targets"][0]["rates"]["r_s"] * r["targets"][0]["rates"]["seconds"] for r in reports[1:])
assert abs(moved - 200) < 1, moved
for r in reports[1:]:
    assert 0.5 < r["targets"][0]["rates"]["seconds"] < 3, r
EOF
stat_cmd -i 0.2 -c 2 "$mnt/dbs/c2" | grep -c interval | grep -qx 1 || cfs_fail "table interval header"

cfs_log "a non-root user reads what it may read"
chmod 644 "$mnt/dbs/c1"
as_nobody "$CFS_BIN/chunkfs" stat "$mnt/dbs/c1" >"$CFS_WORK/nobody" || cfs_fail "nobody: chunkfs stat"
grep -q "^$mnt/dbs/c1 " "$CFS_WORK/nobody" || cfs_fail "nobody's table: $(cat "$CFS_WORK/nobody")"
chmod 600 "$mnt/dbs/c2"
set +e
as_nobody "$CFS_BIN/chunkfs" stat "$mnt/dbs/c2" >/dev/null 2>"$CFS_WORK/err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q 'Permission denied' "$CFS_WORK/err" || cfs_fail "0600 chunk as nobody: rc $rc $(cat "$CFS_WORK/err")"

cfs_log "-z"
set +e
as_nobody "$CFS_BIN/chunkfs" stat -z "$mnt/dbs/c1" >"$CFS_WORK/z" 2>"$CFS_WORK/err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q 'cannot reset' "$CFS_WORK/err" && grep -q "^$mnt/dbs/c1 " "$CFS_WORK/z" ||
	cfs_fail "-z as nobody: rc $rc $(cat "$CFS_WORK/err")"
cfs_expect "$mnt/dbs/c1" writes 100
stat_cmd -z "$mnt" >/dev/null || cfs_fail "chunkfs stat -z"
cfs_expect "$mnt/dbs/c1" writes 0
cfs_expect "$mnt/dbs/c2" reads 0
cfs_expect "$mnt" writes 0

cfs_log "table: columns aligned whatever the names"
# Longer than the column (a PostgreSQL tablespace's pg_filenode.map), not
# ASCII, and with a newline: every row as wide as the header, in characters.
python3 - "$mnt/dbs" <<'EOF' || cfs_fail "long names"
import os, sys
d = os.path.join(sys.argv[1], "pg_tblspc/16384/PG_15_202209061/16385/pg_internal_dir")
os.makedirs(d)
for name in ("pg_filenode.map", "pg_internal.init"):
    with open(os.path.join(d, name), "wb") as f:
        f.write(b"x" * 8192)
for name in ("donn\u00e9es_\u00e9t\u00e9_\u65e5\u672c", "two\nlines"):
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(b"y" * 4096)
EOF
stat_cmd "$mnt" >"$CFS_WORK/table3" || cfs_fail "chunkfs stat (long names)"
cat "$CFS_WORK/table3"
python3 - "$CFS_WORK/table3" <<'EOF' || cfs_fail "columns not aligned"
import sys
rows = [l for l in open(sys.argv[1], encoding="utf-8").read().split("\n")[1:] if l]
header = rows[0]
assert header.startswith("chunk "), header
for row in rows[1:]:
    assert len(row) == len(header), "row %r: %d characters, header %d" % (row, len(row), len(header))
long_rows = [r for r in rows if "pg_filenode.map" in r or "pg_internal.init" in r]
assert len(long_rows) == 2 and all(r.startswith("...") for r in long_rows), long_rows
assert any("\u65e5\u672c" in r for r in rows), "the UTF-8 name"
assert any("two?lines" in r for r in rows), "the newline shown as ?"
print("%d rows, all %d characters wide" % (len(rows), len(header)))
EOF

cfs_log "usage"
set +e
stat_cmd -c 3 "$mnt" >/dev/null 2>&1; [ $? -eq 1 ] || cfs_fail "-c without -i"
stat_cmd -i 0 "$mnt" >/dev/null 2>&1; [ $? -eq 1 ] || cfs_fail "-i 0"
stat_cmd --bogus >/dev/null 2>&1; [ $? -eq 1 ] || cfs_fail "unknown option"
stat_cmd /etc/hostname >/dev/null 2>&1; [ $? -eq 2 ] || cfs_fail "a file not on chunkfs"
set -e

# Every mount, one of them dead (its daemon killed, the mount left): the
# live ones reported, the dead one named, exit 2.
cfs_log "all mounts, one dead"
cfs_mkfs "$CFS_WORK/dead.img" 64M
cfs_mount "$CFS_WORK/dead.img" "$CFS_WORK/dead"
echo x >"$CFS_WORK/dead/f"
cfs_crash "$CFS_WORK/dead"
rc=0
stat_cmd >"$CFS_WORK/all" 2>"$CFS_WORK/all.err" || rc=$?
cfs_clear_mount "$CFS_WORK/dead"
cat "$CFS_WORK/all.err"
[ $rc -eq 2 ] || cfs_fail "chunkfs stat with a dead mount: exit $rc, not 2"
grep -qF "$CFS_WORK/dead: Transport endpoint is not connected (its daemon is gone: umount it)" \
	"$CFS_WORK/all.err" || cfs_fail "the dead mount is not named"
grep -qF "$mnt/dbs/c2" "$CFS_WORK/all" || cfs_fail "the live mount is not listed"
stats_all "$CFS_WORK/all" "$mnt/dbs/c1" "$mnt/dbs/c2"
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"

