# lib.sh - sourced by tests/bench/fs_*.sh after tests/system/lib.sh: mount
# nvcachefs and the passthrough_ll anchor side by side, print BENCH lines.
#
#   fsb_mount_nv MNT BACKING [EXTRA_OPTS]   nvcachefs, NVRAM file in $T_SHM
#   fsb_mount_pt MNT BACKING                libfuse passthrough_ll
#   fsb_umount MNT PID                      unmount, wait for the daemon
#   fsb_line NAME VALUE UNIT ANCHOR AVALUE  one BENCH line with the ratio
#                                           VALUE/AVALUE (higher is better)
#   fsb_line_time NAME SECS ANCHOR ASECS    same for times (ratio ASECS/SECS)
# NVRAM emulation: none (a plain libpmem2 mapping of a /dev/shm file) unless
# FSB_NVRAM_OPTS adds e.g. nvram_lat_ns=2000,nvram_flush_ns=600,nvram_bw=9.5G
# (the seed paper's Lap06 platform).
FSB_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FSB_NVRAM_OPTS=${FSB_NVRAM_OPTS:-}
export NVCACHE_RUN_DIR=$T_DIR/run
mkdir -p "$NVCACHE_RUN_DIR"
FSB_PID=

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
