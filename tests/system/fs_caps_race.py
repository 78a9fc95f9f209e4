#!/usr/bin/env python3
"""fs_caps_race.py MOUNT BACKING N - set file capabilities on a file through
the mount, write to it, and check on the backing file that the write dropped
them; N times, while two other processes keep asking for them (getxattr).
A "no capabilities here" learnt by a getxattr that raced with the setxattr
must not survive it (it did: 190 writes in 3000 kept their capabilities).
Exit 1 if any write kept them."""
import multiprocessing as mp
import os
import sys

mnt, backing, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
# struct vfs_cap_data, revision 2, effective: CAP_NET_RAW permitted
CAP = (0x02000001).to_bytes(4, "little") + (1 << 13).to_bytes(4, "little") + bytes(12)
path = os.path.join(mnt, "capsrace")
with open(path, "wb") as f:
    f.write(b"x" * 4096)


def ask(stop):
    while not stop.is_set():
        try:
            os.getxattr(path, "security.capability")
        except OSError:
            pass


stop = mp.Event()
askers = [mp.Process(target=ask, args=(stop,)) for _ in range(2)]
for p in askers:
    p.start()
kept = 0
for i in range(n):
    os.setxattr(path, "security.capability", CAP)
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, b"y", 0)
    os.close(fd)
    try:
        os.getxattr(os.path.join(backing, "capsrace"), "security.capability")
        kept += 1
    except OSError:
        pass
stop.set()
for p in askers:
    p.join()
os.unlink(path)
print("writes that kept their file capabilities: %d of %d" % (kept, n))
sys.exit(1 if kept else 0)
