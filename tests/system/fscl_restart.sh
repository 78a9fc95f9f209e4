#!/usr/bin/env bash
# fscl_restart.sh - kill -9 of one node's nvcached in the middle of writes
# from two mounts, then a restart: every write acknowledged before, during
# or after reads back from every mount (the file cache is persistent and
# the restarted node recovers its index), writes while it is down wait
# for it and succeed (down_wait, the default), or with down_wait=0 fail
# (EIO) at once rather than being lost quietly, and after the last close
# what the restarted node holds reaches the backing too (it remembers the
# backing directory). fsync=backing on one mount puts every owner's
# blocks in the backing before fsync returns. A lock homed at the restarted node is
# taken again through the mount (its old connections replaced), and a
# lock held through node 2's own mount stays held (its mount lives on).
# What the restarted home kept in DRAM comes back from the mounts within
# its grace, even from an idle one (node 2's mount, untouched after the
# kill): a lock held there across the restart still keeps another node's
# F_SETLK out, and a file open there and unlinked through another node
# after the restart stays whole for its holder. While node 2 is down, a
# file it holds clean reads whole (its blocks from the backing: node 3,
# its shadow, has no dirty mark for them), and a file it holds dirty
# fails with EIO in node 2's stripe only (never stale bytes), then
# reaches the backing whole after the restart; a truncate waits for it,
# and a regrow after the restart reads zeros past the cut.
T_TIMEOUT=${T_TIMEOUT:-90}
. "$(dirname "$0")/lib.sh"
FSCL_N=3
. "$(dirname "$0")/fscl_common.bash"
cluster_start "$FSCL_N" fs
fscl_mount 1
fscl_mount 2
fscl_mount 3 fsync=backing,down_wait=0
m1=$T_DIR/m1 m3=$T_DIR/m3

# writers: 64 KiB chunks of a file each, rewritten round after round, each
# write naming its file, chunk and round; the acknowledged ones listed.
# Mount 1 waits for a down node (down_wait, 60 s by default): its writes
# to node 2 wait for the restart; mount 3 (down_wait=0) fails them at once
writer() {  # writer FILE K: file K's writes, listed in $T_DIR/acked.K
  python3 - "$1" "$2" "$T_DIR/acked" <<'PY'
import os, sys, time
path, k, acked = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
ok = open("%s.%d" % (acked, k), "w")
while not os.path.exists(acked + ".go"):   # the other files are set up
    time.sleep(0.05)
t_end = time.time() + 60
rnd = 0
while time.time() < t_end:
    if rnd == 1:
        open(acked + ".ready", "w").close()   # the kill may come
        t_end = time.time() + 3
    for i in range(48):
        data = (b"%d:%02d:%05d;" % (k, i, rnd)).ljust(65536, b".")
        try:
            os.pwrite(fd, data, i * 65536)
            ok.write("%d %d %d\n" % (k, i, rnd))
        except OSError:
            ok.write("failed\n")
    ok.flush()
    rnd += 1
os.close(fd)
PY
}
writer "$m1/w1" 0 &
writer1=$!
writer "$m3/w3" 1 &
writer3=$!
# a file whose home is node 2, locked once through mount 1 (the mount
# then holds connections to node 2 for its locks), and one homed
# elsewhere; homes are a hash of the file handle, so 96 files leave
# node 2 without one with odds (2/3)^96
home2=() held="" others=()
for k in $(seq 0 95); do
  : >"$m1/lk$k"
  lay=$(fscl_layout "$m1/lk$k") ||
    t_fail "no layout for $m1/lk$k"
  if [[ $lay == *"home=2 "* ]]; then
    home2+=("lk$k")
  else
    [ -n "$held" ] || held=lk$k
    others+=("lk$k")
  fi
  [ "${#home2[@]}" -ge 7 ] && [ "${#others[@]}" -ge 4 ] && break
