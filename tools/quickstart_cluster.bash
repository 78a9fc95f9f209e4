# quickstart_cluster.bash - tools/quickstart.sh --cluster N: a small
# cluster on this machine, N nodes on loopback ports, each an nvcached with
# a file cache and an nvcachefs mount $mnt-I (node I), all over one backing
# directory: the file system across nodes (docs/nvcachefs-cluster.md) to
# try with MPI ranks on different "nodes". Sourced by quickstart.sh after
# its options, with root, mnt, backing, run, state, cluster_n and stop set.
#
# Files: $state/cluster.conf (the cluster file) and its secret, the
# mount prefix and backing it was started with in $state/cluster.where
# (so that --stop finds them), pids in $state/cluster-node-I.pid (a
# node's pid file goes when it is stopped: one left whose process is
# gone is a node that died), logs /var/log/nvcached-I.log and
# /var/log/nvcachefs-MOUNT.log.
cconf=$state/cluster.conf
cwhere=$state/cluster.where
# a cluster set up here keeps the mounts and backing it was started with
if [ -f "$cwhere" ] && [ -f "$cconf" ]; then
  was_mnt=$(sed -n 's/^mnt=//p' "$cwhere") was_backing=$(sed -n 's/^backing=//p' "$cwhere")
  if { [ "$mnt_given" = 1 ] && [ "$mnt" != "$was_mnt" ]; } ||
     { [ "$backing_given" = 1 ] && [ "$(realpath -m "$backing")" != "$was_backing" ]; }; then
    if [ "$stop" -eq 0 ]; then
      echo "quickstart: the cluster set up here ($cconf) has its mounts at $was_mnt-I" \
           "over $was_backing; to set one up elsewhere, stop it" \
           "(tools/quickstart.sh --stop --cluster N): it says which files to remove" >&2
      exit 1
    fi
    echo "quickstart: the cluster here was started with its mounts at $was_mnt-I over $was_backing; stopping that one"
  fi
  mnt=$was_mnt backing=$was_backing
fi
backing=$(realpath -m "$backing")
# the nodes' NVRAM files, named after the mounts (as quickstart.sh's own)
cnv=/dev/shm/nvcache-fcache-$(echo "${mnt#/}" | tr / -)
ccache=${NVCACHE_CLUSTER_CACHE:-256M}

cl_mnt() { echo "$mnt-$1"; }
# cl_pid I: node I's nvcached pid, if its pid file names a process that
# is that node of this cluster (not a pid reused since, after a crash)
cl_pid() {
  local p
  p=$(cat "$state/cluster-node-$1.pid" 2>/dev/null) || return 1
  alive "$p" && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null |
    grep -qF -- "nvcached --cluster $cconf --node $1 " && echo "$p"
}
cl_mounted() { grep -q "^[^ ]* $(cl_mnt "$1") fuse" /proc/mounts; }
cl_sees() { local a; a=$(cl_stat "$1" nodes_alive); [ -n "$a" ] && [ "$a" -ge "$2" ]; }
cl_nodes() { local c=0; [ -f "$cconf" ] && c=$(grep -c '^node ' "$cconf" || true); echo "${c:-0}"; }
cl_addr() { awk -v i="$1" '$1 == "node" && $2 == i { print $3 }' "$cconf"; }
# cl_stat I KEY: KEY of node I's stats, if the nvcached answering is ours:
# it listens at node I's address in $cconf (the control socket it answers
# on is named after the node id alone: another cluster's node I on this
# machine holds it, and ours then exits saying so).
cl_stat() {
  "$root/build/tools/nvcachectl" stats --node "$1" 2>/dev/null |
    awk -F': ' -v k="$2" -v a="$(cl_addr "$1")" '
      $1 == "listen" { ours = $2 == a }
      $1 == k { v = $2 }
      END { if (ours && v != "") print v }'
}

# the way to set up another cluster once this one is written back
cl_forget() {
  echo "  to set up a cluster of another size or elsewhere: rm $cconf $cwhere $cnv-*.nvram*"
}

