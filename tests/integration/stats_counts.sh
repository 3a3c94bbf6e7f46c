#!/usr/bin/env bash
# stats_counts.sh — exact per-chunk counts after a known workload run through
# two different symlinks to one chunk (and a hard link): O_DIRECT dd writes
# through one symlink, dd and fio reads through the other, page counts at a
# 2 KiB page size, opens (direct/buffered, open now), fsyncs, a punch-hole
# discard, a read-modify-write, a short read at the end of the chunk and an
# EOF read. Every name of the chunk shows the same values; the root's
# mount-wide totals match; getfattr -d through a symlink lists the DBA summary;
# the root carries the store's facts.
. "$(dirname "$0")/../lib/common.sh"
. "$CFS_ROOT/tests/lib/stats.sh"
cfs_require_fuse
cfs_require_cmd python3 getfattr setfattr fio fallocate

img=$CFS_WORK/store.img
mnt=$CFS_WORK/mnt
links=$CFS_WORK/links
cfs_mkfs "$img" 256M
cfs_mount "$img" "$mnt"
mkdir -p "$mnt/chunks" "$links"
chunk=$mnt/chunks/rootdbs
truncate -s 4M "$chunk"
ln -s "$chunk" "$links/a"          # the DBA's symlink
ln -s ../mnt/chunks/rootdbs "$links/b" # another, relative
ln "$chunk" "$mnt/chunks/rootdbs.hl"   # and a second name on the mount
a=$links/a
b=$links/b

setfattr -n user.chunkfs.pagesize -v 2048 "$a"
cfs_expect "$b" pagesize 2048
cfs_reset "$a"
cfs_reset "$mnt"
for n in reads writes fsyncs discards opens_total errors rmw; do
	cfs_expect "$b" $n 0
	cfs_expect "$mnt" $n 0
done

cfs_log "256 x 4 KiB O_DIRECT writes through symlink a"
dd if=/dev/urandom of="$a" bs=4k count=256 oflag=direct conv=notrunc status=none
cfs_log "100 x 8 KiB O_DIRECT reads through symlink b"
dd if="$b" of=/dev/null bs=8k count=100 iflag=direct status=none
cfs_log "512 x 4 KiB O_DIRECT random reads at QD8 with fio through symlink a"
fio --name=r --filename="$a" --rw=randread --bs=4k --iodepth=8 --ioengine=io_uring \
	--direct=1 --size=1M --io_size=2M --norandommap --randrepeat=0 \
	--output="$CFS_WORK/fio.txt" || cfs_fail "fio"

cfs_expect "$b" writes 256
cfs_expect "$b" write_bytes $((256 * 4096))
cfs_expect "$b" page_writes 512
cfs_expect "$a" reads 612
cfs_expect "$a" read_bytes $((100 * 8192 + 512 * 4096))
cfs_expect "$a" page_reads $(((100 * 8192 + 512 * 4096) / 2048))
cfs_expect "$a" read_lat_count 612
cfs_expect "$a" write_lat_count 256
cfs_expect "$a" errors 0
cfs_expect "$a" inflight 0
cfs_expect_range "$a" inflight_max 2 64 # fio's QD8 reached the chunk in parallel

cfs_log "opens: 3 direct, 2 buffered, then one of each held"
stats_util opens "$a" 3 "$b" 2 "$CFS_WORK/opens_now"
[ "$(cat "$CFS_WORK/opens_now")" = 2 ] || cfs_fail "opens while two are held: $(cat "$CFS_WORK/opens_now")"
cfs_expect "$a" opens 0
# + dd (2) and fio (at least 1, maybe more) opened it with O_DIRECT before
od=$(cfs_stat "$a" opens_direct)
ob=$(cfs_stat "$a" opens_buffered)
ot=$(cfs_stat "$a" opens_total)
[ "$ob" -eq 3 ] || cfs_fail "opens_buffered $ob, expected 3 (2 + 1 held)"
[ "$od" -ge 7 ] || cfs_fail "opens_direct $od, expected at least 4 + dd 2 + fio 1"
[ "$ot" -eq $((od + ob)) ] || cfs_fail "opens_total $ot != $od + $ob"

cfs_log "5 fsyncs through symlink b"
stats_util fsync "$b" 5
cfs_expect "$a" fsyncs 5
cfs_expect "$a" fsync_lat_count 5
cfs_expect "$a" fsync_errors 0

cfs_log "punch 1 MiB"
fallocate -p -o 1M -l 1M "$a"
cfs_expect "$a" discards 1
cfs_expect "$a" discard_bytes 1048576

