#!/usr/bin/env bash
# cluster_parity.sh - what each redundancy mode of nvswapd --store remote
# costs, side by side over six nvcached nodes on loopback (we are node 1;
# pages go to nodes 2-6): none (the anchor), mirror, parity (groups of 4,
# node 2 the parity node) and parity-dist (groups of 4, parity spread).
#  - swap-out of fresh pages: nbdcopy of 64 MiB of random data onto an
#    empty device (every page new: parity logging, one parity send per 4)
#  - overwrite: the same again (every slot in use: old^new to the parity)
#  - fio 4 KiB randwrite / randread, iodepth 16 (nbd engine)
#  - RAM spent on redundancy per stored page (client tables, node pages),
#    and what a node's memory grows by per page it stores (RSS)
#  - rebuild time per lost page: a data node holding ~10,000 pages (and
#    ~100,000 with BENCH_BIG=1) is killed; the background pass's time / pages
#    (BENCH_REBUILD_ONLY=1: only this part; BENCH_REBUILDS="parity:10000:8"
#    picks the mode, pages and node count of each)
# Loopback TCP on a shared 2-core machine: ratios matter, not absolutes.
T_TIMEOUT=${T_TIMEOUT:-900}
. "$(dirname "$0")/../system/lib.sh"
. "$(dirname "$0")/../system/nbd_common.bash"
. "$(dirname "$0")/../system/cluster_common.bash"
t_require_cmd fio python3 nbdcopy

ctl=$(t_bin nvcachectl) || exit 1
export NVCACHE_RUN_DIR=$T_DIR/run
runtime=${BENCH_RUNTIME:-8}

declare -A pid
start_cluster() { cluster_start 6 "$1"; }
stop_cluster() { cluster_stop; }
stat_val() { cluster_stat "$@"; }
red() { case $1 in parity|parity-dist) echo "$1:4" ;; *) echo "$1" ;; esac; }

fio_iops() {
  fio --name=b --ioengine=nbd --uri="$1" --rw="$2" --bs=4k --iodepth=16 \
      --size=256M --time_based --runtime="$runtime" --output-format=json \
      >"$T_DIR/fio.json" 2>"$T_DIR/fio.err" || { cat "$T_DIR/fio.err" >&2; echo 0; return; }
  python3 -c '
import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]
print(int(j["write"]["iops"] + j["read"]["iops"]))' "$T_DIR/fio.json"
}
ms() { echo $(( ($2 - $1) / 1000000 )); }
# utime + stime (clock ticks) of the given pids, summed
cpu_ticks() { local t=0 p; for p; do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done; echo $t; }
# resident KiB of the given pids, summed
rss_kib() { local t=0 p; for p; do t=$((t + $(awk '$1 == "VmRSS:" { print $2 }' "/proc/$p/status"))); done; echo $t; }
ratio() { python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'{a/b:.3f}' if b else 'nan')" "$1" "$2"; }

if [ "${BENCH_REBUILD_ONLY:-0}" != 1 ]; then
head -c 64M /dev/urandom >"$T_DIR/data"
modes="none mirror parity parity-dist"
declare -A fresh over w r cb nb
start_cluster perf
node_rss() { rss_kib "${pid[2]}" "${pid[3]}" "${pid[4]}" "${pid[5]}" "${pid[6]}"; }
node_pages() { local t=0 i; for i in 2 3 4 5 6; do t=$((t + $(stat_val $i pages))); done; echo $t; }
for m in $modes; do
  sock=$T_DIR/$m.sock name=b${m//-/}
  nbd_start "$sock" "$name" --size 256M --store remote --cluster "$conf" --node 1 \
    --redundancy "$(red $m)"
  uri="nbd+unix:///$name?socket=$sock"
  t0=$(date +%s%N); nbdcopy "$T_DIR/data" "$uri" || t_fail "$m: nbdcopy"; t1=$(date +%s%N)
  nbdcopy "$T_DIR/data" "$uri" || t_fail "$m: nbdcopy"; t2=$(date +%s%N)
  fresh[$m]=$(ms $t0 $t1); over[$m]=$(ms $t1 $t2)
  [ $m = none ] && { rss1=$(node_rss); held1=$(node_pages); }
  w[$m]=$(fio_iops "$uri" randwrite)
  # the random writes fill most of the device's other 192 MiB: what the
  # nodes grew by per page they took (their connections already up)
  [ $m = none ] && rss_pp=$(ratio $(( ($(node_rss) - rss1) * 1024 )) $(( $(node_pages) - held1 )))
  r[$m]=$(fio_iops "$uri" randread)
  s=$("$ctl" stats --swap "$name")
  mapped=$(awk '$1 == "remote_slots_mapped:" { print $2 }' <<<"$s")
  case $m in
    none) cb[$m]=0; nb[$m]=0 ;;
    mirror) cb[$m]=0; nb[$m]=4096 ;;  # a second copy of every page
    *) cb[$m]=$(awk '$1 == "parity_client_bytes_per_page:" { print $2 }' <<<"$s")
       nb[$m]=$(awk '$1 == "parity_node_bytes_per_page:" { print $2 }' <<<"$s") ;;
  esac
  echo "cluster_parity: $m: fresh 64 MiB ${fresh[$m]} ms, overwrite ${over[$m]} ms, randwrite ${w[$m]} IOPS, randread ${r[$m]} IOPS, $mapped slots, client ${cb[$m]} B/page, nodes ${nb[$m]} B/page"
  kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
