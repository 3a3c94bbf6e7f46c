#!/usr/bin/env bash
# stats_pool.sh — `chunkfs stat` on a pool of two stores (fs/POOLS.md,
# "Statistics"): the root's store_bytes is the sum of the stores' sizes; the
# table has a store column and, before the "(all)" row, one row per store
# summing its chunks; JSON names each chunk's store and sums them in the
# mount's "stores"; Prometheus labels each chunk series with its store and
# adds chunkfs_store_* series. Every sum is checked against the chunk rows of
# the same report, and against the known workload. A chunk half moved
# (paused) is summed under both its labels, as it shows them.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_require_cmd python3 getfattr setfattr

stat_cmd() { "$CFS_BIN/chunkfs" stat "$@"; }
s0=$CFS_WORK/ssd0.img s1=$CFS_WORK/hdd0.img mnt=$CFS_WORK/mnt
cfs_mkfs "$s0" 256M -L ssd0
"$CFS_BIN/mkchunkfs" -q -s 128M --sparse -L hdd0 --join "$s0" "$s1" || cfs_fail "join of hdd0"
cfs_mount "$s0,$s1" "$mnt"

cfs_log "store_bytes: the sum of the stores' sizes"
stores=$(getfattr --absolute-names --only-values -n user.chunkfs.stores "$mnt")
sizes=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^size=/) { sub("size=", "", $i); t += $i } } END { print t }' <<<"$stores")
[ "$sizes" -eq $(((256 + 128) << 20)) ] || cfs_fail "the stores' sizes add up to $sizes: $stores"
cfs_expect "$mnt" store_bytes "$sizes"

# the workload: fast/c1 on ssd0 30 writes + 10 reads; slow/c2 on hdd0 20
# writes + 5 reads + 2 fsyncs; slow/c3 on hdd0 1 MiB with 3 writes
mkdir "$mnt/fast" "$mnt/slow"
setfattr -n user.chunkfs.store -v ssd0 "$mnt/fast"
setfattr -n user.chunkfs.store -v hdd0 "$mnt/slow"
dd if=/dev/urandom of="$mnt/fast/c1" bs=4k count=30 oflag=direct status=none
dd if="$mnt/fast/c1" of=/dev/null bs=4k count=10 iflag=direct status=none
dd if=/dev/urandom of="$mnt/slow/c2" bs=4k count=20 oflag=direct status=none
dd if="$mnt/slow/c2" of=/dev/null bs=4k count=5 iflag=direct status=none
stats_util fsync "$mnt/slow/c2" 2
truncate -s 1M "$mnt/slow/c3"
dd if=/dev/urandom of="$mnt/slow/c3" bs=4k count=3 oflag=direct conv=notrunc status=none
for c in fast/c1:ssd0 slow/c2:hdd0 slow/c3:hdd0; do
	[ "$(getfattr --absolute-names --only-values -n user.chunkfs.store "$mnt/${c%:*}")" = "${c#*:}" ] ||
		cfs_fail "${c%:*} is not on ${c#*:}"
done

cfs_log "table: store column, a row per store before (all)"
stat_cmd "$mnt" >"$CFS_WORK/table" || cfs_fail "chunkfs stat"
cat "$CFS_WORK/table"
python3 - "$CFS_WORK/table" "$mnt" <<'EOF' || cfs_fail "table"
import re, sys
lines = [l for l in open(sys.argv[1]).read().split("\n")[1:] if l]
mnt = sys.argv[2]
header = lines[0].split()
assert header[:3] == ["chunk", "store", "r/s"], header
col = {name: i - 1 for i, name in enumerate(header)}  # after the name: store is 0
for l in lines[1:]:
    assert len(l) == len(lines[0]), "not aligned: %r" % l
chunks, sums, order = {}, {}, []
for l in lines[1:]:
    m = re.match(r"^(\S+) \((\d+) chunks?\) +(\S+) +(.*)$", l)
    if m:
        sums[m.group(3)] = (int(m.group(2)), m.group(4).split())
        order.append("sum")
        continue
    m = re.match(r"^(\S+) \(all\) +(\S+) +(.*)$", l)
    if m:
        assert m.group(1) == mnt and m.group(2) == "-", l
        order.append("all")
        continue
    f = l.split()
    chunks[f[0][len(mnt) + 1:]] = (f[1], f[2:])
    order.append("chunk")
