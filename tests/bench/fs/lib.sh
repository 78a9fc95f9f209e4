# lib.sh - sourced by tests/bench/fs_*.sh after tests/system/lib.sh: mount
# nvcachefs and the passthrough_ll anchor side by side, print BENCH lines.
#
#   fsb_mount_nv MNT BACKING [EXTRA_OPTS]   nvcachefs, NVRAM file in $T_SHM
#   fsb_mount_pt MNT BACKING                libfuse passthrough_ll
#   fsb_umount MNT PID                      unmount, wait for the daemon
#   fsb_line NAME VALUE UNIT ANCHOR AVALUE  one BENCH line with the ratio
#                                           VALUE/AVALUE (higher is better)
#   fsb_line_time NAME SECS ANCHOR ASECS    same for times (ratio ASECS/SECS)
#   fsb_slowpfs DIR    mount an emulated slow parallel file system at DIR and
#                      throttle this shell and all it starts (see below)
#   fsb_warm_memory    stop the guest handing freed memory back to the host
#                      for this benchmark (free page reporting), then touch
#                      and free FSB_WARM_MIB (6144) MiB of RAM
#   fsb_keep_warm      the same, FSB_WARM_MIB 3/4 of what is available
# NVRAM emulation: none (a plain libpmem2 mapping of a /dev/shm file) unless
# FSB_NVRAM_OPTS adds e.g. nvram_lat_ns=2000,nvram_flush_ns=600,nvram_bw=9.5G
# (the seed paper's Lap06 platform).
FSB_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FSB_NVRAM_OPTS=${FSB_NVRAM_OPTS:-}
export NVCACHE_RUN_DIR=$T_DIR/run
mkdir -p "$NVCACHE_RUN_DIR"
FSB_PID=

# In a VM the first touch of a guest page the host has not backed yet costs
# a host-side fault. A run that needs fresh page cache was 3-5x slower than
# one reusing freed pages (ext4 here: 256 MiB + fsync in 0.13 s on warm
# pages, 0.7 s on cold ones), so whichever target ran first lost. This VM
# also hands freed 2 MiB blocks back to the host within a second
# (virtio-balloon free page reporting), which makes them cold again: a
# warm-up holds only with reporting off (fsb_reporting_off). Touching and
# freeing some GiB then puts backed pages on the free lists for every target.
fsb_warm_memory() {
  local mib=${FSB_WARM_MIB:-6144} avail
  fsb_reporting_off
  avail=$(awk '$1 == "MemAvailable:" {print int($2 * 3 / 4 / 1024)}' /proc/meminfo)
  [ "$mib" -le "$avail" ] || mib=$avail
  dd if=/dev/zero of="$T_SHM/warm" bs=1M count="$mib" status=none 2>/dev/null
  rm -f "$T_SHM/warm"
}

# fsb_reporting_off: no freed block handed back to the host until this
# benchmark exits (page_reporting_order above the largest buddy order,
# 10; put back at exit). Once per run.
FSB_REPORTING=
fsb_reporting_off() {
  local p=/sys/module/page_reporting/parameters/page_reporting_order
  [ -n "$FSB_REPORTING" ] && return 0
  FSB_REPORTING="not found here"
  [ -w "$p" ] || return 0
  t_cleanup "echo $(cat "$p") >$p"
  echo 11 >"$p" && FSB_REPORTING="off for this run"
}

fsb_keep_warm() {
  local mib
  mib=${FSB_WARM_MIB:-$(awk '$1 == "MemAvailable:" {print int($2 * 3 / 4 / 1024)}' /proc/meminfo)}
  FSB_WARM_MIB=$mib fsb_warm_memory
  echo "memory: $mib MiB warmed; free page reporting $FSB_REPORTING"
}

fsb_nvram_desc() {
  if [ -n "$FSB_NVRAM_OPTS" ]; then echo "emulated ($FSB_NVRAM_OPTS)"; else echo "none (plain /dev/shm mapping)"; fi
}

