# ckpt_common.bash - sourced by the persistent-window tests (ckpt_*.sh) and
# the benchmark: the built mini-app and library, and how to run them.
#
#   ck_run OUT [ENV=VAL...] -- HPCCG-ARGS   4 ranks under libnvckpt (the
#                                           ranks only: -genv LD_PRELOAD; with
#                                           NVCACHE_CKPT=off without it), bounded
#   ck_start OUT [ENV=VAL...] -- ARGS       the same in the background ($ck_pid)
#   ck_result OUT                           the "result ..." line of a run
# They run $CK_APP (the CG mini-app); CK_APP=$CK_DYN before a call runs the
# dynamic-window program instead.
t_require_cmd mpicc mpiexec
CK_LIB=$NVCACHE_BUILD/pmem/mpi/libnvckpt.so
[ -f "$CK_LIB" ] || t_skip "libnvckpt.so not built (mpich not found at meson setup)"
CK_APP=$(t_bin hpccg) || exit 1
CK_DYN=$(t_bin dynwin) || exit 1   # a dynamic window: CK_APP=$CK_DYN ck_run ...
# mpiexec as root: hydra's fork launcher, no ssh.
export HYDRA_LAUNCHER=fork
# Four ranks on two cores: busy polling ranks starve each other.
export MPIR_CVAR_POLLS_BEFORE_YIELD=1
# In the sanitizer build: mpich and UCX keep memory to the end by design;
# LeakSanitizer would fail every run for it. The rest of ASan stays on.
# And ASan's runtime must come first among the preloaded libraries.
CK_PRELOAD=$CK_LIB
if [[ "$(ldd "$CK_APP")" == *libasan* ]]; then   # (not ldd | grep -q: SIGPIPE under pipefail)
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
  CK_PRELOAD="$(ldd "$CK_LIB" | awk '/libasan/ {print $3}'):$CK_LIB"
fi
# the NVRAM's directory: in CK_NVRAM_DIR if the caller set one (the
# benchmark's tmpfs with 2 MiB pages), else in this test's /dev/shm one
export NVCACHE_CKPT_DIR=${CK_NVRAM_DIR:-$T_SHM}/nvram
export NVCACHE_CKPT_JOB=cg
mkdir -p "$NVCACHE_CKPT_DIR" "$T_DIR/pids"

_ck_cmd() {  # OUT ENV... -- ARGS : into ck_out, ck_env, ck_args
  local out=$1; shift
  ck_env=()
  ck_pre=(-genv LD_PRELOAD "$CK_PRELOAD")
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    ck_env+=("$1")
    [ "$1" = NVCACHE_CKPT=off ] && ck_pre=()   # the plain program
    shift
  done
  shift
  ck_out=$out
  ck_args=("$@")
}

ck_run() {
  _ck_cmd "$@"
  env "${ck_env[@]}" timeout 120 mpiexec "${ck_pre[@]}" -n 4 "$CK_APP" \
    "${ck_args[@]}" >"$ck_out" 2>"$ck_out.err"
}

ck_start() {
  _ck_cmd "$@"
  rm -f "$T_DIR"/pids/pid.*
  env "${ck_env[@]}" timeout 120 mpiexec "${ck_pre[@]}" -n 4 "$CK_APP" --piddir "$T_DIR/pids" \
    "${ck_args[@]}" >"$ck_out" 2>"$ck_out.err" &
  ck_pid=$!
}

ck_result() { grep '^result ' "$1"; }

# ck_wait_iter OUT K : wait (20 s at most) until rank 0 reported iteration K.
ck_wait_iter() {
  local end=$((SECONDS + 20))
  until grep -q "^iter $2\$" "$1" 2>/dev/null; do
    [ $SECONDS -ge $end ] && return 1
    kill -0 "$ck_pid" 2>/dev/null || return 1
    sleep 0.01
  done
}

ck_rank_pids() { cat "$T_DIR"/pids/pid.* 2>/dev/null; }
