#!/usr/bin/env bash
# fscl_replicas.sh - replicas=2: a node lost for good loses no
# acknowledged write. Three nodes, every mount with replicas=2 (a mount
# asking replicas=1 is refused, nothing made). A 3 MiB file (a 1 MiB
# stripe on each node) written through mount 1 and kept open, so its
# blocks stay dirty in the owners' NVRAM; node 2's nvcached killed -9,
# never restarted: a write into node 1's stripe (node 2 is its shadow)
# goes on, kept in node 1's NVRAM alone; mount 3 reads every byte (node
# 2's stripe from its shadow's replica, node 3), and the shadow then
# writes node 2's replicas back, so after the close the backing holds
# every byte. A file homed at
# node 2, open through mount 1: mount 3, which never opened it, reads it
# whole (its size kept by node 3, its unit on the backing file), and its
# close writes it back though its home is gone.
# The same cluster runs stripe_unit=auto (the setup is shared): a file
# that exists before it is first cached is cut into one equal part per
# node, a new one by the first size set (a truncate) before any write,
# or else into 1 MiB stripes; every mount cuts it as its home says; a
# mount asking another stripe unit is refused. And more small
# files than a node's object table holds: idle records go (never ENOSPC).
T_TIMEOUT=${T_TIMEOUT:-60}
. "$(dirname "$0")/lib.sh"
FSCL_N=3
. "$(dirname "$0")/fscl_common.bash"
# a shadow writes a down owner's replicas back after 2 s (default 10 s)
export NVCACHE_REPLICA_ORPHAN_MS=2000
cluster_start "$FSCL_N" fs
for i in 1 2 3; do fscl_mount $i replicas=2,stripe_unit=auto; done
m1=$T_DIR/m1 m3=$T_DIR/m3

# mixed settings are refused: a replica would be missing for some writes
mkdir -p "$T_DIR/mx"
for opts in "stripe_unit=auto" "replicas=2"; do
  out=$(timeout 20 "$(t_bin nvcachefs)" "$T_DIR/mx" -f -o "backing=$T_DIR/b,cluster=$conf,node=1,$opts" 2>&1) &&
    t_fail "a mount with $opts was let in among replicas=2,stripe_unit=auto nodes"
  grep -q "serves replicas=2; this mount asks replicas=1\|serves stripe_unit=auto; this mount asks stripe_unit=1M" <<<"$out" ||
    t_fail "the refusal does not say why: $out"
  t_is_mounted "$T_DIR/mx" && t_fail "a mount is left on mx"
  [ -z "$(find "$T_DIR/b" -mindepth 1)" ] || t_fail "the refused mount made files"
done
t_log "refused: a replicas=1 mount, and a stripe_unit=1M one, among replicas=2,stripe_unit=auto nodes"

# stripe_unit=auto: a file of 3.5 MiB before it is first cached, in three
# parts of 1,245,184 bytes (19 blocks, the third shorter); written
# across a part's edge through mount 1, read through mounts 2 and 3
head -c $((7 << 19)) /dev/urandom >"$T_DIR/b/pre"
lay=$(fscl_layout "$T_DIR/m2/pre")
[[ $lay == *" stripe_unit=1245184 "* ]] || t_fail "a 3.5 MiB file over 3 nodes (auto) is cut as $lay"
python3 - "$T_DIR/m1/pre" "$T_DIR/m2/pre" "$T_DIR/m3/pre" "$T_DIR/b/pre" <<'PY' || t_fail "stripe_unit=auto: mounts disagree on a file's bytes"
import os, sys
w, r2, r3, b = sys.argv[1:]
ref = bytearray(open(b, "rb").read())
data = os.urandom(200000)
at = 1245184 - 100000          # across the first part's edge
fd = os.open(w, os.O_WRONLY)
os.pwrite(fd, data, at)
ref[at:at + len(data)] = data
for p in (r2, r3):
    rd = os.open(p, os.O_RDONLY)
    os.posix_fadvise(rd, 0, 0, os.POSIX_FADV_DONTNEED)
    got = b"".join(os.pread(rd, 1 << 20, o) for o in range(0, len(ref), 1 << 20))
    os.close(rd)
    if got != bytes(ref):
        sys.exit("%s reads other bytes than were written through another mount" % p)
os.close(fd)
PY
for i in 1 2 3; do
  lay=$(fscl_layout "$T_DIR/m$i/pre")
  [[ $lay == *" stripe_unit=1245184 "* ]] || t_fail "mount $i cuts the file as $lay"
done
t_log "stripe_unit=auto: a 3.5 MiB file in three equal parts, the same on every mount"

