#!/usr/bin/env bash
# nbd_fio.sh - fio's nbd engine with verify=crc32c against nvswapd: random
# and sequential writes from several jobs (one connection each), read back
# and checked; first with every page in memory, then with MRAM + DRAM far
# smaller than the export so that pages spill to the flash file and come
# back (real copies between tiers). Also: a flash file on tmpfs is refused.
T_TIMEOUT=${T_TIMEOUT:-150}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd fio
fio --enghelp 2>/dev/null | grep -qw nbd || t_skip "fio has no nbd engine"

run_fio() {  # run_fio NAME SOCK SIZE_PER_JOB
  local name=$1 sock=$2 sz=$3
  cat >"$T_DIR/$name.fio" <<FIO
[global]
ioengine=nbd
uri=nbd+unix:///$name?socket=$sock
size=$sz
verify=crc32c
verify_fatal=1
verify_state_save=0
iodepth=16
[rand]
rw=randwrite
bs=4k
numjobs=3
offset_increment=$sz
[seq]
rw=write
bs=1m
offset=$((3 * ${sz%M}))M
[mixed]
rw=randwrite
bsrange=512-64k
bs_unaligned=0
offset=$((4 * ${sz%M}))M
FIO
  fio --output="$T_DIR/$name.out" "$T_DIR/$name.fio" ||
    { cat "$T_DIR/$name.out"; t_fail "fio against $name failed"; }
  grep -q 'verify' "$T_DIR/$name.out" && grep -i 'verify.*fail\|bad magic' "$T_DIR/$name.out" &&
    t_fail "fio verify errors on $name"
  grep -E 'err= ' "$T_DIR/$name.out" | grep -v 'err= 0' && t_fail "fio errors on $name"
  return 0
}

# 1. Everything in memory (MRAM + DRAM hold the export).
nbd_start "$T_DIR/a.sock" tfio --size 512M --mram 16M
run_fio tfio "$T_DIR/a.sock" 64M
[ "$(nbd_stat tfio nbd_request_errors)" -eq 0 ] || t_fail "request errors"

# 2. Memory is 1/8 of the export: pages go to flash and back.
nbd_start "$T_DIR/b.sock" tspill --size 256M --mram 4M --dram 28M \
  --flash "$T_DIR/flash"
run_fio tspill "$T_DIR/b.sock" 40M
for k in flash_writebacks flash_loads; do
  v=$(nbd_stat tspill $k)
  [ "${v:-0}" -gt 0 ] || t_fail "no $k with a store 8x smaller than the data"
done
[ "$(nbd_stat tspill flash_errors)" -eq 0 ] || t_fail "flash errors"
nbd_stat tspill flash_pages
"$(t_bin nvcachectl)" stats --swap tspill | grep -E 'pages:|flash|migr|hit'

# 3. A flash file on tmpfs is refused with a clear message.
if "$(t_bin nvswapd)" -f --size 64M --mram 4M --dram 4M --unix "$T_DIR/c.sock" \
     --name ttmpfs --nvram "$T_SHM/c.mram" --flash "$T_SHM/flash" \
     >"$T_DIR/c.log" 2>&1; then
  t_fail "nvswapd accepted a flash file on tmpfs"
fi
grep -q 'tmpfs' "$T_DIR/c.log" || t_fail "no clear message: $(cat "$T_DIR/c.log")"
# And a store smaller than the export without a flash file.
"$(t_bin nvswapd)" -f --size 64M --mram 4M --dram 4M --unix "$T_DIR/d.sock" \
   --name tsmall --nvram "$T_SHM/d.mram" >"$T_DIR/d.log" 2>&1 &&
  t_fail "nvswapd accepted MRAM + DRAM < size without flash"
grep -q -- '--flash' "$T_DIR/d.log" || t_fail "no clear message: $(cat "$T_DIR/d.log")"
echo ok
