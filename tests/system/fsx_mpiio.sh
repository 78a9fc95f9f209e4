#!/usr/bin/env bash
# fsx_mpiio.sh - MPI-IO (MPICH/ROMIO, 4 ranks) through the nvcachefs mount,
# the seed paper's workload and open modes:
#  (a) collective interleaved write_at_all + read_at_all of a shared file,
#      then independent non-contiguous writes through a vector view with
#      data sieving (fcntl-locked read-modify-write); verified, and written
#      back to the backing dir after close;
#  (b) MPI_MODE_DELETE_ON_CLOSE: none of the file's bytes reach the backing
#      dir (file absent, daemon's disk writes and write-back counter flat);
#  (c) MPI_MODE_RDONLY of a pre-existing file reads the right bytes and
#      writes nothing back (backing mtime, ctime, content unchanged);
#  (d) MPI_File_sync, kill -9 of nvcachefs with the file still open, umount
#      -l, remount from the same NVRAM file: the data is there through the
#      mount and, after unmount, in the backing dir.
# FSX_FS=passthrough runs it against passthrough_ll (a write-through file
# system), where (b) must instead see the bytes reach the disk: that shows
# the measurement used by (b) and (c) can fail.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/fsx/common.sh"
t_require_root
t_require_cmd fusermount3 mpicc mpiexec setsid
export HYDRA_LAUNCHER=fork
MIB=$((1024 * 1024))
delay=1                     # writeback_delay, seconds

back=$T_DIR/backing mnt=$T_DIR/mnt nvram=$T_SHM/nvram
mkdir -p "$back" "$mnt"
prog=$T_DIR/fsx_mpiio
mpicc -O2 -Wall -o "$prog" "$T_ROOT/tests/system/fsx/fsx_mpiio.c" || t_fail "mpicc failed"

mpi() {  # mpi ARGS... : 4 ranks, bounded
  timeout 120 mpiexec -n 4 "$prog" "$@"
}

# The pre-existing input of (c), written before the mount exists.
"$prog" expect "$back/input.dat" 8 4 || t_fail "cannot write input file"
touch -d '2020-01-02 03:04:05' "$back/input.dat"
sleep 1.1   # so that any later change of ctime is visible at 1 s granularity too
input_stat=$(stat -c '%Y.%y %Z.%z %s' "$back/input.dat")
input_sum=$(sha256sum <"$back/input.dat")

fsx_mount "$mnt" "$back" "$nvram" "cache_size=256M,writeback_delay=$delay"
io_ok=1
[ -n "$(fsx_write_bytes)" ] || { io_ok=0; t_log "no /proc/PID/io accounting; disk-write checks off"; }
if fsx_is_cache; then
  fsx_stats "$mnt" >"$T_DIR/stats0" || t_fail "nvcachectl stats $mnt failed"
  grep -q ': ' "$T_DIR/stats0" || t_fail "nvcachectl stats printed no 'key: value' counters"
fi

# ---- (a) collective and non-contiguous I/O on a shared file -----------------
t_log "(a) collective write_at_all/read_at_all, then sieved non-contiguous writes"
io0=$(fsx_write_bytes)
mpi collective "$mnt/shared.dat" 16 || t_fail "(a) collective write/read through the mount failed"
mpi noncontig "$mnt/shared.dat" 16 || t_fail "(a) non-contiguous sieved writes through the mount failed"
"$prog" verify "$mnt/shared.dat" 16 1 2 >/dev/null || t_fail "(a) serial re-read through the mount differs"
# Written back after the last close (+ writeback_delay), while still mounted.
t_wait $((delay + 30)) "$prog" verify "$back/shared.dat" 16 1 2 ||
  { "$prog" verify "$back/shared.dat" 16 1 2; t_fail "(a) shared.dat not written back to the backing dir within $((delay + 30)) s of the last close"; }
if [ $io_ok = 1 ]; then
  io1=$(fsx_write_bytes)
  t_log "(a) daemon disk writes: $(( (io1 - io0) / MIB )) MiB for a 16 MiB file"
  # The measurement (b) and (c) rely on must see a write-back happen.
  [ $((io1 - io0)) -ge $((16 * MIB)) ] ||
    t_fail "(a) write_bytes of the daemon grew by only $((io1 - io0)) bytes for a written-back 16 MiB file"
fi

# ---- (b) MPI_MODE_DELETE_ON_CLOSE ------------------------------------------
t_log "(b) MPI_MODE_DELETE_ON_CLOSE"
# The write-back of (a) may still be settling its counters.
fsx_wait_idle "$mnt" || t_fail "(b) the daemon never became idle (dirty bytes or a queue left): $(fsx_stats "$mnt" | tr '\n' ' ')"
ls -A "$back" | sort >"$T_DIR/ls-before"
du_before=$(du -sb "$back" | cut -f1)
io0=$(fsx_write_bytes)
wb0=$(fsx_is_cache && fsx_stat_wb "$mnt")
mpi delete "$mnt/scratch.dat" 16 || t_fail "(b) DELETE_ON_CLOSE run failed (or the file survived close)"
sleep $((delay + 2))
[ -e "$back/scratch.dat" ] && t_fail "(b) scratch.dat exists in the backing dir after DELETE_ON_CLOSE"
ls -A "$back" | sort >"$T_DIR/ls-after"
diff "$T_DIR/ls-before" "$T_DIR/ls-after" >/dev/null ||
  t_fail "(b) backing dir listing changed: $(diff "$T_DIR/ls-before" "$T_DIR/ls-after" | tr '\n' ' ')"
