#!/usr/bin/env bash
# fs_full_killed.sh - one-node mounts whose caches are full of dirty
# data over a backing frozen for 18 s: their writers wait for room
# (back-pressure); killed -9 meanwhile, they go at once (the write
# answered EINTR: no one is left to acknowledge it), not once the
# backing thaws. Two kinds of room: blocks (a 16 MiB file into 4 MiB of
# cache), and records of the object table (a file each: 4 KiB blocks
# leave 256 records for 1,024 blocks, so 300 small files fill the
# records first). What was acknowledged before the kill reads back and
# reaches the thawed backing. (The cluster mount's case is in fscl_full.)
T_TIMEOUT=${T_TIMEOUT:-90}
. "$(dirname "$0")/lib.sh"
t_require_root
t_require_cmd fusermount3 python3
ctl=$(t_bin nvcachectl)
export NVCACHE_RUN_DIR=$T_DIR/run
B=$T_DIR/b M=$T_DIR/m S=$T_DIR/s
mkdir -p "$M" "$S"
t_loop_ext4 "$B"
mkdir "$B/big" "$B/small"
stat_of() { "$ctl" stats "$1" | awk -v k="$2:" '$1 == k { print $2 }'; }

t_fs_mount "$M" "backing=$B/big,nvram=$T_SHM/nv,cache_size=4M,writeback_delay=0.3"
t_fs_mount "$S" "backing=$B/small,nvram=$T_SHM/nvs,cache_size=4M,block_size=4K,writeback_delay=0.3" "$T_DIR/log.s"

# (a create waits for a frozen backing: the files are made first)
: >"$M/v"
for k in $(seq 0 299); do : >"$S/f$k"; done
bp0=$(stat_of "$M" backpressure_waits) bs0=$(stat_of "$S" backpressure_waits)
waiting() { local w; w=$(stat_of "$1" backpressure_waits); [ "${w:-0}" -gt "$2" ]; }
fsfreeze -f "$B" || t_fail "fsfreeze"
( sleep ${FS_FREEZE_S:-18}; fsfreeze -u "$B" 2>/dev/null ) &
thaw=$!
t0=$(date +%s)
# 16 MiB of 64 KiB writes into 4 MiB of cache (no O_TRUNC: that would
# wait for the frozen backing itself, not for the cache)
head -c 16M /dev/urandom >"$T_DIR/ref"
dd if="$T_DIR/ref" of="$M/v" bs=64K conv=notrunc 2>/dev/null &
victim=$!
# 100 bytes into each small file, each listed once acknowledged
python3 - "$S" "$T_DIR/acked" <<'PY' &
import os, sys
ok = open(sys.argv[2], "w", buffering=1)
for k in range(300):
    fd = os.open("%s/f%d" % (sys.argv[1], k), os.O_WRONLY)
    os.write(fd, (b"%d;" % k).ljust(100, b"."))
    os.close(fd)
    ok.write("%d\n" % k)
PY
small=$!
t_wait 8 waiting "$M" "${bp0:-0}" || t_fail "the writer never waited for room 8 s into the freeze (test set-up: did the cache fill?)"
t_wait 8 waiting "$S" "${bs0:-0}" || t_fail "the small files' writer never waited for a record 8 s into the freeze (test set-up: $(wc -l <"$T_DIR/acked") written)"
t_kill_waiter "$victim" "$t0" "${FS_FREEZE_S:-18}" 3000
kbig=$kms
t_kill_waiter "$small" "$t0" "${FS_FREEZE_S:-18}" 3000
wait $thaw
got=$(stat -c %s "$M/v")
[ "$got" -gt 0 ] && cmp -s -n "$got" "$T_DIR/ref" "$M/v" ||
  t_fail "the $got bytes written before the kill read back wrong"
t_wait 20 cmp -s -n "$got" "$T_DIR/ref" "$B/big/v" ||
  t_fail "the $got bytes written before the kill never reached the thawed backing"
t_log "a one-node writer killed -9 while it waits for room over a frozen backing: gone in $kbig ms; its $((got >> 10)) KiB acknowledged read back and reach the backing"
n=$(wc -l <"$T_DIR/acked")
[ "$n" -ge 200 ] && [ "$n" -lt 300 ] || t_fail "$n small files written before the kill (256 records: about 250 expected)"
check() {  # check DIR: each acknowledged small file holds its bytes
  python3 - "$1" "$T_DIR/acked" <<'PY'
import sys
for line in open(sys.argv[2]):
    k = int(line)
    want = (b"%d;" % k).ljust(100, b".")
    got = open("%s/f%d" % (sys.argv[1], k), "rb").read()
    if got != want:
        sys.exit("f%d holds %r" % (k, got[:12]))
PY
}
check "$S" || t_fail "a small file acknowledged before the kill reads back wrong"
t_wait 20 check "$B/small" || t_fail "a small file acknowledged before the kill never reached the thawed backing"
t_log "a one-node writer of small files killed -9 while it waits for a record: gone in $kms ms; its $n files acknowledged read back and reach the backing"
