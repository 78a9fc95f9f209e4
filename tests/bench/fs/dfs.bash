# dfs.bash - sourced by tests/bench/fs_cluster.sh (after tests/system/lib.sh
# and cluster_common.bash): the distributed file systems it measures
# nvcachefs against, each set up on this host with four client mounts (one
# per "node") and taken down again by pid, volume and mount point.
#
#   dfs_gluster_up DIR   GlusterFS: glusterd, a distribute volume of 4 bricks
#                        on tmpfs ($T_SHM), mounted at DIR/m1..m4
#   dfs_gluster_down
#   dfs_moosefs_up DIR   MooseFS: 1 master + 4 chunk servers (chunks on
#                        $T_SHM), mfsmount at DIR/m1..m4, goal 1
#   dfs_moosefs_down
# An _up returns 1 with the reason in DFS_WHY when the system cannot start
# here; the mounts are in DFS_MNTS. Every process started is also
# registered with t_cleanup, so a failed run takes them down too.
DFS_MNTS=()
DFS_MPIDS=()
DFS_WHY=

# _dfs_stop PID: SIGTERM, then up to 30 s for it to end (a MooseFS master
# saves its metadata on the way out and spins if its directory is gone
# meanwhile), then SIGKILL. A zombie counts as ended.
_dfs_stop() {
  local i st
  kill "$1" 2>/dev/null || return 0
  for ((i = 0; i < 300; i++)); do
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
    [ -z "$st" ] || [ "$st" = Z ] && return 0
    sleep 0.1
  done
  kill -9 "$1" 2>/dev/null
}

# Registered cleanups run at exit even when an explicit _down ran first:
# each is harmless then (unmounted, pid gone, volume gone).
_dfs_umount_all() {
  local m
  for m in "${DFS_MNTS[@]}"; do t_umount "$m"; done
}

# GlusterFS keeps its state in /var/lib/glusterd and listens on 24007:
# one glusterd per host, so the benchmark refuses to run beside another.
dfs_gluster_up() {
  local dir=$1 i bricks=() host
  command -v glusterd >/dev/null && command -v gluster >/dev/null ||
    { DFS_WHY="glusterfs-server not installed"; return 1; }
  pgrep -x glusterd >/dev/null && { DFS_WHY="a glusterd runs already (not ours)"; return 1; }
  ss -Hltn '( sport = :24007 or sport = :24008 )' | grep -q . &&
    { DFS_WHY="GlusterFS's port 24007/24008 is in use"; return 1; }
  host=$(hostname)
  getent hosts "$host" >/dev/null || { DFS_WHY="this host's name $host does not resolve"; return 1; }
  DFS_GVOL=nvbench$$
  # (its volume hooks' complaints about SELinux tools go to its log too)
  /usr/sbin/glusterd -N -p "$T_DIR/glusterd.pid" --log-file="$T_DIR/glusterd.log" \
    >>"$T_DIR/glusterd.log" 2>&1 &
  DFS_GPID=$!
  t_cleanup "_dfs_stop $DFS_GPID"
  t_wait 30 gluster --mode=script volume list ||
    { DFS_WHY="glusterd did not answer: $(tail -2 "$T_DIR/glusterd.log")"; return 1; }
  for i in 1 2 3 4; do
    mkdir -p "$T_SHM/gbrick$i"
    bricks+=("$host:$T_SHM/gbrick$i")
  done
  # (force: the bricks are on tmpfs, which glusterd refuses otherwise)
  gluster --mode=script volume create "$DFS_GVOL" transport tcp "${bricks[@]}" force >&2 ||
    { DFS_WHY="volume create failed"; return 1; }
  t_cleanup "gluster --mode=script volume delete $DFS_GVOL"
  t_cleanup "gluster --mode=script volume stop $DFS_GVOL force; kill \$(cat /var/run/gluster/vols/$DFS_GVOL/*.pid 2>/dev/null)"
  gluster --mode=script volume start "$DFS_GVOL" >&2 || { DFS_WHY="volume start failed"; return 1; }
  DFS_MNTS=()
  for i in 1 2 3 4; do
    mkdir -p "$dir/m$i"
    DFS_MNTS+=("$dir/m$i")
    t_cleanup "t_umount '$dir/m$i'"
    mount -t glusterfs -o "log-file=$T_DIR/gluster-m$i.log" "$host:/$DFS_GVOL" "$dir/m$i" ||
      { DFS_WHY="mount of the volume failed: $(tail -2 "$T_DIR/gluster-m$i.log")"; return 1; }
  done
}

