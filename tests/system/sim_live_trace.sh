#!/usr/bin/env bash
# sim_live_trace.sh - record a live workload, replay it: nvswapd's tiered
# store writes the page accesses its policy sees (--trace-out) while fio's
# nbd engine writes 16 MiB sequentially and reads a 4 MiB region 5 times;
# after SIGTERM the log is complete, and nvsim replays it: one record per
# page access, the exact CSV header, accesses = records, the live lru
# store's MRAM hit rate reproduced, and the hot region's repeated reads
# visible (served from a 4 MiB memory, not from a 2 MiB one, by lru and
# by adaptive; pinned in a 4 MiB MRAM by mram-fixed with the whole-run
# profile). The log then serves as the live store's profile (--profile):
# mram-fixed gets the same hit rate live. Also: an unwritable --trace-out,
# and a --profile that is not an access log, are refused at start.
T_TIMEOUT=${T_TIMEOUT:-150}
KEEP=${KEEP:-}   # a path: keep a copy of the recorded log there
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd fio
fio --enghelp 2>/dev/null | grep -qw nbd || t_skip "fio has no nbd engine"
nvsim=$(t_bin nvsim)
nvswapd=$(t_bin nvswapd)
log=$T_DIR/live.nvt.gz

# Refused at start, with the path and the reason, exit status 1.
"$nvswapd" -f --size 16M --unix "$T_DIR/x.sock" --name simtx --nvram "$T_SHM/x.mram" \
  --trace-out /nonexistent-nvtest/live.nvt >"$T_DIR/refused.log" 2>&1
rc=$?
[ $rc -eq 1 ] || t_fail "unwritable --trace-out: exit $rc, want 1"
grep -q "/nonexistent-nvtest/live.nvt: cannot create: No such file or directory" "$T_DIR/refused.log" ||
  t_fail "unwritable --trace-out: unclear message: $(cat "$T_DIR/refused.log")"
"$nvswapd" -f --size 16M --unix "$T_DIR/x.sock" --name simtx --store flat \
  --trace-out "$T_DIR/flat.nvt" >"$T_DIR/refused2.log" 2>&1
[ $? -eq 2 ] && grep -q "needs --store tiered" "$T_DIR/refused2.log" ||
  t_fail "--trace-out with --store flat: $(cat "$T_DIR/refused2.log")"

# The live run: MRAM 4 MiB + DRAM 60 MiB hold the whole 64 MiB export.
sock=$T_DIR/trc.sock name=simtrc
nbd_start "$sock" "$name" --size 64M --mram 4M --dram 60M --policy lru --trace-out "$log"
# The workload: 16 MiB written, then a 4 MiB region read 5 times, in 64
# KiB requests on 64 KiB boundaries (each exactly 16 page accesses).
fill_and_reread() {
  local uri="nbd+unix:///$name?socket=$sock"
  fio --name=fill --ioengine=nbd --uri="$uri" --rw=write --bs=64k --size=16M \
    --iodepth=4 >"$T_DIR/fill.out" 2>&1 || t_fail "fio fill: $(tail -3 "$T_DIR/fill.out")"
  fio --name=hot --ioengine=nbd --uri="$uri" --rw=read --bs=64k --offset=8M --size=4M \
    --loops=5 --iodepth=4 >"$T_DIR/hot.out" 2>&1 || t_fail "fio hot: $(tail -3 "$T_DIR/hot.out")"
}
fill_and_reread
want=$(( 16 * 256 + 5 * 4 * 256 ))    # 4096 page writes + 5120 page reads
"$(t_bin nvcachectl)" stats --swap "$name" >"$T_DIR/stats" || t_fail "no stats"
st() { awk -v k="$1:" '$1 == k { print $2 }' "$T_DIR/stats"; }
reads=$(st page_reads) writes=$(st page_writes) zeros=$(st zero_page_reads)
[ "$writes" -eq 4096 ] && [ "$reads" -eq 5120 ] && [ "$zeros" -eq 0 ] ||
  t_fail "unexpected page accesses: $reads reads ($zeros of zeros), $writes writes; want 5120, 4096"
[ "$(st trace_records)" -eq "$want" ] || t_fail "trace_records $(st trace_records), want $want"
[ "$(st trace_dropped)" -eq 0 ] || t_fail "trace_dropped $(st trace_dropped)"
live_hit=$(st mram_hit_rate)
kill -TERM "$NBD_PID"; wait "$NBD_PID"; rc=$?
[ $rc -eq 0 ] || t_fail "nvswapd exit $rc after SIGTERM"
grep -q "access log $log: $want accesses and 0 pages freed logged, 0 dropped" "$T_DIR/nvswapd-$name.log" ||
  t_fail "no closing line for the log: $(tail -3 "$T_DIR/nvswapd-$name.log")"
