#!/usr/bin/env bash
# quickstart_stop.sh - the README's first command, started and stopped the
# way a new user does: tools/quickstart.sh mounts nvcachefs (here on a
# scratch mount point and backing dir) for every user, with the backing's
# permissions, and starts nvswapd; a file copied
# in just before `--stop` must be whole in the backing directory as soon
# as `--stop` returns (fusermount3 -u returns before the daemon has written
# back: --stop must wait for it), and nothing of ours may be left running.
# Then --cluster 3: refused with node 1's own error while another
# cluster's nodes hold their control sockets; then three nodes and three
# mounts over one backing, a file
# written through one mount read through another; node 2's nvcached
# killed and quickstart run again restarts it while a copy through
# node 1's mount waits for it; a one-node quick start over the cluster's
# backing is refused; node 3 killed, --stop (which finds the mounts and
# backing the cluster was started with) exits 1 saying its NVRAM file
# holds what it had; started again, then whole in the backing when
# --stop --cluster returns, and nothing of ours left running.
T_TIMEOUT=${T_TIMEOUT:-180}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_common.bash"
# running PID: the process runs (one that exited and that its parent has
# not reaped yet, a zombie, does not)
running() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [ -n "$st" ] && [[ $st != Z* ]]; }
not_running() { ! running "$1"; }
t_require_root
t_require_cmd fusermount3 pgrep setpriv
root=$(cd "$(dirname "$0")/../.." && pwd)
# quickstart builds and runs build/; one run of this test is enough
[ "$(basename "$NVCACHE_BUILD")" = build ] || t_skip "quickstart runs build/, tested with that build only"
export NVCACHE_RUN_DIR=$T_DIR/run
mnt=$T_DIR/mnt backing=$T_DIR/backing
nv=/dev/shm/nvcache-$(echo "${mnt#/}" | tr / -).nvram
qs() { bash "$root/tools/quickstart.sh" --mount "$mnt" --backing "$backing" "$@"; }
t_cleanup "rm -f $nv /dev/shm/nvswapd-swap.mram /var/log/nvcachefs-$(echo "${T_DIR#/}" | tr / -)-mnt*.log /var/log/nvcachefs-$(echo "${T_DIR#/}" | tr / -)-cm-*.log"
t_cleanup "qs --stop >/dev/null 2>&1; fusermount3 -uz $mnt 2>/dev/null"

NVCACHE_SWAP_SIZE=64M qs >"$T_DIR/start.out" 2>&1 || { cat "$T_DIR/start.out" >&2; t_fail "quickstart did not start"; }
grep -q "mounted over $backing" "$T_DIR/start.out" || t_fail "no mount message: $(cat "$T_DIR/start.out")"
t_is_mounted "$mnt" || t_fail "$mnt is not mounted"
[ -S "$NVCACHE_RUN_DIR/nvswapd.sock" ] || t_fail "nvswapd socket missing"
fspid=$(pgrep -f "nvcachefs $mnt( |\$)" | head -1)
swpid=$(cat "$NVCACHE_RUN_DIR/quickstart/nvswapd.pid")
[ -n "$fspid" ] && [ -n "$swpid" ] || t_fail "no nvcachefs or nvswapd process"
t_cleanup "kill -9 $fspid $swpid 2>/dev/null"

# every user may use the mount, with the backing's permissions
chmod 711 "$T_DIR"
mkdir -m 1777 "$mnt/scratch"
printf 'root only' >"$mnt/private" && chmod 600 "$mnt/private"
nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
nobody sh -c "echo mine >$mnt/scratch/nobody-file" 2>"$T_DIR/err" ||
  t_fail "a non-root user cannot write in a 1777 directory of the mount: $(cat "$T_DIR/err")"
nobody cat "$mnt/private" >/dev/null 2>&1 && t_fail "a non-root user read a 0600 root file through the mount"
[ "$(stat -c %U "$backing/scratch/nobody-file")" = nobody ] || t_fail "a user's new file is not owned by that user"

head -c 96M /dev/urandom >"$T_DIR/data"
for i in 1 2 3; do cp "$T_DIR/data" "$mnt/f$i"; done
qs --stop >"$T_DIR/stop.out" 2>&1 || { cat "$T_DIR/stop.out" >&2; t_fail "--stop failed"; }
# right away: the backing must hold every byte
for i in 1 2 3; do
  cmp "$T_DIR/data" "$backing/f$i" || t_fail "f$i incomplete in the backing dir when --stop returned"
done
running "$fspid" && t_fail "nvcachefs (pid $fspid) still running after --stop"
running "$swpid" && t_fail "nvswapd (pid $swpid) still running after --stop"
t_is_mounted "$mnt" && t_fail "$mnt still mounted"
[ -e /dev/shm/nvswapd-swap.mram ] && t_fail "nvswapd's MRAM file left in /dev/shm after --stop"
grep -q "everything written back" "$T_DIR/stop.out" || t_fail "--stop did not say it wrote back: $(cat "$T_DIR/stop.out")"
t_log "3 x 96 MiB copied in, whole in the backing dir when --stop returned"

# After a kill -9 of nvcachefs the mount is left disconnected: quickstart
# detaches it and mounts again, recovering the cache (it stopped at
# "mkdir: Transport endpoint is not connected"); --stop on such a mount
# says so and exits 0 (it died on an empty pgrep under pipefail).
NVCACHE_SWAP_SIZE=64M qs >"$T_DIR/start2.out" 2>&1 || t_fail "second start: $(cat "$T_DIR/start2.out")"
fspid=$(pgrep -f "nvcachefs $mnt( |\$)" | head -1)
swpid=$(cat "$NVCACHE_RUN_DIR/quickstart/nvswapd.pid")
t_cleanup "kill -9 $swpid 2>/dev/null"
echo acknowledged >"$mnt/acked" && sync "$mnt/acked"
kill -9 "$fspid"; t_wait 5 not_running "$fspid"
NVCACHE_SWAP_SIZE=64M qs >"$T_DIR/start3.out" 2>&1 || t_fail "start after kill -9: $(cat "$T_DIR/start3.out")"
grep -q "daemon that died" "$T_DIR/start3.out" || t_fail "start after kill -9 did not say what it did: $(cat "$T_DIR/start3.out")"
[ "$(cat "$mnt/acked")" = acknowledged ] || t_fail "a synced file is not back after kill -9 and a restart"
# A second quickstart on another mount point over the same backing: refused
# (it mounted, and the two caches overwrote each other's writes), and
# nvcachefs itself refuses it too
qs2() { bash "$root/tools/quickstart.sh" --mount "$T_DIR/mnt2" --backing "$backing" "$@"; }
qs2 >"$T_DIR/second.out" 2>&1 && { qs2 --stop >/dev/null 2>&1; t_fail "a second mount of the backing was made"; }
grep -q "is served by other nvcachefs mounts ($mnt)" "$T_DIR/second.out" || t_fail "second mount: $(cat "$T_DIR/second.out")"
mkdir -p "$T_DIR/mnt2"
"$root/build/fs/nvcachefs" "$T_DIR/mnt2" -f -o "backing=$backing,nvram=$T_SHM/second" >"$T_DIR/second2.out" 2>&1 &&
  { fusermount3 -u "$T_DIR/mnt2"; t_fail "nvcachefs mounted a second cache over the backing"; }
grep -q "in use by another nvcachefs" "$T_DIR/second2.out" || t_fail "second nvcachefs: $(cat "$T_DIR/second2.out")"
fspid=$(pgrep -f "nvcachefs $mnt( |\$)" | head -1)
kill -9 "$fspid"; t_wait 5 not_running "$fspid"
qs --stop >"$T_DIR/stop2.out" 2>&1 || t_fail "--stop after kill -9: exit $?: $(cat "$T_DIR/stop2.out")"
grep -q "daemon had died" "$T_DIR/stop2.out" || t_fail "--stop after kill -9: $(cat "$T_DIR/stop2.out")"
grep -q "everything written back" "$T_DIR/stop2.out" && t_fail "--stop after kill -9 claimed a write-back"
t_is_mounted "$mnt" && t_fail "$mnt still mounted after --stop"
t_log "kill -9: quickstart detached the dead mount and recovered; --stop said it had died; a second mount of the backing refused"

# A backing that fills: --stop must not say "everything written back" (it
# did, exit 0, and suggested removing the NVRAM file with the only copy).
mkdir -p "$T_DIR/small"
mount -t tmpfs -o size=4M nvtest-qs "$T_DIR/small" || t_fail "tmpfs for a small backing"
t_cleanup "umount $T_DIR/small 2>/dev/null"
qs3() { bash "$root/tools/quickstart.sh" --mount "$T_DIR/mnt3" --backing "$T_DIR/small/b" "$@"; }
nv3=/dev/shm/nvcache-$(echo "${T_DIR#/}" | tr / -)-mnt3.nvram
t_cleanup "rm -f $nv3"
NVCACHE_SWAP_SIZE=64M qs3 >"$T_DIR/start4.out" 2>&1 || t_fail "start over a small backing: $(cat "$T_DIR/start4.out")"
t_cleanup "fusermount3 -uz $T_DIR/mnt3 2>/dev/null"
head -c 12M /dev/urandom >"$T_DIR/mnt3/big" || t_fail "write into the cache"
qs3 --stop >"$T_DIR/stop3.out" 2>&1 && t_fail "--stop over a full backing exited 0: $(cat "$T_DIR/stop3.out")"
grep -q "NOT everything was written back" "$T_DIR/stop3.out" || t_fail "--stop over a full backing: $(cat "$T_DIR/stop3.out")"
grep -q "everything written back to" "$T_DIR/stop3.out" && t_fail "--stop claimed a write-back over a full backing"
grep -q "do NOT remove it" "$T_DIR/stop3.out" || t_fail "--stop did not say the NVRAM file holds the data"
t_log "a full backing: --stop exits 1 and says the data stays in NVRAM"

# --cluster 3: one file system across three nodes on this machine
qsc() { bash "$root/tools/quickstart.sh" --mount "$T_DIR/cm" --backing "$T_DIR/cb" "$@"; }
t_cleanup "qsc --stop --cluster 3 >/dev/null 2>&1; rm -f /dev/shm/nvcache-fcache-$(echo "${T_DIR#/}" | tr / -)-cm-[123].nvram*"
for i in 1 2 3; do t_cleanup "fusermount3 -uz $T_DIR/cm-$i 2>/dev/null"; done
# another cluster on this machine (a node's control socket is named after
# its id alone): quickstart's nodes exit, and quickstart says why rather
# than taking the other cluster's answers for its own nodes'
cluster_start 3 other
qsc --cluster 3 >"$T_DIR/cstart0.out" 2>&1 &&
  t_fail "quickstart --cluster 3 started beside another cluster's node 1: $(cat "$T_DIR/cstart0.out")"
grep -q "nodes up" "$T_DIR/cstart0.out" && t_fail "quickstart took another cluster's nodes for its own: $(cat "$T_DIR/cstart0.out")"
grep -q "nvcached node 1 did not start" "$T_DIR/cstart0.out" && grep -q "another nvcached runs as this node" "$T_DIR/cstart0.out" ||
  t_fail "quickstart did not say why node 1 did not start: $(cat "$T_DIR/cstart0.out")"
kill "${pid[1]}" "${pid[2]}" "${pid[3]}"
for i in 1 2 3; do t_wait 10 not_running "${pid[$i]}" || t_fail "the other cluster's node $i did not stop"; done
t_log "--cluster 3 beside another cluster: refused, with node 1's own error"
qsc --cluster 3 >"$T_DIR/cstart.out" 2>&1 || { cat "$T_DIR/cstart.out" >&2; t_fail "quickstart --cluster 3 did not start"; }
grep -q "cluster: 3 nodes up" "$T_DIR/cstart.out" || t_fail "--cluster: $(cat "$T_DIR/cstart.out")"
nodepids=$(cat "$NVCACHE_RUN_DIR"/quickstart/cluster-node-*.pid)
t_cleanup "kill -9 $nodepids 2>/dev/null"
head -c 24M /dev/urandom >"$T_DIR/cdata"
cp "$T_DIR/cdata" "$T_DIR/cm-1/f" || t_fail "--cluster: write through node 1's mount"
cmp "$T_DIR/cdata" "$T_DIR/cm-3/f" || t_fail "--cluster: node 3's mount does not read node 1's file"
# kill -9 of node 2's nvcached, then quickstart again (as after a crash):
# it starts node 2 (a killed process not yet reaped is not running), and
# a copy made meanwhile through node 1's mount waits for it (down_wait)
n2=$(cat "$NVCACHE_RUN_DIR/quickstart/cluster-node-2.pid")
kill -9 "$n2"
head -c 3M /dev/urandom >"$T_DIR/cdata2"
cp "$T_DIR/cdata2" "$T_DIR/cm-1/g" 2>"$T_DIR/cp2.err" &
cpp=$!
sleep 1
qsc --cluster 3 >"$T_DIR/cstart2.out" 2>&1 || t_fail "quickstart --cluster 3 after a kill -9 of node 2: $(cat "$T_DIR/cstart2.out")"
grep -q "nvcached node 2: already running" "$T_DIR/cstart2.out" &&
  t_fail "quickstart took the killed node 2 for running: $(cat "$T_DIR/cstart2.out")"
wait $cpp || t_fail "a copy through node 1's mount while node 2 restarted failed: $(cat "$T_DIR/cp2.err")"
cmp "$T_DIR/cdata2" "$T_DIR/cm-3/g" || t_fail "the copy made while node 2 restarted does not read back through node 3"
nodepids="$nodepids $(cat "$NVCACHE_RUN_DIR/quickstart/cluster-node-2.pid")"
t_cleanup "kill -9 $nodepids 2>/dev/null"
t_log "--cluster 3: node 2 killed, quickstart again restarts it; a copy made meanwhile waited for it"
# a one-node quick start over the cluster's backing: two caches over one
# backing would overwrite each other's write-backs
qs1() { bash "$root/tools/quickstart.sh" "$@"; }
qs1 --mount "$T_DIR/mnt9" --backing "$T_DIR/cb" >"$T_DIR/one.out" 2>&1 &&
  t_fail "a one-node quickstart mounted over the cluster's backing: $(cat "$T_DIR/one.out")"
t_cleanup "fusermount3 -uz $T_DIR/mnt9 2>/dev/null"
grep -q "is served by other nvcachefs mounts" "$T_DIR/one.out" ||
  t_fail "a one-node quickstart over the cluster's backing: $(cat "$T_DIR/one.out")"
t_log "a one-node quickstart over the cluster's backing: refused"
# node 3 dies; --stop (without --mount/--backing: it finds the cluster's)
# must not say everything was written back, nor that its NVRAM file may go
n3=$(cat "$NVCACHE_RUN_DIR/quickstart/cluster-node-3.pid")
kill -9 "$n3"
t_wait 10 not_running "$n3" || t_fail "node 3 did not die"
qs1 --stop --cluster 3 >"$T_DIR/cstop1.out" 2>&1 &&
  t_fail "--stop --cluster with node 3 dead exited 0: $(cat "$T_DIR/cstop1.out")"
grep -q "node(s) 3 had died" "$T_DIR/cstop1.out" && grep -q "Do NOT remove" "$T_DIR/cstop1.out" ||
  t_fail "--stop --cluster with node 3 dead: $(cat "$T_DIR/cstop1.out")"
grep -q "everything written back\|rm them" "$T_DIR/cstop1.out" &&
  t_fail "--stop --cluster with node 3 dead claims a full write-back: $(cat "$T_DIR/cstop1.out")"
for i in 1 2 3; do t_is_mounted "$T_DIR/cm-$i" && t_fail "--stop --cluster (node 3 dead) left $T_DIR/cm-$i mounted"; done
for p in $nodepids; do running "$p" && t_fail "--stop --cluster (node 3 dead) left nvcached $p running"; done
qsc --cluster 3 >"$T_DIR/cstart3.out" 2>&1 || t_fail "quickstart --cluster 3 after node 3 died: $(cat "$T_DIR/cstart3.out")"
grep -q "nvcached node 3: had died; starting it again" "$T_DIR/cstart3.out" ||
  t_fail "quickstart did not say node 3 had died: $(cat "$T_DIR/cstart3.out")"
nodepids=$(cat "$NVCACHE_RUN_DIR"/quickstart/cluster-node-*.pid)
t_cleanup "kill -9 $nodepids 2>/dev/null"
t_log "--stop --cluster with a node dead: exit 1, says its NVRAM file holds what it had; started again"
qs1 --stop --cluster 3 >"$T_DIR/cstop.out" 2>&1 || t_fail "--stop --cluster: $(cat "$T_DIR/cstop.out")"
cmp "$T_DIR/cdata" "$T_DIR/cb/f" || t_fail "--cluster: the file is not whole in the backing when --stop returned"
grep -q "everything written back" "$T_DIR/cstop.out" || t_fail "--stop --cluster: $(cat "$T_DIR/cstop.out")"
for p in $nodepids; do running "$p" && t_fail "--stop --cluster left nvcached $p running"; done
for i in 1 2 3; do t_is_mounted "$T_DIR/cm-$i" && t_fail "--stop --cluster left $T_DIR/cm-$i mounted"; done
t_log "--cluster 3: a file across the mounts, whole in the backing at --stop"
t_log PASS
