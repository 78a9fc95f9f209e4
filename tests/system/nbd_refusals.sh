#!/usr/bin/env bash
# nbd_refusals.sh - setups nvswapd must refuse, quickly, with a message and
# a non-zero exit, leaving behind nothing it created, and the files it was
# pointed at untouched:
#  - --unix PATH where PATH is not a socket (it used to be deleted), or a
#    live server's socket; a dead server's socket is still replaced;
#  - --listen with a port over 65535 (it used to wrap: 99999 listened on
#    34463); port 0 picks a free port, and the log says which;
#  - a store that cannot fit in this machine's RAM (--size 8T, flat or
#    tiered: nvswapd used to grow until the OOM killer ended it);
#  - a flash file refused on tmpfs leaves no flash nor MRAM file behind;
#  - one file in two roles (--nvram and --flash, --flash and --trace-out
#    under two hard-linked names): the store wrote swapped pages over its
#    own MRAM or log and corrupted them silently;
#  - and after a clean stop the flash file's swapped pages are not left on
#    disk: a file the run created is removed, one it found is emptied;
#  - options the chosen store would ignore (--mram, --dram, --policy,
#    --flash with --store flat; the tier options with --store remote): they
#    were dropped without a word, and a flat store's stop warned about a
#    flash file it never had;
#  - an export name nvcachectl cannot reach: "" (it served, as swap-default,
#    while nvcachectl stats --swap "" asked swap-.sock), control
#    characters, or one too long for its control socket's path (refused only
#    once the store was up, blaming "another nvswapd").
T_TIMEOUT=${T_TIMEOUT:-120}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd_common.bash"
t_require_cmd python3 timeout
bin=$(t_bin nvswapd)
raw=$(dirname "$0")/nbd_raw.py
export NVCACHE_RUN_DIR=$T_DIR/run

# refused NAME LOGPATTERN nvswapd-options...: the start fails within 30 s,
# (exit 1 or 2, not a signal), and the log says why.
refused() {
  local name=$1 pat=$2 rc; shift 2
  timeout 30 "$bin" -f --name "$name" --nvram "$T_SHM/$name.mram" "$@" \
    >"$T_DIR/$name.log" 2>&1
  rc=$?
  case $rc in
    1|2) ;;
    0) t_fail "$name: nvswapd started: $*" ;;
    *) t_fail "$name: nvswapd exited with $rc (killed?): $(tail -3 "$T_DIR/$name.log")" ;;
  esac
  grep -q -- "$pat" "$T_DIR/$name.log" ||
    t_fail "$name: no clear message (want '$pat'): $(tail -3 "$T_DIR/$name.log")"
  grep -E 'error|bad' "$T_DIR/$name.log" | tail -1
}

# refused_clean NAME LOGPATTERN nvswapd-options...: refused, and no file
# left behind, in $T_DIR (but the logs), $T_SHM or the run dir.
t_files() { find "$T_DIR" "$T_SHM" ! -name '*.log' | sort; }
refused_clean() {
  local before after
  before=$(t_files)
  refused "$@"
  after=$(t_files)
  [ "$before" = "$after" ] ||
    t_fail "$1: a refused start left files: $(comm -13 <(echo "$before") <(echo "$after"))"
  grep -h nvswapd: "$T_DIR/$1.log" | tail -1
}

echo "== options the chosen store would ignore: refused"
refused_clean tflatpol '--policy.*needs --store tiered' --size 64M --store flat \
  --unix "$T_DIR/f.sock" --policy lowpower
refused_clean tflatmram '--mram.*needs --store tiered' --size 64M --store flat \
  --unix "$T_DIR/f.sock" --mram 1M
refused_clean tflatdram '--dram.*needs --store tiered' --size 64M --store flat \
  --unix "$T_DIR/f.sock" --dram 4M
refused_clean tflatflash '--flash.*needs --store tiered' --size 64M --store flat \
  --unix "$T_DIR/f.sock" --flash "$T_DIR/x.flash"
# The whole command of the report that found it.
refused_clean tflatall 'needs --store tiered' --size 64M --mram 1M --dram 4M \
  --policy lowpower --store flat --flash "$T_DIR/x.flash" --unix "$T_DIR/f.sock"
