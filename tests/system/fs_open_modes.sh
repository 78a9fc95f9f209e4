#!/usr/bin/env bash
# fs_open_modes.sh - the open modes of the seed paper as POSIX sees them:
# an existing file is prefetched at open in the background, a new file (also
# ROMIO's O_CREAT+close+reopen) or a truncated one is not; a read-only open
# never causes write-back; a file is written back only after its last close
# plus writeback_delay; a file unlinked (or renamed over) before its
# write-back drops its dirty data without writing it, also while another
# process still holds it open (MPI_MODE_DELETE_ON_CLOSE); fsync=backing puts
# the data in the backing file before fsync returns, fsync=nvram does not.
T_TIMEOUT=${T_TIMEOUT:-120}
. "$(dirname "$0")/lib.sh"
t_require_root
t_require_cmd fusermount3 python3 cmp
bin=$(t_bin nvcachefs)
ctl=$(t_bin nvcachectl)
export NVCACHE_RUN_DIR=$T_DIR/run
B=$T_DIR/b M=$T_DIR/m
mkdir -p "$B" "$M"
pid=

mount_fs() {  # mount_fs EXTRA_OPTS
  "$bin" "$M" -o "backing=$B,nvram=$T_SHM/nv,cache_size=64M$1" -f >>"$T_DIR/log" 2>&1 &
  pid=$!
  t_cleanup "kill -9 $pid"
  t_wait 20 t_is_mounted "$M" || { cat "$T_DIR/log"; t_fail "no mount"; }
}
unmount_fs() {
  fusermount3 -u "$M" || t_fail "fusermount3 -u"
  for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  wait $pid || t_fail "nvcachefs exited non-zero"
}
stat_of() { "$ctl" stats "$M" | awk -v k="$1:" '$1 == k { print $2 }'; }
t_cleanup "t_umount $M"

head -c 8000000 /dev/urandom >"$B/existing"
head -c 3000000 /dev/urandom >"$B/to-truncate"
head -c 2000000 /dev/urandom >"$B/readonly"
mount_fs ",writeback_delay=1.5"

# -- prefetch: none for a new file, created and reopened the ROMIO way
python3 - "$M/new" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644); os.close(fd)   # rank 0: create, close
fd = os.open(sys.argv[1], os.O_RDWR)                                    # all ranks: reopen
os.pwrite(fd, b"n" * 100000, 0); os.close(fd)
PY
sleep 0.5
[ "$(stat_of prefetched_bytes)" -eq 0 ] || t_fail "a new file was prefetched"
# -- none for a truncating open
python3 -c 'import os,sys,time; fd=os.open(sys.argv[1], os.O_RDWR|os.O_TRUNC); os.write(fd,b"t"*10); time.sleep(1); os.close(fd)' "$M/to-truncate"
[ "$(stat_of prefetched_bytes)" -eq 0 ] || t_fail "a truncated file was prefetched"
# -- an existing file is prefetched in the background while it is open
exec 7<"$M/existing"
t_wait 20 sh -c "[ \"\$('$ctl' stats '$M' | awk '\$1==\"prefetched_bytes:\"{print \$2}')\" -ge 8000000 ]" ||
  t_fail "existing file not prefetched: $(stat_of prefetched_bytes) bytes"
hits0=$(stat_of hits)
cmp "$M/existing" "$B/existing" || t_fail "prefetched content wrong"
[ "$(stat_of hits)" -gt "$hits0" ] || t_fail "reads after prefetch were not cache hits"
exec 7<&-
t_log "prefetch: $(stat_of prefetched_bytes) bytes, none for new or truncated files"

# -- write-back after the last close, not before, and only after the delay
wb0=$(stat_of written_back_bytes)
exec 8>"$M/late"
head -c 500000 /dev/urandom | tee "$T_DIR/late" >&8
sleep 2
[ -s "$B/late" ] && t_fail "written back while still open"
exec 8>&-
sleep 0.5
[ -s "$B/late" ] && t_fail "written back before writeback_delay"
t_wait 10 cmp -s "$B/late" "$T_DIR/late" || t_fail "not written back after the delay"

# -- a read-only open causes no write-back
sleep 2
wb1=$(stat_of written_back_bytes)
mt=$(stat -c %Y.%s "$B/readonly")
cat "$M/readonly" >/dev/null
python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.read(fd, 10); os.close(fd)' "$M/readonly"
sleep 2.5
[ "$(stat_of written_back_bytes)" -eq "$wb1" ] || t_fail "read-only opens caused write-back"
[ "$(stat -c %Y.%s "$B/readonly")" = "$mt" ] || t_fail "backing of a read-only file changed"

# -- unlinked before write-back: nothing reaches the backing
python3 - "$M/doomed" <<'PY'
import os, sys
p = sys.argv[1]
a = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)     # two "ranks" hold it
b = os.open(p, os.O_RDWR)
os.pwrite(a, b"a" * 300000, 0)
os.pwrite(b, b"b" * 300000, 300000)
os.close(a)
os.unlink(p)                                        # DELETE_ON_CLOSE: close, unlink
os.pwrite(b, b"c" * 1000, 0)                        # the other still writes
assert os.pread(b, 3, 0) == b"ccc"
os.close(b)
PY
# -- renamed over before write-back: the old file's data is dropped
head -c 400000 /dev/urandom >"$M/victim"
head -c 123456 /dev/urandom | tee "$T_DIR/winner" >"$M/winner"
mv "$M/winner" "$M/victim"
wb2=$(stat_of written_back_bytes)
sleep 3
t_wait 10 cmp -s "$B/victim" "$T_DIR/winner" || t_fail "renamed file not written back"
[ -e "$B/doomed" ] && t_fail "unlinked file exists in backing"
wrote=$(( $(stat_of written_back_bytes) - wb2 ))
[ "$wrote" -eq 123456 ] || t_fail "expected only the winner's 123456 bytes written back, got $wrote"
[ "$(stat_of dropped_unlinked_files)" -ge 2 ] || t_fail "dropped files not counted"
unmount_fs

# -- fsync=nvram: fsync does not wait for the backing; fsync=backing does
fsync_test() {  # fsync_test MODE -> prints the backing size right after fsync
  python3 - "$M/f-$1" "$B/f-$1" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"s" * 200000)
os.fsync(fd)
print(os.stat(sys.argv[2]).st_size)
os.close(fd)
PY
}
mount_fs ",writeback_delay=3600,fsync=nvram"
[ "$(fsync_test nvram)" -eq 0 ] || t_fail "fsync=nvram wrote the backing"
unmount_fs
[ "$(stat -c %s "$B/f-nvram")" -eq 200000 ] || t_fail "fsync=nvram file not written at unmount"
mount_fs ",writeback_delay=3600,fsync=backing"
[ "$(fsync_test backing)" -eq 200000 ] || t_fail "fsync=backing returned before the backing had the data"
unmount_fs
t_log "PASS"
