#!/usr/bin/env bash
# cluster_parity_stall.sh - a node that stalls while nvswapd overwrites
# pages (SIGSTOP: a hung process, or a partition that heals) must not
# corrupt parity when it comes back. nvswapd gives up on its requests
# after its timeout and handles those pages another way; the node, once
# resumed, still ran the overwrites queued in its socket and forwarded
# their old^new deltas to the parity nodes, which XORed them into parity
# pages already right. The next single failure then rebuilt wrong bytes,
# silently (5-11 pages of 25,600 in a new user's tryout, three runs of
# three). A node now serves nothing from a peer that has hung up (the
# sender gave up), and a parity node refuses a delta sent before the
# page's last whole store.
T_TIMEOUT=${T_TIMEOUT:-240}
. "$(dirname "$0")/lib.sh"
t_sanitizer_only
. "$(dirname "$0")/cluster_common.bash"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd nbdcopy cmp

export NVCACHE_RUN_DIR=$T_DIR/run
declare -A pid
CLUSTER_MEM=64M cluster_start 6 stall
sock=$T_DIR/nbd.sock
nbd_start "$sock" stall --size 128M --store remote --cluster "$conf" --node 1 \
  --redundancy parity-dist:4
uri="nbd+unix:///stall?socket=$sock"
sfail() { tail -8 "$T_DIR/nvswapd-stall.log" >&2; t_fail "$@"; }

head -c 100M /dev/urandom >"$T_DIR/data"
head -c 50M /dev/urandom >"$T_DIR/over"
nbdcopy "$T_DIR/data" "$uri" || sfail "nbdcopy to the device"
# Node 3 stalls while the first 50 MiB are overwritten, and comes back.
kill -STOP "${pid[3]}"
sleep 1
nbdcopy "$T_DIR/over" "$uri" || sfail "overwrite while node 3 stalls"
sleep 5
kill -CONT "${pid[3]}"
sleep 6
dd if="$T_DIR/over" of="$T_DIR/data" conv=notrunc status=none
truncate -s 128M "$T_DIR/data"
stale=$(cluster_stat 2 stale_refused)
for i in 4 5 6; do stale=$((stale + $(cluster_stat $i stale_refused))); done
t_log "node 3 stalled and came back; late parity deltas refused by the others: $stale; requests of hung-up peers dropped by node 3: $(grep -c 'hung up with requests' "$T_DIR/node3-stall.log")"
nbdcopy "$uri" "$T_DIR/back" || sfail "read back after the stall"
cmp -s "$T_DIR/data" "$T_DIR/back" || sfail "data differs after the stall"
# One failure now (node 4 stalls for good): its pages come from parity.
kill -STOP "${pid[4]}"
nbdcopy "$uri" "$T_DIR/back" || sfail "read back with node 4 gone"
kill -CONT "${pid[4]}"
n=$(cmp -l "$T_DIR/data" "$T_DIR/back" | awk '{ p[int(($1 - 1) / 4096)] = 1 } END { print length(p) }')
[ "$n" = 0 ] || sfail "$n pages wrong after node 4 failed (rebuilt from parity a late delta had changed)"
t_log "node 4 failed next: every page rebuilt right"

# Node 6 killed and restarted at once (same address): nvswapd's pooled
# connections to its old process break one by one, and each break put
# the node down for a second: the restarted node stayed out of use for
# up to 12 s, and the recovery its restart started regrouped every page
# without it, for good. A connection to a process seen restarted since
# now says nothing about the new one.
errs6() { "$(t_bin nvcachectl)" stats --swap stall | sed -n 's/^remote_node\.6: .* errors=\([0-9]*\).*/\1/p'; }
e0=$(errs6)
kill -9 "${pid[6]}"
while kill -0 "${pid[6]}" 2>/dev/null; do sleep 0.05; done
"$(t_bin nvcached)" --cluster "$conf" --node 6 -f --heartbeat 200 --timeout 1000 \
  >"$T_DIR/node6-again.log" 2>&1 &
pid[6]=$!
t_cleanup "kill -9 ${pid[6]} 2>/dev/null"
t_wait 15 sh -c "grep -q 'node 6 restarted' '$T_DIR/nvswapd-stall.log'" || sfail "node 6's restart not seen"
t_wait 20 sh -c "[ \$('$(t_bin nvcachectl)' stats --node 6 | awk '\$1 == \"pages:\" { print \$2 }') -gt 0 ]" ||
  { grep "node 6" "$T_DIR/nvswapd-stall.log" | tail -5 >&2; "$(t_bin nvcachectl)" stats --node 6 >&2; sfail "the restarted node 6 was given no page by the recovery"; }
down=$(( $(errs6) - e0 ))
[ "$down" -le 1 ] || sfail "node 6 put down $down times after its restart"
nbdcopy "$uri" "$T_DIR/back" || sfail "read back after node 6's restart"
kill -CONT "${pid[4]}" 2>/dev/null
cmp -s "$T_DIR/data" "$T_DIR/back" || sfail "data differs after node 6's restart"
t_log "node 6 restarted: used again by the recovery ($(cluster_stat 6 pages) pages), put down $down times"
echo ok
