#!/usr/bin/env bash
# fs_backing_errors.sh - bad conditions. Refused before mounting, with a
# message and a non-zero exit: a missing, non-directory or read-only backing
# dir; an NVRAM path that is a directory, a foreign file, a store of another
# geometry (left untouched: it may hold dirty data), a file system without
# room for it. During write-back, a full backing file system (a small
# loop-mounted ext4) keeps the data dirty in NVRAM, readable, counted in the
# stats and retried with backoff; once space is freed it all lands. Data
# still dirty at unmount stays in NVRAM and lands at the next mount.
T_TIMEOUT=${T_TIMEOUT:-150}
. "$(dirname "$0")/lib.sh"
t_require_root
t_require_cmd fusermount3 python3 cmp mkfs.ext4 losetup
bin=$(t_bin nvcachefs)
ctl=$(t_bin nvcachectl)
export NVCACHE_RUN_DIR=$T_DIR/run
M=$T_DIR/m
mkdir -p "$M" "$T_DIR/ok"

refuse() {  # refuse WHAT PATTERN ARGS... : must exit non-zero, say PATTERN, not mount
  local what=$1 pat=$2; shift 2
  timeout 20 "$bin" "$M" -f "$@" >"$T_DIR/refuse.log" 2>&1
  local rc=$?
  t_is_mounted "$M" && { t_umount "$M"; t_fail "$what: mounted anyway"; }
  [ $rc -ne 0 ] || t_fail "$what: exit status 0"
  grep -qiE "$pat" "$T_DIR/refuse.log" || { cat "$T_DIR/refuse.log" >&2; t_fail "$what: no message matching '$pat'"; }
  t_log "$what: refused ($(grep -iE "$pat" "$T_DIR/refuse.log" | head -1 | sed 's/.*: error: //'))"
}

refuse "missing backing" "no such file" -o "backing=$T_DIR/nope,nvram=$T_SHM/a"
: >"$T_DIR/afile"
refuse "backing is a file" "not a directory" -o "backing=$T_DIR/afile,nvram=$T_SHM/a"
mkdir -p "$T_DIR/ro"
mount --bind "$T_DIR/ok" "$T_DIR/ro" && t_cleanup "umount $T_DIR/ro"
mount -o remount,bind,ro "$T_DIR/ro" || t_fail "cannot make a read-only bind mount"
refuse "read-only backing" "read-only" -o "backing=$T_DIR/ro,nvram=$T_SHM/a"
mkdir -p "$T_SHM/adir"
refuse "nvram is a directory" "directory|not a regular" -o "backing=$T_DIR/ok,nvram=$T_SHM/adir"
head -c 100000 /dev/urandom >"$T_SHM/foreign"
sum=$(md5sum <"$T_SHM/foreign")
refuse "foreign nvram file" "not an nvcache" -o "backing=$T_DIR/ok,nvram=$T_SHM/foreign"
[ "$(md5sum <"$T_SHM/foreign")" = "$sum" ] || t_fail "foreign file was modified"
# a store made with 16M, opened with 32M
"$bin" "$M" -o "backing=$T_DIR/ok,nvram=$T_SHM/geo,cache_size=16M" -f >"$T_DIR/geo.log" 2>&1 &
p=$!; t_cleanup "kill -9 $p 2>/dev/null; fusermount3 -uz $M 2>/dev/null"
t_wait 20 t_is_mounted "$M" || t_fail "no mount for the geometry test"
printf 'keep me' >"$M/kept"
# a second daemon on the NVRAM file in use: both allocated the same
# blocks, and each one's files came back with the other's bytes
# (the backing's lock refuses it first now; either says "in use")
mkdir -p "$T_DIR/m2"
timeout 20 "$bin" "$T_DIR/m2" -f -o "backing=$T_DIR/ok,nvram=$T_SHM/geo,cache_size=16M" >"$T_DIR/inuse.log" 2>&1 &&
  t_fail "nvram in use: a second daemon started"