# a new file sized before its first write (as MPI_File_set_size does):
# one equal part per node of that size, fixed by the truncate through
# mount 2, put on the backing file, the same on every mount
: >"$m1/sized"
lay=$(fscl_layout "$m1/sized")
[[ $lay == *" stripe_unit=unset "* ]] || t_fail "a new empty file (auto) is cut as $lay before its size is set"
truncate -s 6M "$T_DIR/m2/sized"
lay=$(fscl_layout "$m3/sized")
[[ $lay == *" stripe_unit=2097152 "* ]] || t_fail "the truncate to 6 MiB did not fix the unit at the home: $lay"
python3 - "$m1/sized" "$m3/sized" <<'PY' || t_fail "stripe_unit=auto: a file sized by a truncate"
import os, sys
w, r = sys.argv[1:]
data = os.urandom(6 << 20)
fd = os.open(w, os.O_WRONLY)
for at in range(0, 6 << 20, 300000):   # across every part's edge
    os.pwrite(fd, data[at:at + 300000], at)
os.close(fd)
if open(r, "rb").read() != data:
    sys.exit("mount 3 reads other bytes than were written through mount 1")
PY
for i in 1 2 3; do
  lay=$(fscl_layout "$T_DIR/m$i/sized")
  [[ $lay == *" stripe_unit=2097152 "* ]] || t_fail "mount $i cuts a file truncated to 6 MiB before its first write as $lay"
done
[ "$(getfattr --absolute-names --only-values -n user.nvcache.stripe_unit "$T_DIR/b/sized")" = 2097152 ] ||
  t_fail "the unit fixed by the truncate is not on the backing file"
# that xattr is the nodes' own: a mount neither shows it (cp -a would
# carry it to other files) nor lets it change; the user's own work
setfattr -n user.mine -v 1 "$T_DIR/m2/sized" || t_fail "a user xattr cannot be set"
names=$(getfattr --absolute-names -d -m - "$m3/sized")
[[ $names == *user.mine* && $names != *stripe_unit* ]] || t_fail "the xattrs a mount lists: $names"
getfattr -n user.nvcache.stripe_unit "$m3/sized" 2>/dev/null && t_fail "a mount shows the nodes' own xattr"
setfattr -n user.nvcache.stripe_unit -v 65536 "$m1/sized" 2>/dev/null && t_fail "a mount let the nodes' own xattr change"
setfattr -x user.nvcache.stripe_unit "$m1/sized" 2>/dev/null && t_fail "a mount let the nodes' own xattr go"
[ "$(getfattr --absolute-names --only-values -n user.nvcache.stripe_unit "$T_DIR/b/sized")" = 2097152 ] ||
  t_fail "the unit on the backing file changed"
t_log "stripe_unit=auto: a new file truncated to 6 MiB before its first write, in three parts of 2 MiB"

# More files than a node's object table holds (64 MiB of cache: 256
# records; each file is a record at its home and, while dirty, one at
# its home's shadow): closed and written back, their records go, and no
# write fails
total=$(fscl_stat 1 fcache_records_total)
nf=$((total * 3))
mkdir "$m1/many"
python3 - "$nf" "$T_DIR/m1/many" "$T_DIR/m2/many" "$T_DIR/m3/many" <<'PY' || t_fail "$nf small files over 3 nodes of $total records each"
import os, sys
n, mnts = int(sys.argv[1]), sys.argv[2:]
for k in range(n):
    with open(os.path.join(mnts[k % 3], "f%d" % k), "wb") as f:
        f.write(b"%08d" % k * 500)
for k in range(n):
    got = open(os.path.join(mnts[(k + 1) % 3], "f%d" % k), "rb").read()
    if got != b"%08d" % k * 500:
        sys.exit("file %d reads back wrong through another mount" % k)
PY
rec=0
for i in 1 2 3; do rec=$((rec + $(fscl_stat $i fcache_records_reclaimed))); done
[ "$rec" -gt 0 ] || t_fail "no record went, yet $nf files fit in tables of $total"
rm -rf "$m1/many"
t_log "$nf files over 3 nodes of $total records each: $rec idle records went, every file read back"

# a file whose home is not node 2, and one whose home is node 2 (its
# size, only at node 2 while it is open, is copied to node 3 too)
f="" g=""
for k in $(seq 0 63); do
  : >"$m1/r$k"
  lay=$(fscl_layout "$m1/r$k") ||
    t_fail "no layout for $m1/r$k"
  [[ $lay == *" stripe_unit=unset "* ]] || t_fail "a new empty file (auto) is cut as $lay before its first write"
  if [[ $lay != *"home=2 "* ]]; then [ -n "$f" ] || f=r$k; else [ -n "$g" ] || g=r$k; fi
  [ -n "$f" ] && [ -n "$g" ] && break
done
[ -n "$f" ] && [ -n "$g" ] || t_fail "64 files all homed at node 2, or none"
head -c $((3 << 20)) /dev/urandom >"$T_DIR/ref"
head -c $((5 << 19)) /dev/urandom >"$T_DIR/gref"
fscl_write_held "$m1/$f" "$T_DIR/ref" held   # closed after node 2 is gone
writer=$held_writer
fscl_write_held "$m1/$g" "$T_DIR/gref" gheld
gwriter=$held_writer
lay=$(fscl_layout "$m3/$f")
[[ $lay == *" stripe_unit=1048576 "* ]] || t_fail "a new file (auto) written with no size set first is cut as $lay, not in 1 MiB stripes"
# node 3 holds node 2's stripe (16 blocks) as replicas
[ "$(fscl_stat 3 fcache_replicas_held)" -ge 16 ] ||
  t_fail "node 3 holds $(fscl_stat 3 fcache_replicas_held) replicas of node 2's blocks, not 16"
