#!/usr/bin/env bash
# fscl_full.sh - full file caches: two nodes with 4 MiB caches, holding
# the records of 600 small files, take a 40 MiB file written through one
# mount. A node whose every block is dirty writes back and the writer
# waits (back-pressure), never ENOSPC; the file reads back whole through
# the other mount and reaches the backing. Then a mount killed -9 while
# it holds a file open: the nodes release its opens and write the file
# back, and the mount restarted reads it.
T_TIMEOUT=${T_TIMEOUT:-60}
# a mount with no connection for 1 s is gone (default 20 s)
export NVCACHE_MOUNT_GONE_MS=1000
. "$(dirname "$0")/lib.sh"
FSCL_N=2 FSCL_CACHE=4M
. "$(dirname "$0")/fscl_common.bash"
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
head -c 40M /dev/urandom >"$T_DIR/ref"
dd if="$T_DIR/ref" of="$T_DIR/m1/big" bs=1M conv=fsync 2>"$T_DIR/dd.err" ||
  t_fail "writing 40 MiB through 2 x 4 MiB of cache failed: $(cat "$T_DIR/dd.err")"
wb=$(( $(fscl_stat 1 fcache_written_back_bytes) + $(fscl_stat 2 fcache_written_back_bytes) ))
[ "$wb" -ge $((30 << 20)) ] || t_fail "only $wb bytes written back while the file was open: no back-pressure?"
cmp "$T_DIR/ref" "$T_DIR/m2/big" || t_fail "the file reads back wrong through the other mount"
t_wait 10 cmp -s "$T_DIR/ref" "$T_DIR/b/big" || t_fail "the backing lacks bytes of the file"
t_log "40 MiB through 2 x 4 MiB of cache: $((wb >> 20)) MiB written back under back-pressure, all read back"

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
fscl_stop
