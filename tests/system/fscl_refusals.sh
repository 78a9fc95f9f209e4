#!/usr/bin/env bash
# fscl_refusals.sh - a cluster mount refused with the reason, nothing made:
# a node id not in the cluster file, a wrong secret, cluster files that
# disagree, a node without a file cache, a backing directory other than the
# one the nodes serve, another replicas setting or stripe unit. Then
# hostile frames of the file cache's messages: each is answered "bad
# frame" and its connection closed, the node logs it and goes on serving
# the mounts; and file requests of two mount runs on one connection: the
# second is refused.
T_TIMEOUT=${T_TIMEOUT:-60}
. "$(dirname "$0")/lib.sh"
FSCL_N=2
. "$(dirname "$0")/fscl_common.bash"
here=$(dirname "$0")
fscl_start
bin=$(t_bin nvcachefs)
mkdir -p "$T_DIR/mx" "$T_DIR/other"

# refused MSG OPTS: a mount with OPTS fails, says MSG, leaves nothing
refused() {
  local msg=$1 out
  out=$(timeout 20 "$bin" "$T_DIR/mx" -f -o "$2" 2>&1) && t_fail "mounted with $2"
  t_is_mounted "$T_DIR/mx" && t_fail "a mount is left on mx ($2)"
  grep -q -- "$msg" <<<"$out" || t_fail "refusal of $2 does not say '$msg': $out"
  local made; made=$(find "$T_DIR/b" "$T_DIR/other" -mindepth 1)
  [ -z "$made" ] || t_fail "a refused mount made files: $made"
  t_log "refused: $msg"
}
refused "node 9 is not in it" "backing=$T_DIR/b,cluster=$conf,node=9"
# another secret
head -c 32 /dev/urandom | base64 >"$T_DIR/secret2"; chmod 600 "$T_DIR/secret2"
sed 's/^secret .*/secret secret2/' "$conf" >"$T_DIR/wrong-secret.conf"
refused "node 1 unreachable or refusing us" "backing=$T_DIR/b,cluster=$T_DIR/wrong-secret.conf,node=1"
# the same nodes under another name: the digests differ
sed 's/127.0.0.1:/localhost:/' "$conf" >"$T_DIR/other-names.conf"
refused "reads another cluster file" "backing=$T_DIR/b,cluster=$T_DIR/other-names.conf,node=1"
# another backing directory than the nodes serve
refused "node 1 serves backing $T_DIR/b (its NVRAM file's), not $T_DIR/other" "backing=$T_DIR/other,cluster=$conf,node=1"
# a one-node nvcachefs over the cluster's backing (its nodes and mounts
# share it), and a cluster mount over a one-node mount's: two caches
# over one backing would overwrite each other's write-backs
refused "is in use by another nvcachefs (a one-node mount, or a cluster's" "backing=$T_DIR/b,nvram=$T_SHM/one,cache_size=16M"
mkdir -p "$T_DIR/m1node"
t_fs_mount "$T_DIR/m1node" "backing=$T_DIR/other,nvram=$T_SHM/one,cache_size=16M" "$T_DIR/one.log"
rm -f "$T_SHM/one"
refused "is in use by a one-node nvcachefs" "backing=$T_DIR/other,cluster=$conf,node=1"
t_umount "$T_DIR/m1node"
# another replicas setting than the nodes' (replicas=1, the first
# mounts'), and one out of range
refused "serves replicas=1; this mount asks replicas=2" "backing=$T_DIR/b,cluster=$conf,node=1,replicas=2"
refused "replicas=3: 1 or 2" "backing=$T_DIR/b,cluster=$conf,node=1,replicas=3"
# another stripe unit than the nodes' (1M, the first mounts' default):
# a block would have two owners
refused "serves stripe_unit=1M; this mount asks stripe_unit=auto" "backing=$T_DIR/b,cluster=$conf,node=1,stripe_unit=auto"
# a node without a file cache (its own one-node cluster)
read -r p3 < <(cluster_free_ports 1)
printf 'secret secret\nnode 1 127.0.0.1:%s\n' "$p3" >"$T_DIR/bare.conf"
NVCACHE_RUN_DIR=$T_DIR/run-bare "$(t_bin nvcached)" --cluster "$T_DIR/bare.conf" --node 1 -f --no-mlock \
  >"$T_DIR/bare.log" 2>&1 &
bare=$!
t_cleanup "kill -9 $bare"
mkdir -p "$T_DIR/run-bare"
t_wait 10 grep -q listening "$T_DIR/bare.log" || t_fail "the bare node does not start"
refused "has no file cache" "backing=$T_DIR/b,cluster=$T_DIR/bare.conf,node=1"
kill "$bare"

# hostile frames to node 2, after the handshake
before=$(fscl_stat 2 bad_frames)
for k in range short read path handle gap marklist replica replicaset inval watch; do
  out=$(python3 "$here/fscl_frames.py" $k | "$(t_bin nvcache-client)" --cluster "$conf" --node 2 raw)
  [[ $out == "reply ERROR status=bad frame"* ]] || t_fail "hostile frame '$k': $out"
done
after=$(fscl_stat 2 bad_frames)
[ $((after - before)) -eq 11 ] || t_fail "bad_frames went from $before to $after, not by 11"
t_wait 5 grep -q "bad frame from .*file range over the block cap" "$T_DIR/node2-fs.log" || t_fail "no log line for the bad range"
# one connection, file requests of two mount runs: the second is refused
# (a connection holds one mount's run: fcache_mount_conn)
out=$(python3 "$here/fscl_frames.py" tworuns | "$(t_bin nvcache-client)" --cluster "$conf" --node 2 raw-all)
[[ $(sed -n 1p <<<"$out") == *"status=not found"* &&
   $(sed -n 2p <<<"$out") == *"status=bad frame text=a file request of another mount run"* ]] ||
  t_fail "two mount runs on one connection: $out"
# the nodes go on: a file through both mounts
head -c 300000 /dev/urandom >"$T_DIR/ref"
cp "$T_DIR/ref" "$T_DIR/m1/after" && cmp "$T_DIR/ref" "$T_DIR/m2/after" || t_fail "the nodes stopped serving after the hostile frames"
t_log "11 hostile file frames refused, the nodes serve on"
fscl_stop
