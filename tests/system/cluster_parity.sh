#!/usr/bin/env bash
# cluster_parity.sh - nvswapd's remote store with parity redundancy over six
# nvcached nodes on loopback (we are node 1; pages go to nodes 2-6), for
# parity (centralised, node 2 holds the parity pages) and parity-dist:
# nbdcopy round trip; kill -9 of a data node while data is being written,
# everything read back intact (lost pages rebuilt on the spot from their
# groups, the rest by the background pass); kill -9 of the node with parity
# pages, then of another data node: the recomputed parity rebuilds its pages.
# With redundancy none a dead node's pages give EIO, and nothing hangs.
T_TIMEOUT=${T_TIMEOUT:-240}
. "$(dirname "$0")/lib.sh"
t_sanitizer_only
. "$(dirname "$0")/cluster_common.bash"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd nbdcopy nbdinfo python3 cmp

ctl=$(t_bin nvcachectl) || exit 1
export NVCACHE_RUN_DIR=$T_DIR/run
stat_val() { cluster_stat "$@"; }

declare -A pid
start_cluster() { cluster_start 6 "$1"; }  # six fresh nodes: $conf, pid[]
stop_cluster() { cluster_stop; }

# Bad options are refused with a clear message.
start_cluster opts
for bad in parity:1 parity:9 parity:x raid5; do
  if timeout 20 "$(t_bin nvswapd)" -f --unix "$T_DIR/x.sock" --name clx --size 16M \
       --store remote --cluster "$conf" --node 1 --redundancy $bad >"$T_DIR/x.log" 2>&1; then
    t_fail "nvswapd accepted --redundancy $bad"
  fi
  grep -q "redundancy\|parity group" "$T_DIR/x.log" || t_fail "no message for $bad: $(cat "$T_DIR/x.log")"
done
stop_cluster