[ "$(fscl_stat 2 fcache_replicas_sent)" -ge 16 ] ||
  t_fail "node 2 sent $(fscl_stat 2 fcache_replicas_sent) replicas"
[ "$(fscl_stat 1 fcache_dirty_bytes)" -gt 0 ] || t_fail "nothing dirty at node 1: was $f written back?"

kill -9 "${pid[2]}"
t_log "node 2's nvcached killed for good"
# node 2 is node 1's shadow: a write into node 1's stripe of $f waits for
# the heartbeats' verdict on node 2, then is kept in node 1's NVRAM
# alone (degraded); the reads and the backing below check its bytes
lay=$(fscl_layout "$m3/$f")
nodes=${lay##*nodes=}
IFS=, read -r -a own <<<"${nodes%% *}"
s1=
for k in "${!own[@]}"; do [ "${own[$k]}" = 1 ] && { s1=$k; break; }; done
[ -n "$s1" ] || t_fail "node 1 owns no stripe of $f ($lay)"
python3 - "$m3/$f" "$T_DIR/ref" $((s1 * 1048576 + 12345)) <<'PY' ||
import os, sys
path, ref, at = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = os.urandom(100000)
fd = os.open(path, os.O_WRONLY)
os.pwrite(fd, data, at)
os.close(fd)
r = bytearray(open(ref, "rb").read())
r[at:at + len(data)] = data
open(ref, "wb").write(r)
PY
  t_fail "a write into node 1's stripe of $f fails while node 2, its shadow, is down"
[ "$(fscl_stat 1 fcache_replica_degraded_writes)" -gt 0 ] ||
  t_fail "node 1 counts no write kept in its NVRAM alone"
grep -q "is kept in this node's NVRAM alone" "$T_DIR/node1-fs.log" ||
  t_fail "node 1 does not log the writes kept alone"
st=$("$(t_bin nvcachectl)" status --cluster "$conf" --timeout 2000 2>&1)
grep -q "s of writes kept in its NVRAM alone" <<<"$st" ||
  t_fail "nvcachectl status --cluster does not show node 1's writes kept alone: $st"
t_log "node 2 down: a write into node 1's stripe (node 2 its shadow) is kept in node 1's NVRAM alone"
python3 - "$m3/$f" "$T_DIR/ref" <<'PY' || t_fail "$f does not read whole through mount 3 while node 2 is down"
import os, sys
ref = open(sys.argv[2], "rb").read()
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
got = b""
while len(got) < len(ref) + 1:
    b = os.pread(fd, 1 << 20, len(got))
    if not b:
        break
    got += b
if got != ref:
    diff = next((i for i in range(min(len(got), len(ref))) if got[i] != ref[i]), min(len(got), len(ref)))
    sys.exit("%d bytes read of %d, first difference at %d" % (len(got), len(ref), diff))
PY
reads=$(fscl_mount_stat "$m3" down_node_replica_reads)
[ "${reads:-0}" -gt 0 ] || t_fail "mount 3 read nothing from the replicas"
t_log "node 2 down: every byte of $f reads through mount 3 ($reads ranges from node 3's replicas)"
# (mount 3 never opened it: the unit from the backing file's xattr)
cmp "$T_DIR/gref" "$m3/$g" || t_fail "$g, homed at the lost node 2, does not read whole through mount 3"
t_log "node 2 down: $g, homed there, reads whole through mount 3 (its size from node 3)"

# node 3 writes node 2's replicas back (node 2 down for 2 s); after the
# close every byte is in the backing
touch "$T_DIR/held.close" "$T_DIR/gheld.close"
wait $writer || t_fail "the writer failed"
wait $gwriter || t_fail "the writer of $g failed"
t_wait 20 cmp -s "$T_DIR/ref" "$T_DIR/b/$f" || t_fail "the backing lacks bytes of $f: $(fscl_why)"
t_wait 20 cmp -s "$T_DIR/gref" "$T_DIR/b/$g" || t_fail "the backing lacks bytes of $g, homed at the lost node: $(fscl_why)"
[ "$(fscl_stat 3 fcache_replicas_written_back)" -ge 16 ] ||
  t_fail "node 3 wrote back $(fscl_stat 3 fcache_replicas_written_back) replicas"
grep -q "owner index 1 down for .* wrote back its replicas" "$T_DIR/node3-fs.log" ||
  t_fail "node 3 does not log the write-back of node 2's replicas"
t_log "node 3 wrote node 2's replicas back: the backing holds every byte"
fscl_stop
