#!/usr/bin/env bash
# ctl_status.sh - 'nvcachectl status' and 'nvcachectl metrics' against
# three kinds of daemon at once (an nvcachefs mount, an nvswapd, two
# nvcached): one table line each with the right pid, rates that follow
# the traffic, a problem line for a dead peer and for a dead daemon's
# socket, a killed mount named by its path with how to clear it, JSON
# that parses with the same facts, and Prometheus text that Prometheus's
# own parser reads.
T_TIMEOUT=${T_TIMEOUT:-120}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd_common.bash"
. "$(dirname "$0")/cluster_common.bash"
t_require_root
t_require_cmd fusermount3 /usr/bin/python3
/usr/bin/python3 -c 'import prometheus_client.parser' 2>/dev/null ||
  t_skip "needs python3-prometheus-client (tools/install-deps.sh installs it)"
ctl=$(t_bin nvcachectl)
export NVCACHE_RUN_DIR=$T_DIR/run
cd "$T_DIR" || t_fail "no scratch dir"

mkdir -p "$T_DIR/b" "$T_DIR/m"
"$(t_bin nvcachefs)" "$T_DIR/m" -f -o "backing=$T_DIR/b,nvram=$T_SHM/nv,cache_size=32M" \
  >"$T_DIR/fs.log" 2>&1 &
fs_pid=$!
t_cleanup "kill -9 $fs_pid"
t_cleanup "t_umount $T_DIR/m"
t_wait 20 t_is_mounted "$T_DIR/m" || t_fail "no mount: $(tail -3 "$T_DIR/fs.log")"
nbd_start "$T_DIR/sw.sock" st --size 32M --mram 32M
cluster_start 2 st

echo "== no problem: one line per daemon, exit 0"
"$ctl" status --interval 0.2 >"$T_DIR/s1" || t_fail "status exited $? with nothing wrong: $(cat "$T_DIR/s1")"
cat "$T_DIR/s1"
head -1 "$T_DIR/s1" | grep -Eq '^KIND +NAME +PID +UPTIME +STATE +FIGURES$' || t_fail "no header"
[ "$(wc -l <"$T_DIR/s1")" = 5 ] || t_fail "want a header and 4 lines"
grep -Eq "^fs +$T_DIR/m +$fs_pid +[0-9]+s +ok +.*dirty" "$T_DIR/s1" || t_fail "no fs line with its pid"
grep -Eq "^swap +st +$NBD_PID +[0-9]+s +ok +read" "$T_DIR/s1" || t_fail "no swap line with its pid"
grep -Eq "^node +1 +${pid[1]} +[0-9]+s +ok +nodes alive 2 of 2" "$T_DIR/s1" || t_fail "no node 1 line"
grep -Eq "^node +2 +${pid[2]} " "$T_DIR/s1" || t_fail "no node 2 line"

echo "== rates follow the traffic"
# 24 MiB written through the swap device while status samples 1 s
/usr/bin/python3 - "$T_DIR/sw.sock" <<'EOF' &
import socket, struct, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
def rd(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b)); assert c; b += c
    return b
rd(18); s.sendall(struct.pack(">I", 1))                       # fixed newstyle
name = b"st"
s.sendall(struct.pack(">QII", 0x49484156454F5054, 1, len(name)) + name)  # EXPORT_NAME
rd(10 + 124)
buf = b"\xab" * (1 << 20)
end = time.time() + 3
i = 0
while time.time() < end:
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, i, (i % 24) << 20, len(buf)) + buf)
    assert struct.unpack(">IIQ", rd(16))[1] == 0
    i += 1
    time.sleep(0.02)
EOF
writer=$!
t_cleanup "kill $writer 2>/dev/null"
# and 1 MiB written through the mount every ~25 ms meanwhile
( end=$((SECONDS + 3)); i=0
  while [ $SECONDS -lt $end ]; do
    dd if=/dev/zero of="$T_DIR/m/f" bs=1M count=1 seek=$((i % 16)) conv=notrunc status=none
    i=$((i + 1)); sleep 0.02
  done ) &
fswriter=$!
t_cleanup "kill $fswriter 2>/dev/null"
sleep 0.5
"$ctl" status --interval 1 >"$T_DIR/s2"
wait $writer || t_fail "the NBD writer failed"
wait $fswriter
fsmbs=$(awk '$1 == "fs" { for (i = 1; i < NF; i++) if ($i == "write") print $(i+1) }' "$T_DIR/s2")
awk -v m="$fsmbs" 'BEGIN { exit !(m > 2 && m < 500) }' ||
  t_fail "fs write rate '$fsmbs' MB/s while writing ~40: $(cat "$T_DIR/s2")"
echo "fs write rate while writing: $fsmbs MB/s"
mbs=$(awk '$1 == "swap" { for (i = 1; i < NF; i++) if ($i == "write") print $(i+1) }' "$T_DIR/s2")
awk -v m="$mbs" 'BEGIN { exit !(m > 5 && m < 200) }' ||
  t_fail "swap write rate $mbs MB/s, want about 40 (1 MiB every ~25 ms): $(cat "$T_DIR/s2")"
echo "swap write rate while writing: $mbs MB/s"

echo "== JSON: the same daemons, pids and states"
"$ctl" status --json --interval 0 >"$T_DIR/j1" || t_fail "status --json exited $?"
/usr/bin/python3 - "$T_DIR/j1" "$fs_pid" "$NBD_PID" "${pid[1]}" "${pid[2]}" <<'EOF' || t_fail "JSON: $(cat "$T_DIR/j1")"
import json, sys
d = json.load(open(sys.argv[1]))["daemons"]
got = sorted((x["kind"], x["pid"], x["state"]) for x in d)
want = sorted([("fs", int(sys.argv[2]), "ok"), ("swap", int(sys.argv[3]), "ok"),
               ("node", int(sys.argv[4]), "ok"), ("node", int(sys.argv[5]), "ok")])
