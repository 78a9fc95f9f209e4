# common.sh - sourced by tests/system/fsx_*.sh after lib.sh: start, stop and
# kill the file system under test.
#
# FSX_FS=nvcachefs (default) tests the real thing. FSX_FS=passthrough runs the
# same test against libfuse's passthrough_ll over the same backing dir; that
# is how the harness itself is validated (a test that passes there and fails
# on nvcachefs points at nvcachefs). Steps that only make sense for a cache
# (NVRAM file, crash recovery, write-back counters) say so and are skipped in
# passthrough mode only.
#
#   fsx_mount MNT BACKING NVRAM [EXTRA_OPTS]   start in the foreground (-f) in the
#                                             background; sets FSX_PID, FSX_LOG
#   fsx_unmount MNT        fusermount3 -u, then wait for the daemon to finish its
#                          write-back and exit; returns its exit status
#   fsx_kill9 MNT          SIGKILL the daemon, lazily unmount the dead mount
FSX_FS=${FSX_FS:-nvcachefs}
FSX_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FSX_PID=
FSX_LOG=
_fsx_n=0
# Private control sockets (nvcachectl finds them here), never /run/nvcache.
export NVCACHE_RUN_DIR=$T_DIR/run
mkdir -p "$NVCACHE_RUN_DIR"

fsx_bin() {
  case $FSX_FS in
    nvcachefs) t_bin nvcachefs ;;
    passthrough)
      [ -x "$T_DIR/pt/passthrough_ll" ] ||
        "$T_ROOT/tests/bench/fs/build-passthrough.sh" "$T_DIR/pt" >/dev/null ||
        t_fail "cannot build passthrough_ll"
      echo "$T_DIR/pt/passthrough_ll" ;;
    *) t_fail "FSX_FS=$FSX_FS: want nvcachefs or passthrough" ;;
  esac
}

fsx_is_cache() { [ "$FSX_FS" = nvcachefs ]; }

fsx_mount() {
  local mnt=$1 backing=$2 nvram=$3 extra=${4:-} bin opts
  bin=$(fsx_bin) || exit 1
  _fsx_n=$((_fsx_n + 1))
  FSX_LOG=$T_DIR/fs-$_fsx_n.log
  if fsx_is_cache; then
    opts="backing=$backing,nvram=$nvram${extra:+,$extra}"
  else
    # Default cache mode (cache=never would set direct_io, which forbids
    # shared writable mmap); xattrs on as nvcachefs passes them through.
    opts="source=$backing,xattr"
  fi
  t_log "mount: $bin $mnt -o $opts -f"
  "$bin" "$mnt" -o "$opts" -f >"$FSX_LOG" 2>&1 &
  FSX_PID=$!
  t_cleanup "t_umount '$mnt'; kill -9 $FSX_PID"
  if ! t_wait 20 t_is_mounted "$mnt"; then
    cat "$FSX_LOG" >&2
    t_fail "$FSX_FS did not mount $mnt within 20 s"
  fi
}

fsx_unmount() {
  local mnt=$1 rc i
  fusermount3 -u "$mnt" || { t_log "fusermount3 -u $mnt failed"; return 1; }
  # The daemon writes everything back before it exits; give it time.
  for ((i = 0; i < 1200; i++)); do
    kill -0 "$FSX_PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$FSX_PID" 2>/dev/null; then
    t_log "$FSX_FS (pid $FSX_PID) still running 120 s after unmount"
    return 1
  fi
  wait "$FSX_PID"
  rc=$?
  if [ $rc -ne 0 ]; then
    t_log "$FSX_FS exited with status $rc; its log:"
    tail -40 "$FSX_LOG" >&2
  fi
  return $rc
}

fsx_kill9() {
  local mnt=$1
  kill -9 "$FSX_PID"
  wait "$FSX_PID" 2>/dev/null
  umount -l "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true
}

# fsx_write_bytes: bytes the daemon has caused to be written to block devices
# (dirtied page cache or direct I/O, all its threads). NVRAM on /dev/shm does
# not count, so this is what reached the backing dir's disk. Empty if the
# kernel has no task I/O accounting.
fsx_write_bytes() {
  awk '/^write_bytes:/ {print $2}' "/proc/$FSX_PID/io" 2>/dev/null
}

# fsx_stats MNT: nvcachectl stats of the mount (nvcachefs only).
fsx_stats() {
  "$(t_bin nvcachectl)" stats "$1"
}

# fsx_stat_wb MNT: the written-back byte counter from the stats, if the
# daemon reports one (a key naming write-back and bytes); empty otherwise.
fsx_stat_wb() {
  fsx_stats "$1" 2>/dev/null |
    awk -F': *' 'tolower($1) ~ /(writ.*back|wb).*bytes|bytes.*writ.*back/ {print $2+0; exit}'
}

# fsx_wait_idle MNT: wait (30 s at most) until the daemon reports no dirty
# bytes and an empty write-back queue, so counters read next are settled.
fsx_wait_idle() {
  fsx_is_cache || return 0
  t_wait 30 _fsx_idle "$1"
}
_fsx_idle() {
  fsx_stats "$1" 2>/dev/null |
    awk -F': *' '$1 == "dirty_bytes" && $2 + 0 == 0 {d = 1} $1 == "writeback_queue" && $2 + 0 == 0 {q = 1}
                 END {exit !(d && q)}'
}
