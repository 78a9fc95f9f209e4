# cluster_common.bash - helpers of the cluster system tests (sourced after
# lib.sh; not a test itself, hence not *.sh).

# cluster_free_ports N: N distinct free TCP ports on 127.0.0.1, below the
# kernel's ephemeral range, so that no outgoing connection of anybody (other
# tests run on this machine too) takes one between our choice and our bind.
# (the tools directory found now: a test may cd elsewhere before it asks)
CLUSTER_TOOLS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../tools" && pwd)
cluster_free_ports() {
  python3 "$CLUSTER_TOOLS/free_ports.py" "$1"
}

# cluster_stat NODE KEY: one value of `nvcachectl stats --node NODE`.
cluster_stat() {
  "$(t_bin nvcachectl)" stats --node "$1" 2>/dev/null | awk -F': ' -v k="$2" '$1 == k { print $2 }'
}
cluster_sees() { [ "$(cluster_stat "$1" nodes_alive)" = "$2" ]; }

# cluster_start N TAG: N nvcached on loopback (heartbeat 200 ms, dead after
# 1 s) from a fresh cluster file $conf (secret in $T_DIR/secret, made if
# missing), pids in pid[1..N], logs in $T_DIR/nodeI-TAG.log; returns once
# every node sees the N-1 others alive. CLUSTER_MEM=SIZE gives every node
# that mem= cap in the cluster file. If the caller defines
# cluster_node_args, `cluster_node_args I` prints node I's extra arguments.
cluster_start() {
  local n=$1 tag=$2 i ports extra
  [ -f "$T_DIR/secret" ] || { head -c 32 /dev/urandom | base64 >"$T_DIR/secret"; chmod 600 "$T_DIR/secret"; }
  read -r -a ports < <(cluster_free_ports "$n")
  conf=$T_DIR/cluster-$tag.conf
  { echo "secret secret"
    for ((i = 1; i <= n; i++)); do echo "node $i 127.0.0.1:${ports[$((i-1))]}${CLUSTER_MEM:+ mem=$CLUSTER_MEM}"; done; } >"$conf"
  for ((i = 1; i <= n; i++)); do
    extra=()
    if declare -F cluster_node_args >/dev/null; then read -r -a extra < <(cluster_node_args "$i") || true; fi
    "$(t_bin nvcached)" --cluster "$conf" --node $i -f --heartbeat 200 --timeout 1000 \
      "${extra[@]}" >"$T_DIR/node$i-$tag.log" 2>&1 &
    pid[$i]=$!
    t_cleanup "kill -9 ${pid[$i]} 2>/dev/null"
    disown "${pid[$i]}"
  done
  CLUSTER_N=$n
  for ((i = 1; i <= n; i++)); do
    t_wait 15 cluster_sees $i $((n - 1)) ||
      t_fail "node $i does not see its peers: $(tail -3 "$T_DIR/node$i-$tag.log")"
  done
}
# cluster_node_restart I TAG: node I of $conf started again (after a kill),
# as cluster_start does, its log in $T_DIR/nodeI-TAG.log.
cluster_node_restart() {
  local i=$1 extra=()
  if declare -F cluster_node_args >/dev/null; then read -r -a extra < <(cluster_node_args "$i") || true; fi
  "$(t_bin nvcached)" --cluster "$conf" --node "$i" -f --heartbeat 200 --timeout 1000 \
    "${extra[@]}" >"$T_DIR/node$i-$2.log" 2>&1 &
  pid[$i]=$!
  t_cleanup "kill -9 ${pid[$i]} 2>/dev/null"
  disown "${pid[$i]}"
}
cluster_stop() { local i; for ((i = 1; i <= CLUSTER_N; i++)); do kill -9 "${pid[$i]}" 2>/dev/null; done; }

# cluster_nbd_io SOCK NAME FILE OP FROM TO: bytes FROM..TO (MiB) of the device
# written from FILE (OP w, 1 MiB writes, any failure fails) or checked
# against it page by page (OP c, prints "UNREADABLE WRONG").
cluster_nbd_io() {
  # -I: not the repository's nbd/ for libnbd's module
  /usr/bin/python3 -I - "$@" <<'PY'
import nbd, sys
sock, name, path, op = sys.argv[1:5]
lo, hi = int(sys.argv[5]) << 20, int(sys.argv[6]) << 20
data = open(path, "rb").read()
def conn():
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix(sock)
    return h
h = conn()
if op == "w":
    for off in range(lo, hi, 1 << 20):
        h.pwrite(data[off:off + (1 << 20)], off)
    h.flush()
    sys.exit(0)
bad = wrong = 0
for off in range(lo, hi, 4096):
    try:
        if h.pread(4096, off) != data[off:off + 4096]:
            wrong += 1
    except nbd.Error:
        bad += 1
        h = conn()
print(bad, wrong)
PY
}

# cluster_swap_test: the set-up of the tests that swap through nvswapd
# --store remote to nodes on this machine and check pages with
# cluster_nbd_io: python3-libnbd, a private run dir, nodes without mlock
# (there are several, each a daemon with a locked pool otherwise), and
# the pid table cluster_start fills; the arguments: other commands the
# test needs (t_require_cmd).
cluster_swap_test() {
  [ $# = 0 ] || t_require_cmd "$@"
  /usr/bin/python3 -I -c 'import nbd' 2>/dev/null || t_skip "no python3 libnbd module (python3-libnbd)"
  declare -gA pid
  export NVCACHE_RUN_DIR=$T_DIR/run
  cluster_node_args() { echo --no-mlock; }
}
