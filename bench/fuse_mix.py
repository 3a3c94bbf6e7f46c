#!/usr/bin/env python3
"""bench/fuse_mix.py PERF_SCRIPT_OUTPUT CONNECTION [TRANSACTIONS]

What the kernel asked one FUSE mount during a load, from the kernel's own
tracepoints (fuse:fuse_request_send and fuse:fuse_request_end, recorded with
`perf record -a` and printed by `perf script`): per opcode, the number of
requests (and per transaction, given the number of transactions), their
latency from send to end (the daemon's service time plus the queueing in
/dev/fuse: medians, 99th percentiles and their sum, the time callers spent
waiting for that opcode), and for WRITE the payload sizes
(len is the request's length: header plus data) in classes: under 4 KiB,
4 KiB, 4 KiB-1 MiB, 1 MiB or more, each with its own count and latency.

CONNECTION is the mount's connection id as the tracepoint prints it: the
kernel's dev_t of the mount (major << 20 | minor of stat -c '%Hd %Ld').
Nothing here changes the daemon: the counts come from the kernel.
"""
import re
import statistics
import sys

SEND = re.compile(r"\s(\d+\.\d+):\s+fuse:fuse_request_send:\s+connection (\d+) req (\d+) "
                  r"opcode \d+ \((\w+)\) len (\d+)")
END = re.compile(r"\s(\d+\.\d+):\s+fuse:fuse_request_end:\s+connection (\d+) req (\d+) ")
# the FUSE header before a WRITE's payload (struct fuse_in_header + fuse_write_in)
WRITE_HDR = 40 + 40


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * q))] if v else 0.0


def main():
    path, conn = sys.argv[1], int(sys.argv[2])
    tx = float(sys.argv[3]) if len(sys.argv) > 3 and float(sys.argv[3]) > 0 else None
    sent = {}
    count, lat, wsize = {}, {}, {"<4K": 0, "4K": 0, "4K-1M": 0, ">=1M": 0}
    wbytes = 0
    with open(path, errors="replace") as f:
        for line in f:
            m = SEND.search(line)
            if m:
                if int(m.group(2)) != conn:
                    continue
                t, unique, op, ln = float(m.group(1)), m.group(3), m.group(4), int(m.group(5))
                op = op.replace("FUSE_", "")
                count[op] = count.get(op, 0) + 1
                sent[unique] = (t, op)
                if op == "WRITE":
                    n = max(0, ln - WRITE_HDR)
                    wbytes += n
                    cls = ("<4K" if n < 4096 else "4K" if n == 4096 else
                           "4K-1M" if n < 1 << 20 else ">=1M")
                    wsize[cls] += 1
                    sent[unique] = (t, "WRITE " + cls)
                continue
            m = END.search(line)
            if m and int(m.group(2)) == conn and m.group(3) in sent:
                t0, op0 = sent.pop(m.group(3))
                lat.setdefault(op0, []).append((float(m.group(1)) - t0) * 1e6)
    total = sum(count.values())
    print("%-12s %9s %9s %10s %10s %10s" % ("opcode", "requests", "per tx" if tx else "", "p50 us", "p99 us",
                                           "sum ms"))
    for op, n in sorted(count.items(), key=lambda kv: -kv[1]):
        lv = lat.get(op, []) if op != "WRITE" else [x for k, v in lat.items() if k.startswith("WRITE ")
                                                      for x in v]
        print("%-12s %9d %9s %10.1f %10.1f %10.1f" % (op, n, "%.2f" % (n / tx) if tx else "",
                                                     statistics.median(lv) if lv else 0, pct(lv, 0.99),
                                                     sum(lv) / 1000))
    print("%-12s %9d %9s" % ("all", total, "%.2f" % (total / tx) if tx else ""))
    for cls in wsize:
        lv = lat.get("WRITE " + cls, [])
        if lv:
            print("  %-10s %9d %9s %10.1f %10.1f %10.1f" % (cls, wsize[cls], "%.2f" % (wsize[cls] / tx) if tx else "",
                                                          statistics.median(lv), pct(lv, 0.99), sum(lv) / 1000))
    if count.get("WRITE"):
        print("WRITE payloads: " + ", ".join("%s %d (%.0f%%)" % (k, v, 100.0 * v / count["WRITE"])
                                            for k, v in wsize.items()) +
              "; %.1f KiB average" % (wbytes / count["WRITE"] / 1024))


if __name__ == "__main__":
    main()