done
# seven files homed at node 2 of 96: a failure in ten billion runs
[ "${#home2[@]}" -ge 7 ] || t_fail "fewer than 7 files of 96 have node 2 as their home"
[ "${#others[@]}" -ge 4 ] || t_fail "fewer than 4 files of 96 have another home than node 2"
lockf=$m1/${home2[0]}
# homed elsewhere, 3 MiB over 1 MiB stripes: a stripe on each node; one
# written and closed (written back, then clean in the owners' NVRAM), one
# kept open (dirty: no write-back while open)
# clean_and_held CLEANF DIRTYF TAG BYTES: CLEANF written through mount 1
# and written back, DIRTYF written (BYTES of $T_DIR/TAG.ref) and held open
clean_and_held() {
  head -c $((3 << 20)) /dev/urandom >"$T_DIR/c$3.ref"
  head -c "$4" /dev/urandom >"$T_DIR/$3.ref"
  cp "$T_DIR/c$3.ref" "$m1/$1"
  t_wait 10 cmp -s "$T_DIR/c$3.ref" "$T_DIR/b/$1" || t_fail "$1 not written back"
  fscl_write_held "$m1/$2" "$T_DIR/$3.ref" "$3"
}
cleanf=${others[1]} dirtyf=${others[2]}
clean_and_held "$cleanf" "$dirtyf" dirty $((3 << 20))
dirtyw=$held_writer
dlay=$(fscl_layout "$m1/$dirtyf")
# homed at node 2: one written and closed (written back, its size too),
# one kept open (its size is only at node 2 until written back)
hcleanf=${home2[3]} hsizef=${home2[4]}
clean_and_held "$hcleanf" "$hsizef" hsize $((5 << 19))
hsizew=$held_writer
# homed at node 2, written and written back: the backing file's mtime is
# its write-back's, the file's (the home's) its write's, which the home
# keeps in NVRAM across its restart
mtf=${home2[5]}
# homed elsewhere, 3 MiB over 1 MiB stripes, written back: truncated
# while node 2 is down, then grown again
trf=${others[3]}
head -c $((3 << 20)) /dev/urandom >"$T_DIR/tr.ref"
cp "$T_DIR/tr.ref" "$m1/$trf"
t_wait 10 cmp -s "$T_DIR/tr.ref" "$T_DIR/b/$trf" || t_fail "$trf not written back"
mkdir -p "$m1/tdirs"
for k in $(seq 0 11); do mkdir "$m1/tdirs/d$k"; ln -s "d$k" "$m1/tdirs/l$k"; done
head -c 100000 /dev/urandom >"$T_DIR/mt.ref"
cp "$T_DIR/mt.ref" "$m1/$mtf"
t_wait 10 cmp -s "$T_DIR/mt.ref" "$T_DIR/b/$mtf" || t_fail "$mtf not written back"
mt_before=$(stat -c %y "$m3/$mtf")
[ "$mt_before" != "$(stat -c %y "$T_DIR/b/$mtf")" ] ||
  t_fail "$mtf: the backing file's mtime is its write's, not its write-back's (the check below could not fail)"
setlk() {  # setlk FILE: an fcntl write lock taken and let go, or the error
  python3 -c 'import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
fcntl.lockf(fd, fcntl.LOCK_UN)' "$1"
}
setlk "$lockf" || t_fail "no lock on $lockf before the kill"
# a process on node 2's mount holds a lock homed elsewhere: node 2's
# nvcached dying does not take it away (its mount lives on)
python3 -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.1)' "$T_DIR/m2/$held" "$T_DIR/held" "$T_DIR/let-go" 2>"$T_DIR/holder.err" &
holder=$!
t_cleanup "kill $holder 2>/dev/null"
t_wait 10 test -e "$T_DIR/held" || t_fail "no lock held through node 2's mount: $(tail -1 "$T_DIR/holder.err")"
# through node 2's mount too: a lock on a file homed at node 2, and two
# files homed there open, 3 MiB written to each (dirty in the owners'
# NVRAM: no write-back while it is open); after the restart the mount is
# idle until the holder reads its files back through the descriptors it
# kept. The second is unlinked before the restart, which the restarted
# home does not know: its bytes must still never reach the backing
python3 -c 'import fcntl, hashlib, os, sys, time
lk = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(lk, fcntl.LOCK_EX | fcntl.LOCK_NB)
fds = [os.open(p, os.O_RDWR) for p in (sys.argv[2], sys.argv[5])]
data = os.urandom(3 << 20)
for fd in fds:
    os.pwrite(fd, data, 0)
open(sys.argv[3], "w").close()
while not os.path.exists(sys.argv[4]):
    time.sleep(0.1)
