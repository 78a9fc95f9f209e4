#!/usr/bin/env bash
# cluster_ctl.sh - 'nvcachectl status|stats|watch --cluster FILE' against
# four nvcached on loopback: every node listed alive with the pages it holds
# (pages stored with nvcache-client, and by nvswapd --store remote with
# parity when nbdcopy is there), the same counters its control socket
# gives; a node killed with -9 shows as dead, a stopped one (SIGSTOP: it
# accepts connections and never answers) as unreachable, and the command
# still returns; a wrong secret and a cluster with no node up give a clear
# error and a non-zero exit status.
T_TIMEOUT=${T_TIMEOUT:-180}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_common.bash"

nvcached=$(t_bin nvcached) || exit 1
client=$(t_bin nvcache-client) || exit 1
ctl=$(t_bin nvcachectl) || exit 1
t_require_cmd python3

export NVCACHE_RUN_DIR=$T_DIR/run
head -c 32 /dev/urandom | base64 >"$T_DIR/secret"
chmod 600 "$T_DIR/secret"
read -r -a ports < <(cluster_free_ports 4)
[ ${#ports[@]} -eq 4 ] || t_fail "could not find free ports"
conf=$T_DIR/cluster.conf
{ echo "secret secret"
  for i in 1 2 3 4; do echo "node $i 127.0.0.1:${ports[$((i-1))]} mem=256M"; done; } >"$conf"

declare -A pid
for i in 1 2 3 4; do
  "$nvcached" --cluster "$conf" --node $i -f --heartbeat 200 --timeout 1000 \
    >"$T_DIR/node$i.log" 2>&1 &
  pid[$i]=$!
  t_cleanup "kill -CONT ${pid[$i]} 2>/dev/null; kill -9 ${pid[$i]} 2>/dev/null"
done
stat_val() { "$ctl" stats --node "$1" 2>/dev/null | awk -F': ' -v k="$2" '$1 == k { print $2 }'; }
alive_is() { [ "$(stat_val "$1" nodes_alive)" = "$2" ]; }
for i in 1 2 3 4; do t_wait 15 alive_is $i 3 || t_fail "node $i does not see its peers"; done

# status --cluster, bounded (a hang is a failure, not a wait), into $T_DIR/st
cstatus() { timeout 30 "$ctl" status --cluster "$conf" "$@" >"$T_DIR/st" 2>"$T_DIR/st.err"; }
col() { awk -v n="$1" -v c="$2" '$1 == n { print $c }' "$T_DIR/st"; }  # node, column
summary() { sed -n "s/.*[ ,]$1 \([0-9]*\).*/\1/p" "$T_DIR/st" | tail -1; }

# 1. Pages: 300 on node 2, 200 on node 3, 100 on node 4 (nvcache-client);
# with nbdcopy also a swap device with parity (nvswapd is node 1's client:
# parity pages on node 2, data on 3 and 4).
"$client" --cluster "$conf" --node 2 --owner 11 fill 0 300 >/dev/null || t_fail "fill node 2"
"$client" --cluster "$conf" --node 3 --owner 11 fill 0 200 >/dev/null || t_fail "fill node 3"
"$client" --cluster "$conf" --node 4 --owner 12 fill 0 100 >/dev/null || t_fail "fill node 4"
want_data=600 want_parity=0
if command -v nbdcopy >/dev/null; then
  . "$(dirname "$0")/nbd_common.bash"
  sock=$T_DIR/nbd.sock
  nbd_start "$sock" clctl --size 16M --store remote --cluster "$conf" --node 1 \
    --redundancy parity:2
  head -c 4M /dev/urandom >"$T_DIR/data"
  nbdcopy "$T_DIR/data" "nbd+unix:///clctl?socket=$sock" || t_fail "nbdcopy to the device"
  mapped=$(nbd_stat clctl remote_slots_mapped)
  want_data=$((want_data + mapped))
  # parity pages as the nodes' own control sockets count them
  for i in 1 2 3 4; do want_parity=$((want_parity + $(stat_val $i pages_parity))); done
  [ "$want_parity" -gt 0 ] || t_fail "no parity pages after writing through nvswapd"
  t_log "nvswapd: $mapped slots on the nodes, $want_parity parity pages"
else
  t_log "no nbdcopy: pages from nvcache-client only (no parity pages)"
fi

cstatus || t_fail "status --cluster failed: $(cat "$T_DIR/st.err")"
cat "$T_DIR/st" >&2
for i in 1 2 3 4; do
  [ "$(col $i 3)" = alive ] || t_fail "node $i not alive in: $(cat "$T_DIR/st")"
  [ "$(col $i 10)" = alive:3 ] || t_fail "node $i: peers do not see it alive: $(col $i 10)"
  # the row says what the node's control socket says
  [ "$(col $i 7)" = "$(stat_val $i pages_data)" ] || t_fail "node $i: pages_data $(col $i 7) != $(stat_val $i pages_data)"
  [ "$(col $i 8)" = "$(stat_val $i pages_parity)" ] || t_fail "node $i: pages_parity $(col $i 8)"
  [ "$(col $i 4)" = "$(stat_val $i incarnation)" ] || t_fail "node $i: incarnation $(col $i 4)"
done
# owners: 11 on nodes 2 and 3, 12 on node 4, nvswapd's device on 2-4
extra=0; command -v nbdcopy >/dev/null && extra=1
[ "$(col 1 9)" = 0 ] && [ "$(col 2 9)" = $((1 + extra)) ] && [ "$(col 3 9)" = $((1 + extra)) ] &&
  [ "$(col 4 9)" = $((1 + extra)) ] || t_fail "owners: $(cat "$T_DIR/st")"
grep -q "4/4 nodes answered" "$T_DIR/st" || t_fail "summary: $(tail -1 "$T_DIR/st")"
[ "$(summary pages_data)" = "$want_data" ] || t_fail "pages_data $(summary pages_data), stored $want_data"
[ "$(summary pages_parity)" = "$want_parity" ] || t_fail "pages_parity $(summary pages_parity), want $want_parity"
[ "$(summary offered)" -ge 4 ] || t_fail "offered: $(tail -1 "$T_DIR/st")"
t_log "status --cluster: 4 alive, $want_data data pages, $want_parity parity pages"

# 2. stats --cluster: every node's counters, headed by the node.
timeout 30 "$ctl" stats --cluster "$conf" >"$T_DIR/stats" || t_fail "stats --cluster failed"
[ "$(grep -c '^== node [1-4] (127.0.0.1:[0-9]*): alive' "$T_DIR/stats")" = 4 ] ||
  t_fail "stats --cluster blocks: $(grep '^==' "$T_DIR/stats")"
for i in 1 2 3 4; do
  got=$(awk -v n="$i" '/^== node / { cur = $3 } cur == n && $1 == "pages_data:" { print $2 }' "$T_DIR/stats")
  [ "$got" = "$(stat_val $i pages_data)" ] || t_fail "stats --cluster node $i pages_data $got"
done
grep -q "^requests: " "$T_DIR/stats" || t_fail "stats --cluster without the counters"

# 3. watch --cluster refreshes the table until stopped.
timeout 3 "$ctl" watch --cluster "$conf" 1 >"$T_DIR/watch"
[ "$(grep -c 'nodes answered' "$T_DIR/watch")" -ge 2 ] || t_fail "watch --cluster: $(head -c 300 "$T_DIR/watch")"

# 4. A stopped node accepts connections and never answers: the command
# gives up on it after --timeout and shows it unreachable (from here).
kill -STOP "${pid[3]}"
cstatus --timeout 1000 || t_fail "status with node 3 stopped: $(cat "$T_DIR/st.err")"
case "$(col 3 3)" in unreachable|dead) ;; *) t_fail "stopped node 3 shows as $(col 3 3)" ;; esac
grep -q "^3 .*from here: .*timed out" "$T_DIR/st" || t_fail "no reason for node 3: $(cat "$T_DIR/st")"
[ "$(col 2 3)" = alive ] || t_fail "node 2 not alive while 3 is stopped"
kill -CONT "${pid[3]}"
for i in 1 2 4; do t_wait 15 alive_is $i 3 || t_fail "node $i does not see node 3 again"; done

