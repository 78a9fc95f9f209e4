#!/usr/bin/env bash
# fs_stress.sh - acknowledged bytes are never lost or read back stale
# under eviction, concurrency and write-back (fsx/fs_stress.c): 4 worker
# processes write unaligned sub-block pieces (some several at once through
# io_uring), append, truncate, fsync, close and reopen, on shared files
# cut into stripes each worker owns and on private files, all O_DIRECT,
# each checking every read against its exact model; after the unmount the
# backing directory must hold exactly the model. Two mounts: a cache of 16
# blocks (1 MiB of 64 KiB blocks: every fetch races evictions), and 8 MiB
# with fsync=backing (fsync runs write-back passes beside the thread's).
T_TIMEOUT=${T_TIMEOUT:-240}
. "$(dirname "$0")/lib.sh"
t_sanitizer_only
t_require_root
t_require_cmd fusermount3 cc
bin=$(t_bin nvcachefs)
ctl=$(t_bin nvcachectl)
secs=${FS_STRESS_SECONDS:-14}
prog=$T_DIR/fs_stress
cc -O2 -Wall -o "$prog" "$T_ROOT/tests/system/fsx/fs_stress.c" -luring ||
  t_fail "cannot build fs_stress"
export NVCACHE_RUN_DIR=$T_DIR/run

# stress NAME MOUNT_OPTS [fs_stress options]
stress() {
  local name=$1 opts=$2; shift 2
  local R=$T_DIR/$name
  mkdir -p "$R/b" "$R/m" "$R/exp"
  "$prog" init -D "$R/b" -e "$R/exp" "$@" >/dev/null || t_fail "$name: init"
  "$bin" "$R/m" -f -o "backing=$R/b,nvram=$T_SHM/$name.nv,$opts" >"$R/log" 2>&1 &
  local pid=$!
  t_cleanup "kill -9 $pid 2>/dev/null"
  t_cleanup "t_umount $R/m"
  t_wait 20 t_is_mounted "$R/m" || { cat "$R/log"; t_fail "$name: no mount"; }
  "$prog" run -m "$R/m" -e "$R/exp" -t "$secs" "$@" >"$R/run.out" 2>"$R/run.err"
  local rc=$?
  local ev; ev=$("$ctl" stats "$R/m" | awk '$1 == "evictions:" { print $2 }')
  t_umount "$R/m"
  t_wait 60 sh -c "! kill -0 $pid 2>/dev/null" || t_fail "$name: nvcachefs still running after unmount"
  wait "$pid" || t_fail "$name: nvcachefs exit status $? (not everything written back?)"
  [ $rc = 0 ] || { head -20 "$R/run.err" >&2; t_fail "$name: stale or lost bytes through the mount (fs_stress exit $rc)"; }
  "$prog" verify -D "$R/b" -e "$R/exp" "$@" >"$R/verify.out" 2>"$R/verify.err" ||
    { head -10 "$R/verify.err" >&2; t_fail "$name: the backing directory differs from what was acknowledged"; }
  [ "${ev:-0}" -gt 1000 ] || t_fail "$name: only ${ev:-0} evictions: the cache was not under pressure"
  t_log "$name: $(cat "$R/run.out"); evictions $ev; $(cat "$R/verify.out")"
}

stress tiny cache_size=1M,block_size=64K,writeback_delay=0 \
  -b 65536 -S 524288 -i 131072 -P 262144 -j 65536 -r 41
stress fsyncb cache_size=8M,writeback_delay=0,fsync=backing -r 8
echo ok
