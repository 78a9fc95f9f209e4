#!/usr/bin/env bash
# run.sh - run every benchmark (tests/bench/*.sh, or those matching $1) side
# by side in one run, keep their full output, and print the BENCH summary
# lines at the end. A benchmark never fails the run because a number is low;
# one that crashes is reported.
#
#   tests/bench/run.sh [REGEX]        (NVCACHE_BUILD=build by default)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
"$root/tools/install-deps.sh" --bench
export NVCACHE_BUILD=${NVCACHE_BUILD:-build}
[ -f "$NVCACHE_BUILD/build.ninja" ] || meson setup "$NVCACHE_BUILD" --buildtype=release >/dev/null
ninja -C "$NVCACHE_BUILD" >/dev/null || exit 1
out=$root/tests/bench/out/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
for b in tests/bench/*.sh; do
  name=$(basename "$b" .sh)
  [ "$name" = run ] && continue
  [ $# -gt 0 ] && ! [[ $name =~ $1 ]] && continue
  echo "== $name" >&2
  if ! T_TIMEOUT=1800 bash "$b" >"$out/$name.log" 2>&1; then
    echo "   $name exited non-zero; see $out/$name.log" >&2
  fi
  grep '^BENCH ' "$out/$name.log" >&2 || true
done
echo "== summary (full logs in $out)"
grep -h '^BENCH ' "$out"/*.log | tee "$out/summary.txt"
