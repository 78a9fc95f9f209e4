#!/usr/bin/env bash
# cluster_spill.sh - issue 27's scenario: four nodes of 512 MiB each
# (mem=512M; we are node 1, pages on nodes 2-5), a 1280 MiB device with
# --redundancy parity or parity-dist and --flash on disk, nbd-memtouch
# filling and checking 768 MiB in a 256 MiB memory cgroup through real swap
# (nbdfuse + loop + swapon), node 3 killed with SIGKILL midway (once the
# nodes hold 384 MiB of our data). The survivors cannot take the rebuilt
# pages and the parity of smaller groups: the rest goes to the spill file,
# and the workload must finish with every page right. Side by side, the
# same on 1 GiB nodes (no spill); BENCH lines give the time and the ratio.
#
#   BENCH_MIB=768 BENCH_LIMIT=256M BENCH_ORDER=rand BENCH_MODES="parity parity-dist"
#   BENCH_NODE_MEM=512M (the small nodes; the large ones are 1G)
# Loopback TCP on a shared 2-core machine: ratios matter, not absolutes.
T_TIMEOUT=${T_TIMEOUT:-1800}
. "$(dirname "$0")/../system/lib.sh"
. "$(dirname "$0")/../system/nbd_common.bash"
. "$(dirname "$0")/../system/cluster_common.bash"
modes=${BENCH_MODES:-parity parity-dist}
small=${BENCH_NODE_MEM:-512M}
. "$(dirname "$0")/cluster_swap_run.bash"
swap_setup "$limit"

declare -A pid secs
# run MODE NODE_MEM: one timed workload on a fresh cluster and device
run() {
  local m=$1 mem=$2 tag=$1-$2 name=sp${1//-/}$2
  CLUSTER_MEM=$mem cluster_start 5 "$tag"
  swap_run "$tag" "$name" "$mib" "$order" $((mib / 2)) --size 1280M \
    --redundancy "$m" --flash "$T_DIR/spill-$tag"
  grep -q "after losing its largest node" "$T_DIR/nvswapd-$name.log" &&
    echo "$tag: nvswapd warned at start: $(grep -o "[0-9]* MiB of swap needs.*largest node ([^)]*)" "$T_DIR/nvswapd-$name.log")"
  echo "$tag: spill: $(grep -c "short of room" "$T_DIR/nvswapd-$name.log") short-of-room warnings; $(grep "held pages placed" "$T_DIR/nvswapd-$name.log" | tail -1)"
  cluster_stop
}

for m in $modes; do run "$m" "$small"; run "$m" 1G; done
for m in $modes; do
  echo "BENCH cluster_spill.$m.${order}_${mib}M_in_${limit}_${small}_nodes_node_killed ${secs[$m-$small]} s vs 1G_nodes ${secs[$m-1G]} s ratio $(swap_ratio "${secs[$m-$small]}" "${secs[$m-1G]}")"
done
exit 0