cfs_log "one unaligned O_DIRECT write (read-modify-write)"
w0=$(cfs_stat "$a" writes)
printf 'x%.0s' $(seq 100) | dd of="$a" bs=100 seek=7 count=1 oflag=direct conv=notrunc status=none
cfs_expect "$a" writes $((w0 + 1))
cfs_expect "$a" rmw 1

cfs_log "a short O_DIRECT read at the end of the chunk, then one at EOF"
r0=$(cfs_stat "$a" reads)
rb0=$(cfs_stat "$a" read_bytes)
size=$(stat -L -c %s "$a")
[ "$(stats_util pread "$a" $((size - 2048)) 4096)" = 2048 ] || cfs_fail "short read length"
[ "$(stats_util pread "$a" "$size" 4096)" = 0 ] || cfs_fail "EOF read length"
cfs_expect "$a" reads $((r0 + 2))
cfs_expect "$a" read_bytes $((rb0 + 2048))
cfs_expect "$a" short_reads 1
cfs_expect "$a" errors 0
# ... nor in chunkfs stat's err column (RocksDB reads past the end of every
# SST file: a non-zero err under normal use hid the real errors).
"$CFS_BIN/chunkfs" stat "$a" >"$CFS_WORK/table" || cfs_fail "chunkfs stat"
[ "$(awk 'NR == 3 { print $(NF - 1) }' "$CFS_WORK/table")" = 0 ] ||
	cfs_fail "the short read in chunkfs stat's err column: $(cat "$CFS_WORK/table")"

cfs_log "every name of the chunk shows the same line"
line() { getfattr --only-values -n user.chunkfs.stat "$1" | sed 's/ time=[0-9.]*//'; }
l=$(line "$a")
for p in "$b" "$chunk" "$mnt/chunks/rootdbs.hl"; do
	[ "$(line "$p")" = "$l" ] || cfs_fail "$p shows another line than $a"
done

cfs_log "mount-wide totals match (one chunk did all the I/O)"
for n in reads read_bytes writes write_bytes fsyncs discards errors short_reads rmw read_lat_count; do
	cfs_expect "$mnt" $n "$(cfs_stat "$a" $n)"
done
cfs_expect "$mnt" inflight 0

cfs_log "getfattr -d through the symlink: the DBA summary"
getfattr -d "$a" >"$CFS_WORK/dump" 2>/dev/null
cat "$CFS_WORK/dump"
grep -o '^user\.chunkfs\.[a-z0-9_]*' "$CFS_WORK/dump" | sort >"$CFS_WORK/names"
printf 'user.chunkfs.%s\n' pagesize reads read_bytes page_reads read_lat_avg_us read_lat_p99_us \
	writes write_bytes page_writes write_lat_avg_us write_lat_p99_us fsyncs fsync_lat_avg_us \
	opens inflight_max errors reset_time | sort >"$CFS_WORK/want"
diff "$CFS_WORK/want" "$CFS_WORK/names" || cfs_fail "listed names differ"
grep -qx 'user.chunkfs.reads="614"' "$CFS_WORK/dump" || cfs_fail "dump reads"
grep -qx 'user.chunkfs.page_reads="1425"' "$CFS_WORK/dump" || cfs_fail "dump page_reads"

cfs_log "the root: store facts"
cfs_expect "$mnt" source "$img"
cfs_expect "$mnt" backend uring
cfs_expect "$mnt" store_bytes $((256 << 20))
cfs_expect "$mnt" block_bytes 1048576
cfs_expect "$mnt" sector_bytes 512
cfs_expect "$mnt" dio_align_bytes 512
cfs_expect "$mnt" dio_align_enforced 0
cfs_expect "$mnt" readonly 0
free=$(cfs_stat "$mnt" free_bytes)
data=$(cfs_stat "$mnt" data_bytes)
[ "$free" -gt 0 ] && [ "$free" -lt "$data" ] || cfs_fail "free $free of $data"
mt=$(cfs_stat "$mnt" mount_time)
now=$(date +%s)
[ "${mt%.*}" -le "$now" ] && [ "${mt%.*}" -ge $((now - 300)) ] || cfs_fail "mount_time $mt"
getfattr -d "$mnt" 2>/dev/null | grep -q '^user.chunkfs.backend="uring"' || cfs_fail "root dump"
# a subdirectory has no statistics
[ -z "$(stats_util names "$mnt/chunks")" ] || cfs_fail "a subdirectory lists statistics"
stats_util errno get "$mnt/chunks" user.chunkfs.reads - ENODATA

cfs_umount "$mnt" || cfs_fail "unmount"
cfs_log "ok"