for fd, what in zip(fds, ("unlinked elsewhere", "unlinked before the restart")):
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)   # from the owners
    got = os.pread(fd, len(data) + 1, 0)
    if got != data:
        sys.exit("the open file %s reads back %d bytes, %s" % (what,
                 len(got), "differing" if len(got) == len(data) else "short"))' \
  "$T_DIR/m2/${home2[1]}" "$T_DIR/m2/${home2[2]}" "$T_DIR/held2" "$T_DIR/reread" \
  "$T_DIR/m2/${home2[6]}" 2>"$T_DIR/holder2.err" &
holder2=$!
t_cleanup "kill $holder2 2>/dev/null"
t_wait 10 test -e "$T_DIR/held2" || t_fail "no lock or file held through node 2's mount: $(tail -1 "$T_DIR/holder2.err")"
# the backing inode of the file unlinked while open, held here to look
# at after the last close: nothing may be written to it
exec {unl_fd}<"$T_DIR/b/${home2[6]}"
t_cleanup "exec $unl_fd<&-"
rm "$m3/${home2[6]}"
touch "$T_DIR/acked.go"
t_wait 30 test -e "$T_DIR/acked.ready" || t_fail "the writers did not start"
sleep 0.5
kill -9 "${pid[2]}"
t_log "node 2's nvcached killed mid-writes"
sleep 0.5
# the others declare it dead (1 s without a heartbeat) before it returns
seen_dead() { [ "$(cluster_stat 1 nodes_dead)" = 1 ]; }
t_wait 10 seen_dead || t_fail "node 1 never declared node 2 dead"
# node 2 down: its clean blocks from the backing, its dirty ones EIO
cmp "$T_DIR/cdirty.ref" "$m3/$cleanf" ||
  t_fail "a file node 2 holds clean does not read whole while node 2 is down"
python3 - "$m3/$dirtyf" "$T_DIR/dirty.ref" "$dlay" <<'PY' || t_fail "a file node 2 holds dirty read wrong while node 2 was down"
import errno, os, sys
path, ref, lay = sys.argv[1], open(sys.argv[2], "rb").read(), sys.argv[3]
owners = [int(x) for x in lay.split("nodes=")[1].split()[0].split(",")]
fd = os.open(path, os.O_RDONLY)
for k in range(3):
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    try:
        got = os.pread(fd, 1 << 20, k << 20)
    except OSError as e:
        if e.errno == errno.EIO and owners[k % len(owners)] == 2:
            continue
        sys.exit("stripe %d (node %d): %s" % (k, owners[k % len(owners)], e))
    if owners[k % len(owners)] == 2:
        sys.exit("stripe %d, dirty on the down node 2, read %d bytes" % (k, len(got)))
    if got != ref[k << 20:(k + 1) << 20]:
        sys.exit("stripe %d (node %d) reads other bytes" % (k, owners[k % len(owners)]))
PY
"$(t_bin nvcachectl)" stats "$m3" | grep -qx "down_node_lost_file: $m3/$dirtyf" ||
  t_fail "nvcachectl stats does not name $m3/$dirtyf: $("$(t_bin nvcachectl)" stats "$m3" | grep down_node)"
grep -q "node 2 is down and holds block .* of $m3/$dirtyf .*dirty, not written back" "$T_DIR/fs3.log" ||
  t_fail "the mount's log does not name $dirtyf: $(grep 'is down' "$T_DIR/fs3.log" | tail -1)"
t_log "node 2 down: its clean blocks read from the backing, its dirty ones fail (EIO, the file named)"
mstat() { fscl_mount_stat "$m3" "$1"; }
lost_reads=$(mstat down_node_lost_reads)
[ "${lost_reads:-0}" -ge 1 ] || t_fail "the refused dirty reads not counted (down_node_lost_reads '$lost_reads')"
# a file whose home is node 2: readable if its size is the backing's,
# else EIO (stat and open), never the backing's stale size
cmp "$T_DIR/chsize.ref" "$m3/$hcleanf" ||
  t_fail "a file homed at the down node 2, written back, does not read whole"
python3 - "$m3/$hsizef" <<'PY' || t_fail "a file whose size only the down node 2 has was not refused"
import errno, os, sys
for what, call in (("stat", os.stat), ("open", lambda p: os.open(p, os.O_RDONLY))):
    try:
        r = call(sys.argv[1])
        sys.exit("%s of a file whose size is at the down node 2 gave %r" % (what, r))
    except OSError as e:
        if e.errno != errno.EIO:
            sys.exit("%s: %s, not EIO" % (what, e))
