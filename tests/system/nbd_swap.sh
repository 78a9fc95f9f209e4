#!/usr/bin/env bash
# nbd_swap.sh - the kernel really swaps to nvswapd: nbdfuse exposes the
# export as a file, a loop device (direct I/O) over it becomes swap with
# --discard=pages, and a program in a 256 MiB memory cgroup fills and checks
# 768 MiB, sequentially and in random order. No page may come back wrong;
# swapoff must succeed and the discards must have given the pages back.
#
# Skipped when another swap is active (the test must be the only swap, or
# the kernel would spread pages elsewhere) and in a sanitizer build: there
# nvswapd cannot mlockall, so its own pages could be swapped out to itself,
# which can deadlock the kernel for good.
T_TIMEOUT=${T_TIMEOUT:-180}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd_common.bash"
t_require_root
t_require_cmd nbdfuse losetup mkswap swapon swapoff fusermount3
nvswapd=$(t_bin nvswapd)
touch_bin=$(t_bin nbd-memtouch)
t_is_sanitized "$nvswapd" &&
  t_skip "sanitizer build: nvswapd cannot mlockall under ASan, and a swap daemon whose own memory can be swapped to itself may deadlock the kernel"
[ "$(wc -l </proc/swaps)" -le 1 ] &&
  [ -z "$(swapon --noheadings --show 2>/dev/null)" ] ||
  t_skip "another swap device is active ($(swapon --noheadings --show | head -1)); this test must be the only swap"
cgroot=/sys/fs/cgroup/memory
[ -w "$cgroot/cgroup.procs" ] || t_skip "no writable cgroup v1 memory controller"

sock=$T_DIR/nbd.sock
nbd_start "$sock" tswap --size 1G --mram 64M
mnt=$T_DIR/fuse
mkdir "$mnt"
# nbdfuse (1.14) stays in the foreground: run it in the background, so
# that the test's time bound can still fire.
nbdfuse "$mnt" --unix "$sock" >"$T_DIR/nbdfuse.log" 2>&1 &
fpid=$!
t_cleanup "fusermount3 -u $mnt || umount -l $mnt; kill $fpid"
t_wait 10 test -f "$mnt/nbd" ||
  t_fail "nbdfuse shows no $mnt/nbd: $(cat "$T_DIR/nbdfuse.log")"

# Direct I/O: without it the loop device writes through the page cache of
# the FUSE file, charged to the swapping cgroup, and random swap-out runs
# that cgroup out of memory (seen here).
dev=$(losetup -f --show --direct-io=on "$mnt/nbd") || t_fail "losetup"
t_cleanup "losetup -d $dev"
mkswap "$dev" >/dev/null || t_fail "mkswap"
swapon --discard=pages "$dev" || t_fail "swapon"
t_cleanup "swapoff $dev"

cg=$cgroot/nvtest-nbd-swap-$$
mkdir "$cg" || t_fail "cannot create $cg"
t_cleanup "for p in \$(cat $cg/cgroup.procs); do kill -9 \$p; done; sleep 0.2; rmdir $cg"
echo 256M >"$cg/memory.limit_in_bytes" || t_fail "memory.limit_in_bytes"
echo 60 >"$cg/memory.swappiness" 2>/dev/null || true

for order in seq rand; do
  start=$SECONDS
  out=$(sh -c "echo \$\$ > $cg/cgroup.procs; exec $touch_bin 768 $order 11" 2>&1) ||
    t_fail "768 MiB $order in 256 MiB: $out (dmesg: $(dmesg | tail -3))"
  echo "$order: $out ($((SECONDS - start)) s)"
  [ "$(cat "$cg/memory.memsw.max_usage_in_bytes")" -gt $((300 << 20)) ] ||
    t_fail "the workload did not swap (memsw max usage too low)"
done
w=$(nbd_stat tswap nbd_bytes_written)
[ "$w" -ge $((400 << 20)) ] || t_fail "only $w bytes reached nvswapd"
swapoff "$dev" || t_fail "swapoff"
# Everything swapped was freed (the program exited) and discarded.
sleep 0.5
used=$(( $(nbd_stat tswap mram_pages) + $(nbd_stat tswap dram_pages) ))
t_log "after swapoff: $used pages still in the store; $(nbd_stat tswap pages_trimmed) trimmed"
[ "$(nbd_stat tswap nbd_trims)" -gt 0 ] || t_fail "no TRIM reached nvswapd"
[ "$used" -lt 16384 ] || t_fail "$used pages still held after swapoff (discard did not free them)"
[ "$(nbd_stat tswap nbd_request_errors)" -eq 0 ] || t_fail "request errors"
echo ok
