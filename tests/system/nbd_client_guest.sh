#!/usr/bin/env bash
# nbd_client_guest.sh - nvswapd under the kernel's own nbd driver: a small
# qemu guest (tests/vm/) attaches the export with nbd-client -N, makes it
# swap (mkswap, swapon --discard=pages), and fills and checks every page
# of a workload larger than its RAM, sequentially and in random order;
# then swapoff and nbd-client -d. The guest's only link to the host is a
# virtio-serial port whose host side is nvswapd's Unix socket.
#   1. --store tiered;
#   2. --store remote --redundancy parity over five nvcached on loopback,
#      one data node killed with SIGKILL while the guest is swapped out:
#      every page right;
#   3. nvswapd killed with SIGKILL while the guest is swapped out, then
#      restarted: the guest's workload must fail loudly (an I/O error,
#      SIGBUS), never read a page back wrong; a fresh nbd-client on the
#      restarted server swaps again.
# Skipped when qemu cannot run at all, and in a sanitizer build (nvswapd
# cannot mlockall under ASan; the plain build runs this).
T_TIMEOUT=${T_TIMEOUT:-600}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd_common.bash"
. "$(dirname "$0")/cluster_common.bash"
. "$(dirname "$0")/../vm/guest.bash"
t_require_root
command -v qemu-system-x86_64 >/dev/null ||
  t_skip "qemu-system-x86_64 is not installed (tools/install-deps.sh installs qemu-system-x86)"
qemu-system-x86_64 -accel tcg -machine none -display none -S -monitor none </dev/null >/dev/null 2>&1 &
qpid=$!
sleep 1; kill -9 $qpid 2>/dev/null; wait $qpid 2>/dev/null
[ $? -eq 137 ] || t_skip "qemu-system-x86_64 cannot run here: $(qemu-system-x86_64 -accel tcg -machine none -display none -monitor none </dev/null 2>&1 | head -1)"
nvswapd=$(t_bin nvswapd) || exit 1
nbd_is_sanitized "$nvswapd" &&
  t_skip "sanitizer build: nvswapd cannot mlockall under ASan (the plain build runs this guest test)"
export NVCACHE_RUN_DIR=$T_DIR/run
vm_build
MIB=${NBDG_MIB:-288}
t_log "guest: $VM_MEM MiB RAM, workload $MIB MiB, accel $(vm_accel); kernel $VM_KERNEL"

# guest_run TAG SOCK EXPORT [nvt.* args...]: boot, wait for the result
# (retried once with TCG if KVM fails); sets LOG.
guest_run() {
  local tag=$1 sock=$2 name=$3 rc; shift 3
  LOG=$T_DIR/guest-$tag.log
  for _ in 1 2; do
    vm_boot "$LOG" "$sock" nvt.export="$name" nvt.mib="$MIB" "$@"
    vm_wait "$LOG" "${NBDG_BOUND:-300}"
    rc=$?
    [ $rc -ne 2 ] && break
  done
  grep '^NVT' "$LOG" | sed "s/^/[$tag] /" >&2
  return $rc
}
# guest_step LOG NAME: the rc of a guest step.
guest_step() { sed -n "s/^NVT STEP $2 rc=\([0-9]*\).*/\1/p" "$1" | head -1; }

# 1. the tiered store
sock=$T_DIR/tiered.sock
nbd_start "$sock" gtier --size 512M --mram 32M --handshake-timeout 0
start=$SECONDS
guest_run tiered "$sock" gtier || t_fail "tiered: the guest did not pass (console: $LOG)"
t_log "tiered: PASS in $((SECONDS - start)) s; pswpout $(vm_result "$LOG" pswpout), pswpin $(vm_result "$LOG" pswpin)"
[ "$(vm_result "$LOG" pswpout)" -gt $(((MIB - VM_MEM) * 256)) ] || t_fail "tiered: the guest swapped out too little"
[ "$(nbd_stat gtier nbd_trims)" -gt 0 ] || t_fail "tiered: no TRIM reached nvswapd (swapon --discard=pages)"
[ "$(nbd_stat gtier nbd_request_errors)" = 0 ] || t_fail "tiered: request errors"
[ "$(nbd_stat gtier nbd_bytes_read)" -gt $((64 << 20)) ] || t_fail "tiered: too little swapped in"
kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null

echo ok
