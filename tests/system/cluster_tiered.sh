#!/usr/bin/env bash
# cluster_tiered.sh - nvcached keeping other nodes' pages in a tiered store
# (--tier-size, --policy): nodes 2 and 3 hold 32 MiB each in 1 MiB of MRAM,
# 3 MiB of DRAM and a flash file; node 3's flash fails past 256 KiB. nvswapd
# on node 1 mirrors 24 MiB of random data onto them: every byte reads back
# (node 3's lost pages from node 2's copies), most of it came through
# flash, the nodes offer exactly their tier size, and their stats show the
# policy and its MRAM hit rate. Pages freed by the owner leave the store.
# Node 2's access log (--trace-out) replays in nvsim, and is the profile
# (--profile) of its next run. Bad tier options are refused with a clear
# message.
T_TIMEOUT=${T_TIMEOUT:-180}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_common.bash"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd nbdcopy cmp fio
fio --enghelp 2>/dev/null | grep -qw nbd || t_skip "fio has no nbd engine"
nvcached=$(t_bin nvcached) || exit 1
export NVCACHE_RUN_DIR=$T_DIR/run

# Refused: tier options without --tier-size (usage, 2); memory smaller than
# the tier size and no flash file, or a flash file on tmpfs (1).
head -c 32 /dev/urandom | base64 >"$T_DIR/secret"; chmod 600 "$T_DIR/secret"
printf 'secret secret\nnode 1 127.0.0.1:%s\n' "$(cluster_free_ports 1)" >"$T_DIR/one.conf"
refused() {   # WANT_EXIT WANT_TEXT ARGS...
  local want=$1 text=$2; shift 2
  timeout 20 "$nvcached" --cluster "$T_DIR/one.conf" --node 1 -f --no-mlock "$@" \
    >"$T_DIR/refused.log" 2>&1
  local rc=$?
  [ $rc -eq "$want" ] && grep -q -- "$text" "$T_DIR/refused.log" ||
    t_fail "nvcached $*: exit $rc (want $want), no '$text': $(cat "$T_DIR/refused.log")"
}
refused 2 "give its --tier-size too" --policy adaptive
refused 2 "not a size in 4 KiB pages" --tier-size 1000
refused 2 "not a size in 4 KiB pages" --tier-size 0
refused 2 "exceed --tier-size" --tier-size 4M --dram 1G
refused 1 "give --flash FILE" --tier-size 32M --mram 1M --dram 3M --nvram "$T_SHM/r.mram"
refused 1 "tmpfs" --tier-size 32M --mram 1M --dram 3M --nvram "$T_SHM/r.mram" \
  --flash "$T_SHM/r.flash"
refused 1 "unknown" --tier-size 32M --mram 1M --dram 31M --nvram "$T_SHM/r.mram" \
  --policy nosuch

# A refused start leaves alone a flash file another daemon took up while
# it started: "not there when we started" does not make it ours. Node 2
# starts first, slowly (128 GiB of page space: seconds of tables), and
# finds no flash file; node 1 starts on the same file, quickly, and
# serves; node 2 then finds the file locked and is refused. It used to
# remove node 1's flash file on its way out.
read -r -a two < <(cluster_free_ports 2)
printf 'secret secret\nnode 1 127.0.0.1:%s\nnode 2 127.0.0.1:%s\n' "${two[@]}" >"$T_DIR/two.conf"
"$nvcached" --cluster "$T_DIR/two.conf" --node 2 -f --no-mlock --tier-size 128G \
  --mram 1M --dram 4M --nvram "$T_SHM/slow.mram" --flash "$T_DIR/shared.flash" \
  >"$T_DIR/slow.log" 2>&1 &
slow=$!
t_cleanup "kill $slow 2>/dev/null; wait $slow 2>/dev/null"
sleep 0.5
"$nvcached" --cluster "$T_DIR/two.conf" --node 1 -f --no-mlock --tier-size 32M \
  --mram 1M --dram 4M --nvram "$T_SHM/fast.mram" --flash "$T_DIR/shared.flash" \
  >"$T_DIR/fast.log" 2>&1 &
fast=$!
t_cleanup "kill $fast 2>/dev/null; wait $fast 2>/dev/null"
t_wait 10 grep -q 'pages kept in a tiered store' "$T_DIR/fast.log" ||
  t_fail "node 1 did not start: $(tail -3 "$T_DIR/fast.log")"
kill -0 "$slow" 2>/dev/null ||
  t_fail "node 2 finished before node 1 took the flash file; this test needs a slower start: $(tail -3 "$T_DIR/slow.log")"
t_wait 120 sh -c "! kill -0 $slow 2>/dev/null" || t_fail "node 2 still starting after 120 s"
wait "$slow"; rc=$?
[ "$rc" = 1 ] && grep -q 'in use by another process' "$T_DIR/slow.log" ||
  t_fail "node 2 on node 1's flash file: exit $rc, $(tail -3 "$T_DIR/slow.log")"
[ -e "$T_DIR/shared.flash" ] ||
  t_fail "node 2's refused start removed node 1's flash file"