gzip -t "$log" || t_fail "the log is not a complete gzip file"
[ -n "$KEEP" ] && cp "$log" "$KEEP"

# Replay. MRAM 4M + DRAM 60M is the live store's configuration; DRAM 2M
# and 4M (no MRAM) are memories smaller than, and as large as, the hot
# region.
"$nvsim" --trace "$log" --format nvt --policy lru,adaptive --mram 4M,0 --dram 60M,2M,4M \
  --csv "$T_DIR/sim.csv" 2>"$T_DIR/sim.err" || t_fail "nvsim: $(cat "$T_DIR/sim.err")"
[ "$(head -1 "$T_DIR/sim.csv")" = "policy,mram_bytes,dram_bytes,accesses,time_s,energy_j,mram_hit_rate,flash_reads,flash_writes" ] ||
  t_fail "CSV header: $(head -1 "$T_DIR/sim.csv")"
grep -q "nvsim: $want accesses, 0 instructions" "$T_DIR/sim.err" ||
  t_fail "nvsim read another record count: $(cat "$T_DIR/sim.err")"
[ "$(wc -l <"$T_DIR/sim.csv")" -eq 13 ] || t_fail "want 12 CSV rows: $(cat "$T_DIR/sim.csv")"
awk -F, -v n="$want" 'NR > 1 && $4 != n { exit 1 }' "$T_DIR/sim.csv" ||
  t_fail "accesses column is not $want: $(cat "$T_DIR/sim.csv")"
# col POLICY MRAM DRAM COLUMN
col() { awk -F, -v p="$1" -v m="$2" -v d="$3" -v c="$4" '$1 == p && $2 == m && $3 == d { print $c }' "$T_DIR/sim.csv"; }
M4=4194304 D60=62914560 D2=2097152 D4=4194304
t_log "MRAM hit rate (MRAM 4M, DRAM 60M): live lru $live_hit, replayed lru $(col lru $M4 $D60 7), adaptive $(col adaptive $M4 $D60 7)"
t_log "flash reads with 2M / 4M of memory: lru $(col lru 0 $D2 8) / $(col lru 0 $D4 8), adaptive $(col adaptive 0 $D2 8) / $(col adaptive 0 $D4 8)"
awk -F, -v m=$M4 -v d=$D60 '$2 == m && $3 == d && ($8 != 0 || $9 != 0) { exit 1 }' "$T_DIR/sim.csv" ||
  t_fail "flash traffic although everything fits: $(cat "$T_DIR/sim.csv")"
# Same policy, same sizes, same access stream: the same placement. lru
# keeps the first 4 MiB written in MRAM and no read goes there: 1024/9216.
awk -v a="$live_hit" -v b="$(col lru $M4 $D60 7)" 'BEGIN { d = a - b; exit !(d < 0.0001 && d > -0.0001) }' ||
  t_fail "replayed lru MRAM hit rate $(col lru $M4 $D60 7) differs from the live store's $live_hit"
[ "$(col lru $M4 $D60 7)" = 0.111111 ] || t_fail "lru MRAM hit rate $(col lru $M4 $D60 7), want 1024/9216"
# The hot region's repeated reads: 4 MiB of memory holds it, so only the
# first of the 5 passes reads flash (the writes pushed it out); 2 MiB does
# not, and LRU misses on every page of every pass.
[ "$(col lru 0 $D4 8)" -eq 1024 ] || t_fail "lru, 4M: $(col lru 0 $D4 8) flash reads, want 1024"
[ "$(col lru 0 $D2 8)" -eq 5120 ] || t_fail "lru, 2M: $(col lru 0 $D2 8) flash reads, want 5120"
r=$(col adaptive 0 $D2 8)
[ "$r" -ge 1024 ] && [ "$r" -le 5120 ] || t_fail "adaptive, 2M: $r flash reads, outside 1024..5120"
# adaptive's clean-first eviction must not take the clean hot pages in
# place of the write's last dirty pages (it did: 5120 flash reads at 4M):
# within 1% of lru's.
r=$(col adaptive 0 $D4 8)
[ "$r" -ge 1024 ] && [ "$r" -le $((1024 + 10)) ] || t_fail "adaptive, 4M: $r flash reads, want lru's 1024 (+1%)"
# With the whole run's profile, mram-fixed pins exactly the hot region in
# a 4 MiB MRAM: its write and 5 reads of each page, 6144 of 9216 accesses.
"$nvsim" --trace "$log" --policy mram-fixed --profile oracle --mram 4M --dram 60M -q \
  >"$T_DIR/oracle.csv" 2>"$T_DIR/oracle.err" || t_fail "nvsim oracle: $(cat "$T_DIR/oracle.err")"