assert got == want, (got, want)
sw = [x for x in d if x["kind"] == "swap"][0]
assert sw["figures"]["pages"] >= 6144, sw      # 24 MiB written
assert all(x["uptime_s"] >= 0 for x in d)
# whole counts are JSON integers, exact (not 2.10011e+10)
nd = [x for x in d if x["kind"] == "node"][0]
assert isinstance(nd["figures"]["offered_bytes"], int), nd
EOF

echo "== Prometheus text: parsed by prometheus_client"
"$ctl" metrics >"$T_DIR/m1" || t_fail "metrics exited $?"
/usr/bin/python3 - "$T_DIR/m1" <<'EOF' || t_fail "metrics: $(head -40 "$T_DIR/m1")"
import sys
from prometheus_client.parser import text_string_to_metric_families
seen = {}
for fam in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in fam.samples:
        seen[(s.name, tuple(sorted(s.labels.items())))] = s.value
up = {k[1]: v for k, v in seen.items() if k[0] == "nvcache_up"}
assert len(up) == 4 and all(v == 1 for v in up.values()), up
w = [v for k, v in seen.items() if k[0] == "nvcache_swap_nbd_writes"]
assert w and w[0] > 0, w
peers = [v for k, v in seen.items() if k[0] == "nvcache_node_node_up"]
assert peers == [1, 1], peers
EOF

echo "== a dead peer and a dead daemon's socket: problem lines, exit 1"
kill -9 "${pid[2]}"
t_wait 10 cluster_sees 1 0 || t_fail "node 1 does not see node 2 dead"
"$ctl" status --interval 0 >"$T_DIR/s3" && t_fail "status exited 0 with a dead node: $(cat "$T_DIR/s3")"
cat "$T_DIR/s3"
grep -Eq "^node +1 +${pid[1]} .* problem +nodes alive 1 of 2" "$T_DIR/s3" || t_fail "node 1 not shown with a problem"
grep -Eq "^node +2 +- +- +down " "$T_DIR/s3" || t_fail "node 2 not shown down"
grep -q "^  node 1: peer 2 dead$" "$T_DIR/s3" || t_fail "no 'peer 2 dead' line"
grep -q "^  node 2: not running: a dead daemon's stale socket" "$T_DIR/s3" || t_fail "no 'not running' line"
"$ctl" metrics >"$T_DIR/m2"
grep -q '^nvcache_up{name="2",kind="node"} 0$' "$T_DIR/m2" || t_fail "metrics: node 2 not down"
grep -q '^nvcache_node_node_up{name="1",peer="2"} 0$' "$T_DIR/m2" || t_fail "metrics: peer 2 not down"

echo "== a killed nvcachefs: its mount is named, and what to do"
# watch goes on past the kill: the last stats stay, an error line follows
"$ctl" watch "$T_DIR/m" 1 >"$T_DIR/w1" 2>&1 &
watcher=$!
t_cleanup "kill $watcher 2>/dev/null"
t_wait 15 grep -q "^mountpoint: $T_DIR/m" "$T_DIR/w1" || t_fail "watch showed no stats: $(cat "$T_DIR/w1")"
kill -9 "$fs_pid"
wait "$fs_pid" 2>/dev/null
t_wait 15 grep -q "^nvcachectl: .* at [0-9:]*: .*; trying again$" "$T_DIR/w1" ||
  t_fail "watch did not go on past the daemon's death: $(tail -3 "$T_DIR/w1")"
kill "$watcher"
grep -q "^--- [0-9:]*$" "$T_DIR/w1" || t_fail "watch to a file: no time line per round"
grep -q "$(printf '\033')" "$T_DIR/w1" && t_fail "watch to a file wrote terminal escapes"
# on a terminal (script(1) gives it one), a daemon down at the start:
# exit 1, the screen not cleared
script -qec "timeout 10 '$ctl' watch '$T_DIR/m'" /dev/null >"$T_DIR/w2" 2>&1
[ $? = 1 ] || t_fail "watch of a dead daemon did not exit 1: $(cat "$T_DIR/w2")"
grep -q "Connection refused" "$T_DIR/w2" || t_fail "watch of a dead daemon: no reason: $(cat "$T_DIR/w2")"
grep -q "$(printf '\033')" "$T_DIR/w2" && t_fail "watch cleared the screen before its error"
"$ctl" status --interval 0 >"$T_DIR/s4" && t_fail "status exited 0 with a dead mount"
cat "$T_DIR/s4"
grep -Eq "^fs +$T_DIR/m +- +- +down " "$T_DIR/s4" || t_fail "the dead mount not shown by its path"
grep -q "^  fs $T_DIR/m: nvcachefs is not running but its mount stays.*fusermount3 -u '$T_DIR/m'" "$T_DIR/s4" ||
  t_fail "no line saying how to clear the dead mount"
t_umount "$T_DIR/m"
"$ctl" status --interval 0 >"$T_DIR/s5"
grep -q "^  fs .*: not running: a dead daemon's stale socket" "$T_DIR/s5" ||
  t_fail "an unmounted dead mount's socket not called stale: $(cat "$T_DIR/s5")"

echo "== usage errors"
"$ctl" status --interval x >/dev/null 2>&1; [ $? = 2 ] || t_fail "a bad --interval is not a usage error"
"$ctl" status --bogus >/dev/null 2>&1; [ $? = 2 ] || t_fail "an unknown option is not a usage error"
echo "ok"
