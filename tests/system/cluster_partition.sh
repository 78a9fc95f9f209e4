#!/usr/bin/env bash
# cluster_partition.sh - a node cut off past the heartbeat timeout, then
# back with the same incarnation (a partition: SIGSTOP, then SIGCONT), for
# parity-dist and mirror: five nvcached (we are node 1), nvswapd --size
# 32M, 16 MiB of random data. Node 3 is stopped; once declared dead its
# pages are rebuilt elsewhere. Resumed, it still holds those copies, now
# stale: nvswapd drops them (node 3's page count falls to what the slot map
# still places there), and every page of the device reads back right.
# With parity-dist the groups narrowed while node 3 was away (three nodes
# left for groups of three and a parity page) widen again once it is back.
T_TIMEOUT=${T_TIMEOUT:-240}
. "$(dirname "$0")/lib.sh"
t_sanitizer_only
. "$(dirname "$0")/cluster_common.bash"
. "$(dirname "$0")/nbd_common.bash"
cluster_swap_test
declare -A pid

run_mode() {
  local mode=$1 victim=3
  cluster_start 5 "$mode"
  local sock=$T_DIR/nbd-$mode.sock name=clpt${mode//-/}
  local log=$T_DIR/nvswapd-$name.log
  nbd_start "$sock" "$name" --size 32M --store remote --cluster "$conf" --node 1 \
    --redundancy "$mode"
  local pidd=$NBD_PID
  st() { nbd_stat "$name" "$1"; }
  mfail() { kill -CONT "${pid[$victim]}" 2>/dev/null; grep -v "^\s*$" "$log" | tail -15 >&2; t_fail "$mode: $*"; }
  # our copies on node N as nvswapd's slot map counts them
  mapped_on() { "$(t_bin nvcachectl)" stats --swap "$name" | sed -n "s/^remote_node\.$1: .* held=\([0-9]*\) .*/\1/p"; }
  pages_on() { echo $(( $(cluster_stat "$1" pages_data) + $(cluster_stat "$1" pages_parity) )); }

  head -c 16M /dev/urandom >"$T_DIR/data"
  cluster_nbd_io "$sock" "$name" "$T_DIR/data" w 0 16 || mfail "writes failed"
  local before; before=$(pages_on $victim)
  [ "$before" -gt 500 ] || mfail "node $victim holds only $before pages (test setup)"

  kill -STOP "${pid[$victim]}"
  rebuilt() { grep -q "node $victim is dead" "$log" && [ "$(st remote_recovery_pending)" = 0 ] &&
              [ "$(st remote_slots_degraded)" = 0 ]; }
  t_wait 60 rebuilt || mfail "node $victim's pages not rebuilt elsewhere while it was stopped"
  kill -CONT "${pid[$victim]}"
  back() { grep -q "node $victim is back with the same incarnation" "$log"; }
  t_wait 30 back || mfail "node $victim resumed, but no stale copies were dropped"
  if [ "$mode" = parity-dist ]; then
    # full width again: about one group per gsize mapped slots (the open
    # groups of the parity pool aside)
    wide() { [ $(( $(st parity_groups) * $(st parity_group_size) )) -le $(( $(st remote_slots_mapped) + 8 * $(st parity_group_size) )) ]; }
    t_wait 60 wide || mfail "groups did not widen again: $(st parity_groups) groups of $(st parity_group_size) for $(st remote_slots_mapped) slots"
    t_log "$mode: groups widened again: $(st parity_widened_pages) pages regrouped, $(st parity_groups) groups for $(st remote_slots_mapped) slots"
  fi
  local after mapped
  after=$(pages_on $victim) mapped=$(mapped_on $victim)
  t_log "$mode: node $victim held $before pages; after the partition $after (nvswapd maps $mapped there); $(st remote_stale_dropped) stale copies dropped"
  [ "$after" -le "$mapped" ] || mfail "node $victim still holds $after pages, $mapped of them mapped"
  [ "$(st remote_stale_dropped)" -gt 0 ] || mfail "no stale copy dropped on node $victim"
  local res; res=$(cluster_nbd_io "$sock" "$name" "$T_DIR/data" c 0 16) || mfail "page check failed to run"
  [ "$res" = "0 0" ] || mfail "pages unreadable or wrong after the partition: $res"
  # it takes pages again: new writes, then all read back
  head -c 8M /dev/urandom | dd of="$T_DIR/data" bs=1M seek=16 conv=notrunc status=none
  cluster_nbd_io "$sock" "$name" "$T_DIR/data" w 16 24 || mfail "writes after the partition failed"
  res=$(cluster_nbd_io "$sock" "$name" "$T_DIR/data" c 0 24) || mfail "page check failed to run"
  [ "$res" = "0 0" ] || mfail "pages unreadable or wrong after new writes: $res"
  kill "$pidd"; wait "$pidd" 2>/dev/null
  cluster_stop
}
for m in ${CLUSTER_PARTITION_MODES:-parity-dist mirror}; do run_mode "$m"; done
t_log "PASS"
