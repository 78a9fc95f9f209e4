#!/usr/bin/env bash
# fs_small_cache.sh - a cache much smaller than the data: files 4x the cache
# size are written (sequentially and at random offsets) and read back
# correctly; clean blocks are evicted, dirty ones written back while the
# writer waits (back-pressure, never ENOSPC); after unmount the backing holds
# exactly the data.
T_TIMEOUT=${T_TIMEOUT:-150}
. "$(dirname "$0")/lib.sh"
t_require_root
t_require_cmd fusermount3 python3 cmp
bin=$(t_bin nvcachefs)
ctl=$(t_bin nvcachectl)
export NVCACHE_RUN_DIR=$T_DIR/run
B=$T_DIR/b M=$T_DIR/m
mkdir -p "$B" "$M"
stat_of() { "$ctl" stats "$M" | awk -v k="$1:" '$1 == k { print $2 }'; }

"$bin" "$M" -o "backing=$B,nvram=$T_SHM/nv,cache_size=8M,writeback_delay=0.5" -f >"$T_DIR/log" 2>&1 &
pid=$!
t_cleanup "kill -9 $pid"
t_cleanup "t_umount $M"
t_wait 20 t_is_mounted "$M" || { cat "$T_DIR/log"; t_fail "no mount"; }
total=$(stat_of nvram_total_bytes)
[ "$total" -le $((8 << 20)) ] || t_fail "cache is $total bytes, not 8M"

# sequential: 32 MiB through an 8 MiB cache
head -c $((32 << 20)) /dev/urandom >"$T_DIR/seq"
dd if="$T_DIR/seq" of="$M/seq" bs=1M status=none || t_fail "sequential write failed"
cmp "$M/seq" "$T_DIR/seq" || t_fail "sequential file reads back wrong"
t_log "after 32 MiB: evictions $(stat_of evictions), back-pressure waits $(stat_of backpressure_waits), written back $(stat_of written_back_bytes)"
[ "$(stat_of evictions)" -gt 0 ] || t_fail "nothing was evicted"
[ "$(stat_of written_back_bytes)" -gt 0 ] || t_fail "nothing written back under pressure"

# random 4 KiB..200 KiB writes all over a 32 MiB file, checked against a copy
python3 - "$M/rand" "$T_DIR/rand" <<'PY'
import os, random, sys
random.seed(7)
size = 32 << 20
a = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
b = os.open(sys.argv[2], os.O_CREAT | os.O_RDWR, 0o644)
for f in (a, b):
    os.ftruncate(f, size)
for i in range(600):
    off = random.randrange(0, size - 200000)
    n = random.randrange(4096, 200000)
    buf = os.urandom(n)
    assert os.pwrite(a, buf, off) == n
    os.pwrite(b, buf, off)
    if i % 50 == 0:
        off = random.randrange(0, size - 100000)
        assert os.pread(a, 100000, off) == os.pread(b, 100000, off), "mismatch at %d" % off
os.close(a); os.close(b)
PY
[ $? -eq 0 ] || t_fail "random writes through the small cache failed"
cmp "$M/rand" "$T_DIR/rand" || t_fail "random-write file reads back wrong"
used=$(stat_of nvram_used_bytes)
[ "$used" -le "$total" ] || t_fail "cache over its size"

# more files than the object table has slots: closed clean files give theirs
# up, dirty ones are written back first; no write fails
mkdir "$M/many"
for i in $(seq 400); do echo "small file $i" >"$M/many/f$i" || t_fail "small file $i failed"; done
for i in 1 200 400; do [ "$(cat "$M/many/f$i")" = "small file $i" ] || t_fail "small file $i wrong"; done
t_log "400 small files: cached_files $(stat_of cached_files), back-pressure waits $(stat_of backpressure_waits)"

# extending writes from three processes at once, each waiting for space
# half done (they all hung once: write-back could not see a waiting
# write's first blocks); then the same in a plain directory, compared
mkdir "$M/ext" "$T_DIR/ext"
here=$(dirname "$0")
pids=()
for w in 1 2 3; do timeout 90 python3 "$here/fs_extend_writers.py" "$M/ext" $w 1200 & pids+=($!); done
for p in "${pids[@]}"; do wait "$p" || t_fail "an extending writer failed or hung (timeout 90 s): $(tail -3 "$T_DIR/log")"; done
for w in 1 2 3; do python3 "$here/fs_extend_writers.py" "$T_DIR/ext" $w 1200; done
diff -r "$M/ext" "$T_DIR/ext" >&2 || t_fail "extending writers' files differ from a plain directory's"
t_log "3 extending writers: back-pressure waits $(stat_of backpressure_waits), evictions $(stat_of evictions)"

