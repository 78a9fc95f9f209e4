#!/usr/bin/env bash
# fs_mount_log.sh - the daemon that mount(8) leaves (mount.fuse3, as
# `mount -t fuse.nvcachefs` and fstab run it) logs to its log file, never
# to the caller's terminal: the mount command prints nothing, the file has
# every line (dated) through to the unmount's; a mount that is refused
# says why on the caller's stderr, and in the file.
T_TIMEOUT=${T_TIMEOUT:-90}
. "$(dirname "$0")/lib.sh"
t_require_root
t_require_cmd mount.fuse3 fusermount3
export NVCACHE_RUN_DIR=$T_DIR/run
bin=$(t_bin nvcachefs)
mkdir -p "$T_DIR/b" "$T_DIR/m" "$T_DIR/m2"

# daemon_pid MNT: the pid of the daemon serving MNT (its control socket)
daemon_pid() {
  "$(t_bin nvcachectl)" status --json --interval 0 2>/dev/null |
    python3 -c 'import json,sys; m=sys.argv[1]
print(*[d["pid"] for d in json.load(sys.stdin)["daemons"] if d["name"] == m])' "$1"
}

echo "== a mount by mount.fuse3: nothing on the caller's terminal"
mount.fuse3 "$bin#$T_DIR/b" "$T_DIR/m" \
  -o "cache_size=32M,nvram=$T_SHM/nv,writeback_delay=0.2,log=$T_DIR/fs.log" >"$T_DIR/out" 2>&1 ||
  t_fail "mount failed: $(cat "$T_DIR/out")"
t_cleanup "t_umount $T_DIR/m"
t_is_mounted "$T_DIR/m" || t_fail "not mounted"
[ ! -s "$T_DIR/out" ] || t_fail "the mount printed on the caller's terminal: $(cat "$T_DIR/out")"
pid=$(daemon_pid "$T_DIR/m")
[ -n "$pid" ] || t_fail "no daemon answers for $T_DIR/m"
t_cleanup "kill -9 $pid 2>/dev/null"
grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+ nvcachefs\[[0-9]+\] info: mounted ' "$T_DIR/fs.log" ||
  t_fail "no dated 'mounted' line in the log file: $(cat "$T_DIR/fs.log")"
echo hello >"$T_DIR/m/f" || t_fail "write through the mount"

echo "== a refused second mount of the same backing: the reason on stderr and in its log"
if mount.fuse3 "$bin#$T_DIR/b" "$T_DIR/m2" \
  -o "cache_size=32M,nvram=$T_SHM/nv2,log=$T_DIR/fs2.log" >"$T_DIR/out2" 2>&1; then
  t_umount "$T_DIR/m2"
  t_fail "a second mount of one backing was not refused"
fi
grep -q "error: backing dir .* is in use by another nvcachefs" "$T_DIR/out2" ||
  t_fail "the refusal is not on the caller's stderr: $(cat "$T_DIR/out2")"
grep -q "error: backing dir .* is in use" "$T_DIR/fs2.log" || t_fail "the refusal is not in its log file"
grep -q "info:" "$T_DIR/out2" && t_fail "info lines on the caller's stderr: $(cat "$T_DIR/out2")"

echo "== unmount: the write-back's last line is in the file, not lost to a closed terminal"
fusermount3 -u "$T_DIR/m" || t_fail "unmount"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && t_fail "the daemon did not exit after the unmount"
grep -q "info: unmount: everything written back" "$T_DIR/fs.log" ||
  t_fail "no unmount line in the log: $(tail -3 "$T_DIR/fs.log")"
[ "$(cat "$T_DIR/b/f")" = hello ] || t_fail "the file did not reach the backing"
echo "ok"
