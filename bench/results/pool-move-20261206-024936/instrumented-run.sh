#!/bin/bash
# quick mover experiment: KICK values given as args, alternated with dd, N reps
set -e
B=${B:-/work/wt/mvprof/build/release}
W=/var/tmp/mvx
N=${N:-3}
cd $W
umount $W/mnt 2>/dev/null || true
rm -f st0.img st1.img daemon-*.log; mkdir -p mnt
sz=$((2048*1048576 + 1024*1048576))
$B/mkchunkfs -q -s $sz -L st0 st0.img >/dev/null
$B/mkchunkfs -q -s $sz -L st1 --join st0.img st1.img >/dev/null
pid=
mountit() { local nd=; [[ $1 == *nd ]] && nd=1; env ${nd:+CFS_NODISCARD=1} CFS_MOVE_KICK_EVERY=${1%nd} $B/chunkfs -f st0.img,st1.img mnt >> $W/daemon-$1.log 2>&1 & pid=$!; for i in $(seq 100); do mountpoint -q mnt && return; sleep 0.1; done; echo mount failed; exit 1; }
umountit() { umount mnt; wait $pid || true; }
mountit 1
mkdir mnt/m; setfattr -n user.chunkfs.store -v st0 mnt/m
fio --name=fill --filename=mnt/m/chunk --size=2G --rw=write --bs=1M --direct=1 --ioengine=io_uring --iodepth=8 --output=/dev/null
[ -f ddsrc ] || fio --name=f --filename=ddsrc --size=2G --rw=write --bs=1M --direct=1 --ioengine=io_uring --iodepth=8 --output=/dev/null
[ -f dddst ] || cp ddsrc dddst
to=st1
for r in $(seq $N); do
 t0=$(date +%s.%N); dd if=ddsrc of=dddst bs=1M iflag=direct oflag=direct conv=notrunc,fsync status=none; t1=$(date +%s.%N)
 echo "rep $r dd: $(awk "BEGIN{print 2147.483648/($t1-$t0)}") MB/s"
 for k in "$@"; do
  umountit
  mountit $k
  t0=$(date +%s.%N)
  $B/chunkfs move $W/mnt/m/chunk $to >/dev/null
  t1=$(date +%s.%N)
  echo "rep $r kick $k to $to: $(awk "BEGIN{print 2147.483648/($t1-$t0)}") MB/s; $(getfattr --only-values -n user.chunkfs.move mnt/m/chunk)"
  [ $to = st1 ] && to=st0 || to=st1
 done
done
umountit
grep -h MVPROF $W/daemon-*.log