h=$(awk -F, 'NR == 2 { print $7 }' "$T_DIR/oracle.csv")
t_log "mram-fixed with the oracle profile: MRAM hit rate $h"
[ "$h" = 0.666667 ] || t_fail "mram-fixed (oracle) MRAM hit rate $h, want 6144/9216"

# The log as the live store's profile (--profile, the paper's profiling
# run): mram-fixed pins the previous run's hottest pages from their first
# touch, so the same workload gets the oracle replay's 6144/9216 live.
# Without the profile it learns online and gets less.
sock=$T_DIR/prf.sock name=simprf
for prof in with without; do
  args=(--size 64M --mram 4M --dram 60M --policy mram-fixed)
  [ $prof = with ] && args+=(--profile "$log")
  nbd_start "$sock" "$name" "${args[@]}"
  fill_and_reread
  "$(t_bin nvcachectl)" stats --swap "$name" >"$T_DIR/stats" || t_fail "no stats"
  eval "hit_$prof=\$(st mram_hit_rate) pp_$prof=\$(st profile_pages)"
  kill -TERM "$NBD_PID"; wait "$NBD_PID" || t_fail "nvswapd exit $? after SIGTERM"
  [ $prof = without ] ||
    grep -q "profile $log: $want accesses to 4096 pages; mram-fixed ranks pages by it" "$T_DIR/nvswapd-$name.log" ||
    t_fail "no profile line in the log: $(grep -i profile "$T_DIR/nvswapd-$name.log")"
done
t_log "live mram-fixed, MRAM hit rate: with the recorded profile $hit_with, learning online $hit_without"
[ "$pp_with" -eq 4096 ] && [ "$pp_without" -eq 0 ] || t_fail "profile_pages $pp_with / $pp_without, want 4096 / 0"
[ "$hit_with" = 0.6667 ] || t_fail "live mram-fixed with the profile: MRAM hit rate $hit_with, want 6144/9216"
awk -v a="$hit_with" -v b="$hit_without" 'BEGIN { exit !(b < a) }' ||
  t_fail "the profile did not help: $hit_with with it, $hit_without without"
# A profile that is not a live store's access log (a lackey trace; a
# memory-level trace of a program), or not there, or this run's log too
# (it would be overwritten as it is read), is refused at start.
cp "$log" "$T_DIR/again.nvt.gz"
for bad in "$(dirname "$0")/../traces/gups-tiny.lackey.gz:not a live store's access log" \
           "$(dirname "$0")/../traces/mg.l2.nvt.gz:not a live store's access log" \
           "$T_DIR/missing.nvt:No such file or directory" \
           "$T_DIR/again.nvt.gz:are the same file"; do
  "$nvswapd" -f --size 16M --unix "$T_DIR/x.sock" --name simtx --nvram "$T_SHM/x.mram" \
    --policy lowpower --profile "${bad%%:*}" --trace-out "$T_DIR/again.nvt.gz" \
    >"$T_DIR/refused3.log" 2>&1
  rc=$?
  { [ $rc -eq 1 ] || [ $rc -eq 2 ]; } && grep -q "${bad%%:*}.*${bad#*:}" "$T_DIR/refused3.log" ||
    t_fail "--profile ${bad%%:*}: exit $rc, want 1 or 2 and '${bad#*:}': $(cat "$T_DIR/refused3.log")"
  cmp -s "$log" "$T_DIR/again.nvt.gz" || t_fail "--profile ${bad%%:*}: the --trace-out file was overwritten"
done
# A log cut short (its run was killed) still gives the accesses before
# the cut, with a warning.
head -c $(( $(stat -c %s "$log") / 2 )) "$log" >"$T_DIR/cut.nvt.gz"
nbd_start "$sock" "$name" --size 64M --mram 4M --dram 60M --policy mram-fixed --profile "$T_DIR/cut.nvt.gz"
"$(t_bin nvcachectl)" stats --swap "$name" >"$T_DIR/stats" || t_fail "no stats"
kill -TERM "$NBD_PID"; wait "$NBD_PID"
grep -q "profile $T_DIR/cut.nvt.gz: unreadable after [0-9]* accesses.*using those" "$T_DIR/nvswapd-$name.log" ||
  t_fail "cut-short profile: no warning: $(grep -i profile "$T_DIR/nvswapd-$name.log")"
