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

# A SIGTERM during a long start-up stops it there: a 512 GiB export's 10
# GiB of per-page tables, zeroed and locked under mlockall, took half a
# minute here and a signal waited for all of it (a 1 TiB export: a
# minute). The files the start made are removed.
bin=$(t_bin nvswapd)
if t_is_sanitized "$bin"; then
  t_log "SIGTERM during start-up: skipped (an ASan build does not mlockall)"
  echo ok
  exit 0
fi
log=$T_DIR/nvswapd-big.log
"$bin" -f --unix "$T_DIR/big.sock" --name big --size 512G --dram 64M \
  --nvram "$T_SHM/big.mram" --flash "$T_DIR/big.flash" >"$log" 2>&1 &
big=$!
t_cleanup "kill $big 2>/dev/null; wait $big 2>/dev/null"
t_wait 20 grep -q 'reserving' "$log" || t_fail "no 'reserving' line: $(tail -3 "$log")"
sleep 0.3
grep -q 'serving export' "$log" &&
  t_fail "the start-up was over before the signal; this test needs a longer one"
kill -TERM "$big"
start=$SECONDS
t_wait 10 sh -c "! kill -0 $big 2>/dev/null" ||
  t_fail "nvswapd still starting 10 s after SIGTERM: $(tail -2 "$log")"
wait "$big"; rc=$?
[ "$rc" = 0 ] || t_fail "exit status $rc after SIGTERM during start-up: $(tail -3 "$log")"
grep -q 'stopped by a signal during start-up' "$log" || t_fail "not logged: $(tail -3 "$log")"
! grep -q 'serving export' "$log" || t_fail "it went on to serve"
[ ! -e "$T_SHM/big.mram" ] || t_fail "NVRAM file left behind"
[ ! -e "$T_DIR/big.flash" ] || t_fail "flash file left behind"
t_log "SIGTERM during a 512 GiB start-up: stopped in $((SECONDS - start)) s, nothing left behind"
echo ok
