#!/usr/bin/env python3
"""coherence.py DIR_A DIR_B [N] - close-to-open coherence across two mounts
of one file system: N times, a same-size overwrite of one file through
mount A (open, write, close), then a read through mount B (open, read,
close). Prints "stale S of N" (reads that did not return the bytes just
written); exit 0 even when stale (the caller reports the count), 1 on an
I/O error."""
import os
import sys

SIZE = 64 * 1024


def payload(k):
    return (b"%08d" % k) * (SIZE // 8)


def main():
    a, b = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    pa, pb = os.path.join(a, "coherence.dat"), os.path.join(b, "coherence.dat")
    with open(pa, "wb") as f:
        f.write(payload(0))
    with open(pb, "rb") as f:  # B caches the first version, as a reader would
        f.read()
    stale = 0
    for k in range(1, n + 1):
        fd = os.open(pa, os.O_WRONLY)
        os.pwrite(fd, payload(k), 0)
        os.close(fd)
        with open(pb, "rb") as f:
            stale += f.read() != payload(k)
    os.unlink(pa)
    print("stale %d of %d" % (stale, n))


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        print("coherence: %s" % e, file=sys.stderr)
        sys.exit(1)
