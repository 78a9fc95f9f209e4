#!/usr/bin/env bash
# cluster_owner_clash.sh - two nvswapd started with the same --node and
# export name (a copied command line on a second machine) keep their
# pages under the same key on the nodes. The second one's start drops
# the first one's pages, and both counted page versions from 0, so the
# first device read the second one's pages as its own: 5,724 of 8,192
# pages wrong, without an error (a new user's tryout). Versions now start
# at a random base for each start: the first device gets EIO for those
# pages, never another device's bytes. A --node that is not a node of the
# cluster file (0, a typo) is refused.
T_TIMEOUT=${T_TIMEOUT:-120}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_common.bash"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd nbdcopy
PY="/usr/bin/python3 -I"
$PY -c 'import nbd' 2>/dev/null || t_skip "no python3 libnbd module (python3-libnbd) for $PY"

export NVCACHE_RUN_DIR=$T_DIR/run
declare -A pid
cluster_node_args() { echo --no-mlock; }
cluster_start 4 clash
nvswapd=$(t_bin nvswapd)

for bad in 0 abc 9 ""; do
  if timeout 20 "$nvswapd" -f --unix "$T_DIR/x.sock" --name x --size 16M --store remote \
       --cluster "$conf" --node "$bad" >"$T_DIR/x.log" 2>&1; then
    t_fail "nvswapd accepted --node '$bad'"
  fi
  grep -q -- "--node" "$T_DIR/x.log" || t_fail "--node '$bad': no clear message: $(cat "$T_DIR/x.log")"
done
t_log "--node 0, abc, 9 (not in the file) and '' refused"
# A size whose slot table alone exceeds this machine's RAM is refused
# before anything is allocated (--size 1T locked 20 GB of 24).
big=$(awk '/^MemTotal:/ { printf "%d", $2 / 1048576 * 205 + 1 }' /proc/meminfo)G
timeout 20 "$nvswapd" -f --unix "$T_DIR/x.sock" --name x --size "$big" --store remote \
  --cluster "$conf" --node 1 >"$T_DIR/x.log" 2>&1 && t_fail "nvswapd accepted --size $big"
grep -q "per-page tables alone" "$T_DIR/x.log" || t_fail "--size $big: $(cat "$T_DIR/x.log")"
t_log "--size $big (tables over RAM) refused"

# Device A, then device B with the same --node and name (another run dir,
# as on another machine).
nbd_start "$T_DIR/a.sock" swap --size 32M --store remote --cluster "$conf" --node 1 --redundancy mirror
a=$NBD_PID
head -c 32M /dev/urandom >"$T_DIR/dA"
head -c 32M /dev/urandom >"$T_DIR/dB"
nbdcopy "$T_DIR/dA" "nbd+unix:///swap?socket=$T_DIR/a.sock" || t_fail "write device A"
NVCACHE_RUN_DIR=$T_DIR/run2 "$nvswapd" -f --unix "$T_DIR/b.sock" --name swap --size 32M \
  --store remote --cluster "$conf" --node 1 --redundancy mirror --nvram "$T_SHM/b.mram" \
  >"$T_DIR/b.log" 2>&1 &
b=$!
t_cleanup "kill $b 2>/dev/null; wait $b 2>/dev/null"
t_wait 30 test -S "$T_DIR/b.sock" || t_fail "device B did not start: $(tail -3 "$T_DIR/b.log")"
sleep 1
nbdcopy "$T_DIR/dB" "nbd+unix:///swap?socket=$T_DIR/b.sock" || t_fail "write device B"

# Device A, page by page: its own bytes or an error, never B's.
read -r own eio theirs other < <($PY - "$T_DIR/a.sock" "$T_DIR/dA" "$T_DIR/dB" <<'PY'
import nbd, sys
sock, pa, pb = sys.argv[1:4]
A, B = open(pa, "rb").read(), open(pb, "rb").read()
h = nbd.NBD(); h.set_export_name("swap"); h.connect_unix(sock)
own = eio = theirs = other = 0
for p in range(len(A) // 4096):
    o = p * 4096
    try:
        d = h.pread(4096, o)
    except nbd.Error:
        eio += 1
        continue
    if d == A[o:o + 4096]: own += 1
    elif d == B[o:o + 4096]: theirs += 1
    else: other += 1
print(own, eio, theirs, other)
PY
)
t_log "device A after B started under its key: $own pages its own, $eio EIO, $theirs B's, $other other"
[ "${theirs:-x}" = 0 ] && [ "${other:-x}" = 0 ] ||
  t_fail "device A returned another device's bytes as its own ($theirs pages of B, $other other)"
[ $((own + eio)) = 8192 ] || t_fail "device A: $own + $eio pages of 8192"
# Each failed read is counted, but the log says so at most every 10 s (it
# was a line a page: 133,000 lines for 13,000 lost pages in a tryout).
errs=$(nbd_stat swap remote_read_errors)
[ "${errs:-0}" -ge "$eio" ] || t_fail "device A: $eio EIO but remote_read_errors ${errs:-?}"
lines=$(grep -c "remote swap: slot [0-9]* (version [0-9]*)" "$T_DIR/nvswapd-swap.log")
[ "$eio" = 0 ] || [ "$lines" -ge 1 ] || t_fail "device A: $eio EIO and no log line"
[ "$lines" -le 3 ] || t_fail "device A: $eio failed reads gave $lines log lines"
t_log "device A: $errs read errors counted, $lines log line(s)"
echo ok
