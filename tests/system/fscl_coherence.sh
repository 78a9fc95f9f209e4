#!/usr/bin/env bash
# fscl_coherence.sh - nvcachefs across four nodes on this machine (each an
# nvcached with a file cache and a mount, one backing directory): close-to-
# open, one namespace with sizes from NVRAM before any write-back, mtimes
# of writes and of times set through any mount whatever write-back does,
# the end of a mount's size bound at another mount's truncate, two
# nodes writing interleaved 100-byte ranges of the same blocks, MPI-IO's
# sync-barrier-sync and close-barrier-sync, O_APPEND from three nodes (in turn and at once),
# write-back of every byte by the blocks' owners after the last close, a
# file replaced by rename over and over on one node while three others
# open and stat it, a file unlinked while open on two nodes that writes
# nothing to the backing (fscl_ops.py has the steps), a file removed
# through one node that another node's mount lets go of, the layout xattr,
# the file cache lines of nvcachectl status --cluster, fsx_ops.py's
# random operations spread over two mounts against a plain directory,
# fcntl and flock locks between processes on different nodes
# (fscl_locks.py), and MPI-IO with rank i on node i (collective,
# sieved, RDONLY, DELETE_ON_CLOSE).
T_TIMEOUT=${T_TIMEOUT:-180}
# ROMIO's DELETE_ON_CLOSE closes, then (after a barrier) rank 0 unlinks:
# the write-back delay after the last close is what keeps the file's
# bytes out of the backing, so it is 2 s here (the default is 1), not a
# loaded machine's barrier
FSCL_WB_DELAY=2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fscl_common.bash"
here=$(dirname "$0")
fscl_start
m=("$T_DIR/m1" "$T_DIR/m2" "$T_DIR/m3" "$T_DIR/m4")

step() {
  python3 "$here/fscl_ops.py" "$1" "$T_DIR/b" "${m[@]}" ||
    { tail -n 5 "$T_DIR"/fs*.log "$T_DIR"/node*-fs.log >&2; t_fail "step $1"; }
  t_log "$1: ok"
}
# sum KEY: KEY of every node's stats, added up
sum() {
  local i v s=0
  for ((i = 1; i <= FSCL_N; i++)); do
    v=$(fscl_stat $i "$1"); [ -n "$v" ] || return 1   # no answer: ask again
    s=$((s + v))
  done
  echo $s
}
no_dirty() { [ "$(sum fcache_dirty_bytes)" = 0 ]; }

step close_to_open
step namespace
step mtime
step stale_bound
# a truncating mount that dies between the home and the owners: the
# home's size went down and no owner heard of it. A mount that held the
# file open before writes past the cut, within its old size, over a
# second after the block's owner learnt the epoch: it trusts one no
# longer than that, so the write grows the file again. (The mount's own
# SETSIZE, which sets the home's mtime once a second, comes between the
# owner's learning and the cut: the write could skip the home.)
python3 - "${m[0]}/orph" "${m[1]}/orph" "$T_DIR/orph" <<'PY' &
import mmap, os, sys, time
pa, pb, tag = sys.argv[1:]
buf = mmap.mmap(-1, 4096)
with open(pa, "wb") as f:
    f.write(os.urandom(2 << 20))
fd = os.open(pa, os.O_RDWR | os.O_DIRECT)
t1 = time.time()
os.pwritev(fd, [buf], (1 << 20) + 8192)   # the second stripe's owner learns the epoch
time.sleep(0.5)
os.pwritev(fd, [buf], 2 << 20)            # grows the file: a SETSIZE
open(tag + ".ready", "w").close()
while not os.path.exists(tag + ".go"):
    time.sleep(0.01)
