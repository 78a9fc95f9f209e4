#!/usr/bin/env python3
"""nbd_raw.py - a raw NBD client for the nvswapd tests: sends exact bytes,
good and bad, and checks the server's answers against the NBD spec.

  nbd_raw.py SOCKET NAME badinput   every bad-input case, then data checks
  nbd_raw.py SOCKET NAME trim OFF LEN
  nbd_raw.py SOCKET NAME sum OFF LEN    sha256 of a range
  nbd_raw.py SOCKET NAME write FILE     FILE's bytes from offset 0
  nbd_raw.py SOCKET NAME stop PID   SIGTERM to PID (the server) while one
      client is in the middle of a WRITE, one is idle and one negotiates:
      the WRITE is finished and answered, a request completed after the
      signal gets ESHUTDOWN, every connection is then closed by the server
  nbd_raw.py SOCKET NAME silent SECONDS   one connection that says nothing,
      one that stops after the client flags, one that negotiates and then
      idles; the first two must be closed by the server within SECONDS
      (--handshake-timeout), the third must still serve
  nbd_raw.py SOCKET NAME pages FILE     every 4 KiB page read on one
      connection: each reads as FILE's bytes or gets EIO; then 64 KiB and
      1 MiB READs (zero-copy) over the first EIO page get EIO too, and the
      connection still serves; prints "pages: N good, M EIO"

Exit 0 when every check passed; the first failure raises with its case."""
import hashlib
import os
import socket
import struct
import sys

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPMAGIC = 0x3E889045565A9
REQMAGIC = 0x25609513
REPLYMAGIC = 0x67446698
OPT_EXPORT_NAME, OPT_ABORT, OPT_LIST, OPT_INFO, OPT_GO, OPT_SR = 1, 2, 3, 6, 7, 8
REP_ACK, REP_SERVER, REP_INFO = 1, 2, 3
ERR = 1 << 31
ERR_UNSUP, ERR_INVALID, ERR_UNKNOWN, ERR_TOO_BIG = ERR + 1, ERR + 3, ERR + 6, ERR + 9
READ, WRITE, DISC, FLUSH, TRIM, WZ = 0, 1, 2, 3, 4, 6
FUA = 1
EIO, EINVAL, ENOSPC, ESHUTDOWN = 5, 22, 28, 108


class Closed(Exception):
    pass


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(20)
        self.s.connect(path)
        self.cookie = 0

    def recvn(self, n):
        b = b""
        while len(b) < n:
            c = self.s.recv(n - len(b))
            if not c:
                raise Closed("server closed after %d of %d bytes" % (len(b), n))
            b += c
        return b

    def send(self, b):
        self.s.sendall(b)

    def closed_by_server(self):
        """True when the server has closed the connection (EOF)."""
        try:
            return self.s.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True

    def greet(self, cflags=3):
        magic, opt, hflags = struct.unpack(">QQH", self.recvn(18))
        assert magic == NBDMAGIC and opt == IHAVEOPT, "bad greeting"
        assert hflags & 1 and hflags & 2, "no FIXED_NEWSTYLE/NO_ZEROES"
        self.send(struct.pack(">I", cflags))

    def opt(self, opt, data=b"", length=None):
        n = len(data) if length is None else length
        self.send(struct.pack(">QII", IHAVEOPT, opt, n) + data)

    def reply(self):
        magic, opt, typ, n = struct.unpack(">QIII", self.recvn(20))
        assert magic == REPMAGIC, "bad option reply magic %#x" % magic
        return opt, typ, self.recvn(n)

    def go(self, name, infos=(3,), opt=OPT_GO):
        nb = name.encode()
        self.opt(opt, struct.pack(">I", len(nb)) + nb +
                 struct.pack(">H", len(infos)) +
                 b"".join(struct.pack(">H", i) for i in infos))
        res = {}
        while True:
            o, typ, data = self.reply()
            assert o == opt
            if typ == REP_ACK:
                return res
            if typ & ERR:
                return typ
            assert typ == REP_INFO
            res[struct.unpack(">H", data[:2])[0]] = data[2:]

    def req(self, typ, off, length, flags=0, data=b""):
        self.cookie += 1
        self.send(struct.pack(">IHHQQI", REQMAGIC, flags, typ, self.cookie,
                              off & (2**64 - 1), length) + data)
        return self.cookie

    def answer(self, cookie, nread=0):
        magic, err, c = struct.unpack(">IIQ", self.recvn(16))
        assert magic == REPLYMAGIC, "bad reply magic %#x" % magic
        assert c == cookie, "reply for cookie %d, expected %d" % (c, cookie)
        data = self.recvn(nread) if err == 0 and nread else b""
        return err, data

    def cmd(self, typ, off, length, flags=0, data=b""):
        c = self.req(typ, off, length, flags, data)
        return self.answer(c, length if typ == READ else 0)


