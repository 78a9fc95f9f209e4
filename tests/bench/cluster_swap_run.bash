# cluster_swap_run.bash - the kernel swapping into other nodes' memory, one
# timed run at a time, for the cluster swap benchmarks (sourced after
# tests/system/lib.sh, nbd_common.bash and cluster_common.bash; not a
# benchmark itself, hence not *.sh). Needs root and a cgroup v1 memory
# controller; skips otherwise.
#
# swap_setup LIMIT: a memory cgroup of LIMIT for the workload ($cg).
# swap_run TAG NAME MIB ORDER KILL_MIB NVSWAPD-OPTIONS...: on the cluster
# started by the caller ($conf, pid[]; we are node 1, pages on nodes 2-5),
# nvswapd with those options, nbdfuse + a direct-I/O loop device + swapon,
# and nbd-memtouch filling and checking MIB MiB in the cgroup (ORDER seq or
# rand). KILL_MIB > 0: node 3 (data in every mode) is killed with SIGKILL
# once the nodes hold that many MiB of our data. Sets secs[TAG] (0: the
# workload failed) and prints a line with the device's key stats.
# The workload, as both benchmarks take it from their environment:
mib=${BENCH_MIB:-768}
limit=${BENCH_LIMIT:-256M}
order=${BENCH_ORDER:-rand}

swap_setup() {
  t_require_root
  t_require_cmd nbdfuse losetup mkswap swapon swapoff fusermount3 python3
  touch_bin=$(t_bin nbd-memtouch) || exit 1
  t_is_sanitized "$(t_bin nvswapd)" && t_skip "sanitizer build: no swap to it"
  [ -z "$(swapon --noheadings --show)" ] || t_skip "another swap is active"
  cg=/sys/fs/cgroup/memory/nvbench-cluster-swap-$$
  mkdir "$cg" || t_skip "no cgroup v1 memory controller"
  t_cleanup "for p in \$(cat $cg/cgroup.procs); do kill -9 \$p; done; sleep 0.2; rmdir $cg"
  echo "$1" >"$cg/memory.limit_in_bytes"
  export NVCACHE_RUN_DIR=$T_DIR/run
}

swap_held() {
  local t=0 i
  for i in 2 3 4 5; do t=$((t + $(cluster_stat $i pages_data 2>/dev/null || echo 0))); done
  echo $t
}

swap_run() {
  local tag=$1 name=$2 mib=$3 order=$4 kill_mib=$5; shift 5
  local sock=$T_DIR/$tag.sock
  nbd_start "$sock" "$name" --store remote --cluster "$conf" --node 1 "$@"
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
  if [ "$kill_mib" -gt 0 ]; then
    for _ in $(seq 6000); do
      [ "$(swap_held)" -gt $((kill_mib * 256)) ] && break
      kill -0 $w 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "${pid[3]}"
  fi
  if wait $w; then
    secs[$tag]=$(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  else
    secs[$tag]=0
    echo "$tag: workload FAILED: $(cat "$T_DIR/touch-$tag.out")"
    grep -E "error|warning" "$T_DIR/nvswapd-$name.log" | tail -5
  fi
  local st; st=$("$(t_bin nvcachectl)" stats --swap "$name")
  echo "$tag: ${secs[$tag]} s ($(cat "$T_DIR/touch-$tag.out")); $(grep -E '^(nbd_writes|nbd_bytes_written|nbd_reads|nbd_bytes_read|remote_slots_mapped|remote_read_errors|remote_write_errors|remote_spills|remote_slots_spilled|remote_holds_placed|parity_reconstructs|parity_rebuilt_pages|parity_rebuild_ms_per_page|parity_updates|parity_sends|remote_trims|remote_remirrors):' <<<"$st" | tr '\n' ' ')"
  swapoff "$dev"; losetup -d "$dev"; fusermount3 -u "$mnt"; wait "$fpid" 2>/dev/null
  kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
}

swap_ratio() {
  python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'{a/b:.3f}' if b else 'nan')" "$1" "$2"
}
