#!/usr/bin/env bash
# fscl_auto.sh - stripe_unit=auto: a new file's unit is fixed by its home
# before any block is placed. Three nodes, mounts with stripe_unit=auto
# and down_wait=3. A new, empty file homed at node 2: node 2 killed, a
# write to it through mount 1 waits for the home, then fails with EIO,
# and no node holds a byte of it (never a block placed by a guessed
# unit); the file still opens and reads empty meanwhile (an empty
# backing file without the unit xattr: no unit fixed anywhere), and so
# does a small file (one block, the home's under any unit) written back
# before, through a mount that never opened it. Node 2 back, the write
# goes through, in 1 MiB stripes, and reaches the backing.
T_TIMEOUT=${T_TIMEOUT:-90}
. "$(dirname "$0")/lib.sh"
FSCL_N=3
. "$(dirname "$0")/fscl_common.bash"
cluster_start "$FSCL_N" fs
for i in 1 2 3; do fscl_mount $i stripe_unit=auto,down_wait=3; done
m1=$T_DIR/m1 m3=$T_DIR/m3

f="" s=""
for k in $(seq 0 63); do
  : >"$m1/n$k"
  lay=$(fscl_layout "$m1/n$k") ||
    t_fail "no layout for n$k"
  [[ $lay == *" stripe_unit=unset "* ]] || t_fail "a new empty file (auto) is cut as $lay"
  [[ $lay == *"home=2 "* ]] || continue
  if [ -z "$f" ]; then f=n$k; else s=n$k; break; fi
done
[ -n "$s" ] || t_fail "fewer than 2 of 64 new files are homed at node 2"
head -c 5000 /dev/urandom >"$T_DIR/sref"
cp "$T_DIR/sref" "$m1/$s"
t_wait 10 cmp -s "$T_DIR/b/$s" "$T_DIR/sref" || t_fail "a small file is not written back"
# (written within its first block, the home's under any unit: none fixed)
lay=$(fscl_layout "$m3/$s")
[[ $lay == *" stripe_unit=unset "* ]] || t_fail "a file of 5,000 bytes got a unit: $lay"

kill -9 "${pid[2]}"
t_wait 10 eval '! kill -0 '"${pid[2]}" || t_fail "node 2 did not die"
head -c $((3 << 20)) /dev/urandom >"$T_DIR/ref"
python3 - "$m1/$f" "$T_DIR/ref" <<'PY' || t_fail "a write to a new file whose home is down"
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
try:
    # (past the first MiB: a block a 1 MiB cut would place at a live node)
    os.pwrite(fd, open(sys.argv[2], "rb").read()[:200000], (1 << 20) + 4096)
except OSError as e:
    if e.errno != errno.EIO:
        raise
else:
    sys.exit("written, with no unit fixed by the file's home")
finally:
    os.close(fd)
PY
for i in 1 3; do
  [ "$(fscl_stat $i fcache_dirty_bytes)" = 0 ] ||
    t_fail "node $i holds $(fscl_stat $i fcache_dirty_bytes) dirty bytes of a write that failed"
done
[ "$(wc -c <"$m3/$f")" = 0 ] || t_fail "mount 3 reads $(wc -c <"$m3/$f") bytes of the empty file"
timeout 10 cmp "$m3/$s" "$T_DIR/sref" || t_fail "its home down, mount 3 does not read the small file"
t_log "its home down, a write to a new file failed with EIO and placed nothing; the file reads empty, a small one whole"

cluster_node_restart 2 fs2
for i in 1 2 3; do t_wait 15 cluster_sees $i 2 || t_fail "node $i does not see its peers"; done
t_wait 15 python3 -c 'import sys; fd = open(sys.argv[1], "r+b"); fd.write(open(sys.argv[2], "rb").read()); fd.close()' \
  "$m1/$f" "$T_DIR/ref" || t_fail "node 2 back, the write still fails"
cmp "$m3/$f" "$T_DIR/ref" || t_fail "mount 3 reads other bytes"
lay=$(fscl_layout "$m3/$f")
[[ $lay == *" stripe_unit=1048576 "* ]] || t_fail "written with no size set first, the file is cut as $lay"
t_wait 15 cmp -s "$T_DIR/b/$f" "$T_DIR/ref" || t_fail "the bytes do not reach the backing"
t_log "node 2 back: the write went through, in 1 MiB stripes, and reached the backing"
fscl_stop
