#!/usr/bin/python3
"""fscl_locks.py MOUNT_A MOUNT_B MOUNT_C - fcntl and flock locks between
processes on different nodes of a cluster mount (fscl_coherence.sh runs
it): F_GETLK on B names A's lock (type, range, pid); F_SETLK on B is
refused while A holds; F_SETLKW on B waits until A unlocks; a holder
killed with SIGKILL leaves nothing held; a waiter killed while waiting
leaves nothing held; flock with LOCK_NB is refused across nodes and
granted when the holder's file is closed; more waiters on one mount than
a FUSE daemon has worker threads, all granted in turn once the holder on
that same mount unlocks; an OFD lock released at its description's last
close and with its process. Exits non-zero naming the step that failed."""
import errno
import fcntl
import os
import signal
import struct
import sys
import time

A, B, C = sys.argv[1:4]
NAME = "locks.dat"
FLOCK_FMT = "hhqqi"   # struct flock: l_type, l_whence, l_start, l_len, l_pid


def fail(msg):
    print("fscl_locks: " + msg, file=sys.stderr)
    sys.exit(1)


def lk(fd, cmd, typ, start, length):
    arg = struct.pack(FLOCK_FMT, typ, os.SEEK_SET, start, length, 0)
    return struct.unpack(FLOCK_FMT, fcntl.fcntl(fd, cmd, arg))