t_is_mounted "$T_DIR/m2" && { t_umount "$T_DIR/m2"; t_fail "nvram in use: mounted anyway"; }
grep -qE "in use by another (process|nvcachefs)" "$T_DIR/inuse.log" || t_fail "nvram in use: unclear: $(cat "$T_DIR/inuse.log")"
t_log "nvram in use by a mounted daemon: refused"
# a second mount of the same backing with its own NVRAM (another mount
# point; quickstart.sh --mount did it with its default backing): each
# cache wrote its stale blocks back over the other's acknowledged writes
timeout 20 "$bin" "$T_DIR/m2" -f -o "backing=$T_DIR/ok,nvram=$T_SHM/other,cache_size=16M" >"$T_DIR/inuse2.log" 2>&1 &&
  t_fail "backing in use: a second daemon started"
t_is_mounted "$T_DIR/m2" && { t_umount "$T_DIR/m2"; t_fail "backing in use: mounted anyway"; }
grep -q "backing dir $T_DIR/ok is in use by another nvcachefs" "$T_DIR/inuse2.log" ||
  t_fail "backing in use: unclear: $(cat "$T_DIR/inuse2.log")"
[ -e "$T_SHM/other" ] && t_fail "backing in use: the refused mount left its NVRAM file"
t_log "backing in use by a mounted daemon: refused"
[ "$(cat "$M/kept")" = "keep me" ] || t_fail "the mounted daemon's file changed after a refused second start"
fusermount3 -u "$M"; wait $p
sum=$(md5sum <"$T_SHM/geo")
refuse "other geometry" "cache size|made for" -o "backing=$T_DIR/ok,nvram=$T_SHM/geo,cache_size=32M"
[ "$(md5sum <"$T_SHM/geo")" = "$sum" ] || t_fail "store of another geometry was modified"
mkdir -p "$T_DIR/tiny"
mount -t tmpfs -o size=1M tmpfs "$T_DIR/tiny" && t_cleanup "umount $T_DIR/tiny"
refuse "no room for nvram" "no space|unusable" -o "backing=$T_DIR/ok,nvram=$T_DIR/tiny/nv,cache_size=64M"
[ -e "$T_DIR/tiny/nv" ] && t_fail "the NVRAM file a refused mount created was left behind (empty)"
refuse "bad option" "cache_size" -o "backing=$T_DIR/ok,nvram=$T_SHM/a,cache_size=lots"
# an option libfuse does not know is refused before the NVRAM file is made
# (it was left behind: 1.1 GiB of /dev/shm at the default size)
refuse "unknown option" "unknown option" -o "backing=$T_DIR/ok,nvram=$T_SHM/unk,foo=1"
[ -e "$T_SHM/unk" ] && t_fail "unknown option: the refused mount left its NVRAM file"

# -- writes past the backing's largest file: answered as the backing
# answers (EFBIG, or a short write up to the limit). They used to be
# acknowledged into NVRAM and then fail write-back forever, and the next
# mount was refused until the file was deleted.
"$bin" "$M" -o "backing=$T_DIR/ok,nvram=$T_SHM/big,cache_size=16M,writeback_delay=0.1" -f >"$T_DIR/big.log" 2>&1 &
p=$!; t_cleanup "kill -9 $p 2>/dev/null; fusermount3 -uz $M 2>/dev/null"
t_wait 20 t_is_mounted "$M" || t_fail "no mount for the file-size test"
python3 - "$M/huge" "$T_DIR/plain-huge" <<'PY' || t_fail "writes past the largest file differ from the backing's answers"
import errno, os, sys
def answers(path):
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    # the backing's limit, found as the daemon finds it
    lo, hi = 0, (1 << 63) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            os.ftruncate(fd, mid); lo = mid
        except OSError:
            hi = mid
    os.ftruncate(fd, 0)
    out = []
    for off in (lo + (1 << 40), lo, lo - 1):
        try:
            out.append(os.pwrite(fd, b'xy', off))
        except OSError as e:
            out.append(errno.errorcode[e.errno])
    try:
        os.ftruncate(fd, lo + 4096)
        out.append('truncated')
    except OSError as e:
        out.append(errno.errorcode[e.errno])
    os.fsync(fd)
    os.close(fd)
    return lo, out
plain = answers(sys.argv[2])
mnt = answers(sys.argv[1])
print('largest file %d; plain %s, mount %s' % (plain[0], plain[1], mnt[1]))
sys.exit(0 if plain == mnt and mnt[1][0] == 'EFBIG' else 1)
PY
fusermount3 -u "$M"; wait $p || t_fail "unmount after writes at the largest file: exit $?: $(tail -3 "$T_DIR/big.log")"
t_log "writes past the largest file: answered as the backing answers; unmount clean"

