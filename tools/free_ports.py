#!/usr/bin/env python3
"""free_ports.py N - N distinct free TCP ports on 127.0.0.1, below the
kernel's ephemeral range, so that no outgoing connection of anybody on
this machine takes one between the choice and the bind (a cluster file's
node ports: tools/quickstart_cluster.bash, the cluster tests)."""
import random
import socket
import sys


def main():
    want = int(sys.argv[1])
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo = max(int(f.read().split()[0]), 2048)
    got = []
    while len(got) < want:
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


if __name__ == "__main__":
    main()
