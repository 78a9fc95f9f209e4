#!/usr/bin/env bash
# cluster_parity_kernel.sh - the kernel swaps into other nodes' memory with
# parity redundancy (cluster_swap_kernel.sh's approach):
# nvswapd --store remote --redundancy parity over five nvcached on loopback
# (node 2 holds the parity pages, nodes 3-5 the data),
# exposed by nbdfuse, a direct-I/O loop device over it as swap
# (--discard=pages), and a program in a 96 MiB memory cgroup filling and
# checking 256 MiB in random order. Once 100 MiB are swapped out, one node
# node is killed with SIGKILL: no page may come back wrong (its pages are
# rebuilt from their parity groups, on the spot or in the background), and
# swapping goes on.
#
# CPK_MODE=parity|parity-dist (default parity) and CPK_VICTIM=N (default 3,
# a data node; 2 is the parity node of `parity`) choose the run;
# cluster_paritydist_kernel.sh and cluster_paritynode_kernel.sh are the
# other two runs.
#
# Skipped when another swap is active (this must be the only swap) and in a
# sanitizer build (no mlockall under ASan: a swap daemon whose own memory
# can be swapped to itself may deadlock the kernel).
T_TIMEOUT=${T_TIMEOUT:-240}
mode=${CPK_MODE:-parity} victim=${CPK_VICTIM:-3}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_common.bash"
. "$(dirname "$0")/nbd_common.bash"
t_require_root
t_require_cmd nbdfuse losetup mkswap swapon swapoff fusermount3 python3
nvswapd=$(t_bin nvswapd) || exit 1
touch_bin=$(t_bin nbd-memtouch) || exit 1
t_is_sanitized "$nvswapd" &&
  t_skip "sanitizer build: no mlockall under ASan, and a swap daemon whose own memory can be swapped to itself may deadlock the kernel"
[ "$(wc -l </proc/swaps)" -le 1 ] &&
  [ -z "$(swapon --noheadings --show 2>/dev/null)" ] ||
  t_skip "another swap device is active ($(swapon --noheadings --show | head -1)); this test must be the only swap"
cgroot=/sys/fs/cgroup/memory
[ -w "$cgroot/cgroup.procs" ] || t_skip "no writable cgroup v1 memory controller"
export NVCACHE_RUN_DIR=$T_DIR/run

declare -A pid
cluster_start 5 kernel
stat_val() { cluster_stat "$@"; }

sock=$T_DIR/nbd.sock
nbd_start "$sock" tclpar --size 768M --store remote --cluster "$conf" --node 1 \
  --redundancy "$mode:2"
mnt=$T_DIR/fuse
mkdir "$mnt"
nbdfuse "$mnt" --unix "$sock" >"$T_DIR/nbdfuse.log" 2>&1 &
fpid=$!
t_cleanup "fusermount3 -u $mnt || umount -l $mnt; kill $fpid"
t_wait 10 test -f "$mnt/nbd" || t_fail "nbdfuse shows no $mnt/nbd: $(cat "$T_DIR/nbdfuse.log")"
dev=$(losetup -f --show --direct-io=on "$mnt/nbd") || t_fail "losetup"
t_cleanup "losetup -d $dev"
mkswap "$dev" >/dev/null || t_fail "mkswap"
swapon --discard=pages "$dev" || t_fail "swapon"
t_cleanup "swapoff $dev"

cg=$cgroot/nvtest-cluster-parity-$$
mkdir "$cg" || t_fail "cannot create $cg"
t_cleanup "for p in \$(cat $cg/cgroup.procs); do kill -9 \$p; done; sleep 0.2; rmdir $cg"
echo 96M >"$cg/memory.limit_in_bytes" || t_fail "memory.limit_in_bytes"

# The workload in the background; node 3 dies once enough has been swapped.
sh -c "echo \$\$ > $cg/cgroup.procs; exec $touch_bin 256 rand 7" >"$T_DIR/touch.out" 2>&1 &
wpid=$!
held() { local t=0 i; for i in 2 3 4 5; do t=$((t + $(stat_val $i pages_data))); done; echo $t; }
parity_pages() { local t=0 i; for i in 2 3 4 5; do t=$((t + $(stat_val $i pages_parity))); done; echo $t; }
# Wait until 100 MiB are swapped out, then kill a data node.
for _ in $(seq 1200); do
  [ "$(held)" -gt 25600 ] && break
  kill -0 $wpid 2>/dev/null || break
  sleep 0.1
done
t_log "$mode: swapped: $(held) data pages, $(parity_pages) parity pages (node $victim: $(stat_val $victim pages_data) data, $(stat_val $victim pages_parity) parity); killing node $victim"
[ "$(stat_val $victim pages_data)" -gt 0 ] || [ "$(stat_val $victim pages_parity)" -gt 0 ] ||
  t_fail "node $victim holds nothing: killing it would prove nothing"
vdata=$(stat_val $victim pages_data)
kill -9 "${pid[$victim]}"
wait $wpid
rc=$?
out=$(cat "$T_DIR/touch.out")
[ $rc -eq 0 ] || t_fail "workload failed after node $victim died: $out (dmesg: $(dmesg | tail -3))"
t_log "$mode: 256 MiB in 96 MiB, random order, node $victim killed midway: $out"
[ "$(cat "$cg/memory.memsw.max_usage_in_bytes")" -gt $((140 << 20)) ] ||
  t_fail "the workload did not swap (memsw max usage too low)"
[ "$(nbd_stat tclpar remote_read_errors)" = 0 ] || t_fail "remote read errors"
[ "$(nbd_stat tclpar nbd_request_errors)" = 0 ] || t_fail "NBD request errors"
t_log "rebuilt from parity $(nbd_stat tclpar parity_reconstructs), parity updates $(nbd_stat tclpar parity_updates), groups $(nbd_stat tclpar parity_groups)"
if [ "$vdata" -gt 0 ]; then
  [ "$(nbd_stat tclpar parity_reconstructs)" -gt 0 ] || t_fail "no page was rebuilt from parity"
else
  # the parity node held no data: its loss costs parity, recomputed
  [ "$(nbd_stat tclpar parity_rebuilds)" -gt 0 ] || t_fail "no parity page was recomputed"
fi
swapoff "$dev" || t_fail "swapoff"
echo ok
