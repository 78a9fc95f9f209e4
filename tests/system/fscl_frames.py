#!/usr/bin/env python3
"""fscl_frames.py KIND - one cluster frame of the file cache's messages on
stdout (prefix, header, payload, right CRC32C) with a hostile field, for
`nvcache-client raw` (fscl_refusals.sh). KIND names what is wrong;
"tworuns" writes three frames (the last ends the connection), for
`raw-all`; "setsize OBJ SIZE [FLAGS BLK]" (OBJ in hex) a well-formed
SETSIZE, then such a last frame."""
import struct, sys

def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF

def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)

def field(num, v):
    return varint(num << 3) + varint(v)

def message(num, body):
    return varint(num << 3 | 2) + varint(len(body)) + body

def frame(mtype, fop, payload):
    body = b"".join(field(k, v) for k, v in fop.items() if v)
    hdr = field(1, mtype) + field(3, 77) + field(12, len(payload)) + message(30, body)
    pre = b"NVCL" + bytes([1, 0]) + struct.pack(">HI", len(hdr), len(payload))
    crc = crc32c(pre + hdr + payload)
    return pre + struct.pack(">I", crc) + hdr + payload

OBJ, BLK, OFF, LEN, SIZE, FLAGS, GEN, BASE, RUN = 1, 2, 3, 4, 5, 6, 7, 8, 9
WRITE, READ, ATTACH, OPEN, GETATTR, MARK = 47, 46, 40, 41, 43, 51
kinds = {
    # a range past the frame layer's block cap
    "range": (WRITE, {OBJ: 5, OFF: 131000, LEN: 1000}, b"x" * 1000),
    # a payload shorter than base_len + len says
    "short": (WRITE, {OBJ: 5, LEN: 100, BASE: 4096}, b"x" * 100),
    # a read asking for more than a block
    "read": (READ, {OBJ: 5, LEN: 1 << 20}, b""),
    # an attach whose path is longer than its cap
    "path": (ATTACH, {LEN: 8192}, b"/" * 8192),
    # an open with a handle longer than its cap
    "handle": (OPEN, {OBJ: 5, LEN: 200}, b"h" * 200),
    # a type in the enum's gap
    "gap": (30, {OBJ: 5}, b""),
    # dirty marks: a block list that is not whole 8-byte indexes
    "marklist": (MARK, {OBJ: 5, LEN: 12, FLAGS: 1}, b"m" * 12),
    # a replica (replicas=2) without the file's handle before its bytes
    "replica": (MARK, {OBJ: 5, LEN: 100, FLAGS: 128}, b"r" * 100),
    # a replica with a block list's SET
    "replicaset": (MARK, {OBJ: 5, LEN: 8, BASE: 4, FLAGS: 129}, b"r" * 12),
    # the others' pages dropped (INVAL) and a mount's watch for drops
    # (WATCH): neither carries a payload
    "inval": (53, {OBJ: 5}, b"i" * 8),
    "watch": (54, {LEN: 8}, b"w" * 8),
}
if sys.argv[1] == "setsize":
    # a file's size set at its home, as a truncating mount's first step
    # (fscl_coherence.sh: the mount dies before its TRUNCs); then a bad
    # frame, whose answer ends the connection (raw-all stops)
    extra = sys.argv[4:6] if len(sys.argv) > 5 else (0, 0)
    sys.stdout.buffer.write(frame(44, {OBJ: int(sys.argv[2], 16), SIZE: int(sys.argv[3]),
                                       FLAGS: int(extra[0]), BLK: int(extra[1])}, b""))
    sys.stdout.buffer.write(frame(30, {OBJ: 5}, b""))
    sys.exit(0)
if sys.argv[1] == "tworuns":
    # two mounts' run ids (digest) on one connection: the first holds it
    for run in (11, 12):
        sys.stdout.buffer.write(frame(GETATTR, {OBJ: 5, RUN: run}, b""))
    # then a bad one: its answer ends the connection (raw-all stops)
    sys.stdout.buffer.write(frame(30, {OBJ: 5}, b""))
    sys.exit(0)
t, fop, pl = kinds[sys.argv[1]]
sys.stdout.buffer.write(frame(t, fop, pl))
