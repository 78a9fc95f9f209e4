#!/usr/bin/env bash
# nbd_clients.sh - nvswapd with real NBD clients: nbdinfo (export, size,
# block sizes), nbdinfo --list, nbd-client -l over TCP, an nbdcopy round
# trip of 256 MiB of random data, and the control socket's counters.
T_TIMEOUT=${T_TIMEOUT:-120}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd nbdinfo nbdcopy nbd-client python3

sock=$T_DIR/nbd.sock
nbd_start "$sock" tclients --size 512M --mram 16M
uri="nbd+unix:///tclients?socket=$sock"

info=$(nbdinfo "$uri") || t_fail "nbdinfo failed"
echo "$info"
grep -q 'export-size: 536870912' <<<"$info" || t_fail "nbdinfo: wrong size"
grep -q 'block_size_minimum: 512' <<<"$info" || t_fail "nbdinfo: min block"
grep -q 'block_size_preferred: 4096' <<<"$info" || t_fail "nbdinfo: pref block"
grep -q 'block_size_maximum: 33554432' <<<"$info" || t_fail "nbdinfo: max block"
grep -q 'can_trim: true' <<<"$info" || t_fail "nbdinfo: no trim"
grep -q 'can_multi_conn: true' <<<"$info" || t_fail "nbdinfo: no multi-conn"
# The default export "" selects the one export too.
nbdinfo --size "nbd+unix:///?socket=$sock" | grep -qx 536870912 ||
  t_fail "default export not served"
# An unknown export is refused.
nbdinfo "nbd+unix:///nosuch?socket=$sock" >/dev/null 2>&1 &&
  t_fail "unknown export accepted"

list=$(nbdinfo --list "nbd+unix:///?socket=$sock") || t_fail "nbdinfo --list"
grep -q 'export="tclients"' <<<"$list" || t_fail "nbdinfo --list: $list"

# TCP, and the reference client's listing.
port=$(nbd_free_port)
nbd_start - ttcp --size 64M --mram 8M --listen 127.0.0.1:$port
out=$(timeout 10 nbd-client -l 127.0.0.1 "$port" 2>&1) || t_fail "nbd-client -l: $out"
echo "$out"
grep -qx ttcp <<<"$out" || t_fail "nbd-client -l does not list ttcp"
nbdinfo --size "nbd://127.0.0.1:$port/ttcp" | grep -qx 67108864 ||
  t_fail "nbdinfo over TCP"

# nbdcopy round trip (several connections: multi-conn).
head -c 256M /dev/urandom >"$T_DIR/in"
nbdcopy "$T_DIR/in" "$uri" || t_fail "nbdcopy to nvswapd"
nbdcopy "$uri" "$T_DIR/out" || t_fail "nbdcopy from nvswapd"
a=$(sha256sum <"$T_DIR/in" | cut -d' ' -f1)
b=$(head -c 256M "$T_DIR/out" | sha256sum | cut -d' ' -f1)
[ "$a" = "$b" ] || t_fail "nbdcopy round trip: checksums differ"
# The rest of the export was never written: zeros.
tail -c 256M "$T_DIR/out" | cmp -s - <(head -c 256M /dev/zero) ||
  t_fail "never-written half does not read as zeros"

w=$(nbd_stat tclients nbd_bytes_written)
[ "$w" -ge $((256 << 20)) ] || t_fail "stats: nbd_bytes_written $w"
used=$(( $(nbd_stat tclients mram_pages) + $(nbd_stat tclients dram_pages) ))
[ "$used" -eq 65536 ] || t_fail "stats: $used pages in memory, want 65536"

# TRIM gives the pages back.
python3 "$(dirname "$0")/nbd_raw.py" "$sock" tclients trim 0 $((128 << 20)) ||
  t_fail "trim"
[ "$(python3 "$(dirname "$0")/nbd_raw.py" "$sock" tclients sum $((64 << 20)) 4096)" = \
  "$(head -c 4096 /dev/zero | sha256sum | cut -d' ' -f1)" ] ||
  t_fail "trimmed page does not read as zeros"
used=$(( $(nbd_stat tclients mram_pages) + $(nbd_stat tclients dram_pages) ))
[ "$used" -eq 32768 ] || t_fail "after TRIM of 128 MiB: $used pages in memory, want 32768"

# Connection slots: with --max-conns 2 a third client waits in the backlog
# (it is not refused) and is served once a slot frees up.
nbd_start "$T_DIR/m.sock" tmax --size 16M --mram 4M --max-conns 2 --threads 2
python3 - "$T_DIR/m.sock" <<'PY' || t_fail "connection slots"
import socket, sys, time
def conn():
    s = socket.socket(socket.AF_UNIX); s.settimeout(0.5); s.connect(sys.argv[1]); return s
a, b = conn(), conn()
assert len(a.recv(18)) == 18 and len(b.recv(18)) == 18
c = conn()
try:
    c.recv(18); raise SystemExit("third client served beyond --max-conns")
except socket.timeout:
    pass
a.close()
c.settimeout(5)
assert len(c.recv(18)) == 18, "third client not served after a slot freed"
PY
echo "ok"
