#!/usr/bin/env bash
# nbd_client_guest.sh - nvswapd under the kernel's own nbd driver: a small
# qemu guest (tests/vm/) attaches the export with nbd-client -N, makes it
# swap (mkswap, swapon --discard=pages), and fills and checks every page
# of a workload larger than its RAM, sequentially and in random order;
# then swapoff and nbd-client -d. The guest's only link to the host is a
# virtio-serial port whose host side is nvswapd's Unix socket.
#   1. --store tiered (in sequential order; NBDG_ORDERS=seq,rand adds the
#      random-order pass, which tests/bench/nbd_guest.sh always runs);
#   2. --store remote --redundancy parity over five nvcached on loopback,
#      one data node killed with SIGKILL while the guest is swapped out:
#      every page right;
#   3. nvswapd killed with SIGKILL while the guest is swapped out, then
#      restarted: the guest's workload must fail loudly (an I/O error,
#      SIGBUS), never read a page back wrong; a fresh nbd-client on the
#      restarted server swaps again.
# It also checks that README's nbd-client and swapon commands are the ones
# the guest runs. Each part logs the request sizes and queue depth nvswapd
# saw (docs/nvswapd.md, "Under the kernel's nbd driver").
# Skipped when qemu cannot run at all, and in a sanitizer build (nvswapd
# cannot mlockall under ASan; the plain build runs this).
# Knobs: NBDG_MIB (workload, 160), VM_MEM (guest MiB, 128), NBDG_PARTS
# ("1 2 3"), NBDG_ORDERS (part 1's, "seq"), NBDG_BOUND (seconds per guest, 300), NBDG_KEEP=DIR (keep the
# guests' consoles and the daemons' logs there), NVCACHE_VM_ACCEL.
T_TIMEOUT=${T_TIMEOUT:-600}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd_common.bash"
. "$(dirname "$0")/cluster_common.bash"
VM_MEM=${VM_MEM:-128}
. "$(dirname "$0")/../vm/guest.bash"
t_require_root
command -v qemu-system-x86_64 >/dev/null ||
  t_skip "qemu-system-x86_64 is not installed (tools/install-deps.sh installs qemu-system-x86)"
qemu-system-x86_64 -accel tcg -machine none -display none -S -monitor none </dev/null >/dev/null 2>&1 &
qpid=$!
sleep 1; kill -9 $qpid 2>/dev/null; wait $qpid 2>/dev/null
[ $? -eq 137 ] || t_skip "qemu-system-x86_64 cannot run here: $(qemu-system-x86_64 -accel tcg -machine none -display none -monitor none </dev/null 2>&1 | head -1)"
# README's commands are the ones the guest runs (tests/vm/init.sh)
for cmd in "nbd-client -unix /run/nvcache/swap.sock /dev/nbd0 -N swap -b 4096 -t 30 -swap" \
           "swapon --discard=pages /dev/nbd0" "swapoff /dev/nbd0 && nbd-client -d /dev/nbd0"; do
  grep -qF -- "$cmd" "$T_ROOT/README.md" || t_fail "README.md no longer says: $cmd"
done
grep -qF -- '-unix $sock "$1" -N "$export_name" -b 4096 -t "$timeout" -swap' "$T_ROOT/tests/vm/init.sh" &&
  grep -qF -- '${timeout:=30}' "$T_ROOT/tests/vm/init.sh" &&
  grep -qF -- 'step swapon $swapon --discard=pages "$1"' "$T_ROOT/tests/vm/init.sh" ||
  t_fail "tests/vm/init.sh no longer runs README's nbd-client/swapon commands"
nvswapd=$(t_bin nvswapd) || exit 1
t_is_sanitized "$nvswapd" &&
  t_skip "sanitizer build: nvswapd cannot mlockall under ASan (the plain build runs this guest test)"
export NVCACHE_RUN_DIR=$T_DIR/run
[ -n "${NBDG_KEEP:-}" ] && t_cleanup "mkdir -p $NBDG_KEEP; cp $T_DIR/guest-* $T_DIR/*.log $NBDG_KEEP/"
vm_build
MIB=${NBDG_MIB:-160}
t_log "guest: $VM_MEM MiB RAM, workload $MIB MiB, accel $(vm_accel); kernel $VM_KERNEL"

# shape NAME: the requests nvswapd NAME saw, by size and by how many came
# together (the nonzero nbd_*_size_*, nbd_depth_*, FLUSH and WRITE_ZEROES
# counts), on one line.
shape() {
  "$(t_bin nvcachectl)" stats --swap "$1" |
    awk '$1 ~ /^nbd_(read|write|trim)_size_|^nbd_depth_|^nbd_(flushes|write_zeroes):/ && $2 != 0 { sub(/^nbd_/, "", $1); sub(/:$/, "", $1); printf "%s=%s ", $1, $2 }'
}

# NBDG_PARTS="1 3" runs only those parts (while working on one).
part() { [[ " ${NBDG_PARTS:-1 2 3} " == *" $1 "* ]]; }

