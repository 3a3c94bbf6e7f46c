#!/usr/bin/env bash
# bench/syncwriters.sh — synchronous O_DIRECT writers of one chunk file on
# chunkfs against ext4, on the same disk, in the same run (bench/dbpair.sh):
# fio psync (one pwrite at a time per writer, as Informix without KAIO,
# InnoDB without native AIO, or any threaded engine using plain pwrite),
# 16 KiB random writes into one preallocated and written file, by one writer
# and by four. What four writers gain over one depends on the filesystem
# letting them into the file at the same time. IOPS and the p50 latency of
# each run; each repetition runs both cases on both filesystems, in
# alternating order.
#
# usage: bench/syncwriters.sh [-n reps] [-T seconds] [-F file-size] [-S image-size] [-d dir]
#                             [-o out.csv] [-O chunkfs-opts]
#   -n  repetitions (default 5)       -T  seconds per fio run (default 10)
#   -F  the chunk file's size in MiB (default 512)
#   -S  size of each image (2G)       -d  directory of the images (/var/tmp)
#   -o  long CSV (bench/dbpair.sh; default bench/results/syncwriters-<time>/syncwriters-<time>.csv)
#   -O  extra -o options for chunkfs
# Needs root, fio, mkfs.ext4; make bench-build first.
set -euo pipefail

reps=5 secs=10 file_mib=512 size=2G
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/dbpair.sh"
dbpair_options syncwriters.sh "T:secs F:file_mib" "$@"

export CFS_TEST_TMPDIR=$dir
. "$root/tests/lib/common.sh"
cfs_require_fuse
cfs_require_cmd fio python3
dbpair_start syncwriters
# The chunk, written once in full: no write of a run meets an unwritten
# extent (ext4 would convert it, chunkfs log it).
for fs in ext4 chunkfs; do
	dd if=/dev/zero of="${DBPAIR_DIR[$fs]}/chunk" bs=1M count="$file_mib" oflag=direct status=none ||
		cfs_fail "writing the chunk on $fs"
done
# name writers
cases=("sync16k_1w 1" "sync16k_4w 4")
for ((r = 1; r <= reps; r++)); do
	o=1
	for fs in $(dbpair_order $r); do
		for c in "${cases[@]}"; do
			read -r name jobs <<<"$c"
			fio --name=sync --filename="${DBPAIR_DIR[$fs]}/chunk" --size="${file_mib}M" \
				--direct=1 --rw=randwrite --bs=16k --ioengine=psync --numjobs="$jobs" \
				--group_reporting --time_based --runtime="$secs" --norandommap \
				--randrepeat=0 --output-format=json --output="$CFS_WORK/fio.json" >/dev/null ||
				cfs_fail "fio $name on $fs"
			read -r iops p50 < <(python3 - "$CFS_WORK/fio.json" <<-'PY'
			import json, sys
			text = open(sys.argv[1]).read()
			w = json.loads(text[text.find("{"):])["jobs"][0]["write"]
			print("%.0f %.1f" % (w["iops"], w["clat_ns"]["percentile"]["50.000000"] / 1000))
			PY
			)
			dbpair_row "$out" syncwriters "${name}_iops" iops $r $o "$fs" "$iops"
			dbpair_row "$out" syncwriters "${name}_p50_us" us $r $o "$fs" "$p50"
			printf '# rep %d: %-8s %-11s %8s IOPS, p50 %7s us\n' $r "$fs" "$name" "$iops" "$p50"
		done
		o=$((o + 1))
	done
done
echo "# fio psync, 16 KiB random O_DIRECT writes into one ${file_mib} MiB file, ${secs} s per run"
dbpair_summary "$out"
echo "# CSV: $out"
