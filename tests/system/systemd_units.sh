#!/usr/bin/env bash
# systemd_units.sh - the systemd units that 'meson install' installs:
# systemd-analyze verify passes on them (syntax, executables, ordering
# cycles), and the command lines of nvcached.service and nvswapd@.service,
# run as systemd would run them (with /etc/nvcache and /run/nvcache moved
# into the test's directory), start daemons that answer.
T_TIMEOUT=${T_TIMEOUT:-120}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_common.bash"
t_require_root
t_require_cmd systemd-analyze meson nbdinfo
export NVCACHE_RUN_DIR=$T_DIR/run
root=$T_DIR/root

meson install -C "$NVCACHE_BUILD" --destdir "$root" >"$T_DIR/install.log" 2>&1 ||
  t_fail "meson install failed: $(tail -5 "$T_DIR/install.log")"
units=$(dirname "$(find "$root" -name nvcached.service | head -1)")
[ -f "$units/nvcached.service" ] || t_fail "meson install put no nvcached.service under $root"
for u in nvswapd@.service nvcache-swap@.service; do
  [ -f "$units/$u" ] || t_fail "meson install put no $u next to nvcached.service"
done
bindir=$(sed -n 's#^ExecStart=\(/[^ ]*\)/nvswapd .*#\1#p' "$units/nvswapd@.service")
[ -x "$root$bindir/nvswapd" ] || t_fail "nvswapd@.service runs $bindir/nvswapd, not installed there"

echo "== systemd-analyze verify"
# The units name the installed binaries; point them at the test's copy.
mkdir -p "$T_DIR/units"
for f in "$units"/*.service; do
  sed "s#$bindir/#$root$bindir/#g" "$f" >"$T_DIR/units/$(basename "$f")"
done
ln -s nvswapd@.service "$T_DIR/units/nvswapd@swap.service"
ln -s nvcache-swap@.service "$T_DIR/units/nvcache-swap@swap.service"
( cd "$T_DIR/units" && systemd-analyze verify --man=no nvcached.service \
    nvswapd@swap.service nvcache-swap@swap.service ) >"$T_DIR/verify.out" 2>&1
rc=$?
cat "$T_DIR/verify.out"
# an ordering cycle is only a message, with exit 0
[ $rc = 0 ] && [ ! -s "$T_DIR/verify.out" ] || t_fail "systemd-analyze verify: exit $rc"

# run_unit UNIT CONF LOG [INSTANCE]: the unit's ExecStart run as systemd
# runs it (EnvironmentFile CONF, WorkingDirectory, then the command), with
# /etc/nvcache and /run/nvcache moved into $T_DIR and %i expanded; in the
# background, its pid in $upid.
run_unit() {
  local line
  line=$(sed -n 's/^ExecStart=//p' "$T_DIR/units/$1" | head -1 |
    sed -e "s#/etc/nvcache#$T_DIR/etc#g" -e "s#/run/nvcache#$T_DIR/run#g" -e "s#%i#${4:-}#g")
  echo "$line"
  ( set -a; . "$2"; set +a; cd "$T_DIR/etc" && eval "exec $line" ) >"$3" 2>&1 &
  upid=$!
  t_cleanup "kill $upid 2>/dev/null"
}

echo "== nvcached.service's command line, with /etc/nvcache/{cluster.conf,node,nvcached.conf}"
mkdir -p "$T_DIR/etc" "$T_DIR/run"
read -r -a ports < <(cluster_free_ports 2)
head -c 32 /dev/urandom | base64 >"$T_DIR/etc/secret"
chmod 600 "$T_DIR/etc/secret"
printf 'secret secret\nnode 1 127.0.0.1:%s\nnode 2 127.0.0.1:%s\n' "${ports[0]}" "${ports[1]}" \
  >"$T_DIR/etc/cluster.conf"
echo 1 >"$T_DIR/etc/node"
echo 'NVCACHED_OPTS="--heartbeat 200 --timeout 1000"' >"$T_DIR/etc/nvcached.conf"
run_unit nvcached.service "$T_DIR/etc/nvcached.conf" "$T_DIR/nvcached.log"
t_wait 20 test -S "$T_DIR/run/node-1.sock" || t_fail "nvcached did not start: $(tail -3 "$T_DIR/nvcached.log")"
[ "$(cluster_stat 1 node)" = 1 ] || t_fail "the node that answers is not node 1"
[ "$(cluster_stat 1 heartbeat_ms)" = 200 ] || t_fail "NVCACHED_OPTS not passed"

echo "== nvswapd@swap.service's command line, with /etc/nvcache/nvswapd-swap.conf"
echo "NVSWAPD_OPTS=\"--size 16M --mram 16M --nvram $T_SHM/swap.mram\"" >"$T_DIR/etc/nvswapd-swap.conf"
run_unit nvswapd@swap.service "$T_DIR/etc/nvswapd-swap.conf" "$T_DIR/nvswapd.log" swap
t_wait 20 test -S "$T_DIR/run/nbd-swap.sock" || t_fail "nvswapd did not start: $(tail -3 "$T_DIR/nvswapd.log")"
nbdinfo --size "nbd+unix:///swap?socket=$T_DIR/run/nbd-swap.sock" >"$T_DIR/size" ||
  t_fail "nbdinfo cannot read export 'swap'"
[ "$(cat "$T_DIR/size")" = 16777216 ] || t_fail "export size $(cat "$T_DIR/size"), want 16 MiB"
echo "ok"
