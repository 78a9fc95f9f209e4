#!/usr/bin/env python3
"""smallfiles.py write|read DIR N SEED - one rank of fs_cluster.sh's small
files workload. write: N files of 100 B to 12 KB in DIR (made), each
created, written whole and closed. read: the same N files read back
whole and compared with what write put there (the bytes follow from SEED
and the file's index, so another process, through another mount, can
check them). Prints the seconds taken; exits 1 at the first wrong file."""
import os, random, sys, time


def content(seed, k):
    r = random.Random(seed * 1000003 + k)
    return r.randbytes(r.randint(100, 12000))


def main():
    mode, d, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    t = time.perf_counter()
    if mode == "write":
        os.makedirs(d, exist_ok=True)
        for k in range(n):
            with open(os.path.join(d, "f%06d" % k), "wb") as f:
                f.write(content(seed, k))
    else:
        for k in range(n):
            p = os.path.join(d, "f%06d" % k)
            with open(p, "rb") as f:
                got = f.read()
            if got != content(seed, k):
                print("%s: %d bytes, not the %d written" % (p, len(got), len(content(seed, k))),
                      file=sys.stderr)
                return 1
    print("%.3f" % (time.perf_counter() - t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
