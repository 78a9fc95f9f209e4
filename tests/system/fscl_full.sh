#!/usr/bin/env bash
# fscl_full.sh - full file caches: two nodes with 4 MiB caches, holding
# the records of 600 small files, take a 40 MiB file written through one
# mount. A node whose every block is dirty writes back and the writer
# waits (back-pressure), never ENOSPC; the file reads back whole through
# the other mount and reaches the backing. A backing that stalls (frozen
# for 15 s) while four writers fill the caches: the nodes hold each write
# 2 s, answer FULL, and the mount sends it again, so the writes go
# through once the backing is back, never ENOSPC, the mount's other
# requests go on meanwhile, and a writer killed -9 goes at once; a
# backing full itself does give ENOSPC, and a file's write-back that
# failed there is tried again until it has room. Then
# a mount killed -9 while it holds a file open: the nodes release its
# opens and write the file back, and the mount restarted reads it; one
# unmounted cleanly is gone without a warning. The
# backing is an ext4 on a loop device
# (its image on disk, under T_DIR), so that fsfreeze can stall it.
T_TIMEOUT=${T_TIMEOUT:-120}
# a mount with no connection for 1 s is gone (default 20 s)
export NVCACHE_MOUNT_GONE_MS=1000
. "$(dirname "$0")/lib.sh"
FSCL_N=2 FSCL_CACHE=4M
. "$(dirname "$0")/fscl_common.bash"
t_loop_ext4 "$T_DIR/b"
fscl_start
# Many small files first (closed, written back: clean records that fill
# the nodes' object tables of 256), so that the big file's record is one
# among hundreds when the caches fill: write-back under back-pressure
# must find it there, not only among the table's first records, and the
# parallel write-backs of the two owners must not cut each other's
# blocks off the backing file.
python3 - "$T_DIR/m1/s" "$T_DIR/m2/s" <<'PY' || t_fail "600 small files over 2 nodes"
import os, sys
for d in sys.argv[1:]:
    os.makedirs(d, exist_ok=True)
for k in range(600):
    with open(os.path.join(sys.argv[1 + k % 2], "f%d" % k), "wb") as f:
        f.write(b"%06d" % k * 100)
PY
# each ends within its first stripe: its home writes it back at its last
# close, asked by the CLOSE itself, and no node gets a WRITEBACK
# (a file: t_wait runs it again and again, a heredoc is read once)
cat >"$T_DIR/small_on_backing.py" <<'PY'
import os, sys
for k in range(600):
    with open(os.path.join(sys.argv[1], "s", "f%d" % k), "rb") as f:
        if f.read() != b"%06d" % k * 100:
            sys.exit(1)
PY
t_wait 15 python3 "$T_DIR/small_on_backing.py" "$T_DIR/b" ||
  t_fail "the 600 small files never all reached the backing: $(fscl_why)"
wb1=$(fscl_stat 1 requests.FILE_WRITEBACK) wb2=$(fscl_stat 2 requests.FILE_WRITEBACK)
nwb=$(( ${wb1:-0} + ${wb2:-0} ))   # (a type never served has no line)
[ "$nwb" = 0 ] || t_fail "$nwb WRITEBACK requests for 600 files of one stripe each (their homes write back at the CLOSE)"
head -c 40M /dev/urandom >"$T_DIR/ref"
dd if="$T_DIR/ref" of="$T_DIR/m1/big" bs=1M conv=fsync 2>"$T_DIR/dd.err" ||
  t_fail "writing 40 MiB through 2 x 4 MiB of cache failed: $(cat "$T_DIR/dd.err")"
wb=$(( $(fscl_stat 1 fcache_written_back_bytes) + $(fscl_stat 2 fcache_written_back_bytes) ))
[ "$wb" -ge $((30 << 20)) ] || t_fail "only $wb bytes written back while the file was open: no back-pressure?"
# the nodes count what they served by type: 640 blocks of 64 KiB came
nw=$(( $(fscl_stat 1 requests.FILE_WRITE) + $(fscl_stat 2 requests.FILE_WRITE) ))
[ "$nw" -ge 640 ] || t_fail "the nodes counted $nw FILE_WRITE requests for 640 blocks written"
cmp "$T_DIR/ref" "$T_DIR/m2/big" || t_fail "the file reads back wrong through the other mount"
t_wait 10 cmp -s "$T_DIR/ref" "$T_DIR/b/big" || t_fail "the backing lacks bytes of the file"
t_log "40 MiB through 2 x 4 MiB of cache: $((wb >> 20)) MiB written back under back-pressure, all read back"

