#!/usr/bin/env python3
"""fscl_ops.py STEP BACKING MNT1 MNT2 ... - the coherence steps of the
cluster file system tests (fscl_coherence.sh), each across two or more
mounts of one cluster over the backing directory BACKING. Exits 1 with
the reason on the first wrong result."""
import mmap, multiprocessing, os, random, sys, time

def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)

def expect(cond, msg):
    if not cond:
        fail(msg)

def read_all(path):
    with open(path, "rb") as f:
        return f.read()

def close_to_open(b, m):
    """write on A, close, read on B and on every other mount"""
    data = os.urandom(3 * 1024 * 1024 + 12345)   # every node's stripes
    with open(os.path.join(m[0], "c2o"), "wb") as f:
        f.write(data)
    for k, mnt in enumerate(m[1:], 2):
        got = read_all(os.path.join(mnt, "c2o"))
        expect(got == data, "mount %d reads %d bytes, not the %d written on 1%s" %
               (k, len(got), len(data), "" if len(got) != len(data) else " (bytes differ)"))
    # an overwrite of the same size (the reader's page cache must go)
    data2 = os.urandom(len(data))
    with open(os.path.join(m[0], "c2o"), "r+b") as f:
        f.write(data2)
    expect(read_all(os.path.join(m[1], "c2o")) == data2,
           "a same-size overwrite on 1 reads stale on 2 after close/open")

def namespace(b, m):
    """truncate, rename, unlink on A seen on B at once, sizes from NVRAM"""
    a, c = m[0], m[1]
    fa = open(os.path.join(a, "ns"), "wb")
    data = os.urandom(1 << 20)
    fa.write(data)
    fa.flush()
    expect(os.stat(os.path.join(c, "ns")).st_size == len(data),
           "size on 2 is not the size written on 1 (still open there)")
    expect(os.stat(os.path.join(b, "ns")).st_size == 0,
           "written back while still open: the test cannot tell NVRAM from backing")
    os.ftruncate(fa.fileno(), 300000)
    expect(os.stat(os.path.join(c, "ns")).st_size == 300000,
           "truncate on 1 not seen on 2: size %d" % os.stat(os.path.join(c, "ns")).st_size)
    expect(read_all(os.path.join(c, "ns")) == data[:300000],
           "bytes after truncate differ on 2")
    os.rename(os.path.join(a, "ns"), os.path.join(a, "ns2"))
    expect(not os.path.exists(os.path.join(c, "ns")), "old name still on 2 after rename on 1")
    expect(os.stat(os.path.join(c, "ns2")).st_size == 300000, "renamed file's size on 2")
    expect(read_all(os.path.join(c, "ns2")) == data[:300000], "renamed file's bytes on 2")
    # extend past the cut: zeros between, on the other node too
    fa.seek(500000)
    fa.write(b"tail")
    fa.flush()
    want = data[:300000] + bytes(200000) + b"tail"
    expect(read_all(os.path.join(c, "ns2")) == want, "truncate then extend reads wrong on 2")
    fa.close()
    os.unlink(os.path.join(a, "ns2"))
    expect(not os.path.exists(os.path.join(c, "ns2")), "unlinked on 1, still there on 2")

def mtime(b, m):
    """a write on A (file open, nothing written back) moves the mtime B
    sees; a time set on B holds on every mount after the write-back,
    which moves the backing file's own"""
    p = [os.path.join(x, "mt") for x in m[:3]]
    fa = open(p[0], "wb")
    fa.write(b"x" * 1000)
    fa.flush()
    old = 981173106                         # 2001-02-03 04:05:06 UTC
    os.utime(p[0], (old, old))
    expect(int(os.stat(p[1]).st_mtime) == old, "a time set on 1 is not seen on 2: %d" %
           int(os.stat(p[1]).st_mtime))
    t0 = time.time()
    fa.write(os.urandom(70000))            # across a block's edge
    fa.flush()
    expect(os.stat(os.path.join(b, "mt")).st_size == 0 and
           int(os.stat(os.path.join(b, "mt")).st_mtime) == old,
           "written back while open: the test cannot tell NVRAM from backing")
    seen = os.stat(p[1]).st_mtime
    expect(seen >= t0 - 1, "a write on 1 (still open there) is not in the mtime on 2: %.3f, "
           "written at %.3f" % (seen, t0))
    expect(os.stat(p[1]).st_ctime >= seen - 0.001, "ctime before mtime on 2")
    t2 = 1014955506                         # 2002-03-01 04:05:06 UTC
    os.utime(p[1], (t2, t2))
    expect(int(os.stat(p[2]).st_mtime) == t2, "a time set on 2 is not seen on 3")
    fa.close()
    # the owners write back after the last close: the backing's mtime moves
    data = read_all(p[2])
    for _ in range(100):
        if read_all(os.path.join(b, "mt")) == data:
            break
        time.sleep(0.1)
    expect(read_all(os.path.join(b, "mt")) == data, "not written back after the close")
    for k in range(3):
        got = int(os.stat(p[k]).st_mtime)
        expect(got == t2, "after the write-back mount %d shows mtime %d, not the %d set on 2" %
               (k + 1, got, t2))
    os.unlink(p[0])