assert order == ["chunk"] * 3 + ["sum"] * 2 + ["all"], order
assert {c: s for c, (s, _) in chunks.items()} == {"fast/c1": "ssd0", "slow/c2": "hdd0", "slow/c3": "hdd0"}, chunks
assert list(sums) == ["ssd0", "hdd0"] and sums["ssd0"][0] == 1 and sums["hdd0"][0] == 2, sums
for store, (n, f) in sums.items():
    mine = [v for s, v in chunks.values() if s == store]
    for c in ("r/s", "w/s", "fsync/s", "inflt", "err"):
        total = sum(float(v[col[c] - 1]) for v in mine)
        assert abs(float(f[col[c] - 1]) - total) <= 0.05 * n + 0.01, (store, c, f, total)
    for c in ("r_p99", "w_p99", "maxq"):
        assert f[col[c] - 1] == "-", (store, c, f)
assert sums["hdd0"][1][col["size"] - 1] == "1.1M", sums["hdd0"]
print("store rows:", sums)
EOF

cfs_log "table: chunks named one by one get the column, not the sums"
stat_cmd "$mnt/slow/c2" >"$CFS_WORK/named" || cfs_fail "chunkfs stat CHUNK"
grep -q '^chunk  *store  *r/s' "$CFS_WORK/named" && grep -q "^$mnt/slow/c2  *hdd0 " "$CFS_WORK/named" &&
	[ "$(wc -l <"$CFS_WORK/named")" -eq 4 ] || cfs_fail "a named chunk: $(cat "$CFS_WORK/named")"
stat_cmd -i 0.2 -c 2 "$mnt" >"$CFS_WORK/intervals" || cfs_fail "chunkfs stat -i"
[ "$(grep -c "^$mnt (2 chunks) *hdd0 " "$CFS_WORK/intervals")" -eq 2 ] ||
	cfs_fail "the store rows of interval reports: $(cat "$CFS_WORK/intervals")"

cfs_log "JSON: store and stores"
stat_cmd --json "$mnt" >"$CFS_WORK/json" || cfs_fail "chunkfs stat --json"
python3 - "$CFS_WORK/json" "$mnt" <<'EOF' || cfs_fail "JSON: $(cat "$CFS_WORK/json")"
import json, sys
j = json.load(open(sys.argv[1]))
mnt = sys.argv[2]
t = {x["path"]: x for x in j["targets"]}
chunks = [x for x in j["targets"] if x["kind"] == "chunk"]
assert {x["path"][len(mnt) + 1:]: x["store"] for x in chunks} == \
    {"fast/c1": "ssd0", "slow/c2": "hdd0", "slow/c3": "hdd0"}, chunks
assert "store" not in t[mnt]
stores = t[mnt]["stores"]
assert [(s["label"], s["chunks"]) for s in stores] == [("ssd0", 1), ("hdd0", 2)], stores
for s in stores:
    mine = [x["counters"] for x in chunks if x["store"] == s["label"]]
    for k in ("reads", "read_bytes", "writes", "write_bytes", "fsyncs", "size", "opens_total",
              "write_lat_count", "write_lat_sum_us", "errors", "err_eio"):
        assert s["counters"][k] == sum(c[k] for c in mine), (s["label"], k, s["counters"][k])
    for k in ("pagesize", "time", "reset_time", "inflight_max", "write_lat_p99_us", "write_lat_max_us"):
        assert k not in s["counters"], (s["label"], k)
    r = s["rates"]
    assert r["seconds"] is None and r["r_p99_ms"] is None and r["w_p99_ms"] is None, r
    assert abs(r["w_s"] - sum(x["rates"]["w_s"] for x in chunks if x["store"] == s["label"])) < 0.01, r
    n = s["counters"]["write_lat_count"]
    assert abs(r["w_await_ms"] - s["counters"]["write_lat_sum_us"] / n / 1000) < 0.002, r
ssd, hdd = stores[0]["counters"], stores[1]["counters"]
assert (ssd["writes"], ssd["reads"], ssd["fsyncs"], ssd["write_bytes"]) == (30, 10, 0, 30 * 4096), ssd
assert (hdd["writes"], hdd["reads"], hdd["fsyncs"], hdd["read_bytes"]) == (23, 5, 2, 5 * 4096), hdd
assert hdd["size"] == 20 * 4096 + 1048576, hdd
assert t[mnt]["counters"]["store_bytes"] == (256 + 128) << 20, t[mnt]["counters"]
EOF

cfs_log "Prometheus: store label and chunkfs_store_* series"
stats_prom "$CFS_WORK/prom" "$mnt"
python3 - "$CFS_WORK/prom" "$mnt" <<'EOF' || cfs_fail "Prometheus: $(grep chunkfs_store "$CFS_WORK/prom.txt" | head -n 40)"
import json, os, sys
sys.path.insert(0, os.environ["CFS_ROOT"] + "/tests/integration")
from stats_util import prom_one
p = json.load(open(sys.argv[1]))
mnt = sys.argv[2]
types, samples = p["types"], p["samples"]
def one(name, **labels):
    return prom_one(p, name, **labels)
