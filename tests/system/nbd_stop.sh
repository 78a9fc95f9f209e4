#!/usr/bin/env bash
# nbd_stop.sh - SIGTERM stops nvswapd cleanly: the request a client is in
# the middle of is finished and answered, requests that arrive after the
# stop get NBD_ESHUTDOWN (the NBD spec's answer) instead of a dropped
# connection, idle and negotiating connections are closed at once, and the
# daemon exits 0 without waiting out its drain time. (Before, every
# connection was dropped at the signal, with a WRITE half received and
# unanswered.)
T_TIMEOUT=${T_TIMEOUT:-60}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd python3

sock=$T_DIR/nbd.sock
nbd_start "$sock" tstop --size 64M --mram 8M
start=$SECONDS
python3 "$(dirname "$0")/nbd_raw.py" "$sock" tstop stop "$NBD_PID" ||
  t_fail "graceful stop: wrong answer (see above); log: $(tail -5 "$T_DIR/nvswapd-tstop.log")"
t_wait 10 sh -c "! kill -0 $NBD_PID 2>/dev/null" || t_fail "nvswapd still running after SIGTERM"
wait "$NBD_PID"; rc=$?
[ "$rc" = 0 ] || t_fail "nvswapd exit status $rc after SIGTERM"
# All connections closed on their own: no 5 s drain timeout.
[ $((SECONDS - start)) -lt 5 ] || t_fail "stop took $((SECONDS - start)) s"
grep -q 'finish their requests' "$T_DIR/nvswapd-tstop.log" || t_fail "the stop is not logged"
! grep -q 'still busy' "$T_DIR/nvswapd-tstop.log" || t_fail "connections were dropped at the deadline"
[ ! -e "$sock" ] || t_fail "socket left behind"
t_log "in-flight WRITE answered, later requests ESHUTDOWN, exit 0 in $((SECONDS - start)) s"
echo ok