cluster_stop() {
  local n i k pid left=0 rc=0 dead="" live=0 m
  n=$(cl_nodes)
  [ "$n" -gt 0 ] || { echo "quickstart: no cluster was started here ($cconf)"; return 0; }
  [ "$cluster_n" -eq "$n" ] || echo "quickstart: the cluster here has $n nodes; stopping those"
  local any=0
  for ((i = 1; i <= n; i++)); do
    { [ -f "$state/cluster-node-$i.pid" ] || cl_mounted $i; } && any=1
  done
  if [ $any = 0 ]; then
    echo "quickstart: the cluster of $n nodes here is not running (stopped before;" \
         "what it held was written back then)"
    cl_forget
    return 0
  fi
  for ((i = 1; i <= n; i++)); do
    m=$(cl_mnt $i)
    cl_mounted $i || continue
    pid=$(pgrep -f "nvcachefs $m " | head -1 || true)
    if ! stat "$m" >/dev/null 2>&1; then
      fusermount3 -uz "$m"
      echo "nvcachefs $m: its daemon had died; detached (its node's cache keeps the data)"
      continue
    fi
    fusermount3 -u "$m" || { echo "quickstart: $m is busy; not stopped" >&2; return 1; }
    [ -n "$pid" ] && wait_exit "$pid" "nvcachefs $m"
    echo "nvcachefs $m: unmounted"
  done
  # a node whose pid file stayed but that does not run died: what it
  # held dirty is in its NVRAM file only, written back when it runs again
  for ((i = 1; i <= n; i++)); do
    [ -f "$state/cluster-node-$i.pid" ] || continue
    if cl_pid $i >/dev/null; then live=$((live + 1)); else dead="$dead $i"; fi
  done
  # The nodes write their blocks back after the last close: wait for it,
  # so that the backing is complete when they stop.
  for ((k = 0; k < 600; k++)); do
    left=0
    for ((i = 1; i <= n; i++)); do
      cl_pid $i >/dev/null || continue
      local d; d=$(cl_stat $i fcache_dirty_bytes || true)
      left=$((left + ${d:-0}))
    done
    [ "$left" -eq 0 ] && break
    [ $((k % 10)) -eq 0 ] && echo "  writing back: $((left >> 20)) MiB left on the nodes..."
    sleep 0.5
  done
  if [ "$left" -ne 0 ]; then
    echo "quickstart: $((left >> 20)) MiB not yet written back to $backing; the nodes" \
         "keep it in their NVRAM files ($cnv-*.nvram) and write it" \
         "back when started again. Not removing them." >&2
    rc=1
  fi
  for ((i = 1; i <= n; i++)); do
    pid=$(cl_pid $i) || continue
    kill "$pid" 2>/dev/null && wait_exit "$pid" "nvcached node $i"
    rm -f "$state/cluster-node-$i.pid"
  done
  if [ -n "$dead" ]; then
    local files="" j
    for j in $dead; do files="$files $cnv-$j.nvram"; done
    echo "quickstart: node(s)$dead had died (not running): whatever they held that" \
         "was not written back yet is in their NVRAM files ($(echo $files)) only," \
         "not in $backing. Start the cluster again (tools/quickstart.sh --cluster $n)" \
         "to write it back, then stop it. Do NOT remove those files." >&2
    echo "cluster: $live nodes stopped, $(echo $dead | wc -w) had died"
    return 1
  fi
  if [ "$left" -eq 0 ]; then
    echo "cluster: $n nodes stopped; everything written back to $backing"
    local kept
    kept=$(du -cm "$cnv"-*.nvram 2>/dev/null | tail -1 | cut -f1)
    [ "${kept:-0}" -gt 0 ] && echo "  their NVRAM files $cnv-*.nvram ($kept MiB of RAM)" \
      "are kept for the next start; rm them to free that memory"
    cl_forget
  else
    echo "cluster: $n nodes stopped"
  fi
  return $rc
}

