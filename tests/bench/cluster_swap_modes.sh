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
modes=${BENCH_MODES:-none mirror parity parity-dist}
. "$(dirname "$0")/cluster_swap_run.bash"
swap_setup "$limit"

declare -A pid secs
red() { case $1 in parity|parity-dist) echo "$1:4" ;; *) echo "$1" ;; esac; }

# run MODE KILL(0|1): one timed workload on a fresh cluster and device.
run() {
  local m=$1 kill=$2 tag=$1-$2
  cluster_start 5 "$tag"
  swap_run "$tag" "sw${1//-/}$2" "$mib" "$order" $((kill * 100)) \
    --size $((mib + 256))M --redundancy "$(red "$m")"
  cluster_stop
}
ratio() { swap_ratio "$@"; }

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