def session(path, name):
    c = Conn(path)
    c.greet()
    r = c.go(name)
    assert isinstance(r, dict), "GO refused: %#x" % r
    size, tflags = struct.unpack(">QH", r[0])
    return c, size


def case(msg):
    print("case:", msg, flush=True)


def badinput(path, name):
    # A client whose data must survive everything below.
    a, size = session(path, name)
    pat = os.urandom(64 * 1024)
    assert a.cmd(WRITE, 0, len(pat), data=pat) == (0, b"")

    case("unknown client flags: the server drops the connection")
    c = Conn(path); c.greet(cflags=0x4)
    assert c.closed_by_server()

    case("bad option magic: dropped")
    c = Conn(path); c.greet()
    c.send(struct.pack(">QII", 0x1122334455667788, OPT_LIST, 0))
    assert c.closed_by_server()

    case("option over the length cap: ERR_TOO_BIG, then negotiation goes on")
    c = Conn(path); c.greet()
    c.opt(99, os.urandom(100000))
    o, typ, _ = c.reply()
    assert (o, typ) == (99, ERR_TOO_BIG), typ
    c.opt(OPT_LIST)
    assert c.reply()[1] == REP_SERVER and c.reply()[1] == REP_ACK

    case("option claiming 4 GiB, client then vanishes: no allocation, no crash")
    c = Conn(path); c.greet()
    c.opt(OPT_GO, b"x" * 1000, length=0xFFFFFFF0)
    c.s.close()

    case("EXPORT_NAME over the cap: dropped (it cannot be answered)")
    c = Conn(path); c.greet()
    c.opt(OPT_EXPORT_NAME, b"n" * 9000)
    assert c.closed_by_server()

    case("unknown option: ERR_UNSUP and negotiation continues")
    c = Conn(path); c.greet()
    c.opt(42, b"abc")
    assert c.reply()[1] == ERR_UNSUP
    c.opt(OPT_SR)
    assert c.reply()[1] == ERR_UNSUP
    assert isinstance(c.go(name), dict)
    assert c.cmd(READ, 0, 4096)[1] == pat[:4096]

    case("OPT_LIST with data: ERR_INVALID")
    c = Conn(path); c.greet()
    c.opt(OPT_LIST, b"junk")
    assert c.reply()[1] == ERR_INVALID

    case("GO with a name length past the option: ERR_INVALID")
    c = Conn(path); c.greet()
    c.opt(OPT_GO, struct.pack(">I", 5000) + b"ab" + struct.pack(">H", 0))
    assert c.reply()[1] == ERR_INVALID
    case("GO with an info count past the option: ERR_INVALID")
    c.opt(OPT_GO, struct.pack(">I", 0) + struct.pack(">H", 9) + b"\0\3")
    assert c.reply()[1] == ERR_INVALID
    case("GO/INFO for an unknown export: ERR_UNKNOWN")
    assert c.go("nosuch") == ERR_UNKNOWN
    assert c.go("nosuch", opt=OPT_INFO) == ERR_UNKNOWN
    case("INFO then GO on the same connection")
    info = c.go(name, infos=(1, 2, 3), opt=OPT_INFO)
    assert info[1] == name.encode() and 3 in info and 2 in info
    assert struct.unpack(">III", info[3]) == (512, 4096, 32 << 20)
    assert isinstance(c.go(name), dict)

    case("EXPORT_NAME for an unknown export: dropped")
    c = Conn(path); c.greet()
    c.opt(OPT_EXPORT_NAME, b"nosuch")
    assert c.closed_by_server()

    case("EXPORT_NAME without NO_ZEROES: size, flags and 124 zero bytes")
    c = Conn(path); c.greet(cflags=1)
    c.opt(OPT_EXPORT_NAME, name.encode())
    sz, fl = struct.unpack(">QH", c.recvn(10))
    assert sz == size and fl & 1
    assert c.recvn(124) == bytes(124)
    assert c.cmd(READ, 4096, 4096)[1] == pat[4096:8192]

    case("OPT_ABORT: ACK, then closed")
    c = Conn(path); c.greet()
    c.opt(OPT_ABORT)
    assert c.reply()[1] == REP_ACK
    assert c.closed_by_server()

    c, _ = session(path, name)
    case("READ past the end: EINVAL; WRITE past the end: ENOSPC")
    assert c.cmd(READ, size - 4096, 8192)[0] == EINVAL
    assert c.cmd(WRITE, size, 4096, data=bytes(4096))[0] == ENOSPC
    assert c.cmd(TRIM, size - 4096, 8192)[0] == EINVAL
    assert c.cmd(WZ, size, 4096)[0] == ENOSPC
    case("offset + length wrapping 2^64: refused, not wrapped")
    assert c.cmd(READ, 2**64 - 4096, 8192)[0] == EINVAL
    assert c.cmd(WRITE, 2**64 - 512, 1024, data=bytes(1024))[0] == ENOSPC
    case("misaligned offset or length (min block 512): EINVAL")
    assert c.cmd(READ, 100, 4096)[0] == EINVAL
    assert c.cmd(READ, 0, 100)[0] == EINVAL
    assert c.cmd(WRITE, 4096 + 1, 512, data=bytes(512))[0] == EINVAL
    assert c.cmd(TRIM, 0, 1000)[0] == EINVAL
    case("payload over the 32 MiB maximum: EINVAL (a WRITE's bytes discarded)")
    assert c.cmd(READ, 0, (32 << 20) + 4096)[0] == EINVAL
    big = (32 << 20) + 512
    assert c.cmd(WRITE, 0, big, data=b"\xee" * big)[0] == EINVAL
    case("unknown command and unknown flags: EINVAL")
    assert c.cmd(9, 0, 4096)[0] == EINVAL
    assert c.cmd(5, 0, 4096)[0] == EINVAL            # CACHE, not advertised
    assert c.cmd(READ, 0, 4096, flags=0x80)[0] == EINVAL
    assert c.cmd(WRITE, 0, 4096, flags=0x2, data=bytes(4096))[0] == EINVAL
    assert c.cmd(FLUSH, 0, 0, flags=0x4)[0] == EINVAL
    case("the connection still serves after all that; the data is intact")
    assert c.cmd(READ, 0, len(pat)) == (0, pat)
    case("FUA on a read is accepted (the spec), FLUSH works")
    assert c.cmd(READ, 0, 4096, flags=FUA) == (0, pat[:4096])
    assert c.cmd(FLUSH, 0, 0) == (0, b"")

    case("sub-page writes read-modify-write their page")
    base = 1 << 20
    page = bytearray(os.urandom(4096))
    assert c.cmd(WRITE, base, 4096, data=bytes(page))[0] == 0
    piece = os.urandom(512)
    assert c.cmd(WRITE, base + 1536, 512, flags=FUA, data=piece)[0] == 0
    page[1536:2048] = piece
    assert c.cmd(READ, base, 4096) == (0, bytes(page))
    fresh = os.urandom(512)
    assert c.cmd(WRITE, base + 8192 + 512, 512, data=fresh)[0] == 0
    assert c.cmd(READ, base + 8192, 4096) == (0, bytes(512) + fresh + bytes(3072))
    case("partial TRIM and WRITE_ZEROES zero exactly their bytes")
    assert c.cmd(TRIM, base + 512, 512)[0] == 0
    page[512:1024] = bytes(512)
    assert c.cmd(WZ, base + 3584, 512, flags=2)[0] == 0
    page[3584:4096] = bytes(512)
    assert c.cmd(READ, base, 4096) == (0, bytes(page))
    case("whole-page TRIM reads back zeros")
    assert c.cmd(TRIM, base, 16384)[0] == 0
    assert c.cmd(READ, base, 16384) == (0, bytes(16384))

    case("pipelined requests: replies carry the right cookies")
    cookies = [c.req(READ, i * 4096, 4096) for i in range(16)]
    for i, ck in enumerate(cookies):
        assert c.answer(ck, 4096) == (0, pat[i * 4096:(i + 1) * 4096])

    case("bad request magic: dropped")
    c.send(struct.pack(">IHHQQI", 0xDEADBEEF, 0, READ, 1, 0, 4096))
    assert c.closed_by_server()

    case("client vanishing mid-request (half a WRITE payload)")
    c, _ = session(path, name)
    c.req(WRITE, 0, 65536)
    c.send(b"\xaa" * 1000)
    c.s.close()
    case("client vanishing mid-handshake")
    c = Conn(path); c.greet(); c.send(struct.pack(">Q", IHAVEOPT)); c.s.close()

    case("DISC: the server closes")
    c, _ = session(path, name)
    c.req(DISC, 0, 0)
    assert c.closed_by_server()

    case("the first client's data is untouched")
    assert a.cmd(READ, 0, len(pat)) == (0, pat)
    a.req(DISC, 0, 0)
    print("all bad-input cases answered per the spec")