run_mode() {
  local mode=$1 victim=$2 pkill=$3 third=$4
  start_cluster "$mode"
  local sock=$T_DIR/nbd-$mode.sock name=clp${mode//-/}
  nbd_start "$sock" "$name" --size 48M --store remote --cluster "$conf" --node 1 \
    --redundancy "$mode:2"
  local pidd=$NBD_PID uri="nbd+unix:///$name?socket=$sock"
  mfail() { grep -v "^\s*$" "$T_DIR/nvswapd-$name.log" | tail -15 >&2; [ -z "${CP_KEEP:-}" ] || cp "$T_DIR/nvswapd-$name.log" "$CP_KEEP"; t_fail "$@"; }
  st() { nbd_stat "$name" "$1"; }

  head -c 16M /dev/urandom >"$T_DIR/data"
  truncate -s 48M "$T_DIR/data"
  nbdcopy "$T_DIR/data" "$uri" || mfail "$mode: nbdcopy to the device"
  nbdcopy "$uri" "$T_DIR/back" || mfail "$mode: nbdcopy from the device"
  cmp "$T_DIR/data" "$T_DIR/back" || mfail "$mode: data read back differs"
  local mapped par=0 dat=0
  mapped=$(st remote_slots_mapped)
  for i in 2 3 4 5 6; do
    par=$((par + $(stat_val $i pages_parity))); dat=$((dat + $(stat_val $i pages_data)))
  done
  t_log "$mode: $mapped slots mapped, $dat data pages and $par parity pages on the nodes, $(st parity_groups) groups"
  [ "$dat" -eq "$mapped" ] || mfail "$mode: $dat data pages on the nodes for $mapped slots"
  [ "$par" -ge $((mapped / 2 - 8)) ] && [ "$par" -le $((mapped / 2 + 8)) ] ||
    mfail "$mode: $par parity pages for $mapped slots in groups of 2"
  [ "$(stat_val 1 pages_data)" = 0 ] || mfail "$mode: pages on our own node"
  if [ "$mode" = parity ]; then
    [ "$(stat_val 2 pages_data)" = 0 ] || mfail "parity: data pages on the parity node"
    [ "$(stat_val 2 pages_parity)" = "$par" ] || mfail "parity: parity pages off the parity node"
  else
    for i in 2 3 4 5 6; do
      [ "$(stat_val $i pages_parity)" -gt 100 ] || mfail "parity-dist: node $i holds $(stat_val $i pages_parity) parity pages"
    done
  fi

  # Overwrite 8 MiB (in-use slots: old^new to the parity) and kill a data
  # node while that goes on.
  head -c 8M /dev/urandom | dd of="$T_DIR/data" bs=1M seek=4 conv=notrunc status=none
  local p0; p0=$(st remote_rebuild_passes)
  nbdcopy "$T_DIR/data" "$uri" & local cp=$!
  sleep 0.3
  kill -9 "${pid[$victim]}"
  wait $cp || mfail "$mode: writing while node $victim died"
  nbdcopy "$uri" "$T_DIR/back2" || mfail "$mode: nbdcopy after node $victim died"
  cmp "$T_DIR/data" "$T_DIR/back2" || mfail "$mode: data differs after node $victim died"
  [ "$(st remote_read_errors)" = 0 ] || mfail "$mode: read errors after one node died"
  [ "$(st parity_reconstructs)" -gt 0 ] || mfail "$mode: nothing rebuilt from parity"
  t_log "$mode: updates $(st parity_updates), rebuilt on the spot or in the background: $(st parity_reconstructs), re-homed $(st parity_rehomes)"
  # in-use overwrites: the storing node sent old^new to the parity node
  local fw=0 i
  for i in 2 3 4 5 6; do [ "$i" = "$victim" ] || fw=$((fw + $(stat_val $i parity_forwards))); done
  t_log "$mode: parity updates forwarded by the storing nodes: $fw"
  [ "$fw" -gt 0 ] || mfail "$mode: no in-use overwrite had its node forward the parity update"
  # the background pass leaves nothing on the dead node
  gone() { local n=0; for i in 2 3 4 5 6; do [ "$i" = "$victim" ] || n=$((n + $(stat_val $i pages_data))); done; [ $n -eq "$(st remote_slots_mapped)" ]; }
  t_wait 30 gone || mfail "$mode: pages of node $victim not rebuilt elsewhere"
  # and the pass has recomputed the parity pages node $victim held (losing
  # another node before that is a double failure)
  passed() { [ "$(st remote_rebuild_passes)" -gt "$p0" ]; }
  t_wait 30 passed || mfail "$mode: no recovery pass finished"
  # what an operator waits for before the next loss: nothing degraded
  healed() { [ "$(st remote_recovery_pending)" = 0 ] && [ "$(st remote_slots_degraded)" = 0 ] &&
             [ "$(st parity_groups_unprotected)" = 0 ]; }
  declared() { "$ctl" stats --swap "$name" | grep -q "^remote_node.$1: dead"; }
  t_wait 30 declared "$victim" || mfail "$mode: node $victim never declared dead"
  # (slots on it are degraded until the recovery pass re-homes them)
  t_wait 30 healed || mfail "$mode: still degraded after node $victim died: $(st remote_slots_degraded) slots, $(st parity_groups_unprotected) groups"

  # Kill a node holding parity pages: parity is recomputed from the data.
  local pr0; pr0=$(st parity_rebuilds)
  kill -9 "${pid[$pkill]}"
  prebuilt() { [ "$(st parity_rebuilds)" -gt "$pr0" ] && [ "$(st remote_rebuild_passes)" -gt 0 ]; }
  t_wait 30 prebuilt || mfail "$mode: parity not recomputed after node $pkill died"
  sleep 2
  nbdcopy "$uri" "$T_DIR/back3" || mfail "$mode: nbdcopy after node $pkill died"
  cmp "$T_DIR/data" "$T_DIR/back3" || mfail "$mode: data differs after node $pkill died"
  t_wait 30 declared "$pkill" || mfail "$mode: node $pkill never declared dead"
  t_wait 30 healed || mfail "$mode: still degraded after node $pkill died: $(st remote_slots_degraded) slots, $(st parity_groups_unprotected) groups"
  # ... and that parity is right: lose one more data node, read all back.
  kill -9 "${pid[$third]}"
  nbdcopy "$uri" "$T_DIR/back4" || mfail "$mode: nbdcopy after node $third died"
  cmp "$T_DIR/data" "$T_DIR/back4" || mfail "$mode: data differs after node $third died (recomputed parity wrong?)"
  [ "$(st remote_read_errors)" = 0 ] || mfail "$mode: read errors"
  t_log "$mode: after three node deaths: $(st parity_reconstructs) pages rebuilt, $(st parity_rebuilds) parity pages recomputed"
  kill "$pidd"; wait "$pidd" 2>/dev/null
  stop_cluster
}
for m in ${CLUSTER_PARITY_MODES:-parity parity-dist}; do
  case $m in
    parity) run_mode parity 4 2 5 ;;      # node 2: the parity node
    parity-dist) run_mode parity-dist 4 3 5 ;;
  esac
done