# 1. the tiered store
if part 1; then
  sock=$T_DIR/tiered.sock
  nbd_start "$sock" gtier --size 512M --mram 32M --handshake-timeout 0
  start=$SECONDS
  LOG=$T_DIR/guest-tiered.log
  vm_run "$LOG" "$sock" nvt.export=gtier nvt.mib="$MIB" nvt.orders="${NBDG_ORDERS:-seq}" || t_fail "tiered: the guest did not pass (console: $LOG)"
  t_log "tiered: PASS in $((SECONDS - start)) s; pswpout $(vm_result "$LOG" pswpout), pswpin $(vm_result "$LOG" pswpin)"
  [ "$(vm_result "$LOG" pswpout)" -gt $(((MIB - VM_MEM) * 256)) ] || t_fail "tiered: the guest swapped out too little"
  [ "$(nbd_stat gtier nbd_trims)" -gt 0 ] || t_fail "tiered: no TRIM reached nvswapd (swapon --discard=pages)"
  [ "$(nbd_stat gtier nbd_request_errors)" = 0 ] || t_fail "tiered: request errors"
  [ "$(nbd_stat gtier nbd_bytes_read)" -gt $((64 << 20)) ] || t_fail "tiered: too little swapped in"
  t_log "tiered: requests $(shape gtier)"
  [ "$(nbd_stat gtier nbd_depth_max)" -ge 1 ] || t_fail "tiered: no request counted in nbd_depth_*"
  kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
fi

# 2. remote store, parity over nodes 2-5 (node 2 parity, 3-5 data); node 3
# dies once the guest has 24 MiB out there
if part 2; then
  declare -A pid
  cluster_start 5 guest
  sock=$T_DIR/remote.sock
  nbd_start "$sock" gpar --size 512M --store remote --cluster "$conf" --node 1 \
    --redundancy parity:2 --handshake-timeout 0
  held() { local t=0 i; for i in 2 3 4 5; do t=$((t + $(cluster_stat $i pages_data))); done; echo $t; }
  start=$SECONDS
  LOG=$T_DIR/guest-parity.log
  vm_boot "$LOG" "$sock" nvt.export=gpar nvt.mib="$MIB" nvt.orders=seq
  for _ in $(seq 1200); do
    [ "$(held)" -gt 6144 ] && break
    grep -q '^NVT RESULT' "$LOG" && break
    sleep 0.25
  done
  vdata=$(cluster_stat 3 pages_data)
  t_log "parity: $(held) data pages held; killing node 3 (holding $vdata)"
  [ "$vdata" -gt 0 ] || t_fail "parity: node 3 holds nothing: killing it would prove nothing"
  kill -9 "${pid[3]}"
  vm_wait "$LOG" "${NBDG_BOUND:-300}"; rc=$?
  grep '^NVT' "$LOG" | sed "s/^/[parity] /" >&2
  [ $rc -eq 0 ] || t_fail "parity: the guest did not pass after node 3 died (console: $LOG)"
  t_log "parity: PASS in $((SECONDS - start)) s; rebuilt from parity $(nbd_stat gpar parity_reconstructs)"
  t_log "parity: requests $(shape gpar)"
  [ "$(nbd_stat gpar parity_reconstructs)" -gt 0 ] || t_fail "parity: no page was rebuilt from parity"
  [ "$(nbd_stat gpar remote_read_errors)" = 0 ] || t_fail "parity: remote read errors"
  [ "$(nbd_stat gpar nbd_request_errors)" = 0 ] || t_fail "parity: request errors"
  kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
  cluster_stop
fi

# 3. nvswapd killed with SIGKILL while the guest is swapped out, restarted
if part 3; then
  sock=$T_DIR/restart.sock
  nbd_start "$sock" grst --size 512M --mram 32M --handshake-timeout 0
  start=$SECONDS
  LOG=$T_DIR/guest-restart.log
  # 256 MiB: the guest as a whole stays clear of memory pressure, and
  # only the workload's pages (in a 32 MiB cgroup) go out. Under global
  # pressure init's own pages (its text is in the initramfs, tmpfs) go
  # too, and when the server dies init dies at its next touch: a panic.
  VM_MEM=256 vm_boot "$LOG" "$sock" nvt.export=grst nvt.mib="$MIB" nvt.orders=seq nvt.mode=restart nvt.timeout=10
    # once the workload reads its pages back (its check phase): a process
  # that only swaps out when the server is gone retries the failed
  # writes for as long as its memory cgroup lets it run
  swapping_in() { [ "$(nbd_stat grst nbd_bytes_read)" -gt $((8 << 20)) ]; }
  t_wait 200 swapping_in ||
    t_fail "restart: the guest never swapped 8 MiB in: $(grep '^NVT' "$LOG" | tail -3)"
  kill -9 "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
  t_log "restart: nvswapd killed with SIGKILL after $((SECONDS - start)) s"
  sleep 2
  rm -f "$NVCACHE_RUN_DIR/swap-grst.sock"
  nbd_start "$sock" grst --size 512M --mram 32M --handshake-timeout 0
  vm_wait "$LOG" "${NBDG_BOUND:-300}"; rc=$?
  grep '^NVT' "$LOG" | sed "s/^/[restart] /" >&2
  grep -q '^NVT LOST silent' "$LOG" && t_fail "restart: a page came back wrong after the server restarted"
  grep -q '^NVT LOST loud' "$LOG" || t_fail "restart: the workload did not fail loudly (console: $LOG)"
  [ $rc -eq 0 ] || t_fail "restart: the guest did not swap again on the restarted server (console: $LOG)"
  [ "$(nbd_stat grst nbd_bytes_written)" -gt $((16 << 20)) ] ||
    t_fail "restart: the reattached guest did not swap to the restarted nvswapd"
  t_log "restart: PASS in $((SECONDS - start)) s"
fi

echo ok
