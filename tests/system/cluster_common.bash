# cluster_common.bash - helpers of the cluster system tests (sourced after
# lib.sh; not a test itself, hence not *.sh).

# cluster_free_ports N: N distinct free TCP ports on 127.0.0.1, below the
# kernel's ephemeral range, so that no outgoing connection of anybody (other
# tests run on this machine too) takes one between our choice and our bind.
cluster_free_ports() {
  python3 - "$1" <<'PY'
import random, socket, sys
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
lo = max(lo, 2048)
got = []
while len(got) < int(sys.argv[1]):
    p = random.randrange(1024, lo)
    if p in got:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        got.append(p)
    except OSError:
        pass
    finally:
        s.close()
print(" ".join(map(str, got)))
PY
}
