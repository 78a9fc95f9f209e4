#!/usr/bin/env bash
# fs_recovery.sh - kill -9 nvcachefs while files hold dirty data in NVRAM
# (closed files waiting for write-back, an fsync'ed open file, a renamed
# file, an unlinked one, a partly overwritten existing file, a writer in full
# flight), remount with the same NVRAM file: recovery writes every dirty
# byte back to the backing dir before the mount is served, nothing of the
# unlinked file appears, and every acknowledged write is there.
T_TIMEOUT=${T_TIMEOUT:-150}
. "$(dirname "$0")/lib.sh"
t_require_root
t_require_cmd fusermount3 python3 cmp
bin=$(t_bin nvcachefs)
export NVCACHE_RUN_DIR=$T_DIR/run
here=$(dirname "$0")
B=$T_DIR/b M=$T_DIR/m NV=$T_SHM/nv
mkdir -p "$B" "$M" "$T_DIR/exp"
pid=

mount_fs() {  # mount_fs LOG EXTRA_OPTS
  "$bin" "$M" -o "backing=$B,nvram=$NV,cache_size=128M$2" -f >"$1" 2>&1 &
  pid=$!
  t_cleanup "kill -9 $pid"
  t_wait 30 t_is_mounted "$M" || { cat "$1"; t_fail "no mount"; }
}
kill9() {
  kill -9 "$pid"; wait "$pid" 2>/dev/null
  fusermount3 -uz "$M" 2>/dev/null || umount -l "$M"
}
t_cleanup "t_umount $M"

# an existing file in the backing dir, to be partly overwritten
head -c 3000000 /dev/urandom >"$B/existing"
cp "$B/existing" "$T_DIR/exp/existing"

mount_fs "$T_DIR/log1" ",writeback_delay=3600"
head -c 5000000 /dev/urandom >"$T_DIR/exp/closed"
cp "$T_DIR/exp/closed" "$M/closed"                    # closed, write-back pending
head -c 777777 /dev/urandom >"$T_DIR/exp/renamed"
cp "$T_DIR/exp/renamed" "$M/before-rename"
mv "$M/before-rename" "$M/renamed"                    # identity survives a rename
head -c 1000000 /dev/urandom >"$M/unlinked"
rm "$M/unlinked"                                      # dropped, never written back
head -c 100000 /dev/urandom >"$T_DIR/patch"
dd if="$T_DIR/patch" of="$M/existing" bs=1000 seek=1234 conv=notrunc status=none
dd if="$T_DIR/patch" of="$T_DIR/exp/existing" bs=1000 seek=1234 conv=notrunc status=none
exec 8<>"$M/open-fsynced"                              # still open at the crash
head -c 300000 /dev/urandom | tee "$T_DIR/exp/open-fsynced" >&8
python3 -c 'import os; os.fsync(8)'
mkdir "$M/sub"; printf 'deep' >"$M/sub/deep"; printf 'deep' >"$T_DIR/exp/deep"
sync "$M/closed"
# nothing has reached the backing yet: the test would prove nothing otherwise
[ "$(stat -c %s "$B/closed")" -eq 0 ] || t_fail "closed file written back early"
cmp -s "$B/existing" "$T_DIR/exp/existing" && t_fail "overwrite reached backing early"
kill9
exec 8>&-
t_log "killed with dirty data; backing has closed=$(stat -c %s "$B/closed") bytes"

mount_fs "$T_DIR/log2" ",writeback_delay=3600"
grep -E "recovery" "$T_DIR/log2" >&2
# recovery happens before the mount is served: the backing is complete now
for f in closed renamed existing open-fsynced; do
  cmp "$B/$f" "$T_DIR/exp/$f" || t_fail "backing $f wrong after recovery"
  cmp "$M/$f" "$T_DIR/exp/$f" || t_fail "mounted $f wrong after recovery"
done
cmp "$B/sub/deep" "$T_DIR/exp/deep" || t_fail "sub/deep wrong"
[ -e "$B/unlinked" ] && t_fail "unlinked file came back"
[ -e "$B/before-rename" ] && t_fail "old name came back"

# kill -9 in full flight: a writer fsyncs 4 KiB records and notes each one
python3 "$here/fs_recovery.py" writer "$M" stream "$T_DIR/acked" &
wpid=$!
t_cleanup "kill -9 $wpid"
sleep 2
kill9
kill -9 $wpid 2>/dev/null; wait $wpid 2>/dev/null
acked=$(cat "$T_DIR/acked")
t_log "killed the daemon after $acked acknowledged records"
[ "$acked" -gt 10 ] || t_fail "writer made no progress"
mount_fs "$T_DIR/log3" ",writeback_delay=0.1"
python3 "$here/fs_recovery.py" check "$B/stream" "$acked" >&2 || t_fail "acknowledged records lost in backing"
python3 "$here/fs_recovery.py" check "$M/stream" "$acked" >&2 || t_fail "acknowledged records lost in mount"

# kill -9 inside a shrinking ftruncate, just after the backing file was
# cut and before the cache and its record followed: the file must come
# back old or new, never a mix. (It came back at its old size, with
# zeros where written-back data had been cut off, and a dirty block
# beyond the new size written back.)
fusermount3 -u "$M"
for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
wait $pid
head -c $((8 << 20)) /dev/urandom >"$T_DIR/tr.src"
NVCACHE_CRASH_IN=truncate mount_fs "$T_DIR/log4" ",writeback_delay=0.1"
cp "$T_DIR/tr.src" "$M/tr"
t_wait 20 sh -c "cmp -s '$B/tr' '$T_DIR/tr.src'" || t_fail "truncate case: the file was not written back"
python3 - "$M/tr" <<'PY' && t_fail "the truncate was not interrupted (NVCACHE_CRASH_IN=truncate)"
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.pwrite(fd, b'D' * 16384, 6 << 20)    # dirty, past the new end
os.ftruncate(fd, 1 << 20)
PY
wait "$pid" 2>/dev/null
fusermount3 -uz "$M" 2>/dev/null || umount -l "$M"
mount_fs "$T_DIR/log5" ",writeback_delay=0.1"
sz=$(stat -c %s "$B/tr")
[ "$sz" = $((1 << 20)) ] || t_fail "after a crash in ftruncate: $sz bytes in the backing, want the new size 1048576"
cmp -n $((1 << 20)) "$B/tr" "$T_DIR/tr.src" || t_fail "after a crash in ftruncate: the first MiB changed"
cmp "$M/tr" "$B/tr" || t_fail "after a crash in ftruncate: mount and backing differ"
grep -q "finished truncating" "$T_DIR/log5" || t_fail "recovery did not log the truncation it finished"
t_log "kill -9 inside ftruncate: the file is the truncated one, whole"

# a clean unmount after all that
fusermount3 -u "$M"
for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
wait $pid || t_fail "nvcachefs exited non-zero after unmount"
t_log "PASS"