du_after=$(du -sb "$back" | cut -f1)
t_log "(b) backing dir size $du_before -> $du_after bytes"
[ $((du_after - du_before)) -lt $MIB ] || t_fail "(b) backing dir grew by $((du_after - du_before)) bytes"
if [ $io_ok = 1 ]; then
  io1=$(fsx_write_bytes)
  t_log "(b) daemon disk writes during a deleted 16 MiB file: $((io1 - io0)) bytes"
  if fsx_is_cache; then
    [ $((io1 - io0)) -lt $MIB ] ||
      t_fail "(b) the daemon wrote $((io1 - io0)) bytes to disk for a file deleted before write-back"
  else
    [ $((io1 - io0)) -ge $((16 * MIB)) ] ||
      t_fail "(b) passthrough: expected the write-through to show >= 16 MiB of disk writes, saw $((io1 - io0))"
    t_log "(b) passthrough writes through, as expected: the measurement works"
  fi
fi
if fsx_is_cache; then
  t_log "(b) stats: $(fsx_stats "$mnt" | grep -E '^(dropped_unlinked_files|written_back_bytes):' | tr '\n' ' ')"
  wb1=$(fsx_stat_wb "$mnt")
  if [ -n "$wb0" ] && [ -n "$wb1" ]; then
    t_log "(b) written-back counter $wb0 -> $wb1"
    [ $((wb1 - wb0)) -lt $MIB ] || t_fail "(b) write-back counter grew by $((wb1 - wb0)) for a deleted file"
  else
    t_log "(b) stats have no written-back byte counter; relied on backing dir and /proc/PID/io"
  fi
fi

# ---- (c) MPI_MODE_RDONLY of a pre-existing file ----------------------------
t_log "(c) MPI_MODE_RDONLY of a pre-existing file"
io0=$(fsx_write_bytes)
mpi rdonly "$mnt/input.dat" 8 4 || t_fail "(c) read_at_all of the pre-existing file returned wrong bytes"
sleep $((delay + 2))
now_stat=$(stat -c '%Y.%y %Z.%z %s' "$back/input.dat")
[ "$now_stat" = "$input_stat" ] ||
  t_fail "(c) backing input.dat changed by a read-only open: was '$input_stat', now '$now_stat'"
[ "$(sha256sum <"$back/input.dat")" = "$input_sum" ] || t_fail "(c) backing input.dat content changed"
if [ $io_ok = 1 ]; then
  io1=$(fsx_write_bytes)
  [ $((io1 - io0)) -lt $MIB ] || t_fail "(c) the daemon wrote $((io1 - io0)) bytes to disk after a read-only open"
fi

# ---- (d) MPI_File_sync, kill -9, remount ------------------------------------
t_log "(d) MPI_File_sync, then kill -9 of $FSX_FS with the file open"
marker=$T_DIR/synced
setsid timeout 120 mpiexec -n 4 "$prog" sync "$mnt/crash.dat" 16 5 "$marker" >"$T_DIR/sync.out" 2>&1 &
mpipid=$!
t_cleanup "kill -KILL -- -$mpipid"
t_wait 60 test -e "$marker" || { cat "$T_DIR/sync.out" >&2; t_fail "(d) MPI_File_sync run did not reach its sync"; }
fsx_kill9 "$mnt"
kill -KILL -- -"$mpipid" 2>/dev/null
wait "$mpipid" 2>/dev/null
t_is_mounted "$mnt" && t_fail "(d) dead mount still mounted after umount -l"
if fsx_is_cache; then
  # The file never closed, so nothing asked for its write-back: the synced
  # bytes must come from NVRAM, recovered at the next mount.
  if "$prog" verify "$back/crash.dat" 16 5 >/dev/null 2>&1; then
    t_log "(d) note: backing crash.dat was already complete before recovery"
  else
    t_log "(d) backing crash.dat before recovery: $(stat -c %s "$back/crash.dat" 2>/dev/null || echo absent) bytes, not the synced data"
  fi
  t_log "(d) remount from the same NVRAM file"
fi
fsx_mount "$mnt" "$back" "$nvram" "cache_size=256M,writeback_delay=$delay"
fsx_is_cache && t_log "(d) after remount: $(fsx_stats "$mnt" | grep -E '^recovered_' | tr '\n' ' ')"
"$prog" verify "$mnt/crash.dat" 16 5 || t_fail "(d) synced data lost: crash.dat wrong through the remounted fs"
"$prog" verify "$mnt/shared.dat" 16 1 2 >/dev/null || t_fail "(d) shared.dat wrong after the crash"
"$prog" verify "$mnt/input.dat" 8 4 >/dev/null || t_fail "(d) input.dat wrong after the crash"
[ -e "$mnt/scratch.dat" ] && t_fail "(d) the deleted scratch.dat came back after the crash"
fsx_unmount "$mnt" || t_fail "(d) unmount after recovery failed"
"$prog" verify "$back/crash.dat" 16 5 || t_fail "(d) synced data did not reach the backing dir after recovery + unmount"
"$prog" verify "$back/shared.dat" 16 1 2 >/dev/null || t_fail "(d) backing shared.dat wrong at the end"
[ "$(ls -A "$back" | sort | tr '\n' ' ')" = "crash.dat input.dat shared.dat " ] ||
  t_fail "(d) backing dir holds unexpected files: $(ls -A "$back" | tr '\n' ' ')"
now_stat=$(stat -c '%Y.%y %Z.%z %s' "$back/input.dat")
[ "$now_stat" = "$input_stat" ] ||
  t_fail "(c) backing input.dat changed by the end (read-only use only): was '$input_stat', now '$now_stat'"
t_log "PASS"