# A file deleted while open (tmpfile()'s create-then-unlink, as glibc
# falls back to): 32 MiB written to it through the 8 MiB cache. Its dirty
# blocks used to be written nowhere, so they filled the cache, and this
# writer and every other one on the mount hung in D state, unkillable,
# with the daemon spinning. They go to the unlinked backing inode instead,
# it reads back whole, and nothing of it is left in the backing.
timeout 90 python3 - "$M/tmpf" "$T_DIR/seq" "$M/after" <<'PY' || t_fail "a deleted open file larger than the cache: writes failed or hung: $(tail -3 "$T_DIR/log")"
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o600)
os.unlink(sys.argv[1])
src = open(sys.argv[2], 'rb').read()
for off in range(0, len(src), 1 << 20):
    os.pwrite(fd, src[off:off + (1 << 20)], off)
# another file on the mount is not held up
with open(sys.argv[3], 'wb') as f:
    f.write(b'after' * 1000)
got = b''.join(os.pread(fd, 1 << 20, off) for off in range(0, len(src), 1 << 20))
assert got == src, 'the deleted file read back wrong'
os.close(fd)
PY
[ "$(head -c 5 "$M/after")" = after ] || t_fail "the file written beside the deleted one is wrong"
[ -e "$B/tmpf" ] && t_fail "the deleted file reached the backing directory"
t_log "a deleted open file of 32 MiB through the 8 MiB cache: read back whole"

# Open files holding every entry of the object table (256 here): 300
# files kept open while written, then 300 inputs kept open read-only
# (prefetch caches them) and one result written. Every later write used
# to wait for ever, unkillable (D state), and the mount could not be
# unmounted: only closed files gave their entries up.
held() {   # DESCRIPTION: run python3 - ARGS... from stdin, fail if it hangs
  local what=$1; shift
  python3 - "$@" <&0 & local w=$!   # <&0: a background job would read /dev/null
  for _ in $(seq 600); do kill -0 $w 2>/dev/null || break; sleep 0.1; done
  if kill -0 $w 2>/dev/null; then
    kill -9 $pid; t_fail "$what: hung (table full of open files): $(tail -3 "$T_DIR/log")"
  fi
  wait $w || t_fail "$what: failed"
}
mkdir "$M/open" "$B/in"
for i in $(seq 0 299); do echo "input $i" >"$B/in/i$i"; done
held "300 files written while held open" "$M/open" <<'PY'
import os, sys
fds = [os.open(f"{sys.argv[1]}/f{i}", os.O_CREAT | os.O_WRONLY, 0o644) for i in range(300)]
for i, fd in enumerate(fds):
    os.write(fd, b"%d\n" % i * 1000)
for fd in fds:
    os.close(fd)
PY
held "300 inputs held open read-only, then a write" "$M/in" "$M/result" <<'PY'
import os, sys
fds = [os.open(f"{sys.argv[1]}/i{i}", os.O_RDONLY) for i in range(300)]
got = [os.read(fd, 100) for fd in fds]
assert got == [b"input %d\n" % i for i in range(300)], "inputs read wrong"
with open(sys.argv[2], "w") as f:
    f.write("result\n")
for fd in fds:
    os.close(fd)
PY
for i in 0 150 299; do
  [ "$(wc -l <"$M/open/f$i")" = 1000 ] && [ "$(sort -u "$M/open/f$i")" = "$i" ] ||
    t_fail "held-open file $i reads back wrong"
done
t_log "300 files held open (written, then read-only): no writer hung; cached_files $(stat_of cached_files)"

fusermount3 -u "$M" || t_fail "fusermount3 -u"
for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
wait $pid || t_fail "nvcachefs exited non-zero"
cmp "$B/seq" "$T_DIR/seq" || t_fail "backing seq wrong"
cmp "$B/rand" "$T_DIR/rand" || t_fail "backing rand wrong"
for i in $(seq 400); do [ "$(cat "$B/many/f$i")" = "small file $i" ] || t_fail "backing small file $i wrong"; done
diff -r "$B/ext" "$T_DIR/ext" >&2 || t_fail "backing: extending writers' files differ"
[ "$(cat "$B/result")" = result ] || t_fail "backing: the result written beside 300 open inputs is wrong"
for i in 0 150 299; do
  [ "$(wc -l <"$B/open/f$i")" = 1000 ] && [ "$(sort -u "$B/open/f$i")" = "$i" ] ||
    t_fail "backing: held-open file $i is wrong"
done

t_log "PASS"