fsb_mount_nv() {
  local mnt=$1 back=$2 extra=${3:-} bin
  bin=$(t_bin nvcachefs) || exit 1
  mkdir -p "$mnt" "$back"
  local opts="backing=$back,nvram=$T_SHM/$(basename "$mnt").nvram${extra:+,$extra}${FSB_NVRAM_OPTS:+,$FSB_NVRAM_OPTS}"
  "$bin" "$mnt" -o "$opts" -f >"$T_DIR/$(basename "$mnt").log" 2>&1 &
  FSB_PID=$!
  t_cleanup "t_umount '$mnt'; kill $FSB_PID"
  t_wait 20 t_is_mounted "$mnt" || { cat "$T_DIR/$(basename "$mnt").log" >&2; t_fail "nvcachefs did not mount"; }
}

fsb_mount_pt() {
  local mnt=$1 back=$2 bin
  bin=$("$FSB_HERE/build-passthrough.sh" "$T_DIR/pt") || t_fail "cannot build passthrough_ll"
  mkdir -p "$mnt" "$back"
  "$bin" "$mnt" -o "source=$back" -f >"$T_DIR/$(basename "$mnt").log" 2>&1 &
  FSB_PID=$!
  t_cleanup "t_umount '$mnt'; kill $FSB_PID"
  t_wait 20 t_is_mounted "$mnt" || t_fail "passthrough_ll did not mount"
}

fsb_umount() {
  local mnt=$1 pid=$2 i
  fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
  for ((i = 0; i < 3000; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  t_log "daemon $pid still running 300 s after unmount of $mnt"
}

fsb_line() {
  awk -v n="$1" -v v="$2" -v u="$3" -v a="$4" -v av="$5" 'BEGIN {
    r = (av > 0) ? v / av : 0
    printf "BENCH %s %.1f %s vs %s %.1f %s ratio %.2f\n", n, v, u, a, av, u, r }'
}

fsb_line_time() {
  awk -v n="$1" -v v="$2" -v a="$3" -v av="$4" 'BEGIN {
    r = (v > 0) ? av / v : 0
    printf "BENCH %s %.3f s vs %s %.3f s ratio %.2f\n", n, v, a, av, r }'
}

# fsb_slowpfs DIR: ext4 on a loop device over a file on /var/tmp (never
# tmpfs), mounted -o sync (no client write cache, as a PFS without one), its
# loop device throttled by a cgroup-v1 blkio group to FSB_SLOW_BPS bytes/s
# (default 100 MiB/s) and FSB_SLOW_IOPS (default 2000) each way. This shell
# joins the group, so call it after the unthrottled runs. No device-mapper
# here, so no dm-delay. Returns 1 (and says why) where it cannot be built.
fsb_slowpfs() {
  local dir=$1 cg=/sys/fs/cgroup/blkio img loop devno grp
  local bps=${FSB_SLOW_BPS:-$((100 * 1024 * 1024))} iops=${FSB_SLOW_IOPS:-2000}
  if [ ! -w "$cg/blkio.throttle.write_bps_device" ] || ! command -v losetup >/dev/null; then
    echo "slowpfs skipped: no cgroup-v1 blkio throttling or losetup here"
    return 1
  fi
  img=$T_DIR/slowpfs.img
  truncate -s 3G "$img"
  loop=$(losetup -f --show "$img") || t_fail "losetup failed"
  t_cleanup "losetup -d $loop"
  mkfs.ext4 -q -F "$loop" || t_fail "mkfs.ext4 $loop failed"
  mkdir -p "$dir"
  mount -o sync "$loop" "$dir" || t_fail "mount $loop failed"
  t_cleanup "umount -l $dir"
  devno=$(lsblk -dno MAJ:MIN "$loop" | tr -d ' ')
  grp=$cg/nvcache-fsbench-$$
  mkdir "$grp"
  # Daemons may still be exiting when cleanup runs: retry the rmdir (own
  # loop variable: lib.sh's cleanup loop uses i).
  t_cleanup "echo $$ > $cg/cgroup.procs; for _fsb_try in \$(seq 100); do rmdir $grp && break; sleep 0.2; done"
  echo "$devno $bps" >"$grp/blkio.throttle.write_bps_device"
  echo "$devno $bps" >"$grp/blkio.throttle.read_bps_device"
  echo "$devno $iops" >"$grp/blkio.throttle.write_iops_device"
  echo "$devno $iops" >"$grp/blkio.throttle.read_iops_device"
  echo $$ >"$grp/cgroup.procs"
  echo "slowpfs = ext4 -o sync on $loop ($devno), throttled to $((bps / 1048576)) MiB/s and $iops IOPS each way"
}