# a backing that stalls for longer than a node holds a write (2 s, then
# answered NO_SPACE with FULL): the write-back cannot make room, the
# writers wait on, and their bytes land once the backing thaws
head -c 4M /dev/urandom >"$T_DIR/sref"
for q in 0 1 2 3 v; do : >"$T_DIR/m1/stall$q"; done   # (a create waits for a frozen backing)
bp_waits() { "$(t_bin nvcachectl)" stats "$T_DIR/m1" | awk '$1 == "backpressure_waits:" {print $2}'; }
bp0=$(bp_waits); bp0=${bp0:-0}
fsfreeze -f "$T_DIR/b" || t_fail "fsfreeze"
( sleep ${FSCL_FREEZE_S:-15}; fsfreeze -u "$T_DIR/b" 2>/dev/null ) &
thaw=$!
t0=$(date +%s)
# four writers of 4 MiB, a file each (the kernel lets one write into a
# file at a time), so that every one of the mount's four connections to
# a node can be held by a waiting write (64 KiB writes, one block each:
# a block refused is the write's error, not a short write that dd would
# finish with another)
ddp=()
for q in 0 1 2 3; do
  dd if="$T_DIR/sref" of="$T_DIR/m1/stall$q" bs=64K conv=notrunc 2>"$T_DIR/dd$q.err" &
  ddp+=($!)
done
# and a fifth, killed -9 once the writes wait (a FULL answer came): it
# is gone at once, not once the backing thaws (its write answered
# EINTR: no one to acknowledge)
dd if=/dev/zero of="$T_DIR/m1/stallv" bs=64K count=256 conv=notrunc 2>/dev/null &
victim=$!
waiting() { local w; w=$(bp_waits); [ "${w:-0}" -gt "$bp0" ]; }
t_wait 8 waiting || t_fail "no write answered FULL 8 s into the freeze (did the caches fill?): $(fscl_why)"
tfull=$(( $(date +%s) - t0 ))
# (it may wait for one of the four connections, each held 2 s, then
# for its own hold: 4.1 s at most)
t_kill_waiter "$victim" "$t0" "${FSCL_FREEZE_S:-15}" 6000
# meanwhile the writers' mount still serves its other requests to the
# nodes: no connection stays held by a waiting write for long
sleep $(( 6 - ($(date +%s) - t0) > 0 ? 6 - ($(date +%s) - t0) : 0 ))
s0=$(date +%s%N)
stat "$T_DIR/m1/big" >/dev/null && head -c 1M "$T_DIR/m1/big" | cmp -s - <(head -c 1M "$T_DIR/ref") ||
  t_fail "a stat and read through the writers' mount failed while their writes wait for room"
sms=$(( ($(date +%s%N) - s0) / 1000000 ))
[ "$sms" -lt 5000 ] || t_fail "a stat and read through the writers' mount took $sms ms while their writes wait for room"
[ $(( $(date +%s) - t0 )) -lt ${FSCL_FREEZE_S:-15} ] ||
  t_fail "the stat and read came after the thaw (test set-up: a slow machine?)"
rm -f "$T_DIR/m1/stallv"   # (its dirty bytes go with it)
for q in 0 1 2 3; do
  wait "${ddp[$q]}" ||
    t_fail "a write into full caches over a stalled backing failed: $(tail -1 "$T_DIR/dd$q.err")"
done
t1=$(date +%s)
wait $thaw
[ $((t1 - t0)) -ge 12 ] || t_fail "the write took $((t1 - t0)) s over a backing frozen for ${FSCL_FREEZE_S:-15} s: did the caches fill? (test set-up)"
for q in 0 1 2 3; do
  cmp "$T_DIR/sref" "$T_DIR/m2/stall$q" || t_fail "stall$q reads back wrong through the other mount"
  t_wait 20 cmp -s "$T_DIR/sref" "$T_DIR/b/stall$q" || t_fail "stall$q never reaches the thawed backing"
