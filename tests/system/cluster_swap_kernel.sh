#!/usr/bin/env bash
# cluster_swap_kernel.sh - the kernel swaps into other nodes' memory:
# nvswapd --store remote --redundancy mirror over four nvcached on loopback,
# exposed by nbdfuse, a direct-I/O loop device over it as swap
# (--discard=pages), and a program in a 96 MiB memory cgroup filling and
# checking 256 MiB in random order. Once 100 MiB are swapped out, one node
# is killed with SIGKILL: no page may come back wrong (the mirror copies serve
# and are rebuilt), and swapping goes on.
#
# Skipped when another swap is active (this must be the only swap) and in a
# sanitizer build (no mlockall under ASan: a swap daemon whose own memory
# can be swapped to itself may deadlock the kernel).
T_TIMEOUT=${T_TIMEOUT:-240}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_common.bash"
. "$(dirname "$0")/nbd_common.bash"
t_require_root
t_require_cmd nbdfuse losetup mkswap swapon swapoff fusermount3 python3
nvswapd=$(t_bin nvswapd) || exit 1
nvcached=$(t_bin nvcached) || exit 1
touch_bin=$(t_bin nbd-memtouch) || exit 1
ctl=$(t_bin nvcachectl) || exit 1
t_is_sanitized "$nvswapd" &&
  t_skip "sanitizer build: no mlockall under ASan, and a swap daemon whose own memory can be swapped to itself may deadlock the kernel"
[ "$(wc -l </proc/swaps)" -le 1 ] &&
  [ -z "$(swapon --noheadings --show 2>/dev/null)" ] ||
  t_skip "another swap device is active ($(swapon --noheadings --show | head -1)); this test must be the only swap"
cgroot=/sys/fs/cgroup/memory
[ -w "$cgroot/cgroup.procs" ] || t_skip "no writable cgroup v1 memory controller"
export NVCACHE_RUN_DIR=$T_DIR/run

read -r -a ports < <(cluster_free_ports 4)
head -c 32 /dev/urandom | base64 >"$T_DIR/secret"
chmod 600 "$T_DIR/secret"
conf=$T_DIR/cluster.conf
{ echo "secret secret"
  for i in 1 2 3 4; do echo "node $i 127.0.0.1:${ports[$((i-1))]}"; done; } >"$conf"
declare -A pid
for i in 1 2 3 4; do
  "$nvcached" --cluster "$conf" --node $i -f --heartbeat 200 --timeout 1000 \
    >"$T_DIR/node$i.log" 2>&1 &
  pid[$i]=$!
  t_cleanup "kill -9 ${pid[$i]} 2>/dev/null"
done
stat_val() { "$ctl" stats --node "$1" 2>/dev/null | awk -F': ' -v k="$2" '$1 == k { print $2 }'; }
alive_is() { [ "$(stat_val "$1" nodes_alive)" = "$2" ]; }
for i in 1 2 3 4; do
  t_wait 15 alive_is $i 3 ||
    t_fail "node $i does not see its peers: $("$ctl" stats --node $i 2>&1 | grep '^node'); $(tail -5 "$T_DIR/node$i.log")"
done

sock=$T_DIR/nbd.sock
nbd_start "$sock" tclswap --size 768M --store remote --cluster "$conf" --node 1 \
  --redundancy mirror
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

cg=$cgroot/nvtest-cluster-swap-$$
mkdir "$cg" || t_fail "cannot create $cg"
t_cleanup "for p in \$(cat $cg/cgroup.procs); do kill -9 \$p; done; sleep 0.2; rmdir $cg"
echo 96M >"$cg/memory.limit_in_bytes" || t_fail "memory.limit_in_bytes"

# The workload in the background; node 3 dies once enough has been swapped.
sh -c "echo \$\$ > $cg/cgroup.procs; exec $touch_bin 256 rand 7" >"$T_DIR/touch.out" 2>&1 &
wpid=$!
held() { local t=0 i; for i in 2 3 4; do t=$((t + $(stat_val $i pages_data))); done; echo $t; }
# Wait until 100 MiB are swapped out (two copies each), then kill a node.
for _ in $(seq 1200); do
  [ "$(held)" -gt 51200 ] && break
  kill -0 $wpid 2>/dev/null || break
  sleep 0.1
done
t_log "swapped: $(held) page copies on nodes 2-4; killing node 3"
kill -9 "${pid[3]}"
wait $wpid
rc=$?
out=$(cat "$T_DIR/touch.out")
[ $rc -eq 0 ] || t_fail "workload failed after node 3 died: $out (dmesg: $(dmesg | tail -3))"
t_log "256 MiB in 96 MiB, random order, node 3 killed midway: $out"
[ "$(cat "$cg/memory.memsw.max_usage_in_bytes")" -gt $((140 << 20)) ] ||
  t_fail "the workload did not swap (memsw max usage too low)"
[ "$(nbd_stat tclswap remote_read_errors)" = 0 ] || t_fail "remote read errors"
[ "$(nbd_stat tclswap nbd_request_errors)" = 0 ] || t_fail "NBD request errors"
t_log "failovers $(nbd_stat tclswap remote_failovers), re-mirrored $(nbd_stat tclswap remote_remirrors)"
swapoff "$dev" || t_fail "swapoff"
echo ok