kill -TERM "$fast"; wait "$fast"
[ ! -e "$T_DIR/shared.flash" ] || t_fail "node 1 left its flash file at its stop"
t_log "a refused start left the running node's flash file alone"

cluster_node_args() {
  [ "$1" = 1 ] && return
  local log=
  [ "$1" = 2 ] && log="--trace-out $T_DIR/node2.nvt.gz"
  echo "--tier-size 32M --mram 1M --dram 3M --flash $T_DIR/flash$1" \
    "--nvram $T_SHM/node$1.mram --policy adaptive $log"
}
cluster_start 3 tier
# Node 3's flash fails past its first 256 KiB (as a full file system
# would): the pages whose write-back fails are lost there, and the owner
# reads their mirror copies on node 2 instead. Nothing is lost for it.
prlimit --pid "${pid[3]}" --fsize=262144 || t_fail "prlimit on node 3"
for i in 2 3; do
  [ "$(cluster_stat $i store)" = tiered ] || t_fail "node $i: store $(cluster_stat $i store)"
  [ "$(cluster_stat $i policy)" = adaptive ] || t_fail "node $i: policy $(cluster_stat $i policy)"
  [ "$(cluster_stat $i offered_bytes)" -eq $((32 << 20)) ] ||
    t_fail "node $i offers $(cluster_stat $i offered_bytes), want its 32 MiB tier"
  grep -q "pages kept in a tiered store: 32 MiB, MRAM 1 MiB, DRAM 3 MiB, flash $T_DIR/flash$i, policy adaptive" \
    "$T_DIR/node$i-tier.log" || t_fail "node $i: no start line: $(tail -3 "$T_DIR/node$i-tier.log")"
done
[ "$(cluster_stat 1 store)" = dram ] || t_fail "node 1: store $(cluster_stat 1 store)"

# Node 1 swaps: two copies of each page, on nodes 2 and 3 (its own node
# takes none). 24 MiB of random data each node must hold, in 4 MiB of
# memory: 20 MiB or more of it sits in its flash file.
nbd_start "$T_DIR/nbd.sock" cltier --size 48M --store remote --cluster "$conf" --node 1 \
  --redundancy mirror
uri="nbd+unix:///cltier?socket=$T_DIR/nbd.sock"
head -c 24M /dev/urandom >"$T_DIR/data"
truncate -s 48M "$T_DIR/data"
nbdcopy "$T_DIR/data" "$uri" || t_fail "nbdcopy to the device"
nbdcopy "$uri" "$T_DIR/back" || t_fail "nbdcopy from the device"
cmp "$T_DIR/data" "$T_DIR/back" || t_fail "data read back differs"
for i in 2 3; do
  p=$(cluster_stat $i pages_data) fl=$(cluster_stat $i flash_pages)
  wb=$(cluster_stat $i flash_writebacks) ld=$(cluster_stat $i flash_loads)
  fe=$(cluster_stat $i flash_errors) pl=$(cluster_stat $i pages_lost)
  t_log "node $i: $p pages, $fl on flash ($wb written back, $ld read back, $fe flash" \
    "errors, $pl pages lost), MRAM hit rate $(cluster_stat $i mram_hit_rate)," \
    "model $(cluster_stat $i model_time_s) s"
  [ "$p" -eq 6144 ] || t_fail "node $i holds $p pages, want 6144 (24 MiB)"
  [ "$fl" -ge 5120 ] || t_fail "node $i: $fl pages on flash: the tiers were not used"
  if [ $i = 2 ]; then
    [ "$wb" -ge 5120 ] && [ "$ld" -ge 1 ] && [ "$fe" -eq 0 ] ||
      t_fail "node 2: $wb written back, $ld loaded, $fe flash errors"
  else
    [ "$fe" -ge 1 ] && [ "$pl" -ge 1 ] ||
      t_fail "node 3: $fe flash errors, $pl pages lost, although its flash fails past 256 KiB"
  fi
done
grep -q "lost to that flash error" "$T_DIR/node3-tier.log" ||
  t_fail "node 3 did not log its lost pages: $(tail -3 "$T_DIR/node3-tier.log")"

# A hot region read again and again (4 KiB random reads, zipf): the policy
# keeps it in memory; the MRAM serves some of it.
fio --name=hot --ioengine=nbd --uri="$uri" --rw=randread --bs=4k --size=2M \
  --random_distribution=zipf:1.2 --number_ios=20000 --iodepth=4 \
  >"$T_DIR/hot.out" 2>&1 || t_fail "fio: $(tail -3 "$T_DIR/hot.out")"
for i in 2 3; do
  h=$(cluster_stat $i mram_hit_rate)
  t_log "node $i after the hot reads: MRAM hit rate $h, $(cluster_stat $i migrations_mram_dram) migrations"
done
awk -v a="$(cluster_stat 2 mram_hit_rate)" -v b="$(cluster_stat 3 mram_hit_rate)" \
  'BEGIN { exit !(a + b > 0) }' || t_fail "no read was served from MRAM on either node"

