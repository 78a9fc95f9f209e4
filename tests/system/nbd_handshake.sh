#!/usr/bin/env bash
# nbd_handshake.sh - a client that connects and never finishes negotiating
# does not hold a connection slot for good: with --max-conns 2 two silent
# connections used to lock every other client out (a real client waited in
# the listen backlog forever). nvswapd closes them after
# --handshake-timeout; a connection past the handshake may idle as long as
# it likes (the kernel's swap client does).
T_TIMEOUT=${T_TIMEOUT:-60}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd python3 nbdinfo

sock=$T_DIR/nbd.sock
nbd_start "$sock" thand --size 64M --mram 8M --threads 1 --max-conns 3 --handshake-timeout 2
raw=$(dirname "$0")/nbd_raw.py
# Two silent connections and one idle negotiated one fill the 3 slots.
python3 "$raw" "$sock" thand silent 10 >"$T_DIR/silent.out" 2>&1 &
spid=$!
sleep 0.5
# A real client waits for a slot, and gets one once the silent ones are closed.
start=$SECONDS
timeout 15 nbdinfo --size "nbd+unix:///thand?socket=$sock" >"$T_DIR/size" 2>"$T_DIR/nbdinfo.err" ||
  t_fail "a client was locked out by silent connections: $(cat "$T_DIR/nbdinfo.err")"
[ "$(cat "$T_DIR/size")" = $((64 << 20)) ] || t_fail "nbdinfo: $(cat "$T_DIR/size")"
wait "$spid" || t_fail "silent connections: $(cat "$T_DIR/silent.out")"
t_log "$(tail -1 "$T_DIR/silent.out"); a waiting client got a slot after $((SECONDS - start)) s"
grep -q 'no handshake after 2 s' "$T_DIR/nvswapd-thand.log" || t_fail "the timeout is not logged"
[ "$(nbd_stat thand nbd_protocol_errors)" -ge 2 ] || t_fail "timeouts not counted"
# Bad values are refused at start.
"$(t_bin nvswapd)" -f --unix "$T_DIR/x.sock" --name tx --size 64M --handshake-timeout 5x 2>"$T_DIR/err"
[ $? = 2 ] || t_fail "--handshake-timeout 5x accepted"
grep -q 'handshake-timeout' "$T_DIR/err" || t_fail "no clear error: $(cat "$T_DIR/err")"
echo ok
