#!/usr/bin/env bash
# cluster_swap.sh - nvswapd's remote store over four nvcached nodes on
# loopback: data written through NBD (nbdcopy) lands in the other nodes'
# memory, two copies each (mirror), never on our own node, spread over the
# three others; kill -9 of one node loses nothing (reads fail over, the lost
# copies are rebuilt on the two nodes left) and writing goes on.
T_TIMEOUT=${T_TIMEOUT:-120}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_common.bash"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd nbdcopy nbdinfo python3 cmp

nvcached=$(t_bin nvcached) || exit 1
ctl=$(t_bin nvcachectl) || exit 1
export NVCACHE_RUN_DIR=$T_DIR/run

read -r -a ports < <(cluster_free_ports 4)
head -c 32 /dev/urandom | base64 >"$T_DIR/secret"
chmod 600 "$T_DIR/secret"
conf=$T_DIR/cluster.conf
{ echo "secret secret"
  for i in 1 2 3 4; do echo "node $i 127.0.0.1:${ports[$((i-1))]}"; done; } >"$conf"

declare -A pid
for i in 1 2 3 4; do
  "$nvcached" --cluster "$conf" --node $i -f --heartbeat 200 --timeout 1000 \
    >"$T_DIR/node$i.log" 2>&1 &
  pid[$i]=$!
  t_cleanup "kill -9 ${pid[$i]} 2>/dev/null"
done
stat_val() { "$ctl" stats --node "$1" 2>/dev/null | awk -F': ' -v k="$2" '$1 == k { print $2 }'; }
alive_is() { [ "$(stat_val "$1" nodes_alive)" = "$2" ]; }
for i in 1 2 3 4; do t_wait 15 alive_is $i 3 || t_fail "node $i does not see its peers"; done

# A spill file on tmpfs is refused (swap backed by tmpfs deadlocks).
if timeout 20 "$(t_bin nvswapd)" -f --unix "$T_DIR/x.sock" --name clx --size 16M \
     --store remote --cluster "$conf" --node 1 --flash "$T_SHM/spill" >"$T_DIR/x.log" 2>&1; then
  t_fail "nvswapd accepted a spill file on tmpfs"
fi
grep -q "tmpfs" "$T_DIR/x.log" || t_fail "no tmpfs refusal message: $(cat "$T_DIR/x.log")"

# nvswapd on "node 1": its pages go to nodes 2, 3, 4.
sock=$T_DIR/nbd.sock
nbd_start "$sock" clswap --size 64M --store remote --cluster "$conf" --node 1 \
  --redundancy mirror --flash "$T_DIR/spill"
uri="nbd+unix:///clswap?socket=$sock"
nbdinfo --size "$uri" | grep -qx 67108864 || t_fail "nbdinfo: wrong size"

# 16 MiB of random data at offset 0 (nbdcopy writes the whole device: the
# rest is zeros).
head -c 16M /dev/urandom >"$T_DIR/data"
truncate -s 64M "$T_DIR/data"
nbdcopy "$T_DIR/data" "$uri" || t_fail "nbdcopy to the device"
nbdcopy "$uri" "$T_DIR/back" || t_fail "nbdcopy from the device"
cmp "$T_DIR/data" "$T_DIR/back" || t_fail "data read back differs"

total=0
for i in 2 3 4; do
  n=$(stat_val $i pages_data)
  t_log "node $i holds $n pages"
  [ "$n" -gt 1000 ] || t_fail "node $i holds only $n pages: placement not spread"
  total=$((total + n))
done
[ "$(stat_val 1 pages_data)" = 0 ] || t_fail "pages stored on our own node"
mapped=$(nbd_stat clswap remote_slots_mapped)
[ $total -eq $((2 * mapped)) ] || t_fail "$total pages on the nodes for $mapped mapped slots (mirror: 2 each)"
t_log "$mapped slots mapped, $total copies on nodes 2-4"

# kill -9 node 3: nothing is lost.
kill -9 "${pid[3]}"
nbdcopy "$uri" "$T_DIR/back2" || t_fail "nbdcopy after a node loss"
cmp "$T_DIR/data" "$T_DIR/back2" || t_fail "data differs after node 3 died"
[ "$(nbd_stat clswap remote_read_errors)" = 0 ] || t_fail "read errors after one node died"
[ "$(nbd_stat clswap remote_spills)" = 0 ] || t_fail "pages spilled although the nodes had room"
# The copies node 3 held are rebuilt on nodes 2 and 4.
rebuilt() { [ $(( $(stat_val 2 pages_data) + $(stat_val 4 pages_data) )) -eq $((2 * mapped)) ]; }
t_wait 20 rebuilt || t_fail "copies not rebuilt: node 2 $(stat_val 2 pages_data), node 4 $(stat_val 4 pages_data)"
t_log "after node 3 died: $(nbd_stat clswap remote_remirrors) copies re-mirrored, $(nbd_stat clswap remote_failovers) reads failed over"

# Writing goes on, and node 2 alone would now carry everything: kill node 4.
head -c 8M /dev/urandom | dd of="$T_DIR/data" bs=1M seek=32 conv=notrunc status=none
nbdcopy "$T_DIR/data" "$uri" || t_fail "nbdcopy after the loss"
kill -9 "${pid[4]}"
nbdcopy "$uri" "$T_DIR/back3" || t_fail "nbdcopy with one node left"
cmp "$T_DIR/data" "$T_DIR/back3" || t_fail "data differs with one node left"
# A clean stop drops the device's pages on the nodes: swap does not
# outlive it, and they used to hold the nodes' memory for good.
[ "$(stat_val 2 pages_data)" -gt 0 ] || t_fail "node 2 holds nothing before the stop"
kill -TERM "$NBD_PID"; wait "$NBD_PID"
[ "$(stat_val 2 pages_data)" = 0 ] || t_fail "node 2 still holds $(stat_val 2 pages_data) pages after nvswapd stopped"
t_log "nvswapd stopped: its pages dropped on the nodes"
t_log "PASS"
