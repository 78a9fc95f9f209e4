#!/usr/bin/env bash
# fscl_stop.sh - nodes stopped (SIGTERM) in the middle of their work:
# 2,000 small files just written through one mount of four nodes, more
# than the nodes' object tables hold (256 records each), so each node is
# writing back to reclaim records and telling its shadow the blocks it
# cleans when the signal comes. Each must finish its stop (its last log
# line says so; no crash, no sanitizer report), and the mounts then
# unmount and exit 0, one of them at SIGTERM while a request of it waits
# for the stopped nodes. What the nodes held is in their NVRAM: restarted,
# every file reads back whole and reaches the backing.
T_TIMEOUT=${T_TIMEOUT:-120}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fscl_common.bash"
fscl_start
files() {  # files MODE DIR: write the 2,000 files, or check them
  python3 - "$1" "$2" <<'PY'
import os, random, sys
mode, d = sys.argv[1:]
if mode == "write":
    os.makedirs(d)
bad = 0
for k in range(2000):
    data = random.Random(k).randbytes(100 + k * 37 % 12000)
    p = os.path.join(d, "f%d" % k)
    if mode == "write":
        with open(p, "wb") as f:
            f.write(data)
    elif open(p, "rb").read() != data:
        bad += 1
if bad:
    sys.exit("%d of 2000 files read back wrong from %s" % (bad, d))
PY
}
files write "$T_DIR/m1/burst" || t_fail "2,000 small files through mount 1: $(fscl_why)"
fscl_stop_nodes
t_log "the nodes stopped cleanly in the middle of their write-backs"
# every node down: a stat through mount 1 waits for them (down_wait, 60 s);
# SIGTERM to that nvcachefs still ends it at once (libfuse joins its
# workers: the wait gives up)
stat -c %s "$T_DIR/m1/burst/f7" >/dev/null 2>&1 &
statp=$!
sleep 1
kill -0 $statp 2>/dev/null || t_fail "a stat through mount 1 with every node down did not wait"
kill -TERM "${mpid[1]}"
t_wait 10 eval "! kill -0 ${mpid[1]}" ||
  t_fail "nvcachefs did not end within 10 s of SIGTERM while a request waited for a down node"
wait "${mpid[1]}" || t_fail "nvcachefs exited $? at SIGTERM"
wait $statp
t_log "SIGTERM ends a mount whose request waits for a down node at once"
fusermount3 -u "$T_DIR/m1" 2>/dev/null
for ((i = 2; i <= FSCL_N; i++)); do
  fusermount3 -u "$T_DIR/m$i" || t_fail "unmount of node $i's mount failed"
  wait "${mpid[$i]}" || t_fail "node $i's nvcachefs exited $?"
done
fscl_no_sanitizer_reports
# restarted on their NVRAM: the files read back whole, and reach the
# backing
for ((i = 1; i <= FSCL_N; i++)); do cluster_node_restart $i fs2; done
for ((i = 1; i <= FSCL_N; i++)); do
  t_wait 15 cluster_sees $i $((FSCL_N - 1)) || t_fail "node $i does not see its peers after the restart"
done
fscl_mount 2
files check "$T_DIR/m2/burst" || t_fail "after the restart: $(fscl_why)"
t_wait 30 files check "$T_DIR/b/burst" || t_fail "the backing after the restart: $(files check "$T_DIR/b/burst" 2>&1)"
t_log "restarted, the nodes serve every file and write it back"
fusermount3 -u "$T_DIR/m2" || t_fail "unmount of node 2's mount failed"
wait "${mpid[2]}" || t_fail "node 2's nvcachefs exited $?"
fscl_stop_nodes