time.sleep(max(0, t1 + 1.2 - time.time()))
os.pwritev(fd, [buf], 3 << 19)
size = os.stat(pb).st_size
os.close(fd)
sys.exit(0 if size == (3 << 19) + 4096 else "size %d on mount 2, not %d" % (size, (3 << 19) + 4096))
PY
orph=$!
t_wait 10 test -e "$T_DIR/orph.ready" || t_fail "orph: not written"
lay=$(fscl_layout "${m[0]}/orph")
id=${lay#id=}; id=${id%% *}; home=${lay#*home=}; home=${home%% *}
python3 "$here/fscl_frames.py" setsize "$id" 100000 |
  timeout 20 "$(t_bin nvcache-client)" --cluster "$conf" --node "$home" raw-all >"$T_DIR/orph.out" 2>&1
grep -q "SETSIZE (reply) status=ok" "$T_DIR/orph.out" ||
  t_fail "orph: the home did not take the SETSIZE: $(cat "$T_DIR/orph.out"; tail -n 3 "$T_DIR"/node*-fs.log)"
touch "$T_DIR/orph.go"
wait $orph || t_fail "a write past a cut no owner heard of, within the old size, left the size cut ($lay; $(cat "$T_DIR/orph.out"))"
t_log "a cut no owner heard of: the bounds before it end within a second"
# An error no status names (an APPEND past its limit: EFBIG) is answered
# INTERNAL, and the node says which in the reply and its log
python3 "$here/fscl_frames.py" setsize "$id" 100 128 50 |
  timeout 20 "$(t_bin nvcache-client)" --cluster "$conf" --node "$home" raw-all >"$T_DIR/efbig.out" 2>&1
grep -q "SETSIZE (reply) status=internal error.*File too large" "$T_DIR/efbig.out" ||
  t_fail "an APPEND past its limit: $(cat "$T_DIR/efbig.out")"
t_wait 5 grep -q "a FILE_SETSIZE request failed (File too large); answered INTERNAL" "$T_DIR"/node$home-*.log ||
  t_fail "node $home did not log the error it answered INTERNAL"
step interleave
step sync_barrier_sync
step close_barrier_sync
step append
# the replaced versions linger at their homes, then go everywhere
t_wait 10 sum fcache_files || t_fail "a node's stats do not answer"
files0=$(sum fcache_files) lingered0=$(sum fcache_unlinks_lingered) ||
  t_fail "a node's stats do not answer"
step replace
lingered() { local n; n=$(sum fcache_unlinks_lingered) && [ "$n" -gt "$lingered0" ]; }
t_wait 10 lingered || t_fail "replace: no unlink lingered"
few_files() { local n; n=$(sum fcache_files) && [ "$n" -le $((files0 + 1)) ]; }
t_wait 10 few_files || t_fail "replace: the replaced versions' records stay: $(sum fcache_files) files, $files0 before"

# After the last close (and the write-back delay) every byte is in the backing,
# written there by the nodes that own the blocks: each node wrote some.
# (a copy first: each open through a mount holds the write-back back)
for f in c2o il sbs; do cat "${m[0]}/$f" >"$T_DIR/$f.ref" || t_fail "read $f"; done
for f in c2o il sbs; do
  t_wait 10 cmp -s "$T_DIR/b/$f" "$T_DIR/$f.ref" || t_fail "$f: the backing does not get every byte after the last close"
done
for ((i = 1; i <= FSCL_N; i++)); do
  [ "$(fscl_stat $i fcache_written_back_bytes)" -gt 0 ] || t_fail "node $i wrote nothing back (its stripes of c2o)"
done
t_wait 5 no_dirty || t_fail "dirty bytes left after write-back: $(sum fcache_dirty_bytes)"
t_log "write-back: every byte in the backing, by all $FSCL_N owners"
# The last close cluster-wide may be a reader's on another node: the
# owners still write back what the writer wrote (its CLOSE told the home
# it wrote), within the write-back delay, not at the 30 s pass. Read-only
# rounds after that ask the owners for nothing.
mstat() { "$(t_bin nvcachectl)" stats "$1" | awk -v k="$2:" '$1 == k { print $2 }'; }
wb2=$(mstat "${m[1]}" last_close_writebacks)
python3 - "${m[0]}/rl" "${m[1]}/rl" "$T_DIR/rl.ref" <<'PY' || t_fail "reader last: $(tail -n 3 "$T_DIR"/fs*.log)"
import os, sys, time
a, b, ref = sys.argv[1:]
data = os.urandom((2 << 20) + 777)
fa = open(a, "wb")
fa.write(data)
fa.flush()
fb = open(b, "rb")
fa.close()          # not the last close: mount 2 holds the file open
time.sleep(0.5)     # (the kernel sends a release after close returns)
assert fb.read() == data, "mount 2 reads other bytes"
fb.close()          # the last close cluster-wide, a reader's
with open(ref, "wb") as f:
    f.write(data)
PY
t_wait 10 cmp -s "$T_DIR/b/rl" "$T_DIR/rl.ref" ||
  t_fail "a reader's last close on node 2 left node 1's writes out of the backing"
[ "$(mstat "${m[1]}" last_close_writebacks)" -eq $((wb2 + 1)) ] ||
  t_fail "mount 2's last close did not have the owners write back: $(mstat "${m[1]}" last_close_writebacks), was $wb2"
wb3=$(mstat "${m[2]}" last_close_writebacks) clean3=$(mstat "${m[2]}" last_close_clean)
for k in 1 2 3 4 5; do cmp -s "${m[2]}/rl" "$T_DIR/rl.ref" || t_fail "rl reads wrong on 3"; done
[ "$(mstat "${m[2]}" last_close_writebacks)" -eq "$wb3" ] &&
  [ "$(mstat "${m[2]}" last_close_clean)" -eq $((clean3 + 5)) ] ||
  t_fail "read-only rounds asked for write-backs: $(mstat "${m[2]}" last_close_writebacks) (was $wb3), clean $(mstat "${m[2]}" last_close_clean) (was $clean3)"
t_log "a reader's last close: the writer's bytes written back; read-only rounds ask nothing"
# An ftruncate alone (no byte written) is a write too: its last close
# has the owners write back, and the backing file takes the new size
wb3=$(mstat "${m[2]}" last_close_writebacks)
truncate -s $((3 << 20)) "${m[2]}/rl"
backing_grown() { [ "$(stat -c %s "$T_DIR/b/rl")" = $((3 << 20)) ]; }
t_wait 10 backing_grown ||
  t_fail "an ftruncate's last close left the backing at $(stat -c %s "$T_DIR/b/rl") bytes, not $((3 << 20))"
[ "$(mstat "${m[2]}" last_close_writebacks)" -eq $((wb3 + 1)) ] ||
  t_fail "an ftruncate's last close did not have the owners write back"
python3 - "$T_DIR/b/rl" "${m[0]}/rl" "$T_DIR/rl.ref" <<'PY' || t_fail "rl after its ftruncate"
import sys
ref = open(sys.argv[3], "rb").read()
want = ref + bytes((3 << 20) - len(ref))
for p in sys.argv[1:3]:
    if open(p, "rb").read() != want:
        sys.exit("%s differs from the file grown by ftruncate" % p)
PY
t_log "an ftruncate alone reaches the backing at its last close"
# where a file's stripes live: user.nvcache.layout, the same on every
# node, naming every node for a file of more stripes than nodes
lay1=$(fscl_layout "${m[0]}/c2o" 2>&1) || t_fail "layout xattr: $lay1"
lay2=$(fscl_layout "${m[2]}/c2o" 2>&1)
[ "$lay1" = "$lay2" ] || t_fail "layout differs between nodes: $lay1 / $lay2"
[[ $lay1 =~ stripe_unit=1048576\ home=([1-4])\ nodes=([1-4],){3}[1-4]$ ]] || t_fail "layout: $lay1"
t_log "layout: $lay1"
# nvcachectl status --cluster: a file cache line per node, its MiB
timeout 30 "$(t_bin nvcachectl)" status --cluster "$conf" >"$T_DIR/st" || t_fail "status --cluster failed"
[ "$(grep -cE '^ +[1-4] +64 ' "$T_DIR/st")" -eq 4 ] || t_fail "status --cluster: no file cache line per node: $(cat "$T_DIR/st")"
grep -q '^file cache: node' "$T_DIR/st" || t_fail "status --cluster: no file cache header"
# and the same in its JSON, per node
timeout 30 "$(t_bin nvcachectl)" status --cluster "$conf" --json >"$T_DIR/stj" || t_fail "status --cluster --json failed"
python3 - "$T_DIR/stj" <<'PY' || t_fail "status --cluster --json: no file cache per node: $(cat "$T_DIR/stj")"
import json, sys
nodes = json.load(open(sys.argv[1]))["nodes"]
assert len(nodes) == 4
for n in nodes:
    fc = n["file_cache"]
    assert fc["total_bytes"] == 64 << 20, fc
    assert 0 <= fc["dirty_bytes"] <= fc["used_bytes"] <= fc["total_bytes"], fc
    assert isinstance(fc["files"], int), fc
PY

# Unlinked while open on two nodes: nothing of it is written back, and
# every node drops it once its home's linger after the last close (2 s)
# is over.
wb=$(sum fcache_written_back_bytes)
dropped=$(sum fcache_dropped_files)
step doomed
t_wait 10 eval '[ "$(sum fcache_dirty_bytes)" -eq 0 ]' || t_fail "the unlinked file's blocks stay dirty"
[ "$(sum fcache_written_back_bytes)" -eq "$wb" ] || t_fail "an unlinked file's bytes were written back"
[ "$(sum fcache_dropped_files)" -gt "$dropped" ] || t_fail "no node dropped the unlinked file"
t_log "unlinked while open: dropped everywhere after its linger, nothing written back"

# Removed through one node's mount, a file another node's mount read
# keeps no descriptor there (nor so its space on the backing): that
# mount has its kernel forget it, which nothing else would make it do.
held_gone() { ls -l "/proc/${mpid[2]}/fd" 2>/dev/null | grep -c "$T_DIR/b/gone (deleted)"; }
head -c $((4 << 20)) /dev/urandom >"${m[0]}/gone"
cmp -s "${m[0]}/gone" "${m[1]}/gone" || t_fail "gone: node 2 does not read node 1's file"
gone0=$(mstat "${m[1]}" forget_removed_elsewhere)
rm "${m[0]}/gone"
t_wait 10 eval '[ "$(held_gone)" = 0 ]' ||
  t_fail "node 2's mount still holds the removed file: $(ls -l "/proc/${mpid[2]}/fd" | grep deleted)"
[ "$(mstat "${m[1]}" forget_removed_elsewhere)" -gt "$gone0" ] ||
  t_fail "gone: forget_removed_elsewhere did not count it"
[ ! -e "${m[1]}/gone" ] || t_fail "gone: node 2 still sees the removed file"
t_log "removed through node 1: node 2's mount let go of it"

# fcntl and flock locks between processes on different nodes
# (fscl_locks.py): held, refused, waited for, released by kill and close
python3 "$here/fscl_locks.py" "${m[0]}" "${m[1]}" "${m[2]}" ||
  { tail -n 5 "$T_DIR"/fs*.log >&2; t_fail "locks across nodes"; }
locks=$(sum file_locks)
t_wait 5 test "$(sum file_locks)" -eq 0 || t_fail "locks left at the homes after every holder went: $locks"
[ "$(sum file_lock_grants)" -ge 1 ] || t_fail "no F_SETLKW wait was granted at a home"
# the mounts count their lock requests: B's waits are there
"$(t_bin nvcachectl)" stats "${m[1]}" >"$T_DIR/lks" || t_fail "nvcachectl stats ${m[1]}"
grep -q '^lock_waits: [1-9]' "$T_DIR/lks" || t_fail "mount 2's stats show no lock wait: $(grep ^lock "$T_DIR/lks")"
t_log "locks: across nodes, released by kill and close"

# MPI-IO (MPICH's ROMIO), rank i through node i's mount: collective
# writes and reads of another rank's chunks, independent non-contiguous
# writes with data sieving (ROMIO's fcntl locks, now across nodes),
# MPI_MODE_RDONLY of a file already in the backing (nothing written back),
# and MPI_MODE_DELETE_ON_CLOSE (an inotify watch on the backing sees no
# byte of it written).
export HYDRA_LAUNCHER=fork
prog=$T_DIR/fsx_mpiio
mpicc -O2 -Wall -o "$prog" "$T_ROOT/tests/system/fsx/fsx_mpiio.c" || t_fail "mpicc failed"
mpi() { timeout 120 mpiexec -n 4 "$prog" "$@"; }
ranked=$T_DIR/m{rank}
mpi collective "$ranked/mpi.dat" 8 || t_fail "MPI-IO: collective write/read across nodes"
mpi noncontig "$ranked/mpi.dat" 8 || t_fail "MPI-IO: sieved non-contiguous writes across nodes"
for i in 1 2 3 4; do
  "$prog" verify "$T_DIR/m$i/mpi.dat" 8 1 2 >/dev/null || t_fail "MPI-IO: mpi.dat wrong through node $i's mount"
done
t_wait 15 "$prog" verify "$T_DIR/b/mpi.dat" 8 1 2 || t_fail "MPI-IO: mpi.dat not in the backing after the last close"
t_log "MPI-IO: collective and sieved writes across nodes, verified on every mount and in the backing"
"$prog" expect "$T_DIR/b/in.dat" 4 4 || t_fail "cannot write in.dat"
touch -d '2020-01-02 03:04:05' "$T_DIR/b/in.dat"
in_stat=$(stat -c '%Y %s' "$T_DIR/b/in.dat")
inotifywait -m -e modify -e close_write --format '%e %f' "$T_DIR/b" >"$T_DIR/inotify" 2>"$T_DIR/inotify.err" &
ipid=$!
t_cleanup "kill $ipid 2>/dev/null"
t_wait 10 grep -q 'Watches established' "$T_DIR/inotify.err" || t_fail "inotifywait: $(cat "$T_DIR/inotify.err")"

mpi rdonly "$ranked/in.dat" 4 4 || t_fail "MPI-IO: MPI_MODE_RDONLY read wrong bytes"
mpi delete "$ranked/del.dat" 8 || t_fail "MPI-IO: DELETE_ON_CLOSE run failed"
sleep 3     # past the write-back delay
kill $ipid
[ -e "$T_DIR/b/del.dat" ] && t_fail "MPI-IO: del.dat is in the backing after DELETE_ON_CLOSE"
grep -q 'MODIFY del.dat' "$T_DIR/inotify" && t_fail "MPI-IO: bytes of a DELETE_ON_CLOSE file reached the backing"
grep -q 'in.dat' "$T_DIR/inotify" && t_fail "MPI-IO: a read-only file was written: $(grep in.dat "$T_DIR/inotify" | head -3)"
[ "$(stat -c '%Y %s' "$T_DIR/b/in.dat")" = "$in_stat" ] || t_fail "MPI-IO: the read-only in.dat changed in the backing"
t_log "MPI-IO: RDONLY wrote nothing, DELETE_ON_CLOSE left no byte in the backing"

# The random operations of fsx_ops.py (writes, truncates, renames and
# unlinks of open files, links, mmap, xattrs, ...) spread over two nodes'
# mounts (each path operation and open through either; a handle's page
# cache synced before it reads bytes the other node wrote) against a plain
# directory, then the backing against it once the owners wrote back. Not
# compared: the mtime of writes (the backing's until write-back), and
# the atime after utimens (a readahead sent before it, served from the
# backing after it, moves it: docs/nvcachefs-cluster.md).
mkdir -p "$T_DIR/ref" "${m[1]}/fsx"
seed=${FSX_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
python3 "$T_ROOT/tests/system/fsx/fsx_ops.py" run --mount "${m[1]}/fsx" --mount2 "${m[2]}/fsx" --append-direct \
  --ref "$T_DIR/ref" --seed "$seed" --ops 1500 --no-mtime-check --no-atime-check >"$T_DIR/fsx.out" 2>&1 ||
  { tail -20 "$T_DIR/fsx.out" >&2; t_fail "random operations diverged from the reference (FSX_SEED=$seed)"; }
# (the last closes ask for it after the delay; any dirty block is written
# back within 30 s whatever the opens)
t0=$SECONDS
t_wait 40 no_dirty || t_fail "dirty bytes left after the random operations: $(fscl_why)"
python3 "$T_ROOT/tests/system/fsx/fsx_ops.py" compare "$T_DIR/b/fsx" "$T_DIR/ref" ||
  t_fail "after write-back the backing differs from the reference (FSX_SEED=$seed)"
t_log "1500 random operations (seed $seed) over two mounts match the reference, through the mounts and in the backing (written back in $((SECONDS - t0)) s)"

# the mount's own counters answer (it has no NVRAM of its own)
"$(t_bin nvcachectl)" stats "${m[0]}" >"$T_DIR/ms" || t_fail "nvcachectl stats on a cluster mount failed"
grep -q '^read_ops: [1-9]' "$T_DIR/ms" || t_fail "a cluster mount's stats: $(cat "$T_DIR/ms")"
fscl_stop