PY
grep -q "node 2 is down and holds the size, block .* of $m3/$hsizef " "$T_DIR/fs3.log" ||
  t_fail "the mount's log does not name $hsizef: $(grep 'is down' "$T_DIR/fs3.log" | tail -1)"
# counted as refused sizes, not as refused reads
[ "$(mstat down_node_lost_sizes)" -ge 2 ] ||
  t_fail "the refused stat and open not counted: down_node_lost_sizes '$(mstat down_node_lost_sizes)'"
[ "$(mstat down_node_lost_reads)" = "$lost_reads" ] ||
  t_fail "a refused stat or open counted as a lost read ($lost_reads, now $(mstat down_node_lost_reads))"
t_log "node 2 down: a file homed there reads whole if written back, else EIO (the file named)"
# a directory's or a symlink's time is the backing's alone: set at
# once whichever node is down (12 of each: some hash to node 2)
python3 - "$m3/tdirs" <<'PY' || t_fail "a time set on a directory or symlink while node 2 is down"
import os, sys
for k in range(12):
    for name, follow in (("d%d" % k, True), ("l%d" % k, False)):
        p = os.path.join(sys.argv[1], name)
        os.utime(p, (1000000000, 1000000000), follow_symlinks=follow)
        if os.lstat(p).st_mtime != 1000000000:
            sys.exit("%s: mtime not set" % p)
PY
# a time set on a file homed at the down node fails (EIO) rather than
# be shown until node 2 is back and then replaced by its older one
python3 - "$m3/$mtf" <<'PY' || t_fail "a time set on a file homed at the down node 2"
import errno, os, sys
try:
    os.utime(sys.argv[1], (1000000000, 1000000000))
    sys.exit("succeeded")
except OSError as e:
    if e.errno != errno.EIO:
        sys.exit("%s, not EIO" % e)
PY
# through mount 1 (down_wait) the same stat waits for node 2's restart,
# and so does a truncate, which node 2 must see (its stripe past the cut
# goes, or a regrow would show its old bytes)
stat -c %s "$m1/$hsizef" >"$T_DIR/hsize.stat" 2>&1 &
statp=$!
truncate -s $((1 << 20)) "$m1/$trf" 2>"$T_DIR/trunc.err" &
truncp=$!
# and a lock on a file homed there (its home may be restarting)
setlk "$lockf" 2>"$T_DIR/setlk-down.err" &
lockp=$!
sleep 1
kill -0 $lockp 2>/dev/null ||
  t_fail "a lock through mount 1 on a file homed at the down node 2 did not wait: $(cat "$T_DIR/setlk-down.err")"
"$(t_bin nvcachectl)" status --interval 0 >"$T_DIR/status-down.out" 2>&1
grep -q "fs .*: 1 cluster nodes not answering" "$T_DIR/status-down.out" ||
  t_fail "nvcachectl status shows no mount with node 2 down: $(cat "$T_DIR/status-down.out")"
kill -0 $statp 2>/dev/null ||
  t_fail "a stat through mount 1 of a file whose size only the down node 2 has did not wait: $(cat "$T_DIR/hsize.stat")"
kill -0 $truncp 2>/dev/null ||
  t_fail "a truncate through mount 1 did not wait for the down node 2: $(cat "$T_DIR/trunc.err")"
cluster_node_restart 2 fs2
wait $statp || t_fail "the stat that waited for node 2 failed: $(cat "$T_DIR/hsize.stat")"
wait $truncp || t_fail "the truncate that waited for node 2 failed: $(cat "$T_DIR/trunc.err")"
wait $lockp || t_fail "the lock that waited for node 2 failed: $(tail -1 "$T_DIR/setlk-down.err")"
t_log "node 2 down: a lock through mount 1 on a file homed there waited for its restart"
truncate -s $((3 << 20)) "$m3/$trf"
{ head -c $((1 << 20)) "$T_DIR/tr.ref"; head -c $((2 << 20)) /dev/zero; } >"$T_DIR/tr2.ref"
cmp "$T_DIR/tr2.ref" "$m1/$trf" || t_fail "$trf truncated while node 2 was down, then grown: not zeros past the cut"
t_log "node 2 down: a truncate through mount 1 (down_wait) waited for its restart; grown again, zeros past the cut"
[ "$(cat "$T_DIR/hsize.stat")" = $((5 << 19)) ] ||
  t_fail "the stat that waited for node 2 gave $(cat "$T_DIR/hsize.stat"), not $((5 << 19))"