done
waits=$(( $(bp_waits) - bp0 ))
[ "${waits:-0}" -ge 1 ] || t_fail "mount 1 counted no write that waited for room"
"$(t_bin nvcachectl)" status --interval 0 >"$T_DIR/status.out" 2>&1
grep "writes or opens held for room" "$T_DIR/status.out" >/dev/null ||
  t_fail "nvcachectl status names no writes or opens held for room: $(cat "$T_DIR/status.out")"
# a cluster mount's line says which node it is, not a cache it has not
grep -q "^fs .*/m1 .*cluster node 1 of 2" "$T_DIR/status.out" &&
  ! grep -q "^fs .*cache 0 B of 0 B" "$T_DIR/status.out" ||
  t_fail "nvcachectl status shows cluster mounts wrong: $(cat "$T_DIR/status.out")"
# and a node's line its file cache (FSCL_CACHE, 4 MiB), with the dirty part
grep -Eq "^node +1 .*file cache [0-9.]+ (B|KiB|MiB) of 4.0 MiB, file cache dirty [0-9.]+ (B|KiB|MiB)" "$T_DIR/status.out" ||
  t_fail "nvcachectl status shows no file cache on node 1: $(cat "$T_DIR/status.out")"
t_log "16 MiB into full caches over a backing frozen for ${FSCL_FREEZE_S:-15} s: the writers waited $((t1 - t0)) s ($waits answers FULL), no error; a stat and read meanwhile took $sms ms; a writer killed -9 ${tfull} s in went in $kms ms"

# a backing full itself: the write-back fails with ENOSPC, so a writer
# that finds the caches full gets ENOSPC after the hold (its bytes can be
# kept nowhere), and the bytes written before it read back
fallocate -l "$(( $(df --output=avail -B1 "$T_DIR/b" | tail -1) - (64 << 10) ))" "$T_DIR/b/filler" ||
  t_fail "fallocate of the backing's free space"
head -c 16M /dev/urandom >"$T_DIR/nref"
dd if="$T_DIR/nref" of="$T_DIR/m1/nospace" bs=64K 2>"$T_DIR/dd.err" &&
  t_fail "16 MiB written through 8 MiB of cache onto a full backing: no error"
grep -q "No space left" "$T_DIR/dd.err" ||
  t_fail "a full cache over a full backing: not ENOSPC: $(tail -1 "$T_DIR/dd.err")"
got=$(stat -c %s "$T_DIR/m2/nospace")
[ "$got" -gt 0 ] && cmp -s -n "$got" "$T_DIR/nref" "$T_DIR/m2/nospace" ||
  t_fail "the $got bytes written before ENOSPC read back wrong"
rm -f "$T_DIR/m1/nospace"
# its dirty blocks go once its last close is in at its home (a reader's
# RELEASE may come after the unlink: then after the unlink's linger);
# until then they fill the caches, which cannot write them back
no_dirty() { [ "$(( $(fscl_stat 1 fcache_dirty_bytes) + $(fscl_stat 2 fcache_dirty_bytes) ))" = 0 ]; }
t_wait 20 no_dirty || t_fail "the removed file's blocks stay dirty: $(fscl_why)"
t_log "a full cache over a full backing: ENOSPC after $((got >> 20)) MiB, which read back"
# a file closed while the backing is full: its write-backs fail, and
# are tried again by themselves (no write, no close comes after) until
# the backing has room
head -c 1M /dev/urandom >"$T_DIR/lref"
wb_nospace() { cat "$T_DIR"/node*.log | grep -c "write-back of object .*No space left"; }
wb_failed_since() { [ "$(wb_nospace)" -gt "$1" ]; }
fails0=$(wb_nospace)
cp "$T_DIR/lref" "$T_DIR/m1/late" || t_fail "1 MiB into the caches over a full backing: $(fscl_why)"
t_wait 15 wb_failed_since "$fails0" ||
  t_fail "no write-back of late failed on the full backing"