# The recovery pass alone (no reads racing it): a data node dies while the
# device is idle; with groups of 2 over four data nodes each lost page has
# nodes outside its group, so the pass rebuilds it in batches (pages
# fetched with PAGE_FETCH_MANY, stored on their new nodes with
# PAGE_STORE_MANY). Every page reads back intact, and again after a second
# data node dies: the new homes kept every group on distinct nodes.
start_cluster batch
sock=$T_DIR/nbd-batch.sock name=clpbatch
nbd_start "$sock" $name --size 32M --store remote --cluster "$conf" --node 1 --redundancy parity:2
uri="nbd+unix:///$name?socket=$sock"
st() { nbd_stat "$name" "$1"; }
head -c 24M /dev/urandom >"$T_DIR/d1"
truncate -s 32M "$T_DIR/d1"
nbdcopy "$T_DIR/d1" "$uri" || t_fail "batch: nbdcopy to the device"
lost=$(stat_val 4 pages_data)
[ "${lost:-0}" -gt 1000 ] || t_fail "batch: node 4 holds ${lost:-no} pages"
kill -9 "${pid[4]}"
pass_done() { [ "$(st parity_rebuilt_pages)" -gt 0 ] && [ "$(st remote_recovery_pending)" = 0 ]; }
t_wait 30 pass_done || t_fail "batch: no recovery pass after node 4 died"
b=$(st parity_rebuilt_batched)
t_log "batch: node 4 held $lost pages; the pass rebuilt $(st parity_rebuilt_pages) ($b in batches), re-homed $(st parity_rehomes)"
[ "$b" -ge $((lost * 9 / 10)) ] || t_fail "batch: only $b of $lost pages rebuilt in batches"
nbdcopy "$uri" "$T_DIR/b1" || t_fail "batch: nbdcopy after node 4 died"
cmp "$T_DIR/d1" "$T_DIR/b1" || t_fail "batch: data differs after the pass"
kill -9 "${pid[3]}"
nbdcopy "$uri" "$T_DIR/b2" || t_fail "batch: nbdcopy after node 3 died too"
cmp "$T_DIR/d1" "$T_DIR/b2" || t_fail "batch: data differs after a second data node died"
[ "$(st remote_read_errors)" = 0 ] || t_fail "batch: read errors"
# Once that is healed, the parity node dies while runs of in-use pages are
# overwritten. Two data nodes are left: every group's parity must go to
# the other one, so groups shrink to one member (a mirror) and the group
# table must grow to a group per page (it used to run out, and the pages
# that did not fit were lost). Every page reads back; a page that did get
# lost must read as an error, never as other data.
healed() { [ "$(st remote_recovery_pending)" = 0 ] && [ "$(st remote_slots_degraded)" = 0 ] &&
           [ "$(st parity_groups_unprotected)" = 0 ]; }
t_wait 30 healed || t_fail "batch: still degraded: $(st remote_slots_degraded) slots, $(st parity_groups_unprotected) groups"
head -c 24M /dev/urandom | dd of="$T_DIR/d1" conv=notrunc status=none
nbdcopy "$T_DIR/d1" "$uri" & cpid=$!
sleep 0.3
kill -9 "${pid[2]}"
wait $cpid || t_fail "batch: writing while the parity node died"
t_wait 30 healed || t_fail "batch: still degraded after the parity node died: $(st remote_slots_degraded) slots, $(st parity_groups_unprotected) groups"
if ! nbdcopy "$uri" "$T_DIR/b3" 2>"$T_DIR/b3.err"; then
  t_fail "batch: read failed after the parity node died ($(st remote_write_errors) pages lost, $(st remote_read_errors) read errors): $(head -3 "$T_DIR/b3.err")"
fi
cmp "$T_DIR/d1" "$T_DIR/b3" ||
  t_fail "batch: read back other data, without an error, after the parity node died ($(st remote_write_errors) pages lost)"
[ "$(st remote_write_errors)" = 0 ] || t_fail "batch: $(st remote_write_errors) pages lost after the parity node died"
t_log "batch: overwritten while the parity node died: every page intact; $(st parity_groups) groups of $(st parity_group_size) at most for $(st remote_slots_mapped) pages; $(grep -c 'table grown' "$T_DIR/nvswapd-$name.log") table growths"
kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
stop_cluster