def stale_bound(b, m):
    """a mount's size bound (cluster/fcache.h, size epochs) ends at
    another mount's truncate: A holds the file open with O_DIRECT (past
    its page cache) when B cuts it; A's write within A's old size grows
    the file again, A's read past the cut finds its end, and a write that
    relied on the bound still moves the mtime B sees once A closes"""
    pa, pb = os.path.join(m[0], "sb"), os.path.join(m[1], "sb")
    data = os.urandom(1 << 20)
    with open(pa, "wb") as f:
        f.write(data)
    fd = os.open(pa, os.O_RDWR | os.O_DIRECT)
    buf = mmap.mmap(-1, 4096)
    expect(os.preadv(fd, [buf], 8192) == 4096 and buf[:] == data[8192:12288],
           "an O_DIRECT read on 1 within the file")
    os.truncate(pb, 100000)
    # past the cut, in the block the cut kept part of (the owner has it:
    # nothing else makes the write ask the home)
    at = 28 * 4096
    buf[:] = w = os.urandom(4096)
    expect(os.pwritev(fd, [buf], at) == 4096, "a write on 1 after the cut on 2")
    size = os.stat(pb).st_size
    expect(size == at + 4096, "cut to 100000 on 2, then written at %d on 1 (the file "
           "open there before the cut): size %d on 2, not %d" % (at, size, at + 4096))
    expect(read_all(pb) == data[:100000] + bytes(at - 100000) + w,
           "cut on 2, then written on 1: the bytes on 2 differ")
    os.truncate(pb, 100000)
    got = os.preadv(fd, [buf], 204800)
    expect(got == 0, "a read on 1 at 200 KiB after the cut to 100000 on 2 gave %d bytes, "
           "not the end of the file" % got)
    time.sleep(0.05)   # the cut's own mtime is older than t0
    t0 = time.time_ns()
    buf[:] = os.urandom(4096)
    expect(os.pwritev(fd, [buf], 0) == 4096, "an overwrite on 1 within the file")
    os.close(fd)
    seen = os.stat(pb).st_mtime_ns
    expect(seen >= t0, "an overwrite on 1, then its close: mtime %d on 2, written "
           "at %d" % (seen, t0))
    os.unlink(pa)
    # an owner with no record of the file at the cut knows no epoch of
    # it when a record is made there later: it asks the home before it
    # vouches for A's bound
    pa, pb = os.path.join(m[0], "sb2"), os.path.join(m[1], "sb2")
    fd = os.open(pa, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    os.ftruncate(fd, 2 << 20)   # A's bound 2 MiB; no stripe holds a byte
    os.truncate(pb, 0)          # the second stripe's owner has no record
    with open(pb, "r+b") as f:  # now it has, made by B's write
        f.seek(1536 << 10)
        f.write(b"c" * 4096)
    got = os.preadv(fd, [buf], 1800 << 10)
    expect(got == 0, "a read on 1 at 1800 KiB of a file cut on 2, then written "
           "there up to %d, gave %d bytes, not the end of the file" %
           ((1536 << 10) + 4096, got))
    os.close(fd)
    os.unlink(pa)

def writer(path, start, step, count, seed):
    fd = os.open(path, os.O_WRONLY)
    for i in range(count):
        off = start + (2 * i + step) * 100
        os.pwrite(fd, bytes([seed + i % 100]) * 100, off)
    os.close(fd)

def interleave(b, m):
    """two nodes write interleaved 100-byte ranges of the same blocks at
    once; a file with backing bytes, so absent blocks start from them"""
    base = os.urandom(200000)
    with open(os.path.join(b, "il"), "wb") as f:
        f.write(base)
    p = [multiprocessing.Process(target=writer, args=(os.path.join(m[k], "il"),
                                                      1000, k, 300, 1 + 100 * k))
         for k in (0, 1)]
    for x in p:
        x.start()
    for x in p:
        x.join()
        expect(x.exitcode == 0, "a writer failed")
    want = bytearray(base)
    for k in (0, 1):
        for i in range(300):
            off = 1000 + (2 * i + k) * 100
            want[off:off + 100] = bytes([1 + 100 * k + i % 100]) * 100
    for k, mnt in enumerate(m[:2], 1):
        got = read_all(os.path.join(mnt, "il"))
        if got != bytes(want):
            bad = next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) \
                if len(got) == len(want) else -1
            fail("interleaved writes: mount %d reads wrong bytes (first at %d, len %d)" %
                 (k, bad, len(got)))

