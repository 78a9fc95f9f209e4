#!/usr/bin/env python3
"""fs_extend_writers.py DIR W N - writer W: N rounds of open, one pwrite of
1 B-200 KB at a random offset below 3 MB (most extend the file), close,
over 40 files of its own. Deterministic for (W, N): run it in a plain
directory for the reference. Through a cache smaller than the data, its
extending writes wait for space half done: that once hung every writer for
good (write-back could not see a waiting write's first blocks, and kept
picking that one file)."""
import os
import random
import sys

d, w, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(w)
for i in range(n):
    fd = os.open(os.path.join(d, "w%d-%d" % (w, i % 40)), os.O_RDWR | os.O_CREAT, 0o644)
    ln, off = r.randrange(1, 200000), r.randrange(0, 3000000)
    data = bytes((w * 31 + i + k) & 0xff for k in range(256)) * (ln // 256 + 1)
    os.pwrite(fd, data[:ln], off)
    os.close(fd)
