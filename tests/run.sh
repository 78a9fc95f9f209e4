#!/usr/bin/env bash
# run.sh - the one test command: installs what is missing, builds a plain and
# a sanitizer (ASan + UBSan) build, runs every unit test and every system test
# against both, runs each fuzz target for a bounded time, and ends with
# exactly one line "N passed, N failed[, N skipped]".
#
# Options (environment): NVCACHE_TEST_BUILDS="build build-san" (which builds
# run the tests), NVCACHE_FUZZ_SECONDS=12, NVCACHE_TESTS=<regex> (run only the
# system tests whose name matches), NVCACHE_TEST_EVERY_BUILD=1 (run the long
# tests that t_sanitizer_only keeps to the sanitizer build in every build).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log=$root/build-logs
mkdir -p "$log"

"$root/tools/install-deps.sh" || { echo "0 passed, 1 failed"; exit 1; }

passed=0 failed=0 skipped=0
failures=()
pass() { passed=$((passed+1)); echo "PASS $1"; }
fail() { failed=$((failed+1)); failures+=("$1"); echo "FAIL $1"; }
skip() { skipped=$((skipped+1)); echo "SKIP $1: $2"; }

build() {  # build DIR [meson args...]
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >"$log/setup-$dir.log" 2>&1 || { cat "$log/setup-$dir.log"; return 1; }
  fi
  ninja -C "$dir" >"$log/ninja-$dir.log" 2>&1 || { tail -50 "$log/ninja-$dir.log"; return 1; }
}

builds=${NVCACHE_TEST_BUILDS:-build build-san}
export NVCACHE_RUN_BUILDS=$builds   # (t_sanitizer_only)
for b in $builds; do
  case $b in
    build)     args=(--werror) ;;
    build-san) args=(--werror -Db_sanitize=address,undefined -Db_lundef=false) ;;
    *)         args=(--werror) ;;
  esac
  if build "$b" "${args[@]}"; then pass "compile:$b"; else fail "compile:$b"; continue; fi

  # Unit tests, one result per test program.
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  meson test -C "$b" --suite unit --print-errorlogs >"$log/unit-$b.log" 2>&1
  while read -r name res; do
    case $res in
      OK) pass "unit:$b:$name" ;;
      SKIP) skip "unit:$b:$name" "skipped by the test" ;;
      *) fail "unit:$b:$name"; grep -A30 "$name" "$log/unit-$b.log" | tail -40 ;;
    esac
  done < <(grep -E '^ *[0-9]+/[0-9]+ ' "$log/unit-$b.log" | sed -E 's/^ *[0-9]+\/[0-9]+ +([^ ]+) +([A-Z]+).*/\1 \2/')

  # System tests: real processes, as root.
  for t in tests/system/*.sh; do
    [ "$(basename "$t")" = lib.sh ] && continue
    name=$(basename "$t" .sh)
    [[ -n ${NVCACHE_TESTS:-} && ! $name =~ ${NVCACHE_TESTS} ]] && continue
    out=$log/system-$b-$name.log
    start=$SECONDS
    NVCACHE_BUILD=$b bash "$t" >"$out" 2>&1
    rc=$?
    case $rc in
      0) pass "system:$b:$name ($((SECONDS-start))s)" ;;
      77) skip "system:$b:$name" "$(grep -h 'SKIP:' "$out" | tail -1 | sed 's/.*SKIP: //')" ;;
      *) fail "system:$b:$name (exit $rc)"; tail -30 "$out" ;;
    esac
  done
done

# Fuzz targets: libFuzzer, bounded time each.
fuzz_s=${NVCACHE_FUZZ_SECONDS:-12}
if [ "$fuzz_s" -gt 0 ] && [ -n "$(ls tests/fuzz/*.c 2>/dev/null)" ]; then
  if CC=clang build build-fuzz -Dfuzz=true -Dtests=false -Db_lundef=false; then
    for f in build-fuzz/tests/fuzz/fuzz_*; do
      [ -f "$f" ] && [ -x "$f" ] || continue    # not meson's .p dirs
      name=$(basename "$f")
      corpus=tests/fuzz/corpus/$name
      mkdir -p "$log/corpus-$name"
      args=("$log/corpus-$name")
      [ -d "$corpus" ] && args+=("$corpus")
      if "$f" -max_total_time="$fuzz_s" -rss_limit_mb=1024 "${args[@]}" >"$log/$name.log" 2>&1; then
        pass "fuzz:$name"
      else
        fail "fuzz:$name"; tail -30 "$log/$name.log"
      fi
    done
  else
    fail "compile:build-fuzz"
  fi
fi

if [ ${#failures[@]} -gt 0 ]; then
  echo "failed: ${failures[*]}"
fi
echo "logs: $log"
if [ $skipped -gt 0 ]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
[ $failed -eq 0 ]