t_log "node 2 down: a stat through mount 1 (down_wait) of a file whose size is only there waited for its restart"
[ "$(stat -c %y "$m3/$mtf")" = "$mt_before" ] ||
  t_fail "$mtf's mtime was $mt_before before node 2 (its home) restarted, $(stat -c %y "$m3/$mtf") after (the backing's: $(stat -c %y "$T_DIR/b/$mtf"))"
t_log "a file's mtime kept by its home survives the home's restart"
wait $writer1 || t_fail "the writer through mount 1 failed"
wait $writer3 || t_fail "the writer through mount 3 failed"
t_wait 10 grep -q "file cache: .* files found in NVRAM" "$T_DIR/node2-fs2.log" ||
  t_fail "the restarted node did not recover its files: $(tail -3 "$T_DIR/node2-fs2.log")"
# the mount's connections to node 2 died with it: the next lock there is
# taken on new ones, not refused
setlk "$lockf" 2>"$T_DIR/setlk.err" || t_fail "a lock homed at the restarted node 2 failed: $(tail -1 "$T_DIR/setlk.err")"
t_log "a lock homed at the restarted node is taken on new connections"
setlk "$m1/$held" 2>/dev/null && t_fail "node 2's nvcached died and its mount's lock on $held went with it"
touch "$T_DIR/let-go"
wait $holder
setlk "$m1/$held" || t_fail "the lock of node 2's mount was not released when its holder let go"
t_log "node 2's nvcached died and came back: its mount's lock elsewhere held on"
# what node 2 kept in DRAM came back from its idle mount
setlk "$m3/${home2[1]}" 2>/dev/null &&
  t_fail "a lock held across node 2's restart (home node 2) was taken by another node"
grep -q "file locks: node 2 restarted: 1 locks held here set again" "$T_DIR/fs2.log" ||
  t_fail "node 2's mount did not set its lock again: $(grep -i restart "$T_DIR/fs2.log" | tail -2)"
rm "$m3/${home2[2]}"
touch "$T_DIR/reread"
wait $holder2 || t_fail "$(tail -1 "$T_DIR/holder2.err") (node 2's restart lost its open count)"
t_log "the restarted home got back its locks and open counts from an idle mount"
# the file unlinked while open before the restart: its owners put off
# its write-back (the restarted home's at its start, the others' at the
# last close) until the inode is gone
unl=0
for i in 1 2 3; do unl=$((unl + $(fscl_stat $i fcache_writeback_unlinked))); done
[ "$unl" -gt 0 ] || t_fail "no owner put off the write-back of the file unlinked while open"
[ "$(stat -L -c %s "/proc/$$/fd/$unl_fd")" = 0 ] ||
  t_fail "the file unlinked while open before its home's restart was written back: $(stat -L -c %s "/proc/$$/fd/$unl_fd") bytes"
# that read relied on the size the mount learnt before the restart: the
# other owners, which knew no epoch of the file, asked node 2, whose new
# epoch ended the bound (cluster/fcache.h): it was read and clipped
# with a GETATTR, as the bytes compared above show
asked=0
for i in 1 3; do asked=$((asked + $(fscl_stat $i fcache_epochs_asked))); done
[ "$asked" -gt 0 ] || t_fail "no owner asked a home for a file's size epoch"
touch "$T_DIR/dirty.close" "$T_DIR/hsize.close"
wait $dirtyw || t_fail "the writer of $dirtyf failed"
wait $hsizew || t_fail "the writer of $hsizef failed"
cmp "$T_DIR/hsize.ref" "$m3/$hsizef" || t_fail "$hsizef does not read whole after node 2's restart"