# --store remote: no tiers nor policy (its --flash is its spill file, used:
# cluster_swap.sh). A cluster of one node nobody runs: the refusal comes
# before any of it is looked at.
printf 'secret secret\nnode 1 127.0.0.1:%s\n' "$(nbd_free_port)" >"$T_DIR/one.conf"
refused_clean tremotepol '--policy.*needs --store tiered' --size 16M --store remote \
  --cluster "$T_DIR/one.conf" --node 1 --unix "$T_DIR/f.sock" --policy lru
refused_clean tremotemram '--mram.*needs --store tiered' --size 16M --store remote \
  --cluster "$T_DIR/one.conf" --node 1 --unix "$T_DIR/f.sock" --mram 4M
refused_clean tremotedram '--dram.*needs --store tiered' --size 16M --store remote \
  --cluster "$T_DIR/one.conf" --node 1 --unix "$T_DIR/f.sock" --dram 4M
# ... and the cluster's options without --store remote (they were ignored:
# a device meant for the cluster kept its pages in local RAM).
refused_clean ttiercl '--cluster.*needs --store remote' --size 16M \
  --cluster "$T_DIR/one.conf" --unix "$T_DIR/f.sock"
refused_clean tflatnode '--node.*needs --store remote' --size 16M --store flat \
  --node 1 --unix "$T_DIR/f.sock"
refused_clean ttierred '--redundancy.*needs --store remote' --size 16M \
  --redundancy parity --unix "$T_DIR/f.sock"

echo "== export names nvcachectl could not reach: refused"
refused_clean tnoname 'give a name' --size 16M --mram 4M --unix "$T_DIR/f.sock" --name ""
refused_clean tctlname 'control characters' --size 16M --mram 4M --unix "$T_DIR/f.sock" \
  --name "$(printf 'a\nb')"
refused_clean tlongname 'too long for a Unix socket' --size 16M --mram 4M \
  --unix "$T_DIR/f.sock" --name "$(printf 'n%.0s' $(seq 120))"

echo "== --unix on a path that is not a live server's socket"
echo "precious data" >"$T_DIR/notasock"
refused tfile 'not a socket' --size 16M --unix "$T_DIR/notasock"
[ "$(cat "$T_DIR/notasock" 2>/dev/null)" = "precious data" ] ||
  t_fail "--unix deleted or changed the regular file at its path"
mkdir "$T_DIR/adir"
refused tdir 'not a socket' --size 16M --unix "$T_DIR/adir"
[ -d "$T_DIR/adir" ] || t_fail "--unix removed the directory at its path"
# A socket left by a dead server (bound, closed, never unlinked): replaced.
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' \
  "$T_DIR/stale.sock"
[ -S "$T_DIR/stale.sock" ] || t_fail "no stale socket made"
nbd_start "$T_DIR/stale.sock" tstale --size 16M --mram 4M
python3 "$raw" "$T_DIR/stale.sock" tstale sum 0 4096 >/dev/null ||
  t_fail "nvswapd on a replaced stale socket does not serve"
grep -q 'stale socket' "$T_DIR/nvswapd-tstale.log" || t_fail "stale socket removal not logged"
# A live server's socket: refused, and the live server goes on.
refused tlive 'another server' --size 16M --unix "$T_DIR/stale.sock"
python3 "$raw" "$T_DIR/stale.sock" tstale sum 0 4096 >/dev/null ||
  t_fail "the live server stopped serving after a refused second start"

echo "== a second nvswapd for the same export name"
# It would open, and at its exit remove, the first one's MRAM file (same
# default path): refused first, and the first keeps its file and its pages.
head -c 8M /dev/urandom >"$T_DIR/pat"
python3 "$raw" "$T_DIR/stale.sock" tstale write "$T_DIR/pat" || t_fail "cannot write the pattern"
want=$(sha256sum <"$T_DIR/pat" | cut -d' ' -f1)
refused tstale 'another nvswapd' --size 16M --mram 4M --unix "$T_DIR/other.sock"
[ -e "$T_SHM/tstale.mram" ] || t_fail "a refused second start removed the running one's MRAM file"
[ "$(python3 "$raw" "$T_DIR/stale.sock" tstale sum 0 8388608)" = "$want" ] ||
  t_fail "the running nvswapd's pages changed after a refused second start"

