#!/usr/bin/env bash
# cluster_shrink.sh - adaptive capacity with page migration: six nvcached
# nodes on loopback (nvswapd is node 1; pages go to nodes 2-6), for mirror,
# parity-dist (groups of 4 and of 3) and parity (the parity node shrinks).
# 32 MiB written, then node 3 is shrunk to nothing
# (`nvcachectl shrink 3 0`) while an overwrite runs: nvswapd migrates every
# page it had there to the other nodes (MIGRATE -> UPDATE -> INVALIDATE,
# parity groups updated), nothing is lost, every page is still redundant
# (a node killed afterwards loses nothing), and once the cap is lifted
# (`nvcachectl grow 3`) node 3 takes new pages again.
T_TIMEOUT=${T_TIMEOUT:-300}
. "$(dirname "$0")/lib.sh"
t_sanitizer_only
. "$(dirname "$0")/cluster_common.bash"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd nbdcopy python3 cmp

ctl=$(t_bin nvcachectl) || exit 1
export NVCACHE_RUN_DIR=$T_DIR/run
# SHRINK_KEEP=DIR: keep the daemons' logs there
[ -z "${SHRINK_KEEP:-}" ] || t_cleanup "mkdir -p '$SHRINK_KEEP'; cp $T_DIR/*.log '$SHRINK_KEEP'/"
stat_val() { cluster_stat "$@"; }

# set_mem SIZE: node 4's MemAvailable (of 16 GiB)
set_mem() {
  local kb=$(( $(echo "$1" | sed 's/G$/*1048576/; s/M$/*1024/') ))
  printf 'MemTotal: 16777216 kB\nMemAvailable: %d kB\n' "$kb" >"$T_DIR/meminfo4.tmp"
  mv "$T_DIR/meminfo4.tmp" "$T_DIR/meminfo4"
}

# start_cluster TAG: six fresh nodes, config in $conf, pids in pid[].
declare -A pid
# node 4 reads its MemAvailable from a file we control
cluster_node_args() { [ "$1" != 4 ] || echo --meminfo "$T_DIR/meminfo4" --reserve 1G; }
start_cluster() { set_mem 8G; cluster_start 6 "$1"; }
stop_cluster() { cluster_stop; }

# The command itself: sizes, and what is refused.
start_cluster cmd
"$ctl" shrink 2 16M | grep -q "offer capped at 16" || t_fail "shrink 2 16M: no confirmation"
[ "$(stat_val 2 shrink_cap_bytes)" = $((16 << 20)) ] || t_fail "shrink cap not in the stats"
[ "$(stat_val 2 offered_bytes)" -le $((16 << 20)) ] || t_fail "offer above the shrink cap"
"$ctl" grow 2 >/dev/null || t_fail "grow 2"
[ "$(stat_val 2 shrink_cap_bytes)" = none ] || t_fail "grow did not lift the cap"
"$ctl" send --node 2 shrink 0 >/dev/null || t_fail "send shrink 0"
[ "$(stat_val 2 offered_bytes)" = 0 ] || t_fail "shrink 0 still offers $(stat_val 2 offered_bytes)"
"$ctl" send --node 2 shrink none >/dev/null || t_fail "shrink none"
[ "$(stat_val 2 offered_bytes)" -gt 0 ] || t_fail "shrink none: still offering nothing"
if "$ctl" shrink 2 lots >/dev/null 2>&1; then t_fail "shrink 2 lots accepted"; fi
if "$ctl" shrink 2 >/dev/null 2>&1; then t_fail "shrink without a size accepted"; fi
grep -q "shrink to 16.*by the operator" "$T_DIR/node2-cmd.log" || t_fail "shrink not logged"
grep -q "shrink cap lifted" "$T_DIR/node2-cmd.log" || t_fail "grow not logged"
stop_cluster

