#!/usr/bin/env bash
# nbd_lostpage.sh - a page the store cannot read fails alone: when a flash
# write-back fails, that page is lost (docs/nvswapd.md, "The store"), and a
# READ of it gets EIO while the connection goes on serving every other
# page. Before, the READ's success header was queued before the backend
# read, and the first lost page dropped the whole connection.
#
# Two ways to lose pages: a file-size limit under the flash file (EFBIG past
# 8 MiB, deterministic), and the tester's case, a flash file on a full 8 MiB
# ext4 (ENOSPC; skipped where loop devices cannot be set up).
T_TIMEOUT=${T_TIMEOUT:-120}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd python3 prlimit
raw=$(dirname "$0")/nbd_raw.py

head -c 16M /dev/urandom >"$T_DIR/data"

# check NAME SOCK: write 16 MiB through a 4 MiB store, read every page back.
check() {
  local name=$1 sock=$2 out lost eio
  python3 "$raw" "$sock" "$name" write "$T_DIR/data" ||
    t_fail "$name: writing the data failed"
  lost=$(nbd_stat "$name" pages_lost)
  [ "${lost:-0}" -gt 0 ] || t_fail "$name: no page lost: the setup did not fail any write-back"
  out=$(python3 "$raw" "$sock" "$name" pages "$T_DIR/data") ||
    t_fail "$name: reading the pages back failed (connection dropped?): $out
$(grep -E 'read at|dropping' "$T_DIR/nvswapd-$name.log" | head -3)"
  echo "$name: $out; pages_lost $(nbd_stat "$name" pages_lost)"
  eio=$(echo "$out" | awk '/^pages:/ { print $4 }')
  [ "${eio:-0}" -gt 0 ] || t_fail "$name: no READ got EIO although pages were lost"
  [ "$(nbd_stat "$name" nbd_request_errors)" -ge "$eio" ] ||
    t_fail "$name: EIO answers not counted in nbd_request_errors"
  [ "$(nbd_stat "$name" nbd_protocol_errors)" -eq 0 ] ||
    t_fail "$name: a connection was dropped"
  grep -q 'dropping the connection' "$T_DIR/nvswapd-$name.log" &&
    t_fail "$name: the log says a connection was dropped"
  kill -0 "$NBD_PID" || t_fail "$name: nvswapd died"
  # A fresh client still reads the pages that were not lost.
  python3 "$raw" "$sock" "$name" sum 0 4096 >/dev/null ||
    t_fail "$name: server unusable afterwards"
}

# 1. Writes past 8 MiB of the flash file fail with EFBIG (nvswapd ignores
#    SIGXFSZ): the limit is set once it has sized the file.
nbd_start "$T_DIR/a.sock" tlost --size 16M --mram 0 --dram 4M \
  --flash "$T_DIR/fsize.flash"
prlimit --pid "$NBD_PID" --fsize=8388608:8388608 ||
  t_fail "prlimit on nvswapd failed"
check tlost "$T_DIR/a.sock"
kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null

# 2. The flash file on a tiny full file system (ENOSPC).
if command -v mkfs.ext4 >/dev/null && command -v losetup >/dev/null &&
   [ "$(id -u)" -eq 0 ]; then
  img=$T_DIR/small.img mnt=$T_DIR/small
  mkdir -p "$mnt"
  truncate -s 8M "$img"
  mkfs.ext4 -q -F "$img" >/dev/null 2>&1 || t_fail "mkfs.ext4 failed"
  if dev=$(losetup -f --show "$img" 2>/dev/null); then
    t_cleanup "losetup -d $dev"
    mount "$dev" "$mnt" || t_fail "cannot mount $dev"
    t_cleanup "umount $mnt"
    nbd_start "$T_DIR/b.sock" tfull --size 16M --mram 0 --dram 4M \
      --flash "$mnt/h.flash"
    check tfull "$T_DIR/b.sock"
    kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
  else
    echo "no loop device here: the full-file-system case is not run"
  fi
fi
echo ok
