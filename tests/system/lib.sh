# lib.sh - sourced by every system test. Gives: a time bound, a private
# scratch directory, cleanup that runs even when the test fails, and the
# path of each built binary.
#
#   . "$(dirname "$0")/lib.sh"
#   t_cleanup "fusermount3 -u $mnt"     # run at exit, last registered first
#   t_fail "what went wrong"            # exit 1
#   t_skip "why"                        # exit 77
#   t_bin nvcachefs                     # path of build/fs/nvcachefs
#
# Environment: NVCACHE_BUILD (build directory, default ./build),
# T_TIMEOUT (seconds, default 300). Scratch space: $T_DIR (on disk, never
# tmpfs, so it may back a swap device) and $T_SHM (on /dev/shm, for NVRAM).
set -uo pipefail

T_NAME=$(basename "$0" .sh)
T_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NVCACHE_BUILD=${NVCACHE_BUILD:-$T_ROOT/build}
case "$NVCACHE_BUILD" in /*) ;; *) NVCACHE_BUILD=$T_ROOT/$NVCACHE_BUILD ;; esac
T_TIMEOUT=${T_TIMEOUT:-300}
T_DIR=$(mktemp -d "/var/tmp/nvtest-$T_NAME.XXXXXX")
T_SHM=$(mktemp -d "/dev/shm/nvtest-$T_NAME.XXXXXX")
_t_cleanups=()

t_log() { echo "[$T_NAME] $*" >&2; }

t_cleanup() { _t_cleanups+=("$1"); }

# t_pipe_splice: let libfuse splice requests into pipes, so that nvcachefs
# reads a write's data from the pipe straight into NVRAM (its other write
# path): fs.pipe-max-size up to 2 MiB for this test, put back after.
# Prints nothing; fails only if the sysctl cannot be written.
t_pipe_splice() {
  local f=/proc/sys/fs/pipe-max-size old
  old=$(cat "$f") || t_fail "cannot read $f"
  [ "$old" -ge 2097152 ] && return 0
  echo 2097152 >"$f" || t_fail "cannot raise $f"
  t_cleanup "echo $old >$f"
}

_t_run_cleanups() {
  local rc=$? i
  trap - EXIT INT TERM
  for ((i=${#_t_cleanups[@]}-1; i>=0; i--)); do
    eval "${_t_cleanups[$i]}" >/dev/null 2>&1 || true
  done
  rm -rf "$T_DIR" "$T_SHM"
  exit $rc
}
trap _t_run_cleanups EXIT
trap 'exit 130' INT TERM

# The time bound: a watchdog that kills this test (and so runs its cleanup).
# bash takes the TERM only once its foreground command returns; one stuck
# for good (a process in a FUSE request that the daemon never answers)
# would hold the test, and CI, forever: after 10 s the watchdog kills the
# test's children (SIGKILL ends even a FUSE request), then the trap runs.
( sleep "$T_TIMEOUT" >/dev/null 2>&1 </dev/null; echo "[$T_NAME] timed out after ${T_TIMEOUT}s" >&2
  kill -TERM $$ 2>/dev/null; sleep 10
  for c in $(pgrep -P $$); do [ "$c" != "$BASHPID" ] && kill -KILL "$c" 2>/dev/null; done ) </dev/null &
_t_watchdog=$!
t_cleanup "kill $_t_watchdog"

t_fail() { echo "[$T_NAME] FAIL: $*" >&2; exit 1; }
t_skip() { echo "[$T_NAME] SKIP: $*" >&2; exit 77; }
t_require_root() { [ "$(id -u)" -eq 0 ] || t_skip "needs root"; }
t_require_cmd() { local c; for c in "$@"; do command -v "$c" >/dev/null || t_skip "needs $c"; done; }

# t_is_sanitized BIN: built with ASan (gcc links libasan, clang embeds its
# runtime: both leave __asan_init in the binary). No pipe: pipefail +
# grep -q would misreport.
t_is_sanitized() { grep -qa __asan_init "$1"; }

# t_sanitizer_only: a long test whose plain-build run adds little to
# its sanitizer-build run skips the plain build when tests/run.sh runs the
# sanitizer build too (NVCACHE_RUN_BUILDS), to keep the whole run within
# CI's time; run alone, or with NVCACHE_TEST_EVERY_BUILD=1, it runs in any.
t_sanitizer_only() {
  [[ -z ${NVCACHE_TEST_EVERY_BUILD:-} && " ${NVCACHE_RUN_BUILDS:-} " == *" build-san "* ]] || return 0
  t_is_sanitized "$(t_bin nvcachectl)" ||
    t_skip "long: run in the sanitizer build only (NVCACHE_TEST_EVERY_BUILD=1 runs it here too)"
}

t_bin() {
  local p
  for p in "$NVCACHE_BUILD/$1" "$NVCACHE_BUILD"/*/"$1" "$NVCACHE_BUILD"/tests/*/"$1"; do
    [ -x "$p" ] && { echo "$p"; return 0; }
  done
  t_fail "binary $1 not built in $NVCACHE_BUILD"
}

# t_wait SECONDS CMD... : poll CMD until it succeeds, fail after SECONDS.
t_wait() {
  local limit=$1; shift
  local end=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $end ] && return 1
    sleep 0.1
  done
}

# t_loop_ext4 DIR: an ext4 of 256 MiB on a loop device (its image on
# disk, under T_DIR) mounted on DIR, so that fsfreeze can stall it and
# fallocate fill it; undone at exit.
t_loop_ext4() {
  local d=$1 loop
  t_require_cmd mkfs.ext4 losetup fsfreeze
  mkdir -p "$d"
  truncate -s 256M "$T_DIR/loop.img"
  mkfs.ext4 -q -F -m 0 "$T_DIR/loop.img" || t_fail "mkfs.ext4"
  loop=$(losetup -f --show "$T_DIR/loop.img") || t_fail "losetup"
  t_cleanup "losetup -d $loop"
  mount "$loop" "$d" || t_fail "mount of the loop device on $d"
  t_cleanup "umount -l $d"
  t_cleanup "fsfreeze -u $d"
}

# t_kill_waiter PID T0 FREEZE_S MAX_MS: the writer PID, still running
# (waiting for room) with at least 8 s left of a backing frozen at T0
# (date +%s) for FREEZE_S, killed -9; fails unless it is gone within
# MAX_MS (not once the backing thaws). Its time in kms.
t_kill_waiter() {
  local pid=$1 t0=$2 freeze=$3 max=$4 k0
  kill -0 "$pid" 2>/dev/null || t_fail "the writer is done already: the cache never filled? (test set-up)"
  [ $(( $(date +%s) - t0 )) -le $(( freeze - 8 )) ] ||
    t_fail "less than 8 s of the freeze left to kill the writer in (test set-up: a slow machine?)"
  k0=$(date +%s%N)
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  kms=$(( ($(date +%s%N) - k0) / 1000000 ))
  [ "$kms" -lt "$max" ] ||
    t_fail "a writer killed -9 while its write waits for room took $kms ms to go (until the backing thawed?)"
}

# t_fs_mount MOUNTPOINT OPTS [LOG]: a one-node nvcachefs (-o OPTS) in
# the foreground, logged to LOG ($T_DIR/log), killed and unmounted at
# exit.
t_fs_mount() {
  local log=${3:-$T_DIR/log}
  "$(t_bin nvcachefs)" "$1" -o "$2" -f >"$log" 2>&1 &
  local p=$!
  t_cleanup "kill -9 $p"
  t_cleanup "t_umount $1"
  t_wait 20 t_is_mounted "$1" || { cat "$log"; t_fail "no mount of $1"; }
}

t_is_mounted() { grep -q " $1 " /proc/mounts; }

# Unmount a FUSE mount we made, lazily if it is stuck.
t_umount() {
  t_is_mounted "$1" || return 0
  fusermount3 -u "$1" 2>/dev/null || umount "$1" 2>/dev/null || umount -l "$1" 2>/dev/null
}
