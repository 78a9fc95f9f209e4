#!/usr/bin/env bash
# fs_cluster.sh - one file system shared by four "nodes" on this host (issue
# 24), side by side in one run: GlusterFS (distribute volume, 4 bricks on
# tmpfs, 4 mounts; the anchor), MooseFS (1 master, 4 chunk servers, 4
# mounts), the slow backing directory itself, one-node nvcachefs (all ranks
# on one mount) and cross-node nvcachefs (4 nvcached --cache-size, 4 mounts
# with cluster=, node=; skipped with the reason while the built nvcachefs
# lacks that mode).
#
# Workloads, 4 MPI ranks, rank i through node i's mount (tests/mpi/ior.c,
# every byte read verified: a wrong byte fails the run):
#   n1_1m      N-1 strided shared file, 1 MiB transfers
#   nn_1m      N-N, a file per process, 1 MiB transfers
#   n1_47008   N-1 strided, 47,008-byte transfers (unaligned)
# each a write + MPI_File_sync + close, then every rank reads rank
# (i+1)%4's blocks; and fio 4 KiB random writes (then reads of another
# node's file), psync, one job per node; and small files (fs/smallfiles.py:
# each rank creates FSB_CL_FILES files of 100 B-12 KB through its mount,
# then reads rank (i+1)%4's back through its own, files/s over the 4).
# Then a coherence probe per
# system: a same-size overwrite through mount 1, read through mount 2.
# Prints a BENCH line per figure once a system is measured, with the ratio
# against GlusterFS (MiB/s or IOPS: higher is better). The cross-node
# nvcachefs runs alternate with GlusterFS round by round (GlusterFS stays
# up; odd rounds it goes first, even rounds second): their ratios are to
# GlusterFS's runs of the same rounds, and "paired" is the median of the
# rounds' own ratios, which a change in the machine's load between
# systems does not move as it moves medians measured minutes apart. The
# run keeps memory warm (fsb_keep_warm), raises fs.pipe-max-size to 2 MiB
# as the README suggests (t_pipe_splice), and starts each run after the
# last one's write-back (settle).
#
#   FSB_CL_MIB=128 (MiB a rank; the issue's size is 256)  FSB_CL_REPS=3
#   (median of)  FSB_CL_FIO_REPS=3 (paired fio rounds)  FSB_CL_FIO_SECONDS=8  FSB_CL_FIO_MIB=32 (file per job)
#   FSB_CL_PROBES=200 (coherence rounds)  FSB_SLOW=1 (backing = fsb_slowpfs)
#   FSB_CL_SYSTEMS=REGEX (which besides GlusterFS, the anchor: moosefs,
#   backing, nvcachefs, nvcachefs-cluster, nvcachefs-cluster-r2 (with
#   replicas=2); default all)
#   FSB_CL_IOR=PATH (the ior program; default the build's tests/mpi/ior)
#   FSB_CL_FILES=2000 (small files a rank)  FSB_CL_WORKLOADS=REGEX (which
#   of n1_1m nn_1m n1_47008 rand4k files; default all)
T_TIMEOUT=${T_TIMEOUT:-3600}
. "$(dirname "$0")/../system/lib.sh"
. "$(dirname "$0")/fs/lib.sh"
. "$(dirname "$0")/../system/cluster_common.bash"
. "$(dirname "$0")/fs/dfs.bash"
t_require_root
t_require_cmd fusermount3 mpiexec fio python3 glusterd gluster
export HYDRA_LAUNCHER=fork
# Four ranks on two cores: a rank waiting in a barrier yields at once
# rather than polling, so that the file systems' daemons get the CPU.
export MPIR_CVAR_POLLS_BEFORE_YIELD=1
mib=${FSB_CL_MIB:-128}
reps=${FSB_CL_REPS:-3}
fio_s=${FSB_CL_FIO_SECONDS:-8}
fio_mib=${FSB_CL_FIO_MIB:-32}
probes=${FSB_CL_PROBES:-200}
ior=${FSB_CL_IOR:-$NVCACHE_BUILD/tests/mpi/ior}
[ -x "$ior" ] || t_skip "$ior not built (meson found no mpich)"
probe=$(dirname "$0")/fs/coherence.py
# nvcachefs's cache holds one workload's files twice over (no eviction in
# the measured runs)
cache=$((mib * 4 * 2 < 1024 ? 1024 : mib * 4 * 2))M
files=${FSB_CL_FILES:-2000}
want_wl() { [[ $1 =~ ${FSB_CL_WORKLOADS:-.} ]]; }
workloads=()
for wl in n1_1m nn_1m n1_47008; do want_wl $wl && workloads+=($wl); done
declare -A wl_args=([n1_1m]="--layout n1 --xfer 1048576" [nn_1m]="--layout nn --xfer 1048576"
                    [n1_47008]="--layout n1 --xfer 47008")