def chunk(name, c, store, **extra):
    return one(name, path=mnt + "/" + c, kind="chunk", mount=mnt, store=store, **extra)
def store(name, label, **extra):
    return one(name, mount=mnt, store=label, **extra)
assert chunk("chunkfs_writes_total", "fast/c1", "ssd0") == 30
assert chunk("chunkfs_writes_total", "slow/c3", "hdd0") == 3
assert chunk("chunkfs_errors_total", "slow/c2", "hdd0", error="eio") == 0
assert one("chunkfs_writes_total", path=mnt, kind="mount", mount=mnt) == 53
assert one("chunkfs_store_bytes", path=mnt, kind="mount", mount=mnt) == (256 + 128) << 20
assert store("chunkfs_store_chunks", "ssd0") == 1 and store("chunkfs_store_chunks", "hdd0") == 2
assert types["chunkfs_store_writes_total"] == "counter"
assert types["chunkfs_store_write_latency_seconds"] == "summary"
assert types["chunkfs_store_size_bytes"] == "gauge"
for label, cs in (("ssd0", ["fast/c1"]), ("hdd0", ["slow/c2", "slow/c3"])):
    for name in ("chunkfs_writes_total", "chunkfs_write_bytes_total", "chunkfs_reads_total",
                 "chunkfs_fsyncs_total", "chunkfs_size_bytes", "chunkfs_opens_total",
                 "chunkfs_write_latency_seconds_count", "chunkfs_write_latency_seconds_sum"):
        want = sum(chunk(name, c, label) for c in cs)
        got = store(name.replace("chunkfs_", "chunkfs_store_", 1), label)
        assert abs(got - want) < 1e-5, (name, label, got, want)
    assert store("chunkfs_store_errors_total", label, error="enospc") == 0
assert store("chunkfs_store_writes_total", "hdd0") == 23
assert not any(n.startswith("chunkfs_store_") and "quantile" in l for n, l, _ in samples)
assert not any(n in ("chunkfs_store_page_size_bytes", "chunkfs_store_inflight_max",
                     "chunkfs_store_reset_time_seconds") for n, _, _ in samples)
EOF

cfs_log "a chunk half moved: summed under both its labels"
dd if=/dev/urandom of="$mnt/fast/c4" bs=1M count=16 oflag=direct status=none
setfattr -n user.chunkfs.move -v "to=hdd0 rate=2M" "$mnt/fast/c4"
for ((i = 0; i < 200; i++)); do
	[ "$(getfattr --absolute-names --only-values -n user.chunkfs.store "$mnt/fast/c4")" = ssd0,hdd0 ] && break
	sleep 0.05
done
setfattr -n user.chunkfs.move -v pause "$mnt/fast/c4"
[ "$(getfattr --absolute-names --only-values -n user.chunkfs.store "$mnt/fast/c4")" = ssd0,hdd0 ] ||
	cfs_fail "c4 is not half moved: $(getfattr --absolute-names --only-values -n user.chunkfs.move "$mnt/fast/c4")"
stat_cmd "$mnt" >"$CFS_WORK/table2" || cfs_fail "chunkfs stat (a move)"
cat "$CFS_WORK/table2"
grep -q "^$mnt/fast/c4  *ssd0,hdd0 " "$CFS_WORK/table2" &&
	grep -q "^$mnt (1 chunk)  *ssd0,hdd0 " "$CFS_WORK/table2" &&
	grep -q "^$mnt (1 chunk)  *ssd0 " "$CFS_WORK/table2" ||
	cfs_fail "the half-moved chunk's rows"
stat_cmd --json "$mnt" >"$CFS_WORK/json2" || cfs_fail "chunkfs stat --json (a move)"
python3 - "$CFS_WORK/json2" "$mnt" <<'EOF' || cfs_fail "JSON during a move: $(cat "$CFS_WORK/json2")"
import json, sys
j = json.load(open(sys.argv[1]))
m = [x for x in j["targets"] if x["path"] == sys.argv[2]][0]
got = [(s["label"], s["chunks"], s["counters"]["size"]) for s in m["stores"]]
assert got == [("ssd0", 1, 30 * 4096), ("hdd0", 2, 20 * 4096 + 1048576), ("ssd0,hdd0", 1, 16 << 20)], got
EOF
cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"
