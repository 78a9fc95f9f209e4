#!/usr/bin/env bash
# quickstart.sh - one command from a fresh clone to a running nvcache stack on
# this machine: installs what is missing, builds, mounts nvcachefs at
# /mnt/nvcache over a backing directory it creates, and starts nvswapd on a
# Unix socket. With --swap it also turns that swap device on (a system-wide
# change: nbdfuse -> loop device -> swapon). --stop takes everything down.
#
#   tools/quickstart.sh [--swap] [--backing DIR] [--mount DIR]
#   tools/quickstart.sh --stop [--mount DIR]
#   tools/quickstart.sh --cluster N [--backing DIR] [--mount DIR]
#   tools/quickstart.sh --stop --cluster N
# --cluster N starts a small cluster on this machine instead: N nodes on
# loopback ports, each an nvcached with a file cache and a mount DIR-I
# (/mnt/nvcache-1 ...), one file system across them (tools/quickstart_cluster.bash);
# its --stop finds the mounts and backing it was started with.
#
# Logs: /var/log/nvcachefs-MOUNT.log (e.g. nvcachefs-mnt-nvcache.log) and
# /var/log/nvswapd.log. Exit status 0 only when everything asked for is done.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mnt=/mnt/nvcache
backing=/var/lib/nvcache/backing
run=${NVCACHE_RUN_DIR:-/run/nvcache}
state=$run/quickstart
swap=0 stop=0 cluster_n=0 mnt_given=0 backing_given=0
swap_size=${NVCACHE_SWAP_SIZE:-1G}
# arg OPTION VALUE: the option's value, or a usage error when there is none
arg() {
  [ -n "${2:-}" ] && [[ $2 != --* ]] || { echo "quickstart: $1 needs a value (--help)" >&2; exit 2; }
}
while [ $# -gt 0 ]; do
  case $1 in
    --swap) swap=1 ;;
    --stop) stop=1 ;;
    --backing) arg "$1" "${2:-}"; backing=$2; backing_given=1; shift ;;
    --mount) arg "$1" "${2:-}"; mnt=$2; mnt_given=1; shift ;;
    --cluster) arg "$1 N" "${2:-}"; cluster_n=$2; shift
      [[ $cluster_n =~ ^[0-9]+$ ]] && [ "$cluster_n" -ge 2 ] && [ "$cluster_n" -le 16 ] ||
        { echo "quickstart: --cluster N: N from 2 to 16 nodes" >&2; exit 2; } ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "quickstart: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "quickstart: run as root (FUSE mounts, swap)" >&2; exit 1; }
mnt=$(realpath -m "$mnt")
name=$(echo "${mnt#/}" | tr / -)
fslog=/var/log/nvcachefs-$name.log
nvram=/dev/shm/nvcache-$name.nvram

mounted() { grep -q "^[^ ]* $mnt fuse" /proc/mounts; }
# other_caches DIR [MOUNT...]: the nvcachefs mounts over backing DIR but
# the MOUNTs given (each mount's source is its backing: fsname)
other_caches() {
  local b=$1; shift
  awk -v b="$b" '$1 == b && $3 == "fuse.nvcachefs" { print $2 }' /proc/mounts |
    while read -r m; do
      local skip=0 x
      for x in "$@"; do [ "$m" = "$x" ] && skip=1; done
      [ $skip = 1 ] || echo "$m"
    done
}
# A FUSE mount whose daemon died: listed, but every access fails (ENOTCONN).
dead_mount() { mounted && ! stat "$mnt" >/dev/null 2>&1; }

# alive PID: the process runs (a killed one its parent has not reaped
# yet, a zombie, does not: kill -0 would still find it).
alive() {
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null) && [ -n "$st" ] && [[ $st != Z* ]]
}

# wait_exit PID WHAT: wait for a process we stopped, saying so every 10 s.
wait_exit() {
  local n=0
  while alive "$1"; do
    sleep 0.2
    n=$((n + 1))
    [ $((n % 50)) -eq 0 ] && echo "  waiting for $2 to finish (pid $1, $((n / 5)) s)..."
  done
  return 0
}

# start_log PID LOG: what PID logged in LOG (the lines tagged "[PID]",
# not an earlier run's): its errors if it logged any, else its last lines;
# LOG's last lines if none is tagged (a usage error is not).
start_log() {
  local own
  own=$(grep -F "[$1]" "$2" 2>/dev/null)
  if [ -z "$own" ]; then
    tail -5 "$2"
    return
  fi
  grep -E ' (error|fatal): ' <<<"$own" | tail -3 | grep . || tail -5 <<<"$own"
}