declare -A R G P   # R[system.figure] = value; G, P: paired GlusterFS, ratio
PAIRED=
seed=$((RANDOM + 1))
echo "fs_cluster: 4 ranks, ${mib} MiB a rank, median of $reps; fio ${fio_s} s a phase, ${fio_mib} MiB a job; $probes coherence rounds; load $(cut -d' ' -f1-3 /proc/loadavg)"
# GlusterFS's and MooseFS's sockets use the machine's congestion control;
# nvcachefs's cluster asks for cubic (cluster/conn.h)
echo "TCP congestion control: $(sysctl -n net.ipv4.tcp_congestion_control) (the machine's), cubic on nvcachefs's cluster connections"

# every system here allocates fresh memory (NVRAM files, bricks, page
# cache) as it goes: all of it warm, so that none pays the first touch
fsb_keep_warm
# as the README has a user set it (one copy fewer per written byte: the
# mounts read a write's data from the request's pipe); GlusterFS's client
# does not splice, so it neither gains nor loses
t_pipe_splice
echo "fs.pipe-max-size: $(cat /proc/sys/fs/pipe-max-size) for this run"

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print NR ? v[int((NR + 1) / 2)] : 0}'; }

# ior_one SYS WL: one run of workload WL over MNTS; prints "WRITE READ"
# (MiB/s).
ior_one() {
  local sys=$1 wl=$2 out
  # shellcheck disable=SC2086
  out=$(mpiexec -n 4 "$ior" ${wl_args[$wl]} --mib "$mib" --seed "$seed" \
        --name "ior-$wl-$seed" "${MNTS[@]}" 2>&1) ||
    t_fail "$sys $wl: ior failed (exit $?; a wrong byte or an I/O error): $out"
  echo "$sys $wl: $(echo "$out" | tr '\n' ' ')" >&2
  cache_stats "$sys" >&2
  echo "$(echo "$out" | awk '$2 == "write" {print $(NF-1)}') $(echo "$out" | awk '$2 == "read" {print $(NF-3)}')"
}

# on_gluster ONE SYS ARGS...: ONE gluster ARGS... over GlusterFS's mounts
# (a subshell: MNTS and STAT_TARGETS stay the caller's).
on_gluster() {
  MNTS=("${GMNTS[@]}") STAT_TARGETS=()
  "$1" gluster "${@:3}"
}

