#!/usr/bin/env bash
# fs_many_files.sh - a tree of many files written through the mount (a tar
# of a source tree, as a user's first try does) must not run the daemon out
# of file descriptors. The daemon holds one per file the kernel keeps
# looked up (its O_PATH inode), and the kernel keeps them until memory runs
# short; it used to hold a second, the data descriptor, as long, and to run
# with the soft limit it was started with (1024 on most systems: EMFILE
# after about 500 files).
#  1. started with a soft limit of 256 (hard higher): it raises its own;
#     2000 files;
#  2. started with soft and hard limits of 700: 3000 files, more than the
#     limit, written, renamed, hard-linked, then read and stat'ed in bulk:
#     the daemon asks the kernel to forget idle ones (forget.c,
#     FUSE_NOTIFY_PRUNE: Linux 6.18; before, 400 files, under the limit).
# Every file must read back the same through the mount and in the backing
# directory after unmount.
T_TIMEOUT=${T_TIMEOUT:-300}
. "$(dirname "$0")/lib.sh"
t_sanitizer_only
t_require_root
t_require_cmd fusermount3 python3 prlimit
bin=$(t_bin nvcachefs)
export NVCACHE_RUN_DIR=$T_DIR/run

[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 4096 ] ||
  t_skip "the hard open-files limit here is $(ulimit -Hn), below this test's 4096"

start() {  # start NAME SOFT HARD [DELAY]: the daemon on $T_DIR/NAME/m; sets M B pid
  M=$T_DIR/$1/m B=$T_DIR/$1/b
  mkdir -p "$M" "$B"
  prlimit --nofile="$2:$3" "$bin" "$M" \
    -o "backing=$B,nvram=$T_SHM/$1.nv,cache_size=64M,writeback_delay=${4:-0.1}" -f \
    >"$T_DIR/$1/log" 2>&1 &
  pid=$!
  t_cleanup "kill -9 $pid"
  t_cleanup "t_umount $M"
  t_wait 20 t_is_mounted "$M" || { cat "$T_DIR/$1/log"; t_fail "$1: no mount"; }
}

run() {  # run NAME SOFT HARD FILES
  local M B pid
  start "$1" "$2" "$3"
  mkdir -p "$T_DIR/$1/ref"
  # files of 1-3 blocks in 20 directories, each written, closed, left
  python3 - "$M" "$T_DIR/$1/ref" "$4" <<'PY' || { tail -5 "$T_DIR/$1/log" >&2; t_fail "$1: writing $4 files through the mount failed"; }
import os, sys
m, ref, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    d = 'd%02d' % (i % 20)
    for root in (m, ref):
        os.makedirs(os.path.join(root, d), exist_ok=True)
        with open(os.path.join(root, d, 'f%05d' % i), 'wb') as f:
            f.write((b'%07d' % i) * (2000 + 37 * (i % 1000)))
# then moved about, in both trees alike: renamed to another directory,
# hard-linked, unlinked (the daemon forgets by the name the kernel knows)
for i in range(0, n, 3):
    for root in (m, ref):
        os.rename(os.path.join(root, 'd%02d' % (i % 20), 'f%05d' % i),
                  os.path.join(root, 'd%02d' % ((i + 1) % 20), 'r%05d' % i))
for i in range(1, n, 6):
    for root in (m, ref):
        os.link(os.path.join(root, 'd%02d' % (i % 20), 'f%05d' % i),
                os.path.join(root, 'd%02d' % ((i + 7) % 20), 'l%05d' % i))
for i in range(2, n, 6):
    for root in (m, ref):
        os.unlink(os.path.join(root, 'd%02d' % (i % 20), 'f%05d' % i))
PY
  local held
  held=$(ls /proc/$pid/fd | wc -l)
  t_log "$1: $4 files written, the daemon holds $held descriptors ($(grep -o 'open files: up to [0-9]*' "$T_DIR/$1/log"))"
  diff -r "$T_DIR/$1/ref" "$M" >&2 || t_fail "$1: files read back differ"
  # a lookup storm: find stats every file, fast
  local nf
  nf=$(find "$M" -type f -size +1k | wc -l)
  local want
  want=$(find "$T_DIR/$1/ref" -type f -size +1k | wc -l)
  [ "$nf" = "$want" ] || t_fail "$1: find through the mount saw $nf of $want files"
  t_log "$1: read back and stat'ed, $("$(t_bin nvcachectl)" stats "$M" | grep -E 'inodes_held|forget_requests' | tr '\n' ' ')"
  fusermount3 -u "$M" || t_fail "$1: unmount failed"
  for _ in $(seq 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  diff -r "$T_DIR/$1/ref" "$B" >&2 || t_fail "$1: the backing directory differs after unmount"
}

run soft 256 8192 2000
if printf '%s\n' 6.18 "$(uname -r)" | sort -V -C; then
  run hard 700 700 3000
else
  t_log "kernel $(uname -r): no FUSE_NOTIFY_PRUNE, so no more files than the limit"
  run hard 700 700 400
fi

# 2b. What the kernel is asked to forget are only entries nobody uses: a
#     mount on a directory in the mount, a bind mount on a file and a
#     working directory survive 3000 files under a limit of 600 (asking by
#     FUSE_NOTIFY_INVAL_ENTRY detached the mounts and broke getcwd); and
#     the daemon stops on SIGTERM during a storm of lookups (that one
#     waited for directory locks and hung it).
if printf '%s\n' 6.18 "$(uname -r)" | sort -V -C; then
  start keep 600 600
  mkdir -p "$T_DIR/keep/src"
  echo bound >"$T_DIR/keep/src/file"
  mkdir -p "$M/mp" "$M/cwd"
  echo orig >"$M/target"
  mount -t tmpfs nvtest-keep "$M/mp" || t_fail "keep: tmpfs mount"
  t_cleanup "umount $M/mp"
  echo intmpfs >"$M/mp/x"
  mount --bind "$T_DIR/keep/src/file" "$M/target" || t_fail "keep: bind mount"
  t_cleanup "umount $M/target"
  (cd "$M/cwd" && sleep 6 && python3 -c 'import os; os.getcwd(); open("here", "w").write("x")') \
    2>"$T_DIR/keep/cwd.err" &
  cwdpid=$!
  python3 - "$M/big" <<'PY' || t_fail "keep: writing 3000 files failed"
import os, sys
for i in range(3000):
    d = os.path.join(sys.argv[1], 'd%02d' % (i % 20))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'f%05d' % i), 'wb') as f:
        f.write(b'x' * 100)