# 5. kill -9: the others declare node 4 dead; we show it so, with their word.
kill -9 "${pid[4]}"
node4_dead() { cstatus && [ "$(col 4 3)" = dead ] && [ "$(col 4 10)" = dead:3 ]; }
t_wait 20 node4_dead || t_fail "node 4 never shown dead: $(cat "$T_DIR/st")"
grep -q "^4 .*from here: .*refused" "$T_DIR/st" || t_fail "no reason for node 4: $(cat "$T_DIR/st")"
grep -q "3/4 nodes answered" "$T_DIR/st" || t_fail "summary after the kill: $(tail -1 "$T_DIR/st")"
cat "$T_DIR/st" >&2
grep -q "^  node 4: dead (from here: " "$T_DIR/st" || t_fail "no problem line for node 4"
grep -q "^  node 1: 1 peers it sees dead$" "$T_DIR/st" || t_fail "no problem line for node 1's dead peer"
# (--cluster FILE may come after the other options)
timeout 30 "$ctl" status --json --cluster "$conf" >"$T_DIR/st" 2>"$T_DIR/st.err" ||
  t_fail "status --json --cluster: $(cat "$T_DIR/st.err")"
/usr/bin/python3 - "$T_DIR/st" "$(stat_val 1 incarnation)" <<'EOF' || t_fail "status --cluster --json: $(cat "$T_DIR/st")"
import json, sys
d = json.load(open(sys.argv[1]))
n = {x["id"]: x for x in d["nodes"]}
assert sorted(n) == [1, 2, 3, 4], n
assert n[4]["state"] == "dead" and "error" in n[4], n[4]
assert n[1]["state"] == "alive" and n[1]["incarnation"] == int(sys.argv[2]), n[1]
assert n[1]["problems"] == ["1 peers it sees dead"], n[1]
assert n[2]["pages_data"] >= 0 and n[2]["offered_bytes"] > 0, n[2]
EOF
timeout 30 "$ctl" stats --cluster "$conf" >"$T_DIR/stats" || t_fail "stats --cluster with node 4 dead"
grep -q "^== node 4 .*: dead; from here: " "$T_DIR/stats" || t_fail "stats --cluster node 4: $(grep '^== node 4' "$T_DIR/stats")"

# 6. A wrong secret: a clear error, non-zero.
head -c 32 /dev/urandom | base64 >"$T_DIR/wrong"
chmod 600 "$T_DIR/wrong"
sed 's/^secret secret$/secret wrong/' "$conf" >"$T_DIR/wrong.conf"
if cstatus_w=$(timeout 30 "$ctl" status --cluster "$T_DIR/wrong.conf" 2>&1); then
  t_fail "status with a wrong secret succeeded: $cstatus_w"
fi
grep -q "authentication failed at 3 of 4 nodes.*secret" <<<"$cstatus_w" || t_fail "wrong secret: $cstatus_w"
grep -q "^1 .*auth-failed" <<<"$cstatus_w" || t_fail "wrong secret row: $cstatus_w"

# 7. No node up: non-zero, says so.
for i in 1 2 3; do kill -9 "${pid[$i]}"; done
for i in 1 2 3 4; do wait "${pid[$i]}" 2>/dev/null; done
if out=$(timeout 30 "$ctl" status --cluster "$conf" 2>&1); then
  t_fail "status with no node up succeeded: $out"
fi
grep -q "no node answered" <<<"$out" || t_fail "no node up: $out"
t_log "PASS"
