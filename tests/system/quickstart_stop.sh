#!/usr/bin/env bash
# quickstart_stop.sh - the README's first command, started and stopped the
# way a new user does: tools/quickstart.sh mounts nvcachefs (here on a
# scratch mount point and backing dir) for every user, with the backing's
# permissions, and starts nvswapd; a file copied
# in just before `--stop` must be whole in the backing directory as soon
# as `--stop` returns (fusermount3 -u returns before the daemon has written
# back: --stop must wait for it), and nothing of ours may be left running.
T_TIMEOUT=${T_TIMEOUT:-180}
. "$(dirname "$0")/lib.sh"
t_require_root
t_require_cmd fusermount3 pgrep setpriv
root=$(cd "$(dirname "$0")/../.." && pwd)
# quickstart builds and runs build/; one run of this test is enough
[ "$(basename "$NVCACHE_BUILD")" = build ] || t_skip "quickstart runs build/, tested with that build only"
export NVCACHE_RUN_DIR=$T_DIR/run
mnt=$T_DIR/mnt backing=$T_DIR/backing
nv=/dev/shm/nvcache-$(echo "${mnt#/}" | tr / -).nvram
qs() { bash "$root/tools/quickstart.sh" --mount "$mnt" --backing "$backing" "$@"; }
t_cleanup "rm -f $nv /dev/shm/nvswapd-swap.mram"
t_cleanup "qs --stop >/dev/null 2>&1; fusermount3 -uz $mnt 2>/dev/null"

NVCACHE_SWAP_SIZE=64M qs >"$T_DIR/start.out" 2>&1 || { cat "$T_DIR/start.out" >&2; t_fail "quickstart did not start"; }
grep -q "mounted over $backing" "$T_DIR/start.out" || t_fail "no mount message: $(cat "$T_DIR/start.out")"
t_is_mounted "$mnt" || t_fail "$mnt is not mounted"
[ -S "$NVCACHE_RUN_DIR/nvswapd.sock" ] || t_fail "nvswapd socket missing"
fspid=$(pgrep -f "nvcachefs $mnt( |\$)" | head -1)
swpid=$(cat "$NVCACHE_RUN_DIR/quickstart/nvswapd.pid")
[ -n "$fspid" ] && [ -n "$swpid" ] || t_fail "no nvcachefs or nvswapd process"
t_cleanup "kill -9 $fspid $swpid 2>/dev/null"

# every user may use the mount, with the backing's permissions
chmod 711 "$T_DIR"
mkdir -m 1777 "$mnt/scratch"
printf 'root only' >"$mnt/private" && chmod 600 "$mnt/private"
nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
nobody sh -c "echo mine >$mnt/scratch/nobody-file" 2>"$T_DIR/err" ||
  t_fail "a non-root user cannot write in a 1777 directory of the mount: $(cat "$T_DIR/err")"
nobody cat "$mnt/private" >/dev/null 2>&1 && t_fail "a non-root user read a 0600 root file through the mount"
[ "$(stat -c %U "$backing/scratch/nobody-file")" = nobody ] || t_fail "a user's new file is not owned by that user"

head -c 96M /dev/urandom >"$T_DIR/data"
for i in 1 2 3; do cp "$T_DIR/data" "$mnt/f$i"; done
qs --stop >"$T_DIR/stop.out" 2>&1 || { cat "$T_DIR/stop.out" >&2; t_fail "--stop failed"; }
# right away: the backing must hold every byte
for i in 1 2 3; do
  cmp "$T_DIR/data" "$backing/f$i" || t_fail "f$i incomplete in the backing dir when --stop returned"
done
kill -0 "$fspid" 2>/dev/null && t_fail "nvcachefs (pid $fspid) still running after --stop"
kill -0 "$swpid" 2>/dev/null && t_fail "nvswapd (pid $swpid) still running after --stop"
t_is_mounted "$mnt" && t_fail "$mnt still mounted"
[ -e /dev/shm/nvswapd-swap.mram ] && t_fail "nvswapd's MRAM file left in /dev/shm after --stop"
grep -q "everything written back" "$T_DIR/stop.out" || t_fail "--stop did not say it wrote back: $(cat "$T_DIR/stop.out")"
t_log "3 x 96 MiB copied in, whole in the backing dir when --stop returned"
t_log PASS