# each chunk holds its last acknowledged round, or a later one (a write
# that failed may still have reached its owner); read through node 2
check() {
  python3 - "$T_DIR/acked" "$@" <<'PY'
import sys
acked, paths = sys.argv[1], sys.argv[2:]
last, n = {}, 0
for line in open(acked):
    if line.startswith("failed"):
        continue
    k, i, r = map(int, line.split())
    last[(k, i)] = max(r, last.get((k, i), -1))
    n += 1
data = [open(p, "rb").read() for p in paths]
bad = []
for (k, i), r in sorted(last.items()):
    chunk = data[k][i * 65536:(i + 1) * 65536]
    head = chunk.split(b";")[0].split(b":")
    if len(chunk) != 65536 or len(head) != 3 or int(head[0]) != k or \
       int(head[1]) != i or int(head[2]) < r:
        bad.append("file %d chunk %d: %r, acknowledged round %d" % (k, i, chunk[:16], r))
if bad:
    print("%d of %d chunks lost their acknowledged write, e.g. %s" % (len(bad), len(last), bad[0]),
          file=sys.stderr)
    sys.exit(1)
print("%d writes acknowledged, %d chunks hold them" % (n, len(last)), file=sys.stderr)
PY
}
cat "$T_DIR/acked.0" "$T_DIR/acked.1" >"$T_DIR/acked"
check "$T_DIR/m2/w1" "$T_DIR/m2/w3" || t_fail "an acknowledged write is lost (read through a mount)"
failed=$(grep -c failed "$T_DIR/acked.1")
[ "$failed" -gt 0 ] || t_fail "no write through mount 3 (down_wait=0) failed while node 2 was down: was it?"
! grep -q failed "$T_DIR/acked.0" ||
  t_fail "$(grep -c failed "$T_DIR/acked.0") writes through mount 1 failed: they should have waited for node 2"
waits=$(fscl_mount_stat "$m1" down_node_waits)
[ "${waits:-0}" -gt 0 ] || t_fail "mount 1 counts no write that waited for node 2"
grep -q "node 2 is down: the requests that need it wait" "$T_DIR/fs1.log" ||
  t_fail "mount 1 does not log that it waits for node 2"
# every mount that said node 2 was down says when it answered again (all
# three asked it after the restart)
for i in 1 2 3; do
  ! grep -q "node 2 is down\|node 2 down for" "$T_DIR/fs$i.log" ||
    grep -q "node 2 answers again" "$T_DIR/fs$i.log" ||
    t_fail "mount $i logs node 2 down, not its return: $(grep 'node 2' "$T_DIR/fs$i.log" | tail -2)"
done
t_log "every acknowledged write reads back through another mount; through mount 1 none failed ($waits waited for node 2), through mount 3 (down_wait=0) $failed failed at once"

# after the last close everything reaches the backing, the restarted
# node's blocks too
t_wait 15 check "$T_DIR/b/w1" "$T_DIR/b/w3" || { check "$T_DIR/b/w1" "$T_DIR/b/w3"; t_fail "the backing lacks acknowledged writes"; }
t_wait 15 cmp -s "$T_DIR/dirty.ref" "$T_DIR/b/$dirtyf" ||
  t_fail "the file node 2 held dirty while down did not reach the backing whole"
t_wait 15 cmp -s "$T_DIR/hsize.ref" "$T_DIR/b/$hsizef" ||
  t_fail "the file whose size node 2 held did not reach the backing whole"
t_wait 15 cmp -s "$T_DIR/tr2.ref" "$T_DIR/b/$trf" ||
  t_fail "the file truncated while node 2 was down, then grown, is not so in the backing"
t_log "the backing holds every acknowledged write"

# fsync=backing (mount 3): once fsync returns, every owner has written
# the file back
python3 - "$m3/fs" "$T_DIR/b/fs" <<'PY' || t_fail "fsync=backing returned before the backing had the bytes"
import os, sys
data = os.urandom(5 << 20)
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, data)
os.fsync(fd)
assert open(sys.argv[2], "rb").read() == data
os.close(fd)
PY
t_log "fsync=backing: the backing has every byte when fsync returns"
[ "$(stat -L -c %s "/proc/$$/fd/$unl_fd")" = 0 ] ||
  t_fail "the file unlinked while open before its home's restart was written back at the end: $(stat -L -c %s "/proc/$$/fd/$unl_fd") bytes"
t_log "the file unlinked while open before its home's restart: $unl write-backs put off, none of its bytes in the backing"
fscl_stop