echo "== --listen ports"
refused tport 'port' --size 16M --listen 127.0.0.1:99999
refused tport2 'port' --size 16M --listen 127.0.0.1:80x
refused tport3 'port' --size 16M --listen 127.0.0.1:-1
nbd_start - tport0 --size 16M --mram 4M --listen 127.0.0.1:0
where=$(nbd_stat tport0 listen)
port=${where##*:}
case $port in ''|0|*[!0-9]*) t_fail "port 0: stats say '$where', not the real port" ;; esac
grep -q "listening on tcp:127.0.0.1:$port:" "$T_DIR/nvswapd-tport0.log" ||
  t_fail "port 0: the log does not say the real port $port"
python3 - "$port" <<'PY' || t_fail "nothing serves NBD on the logged port $port"
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
magic, = struct.unpack(">Q", s.recv(8, socket.MSG_WAITALL))
assert magic == 0x4E42444D41474943
PY
echo "port 0 -> $port"

echo "== stores that cannot fit in RAM: refused at once, without the memory"
# In a memory cgroup where there is one: a regression is then OOM-killed
# there (exit 137, a failure here), not on the whole machine.
cgroot=/sys/fs/cgroup/memory cg=
if [ -w "$cgroot/cgroup.procs" ]; then
  cg=$cgroot/nvtest-nbd-refusals-$$
  mkdir "$cg" || t_fail "cannot create $cg"
  t_cleanup "for p in \$(cat $cg/cgroup.procs); do kill -9 \$p; done; sleep 0.2; rmdir $cg"
  echo 1G >"$cg/memory.limit_in_bytes" || t_fail "memory.limit_in_bytes"
fi
t_require_cmd /usr/bin/time
for args in "--store flat" "" "--mram 0 --dram 64M --flash $T_DIR/big.flash"; do
  # shellcheck disable=SC2086  # $args: several options
  /usr/bin/time -f '%M' -o "$T_DIR/rss" sh -c \
    '[ -z "$1" ] || echo $$ >"$1/cgroup.procs" || exit 3; shift; exec "$@"' \
    sh "$cg" timeout 30 "$bin" -f --name tbig --nvram "$T_SHM/tbig.mram" \
      --unix "$T_DIR/big.sock" --size 8T $args >"$T_DIR/tbig.log" 2>&1
  rc=$?
  rss=$(tail -1 "$T_DIR/rss")
  echo "--size 8T $args: exit $rc, max RSS $rss KiB"
  [ "$rc" -eq 1 ] || t_fail "--size 8T $args: exit $rc: $(tail -2 "$T_DIR/tbig.log")"
  grep -q "RAM" "$T_DIR/tbig.log" || t_fail "--size 8T $args: no message: $(tail -2 "$T_DIR/tbig.log")"
  grep 'error' "$T_DIR/tbig.log" | tail -1
  [ "$rss" -lt 262144 ] || t_fail "--size 8T $args: $rss KiB resident before refusing"
  [ -e "$T_DIR/big.flash" ] && t_fail "--size 8T $args: flash file left behind"
done
# An export larger than RAM is fine when what must be in RAM fits: here
# RAM + 4 GiB, with 64 MiB of DRAM and the rest in the flash file (its
# per-page tables take ~2 % of the export).
ramkb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
big=$(( ramkb / 1048576 + 4 ))G
nbd_start "$T_DIR/big2.sock" tbig2 --size "$big" --mram 0 --dram 64M \
  --flash "$T_DIR/big2.flash"
python3 "$raw" "$T_DIR/big2.sock" tbig2 sum 0 4096 >/dev/null ||
  t_fail "an export of $big (more than RAM) with a flash file does not serve"
echo "--size $big (more than RAM) with --flash: serves"
kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
[ -e "$T_DIR/big2.flash" ] && t_fail "the flash file this run created was left behind at its stop"
grep -q "removed flash file" "$T_DIR/nvswapd-tbig2.log" ||
  t_fail "the stop did not log the flash file's removal"

echo "== a flash file that was there before: emptied at the stop"
printf 'x%.0s' $(seq 100) >"$T_DIR/pre.flash"
nbd_start "$T_DIR/pre.sock" tpre --size 16M --mram 0 --dram 1M \
  --flash "$T_DIR/pre.flash"
head -c 8M /dev/urandom >"$T_DIR/8m"
python3 "$raw" "$T_DIR/pre.sock" tpre write "$T_DIR/8m" >/dev/null ||
  t_fail "writing 8 MiB through 1 MiB of DRAM failed"
