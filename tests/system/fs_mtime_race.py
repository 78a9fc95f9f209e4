#!/usr/bin/env python3
"""fs_mtime_race.py MOUNT BACKING N - write a file, close it, and set its
times at once, N times, on a mount whose write-back starts right after the
last close (writeback_delay=0), so that the utimensat often lands while the
write-back writes the file. The times set must stay, through the mount and
on the backing file: the write-back's writes move the backing file's mtime
and it puts the file's own back afterwards, and it once put back the time
of the write (a setattr read the time back after the write-back's write had
moved it: 8 in 500). Exit 1 if any differs."""
import os
import sys
import time

mnt, backing, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ATIME = 1502075215761946924
bad = 0
for i in range(n):
    name = "mtime%d" % (i % 16)
    path = os.path.join(mnt, name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, os.urandom(60000), (i * 7919) % 3000000)
    os.close(fd)
    want = 1508809279425888433 + i
    os.utime(path, ns=(ATIME, want))
    time.sleep(0.02)
    got = os.stat(path).st_mtime_ns
    if got != want:
        time.sleep(0.3)
        print("fs_mtime_race: %s: mtime %d through the mount, %d on the "
              "backing, set to %d" % (name, got,
              os.stat(os.path.join(backing, name)).st_mtime_ns, want))
        bad += 1
print("fs_mtime_race: %d of %d set times lost" % (bad, n))
sys.exit(1 if bad else 0)
