#!/usr/bin/env bash
# cluster_swap_modes.sh - the kernel really swapping into other nodes'
# memory, per redundancy mode: nvswapd --store remote over five nvcached on
# loopback (we are node 1; pages go to nodes 2-5), nbdfuse + a direct-I/O
# loop device + swapon, and nbd-memtouch filling and checking 768 MiB in a
# 256 MiB memory cgroup (random order). Times per mode against `none`
# (Nswap: parity 1-4 % over none, mirroring 18-100 %), and the slowdown of
# the same workload when a data node is killed with SIGKILL once 100 MiB
# are out and recovery runs beside it (Nswap: 0.3 %).
#
#   BENCH_MIB=768 BENCH_LIMIT=256M BENCH_ORDER=rand BENCH_MODES="none mirror parity parity-dist" BENCH_KILL=1
# Loopback TCP on a shared 2-core machine: ratios matter, not absolutes.
T_TIMEOUT=${T_TIMEOUT:-1800}
. "$(dirname "$0")/../system/lib.sh"
. "$(dirname "$0")/../system/nbd_common.bash"
. "$(dirname "$0")/../system/cluster_common.bash"
t_require_root
t_require_cmd nbdfuse losetup mkswap swapon swapoff fusermount3 python3
mib=${BENCH_MIB:-768}
limit=${BENCH_LIMIT:-256M}
order=${BENCH_ORDER:-rand}
modes=${BENCH_MODES:-none mirror parity parity-dist}
ctl=$(t_bin nvcachectl) || exit 1
touch_bin=$(t_bin nbd-memtouch) || exit 1
nbd_is_sanitized "$(t_bin nvswapd)" && t_skip "sanitizer build: no swap to it"
[ -z "$(swapon --noheadings --show)" ] || t_skip "another swap is active"
cgroot=/sys/fs/cgroup/memory
cg=$cgroot/nvbench-cluster-swap-$$
mkdir "$cg" || t_skip "no cgroup v1 memory controller"
t_cleanup "for p in \$(cat $cg/cgroup.procs); do kill -9 \$p; done; sleep 0.2; rmdir $cg"
echo "$limit" >"$cg/memory.limit_in_bytes"
export NVCACHE_RUN_DIR=$T_DIR/run

declare -A pid secs
stat_val() { cluster_stat "$@"; }
start_cluster() { cluster_start 5 "$1"; }
stop_cluster() { cluster_stop; }
held() { local t=0 i; for i in 2 3 4 5; do t=$((t + $(stat_val $i pages_data 2>/dev/null || echo 0))); done; echo $t; }
red() { case $1 in parity|parity-dist) echo "$1:4" ;; *) echo "$1" ;; esac; }

# run MODE KILL(0|1): one timed workload on a fresh cluster and device.
run() {
  local m=$1 kill=$2 tag=$1-$2 name=sw${1//-/}$2
  start_cluster "$tag"
  local sock=$T_DIR/$tag.sock
  nbd_start "$sock" "$name" --size $((mib + 256))M --store remote --cluster "$conf" \
    --node 1 --redundancy "$(red "$m")"
  local mnt=$T_DIR/fuse-$tag
  mkdir "$mnt"
  nbdfuse "$mnt" --unix "$sock" >"$T_DIR/nbdfuse-$tag.log" 2>&1 &
  local fpid=$!
  t_cleanup "fusermount3 -u $mnt 2>/dev/null; kill $fpid 2>/dev/null"
  t_wait 10 test -f "$mnt/nbd" || t_fail "$tag: nbdfuse"
  local dev; dev=$(losetup -f --show --direct-io=on "$mnt/nbd") || t_fail "$tag: losetup"
  t_cleanup "swapoff $dev 2>/dev/null; losetup -d $dev 2>/dev/null"
  mkswap "$dev" >/dev/null && swapon --discard=pages "$dev" || t_fail "$tag: swapon"
  local s; s=$(date +%s.%N)
  sh -c "echo \$\$ > $cg/cgroup.procs; exec $touch_bin $mib $order 5" >"$T_DIR/touch-$tag.out" 2>&1 &
  local w=$!
  if [ "$kill" = 1 ]; then
    for _ in $(seq 3000); do
      [ "$(held)" -gt 25600 ] && break
      kill -0 $w 2>/dev/null || break
      sleep 0.1
    done
    # node 3 holds data in every mode (parity's parity node is node 2)
    kill -9 "${pid[3]}"
  fi
  if wait $w; then
    secs[$tag]=$(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  else
    secs[$tag]=0
    echo "$tag: workload FAILED: $(cat "$T_DIR/touch-$tag.out")"
  fi
  local st; st=$("$ctl" stats --swap "$name")
  echo "$tag: ${secs[$tag]} s ($(cat "$T_DIR/touch-$tag.out")); $(grep -E '^(nbd_writes|nbd_bytes_written|nbd_reads|nbd_bytes_read|remote_slots_mapped|remote_read_errors|parity_reconstructs|parity_rebuilt_pages|parity_rebuild_ms_per_page|parity_updates|parity_sends|remote_trims|remote_remirrors):' <<<"$st" | tr '\n' ' ')"
  swapoff "$dev"; losetup -d "$dev"; fusermount3 -u "$mnt"; wait "$fpid" 2>/dev/null
  kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
  stop_cluster
}
ratio() { python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'{a/b:.3f}' if b else 'nan')" "$1" "$2"; }

for m in $modes; do run "$m" 0; done
# BENCH_KILL=0: no run with a node killed midway
[ "${BENCH_KILL:-1}" = 0 ] || for m in $modes; do [ "$m" = none ] || run "$m" 1; done
for m in $modes; do
  echo "BENCH cluster_swap.$m.${order}_${mib}M_in_$limit ${secs[$m-0]} s vs none ${secs[none-0]:-0} s ratio $(ratio "${secs[$m-0]}" "${secs[none-0]:-0}")"
done
for m in $modes; do
  [ "$m" = none ] || [ "${BENCH_KILL:-1}" = 0 ] && continue
  echo "BENCH cluster_swap.$m.node_killed_midway ${secs[$m-1]} s vs no failure ${secs[$m-0]} s ratio $(ratio "${secs[$m-1]}" "${secs[$m-0]}")"
done
exit 0