def sync_barrier_sync(b, m):
    """MPI-IO's sync-barrier-sync as ROMIO makes it: a reader that holds
    the file open with its old pages cached and wrote nothing (ROMIO's
    MPI_File_sync calls no fsync there) reads the writer's bytes once the
    writer's fsync returned; the same after the writer shrinks the file
    and grows it back to the size the reader knew"""
    path = [os.path.join(x, "sbs") for x in m[:2]]
    with open(path[0], "wb") as f:
        f.write(b"a" * 8192)
    r = open(path[1], "rb")
    expect(r.read() == b"a" * 8192, "first read on 2")
    w = open(path[0], "r+b")
    w.write(b"b" * 8192)
    w.flush()
    os.fsync(w.fileno())
    r.seek(0)
    expect(r.read() == b"b" * 8192, "after sync-barrier-sync 2 reads stale bytes")
    os.ftruncate(w.fileno(), 100)
    os.ftruncate(w.fileno(), 8192)
    os.fsync(w.fileno())
    r.seek(0)
    expect(r.read() == b"b" * 100 + bytes(8092),
           "after a shrink and a regrow on 1, 2 reads the old bytes")
    w.close()
    r.close()

def close_barrier_sync(b, m):
    """MPI_File_close syncs (the MPI standard) and ROMIO's makes no fsync:
    a reader that keeps the file open, with its old pages cached, reads
    what the writer wrote once the writer's close returned; and a
    reader's fsync after reads leaves no page it read before another
    mount's write"""
    path = [os.path.join(x, "cbs") for x in m[:3]]
    with open(path[0], "wb") as f:
        f.write(b"a" * 65536)
    r = open(path[1], "rb")
    expect(r.read() == b"a" * 65536, "first read on 2")
    with open(path[0], "r+b") as w:
        w.write(b"b" * 65536)
    r.seek(0)
    expect(r.read() == b"b" * 65536, "after close-barrier-sync 2 reads stale bytes")
    # the reader also writes (ROMIO's ranks that wrote fsync at
    # MPI_File_sync), at the end, then reads what mount 3 wrote
    rw = open(path[1], "r+b")
    rw.read()
    with open(path[2], "r+b") as w:
        w.write(b"c" * 4096)
        w.flush()
        os.fsync(w.fileno())
    rw.seek(65536)
    rw.write(b"d" * 4096)
    rw.flush()
    os.fsync(rw.fileno())
    rw.seek(0)
    expect(rw.read() == b"c" * 4096 + b"b" * 61440 + b"d" * 4096,
           "2 wrote and synced, then read stale bytes of 3's write")
    rw.close()
    r.close()

def doomed(b, m):
    """a file open on two nodes and unlinked on one while open: every
    node reads it until its last close, then it is gone everywhere"""
    f1 = open(os.path.join(m[0], "dm"), "w+b")
    f1.write(os.urandom(700000))
    f1.flush()
    f2 = open(os.path.join(m[1], "dm"), "r+b")
    f2.seek(100000)
    f2.write(b"x" * 300000)
    f2.flush()
    os.unlink(os.path.join(m[0], "dm"))
    expect(not os.path.exists(os.path.join(m[1], "dm")), "unlinked on 1, still named on 2")
    os.fsync(f2.fileno())
    os.fsync(f1.fileno())
    f1.seek(100000)
    expect(f1.read(300000) == b"x" * 300000, "node 1 does not read node 2's bytes of the unlinked file")
    f1.close()
    f2.close()
    expect(not os.path.exists(os.path.join(b, "dm")), "the unlinked file is in the backing")

def appender(path, k, count, rec):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    for i in range(count):
        os.write(fd, (b"%d:%05d;" % (k, i)).ljust(rec, b"."))
    os.close(fd)

