#!/usr/bin/env bash
# mpi_ior.sh - tests/mpi/ior (the program of tests/bench/fs_cluster.sh)
# reads back what each layout wrote, and fails when a byte differs: every
# layout on a plain directory, then a byte changed between a --keep write
# and a --read-only read must fail the run with its count; bad arguments
# are refused.
. "$(dirname "$0")/lib.sh"
t_require_cmd mpiexec
ior=$(t_bin ior) || exit 1
export HYDRA_LAUNCHER=fork
# In the sanitizer build: mpich keeps memory to the end by design, which
# LeakSanitizer would report on every run; the rest of ASan stays on.
# (ldd's whole output looked at: `ldd | grep -q` under pipefail fails
# when grep exits before ldd has written its last line)
case "$(ldd "$ior")" in *libasan*) export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" ;; esac
d=$T_DIR/d
mkdir -p "$d"

for args in "--layout n1 --xfer 1048576" "--layout nn --xfer 1048576" "--layout n1 --xfer 47008"; do
  # shellcheck disable=SC2086
  out=$(timeout 60 mpiexec -n 4 "$ior" $args --mib 2 --seed 3 "$d" "$d" "$d" "$d" 2>&1) ||
    t_fail "ior $args: $out"
  echo "$out" | grep -q '^ior read .* wrong_bytes 0$' || t_fail "ior $args printed: $out"
  [ -z "$(ls -A "$d")" ] || t_fail "ior $args left files: $(ls "$d")"
done

timeout 60 mpiexec -n 4 "$ior" --mib 2 --seed 4 --keep "$d" "$d" "$d" "$d" >/dev/null ||
  t_fail "ior --keep failed"
[ "$(stat -c %s "$d/ior.dat")" = $((8 << 20)) ] || t_fail "the shared file is not 4 x 2 MiB"
printf 'x' | dd of="$d/ior.dat" bs=1 seek=$((3 << 20)) conv=notrunc status=none
out=$(timeout 60 mpiexec -n 4 "$ior" --mib 2 --seed 4 --read-only "$d" "$d" "$d" "$d" 2>&1) &&
  t_fail "a changed byte did not fail the run: $out"
echo "$out" | grep -q 'wrong_bytes 1$' || t_fail "a changed byte not counted once: $out"

out=$(timeout 60 mpiexec -n 1 "$ior" --xfer 47007 "$d" 2>&1) && t_fail "--xfer 47007 accepted"
echo "$out" | grep -q 'multiple of 8' || t_fail "--xfer 47007 refused without saying why: $out"
echo "mpi_ior: ok"