# -- a backing file system that fills up: 24 MiB ext4 on a loop device (the
# image on disk, never on tmpfs)
img=$T_DIR/backing.img
truncate -s 24M "$img"
mkfs.ext4 -q -F -m 0 "$img" || t_fail "mkfs.ext4"
loop=$(losetup -f --show "$img") || t_fail "losetup"
t_cleanup "losetup -d $loop"
B=$T_DIR/small
mkdir -p "$B"
mount "$loop" "$B" || t_fail "mount loop"
t_cleanup "umount -l $B"
fill() { dd if=/dev/zero of="$B/filler" bs=1M count=40 status=none 2>/dev/null; sync; }
fill
t_log "backing has $(df --output=avail -B1 "$B" | tail -1) bytes free after filler"

stat_of() { "$ctl" stats "$M" | awk -v k="$1:" '$1 == k { print $2 }'; }
start() {
  "$bin" "$M" -o "backing=$B,nvram=$T_SHM/nv,cache_size=64M,writeback_delay=0.2" -f >>"$T_DIR/log" 2>&1 &
  pid=$!
  t_cleanup "kill -9 $pid 2>/dev/null; fusermount3 -uz $M 2>/dev/null"
  t_wait 20 t_is_mounted "$M" || { cat "$T_DIR/log"; t_fail "no mount on the small backing"; }
}
start
head -c 6000000 /dev/urandom >"$T_DIR/one"
cp "$T_DIR/one" "$M/one" || t_fail "write through the mount failed while the backing is full"
t_wait 15 sh -c "[ \$('$ctl' stats '$M' | awk '\$1==\"backing_errors:\"{print \$2}') -gt 0 ]" ||
  t_fail "no backing error counted"
cmp "$M/one" "$T_DIR/one" || t_fail "data unreadable while its write-back fails"
[ "$(stat_of dirty_bytes)" -ge 6000000 ] || t_fail "data not dirty any more: $(stat_of dirty_bytes)"
grep -q "write-back of .* failed: No space left" "$T_DIR/log" || t_fail "write-back failure not logged"
# a state for nvcachectl status, not only a count that rose in its sample
[ "$(stat_of writeback_failing)" = 1 ] || t_fail "writeback_failing is $(stat_of writeback_failing) while it fails"
"$ctl" status --interval 0 >"$T_DIR/status.out" 2>&1
grep -q "write-back failing" "$T_DIR/status.out" || t_fail "nvcachectl status: $(cat "$T_DIR/status.out")"
# free space: the retry (with backoff) lands the data
rm -f "$B/filler"
t_wait 40 cmp -s "$B/one" "$T_DIR/one" || t_fail "data did not land after space was freed"
wb_ok() { [ "$(stat_of writeback_failing)" = 0 ]; }
t_wait 10 wb_ok || t_fail "writeback_failing stays after the data landed"
t_log "retry after ENOSPC landed the data; backing_errors $(stat_of backing_errors)"

# dirty at unmount while the backing is full again: stays in NVRAM, exit 3,
# written back by the next mount once there is room
fill
head -c 5000000 /dev/urandom >"$T_DIR/two"
cp "$T_DIR/two" "$M/two"
sleep 1
fusermount3 -u "$M"
for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
wait $pid; rc=$?
[ $rc -eq 3 ] || t_fail "exit status $rc at unmount with dirty data (want 3)"
grep -q "could not be written back" "$T_DIR/log" || t_fail "leftover not logged"
cmp -s "$B/two" "$T_DIR/two" && t_fail "data landed although the backing was full?"
# the backing is still full: recovery cannot land the leftover, so the mount
# is refused (it would show the stale backing copy), the data stays in NVRAM
refuse "recovery into a full backing" "could not be written back" \
  -o "backing=$B,nvram=$T_SHM/nv,cache_size=64M"
rm -f "$B/filler"
start
cmp "$B/two" "$T_DIR/two" || t_fail "recovery at mount did not land the leftover"
cmp "$B/one" "$T_DIR/one" || t_fail "first file damaged"
fusermount3 -u "$M"
for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
wait $pid || t_fail "clean unmount exit status"
t_log "PASS"
