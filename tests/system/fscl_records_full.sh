#!/usr/bin/env bash
# fscl_records_full.sh - full object tables: two nodes whose caches hold
# far more blocks than records (64 MiB: 1,024 blocks, 256 records each),
# and small files written while the backing is frozen for 15 s. Each
# dirty file keeps its record at its home until written back, so the
# tables fill before the blocks do; an open that needs a record then
# waits (the home holds it 2 s, answers FULL, the mount asks again), as
# a write waits for a block, and goes through once the backing thaws:
# never ENOSPC. A table full of files open (none can go) answers ENOSPC
# after the hold.
T_TIMEOUT=${T_TIMEOUT:-120}
. "$(dirname "$0")/lib.sh"
FSCL_N=2 FSCL_CACHE=64M
. "$(dirname "$0")/fscl_common.bash"
t_loop_ext4 "$T_DIR/b"
fscl_start
nf=700
# the files made first (a create waits for a frozen backing), closed
# and clean: their records can go when the tables fill
python3 - "$T_DIR/m1" $nf <<'PY' || t_fail "$nf empty files"
import os, sys
for k in range(int(sys.argv[2])):
    open(os.path.join(sys.argv[1], "f%d" % k), "wb").close()
PY
fsfreeze -f "$T_DIR/b" || t_fail "fsfreeze"
( sleep ${FSCL_FREEZE_S:-15}; fsfreeze -u "$T_DIR/b" 2>/dev/null ) &
thaw=$!
t0=$(date +%s)
# each file opened through either mount, 1,000 bytes written, closed:
# dirty at its home until the backing is back
python3 - "$T_DIR/m1" "$T_DIR/m2" $nf <<'PY' 2>"$T_DIR/py.err" ||
import os, sys
for k in range(int(sys.argv[3])):
    with open(os.path.join(sys.argv[1 + k % 2], "f%d" % k), "r+b") as f:
        f.write(b"%06d" % k * 166 + b"xxxx")
PY
  t_fail "small files into full object tables over a frozen backing: $(tail -1 "$T_DIR/py.err")"
t1=$(date +%s)
wait $thaw
[ $((t1 - t0)) -ge 12 ] || t_fail "$nf files written in $((t1 - t0)) s over a backing frozen for ${FSCL_FREEZE_S:-15} s: did the tables fill? (test set-up)"
full=$(( $(fscl_stat 1 fcache_full_waits) + $(fscl_stat 2 fcache_full_waits) ))
[ "$full" -ge 1 ] || t_fail "no node answered an open FULL"
python3 - "$T_DIR/m2" "$T_DIR/m1" $nf <<'PY' || t_fail "the files read back wrong through the other mount"
import os, sys
for k in range(int(sys.argv[3])):
    with open(os.path.join(sys.argv[1 + k % 2], "f%d" % k), "rb") as f:
        if f.read() != b"%06d" % k * 166 + b"xxxx":
            sys.exit("f%d" % k)
PY
# (a file: t_wait runs it again and again, a heredoc is read once)
cat >"$T_DIR/on_backing.py" <<'PY'
import os, sys
for k in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], "f%d" % k), "rb") as f:
        if f.read() != b"%06d" % k * 166 + b"xxxx":
            sys.exit(1)
PY
t_wait 30 python3 "$T_DIR/on_backing.py" "$T_DIR/b" $nf ||
  t_fail "the files never all reached the thawed backing: $(fscl_why)"
t_log "$nf small files over 2 x 256 records, the backing frozen ${FSCL_FREEZE_S:-15} s: the opens waited ($full answers FULL), $((t1 - t0)) s in all, no error; all read back and reach the backing"

# tables full of files open: no record can go, so no wait: the open
# that finds its home's table full fails (ENOSPC, after the 2 s hold),
# the ones before it stay open and readable
python3 - "$T_DIR/m1" $nf <<'PY' >"$T_DIR/open.out" 2>&1 || t_fail "open files filling the tables: $(tail -3 "$T_DIR/open.out")"
import errno, os, sys
held = []
for k in range(int(sys.argv[2])):
    try:
        held.append(open(os.path.join(sys.argv[1], "f%d" % k), "rb"))
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        break
else:
    sys.exit("%d files open over 2 x 256 records: no error" % len(held))
if not all(f.read() == b"%06d" % k * 166 + b"xxxx" for k, f in enumerate(held)):
    sys.exit("a file held open reads wrong")
print(len(held))
PY
t_log "tables full of open files: ENOSPC at the open after $(cat "$T_DIR/open.out") open"
fscl_stop