# wait_up PID LOG WHAT NOTE CHECK...: wait until CHECK succeeds; if PID
# exits first, say so with what it logged (start_log) and return 1. Every
# 10 s it says it is still waiting for WHAT (NOTE: what may take that long).
wait_up() {
  local pid=$1 log=$2 what=$3 note=$4 n=0
  shift 4
  until "$@"; do
    if ! alive "$pid"; then
      echo "quickstart: $what did not start; from $log:" >&2
      start_log "$pid" "$log" | sed 's/^/  /' >&2
      return 1
    fi
    sleep 0.1
    n=$((n + 1))
    [ $((n % 100)) -eq 0 ] && echo "  $what: still starting ($((n / 10)) s${note:+; $note})"
  done
  return 0
}

stop_swap() {
  if [ -f "$state/loop" ]; then
    dev=$(cat "$state/loop")
    if grep -q "^$dev " /proc/swaps; then
      # Pages of running programs may be on it: until swapoff has read
      # them all back, nvswapd is the only place they are. Stop here.
      if ! swapoff "$dev"; then
        echo "quickstart: swapoff $dev failed: programs still have pages on it," \
             "and nvswapd holds them; nothing else was stopped. Free memory (or" \
             "stop those programs) and run --stop again." >&2
        return 1
      fi
      echo "swap on $dev: off"
    fi
    losetup -d "$dev" 2>/dev/null && echo "loop device $dev: detached" ||
      echo "quickstart: loop device $dev: not detached (see losetup -a)" >&2
    rm -f "$state/loop"
  fi
  if [ -f "$state/nbdfuse.dir" ]; then
    d=$(cat "$state/nbdfuse.dir")
    if grep -q " $d fuse" /proc/mounts; then
      fusermount3 -u "$d" && echo "nbdfuse $d: unmounted" ||
        echo "quickstart: nbdfuse $d: not unmounted (see fusermount3 -u $d)" >&2
    fi
    rm -f "$state/nbdfuse.dir"
  fi
}

stop_nvswapd() {
  [ -f "$state/nvswapd.pid" ] || return 0
  pid=$(cat "$state/nvswapd.pid")
  if kill "$pid" 2>/dev/null; then
    wait_exit "$pid" nvswapd
    echo "nvswapd: stopped"
  fi
  rm -f "$state/nvswapd.pid"
  # its MRAM tier held pages of a swap device that no longer exists:
  # nothing in it is worth the RAM it takes in /dev/shm
  rm -f /dev/shm/nvswapd-swap.mram
}

# Unmount, wait for the write-back, and say truthfully how it ended: the
# daemon's last "unmount:" line says whether every file reached the backing.
stop_fs() {
  mounted || return 0
  local back fspid seen=0
  back=$(awk -v m="$mnt" '$2 == m && $3 ~ /^fuse/ { print $1; exit }' /proc/mounts)
  fspid=$(pgrep -f "nvcachefs $mnt( |\$)" | head -1 || true)
  [ -f "$fslog" ] && seen=$(wc -l <"$fslog")
  if dead_mount; then
    fusermount3 -uz "$mnt"
    echo "nvcachefs $mnt: its daemon had died; the dead mount is detached."
    echo "  What its cache held is safe in $nvram and is written back to"
    echo "  $back at the next mount (tools/quickstart.sh). Do not remove that file."
    return 0
  fi
  echo "nvcachefs $mnt: unmounting and writing back to $back..."
  # fusermount3 -u returns once the mount is gone; the daemon then writes
  # every dirty block back and exits: the backing files are complete only
  # when it has exited.
  fusermount3 -u "$mnt" || return 1
  [ -n "$fspid" ] && wait_exit "$fspid" "nvcachefs (writing back to $back)"
  # this stop's line only: the log keeps earlier runs
  local last=""
  [ -f "$fslog" ] && last=$(tail -n +$((seen + 1)) "$fslog" | grep "unmount:" | tail -1 || true)
  case $last in
    "")
      echo "nvcachefs $mnt: unmounted; its daemon left no word on the write-back" \
           "(not started by quickstart? see its log)"
      return 0 ;;
    *"everything written back"*)
      echo "nvcachefs $mnt: unmounted, everything written back to $back"
      [ -f "$nvram" ] && echo "  its NVRAM file $nvram ($(du -h "$nvram" | cut -f1) of RAM) is kept for the next mount; rm it to free that memory"
      return 0 ;;
    *)
      echo "quickstart: nvcachefs $mnt: NOT everything was written back to $back:" >&2
      echo "  ${last#*: }" >&2
      grep -E "error|warning" "$fslog" | tail -3 | sed 's/^/  /' >&2
      echo "  The data is safe in $nvram: do NOT remove it. Fix the backing" >&2
      echo "  (space, permissions), then tools/quickstart.sh writes it back." >&2
      return 1 ;;
  esac
}

