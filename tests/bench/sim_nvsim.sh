#!/usr/bin/env bash
# sim_nvsim.sh - nvsim benchmarks on the shipped traces:
#  - simulation speed per policy (memory accesses per second, one policy
#    and one size at a time, single thread) and lackey text parsing speed;
#  - the paper's headline: memory energy and run time of the best
#    MRAM+DRAM configuration smaller than the footprint, against a
#    DRAM-only machine 2.5x the footprint (the paper: 1 GB for 412 MB).
# Prints BENCH lines; never fails on a low number.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${NVCACHE_BUILD:-$root/build}
case "$build" in /*) ;; *) build=$root/$build ;; esac
nvsim=$build/tools/nvsim
[ -x "$nvsim" ] || { echo "sim_nvsim: build nvsim first ($nvsim)" >&2; exit 1; }
tr=$root/tests/traces
tmp=$(mktemp -d /var/tmp/nvbench-sim.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

rate() {  # nvsim's own "(X M accesses/s" figure from stderr
  sed -n 's/.*(\([0-9.]*\) M accesses\/s.*/\1/p' "$1" | tail -1
}

for p in lru mram-fixed lowpower adaptive; do
  "$nvsim" --trace "$tr/cg-small.l2.nvt.gz" --policy "$p" --mram 2M --dram 4M \
    >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; continue; }
  echo "BENCH sim_speed_$p $(rate "$tmp/err") Maccesses/s"
done
"$nvsim" --trace "$tr/gups-tiny.lackey.gz" --policy lru --mram 128K --dram 256K \
  >/dev/null 2>"$tmp/err" && echo "BENCH sim_speed_lackey_text $(rate "$tmp/err") Maccesses/s"
"$nvsim" convert "$tr/gups-tiny.lackey.gz" "$tmp/t.nvt" 2>/dev/null &&
  "$nvsim" --trace "$tmp/t.nvt" --policy lru --mram 128K --dram 256K \
    >/dev/null 2>"$tmp/err" && echo "BENCH sim_speed_nvt_cpu_level $(rate "$tmp/err") Maccesses/s"

# Energy and time against DRAM-only, per trace: footprint F (from nvsim),
# DRAM-only = 2.5 F; candidates = MRAM F/8..F/2 x DRAM such that
# MRAM+DRAM <= 7/8 F (it must swap: the paper's "left notch" region).
for t in cg-small.l2 mg.l2 gups-small.l2; do
  f=$tr/$t.nvt.gz
  "$nvsim" --trace "$f" --policy lru --mram 0 --dram 1G >/dev/null 2>"$tmp/err"
  fp=$(sed -n 's/.*footprint \([0-9.]*\) \([KMG]\)iB.*/\1 \2/p' "$tmp/err")
  [ -n "$fp" ] || continue
  fk=$(awk -v v="${fp% *}" -v u="${fp#* }" 'BEGIN { m = (u == "G") ? 1048576 : (u == "M") ? 1024 : 1; printf "%d", v * m }')
  big=$((fk * 5 / 2))K
  mr="$((fk / 8))K,$((fk / 4))K,$((fk / 2))K"
  dr="$((fk / 16))K,$((fk / 8))K,$((fk / 4))K,$((fk * 3 / 8))K,$((fk / 2))K,$((fk * 5 / 8))K,$((fk * 3 / 4))K,$((fk * 7 / 8))K"
  "$nvsim" --trace "$f" --policy lowpower,adaptive --mram "$mr" --dram "$dr" -q -j2 >"$tmp/s.csv" 2>/dev/null || continue
  "$nvsim" --trace "$f" --policy lru --mram 0 --dram "$big" -q >"$tmp/ref.csv" 2>/dev/null || continue
  name=${t%.l2}
  awk -F, -v name="$name" -v fk="$fk" '
    FNR == 1 { next }
    FILENAME ~ /ref.csv$/ { rt = $5; re = $6; next }
    ($2 + $3) / 1024 <= fk * 7 / 8 { if (!($1 in be) || $6 < be[$1]) { be[$1] = $6; bt[$1] = $5; bm[$1] = $2; bd[$1] = $3 } }
    END {
      for (p in be) {
        printf "BENCH sim_%s_energy_%s %.4g J vs dram_only_2.5x %.4g J ratio %.3f\n", name, p, be[p], re, be[p] / re
        printf "BENCH sim_%s_time_%s %.4g s vs dram_only_2.5x %.4g s ratio %.3f\n", name, p, bt[p], rt, bt[p] / rt
        printf "# %s %s: best energy below the footprint at MRAM %d KiB + DRAM %d KiB\n", name, p, bm[p] / 1024, bd[p] / 1024
      }
    }' "$tmp/ref.csv" "$tmp/s.csv"
done
