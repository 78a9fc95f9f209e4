#!/usr/bin/env bash
# cluster_parity_unsure.sh - an overwrite cut by a transport error after
# the storing node took it, its delta reaching the parity node late (the
# owner cannot know whether the parity page has it): the group's parity is
# recomputed from its members (a whole store, which a delta sent before it
# cannot undo), so that a later node death rebuilds every page right. Five nvcached (we are node 1; node
# 2 holds the parity pages, nodes 3-5 the data), node 3 with the test-only
# NVCACHED_TEST_STALL_FORWARD=3:MS:N (every Nth overwrite stalls MS ms
# between its store and its delta, past nvswapd's 3 s request timeout);
# nvswapd --redundancy parity; 16 MiB written, then overwritten (in-use
# overwrites, deltas forwarded to node 2); once the stalled deltas have
# landed, node 4 is killed and everything is read back. (When the owner
# XORed the page it rebuilt out of the parity instead, the late delta
# stayed in it: 12 pages of 4096 came back wrong.)
T_TIMEOUT=${T_TIMEOUT:-120}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_common.bash"
. "$(dirname "$0")/nbd_common.bash"
cluster_swap_test nbdcopy cmp

stall_ms=4000
NVCACHED_TEST_STALL_FORWARD=3:$stall_ms:${UNSURE_EVERY:-10} cluster_start 5 unsure
grep -q "test mode: every" "$T_DIR/node3-unsure.log" || t_fail "node 3 did not take the test mode"
sock=$T_DIR/nbd.sock name=clpu
nbd_start "$sock" $name --size 16M --store remote --cluster "$conf" --node 1 --redundancy parity
uri="nbd+unix:///$name?socket=$sock"
st() { nbd_stat "$name" "$1"; }
mfail() { grep -v "^\s*$" "$T_DIR/nvswapd-$name.log" | grep -v "info: connection" | tail -${MFAIL_LINES:-10} >&2; t_fail "$@"; }
head -c 16M /dev/urandom >"$T_DIR/d"
nbdcopy "$T_DIR/d" "$uri" || mfail "the first copy failed"
head -c 16M /dev/urandom >"$T_DIR/d"
nbdcopy "$T_DIR/d" "$uri" || mfail "the overwrites failed"
sleep $((stall_ms / 1000 + 1))    # the stalled deltas land
stalls=$(grep -c "an overwrite stalls" "$T_DIR/node3-unsure.log")
nbdcopy "$uri" "$T_DIR/back" || mfail "the read back failed"
cmp -s "$T_DIR/d" "$T_DIR/back" || mfail "pages differ after the overwrites"
unsure=$(st parity_overwrites_unsure)
t_log "node 3 stalled $stalls overwrites: ${unsure:-?} unsure, $(st parity_rebuilds) parity pages recomputed"
[ "$stalls" -gt 0 ] || mfail "node 3 stalled no overwrite (test setup)"
[ "${unsure:-0}" -gt 0 ] || mfail "no overwrite counted unsure after $stalls stalls"
healed() { [ "$(st remote_recovery_pending)" = 0 ] && [ "$(st parity_groups_unprotected)" = 0 ]; }
t_wait 30 healed || mfail "groups still unprotected: $(st parity_groups_unprotected)"
kill -9 "${pid[4]}"
nbdcopy "$uri" "$T_DIR/back2" || mfail "the read back after node 4 died failed"
res=$(cmp -l "$T_DIR/d" "$T_DIR/back2" | awk '{ p[int(($1 - 1) / 4096)] = 1 } END { print length(p) }')
t_log "after node 4 died: $res pages wrong, $(st parity_reconstructs) rebuilt from parity"
[ "$res" = 0 ] || mfail "$res pages read back wrong after node 4 died (a parity page took a delta its group does not show)"
[ "$(st remote_read_errors)" = 0 ] || mfail "$(st remote_read_errors) read errors"
[ "$(st parity_reconstructs)" -gt 0 ] || mfail "nothing rebuilt from parity (test setup)"
kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
cluster_stop
t_log "PASS"
