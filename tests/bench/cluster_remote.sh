#!/usr/bin/env bash
# cluster_remote.sh - what placing swap pages in other nodes' memory costs:
# fio (nbd engine, 4 KiB random writes and reads, iodepth 16) against
# nvswapd --store remote over three nvcached nodes on loopback, with
# redundancy none and mirror, side by side with nvswapd --store flat (the
# same NBD path with pages in local DRAM: the anchor). Also the synchronous
# page round trip of the client library alone (nvcache-client fill/verify).
# Loopback TCP on a shared 2-core machine: ratios matter, not absolutes.
T_TIMEOUT=${T_TIMEOUT:-600}
. "$(dirname "$0")/../system/lib.sh"
. "$(dirname "$0")/../system/nbd_common.bash"
. "$(dirname "$0")/../system/cluster_common.bash"
t_require_cmd fio python3

nvcached=$(t_bin nvcached) || exit 1
client=$(t_bin nvcache-client) || exit 1
export NVCACHE_RUN_DIR=$T_DIR/run
runtime=${BENCH_RUNTIME:-8}
size=256M

read -r -a ports < <(cluster_free_ports 4)
head -c 32 /dev/urandom | base64 >"$T_DIR/secret"
chmod 600 "$T_DIR/secret"
conf=$T_DIR/cluster.conf
{ echo "secret secret"
  for i in 1 2 3 4; do echo "node $i 127.0.0.1:${ports[$((i-1))]}"; done; } >"$conf"
for i in 1 2 3 4; do
  "$nvcached" --cluster "$conf" --node $i -f >"$T_DIR/node$i.log" 2>&1 &
  t_cleanup "kill ${!} 2>/dev/null"
done
alive3() { "$(t_bin nvcachectl)" stats --node "$1" 2>/dev/null | grep -qx 'nodes_alive: 3'; }
for i in 1 2 3 4; do t_wait 15 alive3 $i || t_fail "node $i not up"; done

# fio_iops URI RW -> IOPS
fio_iops() {
  fio --name=b --ioengine=nbd --uri="$1" --rw="$2" --bs=4k --iodepth=16 \
      --size="$size" --time_based --runtime="$runtime" --output-format=json \
      >"$T_DIR/fio.json" 2>"$T_DIR/fio.err" || { cat "$T_DIR/fio.err" >&2; echo 0; return; }
  python3 -c '
import json, sys
t = open(sys.argv[1]).read()   # the nbd engine prints a line before the JSON
j = json.loads(t[t.index("{"):])["jobs"][0]
print(int(j["write"]["iops"] + j["read"]["iops"]))' "$T_DIR/fio.json"
}

declare -A w r
for kind in flat none mirror; do
  sock=$T_DIR/$kind.sock
  if [ $kind = flat ]; then
    nbd_start "$sock" b$kind --size $size --store flat
  else
    nbd_start "$sock" b$kind --size $size --store remote --cluster "$conf" \
      --node 1 --redundancy $kind
  fi
  uri="nbd+unix:///b$kind?socket=$sock"
  w[$kind]=$(fio_iops "$uri" randwrite)
  r[$kind]=$(fio_iops "$uri" randread)
  echo "cluster_remote: $kind: randwrite ${w[$kind]} IOPS, randread ${r[$kind]} IOPS"
  kill "$NBD_PID"; wait "$NBD_PID" 2>/dev/null
done

ratio() { python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'{a/b:.3f}' if b else 'nan')" "$1" "$2"; }
for kind in none mirror; do
  echo "BENCH cluster_remote.$kind.randwrite_4k ${w[$kind]} IOPS vs nvswapd_flat ${w[flat]} IOPS ratio $(ratio "${w[$kind]}" "${w[flat]}")"
  echo "BENCH cluster_remote.$kind.randread_4k ${r[$kind]} IOPS vs nvswapd_flat ${r[flat]} IOPS ratio $(ratio "${r[$kind]}" "${r[flat]}")"
done

# One synchronous client, one page per round trip.
n=20000
t0=$(date +%s%N)
"$client" --cluster "$conf" --node 2 --owner 99 fill 0 $n >/dev/null || t_fail "fill"
t1=$(date +%s%N)
"$client" --cluster "$conf" --node 2 --owner 99 verify 0 $n >/dev/null || t_fail "verify"
t2=$(date +%s%N)
echo "BENCH cluster_client.store_rtt_us $(( (t1 - t0) / n / 1000 )) us"
echo "BENCH cluster_client.fetch_rtt_us $(( (t2 - t1) / n / 1000 )) us"
