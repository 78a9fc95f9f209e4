# fscl_common.bash - the set-up of the cluster file system tests (sourced
# after lib.sh; not a test itself): FSCL_N nodes on loopback, each an
# nvcached with a file cache (--cache-size) and an nvcachefs mount
# $T_DIR/mI (node I), all over one backing directory $T_DIR/b. Everything
# started is killed and unmounted by its pid at exit.
. "$(dirname "$0")/cluster_common.bash"
t_require_root
t_require_cmd fusermount3 python3
export NVCACHE_RUN_DIR=$T_DIR/run
mkdir -p "$NVCACHE_RUN_DIR" "$T_DIR/b"
FSCL_N=${FSCL_N:-4}

cluster_node_args() { echo "--cache-size ${FSCL_CACHE:-64M} --cache-nvram $T_SHM/fc$1.nvram --no-mlock"; }

# fscl_mount I [OPTS]: node I's mount on $T_DIR/mI (pid in mpid[I]).
fscl_mount() {
  local i=$1 m=$T_DIR/m$1
  mkdir -p "$m"
  "$(t_bin nvcachefs)" "$m" -f -o "backing=$T_DIR/b,cluster=$conf,node=$i,writeback_delay=${FSCL_WB_DELAY:-0.3}${2:+,$2}" \
    >"$T_DIR/fs$i.log" 2>&1 &
  mpid[$i]=$!
  t_cleanup "kill -9 ${mpid[$i]} 2>/dev/null"
  t_cleanup "t_umount $m"
  t_wait 20 t_is_mounted "$m" || { cat "$T_DIR/fs$i.log" >&2; t_fail "no mount of node $i"; }
}

# fscl_start: the nodes, then a mount on each.
fscl_start() {
  local i
  cluster_start "$FSCL_N" fs
  for ((i = 1; i <= FSCL_N; i++)); do fscl_mount $i; done
}

# fscl_layout FILE: where a file of a mount lives (user.nvcache.layout)
fscl_layout() { getfattr --absolute-names --only-values -n user.nvcache.layout "$1"; }

# fscl_stat I KEY: one value of node I's nvcached stats.
fscl_stat() { cluster_stat "$1" "$2"; }
# fscl_mount_stat MOUNT KEY: one value of `nvcachectl stats MOUNT`
fscl_mount_stat() { "$(t_bin nvcachectl)" stats "$1" 2>/dev/null | awk -F': ' -v k="$2" '$1 == k { print $2 }'; }

# fscl_stop [nodes-first]: every mount unmounted and its nvcachefs exited
# 0 (under a sanitizer: no error, no leak), and every node stopped by
# SIGTERM, gone within 10 s and having said so last (not a crash on the
# way); the mounts first, or with nodes-first the nodes (stopped in the
# middle of what the mounts asked of them).
fscl_stop() {
  if [ "${1:-}" = nodes-first ]; then
    fscl_stop_nodes
    fscl_stop_mounts
  else
    fscl_stop_mounts
    fscl_stop_nodes
  fi
  fscl_no_sanitizer_reports
}
fscl_no_sanitizer_reports() {
  ! grep -H "ERROR: [A-Za-z]*Sanitizer\|runtime error" "$T_DIR"/node*.log "$T_DIR"/fs*.log >&2 ||
    t_fail "a sanitizer report (above) in the logs"
}
fscl_stop_mounts() {
  local i rc
  for ((i = 1; i <= FSCL_N; i++)); do
    fusermount3 -u "$T_DIR/m$i" || t_fail "unmount of node $i's mount failed"
    wait "${mpid[$i]}"; rc=$?
    [ $rc = 0 ] || { tail -5 "$T_DIR/fs$i.log" >&2; t_fail "node $i's nvcachefs exited $rc"; }
  done
}
fscl_stop_nodes() {
  local i live=()
  # (a node the test killed for good is not stopped again)
  for ((i = 1; i <= FSCL_N; i++)); do kill -TERM "${pid[$i]}" 2>/dev/null && live+=("$i"); done
  for i in "${live[@]}"; do
    t_wait 10 eval "! kill -0 ${pid[$i]}" || t_fail "node $i's nvcached did not stop"
    grep -q "nvcached\[${pid[$i]}\] info: node $i stopped" "$T_DIR"/node$i-*.log ||
      t_fail "node $i's nvcached did not finish its stop: $(grep -h "nvcached\[${pid[$i]}\]" "$T_DIR"/node$i-*.log | tail -2)"
  done
}

# fscl_why: what the nodes say, for a failure's message
fscl_why() {
  local i
  for ((i = 1; i <= FSCL_N; i++)); do
    echo "node $i: dirty $(fscl_stat $i fcache_dirty_bytes) files $(fscl_stat $i fcache_files)" \
      "written back $(fscl_stat $i fcache_written_back_bytes) errors $(fscl_stat $i fcache_writeback_errors)"
  done
  grep -h "warn\|err" "$T_DIR"/node*.log "$T_DIR"/fs*.log | grep -v "refused peer" | tail -5
}

# fscl_write_held FILE REF TAG: in the background, REF's bytes written
# into FILE (made if absent) through a descriptor kept open (dirty in the
# owners' NVRAM: no write-back while open); $T_DIR/TAG.ready once
# written; closed when $T_DIR/TAG.close appears (a close that fails, say
# for a down node's write-back request, is said on stderr and not an
# error). Sets held_writer to its pid. A FILE made before was closed,
# which had its owners write it back after the mounts' writeback_delay:
# that write-back passes first, or it would take REF's bytes too.
fscl_write_held() {
  [ -e "$1" ] && sleep "$(awk "BEGIN { print ${FSCL_WB_DELAY:-0.3} + 1 }")"
  python3 -c 'import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, open(sys.argv[2], "rb").read())
open(sys.argv[3] + ".ready", "w").close()
while not os.path.exists(sys.argv[3] + ".close"):
    time.sleep(0.1)
try:
    os.close(fd)
except OSError as e:
    print("close: %s" % e, file=sys.stderr)' "$1" "$2" "$T_DIR/$3" &
  held_writer=$!
  t_cleanup "kill $held_writer 2>/dev/null"
  t_wait 10 test -e "$T_DIR/$3.ready" || t_fail "$1 not written"
}
