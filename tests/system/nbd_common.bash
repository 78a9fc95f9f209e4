# nbd_common.bash - helpers of the nvswapd system tests (sourced after
# lib.sh; not a test itself, hence not *.sh).

# nbd_start SOCK NAME [nvswapd options...]: start nvswapd in the foreground
# on a Unix socket (or, with SOCK "-", on whatever --listen says), with its
# MRAM file in $T_SHM and its control socket in $T_DIR/run. Sets NBD_PID.
# NBD_BIN overrides the binary (a benchmark's A/B of two builds).
nbd_start() {
  local sock=$1 name=$2; shift 2
  export NVCACHE_RUN_DIR=$T_DIR/run
  local where=()
  [ "$sock" != - ] && where=(--unix "$sock")
  "${NBD_BIN:-$(t_bin nvswapd)}" -f "${where[@]}" --name "$name" \
    --nvram "$T_SHM/$name.mram" "$@" >"$T_DIR/nvswapd-$name.log" 2>&1 &
  NBD_PID=$!
  t_cleanup "kill $NBD_PID 2>/dev/null; wait $NBD_PID 2>/dev/null"
  t_wait 30 test -S "$NVCACHE_RUN_DIR/swap-$name.sock" ||
    t_fail "nvswapd did not start: $(tail -5 "$T_DIR/nvswapd-$name.log")"
}

# nbd_stat NAME KEY: one value from the daemon's control socket.
nbd_stat() {
  "$(t_bin nvcachectl)" stats --swap "$1" | awk -v k="$2:" '$1 == k { print $2 }'
}

# A free TCP port on 127.0.0.1.
nbd_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

