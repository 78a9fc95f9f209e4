#!/usr/bin/env bash
# sim_live_zipf.sh - the tiering policies live, in nvswapd's tiered store: a
# skewed (zipf 1.2) random workload through the NBD server (fio's nbd
# engine) after a sequential fill that leaves MRAM full of cold pages. With
# adaptive the hot pages must end up in MRAM (hit rate over the zipf phase
# well above lru's, whose placement is first come, first served).
. "$(dirname "$0")/lib.sh"
T_TIMEOUT=${T_TIMEOUT:-150}
t_require_cmd fio
nvswapd=$NVCACHE_BUILD/nbd/nvswapd
[ -x "$nvswapd" ] || t_skip "nvswapd not built in $NVCACHE_BUILD"
fio --enghelp 2>/dev/null | grep -w nbd >/dev/null || t_skip "fio has no nbd engine"   # (not grep -q: fio would get SIGPIPE, and pipefail says no)
ctl=$(t_bin nvcachectl)
export NVCACHE_RUN_DIR=$T_DIR/run
ios=${SIM_LIVE_IOS:-100000}

# run POLICY: prints "hit_rate migrations" of the zipf phase.
run() {
  local pol=$1 sock=$T_DIR/$1.sock name=simz$1 pid
  "$nvswapd" --size 64M --mram 1M --dram 4M --flash "$T_DIR/$pol.flash" \
    --nvram "$T_SHM/$pol.mram" --policy "$pol" --unix "$sock" --name "$name" \
    -f >"$T_DIR/$pol.log" 2>&1 &
  pid=$!
  t_cleanup "kill $pid 2>/dev/null"
  t_wait 10 test -S "$sock" || t_fail "nvswapd ($pol) did not start: $(tail -3 "$T_DIR/$pol.log")"
  local uri="nbd+unix:///$name?socket=$sock"
  fio --name=fill --ioengine=nbd --uri="$uri" --rw=write --bs=64k --size=64M \
    --iodepth=4 >"$T_DIR/$pol.fill" 2>&1 || t_fail "fio fill ($pol): $(tail -3 "$T_DIR/$pol.fill")"
  "$ctl" stats --swap "$name" >"$T_DIR/$pol.s0" || t_fail "no stats from nvswapd"
  fio --name=zipf --ioengine=nbd --uri="$uri" --rw=randrw --rwmixread=70 --bs=4k \
    --size=64M --io_size=4G --number_ios="$ios" --random_distribution=zipf:1.2 \
    --randseed=7 --iodepth=4 >"$T_DIR/$pol.zipf" 2>&1 || t_fail "fio zipf ($pol): $(tail -3 "$T_DIR/$pol.zipf")"
  "$ctl" stats --swap "$name" >"$T_DIR/$pol.s1" || t_fail "no stats from nvswapd"
  kill "$pid"; wait "$pid" 2>/dev/null
  awk -F': ' '
    FNR == 1 { f++ }
    { v[f, $1] = $2 }
    END {
      a0 = v[1, "page_reads"] + v[1, "page_writes"]; a1 = v[2, "page_reads"] + v[2, "page_writes"]
      m0 = v[1, "mram_hit_rate"] * a0; m1 = v[2, "mram_hit_rate"] * a1
      if (a1 <= a0) exit 1
      printf "%.4f %d\n", (m1 - m0) / (a1 - a0), v[2, "migrations_mram_dram"] - v[1, "migrations_mram_dram"]
    }' "$T_DIR/$pol.s0" "$T_DIR/$pol.s1"
}

lru=$(run lru) || t_fail "lru run: no usable stats"
ada=$(run adaptive) || t_fail "adaptive run: no usable stats"
t_log "zipf phase MRAM hit rate: lru ${lru% *}, adaptive ${ada% *} (${ada#* } migrations)"
grep -q "^mram_hit_rate:" "$T_DIR/adaptive.s1" || t_fail "stats lack mram_hit_rate"
awk -v l="${lru% *}" -v a="${ada% *}" 'BEGIN { exit !(a >= 0.5 && a >= 2 * l) }' ||
  t_fail "hot pages did not reach MRAM: adaptive ${ada% *} vs lru ${lru% *}"
[ "${ada#* }" -gt 0 ] || t_fail "adaptive made no migrations"
echo "sim_live_zipf: ok"