run_mode() {
  local mode=$1 red=$2 sn=$3 victim=$4
  start_cluster "$mode"
  local sock=$T_DIR/nbd-$mode.sock name=shr${mode//-/}
  nbd_start "$sock" "$name" --size 64M --store remote --cluster "$conf" --node 1 \
    --redundancy "$red"
  local pidd=$NBD_PID uri="nbd+unix:///$name?socket=$sock"
  mfail() { grep -v "^\s*$" "$T_DIR/nvswapd-$name.log" | tail -15 >&2; t_fail "$@"; }
  st() { nbd_stat "$name" "$1"; }
  local copies=1; [ "$mode" = mirror ] && copies=2

  head -c 32M /dev/urandom >"$T_DIR/data"
  truncate -s 64M "$T_DIR/data"
  nbdcopy "$T_DIR/data" "$uri" || mfail "$mode: nbdcopy to the device"
  local heldsn mapped
  heldsn=$(stat_val $sn pages)
  mapped=$(st remote_slots_mapped)
  [ "${heldsn:-0}" -gt 100 ] || mfail "$mode: node $sn holds ${heldsn:-no} pages"
  t_log "$mode: $mapped slots mapped, node $sn holds $heldsn pages ($(stat_val $sn pages_parity) parity)"

  # Shrink node $sn to nothing while 8 MiB are overwritten.
  head -c 8M /dev/urandom | dd of="$T_DIR/data" bs=1M seek=12 conv=notrunc status=none
  nbdcopy "$T_DIR/data" "$uri" & local cp=$!
  sleep 0.3
  "$ctl" shrink $sn 0 >/dev/null || mfail "$mode: nvcachectl shrink $sn 0"
  wait $cp || mfail "$mode: writing while node $sn shrank"
  emptysn() { [ "$(stat_val $sn pages)" = 0 ]; }
  t_wait 120 emptysn || mfail "$mode: node $sn still holds $(stat_val $sn pages_data) data and $(stat_val $sn pages_parity) parity pages"
  nbdcopy "$uri" "$T_DIR/back" || mfail "$mode: nbdcopy from the device"
  cmp "$T_DIR/data" "$T_DIR/back" || mfail "$mode: data differs after node $sn shrank"
  [ "$(st remote_migrations)" -gt 0 ] || mfail "$mode: no migrations counted"
  [ "$(st remote_read_errors)" = 0 ] || mfail "$mode: read errors"
  [ "$(st remote_write_errors)" = 0 ] || mfail "$mode: write errors"
  grep -q "migration pass: .* moved off node $sn" "$T_DIR/nvswapd-$name.log" || mfail "$mode: no migration pass logged"
  grep -q "shrink done" "$T_DIR/node$sn-$mode.log" || mfail "$mode: node $sn did not log the end of its shrink"
  healed() { [ "$(st remote_recovery_pending)" = 0 ] && [ "$(st remote_slots_degraded)" = 0 ] &&
             { [ "$mode" = mirror ] || [ "$(st parity_groups_unprotected)" = 0 ]; }; }
  t_wait 30 healed || mfail "$mode: degraded after the migration: $(st remote_slots_degraded) slots, $(st parity_groups_unprotected) groups"
  # every page where the map says, no copy left behind anywhere. Once
  # healed: a regroup (a parity page no node outside its group could
  # take) still moves pages, and five nodes' counts are not read at one
  # instant (an ASan run read 8193 for 8192 slots once, mid-regroup); a
  # copy really left behind keeps the sum over for good.
  local dat
  counted() {
    local i; dat=0
    for i in 2 3 4 5 6; do dat=$((dat + $(stat_val $i pages_data))); done
    mapped=$(st remote_slots_mapped)
    [ "$dat" -eq $((mapped * copies)) ]
  }
  counted || t_wait 10 counted || { counted; mfail "$mode: $dat data pages on the nodes for $mapped slots x $copies"; }
  t_log "$mode: $(st remote_migrations) pages migrated in $(st remote_migration_passes) passes, $(st remote_migration_ms_per_page) ms/page; $(grep -c "migration pass:" "$T_DIR/nvswapd-$name.log") passes moved pages"

  # Lift the cap: node $sn takes new pages again (16 MiB never written).
  "$ctl" grow $sn >/dev/null || mfail "$mode: nvcachectl grow $sn"
  # (over_offer=0 alone held before the grow, the node being empty; the
  # placement needs the grown offer, which reaches nvswapd with the
  # node's next capacity report: free pages above 0)
  grown() { "$ctl" stats --swap "$name" | grep -q "^remote_node.$sn: up free_pages=[1-9][0-9]* .* over_offer=0$"; }
  t_wait 30 grown || mfail "$mode: nvswapd does not see node $sn's grown offer: $("$ctl" stats --swap "$name" | grep "^remote_node.$sn:")"
  head -c 16M /dev/urandom | dd of="$T_DIR/data" bs=1M seek=32 conv=notrunc status=none
  nbdcopy "$T_DIR/data" "$uri" || mfail "$mode: nbdcopy after the grow"
  local again; again=$(stat_val $sn pages)
  [ "${again:-0}" -gt 0 ] || mfail "$mode: node $sn takes no new pages after the grow"
  t_log "$mode: after the grow node $sn holds $again pages"

  # Local memory pressure on node 4: MemAvailable falls under its 1G
  # reserve, its offer under what it holds, and nvswapd moves the excess
  # away; when the memory is idle again, node 4 offers it again.
  if [ "$mode" = mirror ]; then
    local held4; held4=$(stat_val 4 pages)
    set_mem 1000M
    under() { [ "$(stat_val 4 over_offer_bytes)" = 0 ] && [ "$(stat_val 4 pages)" -lt "$held4" ]; }
    t_wait 60 under || mfail "$mode: node 4 under memory pressure still holds $(stat_val 4 pages) pages, $(stat_val 4 over_offer_bytes) bytes over its offer"
    grep -q "local processes need memory" "$T_DIR/node4-$mode.log" || mfail "$mode: node 4 did not log the pressure"
    nbdcopy "$uri" "$T_DIR/back1" || mfail "$mode: nbdcopy after node 4's memory pressure"
    cmp "$T_DIR/data" "$T_DIR/back1" || mfail "$mode: data differs after node 4's memory pressure"
    t_log "$mode: memory pressure on node 4: $held4 -> $(stat_val 4 pages) pages held, $(st remote_migrations) migrations in all"
    set_mem 8G
    idle() { [ "$(stat_val 4 offered_bytes)" -gt $((1 << 30)) ]; }
    t_wait 10 idle || mfail "$mode: node 4 does not grow back ($(stat_val 4 offered_bytes) offered)"
  fi

  # The moved pages are redundant: lose another data node, read all back.
  kill -9 "${pid[$victim]}"
  nbdcopy "$uri" "$T_DIR/back2" || mfail "$mode: nbdcopy after node $victim died"
  cmp "$T_DIR/data" "$T_DIR/back2" || mfail "$mode: data differs after node $victim died"
  [ "$(st remote_read_errors)" = 0 ] || mfail "$mode: read errors after node $victim died"
  # and redundant again once the recovery pass is over (groups of N over
  # N nodes left: regrouped so that each has a node for its parity)
  declared() { "$ctl" stats --swap "$name" | grep -q "^remote_node.$victim: dead"; }
  t_wait 30 declared || mfail "$mode: node $victim never declared dead"
  t_wait 60 healed || mfail "$mode: still degraded after node $victim died: $(st remote_slots_degraded) slots, $(st parity_groups_unprotected) groups"
  nbdcopy "$uri" "$T_DIR/back3" || mfail "$mode: nbdcopy after the recovery"
  cmp "$T_DIR/data" "$T_DIR/back3" || mfail "$mode: data differs after the recovery"
  kill "$pidd"; wait "$pidd" 2>/dev/null
  stop_cluster
}
for m in ${CLUSTER_SHRINK_MODES:-mirror parity-dist parity-dist:3 parity}; do
  case $m in
    # (groups of 4 over five nodes: node 3's pages cannot move within
    # their groups, they are regrouped; groups of 3: they move within)
    mirror) run_mode mirror mirror 3 5 ;;
    parity-dist) run_mode parity-dist parity-dist 3 5 ;;
    parity-dist:3) run_mode parity-dist3 parity-dist:3 3 5 ;;
    parity) run_mode parity parity 2 5 ;;    # node 2: the parity node
  esac
done
t_log "PASS"