# Trimmed pages leave the nodes' stores (their slots read as zeros again).
fio --name=trim --ioengine=nbd --uri="$uri" --rw=trim --bs=1M --size=24M \
  >"$T_DIR/trim.out" 2>&1 || t_fail "fio trim: $(tail -3 "$T_DIR/trim.out")"
gone() { [ "$(cluster_stat 2 pages)" -eq 0 ] && [ "$(cluster_stat 3 pages)" -eq 0 ]; }
t_wait 20 gone || t_fail "after the trim: nodes hold $(cluster_stat 2 pages) and $(cluster_stat 3 pages) pages"
for i in 2 3; do
  [ "$(cluster_stat $i flash_pages)" -eq 0 ] && [ "$(cluster_stat $i dram_pages)" -eq 0 ] &&
    [ "$(cluster_stat $i mram_pages)" -eq 0 ] || t_fail "node $i: tiers not empty after the trim"
done
nbdcopy "$uri" "$T_DIR/back" || t_fail "nbdcopy after the trim"
cmp -n $((24 << 20)) "$T_DIR/back" /dev/zero || t_fail "trimmed range does not read as zeros"

# A stopped node removes its emulated MRAM file and completes its access
# log (--trace-out), which nvsim replays: every access the policy saw.
kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
kill -TERM "${pid[2]}"
t_wait 10 test ! -e "$T_SHM/node2.mram" || t_fail "node 2 left its MRAM file behind"
# ... and its flash file, which it created: other nodes' swapped pages.
t_wait 10 test ! -e "$T_DIR/flash2" || t_fail "node 2 left its flash file (others' pages) behind"
t_wait 10 grep -q "access log $T_DIR/node2.nvt.gz: [0-9]* accesses" "$T_DIR/node2-tier.log" ||
  t_fail "node 2: no closing line for its access log: $(tail -3 "$T_DIR/node2-tier.log")"
n=$(sed -n "s|.*access log $T_DIR/node2.nvt.gz: \([0-9]*\) accesses.*|\1|p" "$T_DIR/node2-tier.log")
"$(t_bin nvsim)" --trace "$T_DIR/node2.nvt.gz" --policy adaptive --mram 1M --dram 3M -q \
  >"$T_DIR/replay.csv" 2>"$T_DIR/replay.err" || t_fail "nvsim on node 2's log: $(cat "$T_DIR/replay.err")"
[ "$(awk -F, 'NR == 2 { print $4 }' "$T_DIR/replay.csv")" = "$n" ] ||
  t_fail "replay of node 2's log saw $(awk -F, 'NR == 2 { print $4 }' "$T_DIR/replay.csv") accesses, the log has $n"
t_log "node 2's access log: $n accesses, replayed: $(cut -d, -f7-9 "$T_DIR/replay.csv" | tail -1) (hit rate, flash reads, writes)"

# That log as the profile of node 2's next run (--profile, the paper's
# profiling run): counted, logged and shown in the stats; a file that is
# no access log is refused at start.
"$nvcached" --cluster "$conf" --node 2 -f --heartbeat 200 --timeout 1000 --no-mlock \
  --tier-size 32M --mram 1M --dram 3M --flash "$T_DIR/flash2b" --nvram "$T_SHM/node2b.mram" \
  --policy mram-fixed --profile "$T_DIR/node2.nvt.gz" >"$T_DIR/node2-prof.log" 2>&1 &
p2=$!
t_cleanup "kill -9 $p2 2>/dev/null"
t_wait 15 grep -q "profile $T_DIR/node2.nvt.gz: [0-9]* accesses to [0-9]* pages" "$T_DIR/node2-prof.log" ||
  t_fail "node 2 with --profile: no profile line: $(tail -3 "$T_DIR/node2-prof.log")"
t_wait 10 sh -c "[ \"\$(\"$(t_bin nvcachectl)\" stats --node 2 2>/dev/null | awk -F': ' '\$1 == \"profile_pages\" { print \$2 }')\" -gt 0 ]" ||
  t_fail "node 2: profile_pages $(cluster_stat 2 profile_pages)"
t_log "node 2 restarted with its log as profile: $(grep -o 'profile .*: [0-9]* accesses to [0-9]* pages' "$T_DIR/node2-prof.log"), profile_pages $(cluster_stat 2 profile_pages)"
kill -TERM $p2; wait $p2 2>/dev/null
refused 1 "$T_DIR/data" --tier-size 32M --mram 1M --dram 31M --nvram "$T_SHM/r.mram" \
  --policy mram-fixed --profile "$T_DIR/data"
refused 2 "give its --tier-size too" --profile "$T_DIR/node2.nvt.gz"
# One file in two roles: the store would write pages over its own MRAM.
refused 1 "are the same file" --tier-size 32M --mram 1M --dram 3M \
  --nvram "$T_DIR/same.f" --flash "$T_DIR/./same.f"
[ -e "$T_DIR/same.f" ] && t_fail "a refused start created the file it was refused for"
echo "cluster_tiered: ok"