if [ "$cluster_n" -gt 0 ]; then
  . "$root/tools/quickstart_cluster.bash"   # exits
fi

if [ $stop -eq 1 ]; then
  rc=0
  stop_swap || exit 1
  stop_nvswapd
  stop_fs || rc=1
  exit $rc
fi

"$root/tools/install-deps.sh"
cd "$root"
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
mkdir -p "$state" "$backing"

if dead_mount; then
  # kill -9, a crash: the mount stays, disconnected. Its NVRAM cache holds
  # every acknowledged write; mounting again writes them back first.
  fusermount3 -uz "$mnt"
  echo "nvcachefs: $mnt was left by a daemon that died; detached it, mounting again recovers its cache"
fi
mkdir -p "$mnt"
others=$(other_caches "$(realpath -m "$backing")" "$mnt")
if ! mounted && [ -n "$others" ]; then
  # two caches over one backing overwrite each other's write-backs
  # (nvcachefs refuses it too; this says what to do)
  echo "quickstart: $backing is served by other nvcachefs mounts ($(echo $others)):" \
       "stop them (the quick-start cluster: tools/quickstart.sh --stop --cluster N)" \
       "or give this mount another backing (--backing DIR)" >&2
  exit 1
fi
if mounted; then
  echo "nvcachefs: $mnt is already mounted"
else
  # every user's programs may use it; the kernel checks each access
  # against the mode bits and ACLs, as on the backing. In the foreground
  # with a log file: a daemon's syslog may go nowhere (no /dev/log).
  # setsid: a session of its own, as a daemon has (the terminal's hangup
  # would make it unmount). It execs in place: $! is its pid.
  setsid build/fs/nvcachefs "$mnt" -f -o backing="$backing",allow_other </dev/null >>"$fslog" 2>&1 &
  fspid=$!
  # recovery writes back what a crashed run left before it mounts
  wait_up "$fspid" "$fslog" "nvcachefs $mnt" "recovery? see $fslog" mounted || exit 1
  echo "nvcachefs: $mnt mounted over $backing for all users (NVRAM cache in /dev/shm; log: $fslog)"
fi

if [ -x build/nbd/nvswapd ]; then
  sock=$run/nvswapd.sock
  if [ -f "$state/nvswapd.pid" ] && alive "$(cat "$state/nvswapd.pid")"; then
    echo "nvswapd: already running"
  else
    # a socket left by one that died would look ready at once
    rm -f "$sock"
    setsid build/nbd/nvswapd -f --size "$swap_size" --unix "$sock" --name swap \
      </dev/null >/var/log/nvswapd.log 2>&1 &
    swpid=$!
    echo $swpid > "$state/nvswapd.pid"
    wait_up "$swpid" /var/log/nvswapd.log nvswapd "" test -S "$sock" ||
      { rm -f "$state/nvswapd.pid"; exit 1; }
    echo "nvswapd: $swap_size export 'swap' on $sock (log: /var/log/nvswapd.log)"
  fi
  if [ $swap -eq 1 ] && [ ! -f "$state/loop" ]; then
    # The kernel here has no nbd driver: nbdfuse shows the export as a file,
    # a loop device makes it a block device. Its directory is a FUSE mount,
    # never a tmpfs file (a swap file on tmpfs deadlocks the kernel). Its
    # output goes to a log: it must not hold the caller's terminal or pipe.
    d=/var/lib/nvcache/nbdfuse
    mkdir -p $d
    setsid nbdfuse $d --unix "$sock" </dev/null >>/var/log/nvcache-nbdfuse.log 2>&1 &
    echo $d > "$state/nbdfuse.dir"
    for _ in $(seq 50); do [ -e $d/nbd ] && break; sleep 0.1; done
    dev=$(losetup -f --show --direct-io=on $d/nbd)
    echo "$dev" > "$state/loop"
    mkswap "$dev" >/dev/null
    swapon --discard=pages "$dev"
    echo "swap: on, through $dev (nbdfuse $d/nbd -> nvswapd)"
  fi
fi

cat <<MSG

Use it:
  cp -r yourdata $mnt/            # reads and writes go through the NVRAM cache
  mpiexec -n 4 ./your_mpiio_app $mnt/out
Watch it:
  build/tools/nvcachectl status
  build/tools/nvcachectl watch $mnt
MSG
[ -f "$state/loop" ] || echo "Swap to nvswapd:                                tools/quickstart.sh --swap"
echo "Stop everything (writes all data back first):   tools/quickstart.sh --stop"
