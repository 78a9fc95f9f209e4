#!/usr/bin/env bash
# cluster_capacity.sh - adaptive capacity: a node offers the memory that is
# idle beyond its reserve (capped by mem=), reports it to the others in its
# heartbeats (they see it in their node table), refuses new pages when local
# processes need the memory back, and takes pages again once it is idle.
# MemAvailable comes from a file the test writes (--meminfo), so "local
# memory pressure" is exact and harmless.
T_TIMEOUT=${T_TIMEOUT:-90}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_common.bash"

nvcached=$(t_bin nvcached) || exit 1
client=$(t_bin nvcache-client) || exit 1
ctl=$(t_bin nvcachectl) || exit 1
t_require_cmd python3
export NVCACHE_RUN_DIR=$T_DIR/run

read -r -a ports < <(cluster_free_ports 2)
head -c 32 /dev/urandom | base64 >"$T_DIR/secret"
chmod 600 "$T_DIR/secret"
conf=$T_DIR/cluster.conf
printf 'secret secret\nnode 1 127.0.0.1:%s\nnode 2 127.0.0.1:%s mem=1M\n' \
  "${ports[0]}" "${ports[1]}" >"$conf"

meminfo() {  # meminfo AVAILABLE_KB
  printf 'MemTotal: 4194304 kB\nMemFree: 1 kB\nMemAvailable: %s kB\n' "$1" \
    >"$T_DIR/meminfo.tmp" && mv "$T_DIR/meminfo.tmp" "$T_DIR/meminfo"
}
stat_val() { "$ctl" stats --node "$1" 2>/dev/null | awk -F': ' -v k="$2" '$1 == k { print $2 }'; }
is() { [ "$(stat_val "$1" "$2")" = "$3" ]; }
peer_offer_is() {  # peer_offer_is NODE PEER BYTES: NODE's table says PEER offers BYTES
  "$ctl" stats --node "$1" 2>/dev/null | grep -q "^node\.$2: alive .* offered=$3 "
}

# Node 1: 1 GiB reserve, 1 GiB + 1 MiB available -> offers 1 MiB (256 pages).
meminfo $((1024 * 1024 + 1024))
for i in 1 2; do
  "$nvcached" --cluster "$conf" --node $i -f --heartbeat 100 --timeout 1000 \
    --reserve 1G --meminfo "$T_DIR/meminfo" >"$T_DIR/node$i.log" 2>&1 &
  t_cleanup "kill -9 $! 2>/dev/null"
done
t_wait 10 is 1 nodes_alive 1 || t_fail "nodes do not see each other"
t_wait 5 is 1 offered_bytes $((1 << 20)) || t_fail "node 1 offers $(stat_val 1 offered_bytes), expected 1 MiB"
# Node 2: mem=1M caps an offer of ~3 GiB idle.
t_wait 5 is 2 offered_bytes $((1 << 20)) || t_fail "node 2 offers $(stat_val 2 offered_bytes), expected its mem=1M"
# Node 2 learns node 1's offer from the heartbeats (the IPTable).
t_wait 5 peer_offer_is 2 1 $((1 << 20)) || t_fail "node 2 does not see node 1's offer"

# 256 pages fit, the 257th does not. The fake MemAvailable does not shrink
# as pages are stored (the real one would), so the operator's cap holds the
# offer at 1 MiB while we fill.
"$ctl" send --node 1 "limit 1M" >/dev/null || t_fail "limit"
"$client" --cluster "$conf" --node 1 fill 0 256 >/dev/null || t_fail "256 pages did not fit"
if "$client" --cluster "$conf" --node 1 fill 256 1 2>"$T_DIR/err"; then
  t_fail "a page beyond the offer was accepted"
fi
grep -q "No space left" "$T_DIR/err" || t_fail "unexpected error: $(cat "$T_DIR/err")"
[ "$(stat_val 1 nospace_refused)" -ge 1 ] || t_fail "refusal not counted"

# Local processes need memory: MemAvailable falls 512 KiB under the reserve
# (the held 1 MiB already left MemAvailable, so the offer becomes 512 KiB).
meminfo $((1024 * 1024 - 512))
t_wait 5 is 1 offered_bytes $((512 << 10)) || t_fail "offer did not shrink: $(stat_val 1 offered_bytes)"
grep -q "local processes need memory" "$T_DIR/node1.log" || t_fail "no log line for the shrink"
t_wait 5 peer_offer_is 2 1 $((512 << 10)) || t_fail "node 2 did not learn of the shrink"
# Held pages stay readable; overwrites work; new pages are refused.
"$client" --cluster "$conf" --node 1 verify 0 256 >/dev/null || t_fail "pages lost on shrink"
"$client" --cluster "$conf" --node 1 drop 0 128 >/dev/null || t_fail "drop"
if "$client" --cluster "$conf" --node 1 fill 0 1 2>/dev/null; then
  t_fail "a new page was accepted while the node is over its offer"
fi

# Memory idle again (and the operator's cap lifted): the offer grows back
# and pages are taken.
"$ctl" send --node 1 "limit 0" >/dev/null || t_fail "limit 0"
meminfo $((3 * 1024 * 1024))
t_wait 5 is 1 offered_bytes $(( (128 << 12) + (2 << 30) )) || t_fail "offer did not grow: $(stat_val 1 offered_bytes)"
"$client" --cluster "$conf" --node 1 fill 0 128 >/dev/null || t_fail "pages refused after the memory came back"
# The operator's cap (nvcachectl send --node 1 'limit SIZE').
"$ctl" send --node 1 "limit 1M" >/dev/null || t_fail "limit"
t_wait 5 is 1 offered_bytes $((1 << 20)) || t_fail "limit not applied"
t_log "PASS"
