#!/usr/bin/env bash
# make-traces.sh - build the trace kernels, run each under valgrind lackey
# and convert the stream to nvt on the fly (no huge text files), then write
# the memory-level version (the L2's misses, what nvsim's policies see).
#
# usage: tests/traces/make-traces.sh [--small] [OUTDIR]
#   --small   the sizes shipped in tests/traces/ (seconds each)
#   default   the sizes docs/tiering.md uses (minutes each)
# Output per kernel K: OUTDIR/K.nvt.gz (every load/store + instruction
# count) and OUTDIR/K.l2.nvt.gz (memory-level, nvsim reads it ~10x faster
# and gives identical results).
# Needs: cc, valgrind, a built nvsim (NVCACHE_BUILD, default ./build).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
small=0
if [ "${1:-}" = --small ]; then small=1; shift; fi
out=${1:-$root/build-traces}
build=${NVCACHE_BUILD:-$root/build}
case "$build" in /*) ;; *) build=$root/$build ;; esac
nvsim=$build/tools/nvsim
[ -x "$nvsim" ] || { echo "make-traces: build nvsim first ($nvsim)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "make-traces: needs valgrind" >&2; exit 1; }
mkdir -p "$out"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT

if [ $small = 1 ]; then
  # name  args                 (footprint, data accesses)
  sizes=("cg 32768 8 6"        # ~6 MiB,  ~9 M
         "mg 32 4"             # ~0.6 MiB
         "lu 384 8 6"          # ~1.2 MiB
         "gups 19 200000")     # ~4 MiB,  ~0.7 M
else
  sizes=("cg 131072 8 6"       # ~39 MiB, ~35 M
         "mg 64 2"             # ~4.9 MiB, ~10 M
         "lu 768 8 4"          # ~4.5 MiB, ~18 M
         "gups 21 1000000")    # ~16 MiB, ~4 M
fi

for line in "${sizes[@]}"; do
  set -- $line
  k=$1; shift
  cc -O2 -g -o "$bin/$k" "$here/kernels/$k.c" -lm
  start=$SECONDS
  # lackey writes its trace to fd 9, the program's output goes nowhere.
  valgrind --tool=lackey --trace-mem=yes --log-fd=9 "$bin/$k" "$@" \
      9>&1 >/dev/null 2>/dev/null | "$nvsim" convert - "$out/$k.nvt.gz"
  "$nvsim" convert "$out/$k.nvt.gz" "$out/$k.l2.nvt.gz" --l2
  echo "make-traces: $k $* -> $out/$k.nvt.gz, $k.l2.nvt.gz ($((SECONDS - start)) s)"
done
