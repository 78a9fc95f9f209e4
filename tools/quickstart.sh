#!/usr/bin/env bash
# quickstart.sh - one command from a fresh clone to a running nvcache stack on
# this machine: installs what is missing, builds, mounts nvcachefs at
# /mnt/nvcache over a backing directory it creates, and starts nvswapd on a
# Unix socket. With --swap it also turns that swap device on (a system-wide
# change: nbdfuse -> loop device -> swapon). --stop takes everything down.
#
#   tools/quickstart.sh [--swap] [--backing DIR] [--mount DIR]
#   tools/quickstart.sh --stop
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mnt=/mnt/nvcache
backing=/var/lib/nvcache/backing
run=${NVCACHE_RUN_DIR:-/run/nvcache}
state=$run/quickstart
swap=0 stop=0
swap_size=${NVCACHE_SWAP_SIZE:-1G}
while [ $# -gt 0 ]; do
  case $1 in
    --swap) swap=1 ;;
    --stop) stop=1 ;;
    --backing) backing=$2; shift ;;
    --mount) mnt=$2; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "quickstart: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "quickstart: run as root (FUSE mounts, swap)" >&2; exit 1; }

stop_all() {
  if [ -f $state/loop ]; then
    dev=$(cat $state/loop)
    swapoff "$dev" 2>/dev/null && echo "swap on $dev: off"
    losetup -d "$dev" 2>/dev/null && echo "loop device $dev: detached"
    rm -f $state/loop
  fi
  if [ -f $state/nbdfuse.dir ]; then
    d=$(cat $state/nbdfuse.dir)
    fusermount3 -u "$d" 2>/dev/null && echo "nbdfuse $d: unmounted"
    rm -f $state/nbdfuse.dir
  fi
  if [ -f $state/nvswapd.pid ]; then
    pid=$(cat $state/nvswapd.pid)
    if kill "$pid" 2>/dev/null; then
      wait_exit "$pid" nvswapd
      echo "nvswapd: stopped"
    fi
    rm -f $state/nvswapd.pid
    # its MRAM tier held pages of a swap device that no longer exists:
    # nothing in it is worth the RAM it takes in /dev/shm
    rm -f /dev/shm/nvswapd-swap.mram
  fi
  if grep -q " $mnt fuse" /proc/mounts; then
    # fusermount3 -u returns once the mount is gone; the daemon then writes
    # every dirty block back and exits: the backing files are complete only
    # when it has exited.
    local fspid
    fspid=$(pgrep -f "nvcachefs $mnt( |\$)" | head -1)
    echo "nvcachefs $mnt: unmounting and writing back..."
    fusermount3 -u "$mnt" || return 1
    [ -n "$fspid" ] && wait_exit "$fspid" "nvcachefs (writing back to $backing)"
    echo "nvcachefs $mnt: unmounted, everything written back to $backing"
    local nv=/dev/shm/nvcache-$(echo "${mnt#/}" | tr / -).nvram
    [ -f "$nv" ] && echo "  its NVRAM file $nv ($(du -h "$nv" | cut -f1) of RAM) is kept for the next mount; rm it to free that memory"
  fi
}

# wait_exit PID WHAT: wait for a process we stopped, saying so every 10 s.
wait_exit() {
  local n=0
  while kill -0 "$1" 2>/dev/null; do
    sleep 0.2
    n=$((n + 1))
    [ $((n % 50)) -eq 0 ] && echo "  waiting for $2 to finish (pid $1, $((n / 5)) s)..."
  done
  return 0
}

if [ $stop -eq 1 ]; then
  stop_all
  exit 0
fi

"$root/tools/install-deps.sh"
cd "$root"
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
mkdir -p "$state" "$backing" "$mnt"

if grep -q " $mnt fuse" /proc/mounts; then
  echo "nvcachefs: $mnt is already mounted"
else
  # every user's programs may use it; the kernel checks each access
  # against the mode bits and ACLs, as on the backing
  build/fs/nvcachefs "$mnt" -o backing="$backing",allow_other
  echo "nvcachefs: $mnt mounted over $backing for all users (NVRAM cache in /dev/shm)"
fi

if [ -x build/nbd/nvswapd ]; then
  sock=$run/nvswapd.sock
  if [ -f $state/nvswapd.pid ] && kill -0 "$(cat $state/nvswapd.pid)" 2>/dev/null; then
    echo "nvswapd: already running"
  else
    build/nbd/nvswapd -f --size "$swap_size" --unix "$sock" --name swap \
      >/var/log/nvswapd.log 2>&1 &
    echo $! > $state/nvswapd.pid
    for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
    echo "nvswapd: $swap_size export 'swap' on $sock (log: /var/log/nvswapd.log)"
  fi
  if [ $swap -eq 1 ] && [ ! -f $state/loop ]; then
    # The kernel here has no nbd driver: nbdfuse shows the export as a file,
    # a loop device makes it a block device. Its directory is a FUSE mount,
    # never a tmpfs file (a swap file on tmpfs deadlocks the kernel).
    d=/var/lib/nvcache/nbdfuse
    mkdir -p $d
    nbdfuse $d --unix "$sock" &
    echo $d > $state/nbdfuse.dir
    for _ in $(seq 50); do [ -e $d/nbd ] && break; sleep 0.1; done
    dev=$(losetup -f --show --direct-io=on $d/nbd)
    echo "$dev" > $state/loop
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
Swap to nvswapd (if not started with --swap):  tools/quickstart.sh --swap
Stop everything (writes all data back first):   tools/quickstart.sh --stop
MSG
