#!/usr/bin/env bash
# nbd_swap.sh - the swap workload (nbd-memtouch: fill then check 768 MiB in
# a 256 MiB memory cgroup, sequential and random order) swapping to:
#   nvswapd       through nbdfuse + a direct-I/O loop device
#   nbdkit        nbdkit memory (allocator=malloc), the same nbdfuse + loop path
#   ext4          a swap file on the local ext4 disk (/var/tmp)
# Anchors (FACTS/brief): nbdkit ~24 s, ext4 swap ~13-15 s sequential.
# Then where the time goes in the FUSE hop: 4 KiB random reads at iodepth 1
# (the shape of a swap-in fault) timed at each layer of the nvswapd path:
# the loop device, the nbdfuse file, and NBD straight to nvswapd.
#
#   NBDS_MIB=768  NBDS_LIMIT=256M
T_TIMEOUT=${T_TIMEOUT:-1500}
. "$(dirname "$0")/../system/lib.sh"
. "$(dirname "$0")/../system/nbd_common.bash"
t_require_root
t_require_cmd nbdfuse nbdkit losetup mkswap swapon swapoff fusermount3 fio python3
mib=${NBDS_MIB:-768}
limit=${NBDS_LIMIT:-256M}
touch_bin=$(t_bin nbd-memtouch)
t_is_sanitized "$(t_bin nvswapd)" && t_skip "sanitizer build: no swap to it"
[ -z "$(swapon --noheadings --show)" ] || t_skip "another swap is active"
cgroot=/sys/fs/cgroup/memory
cg=$cgroot/nvbench-nbd-swap-$$
mkdir "$cg" || t_skip "no cgroup v1 memory controller"
t_cleanup "for p in \$(cat $cg/cgroup.procs); do kill -9 \$p; done; sleep 0.2; rmdir $cg"
echo "$limit" >"$cg/memory.limit_in_bytes"

declare -A secs
workload() {  # workload TARGET -> fills secs[TARGET,seq|rand]
  local o out s
  for o in seq rand; do
    s=$(date +%s.%N)
    out=$(sh -c "echo \$\$ > $cg/cgroup.procs; exec $touch_bin $mib $o 3" 2>&1) ||
      { echo "$1 $o FAILED: $out"; secs[$1,$o]=0; continue; }
    secs[$1,$o]=$(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    echo "$1 $o: ${secs[$1,$o]} s ($out)"
  done
}

# nbd_swap_on SOCK -> mnt, dev, fpid
nbd_swap_on() {
  mnt=$T_DIR/fuse-$RANDOM
  mkdir "$mnt"
  nbdfuse "$mnt" --unix "$1" >/dev/null 2>&1 &
  fpid=$!
  t_cleanup "fusermount3 -u $mnt 2>/dev/null; kill $fpid 2>/dev/null"
  t_wait 10 test -f "$mnt/nbd" || t_fail "nbdfuse"
  dev=$(losetup -f --show --direct-io=on "$mnt/nbd") || t_fail losetup
  t_cleanup "swapoff $dev 2>/dev/null; losetup -d $dev 2>/dev/null"
  mkswap "$dev" >/dev/null && swapon --discard=pages "$dev" || t_fail swapon
}
nbd_swap_off() {
  swapoff "$dev"; losetup -d "$dev"; fusermount3 -u "$mnt"; wait "$fpid" 2>/dev/null
}

# clat_us ARGS... : mean completion latency (µs) of a 4 KiB randread job.
clat_us() {
  fio --name=l --rw=randread --bs=4k --iodepth=1 --time_based --runtime=3 \
      --size=512M --output-format=json --output="$T_DIR/l.json" "$@" >/dev/null 2>&1 || { echo 0; return; }
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]["read"]; print("%.1f" % (j["clat_ns"]["mean"]/1000))' "$T_DIR/l.json"
}

# 1. nvswapd
sock=$T_DIR/nv.sock
nbd_start "$sock" bswap --size 1G
nbd_swap_on "$sock"
workload nvswapd
w=$(nbd_stat bswap nbd_writes) wb=$(nbd_stat bswap nbd_bytes_written)
r=$(nbd_stat bswap nbd_reads) rb=$(nbd_stat bswap nbd_bytes_read)
echo "nvswapd saw $w writes (avg $((wb / (w ? w : 1) / 1024)) KiB), $r reads (avg $((rb / (r ? r : 1) / 1024)) KiB), $(nbd_stat bswap nbd_trims) trims"
swapoff "$dev"
# Fill the device so reads below hit real pages.
fio --name=fill --filename="$dev" --rw=write --bs=1m --direct=1 --size=512M >/dev/null 2>&1
loop_us=$(clat_us --filename="$dev" --direct=1 --ioengine=psync)
fuse_us=$(clat_us --filename="$mnt/nbd" --direct=1 --ioengine=psync)
nbd_us=$(clat_us --ioengine=nbd --uri="nbd+unix:///bswap?socket=$sock")
echo "4 KiB random read, iodepth 1: loop device $loop_us us, nbdfuse file $fuse_us us, NBD to nvswapd $nbd_us us"
losetup -d "$dev"; fusermount3 -u "$mnt"; wait "$fpid" 2>/dev/null
kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null

# 2. nbdkit memory through the same path
ksock=$T_DIR/kit.sock
nbdkit -f -U "$ksock" memory size=1G allocator=malloc >/dev/null 2>&1 &
kpid=$!
t_cleanup "kill $kpid 2>/dev/null"
t_wait 10 test -S "$ksock" || t_fail "nbdkit"
nbd_swap_on "$ksock"
workload nbdkit
nbd_swap_off
kill "$kpid"; wait "$kpid" 2>/dev/null

# 3. a swap file on ext4 (/var/tmp)
sf=$T_DIR/swapfile
fallocate -l 1G "$sf" && chmod 600 "$sf" && mkswap "$sf" >/dev/null || t_fail "swap file"
swapon "$sf" || t_fail "swapon $sf"
t_cleanup "swapoff $sf 2>/dev/null"
workload ext4
swapoff "$sf"

for o in seq rand; do
  for base in nbdkit ext4; do
    echo "BENCH nbd_swap_${o}_${mib}m_nvswapd ${secs[nvswapd,$o]} s vs ${base}_swap ${secs[$base,$o]} s ratio $(awk -v a="${secs[nvswapd,$o]}" -v b="${secs[$base,$o]}" 'BEGIN{ if (a>0) printf "%.2f", b/a; else print "n/a" }')"
  done
done
echo "BENCH nbd_swap_seq_${mib}m_nvswapd ${secs[nvswapd,seq]} s vs brief_anchor_nbdkit 24 s ratio $(awk -v a="${secs[nvswapd,seq]}" 'BEGIN{ if (a>0) printf "%.2f", 24/a; else print "n/a"}')"
echo "BENCH nbd_fusehop_randread_4k_loop $loop_us us vs nbd_direct $nbd_us us ratio $(awk -v a="$loop_us" -v b="$nbd_us" 'BEGIN{ if (b>0) printf "%.2f", a/b; else print "n/a"}')"
echo "BENCH nbd_fusehop_randread_4k_nbdfuse_file $fuse_us us vs nbd_direct $nbd_us us ratio $(awk -v a="$fuse_us" -v b="$nbd_us" 'BEGIN{ if (b>0) printf "%.2f", a/b; else print "n/a"}')"
exit 0