def write_file(path, name, fname):
    c, _ = session(path, name)
    with open(fname, "rb") as f:
        data = f.read()
    for off in range(0, len(data), 1 << 20):
        piece = data[off:off + (1 << 20)]
        assert c.cmd(WRITE, off, len(piece), data=piece) == (0, b""), off


def pages(path, name, fname):
    """A page the store lost fails alone: its READ gets EIO and the
    connection goes on serving every other page."""
    with open(fname, "rb") as f:
        data = f.read()
    c, size = session(path, name)
    assert size >= len(data)
    good, eio = 0, []
    for off in range(0, len(data), 4096):
        err, d = c.cmd(READ, off, 4096)
        if err == EIO:
            eio.append(off)
            continue
        assert err == 0, "page at %d: error %d" % (off, err)
        assert d == data[off:off + 4096], "page at %d: wrong bytes" % off
        good += 1
    if eio:
        bad = eio[0]
        case("64 KiB and 1 MiB READs over the page at %d: EIO" % bad)
        for n in (64 << 10, 1 << 20):
            start = bad - bad % n
            if start + n <= size:
                assert c.cmd(READ, start, n)[0] == EIO, (start, n)
        case("pipelined: a lost page between two good ones")
        ok = next((o for o in range(0, len(data), 4096) if o not in eio), None)
        if ok is not None:
            ck = [c.req(READ, ok, 4096), c.req(READ, bad, 4096),
                  c.req(READ, ok, 4096)]
            assert c.answer(ck[0], 4096) == (0, data[ok:ok + 4096])
            assert c.answer(ck[1], 4096)[0] == EIO
            assert c.answer(ck[2], 4096) == (0, data[ok:ok + 4096])
    c.req(DISC, 0, 0)
    assert c.closed_by_server()
    print("pages: %d good, %d EIO" % (good, len(eio)))