cluster_start() {
  local n=$1 i ports
  if [ "$(cl_nodes)" -gt 0 ] && [ "$(cl_nodes)" -ne "$n" ]; then
    echo "quickstart: a cluster of $(cl_nodes) nodes is set up here ($cconf); stop it" \
         "(tools/quickstart.sh --stop --cluster $(cl_nodes)); once it says everything" \
         "was written back, rm $cconf $cwhere $cnv-*.nvram* to set up one of $n" >&2
    return 1
  fi
  local others
  others=$(other_caches "$backing" $(for ((i = 1; i <= n; i++)); do cl_mnt $i; done))
  if [ -n "$others" ]; then
    echo "quickstart: $backing is served by another nvcachefs ($(echo $others)): stop it" \
         "(tools/quickstart.sh --stop) or give the cluster another backing (--backing DIR)" >&2
    return 1
  fi
  if [ ! -f "$cconf" ]; then
    # free ports below the kernel's ephemeral range (docs/nvcached.md)
    read -r -a ports < <(python3 "$root/tools/free_ports.py" "$n")
    head -c 32 /dev/urandom | base64 >"$state/cluster.secret"
    chmod 600 "$state/cluster.secret"
    { echo "secret cluster.secret"
      for ((i = 1; i <= n; i++)); do echo "node $i 127.0.0.1:${ports[$((i-1))]}"; done
    } >"$cconf"
    printf 'mnt=%s\nbacking=%s\n' "$mnt" "$backing" >"$cwhere"
  fi
  for ((i = 1; i <= n; i++)); do
    if cl_pid $i >/dev/null; then
      echo "nvcached node $i: already running"
      continue
    fi
    [ -f "$state/cluster-node-$i.pid" ] &&
      echo "nvcached node $i: had died; starting it again (it writes back what its NVRAM file holds)"
    NVCACHE_RUN_DIR=$run setsid "$root/build/cluster/nvcached" --cluster "$cconf" --node $i -f \
      --cache-size "$ccache" --cache-nvram "$cnv-$i.nvram" \
      </dev/null >>"/var/log/nvcached-$i.log" 2>&1 &
    echo $! >"$state/cluster-node-$i.pid"
  done
  for ((i = 1; i <= n; i++)); do
    wait_up "$(cat "$state/cluster-node-$i.pid")" "/var/log/nvcached-$i.log" \
      "nvcached node $i" "waiting for its peers" cl_sees $i $((n - 1)) || return 1
  done
  echo "cluster: $n nodes up ($cconf), a $ccache file cache each (NVRAM in /dev/shm)"
  for ((i = 1; i <= n; i++)); do
    local m log; m=$(cl_mnt $i)
    log=/var/log/nvcachefs-$(echo "${m#/}" | tr / -).log
    if cl_mounted $i && stat "$m" >/dev/null 2>&1; then
      echo "nvcachefs $m: already mounted"
      continue
    fi
    cl_mounted $i && fusermount3 -uz "$m"
    mkdir -p "$m"
    setsid "$root/build/fs/nvcachefs" "$m" -f \
      -o "backing=$backing,cluster=$cconf,node=$i,allow_other" </dev/null >>"$log" 2>&1 &
    wait_up $! "$log" "nvcachefs $m" "" cl_mounted $i || return 1
    echo "nvcachefs $m: node $i's mount (log: $log)"
  done
  cat <<MSG

One file system across $n nodes, over $backing: a file written through
$(cl_mnt 1) is read through $(cl_mnt 2) at once; fcntl and flock locks
hold across the mounts. On a real cluster every node mounts the same
path; here, give each process the mount of the node it plays:
  echo hello >$(cl_mnt 1)/f; cat $(cl_mnt 2)/f
Watch it:
  build/tools/nvcachectl status --cluster $cconf
Stop (writes everything back first):   tools/quickstart.sh --stop --cluster $n
MSG
}

if [ "$stop" -eq 1 ]; then
  cluster_stop
  exit $?
fi
"$root/tools/install-deps.sh"
( cd "$root" && { [ -f build/build.ninja ] || meson setup build >/dev/null; } && ninja -C build >/dev/null )
mkdir -p "$state" "$backing"
cluster_start "$cluster_n"
exit $?
