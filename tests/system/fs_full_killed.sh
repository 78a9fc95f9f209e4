#!/usr/bin/env bash
# fs_full_killed.sh - a one-node mount whose cache is full of dirty
# blocks over a backing frozen for 15 s: its writer waits for room
# (back-pressure); killed -9 meanwhile, it goes at once (its write
# answered EINTR: no one is left to acknowledge it), not once the
# backing thaws. The writer's file reads back what was acknowledged
# before the kill, and everything reaches the thawed backing. (The
# cluster mount's case is in fscl_full.)
T_TIMEOUT=${T_TIMEOUT:-90}
. "$(dirname "$0")/lib.sh"
t_require_root
t_require_cmd fusermount3 python3
ctl=$(t_bin nvcachectl)
export NVCACHE_RUN_DIR=$T_DIR/run
B=$T_DIR/b M=$T_DIR/m
mkdir -p "$M"
t_loop_ext4 "$B"
stat_of() { "$ctl" stats "$M" | awk -v k="$1:" '$1 == k { print $2 }'; }

t_fs_mount "$M" "backing=$B,nvram=$T_SHM/nv,cache_size=4M,writeback_delay=0.3"

: >"$M/v"   # (a create waits for a frozen backing)
bp0=$(stat_of backpressure_waits); bp0=${bp0:-0}
waiting() { local w; w=$(stat_of backpressure_waits); [ "${w:-0}" -gt "$bp0" ]; }
fsfreeze -f "$B" || t_fail "fsfreeze"
( sleep ${FS_FREEZE_S:-15}; fsfreeze -u "$B" 2>/dev/null ) &
thaw=$!
t0=$(date +%s)
# 16 MiB of 64 KiB writes into 4 MiB of cache (no O_TRUNC: that would
# wait for the frozen backing itself, not for the cache)
head -c 16M /dev/urandom >"$T_DIR/ref"
dd if="$T_DIR/ref" of="$M/v" bs=64K conv=notrunc 2>/dev/null &
victim=$!
t_wait 8 waiting || t_fail "the writer never waited for room 8 s into the freeze (test set-up: did the cache fill?)"
t_kill_waiter "$victim" "$t0" "${FS_FREEZE_S:-15}" 3000
wait $thaw
got=$(stat -c %s "$M/v")
[ "$got" -gt 0 ] && cmp -s -n "$got" "$T_DIR/ref" "$M/v" ||
  t_fail "the $got bytes written before the kill read back wrong"
t_wait 20 cmp -s -n "$got" "$T_DIR/ref" "$B/v" ||
  t_fail "the $got bytes written before the kill never reached the thawed backing"
t_log "a one-node writer killed -9 while it waits for room over a frozen backing: gone in $kms ms; its $((got >> 10)) KiB acknowledged read back and reach the backing"