# a state, not only a count that rose within the sample's second
"$(t_bin nvcachectl)" status --interval 0 >"$T_DIR/status2.out" 2>&1
grep -q "file cache write-back failing" "$T_DIR/status2.out" ||
  t_fail "nvcachectl status does not say write-back is failing: $(cat "$T_DIR/status2.out")"
"$(t_bin nvcachectl)" status --cluster "$conf" >"$T_DIR/status3.out" 2>&1
grep -q "file cache write-back failing" "$T_DIR/status3.out" ||
  t_fail "nvcachectl status --cluster does not say write-back is failing: $(cat "$T_DIR/status3.out")"
rm -f "$T_DIR/b/filler"
t_wait 20 cmp -s "$T_DIR/lref" "$T_DIR/b/late" ||
  t_fail "a file whose write-back failed on a full backing never reached it once it had room: $(grep 'write-back of object' "$T_DIR"/node*.log | tail -2)"
t_log "a write-back that failed on a full backing is tried again: the file reached it once there was room"

# kill -9 of a mount holding a file open, dirty in both nodes' NVRAM:
# its opens are released once its connections are gone, and the owners
# write the file back
head -c 3M /dev/urandom >"$T_DIR/href"
fscl_write_held "$T_DIR/m2/held" "$T_DIR/href" held
[ "$(stat -c %s "$T_DIR/b/held")" = 0 ] || t_fail "held: written back while open (test setup)"
kill -9 "${mpid[2]}"
wait "${mpid[2]}" 2>/dev/null
kill "$held_writer" 2>/dev/null
fusermount3 -uz "$T_DIR/m2"
t_wait 15 cmp -s "$T_DIR/href" "$T_DIR/b/held" ||
  t_fail "a file held open by a killed mount never reaches the backing: $(fscl_why)"
gone=$(( $(fscl_stat 1 fcache_mounts_gone) + $(fscl_stat 2 fcache_mounts_gone) ))
[ "$gone" -ge 1 ] || t_fail "no node counted the killed mount gone"
fscl_mount 2
cmp -s "$T_DIR/href" "$T_DIR/m2/held" || t_fail "held: the restarted mount reads other bytes"
t_log "a mount killed holding a file open: its opens released, the file written back whole"

# unmounted cleanly, a mount is gone as well, but it held nothing open:
# the nodes say so without a warning (the killed one's warned)
gone_sum() { echo $(( $(fscl_stat 1 fcache_mounts_gone) + $(fscl_stat 2 fcache_mounts_gone) )); }
gone_past() { [ "$(gone_sum)" -gt "$1" ]; }
gone_warnings() { cat "$T_DIR"/node*.log | grep -c "warning: file cache: .*mount(s) gone"; }
[ "$(gone_warnings)" -ge 1 ] || t_fail "no node warned of the killed mount holding files"
g0=$(gone_sum); w0=$(gone_warnings)
fusermount3 -u "$T_DIR/m2" || t_fail "unmount of node 2's mount failed"
wait "${mpid[2]}" || t_fail "node 2's nvcachefs exited $?"
t_wait 15 gone_past "$g0" || t_fail "a mount unmounted was never counted gone"
[ "$(gone_warnings)" = "$w0" ] ||
  t_fail "a mount unmounted cleanly is warned of: $(grep -h 'mount(s) gone' "$T_DIR"/node*.log | tail -2)"
grep -q "mount(s) gone .*no file open there" "$T_DIR"/node*.log ||
  t_fail "the nodes do not say the unmounted mount is gone"
fscl_mount 2
t_log "a mount unmounted cleanly: counted gone, no warning"
# a mount's coming is one line per node it talks to (not one per
# connection of its pools); the log lines carry the date
grep -Eq "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+ nvcached\[[0-9]+\] info: file cache: a mount connected from 127.0.0.1:[0-9]+ \(run [0-9a-f]{16}\)" "$T_DIR"/node1-*.log ||
  t_fail "node 1 does not log a mount's coming, dated: $(grep -hm2 connected "$T_DIR"/node1-*.log)"
grep -q "info: client connected" "$T_DIR"/node*.log &&
  t_fail "a line per connection at info: $(grep -m1 'client connected' "$T_DIR"/node*.log)"
fscl_stop