def stop(path, name, pid):
    import signal
    import time
    a, _ = session(path, name)
    b, _ = session(path, name)
    d, _ = session(path, name)
    c = Conn(path)
    c.greet()
    pat = os.urandom(4 << 20)
    case("a WRITE in flight when SIGTERM comes")
    cookie = a.req(WRITE, 0, len(pat))
    a.send(pat[:1 << 20])
    # d is in the middle of a READ's header
    d.cookie += 1
    hdr = struct.pack(">IHHQQI", REQMAGIC, 0, READ, d.cookie, 0, 4096)
    d.send(hdr[:14])
    time.sleep(0.2)
    os.kill(pid, signal.SIGTERM)
    time.sleep(0.3)
    case("an idle connection and a negotiating one are closed")
    t = time.monotonic()
    assert b.closed_by_server(), "idle connection left open"
    assert c.closed_by_server(), "negotiating connection left open"
    assert time.monotonic() - t < 3, "idle connections closed only late"
    case("the WRITE's payload is still taken, and the WRITE answered")
    a.send(pat[1 << 20:])
    err, _ = a.answer(cookie)
    assert err == 0, "the WRITE in flight got error %d" % err
    case("then the server closes that connection")
    assert a.closed_by_server(), "connection left open after its request"
    case("a request that arrives after the stop: ESHUTDOWN")
    d.send(hdr[14:])
    err, _ = d.answer(d.cookie)
    assert err == ESHUTDOWN, "READ after the stop got %d" % err
    assert d.closed_by_server(), "connection left open after ESHUTDOWN"
    print("stop: in-flight WRITE answered, a later request ESHUTDOWN")


def silent(path, name, secs):
    import time
    mute = Conn(path)
    mute.recvn(18)  # the greeting; then it says nothing
    half = Conn(path)
    half.recvn(18)
    half.send(struct.pack(">I", 3))
    live, _ = session(path, name)
    for c in (mute, half):
        c.s.settimeout(secs)
    t = time.monotonic()
    case("a silent connection is closed")
    assert mute.closed_by_server(), "silent connection left open"
    case("one stopped after its flags is closed")
    assert half.closed_by_server(), "half-negotiated connection left open"
    took = time.monotonic() - t
    case("an idle connection past the handshake is kept")
    err, _ = live.cmd(READ, 0, 4096)
    assert err == 0, "the negotiated connection got %d" % err
    print("silent: both closed after %.1f s, the negotiated one serves" % took)


def main():
    path, name, what = sys.argv[1], sys.argv[2], sys.argv[3]
    if what == "badinput":
        badinput(path, name)
    elif what == "trim":
        c, _ = session(path, name)
        err, _ = c.cmd(TRIM, int(sys.argv[4]), int(sys.argv[5]))
        assert err == 0, err
    elif what == "write":
        write_file(path, name, sys.argv[4])
    elif what == "silent":
        silent(path, name, float(sys.argv[4]))
    elif what == "stop":
        stop(path, name, int(sys.argv[4]))
    elif what == "pages":
        pages(path, name, sys.argv[4])
    elif what == "sum":
        c, _ = session(path, name)
        off, n, h = int(sys.argv[4]), int(sys.argv[5]), hashlib.sha256()
        while n:
            k = min(n, 1 << 20)
            err, d = c.cmd(READ, off, k)
            assert err == 0, err
            h.update(d)
            off += k
            n -= k
        print(h.hexdigest())


if __name__ == "__main__":
    main()
