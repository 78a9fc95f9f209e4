#!/usr/bin/env bash
# nbd_guest.sh - the kernel's own nbd driver swapping, in the small guest of
# tests/vm/ (the guest test's harness): the same workload (nvt-memtouch:
# fill then check MIB in a guest of VM_MEM MiB, sequential then random)
# against
#   nvswapd   --store tiered
#   nbdkit    memory plugin (allocator=malloc)
# through the same relay and virtio-serial port; the guest's own clock
# times each order. Under TCG (here) the guest's CPU is emulated, so the
# ratio says more than the seconds. Also prints the request shape nvswapd
# saw (sizes, requests that came together).
#
#   NBDG_MIB=160  VM_MEM=128
T_TIMEOUT=${T_TIMEOUT:-900}
. "$(dirname "$0")/../system/lib.sh"
. "$(dirname "$0")/../system/nbd_common.bash"
VM_MEM=${VM_MEM:-128}
. "$(dirname "$0")/../vm/guest.bash"
t_require_root
t_require_cmd qemu-system-x86_64 nbdkit
t_is_sanitized "$(t_bin nvswapd)" && t_skip "sanitizer build: no swap to it"
export NVCACHE_RUN_DIR=$T_DIR/run
mib=${NBDG_MIB:-160}
vm_build
args=(nvt.mib="$mib" nvt.orders=seq,rand)

# 1. nvswapd
sock=$T_DIR/nv.sock
nbd_start "$sock" bguest --size 512M --mram 32M --handshake-timeout 0
vm_run "$T_DIR/guest-nvswapd.log" "$sock" nvt.export=bguest "${args[@]}" || t_fail "nvswapd run failed"
"$(t_bin nvcachectl)" stats --swap bguest |
  awk '$1 ~ /^nbd_(read|write|trim)_size_|^nbd_depth_/ && $2 != 0' | tr '\n' ' '; echo
kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null

# 2. nbdkit memory, the same way in
ksock=$T_DIR/kit.sock
nbdkit -f -U "$ksock" memory size=512M allocator=malloc >"$T_DIR/nbdkit.log" 2>&1 &
kpid=$!
t_cleanup "kill $kpid 2>/dev/null"
t_wait 10 test -S "$ksock" || t_fail "nbdkit did not start: $(cat "$T_DIR/nbdkit.log")"
vm_run "$T_DIR/guest-nbdkit.log" "$ksock" nvt.export=bguest "${args[@]}" || t_fail "nbdkit run failed"
kill "$kpid"; wait "$kpid" 2>/dev/null

accel=$(vm_accel)
for o in seq rand; do
  a=$(vm_step "$T_DIR/guest-nvswapd.log" "touch-$o" seconds) b=$(vm_step "$T_DIR/guest-nbdkit.log" "touch-$o" seconds)
  echo "BENCH nbd_guest_swap_${o}_${mib}m_in_${VM_MEM}m_${accel}_nvswapd $a s vs nbdkit_memory $b s ratio $(awk -v a="$a" -v b="$b" 'BEGIN{ if (a>0) printf "%.2f", b/a; else print "n/a" }')"
done
exit 0
