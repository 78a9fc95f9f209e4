#!/usr/bin/env bash
# cluster_daemon.sh - nvcached as an operator meets it: each bad cluster
# file, secret or option is refused with a clear message and exit status 1
# (2 for usage); a second daemon for the same node or on a taken port is
# refused, and removes the file cache NVRAM file it created;
# without -f it returns only once it serves (logging to syslog, or to
# /var/log/nvcached-ID.log with no syslog daemon), and SIGTERM stops it.
T_TIMEOUT=${T_TIMEOUT:-60}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_common.bash"

nvcached=$(t_bin nvcached) || exit 1
ctl=$(t_bin nvcachectl) || exit 1
t_require_cmd python3
export NVCACHE_RUN_DIR=$T_DIR/run

read -r -a ports < <(cluster_free_ports 2)
head -c 32 /dev/urandom | base64 >"$T_DIR/secret"
chmod 600 "$T_DIR/secret"
good=$T_DIR/good.conf
printf 'secret secret\nnode 1 127.0.0.1:%s\nnode 2 127.0.0.1:%s\n' "${ports[0]}" "${ports[1]}" >"$good"

# expect_fail STATUS PATTERN ARGS...: nvcached exits STATUS, stderr matches.
expect_fail() {
  local want=$1 pat=$2; shift 2
  timeout 10 "$nvcached" "$@" -f >"$T_DIR/out" 2>&1
  local rc=$?
  [ $rc -eq "$want" ] || t_fail "nvcached $*: exit $rc, expected $want: $(cat "$T_DIR/out")"
  grep -q -- "$pat" "$T_DIR/out" || t_fail "nvcached $*: message does not say '$pat': $(cat "$T_DIR/out")"
}

bad() {  # bad NAME CONTENT: write a cluster file
  printf '%b' "$2" >"$T_DIR/$1.conf"
  echo "$T_DIR/$1.conf"
}
expect_fail 2 usage --node 1
expect_fail 2 usage --cluster "$good"
expect_fail 2 "not a node id" --cluster "$good" --node 0
expect_fail 2 "not a node id" --cluster "$good" --node x
expect_fail 2 "not a number of milliseconds" --cluster "$good" --node 1 --heartbeat -5
expect_fail 2 "not a size" --cluster "$good" --node 1 --reserve lots
expect_fail 1 "node 3 is not in" --cluster "$good" --node 3
expect_fail 1 "nope.conf: No such file" --cluster "$T_DIR/nope.conf" --node 1
expect_fail 1 "dup.conf:3: node 1 listed twice" --cluster "$(bad dup 'secret secret\nnode 1 127.0.0.1:1\nnode 1 127.0.0.1:2\n')" --node 1
expect_fail 1 "port.conf:2: address" --cluster "$(bad port 'secret secret\nnode 1 127.0.0.1:99999\n')" --node 1
expect_fail 1 "no 'secret FILE' line" --cluster "$(bad nosecret 'node 1 127.0.0.1:5\n')" --node 1
expect_fail 1 "unknown keyword 'nodes'" --cluster "$(bad kw 'secret secret\nnodes 1 127.0.0.1:5\n')" --node 1
chmod 644 "$T_DIR/secret"
expect_fail 1 "chmod 600" --cluster "$good" --node 1
chmod 600 "$T_DIR/secret"
printf 'short\n' >"$T_DIR/short"
chmod 600 "$T_DIR/short"
expect_fail 1 "5 bytes" --cluster "$(bad short 'secret short\nnode 1 127.0.0.1:5\n')" --node 1
expect_fail 1 "must exceed two heartbeat" --cluster "$good" --node 1 --heartbeat 500 --timeout 900
# Daemon mode: returns 0 once serving; the control socket answers.
"$nvcached" --cluster "$good" --node 1 --no-mlock || t_fail "nvcached did not start as a daemon"
pid=$(pgrep -f -n "nvcached --cluster $good --node 1")
[ -n "$pid" ] || t_fail "no daemon process"
t_cleanup "kill -9 $pid 2>/dev/null"
"$ctl" stats --node 1 | grep -q "^node: 1$" || t_fail "control socket of the daemon"
# A second nvcached for node 1 is refused: its port is taken.
expect_fail 1 "cannot listen on 127.0.0.1:${ports[0]}: Address already in use" --cluster "$good" --node 1
# With a file cache, the NVRAM file that refused start created goes
# with it (--cache-size 8G would keep 8 GiB of tmpfs)
nv="$T_DIR/second.nvram"
expect_fail 1 "Address already in use" --cluster "$good" --node 1 --cache-size 16M \
  --cache-nvram "$nv" --no-mlock
[ ! -e "$nv" ] || t_fail "a refused nvcached left the NVRAM file it created: $(ls -la "$nv")"
grep -q "removed file cache NVRAM file $nv" "$T_DIR/out" ||
  t_fail "a refused nvcached does not say it removed its NVRAM file: $(cat "$T_DIR/out")"