# paired SYS KEY ONE...: CMD (ONE..., printing "WRITE READ") for SYS, and
# when PAIRED for GlusterFS in the same round, reps rounds (GlusterFS
# first in odd rounds, SYS first in even ones, so that a drift in the
# machine's load falls on both): R[SYS.KEY.write|read] the medians, and
# when paired G[...] GlusterFS's medians over those rounds and P[...] the
# median of the rounds' own ratios.
paired() {
  local sys=$1 key=$2 r a b ws=() rs=() gw=() gr=() pw=() pr=()
  shift 2
  for ((r = 0; r < reps; r++)); do
    seed=$((seed + 1))   # the same bytes for both in a round
    if [ -n "$PAIRED" ] && ((r % 2 == 0)); then settle; a=$(on_gluster "$@"); fi
    settle
    b=$("$@")
    if [ -n "$PAIRED" ] && ((r % 2 == 1)); then settle; a=$(on_gluster "$@"); fi
    ws+=("${b% *}") rs+=("${b#* }")
    if [ -n "$PAIRED" ]; then
      gw+=("${a% *}") gr+=("${a#* }")
      pw+=("$(awk -v x="${b% *}" -v y="${a% *}" 'BEGIN {printf "%.3f", (y > 0 ? x / y : 0)}')")
      pr+=("$(awk -v x="${b#* }" -v y="${a#* }" 'BEGIN {printf "%.3f", (y > 0 ? x / y : 0)}')")
    fi
  done
  R[$sys.$key.write]=$(echo "${ws[*]}" | median)
  R[$sys.$key.read]=$(echo "${rs[*]}" | median)
  if [ -n "$PAIRED" ]; then
    G[$sys.$key.write]=$(echo "${gw[*]}" | median) G[$sys.$key.read]=$(echo "${gr[*]}" | median)
    P[$sys.$key.write]=$(echo "${pw[*]}" | median) P[$sys.$key.read]=$(echo "${pr[*]}" | median)
    echo "$sys $key: rounds' ratios to GlusterFS: write ${pw[*]}, read ${pr[*]}"
  fi
}

# settle: the last run's background work over before the next run starts,
# whichever system runs next: no cache of STAT_TARGETS holding dirty bytes
# (its write-back done; 120 s at most) and the host's dirty page cache on
# disk (the backing's): a system's write-back falls on its own runs, never
# on the next system's.
settle() {
  local t d end=$((SECONDS + 120))
  for t in "${STAT_TARGETS[@]}"; do
    while ((SECONDS < end)); do
      # shellcheck disable=SC2086
      d=$("$(t_bin nvcachectl)" stats $t 2>/dev/null |
          awk -F': ' '$1 ~ /^(fcache_)?dirty_bytes$/ {print $2; exit}')
      [ "${d:-0}" = 0 ] && break
      sleep 0.2
    done
  done
  sync
}

# ior_run SYS WL: R[SYS.WL.write], R[SYS.WL.read] in MiB/s (medians).
ior_run() { paired "$1" "$2" ior_one "$1" "$2"; }

# cache_stats SYS: for the log, the cache's counters that explain a slow
# write (back-pressure, write-back under way) after each run.
cache_stats() {
  local t
  for t in "${STAT_TARGETS[@]}"; do
    # shellcheck disable=SC2086
    echo "  $1 $t: $("$(t_bin nvcachectl)" stats $t 2>/dev/null | awk -F': ' '
      $1 ~ /^(fcache_)?(dirty_bytes|written_back_bytes|writeback_queue|backpressure_waits|evictions|nvram_used_bytes|used_bytes|served_bytes)$/ {
        printf "%s=%s ", $1, $2 }')"
  done
}

# cache_block_size TARGET: the block size of the cache behind an nvcachectl
# stats target: block_size of a mount, fcache_block_size of a node, else
# what nvcached logged at start ("... in 16 KiB blocks").
cache_block_size() {
  local bs n
  # shellcheck disable=SC2086
  bs=$("$(t_bin nvcachectl)" stats $1 2>/dev/null |
       awk -F': ' '$1 == "block_size" || $1 == "fcache_block_size" {print $2; exit}')
  if [ -z "$bs" ] && [[ $1 == --node\ * ]]; then
    n=${1#--node }
    bs=$(sed -n 's/.*file cache: .* in \([0-9]*\) KiB blocks.*/\1/p' "$T_DIR/nvcached$n.log" | head -1)
    [ -n "$bs" ] && bs=$((bs * 1024))
  fi
  echo "${bs:-0}"
}

# fio_one SYS: 4 KiB random writes (job i in mount i, own file, fsync at
# the end), then random reads (job i reads job (i+1)%4's file through its
# own mount); prints "WRITE READ" (IOPS).
fio_one() {
  local sys=$1 rw key shift_ i args iops=()
  for rw in randwrite randread; do
    args=(--ioengine=psync --bs=4k --rw=$rw --size=${fio_mib}M --runtime="$fio_s"
          --time_based --group_reporting --output-format=json)
    shift_=0
    [ $rw = randwrite ] && args+=(--end_fsync=1) || shift_=1
    for i in 0 1 2 3; do
      args+=(--name=j$i --filename="${MNTS[$i]}/fio.$(((i + shift_) % 4))")
    done
    key=${rw#rand}
    fio "${args[@]}" >"$T_DIR/fio-$sys-$rw.json" 2>"$T_DIR/fio.err" ||
      t_fail "$sys: fio $rw failed: $(tail -3 "$T_DIR/fio.err")"
    iops+=("$(python3 -c 'import json, sys
print(round(json.load(open(sys.argv[1]))["jobs"][0][sys.argv[2]]["iops"]))' "$T_DIR/fio-$sys-$rw.json" "$key")")
  done
  rm -f "${MNTS[0]}"/fio.[0-3]
  echo "$sys rand4k: ${iops[0]} / ${iops[1]} IOPS" >&2
  echo "${iops[*]}"
}

# fio_run SYS: R[SYS.rand4k.write], R[SYS.rand4k.read] in IOPS (one
# round; FSB_CL_FIO_REPS rounds when paired).
fio_run() {
  local reps=1
  [ -n "$PAIRED" ] && reps=${FSB_CL_FIO_REPS:-3}
  paired "$1" rand4k fio_one "$1"
}

# files_one SYS: the small files workload over MNTS; prints "WRITE READ"
# (files/s of the 4 ranks together, each phase timed from its start to
# its last rank's end).
files_one() {
  local sys=$1 ph i t0 t1 pids rates=() d=sf-$seed
  for ph in write read; do
    pids=()
    t0=$(date +%s.%N)
    for i in 0 1 2 3; do
      local src=$i
      [ $ph = read ] && src=$(((i + 1) % 4))
      python3 "$(dirname "$0")/fs/smallfiles.py" $ph "${MNTS[$i]}/$d/$src" "$files" \
        $((seed * 4 + src)) >/dev/null 2>"$T_DIR/sf$i.err" &
      pids+=($!)
    done
    for i in 0 1 2 3; do
      wait "${pids[$i]}" || t_fail "$sys: small files $ph failed: $(cat "$T_DIR/sf$i.err")"
    done
    t1=$(date +%s.%N)
    rates+=("$(awk -v n=$((4 * files)) -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')")
  done
  rm -rf "${MNTS[0]:?}/$d"
  echo "$sys files: ${rates[0]} / ${rates[1]} files/s" >&2
  echo "${rates[*]}"
}

# anon_kib PID...: the sum of their anonymous resident memory (KiB).
anon_kib() {
  local p s=0 v
  for p in "$@"; do
    v=$(awk '$1 == "RssAnon:" {print $2}' "/proc/$p/status" 2>/dev/null)
    s=$((s + ${v:-0}))
  done
  echo "$s"
}

# measure SYS: every workload over MNTS (4 paths, node i's mount at i-1).
# With MEM_PIDS (the processes holding the cache index) and STAT_TARGETS
# (nvcachectl stats targets), also DRAM per cached block: their anonymous
# memory grown while the first workload's file is cached, over the blocks
# that file holds in NVRAM.
measure() {
  local sys=$1 wl before after used bs t used_all=0
  PAIRED=${2:-}
  before=$(anon_kib "${MEM_PIDS[@]}")
  for wl in "${workloads[@]}"; do ior_run "$sys" "$wl"; done
  if [ ${#MEM_PIDS[@]} -gt 0 ] && want_wl n1_1m; then
    mpiexec -n 4 "$ior" ${wl_args[n1_1m]} --mib "$mib" --seed 1 --keep --name mem "${MNTS[@]}" >/dev/null ||
      t_fail "$sys: ior (memory run) failed"
    after=$(anon_kib "${MEM_PIDS[@]}")
    for t in "${STAT_TARGETS[@]}"; do
      # shellcheck disable=SC2086
      used=$("$(t_bin nvcachectl)" stats $t 2>/dev/null |
             awk -F': ' '$1 == "nvram_used_bytes" || $1 == "fcache_used_bytes" {s += $2} END {print s + 0}')
      used_all=$((used_all + used))
    done
    bs=$(cache_block_size "${STAT_TARGETS[0]}")
    if [ "$used_all" -gt 0 ] && [ "${bs:-0}" -gt 0 ]; then
      R[$sys.mem_per_block]=$(awk -v a="$after" -v b="$before" -v u="$used_all" -v bs="$bs" \
        'BEGIN {printf "%.1f", (a - b) * 1024 / (u / bs)}')
      echo "$sys: anonymous memory $before -> $after KiB with $((used_all >> 20)) MiB in NVRAM, ${bs}-byte blocks: ${R[$sys.mem_per_block]} B a block"
      R[$sys.block_size]=$bs
    fi
    rm -f "${MNTS[0]}/mem"
  fi
  want_wl rand4k && fio_run "$sys"
  want_wl files && paired "$sys" files files_one "$sys"
  R[$sys.stale]=$(python3 "$probe" "${MNTS[0]}" "${MNTS[1]}" "$probes" | awk '{print $2}') ||
    t_fail "$sys: coherence probe failed"
  echo "$sys coherence: ${R[$sys.stale]} stale reads of $probes (overwrite through ${MNTS[0]}, read through ${MNTS[1]})"
  report "$sys"
  PAIRED=
}

# report SYS: its BENCH lines, ratios against GlusterFS (measured first).
report() {
  local sys=$1 wl ph unit name
  for wl in "${workloads[@]}" rand4k files; do
    for ph in write read; do
      [ -n "${R[$sys.$wl.$ph]:-}" ] || continue
      unit=MiB/s
      [ $wl = rand4k ] && unit=IOPS
      [ $wl = files ] && unit=files/s
      name=fs_cluster.$wl.$ph.${mib}M.$sys
      [ $wl = files ] && name=fs_cluster.files.$ph.${files}x4.$sys
      if [ "$sys" = gluster ]; then
        echo "BENCH $name ${R[$sys.$wl.$ph]} $unit"
      elif [ -n "$PAIRED" ]; then
        # GlusterFS in the same rounds; "paired": the rounds' own ratios
        echo "$(fsb_line "$name" "${R[$sys.$wl.$ph]}" "$unit" gluster "${G[$sys.$wl.$ph]}") paired ${P[$sys.$wl.$ph]}"
      else
        fsb_line "$name" "${R[$sys.$wl.$ph]}" "$unit" gluster "${R[gluster.$wl.$ph]}"
      fi
    done
  done
  echo "BENCH fs_cluster.coherence.$sys ${R[$sys.stale]} stale_reads_of_$probes"
  if [ -n "${R[$sys.mem_per_block]:-}" ]; then
    echo "BENCH fs_cluster.mem_per_block.$sys ${R[$sys.mem_per_block]} B_per_${R[$sys.block_size]}B_block"
  fi
}

wanted() { [[ $1 =~ ${FSB_CL_SYSTEMS:-.} ]]; }

skipped() { echo "BENCH fs_cluster.$1 skipped: $2"; }

# --- GlusterFS (the anchor: without it, nothing to compare) -----------------
MEM_PIDS=() STAT_TARGETS=()
dfs_gluster_up "$T_DIR/gluster" || t_skip "GlusterFS: $DFS_WHY"
MNTS=("${DFS_MNTS[@]}") GMNTS=("${DFS_MNTS[@]}")
measure gluster
# GlusterFS stays up: the cross-node nvcachefs runs below alternate with
# it, round by round

# --- MooseFS -----------------------------------------------------------------
if ! wanted moosefs; then
  :
elif dfs_moosefs_up "$T_DIR/moosefs"; then
  MNTS=("${DFS_MNTS[@]}")
  measure moosefs
  dfs_moosefs_down
else
  skipped moosefs "$DFS_WHY"
  dfs_moosefs_down
fi

# --- the slow backing, then nvcachefs over it --------------------------------
if [ "${FSB_SLOW:-1}" = 1 ] && fsb_slowpfs "$T_DIR/slowpfs"; then
  back=$T_DIR/slowpfs
else
  back=$T_DIR/backing
  echo "backing = a plain directory on the local disk ($back)"
fi
mkdir -p "$back/direct" "$back/nv1" "$back/nvcl"
MNTS=("$back/direct" "$back/direct" "$back/direct" "$back/direct")
wanted backing && measure backing

if wanted nvcachefs; then
  fsb_mount_nv "$T_DIR/nv1" "$back/nv1" "cache_size=$cache"
  nv1pid=$FSB_PID
  MNTS=("$T_DIR/nv1" "$T_DIR/nv1" "$T_DIR/nv1" "$T_DIR/nv1")
  MEM_PIDS=("$nv1pid") STAT_TARGETS=("$T_DIR/nv1")
  measure nvcachefs
  MEM_PIDS=() STAT_TARGETS=()
  fsb_umount "$T_DIR/nv1" "$nv1pid"
fi

# --- cross-node nvcachefs: 4 nvcached + 4 mounts over one backing dir --------
# nvcl_up TAG OPTS: a fresh cluster (its own NVRAM files, backing
# directory and ports: replicas and stripe_unit are fixed by a node's
# first mount), every mount with OPTS; returns 1 with the reason in
# NVCL_WHY where this build lacks the mode or it does not start. The
# nodes' file caches are in $T_SHM, as the one-node mount's NVRAM is,
# where nvcached can be told so.
nvcl_up() {
  local tag=$1 opts=$2 nvfs nvd ports i cnv=()
  nvfs=$(t_bin nvcachefs) nvd=$(t_bin nvcached)
  "$nvfs" --help 2>&1 | grep -q 'cluster=' ||
    { NVCL_WHY="the built nvcachefs has no cluster= option (cross-node mode not built)"; return 1; }
  "$nvd" --help 2>&1 | grep -q -- '--cache-size' ||
    { NVCL_WHY="the built nvcached has no --cache-size option"; return 1; }
  head -c 32 /dev/urandom | base64 >"$T_DIR/secret"
  chmod 600 "$T_DIR/secret"
  read -r -a ports < <(cluster_free_ports 4)
  { echo "secret secret"
    for i in 1 2 3 4; do echo "node $i 127.0.0.1:${ports[$((i - 1))]}"; done; } >"$T_DIR/cluster.conf"
  NVCL_PIDS=() NVCL_MNTS=() NVCL_FSPIDS=() NVCL_TAG=$tag
  mkdir -p "$back/nvcl$tag"
  for i in 1 2 3 4; do
    "$nvd" --help 2>&1 | grep -q -- '--cache-nvram' && cnv=(--cache-nvram "$T_SHM/fcache$tag$i.nvram")
    "$nvd" --cluster "$T_DIR/cluster.conf" --node $i --cache-size "$cache" "${cnv[@]}" -f --no-mlock \
      >"$T_DIR/nvcached$tag$i.log" 2>&1 &
    NVCL_PIDS+=($!)
    t_cleanup "kill $!"
  done
  for i in 1 2 3 4; do
    t_wait 20 cluster_sees $i 3 ||
      { NVCL_WHY="nvcached $i does not see its peers: $(tail -2 "$T_DIR/nvcached$tag$i.log")"; return 1; }
  done
  for i in 1 2 3 4; do
    mkdir -p "$T_DIR/nvcl$tag$i"
    "$nvfs" "$T_DIR/nvcl$tag$i" -o "backing=$back/nvcl$tag,cluster=$T_DIR/cluster.conf,node=$i${opts:+,$opts}" -f \
      >"$T_DIR/nvcl$tag$i.log" 2>&1 &
    NVCL_FSPIDS+=($!)
    NVCL_MNTS+=("$T_DIR/nvcl$tag$i")
    t_cleanup "t_umount '$T_DIR/nvcl$tag$i'; kill $!"
    t_wait 30 t_is_mounted "$T_DIR/nvcl$tag$i" ||
      { NVCL_WHY="mount $i with cluster= failed: $(tail -2 "$T_DIR/nvcl$tag$i.log")"; return 1; }
  done
}

nvcl_down() {
  local i
  for ((i = 0; i < ${#NVCL_MNTS[@]}; i++)); do
    if t_is_mounted "${NVCL_MNTS[$i]}"; then
      fsb_umount "${NVCL_MNTS[$i]}" "${NVCL_FSPIDS[$i]}"
    else
      kill "${NVCL_FSPIDS[$i]}" 2>/dev/null
    fi
  done
  for i in "${NVCL_PIDS[@]}"; do kill "$i" 2>/dev/null; wait "$i" 2>/dev/null; done
  rm -f "$T_SHM/fcache$NVCL_TAG"*.nvram*   # the next cluster's room in /dev/shm
}

# the default, then replicas=2 (every block sent to the next node too
# before a write returns: what a node lost for good costs)
for variant in "nvcachefs-cluster||" "nvcachefs-cluster-r2|r2|replicas=2"; do
  IFS='|' read -r sys tag opts <<<"$variant"
  NVCL_FSPIDS=() NVCL_MNTS=() NVCL_PIDS=() NVCL_TAG=$tag
  if ! wanted "$sys"; then
    continue
  elif nvcl_up "$tag" "$opts"; then
    MNTS=("${NVCL_MNTS[@]}")
    MEM_PIDS=("${NVCL_PIDS[@]}") STAT_TARGETS=("--node 1" "--node 2" "--node 3" "--node 4")
    measure "$sys" paired
  else
    skipped "$sys" "$NVCL_WHY"
  fi
  nvcl_down
done

DFS_MNTS=("${GMNTS[@]}")
dfs_gluster_down
exit 0
