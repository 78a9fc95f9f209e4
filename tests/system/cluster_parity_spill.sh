#!/usr/bin/env bash
# cluster_parity_spill.sh - parity redundancy with a spill file (--flash on
# disk), when the survivors of a node death have no room for everything:
# five nvcached (we are node 1; nodes 2-5 take pages), each capped at 16 MiB
# (nvcachectl shrink), nvswapd --size 48M. 20 MiB of random data is
# written, then node 3 is killed with -9 while the next 16 MiB go out
# (parity-dist) or after them (parity: then parity_rebuilt_pages must equal
# the data pages node 3 held, those rebuilt into the spill file included),
# and 8 MiB more after the recovery pass: the nodes left cannot take the
# rebuilt pages (smaller groups) nor the new writes, and those go to the
# spill file. No write fails (without the spill file some do: ENOSPC),
# every page reads back right (one READ per page), and once node 3
# restarts (without a cap: room returns) the spilled pages move back onto
# the nodes (remote_slots_spilled falls to 0). Also: the start warns that
# the device needs more than the cluster keeps after losing its largest
# node; a spill file on tmpfs is refused.
T_TIMEOUT=${T_TIMEOUT:-300}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_common.bash"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd cmp
cluster_swap_test
declare -A pid

run_mode() {
  local mode=$1 victim=3
  cluster_start 5 "$mode"
  local i
  for i in 2 3 4 5; do "$(t_bin nvcachectl)" shrink $i 16M >/dev/null || t_fail "shrink $i 16M"; done
  sleep 1     # the caps reach every peer's table (heartbeats of 200 ms)
  local sock=$T_DIR/nbd-$mode.sock name=clsp${mode//-/}
  local log=$T_DIR/nvswapd-$name.log
  nbd_start "$sock" "$name" --size 48M --store remote --cluster "$conf" --node 1 \
    --redundancy "$mode" --flash "$T_DIR/spill-$mode"
  local pidd=$NBD_PID
  st() { nbd_stat "$name" "$1"; }
  mfail() { grep -v "^\s*$" "$log" | tail -15 >&2; t_fail "$mode: $*"; }

  grep -q "after losing its largest node" "$log" || mfail "no capacity warning at start"
  head -c 44M /dev/urandom >"$T_DIR/data"
  cluster_nbd_io "$sock" "$name" "$T_DIR/data" w 0 20 || mfail "writes before the kill failed"
  local lost=
  if [ "$mode" = parity-dist ]; then
    cluster_nbd_io "$sock" "$name" "$T_DIR/data" w 20 36 &
    local wr=$!
    sleep 0.2
    kill -9 "${pid[$victim]}"
    wait $wr || mfail "a write failed after node $victim died"
  else
    # a quiet kill: the victim's data pages are the pages to rebuild
    cluster_nbd_io "$sock" "$name" "$T_DIR/data" w 20 36 || mfail "writes before the kill failed"
    lost=$(cluster_stat $victim pages_data)
    kill -9 "${pid[$victim]}"
  fi
  pass_done() { grep -q "recovery pass: [0-9]* pages rebuilt" "$log"; }
  t_wait 30 pass_done || mfail "no recovery pass after node $victim died"
  if [ -n "$lost" ]; then
    # every lost page rebuilt by the pass, those held in the spill file too
    rebuilt() { [ "$(st remote_recovery_pending)" = 0 ] && [ "$(st parity_rebuilt_pages)" -ge "$lost" ]; }
    t_wait 30 rebuilt
    t_log "$mode: node $victim held $lost data pages; parity_rebuilt_pages $(st parity_rebuilt_pages), $(st remote_slots_spilled) spilled"
    [ "$(st parity_rebuilt_pages)" = "$lost" ] ||
      mfail "parity_rebuilt_pages is $(st parity_rebuilt_pages), node $victim held $lost data pages"
    [ "$(st remote_slots_spilled)" -gt 0 ] || mfail "no rebuilt page went to the spill file (test setup)"
  fi
  cluster_nbd_io "$sock" "$name" "$T_DIR/data" w 36 44 || mfail "a write failed once the nodes were full"
  local res; res=$(cluster_nbd_io "$sock" "$name" "$T_DIR/data" c 0 44) || mfail "page check failed to run"
  t_log "$mode: after node $victim died: unreadable/wrong pages: $res; spilled now $(st remote_slots_spilled), $(st remote_spills) in all"
  [ "$res" = "0 0" ] || mfail "pages unreadable or wrong after one node died: $res"
  [ "$(st remote_write_errors)" = 0 ] || mfail "$(st remote_write_errors) write errors"
  # the last 8 MiB (2048 pages) find no room on the survivors; how many
  # rebuilt pages spill too depends on where the kill fell (parity-dist)
  [ "$(st remote_spills)" -ge 2048 ] || mfail "only $(st remote_spills) pages spilled: the survivors had room for the last writes (test setup)"
  grep -q "short of room.*in the spill file" "$log" || mfail "no short-of-room warning naming the spill file"

  # Room returns (the node comes back, empty): the spilled pages move back.
  cluster_node_restart $victim "$mode-2"
  unspilled() { [ "$(st remote_slots_spilled)" = 0 ]; }
  t_wait 90 unspilled || mfail "$(st remote_slots_spilled) pages still spilled after node $victim came back"
  res=$(cluster_nbd_io "$sock" "$name" "$T_DIR/data" c 0 44) || mfail "page check failed to run"
  [ "$res" = "0 0" ] || mfail "after the spilled pages moved back (unreadable, wrong): $res"
  t_log "$mode: node $victim back: spilled pages moved to the nodes ($(st remote_holds_placed)), every page right"
  kill "$pidd"; wait "$pidd" 2>/dev/null
  cluster_stop
}

# A spill file on tmpfs is still refused (swap backed by tmpfs deadlocks).
CLUSTER_MEM=16M cluster_start 4 opts
if timeout 20 "$(t_bin nvswapd)" -f --unix "$T_DIR/x.sock" --name clx --size 16M \
     --store remote --cluster "$conf" --node 1 --redundancy parity --flash "$T_SHM/spill" >"$T_DIR/x.log" 2>&1; then
  t_fail "nvswapd accepted a spill file on tmpfs"
fi
grep -q "on tmpfs" "$T_DIR/x.log" || t_fail "no tmpfs refusal: $(cat "$T_DIR/x.log")"
cluster_stop

for m in ${CLUSTER_PARITY_MODES:-parity-dist parity}; do run_mode "$m"; done
t_log "PASS"
