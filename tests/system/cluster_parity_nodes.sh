#!/usr/bin/env bash
# cluster_parity_nodes.sh - the warning when parity pages cannot be placed
# names the cause. With groups of 4 spread over 5 nodes (parity-dist), one
# node lost leaves no node outside a group for its parity page: too few
# nodes, not too little room. The warning said "short of room ... give the
# nodes memory", the wrong advice; it now says a group of 4 needs 5 nodes.
T_TIMEOUT=${T_TIMEOUT:-180}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_common.bash"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd nbdcopy

export NVCACHE_RUN_DIR=$T_DIR/run   # the nodes' control sockets: not /run/nvcache
declare -A pid
cluster_node_args() { echo --no-mlock; }
cluster_start 6 pnodes
sock=$T_DIR/nbd.sock name=clpnodes
nbd_start "$sock" $name --size 16M --store remote --cluster "$conf" --node 1 \
  --redundancy parity-dist:4
uri="nbd+unix:///$name?socket=$sock"
head -c 16M /dev/urandom >"$T_DIR/d"
nbdcopy "$T_DIR/d" "$uri" || t_fail "nbdcopy to the device"
kill -9 "${pid[6]}"
# overwrite while one of the five is gone: closing groups need a parity node
nbdcopy "$T_DIR/d" "$uri" || t_fail "nbdcopy after node 6 died"
nbdcopy "$uri" "$T_DIR/b" || t_fail "nbdcopy back"
cmp "$T_DIR/d" "$T_DIR/b" || t_fail "data differs after node 6 died"
log=$T_DIR/nvswapd-$name.log
t_wait 20 grep -q "parity pages not placed: no node outside their group is up (a group of 4 pages needs 5 nodes up)" "$log" ||
  t_fail "no warning naming the missing nodes: $(grep -m3 'short of room\|not placed' "$log")"
# the nodes have room: no "short of room" line may count parity pages
if grep "short of room" "$log" | grep -qv "our pages): 0 parity pages"; then
  t_fail "the lack of nodes was reported as a lack of room: $(grep -m1 'short of room' "$log")"
fi
t_log "$(grep -m1 'not placed: no node outside' "$log" | sed 's/.*warning: //')"
t_log PASS