PY
  wait $cwdpid || t_fail "keep: the working directory broke: $(cat "$T_DIR/keep/cwd.err")"
  [ "$(cat "$M/mp/x" 2>&1)" = intmpfs ] || t_fail "keep: the tmpfs mounted in the mount is gone"
  [ "$(cat "$M/target" 2>&1)" = bound ] || t_fail "keep: the bind mount on a file is gone"
  t_log "keep: mounts and a working directory kept; $("$(t_bin nvcachectl)" stats "$M" | grep -E 'inodes_held|forget_requests' | tr '\n' ' ')"
  umount "$M/target" "$M/mp"
  for k in 1 2 3 4; do
    timeout 30 python3 -c '
import os, random, sys, time
end = time.time() + 20
while time.time() < end:
    try: os.lstat(os.path.join(sys.argv[1], "d%02d" % random.randrange(20), "f%05d" % random.randrange(3000)))
    except OSError: pass' "$M/big" 2>/dev/null &
  done
  sleep 2
  kill -TERM $pid
  for _ in $(seq 150); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  kill -0 $pid 2>/dev/null && t_fail "keep: the daemon still runs 15 s after SIGTERM during a lookup storm"
  wait $pid; rc=$?
  [ $rc = 0 ] || t_fail "keep: exit $rc after SIGTERM: $(tail -3 "$T_DIR/keep/log")"
  t_log "keep: SIGTERM during a lookup storm: clean exit"
fi

# 2c. Write-back held back (a writeback_delay of 60 s here; a loaded disk
#     did it to the 0.1 s of case 2): a file waiting for write-back keeps
#     its descriptor, which the forget thread cannot free. Past a quarter
#     of the limit waiting, a write to one more file has write-back take
#     them at once and waits for it (dirty_wait_files); before, every
#     descriptor became a waiting file's, write-back itself could not
#     open a file to write it back, and the user got EMFILE.
if printf '%s\n' 6.18 "$(uname -r)" | sort -V -C; then
  start held 300 300 60
  mkdir -p "$T_DIR/held/ref"
  python3 - "$M" "$T_DIR/held/ref" <<'PY' || { tail -5 "$T_DIR/held/log" >&2; t_fail "held: writing 1500 files with write-back held back failed"; }
import os, sys
for i in range(1500):
    for root in sys.argv[1:]:
        d = os.path.join(root, 'd%02d' % (i % 20))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, 'f%05d' % i), 'wb') as f:
            f.write(b'%05d' % i * (1 + i % 50))
PY
  t_log "held: 1500 files under a limit of 300, write-back held back: $("$(t_bin nvcachectl)" stats "$M" | grep -E 'writeback_queue|backpressure_waits|writeback_fd_closes' | tr '\n' ' ')"
  fusermount3 -u "$M" || t_fail "held: unmount failed"
  for _ in $(seq 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  diff -r "$T_DIR/held/ref" "$B" >&2 || t_fail "held: the backing directory differs after unmount"
fi

# 3. Past the limit (files held open, which cannot be forgotten): the user
#    gets EMFILE, the daemon's log says why, and every file written before
#    is there, in the mount and after unmount.
start over 200 200
n=$(python3 - "$M" <<'PY'
import errno, os, sys
held = []
for i in range(1000):
    try:
        f = open(os.path.join(sys.argv[1], 'f%04d' % i), 'wb')
        held.append(f)
        f.write(b'%04d' % i * 1000)
        f.flush()
    except OSError as e:
        assert e.errno == errno.EMFILE, e
        print(i)
        sys.exit(0)
print('none')
PY
) || t_fail "over: an error other than EMFILE"
[ "$n" != none ] || t_fail "over: 1000 files under a limit of 200, and no EMFILE"
grep -q "out of file descriptors" "$T_DIR/over/log" || { tail -5 "$T_DIR/over/log" >&2; t_fail "over: EMFILE, and nothing in the daemon's log says why"; }
check() {  # every file written before the EMFILE, in dir $1
  python3 - "$1" "$n" <<'PY'
import os, sys
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], 'f%04d' % i), 'rb') as f:
        assert f.read() == b'%04d' % i * 1000, i
PY
}
check "$M" 2>/dev/null || true   # reads may meet EMFILE too: only the backing is judged
fusermount3 -u "$M" || t_fail "over: unmount failed"
for _ in $(seq 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
check "$B" || t_fail "over: files written before the EMFILE are missing or differ in the backing"
t_log "over: EMFILE after $n files under a limit of 200, logged; those $n are in the backing"
t_log "PASS"