dfs_gluster_down() {
  _dfs_umount_all
  gluster --mode=script volume stop "$DFS_GVOL" force >&2
  gluster --mode=script volume delete "$DFS_GVOL" >&2
  _dfs_stop "$DFS_GPID"
  wait "$DFS_GPID" 2>/dev/null
  DFS_MNTS=()
}

# The master refuses chunk servers registering from 127/8 and a chunk
# server refuses a 127/8 MASTER_HOST: they use 0.0.0.0 and the master
# remaps 127.0.0.1 to it. Every port is picked free.
dfs_moosefs_up() {
  local dir=$1 i p cs
  command -v mfsmaster >/dev/null && command -v mfschunkserver >/dev/null &&
    command -v mfsmount >/dev/null ||
    { DFS_WHY="moosefs-master/-chunkserver/-client not installed"; return 1; }
  read -r -a p < <(cluster_free_ports 7)
  mkdir -p "$dir/master"
  echo "MFSM NEW" >"$dir/master/metadata.mfs"
  echo "127.0.0.1 / rw,alldirs,admin,maproot=0:0" >"$dir/mfsexports.cfg"
  cat >"$dir/mfsmaster.cfg" <<EOF
WORKING_USER = root
WORKING_GROUP = root
DATA_PATH = $dir/master
EXPORTS_FILENAME = $dir/mfsexports.cfg
NICE_LEVEL = 0
MATOML_LISTEN_HOST = 127.0.0.1
MATOML_LISTEN_PORT = ${p[0]}
MATOCS_LISTEN_HOST = 127.0.0.1
MATOCS_LISTEN_PORT = ${p[1]}
MATOCL_LISTEN_HOST = 127.0.0.1
MATOCL_LISTEN_PORT = ${p[2]}
REMAP_BITS = 32
REMAP_SOURCE_IP_CLASS = 127.0.0.1
REMAP_DESTINATION_IP_CLASS = 0.0.0.0
EOF
  mfsmaster -f -c "$dir/mfsmaster.cfg" >"$T_DIR/mfsmaster.log" 2>&1 &
  DFS_MPIDS=($!)
  t_cleanup "_dfs_stop ${DFS_MPIDS[0]}"
  for i in 1 2 3 4; do
    cs=$dir/cs$i
    mkdir -p "$cs" "$T_SHM/mfshdd$i"
    echo "$T_SHM/mfshdd$i" >"$cs/mfshdd.cfg"
    cat >"$cs/mfschunkserver.cfg" <<EOF
WORKING_USER = root
WORKING_GROUP = root
DATA_PATH = $cs
HDD_CONF_FILENAME = $cs/mfshdd.cfg
HDD_LEAVE_SPACE_DEFAULT = 64MiB
NICE_LEVEL = 0
MASTER_HOST = 0.0.0.0
MASTER_PORT = ${p[1]}
CSSERV_LISTEN_HOST = 127.0.0.1
CSSERV_LISTEN_PORT = ${p[$((2 + i))]}
EOF
    mfschunkserver -f -c "$cs/mfschunkserver.cfg" >"$T_DIR/mfscs$i.log" 2>&1 &
    DFS_MPIDS+=($!)
    t_cleanup "_dfs_stop $!"
  done
  _dfs_cs_registered() { [ "$(ss -Htn state established "( sport = :${p[1]} )" | wc -l)" -ge 4 ]; }
  t_wait 30 _dfs_cs_registered ||
    { DFS_WHY="the chunk servers did not register: $(tail -2 "$T_DIR/mfsmaster.log")"; return 1; }
  DFS_MNTS=()
  for i in 1 2 3 4; do
    mkdir -p "$dir/m$i"
    DFS_MNTS+=("$dir/m$i")
    mfsmount "$dir/m$i" -f -H 127.0.0.1 -P "${p[2]}" -o mfsnice=0 >"$T_DIR/mfsmount$i.log" 2>&1 &
    DFS_MPIDS+=($!)
    t_cleanup "t_umount '$dir/m$i'; _dfs_stop $!"
    t_wait 20 t_is_mounted "$dir/m$i" ||
      { DFS_WHY="mfsmount failed: $(tail -2 "$T_DIR/mfsmount$i.log")"; return 1; }
  done
  mfssetgoal -r 1 "$dir/m1" >/dev/null || { DFS_WHY="mfssetgoal failed"; return 1; }
}

dfs_moosefs_down() {
  local pid
  _dfs_umount_all
  # mounts first, then chunk servers, the master last (it saves metadata)
  [ ${#DFS_MPIDS[@]} -gt 0 ] || return 0
  for pid in "${DFS_MPIDS[@]:1}" "${DFS_MPIDS[0]}"; do
    _dfs_stop "$pid"
    wait "$pid" 2>/dev/null
  done
  DFS_MNTS=()
}