[ "$(stat -c %b "$T_DIR/pre.flash")" -gt 0 ] || t_fail "nothing was spilled to the flash file"
kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
[ -e "$T_DIR/pre.flash" ] || t_fail "a flash file the run did not create was removed"
[ "$(stat -c %s "$T_DIR/pre.flash")" = 0 ] ||
  t_fail "the swapped pages stayed in the flash file after the stop ($(stat -c %s "$T_DIR/pre.flash") bytes)"
echo "flash files: removed (created) or emptied (found) at the stop"

echo "== nvcachectl status with the NBD socket in the run dir (as the quick start has it)"
# status asked every *.sock there, the NBD socket too, and printed its
# NBD greeting as a daemon's status.
mkdir -p "$NVCACHE_RUN_DIR"
nbd_start "$NVCACHE_RUN_DIR/nvswapd.sock" tq --size 16M --mram 32M
# ... and an --mram over the export says it is capped (it was silent).
grep -q "MRAM (--mram 32.0 MiB) is larger than the export (16.0 MiB): capped" \
  "$T_DIR/nvswapd-tq.log" || t_fail "--mram over --size: no log line that it is capped"
"$(t_bin nvcachectl)" status >"$T_DIR/status.out" 2>&1 || t_fail "nvcachectl status failed"
grep -Eq "^swap +tq +$NBD_PID " "$T_DIR/status.out" || t_fail "status does not show the daemon: $(cat "$T_DIR/status.out")"
grep -q -e "nvswapd" -e NBDMAGIC "$T_DIR/status.out" && t_fail "status asked the NBD socket: $(cat "$T_DIR/status.out")"
kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null

echo "== a flash file another nvswapd uses"
# A second store on a live one's flash file overwrote its pages, and its
# stop emptied them: refused, and the first one's data reads back.
nbd_start "$T_DIR/sh.sock" tsh --size 16M --mram 0 --dram 1M --flash "$T_DIR/shared.flash"
python3 "$raw" "$T_DIR/sh.sock" tsh write "$T_DIR/8m" >/dev/null || t_fail "writing to the first store failed"
refused tsh2 'in use by another process' --size 16M --mram 0 --dram 1M --unix "$T_DIR/sh2.sock" \
  --flash "$T_DIR/shared.flash"
want=$(sha256sum <"$T_DIR/8m" | cut -d' ' -f1)
got=$(python3 "$raw" "$T_DIR/sh.sock" tsh sum 0 8388608)
[ "${got##* }" = "$want" ] || t_fail "the first store's pages changed after a refused second start on its flash file ($got)"
kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null

echo "== one file in two roles"
refused tsame 'same file' --size 16M --mram 4M --dram 4M --unix "$T_DIR/s.sock" \
  --nvram "$T_DIR/same.f" --flash "$T_DIR/same.f"
[ -e "$T_DIR/same.f" ] && t_fail "a refused start created the file it was refused for"
echo keep >"$T_DIR/log1"
ln "$T_DIR/log1" "$T_DIR/log2"
refused tsame2 'same file' --size 16M --mram 4M --dram 4M --unix "$T_DIR/s.sock" \
  --flash "$T_DIR/log1" --trace-out "$T_DIR/./log2"
[ "$(cat "$T_DIR/log1")" = keep ] || t_fail "a refused start changed the file given twice"

echo "== a refused start leaves nothing it created"
refused ttmpfs 'tmpfs' --size 64M --mram 4M --dram 4M \
  --unix "$T_DIR/t.sock" --flash "$T_SHM/tmpfs.flash"
[ -e "$T_SHM/tmpfs.flash" ] && t_fail "the refused flash file on tmpfs was left behind"
[ -e "$T_SHM/ttmpfs.mram" ] && t_fail "the MRAM file of a refused start was left behind"
# ... and a file that was there before stays.
echo keep >"$T_SHM/kept.flash"
refused tkept 'tmpfs' --size 64M --mram 4M --dram 4M \
  --unix "$T_DIR/t.sock" --flash "$T_SHM/kept.flash"
[ "$(cat "$T_SHM/kept.flash" 2>/dev/null)" = keep ] ||
  t_fail "a refused start removed or changed a flash file it did not create"
echo ok
