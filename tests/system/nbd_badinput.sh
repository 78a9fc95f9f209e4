#!/usr/bin/env bash
# nbd_badinput.sh - bad input never crashes nvswapd nor touches another
# client's data: bad magic, unknown client flags, over-long options,
# requests past the end, misaligned or oversized requests, unknown commands
# and flags, clients vanishing mid-handshake and mid-request. Each gets the
# NBD spec's answer (nbd_raw.py checks it byte by byte).
T_TIMEOUT=${T_TIMEOUT:-120}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd python3

sock=$T_DIR/nbd.sock
nbd_start "$sock" tbad --size 256M --mram 8M
python3 "$(dirname "$0")/nbd_raw.py" "$sock" tbad badinput ||
  t_fail "a bad-input case got the wrong answer (see above)"
kill -0 "$NBD_PID" || t_fail "nvswapd died"
[ "$(nbd_stat tbad nbd_protocol_errors)" -ge 3 ] || t_fail "protocol errors not counted"
[ "$(nbd_stat tbad nbd_request_errors)" -ge 15 ] || t_fail "request errors not counted"
# The server still serves a fresh client.
python3 "$(dirname "$0")/nbd_raw.py" "$sock" tbad sum 0 65536 >/dev/null ||
  t_fail "server unusable after the bad input"
grep -E 'closing it|vanished|over the' "$T_DIR/nvswapd-tbad.log" | head
echo ok
