#!/usr/bin/env bash
# compare-policies.sh - one row of docs/tiering.md's "adaptive against
# lowpower, every trace" table: MRAM 30% of the trace's footprint, DRAM
# 5..120% of it (11 sizes), every policy; prints the geometric means of
# lowpower/adaptive over the sweep and the worst ratios, and keeps the CSV.
#
# usage: tests/traces/compare-policies.sh TRACE online|oracle [CSV]
# Needs a built nvsim (NVCACHE_BUILD, default ./build). Deterministic.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${NVCACHE_BUILD:-$root/build}
case "$build" in /*) ;; *) build=$root/$build ;; esac
nvsim=$build/tools/nvsim
[ $# -ge 2 ] || { echo "usage: $0 TRACE online|oracle [CSV]" >&2; exit 2; }
f=$1 prof=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
csv=${3:-$tmp/s.csv}
# nvsim's stderr goes to $tmp, which the trap removes: say what it said.
"$nvsim" --trace "$f" --policy lru --mram 0 --dram 4G >/dev/null 2>"$tmp/err" || {
  rc=$?
  echo "compare-policies: nvsim failed on $f (exit $rc):" >&2
  tail -n 5 "$tmp/err" >&2
  exit 1
}
fp=$(sed -n 's/.*footprint \([0-9.]*\) \([KMG]\)iB.*/\1 \2/p' "$tmp/err")
[ -n "$fp" ] || { echo "compare-policies: no footprint from nvsim (an empty trace?): $(tail -n 5 "$tmp/err")" >&2; exit 1; }
fk=$(awk -v v="${fp% *}" -v u="${fp#* }" 'BEGIN { m = (u == "G") ? 1048576 : (u == "M") ? 1024 : 1; printf "%d", v * m }')
# Sizes in whole 4 KiB pages (nvsim refuses any other), rounded down.
pg() { echo "$(($1 / 4 * 4))K"; }
dr=
for pct in 5 10 20 30 40 50 60 70 80 100 120; do dr="$dr,$(pg $((fk * pct / 100)))"; done
"$nvsim" --trace "$f" --policy all --mram "$(pg $((fk * 3 / 10)))" --dram "${dr#,}" \
  --profile "$prof" -q -j2 >"$csv"
# Per DRAM size: adaptive against lowpower and against the best of the
# other three; lowpower against the better of lru and mram-fixed.
awk -F, -v name="$(basename "$f")" -v prof="$prof" -v fp="${fp% *} ${fp#* }iB" -v fk="$fk" '
  NR == 1 { next }
  { t[$1, $3] = $5; e[$1, $3] = $6; keys[$3] = 1 }
  function mn(a, b) { return a < b ? a : b }
  function mx(v, r) { return r > v ? r : v }
  END {
    for (k in keys) {
      n++
      lt += log(t["lowpower", k] / t["adaptive", k]); le += log(e["lowpower", k] / e["adaptive", k])
      wt = mx(wt, t["adaptive", k] / t["lowpower", k]); we = mx(we, e["adaptive", k] / e["lowpower", k])
      ot = mn(mn(t["lru", k], t["mram-fixed", k]), t["lowpower", k])
      oe = mn(mn(e["lru", k], e["mram-fixed", k]), e["lowpower", k])
      if (t["adaptive", k] / ot > bt) { bt = t["adaptive", k] / ot; btk = k }
      be = mx(be, e["adaptive", k] / oe)
      pt = mx(pt, t["lowpower", k] / mn(t["lru", k], t["mram-fixed", k]))
      pe = mx(pe, e["lowpower", k] / mn(e["lru", k], e["mram-fixed", k]))
    }
    printf "| %s | %s | %.1f MiB | %s | %.3f | %.3f | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f |\n",
      name, fp, fk * 0.3 / 1024, prof, exp(lt / n), exp(le / n), wt, we, bt, be, pt, pe
    printf "(worst adaptive/best other time at DRAM %.0f%% of the footprint)\n", 100 * btk / 1024 / fk
  }' "$csv"