done
stop_cluster
echo "BENCH cluster_node.rss_per_stored_page $rss_pp B (a page is 4096 B)"
for m in mirror parity parity-dist; do
  echo "BENCH cluster_parity.$m.swapout_fresh_64M ${fresh[$m]} ms vs none ${fresh[none]} ms ratio $(ratio "${fresh[$m]}" "${fresh[none]}")"
  echo "BENCH cluster_parity.$m.swapout_inuse_64M ${over[$m]} ms vs none ${over[none]} ms ratio $(ratio "${over[$m]}" "${over[none]}")"
  echo "BENCH cluster_parity.$m.randwrite_4k ${w[$m]} IOPS vs none ${w[none]} IOPS ratio $(ratio "${w[$m]}" "${w[none]}")"
  echo "BENCH cluster_parity.$m.randread_4k ${r[$m]} IOPS vs none ${r[none]} IOPS ratio $(ratio "${r[$m]}" "${r[none]}")"
  echo "BENCH cluster_parity.$m.redundancy_bytes_per_page client ${cb[$m]} nodes ${nb[$m]} B"
done
fi

# Rebuild: lose a data node holding N pages; time the background pass.
# rebuild MODE PAGES [NODES]: with 6 nodes (4 data nodes with parity)
# every group of 4 spans all data nodes, so a rebuilt page must leave its
# group for an open one; with 8 it moves to a node outside its group.
rebuild() {
  local m=$1 pages=$2 nodes=${3:-6} i
  cluster_start "$nodes" "rb$pages-$nodes"
  local sock=$T_DIR/rb.sock name=brb
  # parity: data on nodes 3..n; parity-dist: on 2..n; ~pages on each
  local data=$((nodes - 2))
  [ "$m" = parity-dist ] && data=$((nodes - 1))
  local mib=$(( (data * pages * 4096 + 1048575) / 1048576 ))
  nbd_start "$sock" $name --size $((mib + 16))M --store remote --cluster "$conf" --node 1 \
    --redundancy "$(red $m)"
  head -c ${mib}M /dev/urandom >"$T_DIR/rb"
  nbdcopy "$T_DIR/rb" "nbd+unix:///$name?socket=$sock" || t_fail "rebuild: nbdcopy"
  local lost; lost=$(stat_val 4 pages_data)
  # CPU time of nvswapd and the surviving nodes across the pass: on a
  # shared machine the wall time per page depends on the load; this less so
  local procs=$NBD_PID c0
  for ((i = 2; i <= nodes; i++)); do [ $i = 4 ] || procs+=" ${pid[$i]}"; done
  c0=$(cpu_ticks $procs)
  kill -9 "${pid[4]}"
  done_pass() { [ "$(nbd_stat $name parity_rebuilt_pages)" -gt 0 ]; }
  t_wait 300 done_pass || t_fail "rebuild: no recovery pass"
  local per; per=$(nbd_stat $name parity_rebuild_ms_per_page)
  local cpu; cpu=$(( $(cpu_ticks $procs) - c0 ))
  local rebuilt; rebuilt=$(nbd_stat $name parity_rebuilt_pages)
  local cpp; cpp=$(python3 -c "import os,sys; print(f'{int(sys.argv[1]) * 1000 / os.sysconf(\"SC_CLK_TCK\") / int(sys.argv[2]):.4f}')" "$cpu" "$rebuilt")
  local tag=$m.rebuild_ms_per_page_${pages}
  [ "$nodes" = 6 ] || tag+=_${nodes}nodes
  echo "cluster_parity: $m, $nodes nodes: node 4 held $lost pages; rebuilt $rebuilt at $per ms/page ($(nbd_stat $name parity_rebuilt_batched) batched), $cpp ms of CPU per page"
  echo "BENCH cluster_parity.$tag $per ms vs nswap 0.144 ms ratio $(ratio "$per" 0.144)"
  echo "BENCH cluster_parity.${tag/ms_per_page/cpu_ms_per_page} $cpp ms (CPU of nvswapd and the nodes)"
  nbdcopy "nbd+unix:///$name?socket=$sock" "$T_DIR/rb2" || t_fail "rebuild: read back"
  cmp -n "${mib}M" "$T_DIR/rb" "$T_DIR/rb2" || t_fail "rebuild: data differs"
  kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
  cluster_stop
}
# BENCH_REBUILDS: which rebuilds, as MODE:PAGES:NODES words
rebuilds=${BENCH_REBUILDS:-parity:10000:6 parity-dist:10000:6 parity:10000:8}
[ "${BENCH_BIG:-0}" = 1 ] && rebuilds+=" parity:100000:8"
for r in $rebuilds; do
  IFS=: read -r m p n <<<"$r"
  rebuild "$m" "$p" "$n"
done
exit 0