[ "$(st profile_pages)" -gt 0 ] || t_fail "cut-short profile: profile_pages $(st profile_pages)"
t_log "a profile cut in half: $(st profile_pages) pages ranked" 
"$nvswapd" -f --size 16M --unix "$T_DIR/x.sock" --name simtx --store flat \
  --profile "$log" >"$T_DIR/refused4.log" 2>&1
[ $? -eq 2 ] && grep -q "needs --store tiered" "$T_DIR/refused4.log" ||
  t_fail "--profile with --store flat: $(cat "$T_DIR/refused4.log")"

# TRIMs are in the log too. MRAM 1M + DRAM 3M hold 1024 pages: write 3M,
# trim its first 2M, write 2M more, read back what is left. Live, the
# trim freed the room the second write takes, so nothing goes to flash; a
# replay that kept the trimmed pages would evict 256 dirty pages to flash
# and read some of them back.
sock=$T_DIR/trm.sock name=simtrm log=$T_DIR/trim.nvt.gz
nbd_start "$sock" "$name" --size 64M --mram 1M --dram 3M --flash "$T_DIR/trm.flash" \
  --policy lru --trace-out "$log"
uri="nbd+unix:///$name?socket=$sock"
fio_nbd() { fio --name="$1" --ioengine=nbd --uri="$uri" --bs=64k --iodepth=4 "${@:2}" \
  >"$T_DIR/$1.out" 2>&1 || t_fail "fio $1: $(tail -3 "$T_DIR/$1.out")"; }
fio_nbd w1 --rw=write --size=3M
fio_nbd tr --rw=trim --size=2M
fio_nbd w2 --rw=write --offset=3M --size=2M
fio_nbd rd --rw=read --offset=2M --size=3M
fio_nbd w3 --rw=write --size=1M   # trimmed pages used again: memory is full, not over
"$(t_bin nvcachectl)" stats --swap "$name" >"$T_DIR/stats" || t_fail "no stats"
freed=$(st pages_trimmed) acc=$(( $(st page_reads) + $(st page_writes) ))
[ "$freed" -eq 512 ] || t_fail "pages_trimmed $freed, want 512"
[ "$(st flash_writebacks)" -eq 0 ] && [ "$(st flash_loads)" -eq 0 ] ||
  t_fail "the live store went to flash: $(grep flash "$T_DIR/stats" | tr '\n' ' ')"
[ "$(st trace_records)" -eq $((acc + freed)) ] || t_fail "trace_records $(st trace_records), want $acc accesses + $freed frees"
kill -TERM "$NBD_PID"; wait "$NBD_PID" || t_fail "nvswapd exit $? after SIGTERM"
grep -q "access log $log: $acc accesses and $freed pages freed logged, 0 dropped" "$T_DIR/nvswapd-$name.log" ||
  t_fail "no closing line for the log: $(tail -3 "$T_DIR/nvswapd-$name.log")"
"$nvsim" --trace "$log" --policy lru --mram 1M --dram 3M --csv "$T_DIR/trim.csv" \
  2>"$T_DIR/trim.err" || t_fail "nvsim: $(cat "$T_DIR/trim.err")"
grep -q "nvsim: $acc accesses, 0 instructions.*; $freed pages freed;" "$T_DIR/trim.err" ||
  t_fail "nvsim read other counts: $(cat "$T_DIR/trim.err")"
read -r na fr fw < <(awk -F, 'NR == 2 { print $4, $8, $9 }' "$T_DIR/trim.csv")
[ "$na" -eq "$acc" ] || t_fail "the replay's policy saw $na accesses, want $acc (a free is not an access)"
t_log "after a trim: replayed lru $fr flash reads, $fw flash writes (live: 0, 0)"
# The footprint is the distinct pages (0-5M): the 256 used again after
# their trim counted twice (6.0 MiB).
grep -q "footprint 5.0 MiB" "$T_DIR/trim.err" || t_fail "footprint of the trim log: $(cat "$T_DIR/trim.err")"
[ "$fr" -eq 0 ] && [ "$fw" -eq 0 ] || t_fail "the replay went to flash ($fr reads, $fw writes): it kept the trimmed pages"
echo "sim_live_trace: ok"
