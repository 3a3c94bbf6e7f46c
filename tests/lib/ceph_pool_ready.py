#!/usr/bin/python3
# ceph_pool_ready.py CONF POOL SECONDS — wait until every placement group of
# POOL serves I/O (tests/lib/ceph.sh, ceph_pool_wait). Exit 0 when they do,
# 1 with the placement groups that did not, after SECONDS.
#
# Why not `ceph pg stat`: placement group states are reported by the
# manager, and the test cluster runs none. So: one object name per placement
# group (the monitor maps names to groups: `osd map`), and a stat of each
# with a short operation timeout. ENOENT is an answer: the group is active.
import json
import sys
import time

import rados

conf, pool, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
deadline = time.monotonic() + seconds
cluster = rados.Rados(conffile=conf)
cluster.conf_set("rados_osd_op_timeout", "2")
cluster.conf_set("rados_mon_op_timeout", "5")
cluster.connect(timeout=10)
try:
    ret, out, err = cluster.mon_command(json.dumps({"prefix": "osd pool get", "pool": pool,
                                                    "var": "pg_num", "format": "json"}), b"")
    if ret:
        sys.exit(f"osd pool get {pool} pg_num: {err}")
    pg_num = json.loads(out)["pg_num"]
    names = {}  # placement group -> an object name that maps to it
    i = 0
    while len(names) < pg_num and i < 64 * pg_num:
        name = f"ready-probe-{i}"
        ret, out, err = cluster.mon_command(json.dumps({"prefix": "osd map", "pool": pool,
                                                        "object": name, "format": "json"}), b"")
        if ret == 0:
            names.setdefault(json.loads(out)["pgid"], name)
        i += 1
    ioctx = cluster.open_ioctx(pool)
    waiting = dict(names)
    while waiting:
        for pg, name in list(waiting.items()):
            try:
                ioctx.stat(name)
                del waiting[pg]
            except rados.ObjectNotFound:
                del waiting[pg]
            except (rados.TimedOut, rados.Error):
                pass
        if waiting and time.monotonic() > deadline:
            sys.exit(f"pool {pool}: placement groups not active after {seconds:.0f} s: "
                     + " ".join(sorted(waiting)))
        if waiting:
            time.sleep(0.2)
finally:
    cluster.shutdown()
