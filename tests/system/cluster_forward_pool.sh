#!/usr/bin/env bash
# cluster_forward_pool.sh - the nodes forward parity deltas on a small
# pool of connections per peer (cluster/peerpool.h), not one per inbound
# connection: five nvcached with --max-conns 32 (we are node 1; nodes 2-5
# take pages), nvswapd --redundancy parity-dist (12 connections to each
# node, every node a parity node of the others), three rounds of 32 MiB
# overwrites from four NBD connections. At every node the inbound
# connections stay within nvswapd's, the heartbeats and --peer-conns from
# each other data node; none is refused, every delta is taken (no forward
# error, no overwrite left unsure) and every page reads back right. (With
# a forwarding connection per inbound one, the peers refused hundreds.)
# Also: a bad --peer-conns is refused with a message.
T_TIMEOUT=${T_TIMEOUT:-120}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_common.bash"
. "$(dirname "$0")/nbd_common.bash"
cluster_swap_test nbdcopy cmp

for bad in 0 17 x; do
  if timeout 10 "$(t_bin nvcached)" --cluster /dev/null --node 1 -f --peer-conns $bad >"$T_DIR/bad.log" 2>&1; then
    t_fail "nvcached accepted --peer-conns $bad"
  fi
  grep -q "peer-conns $bad: not a count" "$T_DIR/bad.log" || t_fail "no message for --peer-conns $bad: $(cat "$T_DIR/bad.log")"
done

K=4
cluster_node_args() { echo --no-mlock --max-conns 32 --peer-conns $K; }
cluster_start 5 pool
sock=$T_DIR/nbd.sock name=clfp
nbd_start "$sock" $name --size 32M --store remote --cluster "$conf" --node 1 --redundancy parity-dist
uri="nbd+unix:///$name?socket=$sock"
st() { nbd_stat "$name" "$1"; }
mfail() { grep -v "^\s*$" "$T_DIR/nvswapd-$name.log" | tail -10 >&2; t_fail "$@"; }
head -c 32M /dev/urandom >"$T_DIR/d"
nbdcopy "$T_DIR/d" "$uri" || mfail "the first copy failed"
declare -A base
for i in 2 3 4 5; do base[$i]=$(cluster_stat $i connections_active); done
# the peak of every node's inbound connections while the overwrites run
( while :; do for i in 2 3 4 5; do echo "$i $(cluster_stat $i connections_active)"; done; sleep 0.05; done ) >"$T_DIR/samples" &
smp=$!
t_cleanup "kill $smp 2>/dev/null"
for r in 1 2 3; do
  head -c 32M /dev/urandom >"$T_DIR/d"
  nbdcopy --connections=4 --requests=64 "$T_DIR/d" "$uri" || mfail "overwrite round $r failed"
done
kill $smp; wait $smp 2>/dev/null
nbdcopy "$uri" "$T_DIR/back" || mfail "the read back failed"
cmp -s "$T_DIR/d" "$T_DIR/back" || mfail "pages differ after the overwrites"
for i in 2 3 4 5; do
  peak=$(awk -v n=$i '$1 == n && $2 > m { m = $2 } END { print m + 0 }' "$T_DIR/samples")
  fc=$(cluster_stat $i forward_conns) fw=$(cluster_stat $i parity_forwards)
  t_log "node $i: inbound connections ${base[$i]} before, peak $peak; $fc forwarding connections out, $fw deltas forwarded, $(cluster_stat $i forward_conn_waits) waits for one"
  [ "$(cluster_stat $i connections_refused)" = 0 ] || mfail "node $i refused $(cluster_stat $i connections_refused) connections"
  [ "$(cluster_stat $i parity_forward_errors)" = 0 ] || mfail "node $i: $(cluster_stat $i parity_forward_errors) deltas not forwarded"
  [ "$fw" -gt 0 ] || mfail "node $i forwarded no delta (test setup: no in-use overwrites)"
  [ "$peak" -le $((base[$i] + 3 * K)) ] || mfail "node $i: $peak inbound connections, more than ${base[$i]} + $K from each of 3 other data nodes"
  [ "$fc" -le $((4 * K)) ] || mfail "node $i: $fc forwarding connections, more than $K to each of 4 nodes"
done
[ "$(st remote_write_errors)" = 0 ] || mfail "$(st remote_write_errors) write errors"
[ "$(st parity_overwrites_unsure)" = 0 ] || mfail "$(st parity_overwrites_unsure) overwrites left unsure"
kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
cluster_stop
t_log "PASS"