def holder(mount, how, start=0, length=100):
    """A child that opens the file on mount, locks it (how: 'w' fcntl
    write lock, 'wait' the same with F_SETLKW, 'flock' LOCK_EX), says
    'L' on its pipe once it holds, and unlocks when it reads 'u'
    ('pass': F_SETLKW, then unlock and exit at once)."""
    rd, wr = os.pipe()
    crd, cwr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        os.close(cwr)
        fd = os.open(os.path.join(mount, NAME), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if how == "flock":
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                lk(fd, fcntl.F_SETLKW if how in ("wait", "pass") else fcntl.F_SETLK,
                   fcntl.F_WRLCK, start, length)
        except OSError as e:
            os.write(wr, b"E%d" % e.errno)
            os._exit(1)
        os.write(wr, b"L")
        if how == "pass":
            os._exit(0)          # the close unlocks
        os.read(crd, 1)
        if how == "flock":
            fcntl.flock(fd, fcntl.LOCK_UN)
        else:
            lk(fd, fcntl.F_SETLK, fcntl.F_UNLCK, 0, 0)
        os.write(wr, b"U")
        os.read(crd, 1)
        os._exit(0)
    os.close(wr)
    os.close(crd)
    return pid, rd, cwr


def said(rd, timeout):
    """What the child said within timeout seconds ('' if nothing)."""
    import select
    r, _, _ = select.select([rd], [], [], timeout)
    return os.read(rd, 16).decode() if r else ""


def try_lock(mount, typ=fcntl.F_WRLCK, start=0, length=100):
    fd = os.open(os.path.join(mount, NAME), os.O_RDWR)
    try:
        lk(fd, fcntl.F_SETLK, typ, start, length)
        return True
    except OSError as e:
        if e.errno not in (errno.EAGAIN, errno.EACCES):
            fail("F_SETLK: unexpected error %s" % e)
        return False
    finally:
        os.close(fd)   # a close drops this process's locks


def eventually(what, ok, tries=100):
    """ok() within tries tenths of a second, else fail with what."""
    for _ in range(tries):
        if ok():
            return
        time.sleep(0.1)
    fail(what)


def reap(pid):
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


with open(os.path.join(A, NAME), "wb") as f:
    f.write(b"x" * 4096)

# A holds [0, 100) for writing
pa, ra, wa = holder(A, "w")
if said(ra, 10) != "L":
    fail("A could not take its write lock")

# F_GETLK on B names it
fd = os.open(os.path.join(B, NAME), os.O_RDWR)
t, _, start, length, pid = lk(fd, fcntl.F_GETLK, fcntl.F_RDLCK, 50, 10)
os.close(fd)
if t != fcntl.F_WRLCK or start != 0 or length != 100:
    fail("F_GETLK on B: type %d range %d+%d, not A's write lock 0+100"
         % (t, start, length))
if pid != pa:
    fail("F_GETLK on B: pid %d, not A's %d" % (pid, pa))
# beyond A's range, nothing conflicts
fd = os.open(os.path.join(B, NAME), os.O_RDWR)
t = lk(fd, fcntl.F_GETLK, fcntl.F_WRLCK, 100, 10)[0]
os.close(fd)
if t != fcntl.F_UNLCK:
    fail("F_GETLK on B past A's range: %d, not F_UNLCK" % t)
print("getlk: B sees A's lock")

# F_SETLK on B refused; F_SETLKW on B waits for A's unlock
if try_lock(B):
    fail("F_SETLK on B granted while A holds the range")
pb, rb, wb = holder(B, "wait")
if said(rb, 1.5):
    fail("F_SETLKW on B did not wait for A")
os.write(wa, b"u")
if said(ra, 10) != "U":
    fail("A could not unlock")
if said(rb, 10) != "L":
    fail("F_SETLKW on B not granted after A unlocked")
print("setlkw: B waited for A's unlock")
os.write(wa, b"x")
reap(pa)

# B's holder killed: its lock goes
os.kill(pb, signal.SIGKILL)
reap(pb)
eventually("the lock of a process killed on B is still held (C refused)",
           lambda: try_lock(C))
print("kill: a killed holder's lock is released")

# a waiter killed while waiting leaves nothing held
pa, ra, wa = holder(A, "w")
if said(ra, 10) != "L":
    fail("A could not take its write lock again")
pw, rw, ww = holder(C, "wait")
if said(rw, 1.5):
    fail("F_SETLKW on C did not wait")
os.kill(pw, signal.SIGKILL)
reap(pw)
time.sleep(0.5)
os.write(wa, b"u")
said(ra, 10)
os.write(wa, b"x")
reap(pa)
eventually("a waiter killed on C left its lock held", lambda: try_lock(B), 50)
print("kill while waiting: nothing left held")

# flock across nodes
pf, rf, wf = holder(A, "flock")
if said(rf, 10) != "L":
    fail("A could not flock")
fd = os.open(os.path.join(B, NAME), os.O_RDWR)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    fail("flock LOCK_NB on B granted while A holds LOCK_EX")
except OSError as e:
    if e.errno != errno.EWOULDBLOCK:
        fail("flock on B: %s" % e)
os.kill(pf, signal.SIGKILL)   # its open file goes: so does the flock
reap(pf)
def flock_nb():
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False


eventually("flock of a killed process on A still held", flock_nb)
os.close(fd)
print("flock: refused across nodes, released with its file")

# More F_SETLKW waiters on one mount than libfuse's 10 worker threads:
# the holder's unlock, through the same mount, must still be served.
pa, ra, wa = holder(B, "w")
if said(ra, 10) != "L":
    fail("B could not take its write lock")
waiters = [holder(B, "pass") for _ in range(14)]
time.sleep(1)
os.write(wa, b"u")
if said(ra, 15) != "U":
    fail("the holder's unlock was not served with 14 waiters on its mount")
os.write(wa, b"x")
reap(pa)
for pid, rd, wr in waiters:      # each takes the lock in turn, and goes
    if said(rd, 30) != "L":
        fail("a waiter on a busy mount was never granted")
    reap(pid)
print("busy mount: 14 waiters, the unlock served, each granted in turn")

# An open file description lock (F_OFD_SETLK) goes with its description:
# at the last close, or when its process exits, as the kernel's do
F_OFD_GETLK, F_OFD_SETLK = 36, 37
fd = os.open(os.path.join(A, NAME), os.O_RDWR)
lk(fd, F_OFD_SETLK, fcntl.F_WRLCK, 200, 100)
if try_lock(B, fcntl.F_WRLCK, 200, 100):
    fail("B took a range A holds with an OFD lock")
os.close(fd)
eventually("an OFD lock outlives its closed description (B cannot lock)",
           lambda: try_lock(B, fcntl.F_WRLCK, 200, 100), 30)
pid = os.fork()
if pid == 0:
    fd = os.open(os.path.join(A, NAME), os.O_RDWR)
    lk(fd, F_OFD_SETLK, fcntl.F_WRLCK, 300, 100)
    os._exit(0)
reap(pid)
eventually("an OFD lock outlives its process (B cannot lock)",
           lambda: try_lock(B, fcntl.F_WRLCK, 300, 100), 30)
print("OFD locks: released at their description's last close and with their process")
