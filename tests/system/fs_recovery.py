#!/usr/bin/env python3
"""fs_recovery.py - helpers for fs_recovery.sh.
  writer DIR FILE ACKFILE : write 4 KiB records 0,1,2,... to DIR/FILE, each
                            fsync'ed; after each, record its number in ACKFILE
  check FILE ACKED        : every record < ACKED is intact"""
import os, sys

REC = 4096


def record(i):
    head = ("record %08d " % i).encode()
    return (head * (REC // len(head) + 1))[:REC]


if sys.argv[1] == "writer":
    d, name, ack = sys.argv[2], sys.argv[3], sys.argv[4]
    fd = os.open(os.path.join(d, name), os.O_CREAT | os.O_WRONLY, 0o644)
    i = 0
    while True:
        os.pwrite(fd, record(i), i * REC)
        os.fsync(fd)
        with open(ack + ".tmp", "w") as f:
            f.write(str(i + 1))
        os.rename(ack + ".tmp", ack)
        i += 1
elif sys.argv[1] == "check":
    path, acked = sys.argv[2], int(sys.argv[3])
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < acked * REC:
        sys.exit("only %d bytes, %d records acknowledged" % (len(data), acked))
    for i in range(acked):
        if data[i * REC:(i + 1) * REC] != record(i):
            sys.exit("record %d damaged" % i)
    print("%d acknowledged records intact (%d bytes in file)" % (acked, len(data)))