# The same without -f: the refusal is on stderr too (it went to syslog,
# which may not exist: the start failed with no word). And a relative
# --flash is the caller's directory's, not /'s (it chdir'ed to /).
timeout 10 "$nvcached" --cluster "$good" --node 1 --no-mlock >"$T_DIR/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "Address already in use" "$T_DIR/out" ||
  t_fail "second daemon without -f: exit $rc, stderr: $(cat "$T_DIR/out")"
# SIGTERM stops it and removes the socket.
kill -TERM "$pid"
t_wait 10 test ! -e "$NVCACHE_RUN_DIR/node-1.sock" || t_fail "daemon did not stop on SIGTERM"
t_wait 5 bash -c "! kill -0 $pid 2>/dev/null" || t_fail "daemon still running"
# detached with no syslog daemon listening, it logged to a file (the
# quick start's name for node 1's log; lines of other runs may be there)
if [ ! -S /dev/log ]; then
  grep -q "nvcached\[$pid\] info: node 1 stopped" /var/log/nvcached-1.log ||
    t_fail "a detached nvcached with no syslog daemon logged nowhere: $(tail -3 /var/log/nvcached-1.log 2>&1)"
fi
# Its port held for a moment by a socket that does not listen (as an
# outgoing connection's may, in the ephemeral range): tried again, served
# once free, rather than refused as above.
python3 -c 'import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
open(sys.argv[2], "w").close()
time.sleep(1.5)' "${ports[0]}" "$T_DIR/held" &
holder=$!
t_wait 5 test -e "$T_DIR/held" || t_fail "could not hold the port"
"$nvcached" --cluster "$good" --node 1 -f --no-mlock >"$T_DIR/retry.log" 2>&1 &
rpid=$!
t_cleanup "kill -9 $rpid 2>/dev/null"
t_wait 15 eval '"$ctl" stats --node 1 >/dev/null 2>&1' ||
  t_fail "nvcached did not serve once its port was free: $(tail -2 "$T_DIR/retry.log")"
grep -q "is in use; trying again" "$T_DIR/retry.log" ||
  t_fail "nvcached did not say it waits for its port: $(cat "$T_DIR/retry.log")"
wait $holder
kill -TERM $rpid
t_wait 5 bash -c "! kill -0 $rpid 2>/dev/null" || t_fail "daemon still running"
t_log "a port held for a moment by a socket that does not listen: tried again, then served"
mkdir "$T_DIR/rel"
(cd "$T_DIR/rel" && "$nvcached" --cluster "$good" --node 1 --no-mlock --tier-size 8M \
   --mram 1M --dram 1M --nvram "$T_SHM/rel.mram" --flash rel.flash) ||
  t_fail "daemon with a relative --flash did not start"
pid=$(pgrep -f -n "nvcached --cluster $good --node 1")
t_cleanup "kill -9 $pid 2>/dev/null"
[ -e "$T_DIR/rel/rel.flash" ] || t_fail "relative --flash not made in the caller's directory"
[ -e /rel.flash ] && { rm -f /rel.flash; t_fail "relative --flash made in /"; }
kill -TERM "$pid"
t_wait 5 bash -c "! kill -0 $pid 2>/dev/null" || t_fail "daemon with --flash still running"
# mem=0 in the cluster file: the node offers nothing (0 read as no cap,
# and it offered all its idle memory).
sed "s|^node 1 \(.*\)$|node 1 \1 mem=0|" "$good" >"$T_DIR/mem0.conf"
"$nvcached" --cluster "$T_DIR/mem0.conf" --node 1 --no-mlock || t_fail "nvcached with mem=0 did not start"
pid=$(pgrep -f -n "nvcached --cluster $T_DIR/mem0.conf --node 1")
t_cleanup "kill -9 $pid 2>/dev/null"
offered=$("$ctl" stats --node 1 | awk '$1 == "offered_bytes:" { print $2 }')
[ "$offered" = 0 ] || t_fail "mem=0: the node offers ${offered:-?} bytes"
kill -TERM "$pid"
t_wait 5 bash -c "! kill -0 $pid 2>/dev/null" || t_fail "daemon with mem=0 still running"
# An open-file limit below what --max-conns needs is said at start (the
# usual 1024 refused connections with EMFILE before --max-conns did).
(ulimit -Sn 512 && ulimit -Hn 512 &&
   exec timeout 3 "$nvcached" --cluster "$good" --node 1 -f --no-mlock) >"$T_DIR/fd.out" 2>&1
grep -q "open files: the limit is 512, low for --max-conns 1024" "$T_DIR/fd.out" ||
  t_fail "no warning for an open-file limit of 512: $(head -3 "$T_DIR/fd.out")"
t_log "PASS"