def append(b, m):
    """O_APPEND through descriptors kept open on three nodes: each node's
    appends, one after another's and all at once, land at the file's end
    (never over another node's), and each node reads the others' bytes
    through its own append descriptor"""
    path = [os.path.join(x, "ap") for x in m[:3]]
    open(path[0], "wb").close()
    fds = [os.open(p, os.O_RDWR | os.O_APPEND) for p in path]
    want = b""
    for i in range(60):            # in turn: 1, 2, 3, 1, ...
        k = i % 3
        rec = b"turn %d node %d\n" % (i, k + 1)
        expect(os.write(fds[k], rec) == len(rec), "short append")
        want += rec
    for k, fd in enumerate(fds, 1):
        got = os.pread(fd, len(want) + 10, 0)
        expect(got == want, "appends in turn: node %d reads %d bytes, not the %d "
               "appended (an append landed over another node's)" % (k, len(got), len(want)))
    for fd in fds:
        os.close(fd)
    # all at once: three processes, 300 records of 100 bytes each
    rec, count = 100, 300
    p = [multiprocessing.Process(target=appender, args=(path[k], k, count, rec))
         for k in range(3)]
    for x in p:
        x.start()
    for x in p:
        x.join()
        expect(x.exitcode == 0, "an appender failed")
    got = read_all(path[1])[len(want):]
    expect(len(got) == 3 * count * rec, "concurrent appends: %d bytes, not %d" %
           (len(got), 3 * count * rec))
    seen = sorted(got[i:i + rec].split(b";")[0] for i in range(0, len(got), rec))
    expect(seen == sorted(b"%d:%05d" % (k, i) for k in range(3) for i in range(count)),
           "concurrent appends: records lost or torn")

def replacer(d, count, done):
    for k in range(count):
        body = (b"%06d\n" % k) * (1000 + k * 37 % 20000)   # 7 KB to 140 KB
        with open(os.path.join(d, "cfg.tmp"), "wb") as f:
            f.write(body)
        os.rename(os.path.join(d, "cfg.tmp"), os.path.join(d, "cfg"))
    open(done, "w").close()

def whole(b):
    """a version the replacer wrote: one 7-byte record repeated"""
    return len(b) > 0 and len(b) % 7 == 0 and b == b[:7] * (len(b) // 7)

def replace_reader(d, done, how, out):
    n = bad = stale = 0
    p = os.path.join(d, "cfg")
    while not os.path.exists(done):
        try:
            if how == "read":
                got = read_all(p)
                ok = whole(got)
            else:
                st = os.stat(p)
                ok = st.st_size > 0 and st.st_size % 7 == 0
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno != 116:   # ESTALE: the kernel's retry raced again
                raise
            stale += 1
            continue
        n += 1
        bad += not ok
    out.put((how, n, bad, stale))

def replace(b, m):
    """a file replaced over and over by rename (write a temporary, rename
    it over the name) on 1: every open and stat of the name on 2, 3 and 4
    meanwhile gives a whole version, never the empty or short file of a
    version whose record went with its replacement (nor one whose blocks
    went at another reader's last close, the unlink having doomed it
    while that reader held it open)"""
    done = os.path.join(b, "replace.done")
    out = multiprocessing.Queue()
    readers = [multiprocessing.Process(target=replace_reader, args=(m[1], done, "read", out)),
               multiprocessing.Process(target=replace_reader, args=(m[2], done, "stat", out)),
               multiprocessing.Process(target=replace_reader, args=(m[3], done, "read", out))]
    for r in readers:
        r.start()
    replacer(m[0], 300, done)
    res = [out.get(timeout=60) for r in readers]
    for r in readers:
        r.join()
    for how, n, bad, stale in res:
        print("replace: %s: %d, %d wrong, %d stale" % (how, n, bad, stale), file=sys.stderr)
        expect(n > 0, "replace: no %s of the name succeeded" % how)
        expect(bad == 0, "replace: %d of %d %ss of a file replaced by rename gave "
               "no whole version" % (bad, n, how))
    os.unlink(done)

STEPS = {"append": append, "replace": replace, "doomed": doomed, "close_to_open": close_to_open, "namespace": namespace,
         "mtime": mtime, "stale_bound": stale_bound,
         "interleave": interleave, "sync_barrier_sync": sync_barrier_sync,
         "close_barrier_sync": close_barrier_sync}

if __name__ == "__main__":
    STEPS[sys.argv[1]](sys.argv[2], sys.argv[3:])