# Groups that span every data node (groups of 4 over four data nodes): a
# lost page has no node outside its group, so the pass moves it into an
# open group, a batch at a time (recover_regroup: one PARITY_UPDATE_MANY
# per parity node takes the batch out of its groups, write_slots stores
# it into open groups). Every page reads back, and again after a second
# data node dies (the new groups are on distinct nodes, and span the
# three left, so the pass regroups once more).
start_cluster regroup
sock=$T_DIR/nbd-regroup.sock name=clpregroup
nbd_start "$sock" $name --size 16M --store remote --cluster "$conf" --node 1 --redundancy parity:4
uri="nbd+unix:///$name?socket=$sock"
st() { nbd_stat "$name" "$1"; }
head -c 16M /dev/urandom >"$T_DIR/d2"
nbdcopy "$T_DIR/d2" "$uri" || t_fail "regroup: nbdcopy to the device"
lost=$(stat_val 4 pages_data)
[ "${lost:-0}" -gt 500 ] || t_fail "regroup: node 4 holds ${lost:-no} pages"
kill -9 "${pid[4]}"
t_wait 30 pass_done || t_fail "regroup: no recovery pass after node 4 died"
r=$(st parity_rebuilt_regrouped)
t_log "regroup: node 4 held $lost pages; the pass rebuilt $(st parity_rebuilt_pages), $r moved into open groups in batches"
[ "$r" -ge $((lost * 9 / 10)) ] || t_fail "regroup: only $r of $lost pages regrouped in batches"
nbdcopy "$uri" "$T_DIR/b4" || t_fail "regroup: nbdcopy after node 4 died"
cmp "$T_DIR/d2" "$T_DIR/b4" || t_fail "regroup: data differs after the pass"
t_wait 30 healed || t_fail "regroup: still degraded: $(st remote_slots_degraded) slots, $(st parity_groups_unprotected) groups"
# the nodes hold exactly the pages the map says (nothing leaked by the
# moves), and the parity node a page per closed group (at most four open)
held() { local n=0 i; for i in "$@"; do n=$((n + $(stat_val $i pages_data))); done; echo $n; }
# (waited for: merging the groups left small moves pages in the background)
even() { [ "$(held "$@")" = "$(st remote_slots_mapped)" ]; }
t_wait 30 even 3 5 6 ||
  t_fail "regroup: nodes hold $(held 3 5 6) data pages for $(st remote_slots_mapped) mapped"
pp=$(stat_val 2 pages_parity) ng=$(st parity_groups)
[ "$pp" -le "$ng" ] && [ "$pp" -ge $((ng - 4)) ] ||
  t_fail "regroup: $pp parity pages on node 2 for $ng groups"
# a second data node dies; idle, so the pass (not reads) regroups again
r1=$(st parity_rebuilt_regrouped) p1=$(st remote_rebuild_passes)
kill -9 "${pid[3]}"
second() { [ "$(st remote_rebuild_passes)" -gt "$p1" ] && [ "$(st remote_recovery_pending)" = 0 ]; }
t_wait 30 second || t_fail "regroup: no recovery pass after node 3 died"
[ "$(st parity_rebuilt_regrouped)" -gt "$r1" ] || t_fail "regroup: the second pass regrouped nothing"
t_wait 30 healed || t_fail "regroup: still degraded after node 3 died: $(st remote_slots_degraded) slots"
nbdcopy "$uri" "$T_DIR/b5" || t_fail "regroup: nbdcopy after node 3 died too"
cmp "$T_DIR/d2" "$T_DIR/b5" || t_fail "regroup: data differs after a second data node died"
t_wait 30 even 5 6 ||
  t_fail "regroup: nodes hold $(held 5 6) data pages for $(st remote_slots_mapped) mapped after the second pass"
[ "$(st remote_read_errors)" = 0 ] || t_fail "regroup: read errors"
[ "$(st remote_write_errors)" = 0 ] || t_fail "regroup: $(st remote_write_errors) pages lost"
t_log "regroup: after two data nodes died: $(st parity_rebuilt_regrouped) pages regrouped in batches ($r1 by the first pass), every page intact"
kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
stop_cluster

# redundancy none: a dead node's pages fail with EIO, quickly.
start_cluster none
sock=$T_DIR/nbd-none.sock
nbd_start "$sock" clpnone --size 16M --store remote --cluster "$conf" --node 1 --redundancy none
uri="nbd+unix:///clpnone?socket=$sock"
head -c 16M /dev/urandom >"$T_DIR/d0"
nbdcopy "$T_DIR/d0" "$uri" || t_fail "none: nbdcopy to the device"
held3=$(stat_val 3 pages_data)
[ "${held3:-0}" -gt 0 ] || t_fail "none: node 3 holds no pages (${held3:-no answer})"
kill -9 "${pid[3]}"
if timeout 40 nbdcopy "$uri" "$T_DIR/b0" 2>"$T_DIR/none.err"; then
  t_fail "none: reading a dead node's pages succeeded"
fi
rc=$?
[ $rc -ne 124 ] || t_fail "none: reading a dead node's pages hung"
grep -qi "input/output\|EIO" "$T_DIR/none.err" || t_log "none: nbdcopy said: $(head -3 "$T_DIR/none.err")"
t_log "PASS"
