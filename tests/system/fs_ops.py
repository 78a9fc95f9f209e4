#!/usr/bin/env python3
"""fs_ops.py DIR - run a fixed sequence of file system operations in DIR and
print one line per observable result (return values, errno names, sizes,
modes, link counts, data checksums). Run on a plain directory and on an
nvcachefs mount, the two outputs must be identical (fs_basic.sh)."""
import ctypes, errno, fcntl, hashlib, mmap, os, stat, sys, time

d = sys.argv[1]
os.chdir(d)
libc = ctypes.CDLL(None, use_errno=True)
out = []


def log(*a):
    out.append(" ".join(str(x) for x in a))


def h(b):
    return hashlib.sha1(b).hexdigest()[:12]


def tryop(name, f, *a):
    try:
        r = f(*a)
        log(name, "ok", r if r is None or isinstance(r, (int, str)) else type(r).__name__)
        return r
    except OSError as e:
        log(name, "err", errno.errorcode.get(e.errno, e.errno))
        return None


def st(name, p, follow=False):
    try:
        s = os.stat(p) if follow else os.lstat(p)
        log(name, "mode=%o" % s.st_mode, "size=%d" % s.st_size, "nlink=%d" % s.st_nlink,
            "uid=%d gid=%d" % (s.st_uid, s.st_gid))
    except OSError as e:
        log(name, "err", errno.errorcode.get(e.errno, e.errno))


def content(name, p):
    try:
        with open(p, "rb") as f:
            b = f.read()
        log(name, len(b), h(b))
    except OSError as e:
        log(name, "err", errno.errorcode.get(e.errno, e.errno))


def fallocate(fd, mode, off, ln):
    r = libc.fallocate(ctypes.c_int(fd), ctypes.c_int(mode), ctypes.c_long(off), ctypes.c_long(ln))
    if r < 0:
        raise OSError(ctypes.get_errno(), "fallocate")
    return r


data = bytes(range(256)) * 4096  # 1 MiB, not all zeros

# create, write, read, sizes
fd = os.open("f1", os.O_CREAT | os.O_RDWR | os.O_EXCL, 0o640)
tryop("excl-again", os.open, "f1", os.O_CREAT | os.O_EXCL | os.O_RDWR)
os.write(fd, data[:100000])
os.pwrite(fd, b"X" * 5000, 70000)           # overwrite inside, across a block edge
os.pwrite(fd, b"tail", 3 * 1024 * 1024 + 7)  # sparse extension
log("fstat-size", os.fstat(fd).st_size)
log("pread-mid", h(os.pread(fd, 20000, 60000)))
log("pread-hole", h(os.pread(fd, 9000, 2 * 1024 * 1024)))
log("pread-eof", len(os.pread(fd, 100, 3 * 1024 * 1024 + 5)))
os.ftruncate(fd, 80000)
log("after-ftruncate-shrink", os.fstat(fd).st_size, h(os.pread(fd, 100000, 0)))
os.ftruncate(fd, 200000)
log("after-ftruncate-grow", os.fstat(fd).st_size, h(os.pread(fd, 300000, 0)))
os.fsync(fd)
os.fdatasync(fd)
os.close(fd)
content("f1", "f1")
st("f1-stat", "f1")
os.truncate("f1", 12345)
content("f1-truncated", "f1")

# O_APPEND, O_TRUNC
with open("app", "wb") as f:
    f.write(b"a" * 1000)
fd = os.open("app", os.O_WRONLY | os.O_APPEND)
os.write(fd, b"b" * 300)
os.close(fd)
content("append", "app")
fd = os.open("app", os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"c" * 10)
os.close(fd)
content("otrunc", "app")

# fallocate: extend, keep size, punch hole, zero range
fd = os.open("fa", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, data[:300000])
tryop("fallocate-extend", fallocate, fd, 0, 0, 500000)
log("fa-size", os.fstat(fd).st_size)
tryop("fallocate-keep", fallocate, fd, 1, 0, 900000)
log("fa-size2", os.fstat(fd).st_size)
tryop("punch", fallocate, fd, 3, 1000, 70000)  # PUNCH_HOLE|KEEP_SIZE
log("fa-after-punch", h(os.pread(fd, 600000, 0)))
tryop("zero-range", fallocate, fd, 0x10, 200000, 1000)
log("fa-after-zero", h(os.pread(fd, 600000, 0)))
os.close(fd)

# rename, also over an open file; unlink of an open file
with open("r1", "wb") as f:
    f.write(b"one" * 1000)
with open("r2", "wb") as f:
    f.write(b"two" * 2000)
fd2 = os.open("r2", os.O_RDWR)
os.rename("r1", "r2")
log("old-r2-via-fd", h(os.pread(fd2, 10000, 0)))
os.pwrite(fd2, b"ghost", 0)
log("old-r2-written", h(os.pread(fd2, 10000, 0)))
os.close(fd2)
content("r2-now", "r2")
st("r1-gone", "r1")
fd = os.open("u1", os.O_CREAT | os.O_RDWR, 0o600)
os.write(fd, b"unlinked data" * 100)
os.unlink("u1")
log("unlinked-read", h(os.pread(fd, 5000, 0)), os.fstat(fd).st_nlink)
os.write(fd, b"more")
os.close(fd)
st("u1-gone", "u1")
tryop("rename-noent", os.rename, "nope", "nope2")

# links, symlinks, directories
os.link("r2", "r2link")
st("r2-linked", "r2")
os.unlink("r2")
content("r2link-after-unlink", "r2link")
os.symlink("r2link", "sl")
log("readlink", os.readlink("sl"))
st("sl-lstat", "sl")
content("sl-follow", "sl")
os.symlink("dangling-target", "sl2")
content("dangling", "sl2")
os.mkdir("dir", 0o750)
os.mkdir("dir/sub")
with open("dir/sub/x", "wb") as f:
    f.write(b"x")
tryop("rmdir-notempty", os.rmdir, "dir")
tryop("mkdir-exists", os.mkdir, "dir")
os.rename("dir/sub/x", "dir/x")
tryop("rmdir-sub", os.rmdir, "dir/sub")
st("dir-stat", "dir")
log("listdir", sorted(os.listdir(".")))
log("listdir-dir", sorted(os.listdir("dir")))
many = ["m%04d" % i for i in range(300)]
os.mkdir("many")
for n in many:
    open("many/" + n, "w").close()
log("listdir-many", len(os.listdir("many")), sorted(os.listdir("many")) == many)

# metadata
os.chmod("r2link", 0o600)
os.chown("r2link", 1234, 5678)
os.utime("r2link", ns=(1000000000123456789, 1200000000987654321))
s = os.stat("r2link")
log("meta", "%o" % s.st_mode, s.st_uid, s.st_gid, s.st_atime_ns, s.st_mtime_ns)
os.statvfs(".")
log("statvfs", "ok")
tryop("open-noent", os.open, "nope", os.O_RDONLY)
tryop("open-dir-write", os.open, "dir", os.O_WRONLY)

# xattrs
try:
    os.setxattr("r2link", "user.color", b"blue")
    log("getxattr", os.getxattr("r2link", "user.color"))
    log("listxattr", sorted(x for x in os.listxattr("r2link") if x.startswith("user.")))
    os.removexattr("r2link", "user.color")
    tryop("getxattr-gone", os.getxattr, "r2link", "user.color")
except OSError as e:
    log("xattr", "err", errno.errorcode.get(e.errno, e.errno))

# shared mmap coherent with read/write
fd = os.open("mm", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, data[:3 * 65536])
m = mmap.mmap(fd, 3 * 65536, mmap.MAP_SHARED)
m[100:110] = b"0123456789"
m.flush()
log("mmap-then-pread", os.pread(fd, 10, 100))
os.pwrite(fd, b"abcdefghij", 65530)
log("pwrite-then-mmap", m[65530:65540])
m.close()
os.close(fd)
content("mm", "mm")

# POSIX byte-range locks and flock between processes
fd = os.open("lk", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"l" * 4096)
fcntl.lockf(fd, fcntl.LOCK_EX, 100, 0)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    res = []
    fd3 = os.open("lk", os.O_RDWR)
    for start in (0, 50, 200):
        try:
            fcntl.lockf(fd3, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, start)
            res.append("got%d" % start)
            fcntl.lockf(fd3, fcntl.LOCK_UN, 10, start)
        except OSError as e:
            res.append("busy%d" % start)
    try:
        fcntl.flock(fd3, fcntl.LOCK_EX | fcntl.LOCK_NB)
        res.append("flock-got")
    except OSError:
        res.append("flock-busy")
    os.write(w, " ".join(res).encode())
    os._exit(0)
os.waitpid(pid, 0)
log("locks-child", os.read(r, 200).decode())
fcntl.flock(fd, fcntl.LOCK_EX)
pid = os.fork()
if pid == 0:
    fd3 = os.open("lk", os.O_RDWR)
    try:
        fcntl.flock(fd3, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os._exit(1)
    except OSError:
        os._exit(2)
_, status = os.waitpid(pid, 0)
log("flock-held-child", os.WEXITSTATUS(status))
os.close(fd)

# Permissions and privileges as a user without capabilities (nobody): the
# mount must check permissions as the backing does (it opens files as root),
# and a write, truncate or fallocate drops set-id bits and file capabilities
# by Linux's rules. Needs DIR reachable by nobody (fs_basic.sh: allow_other).
NOBODY, NOGROUP = 65534, 65534


def as_nobody(name, fn, groups=()):
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setgroups(list(groups))
            os.setgid(NOGROUP)
            os.setuid(NOBODY)
            fn()
        except OSError as e:
            code = 1 + e.errno % 200
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.WEXITSTATUS(status)
    log(name, "ok" if code == 0 else "err " + errno.errorcode.get(code - 1, str(code - 1)))


def mode(name, p):
    log(name, "mode=%o" % os.stat(p).st_mode)


def caps(name, p):
    try:
        log(name, "caps", h(os.getxattr(p, "security.capability")))
    except OSError as e:
        log(name, "caps", errno.errorcode.get(e.errno, e.errno))


def setcaps(p):
    # struct vfs_cap_data, revision 2, effective: CAP_NET_RAW permitted
    os.setxattr(p, "security.capability",
                (0x02000001).to_bytes(4, "little") + (1 << 13).to_bytes(4, "little") + bytes(12))


def mkfile(p, m, gid=0):
    with open(p, "wb") as f:
        f.write(data[:8192])
    os.chown(p, 0, gid)
    os.chmod(p, m)


def on_fd(p, fn, flags=os.O_WRONLY):
    def run():
        fd = os.open(p, flags)
        try:
            fn(fd)
        finally:
            os.close(fd)
    return run


def access_w(p):
    def run():
        if not os.access(p, os.W_OK):
            raise OSError(errno.EACCES, "access")
    return run


def pwrite_to(p):
    return on_fd(p, lambda fd: os.pwrite(fd, b"w" * 100, 50))


mkfile("priv", 0o600)
as_nobody("nobody-read-0600", on_fd("priv", lambda fd: None, os.O_RDONLY))
mkfile("pub", 0o644)
as_nobody("nobody-write-0644", on_fd("pub", lambda fd: None))
as_nobody("nobody-unlink-in-root-dir", lambda: os.unlink("pub"))
os.mkdir("sticky", 0o777)
os.chmod("sticky", 0o1777)
mkfile("sticky/roots", 0o666)
mkfile("open666", 0o666)
as_nobody("nobody-unlink-sticky", lambda: os.unlink("sticky/roots"))
as_nobody("nobody-chown", lambda: os.chown("open666", NOBODY, NOGROUP))
as_nobody("nobody-chmod", lambda: os.chmod("open666", 0o600))
as_nobody("nobody-utime-set", lambda: os.utime("open666", (1, 1)))
as_nobody("nobody-utime-now", lambda: os.utime("open666", None))
as_nobody("nobody-access-w-0644", access_w("pub"))
for m in (0o6777, 0o4777, 0o2777, 0o2766, 0o6767):
    mkfile("sx%o" % m, m)
    as_nobody("nobody-write-%o" % m, pwrite_to("sx%o" % m))
    mode("after-nobody-write-%o" % m, "sx%o" % m)
mkfile("sxgrp", 0o2766, NOGROUP)  # nobody is in the file's group: set-gid stays
as_nobody("nobody-ingroup-write", pwrite_to("sxgrp"))
mode("after-nobody-ingroup-write", "sxgrp")
mkfile("sxroot", 0o6777)          # root has CAP_FSETID: nothing dropped
fd = os.open("sxroot", os.O_WRONLY)
os.pwrite(fd, b"r" * 10, 0)
os.close(fd)
mode("after-root-write", "sxroot")
mkfile("sxtr", 0o6777)
as_nobody("nobody-ftruncate", on_fd("sxtr", lambda fd: os.ftruncate(fd, 100)))
mode("after-nobody-ftruncate", "sxtr")
mkfile("sxot", 0o6777)
as_nobody("nobody-otrunc", on_fd("sxot", lambda fd: None, os.O_WRONLY | os.O_TRUNC))
mode("after-nobody-otrunc", "sxot")
mkfile("sxfa", 0o6777)
as_nobody("nobody-fallocate", on_fd("sxfa", lambda fd: fallocate(fd, 0, 0, 65536)))
mode("after-nobody-fallocate", "sxfa")
# a chown that changes no id still drops set-uid (Linux's chown_common)
mkfile("sxchown", 0o6755)
os.chown("sxchown", -1, -1)
mode("after-chown-nochange", "sxchown")


# a writer in its own user namespace has every capability there and none
# over this file: set-uid goes (CapEff in /proc alone would say it stays)
def write_in_userns():
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        raise OSError(ctypes.get_errno(), "unshare")
    pwrite_to("sxns")()


# 02767: set-gid, not group-executable, writer not in the group: only
# the capability decides (04777 would lose set-uid to the kernel's empty
# setattr before the write, whatever we decided)
mkfile("sxns", 0o2767)
as_nobody("nobody-userns-write", write_in_userns)
mode("after-userns-write", "sxns")

# a real chown by the owner, not privileged: set-gid (not group-executable,
# owner not in the old group) goes, which root's chown on the backing keeps
mkfile("sxchgrp", 0o2666)
os.chown("sxchgrp", NOBODY, 0)
as_nobody("nobody-chgrp", lambda: os.chown("sxchgrp", -1, NOGROUP))
mode("after-nobody-chgrp", "sxchgrp")

# capabilities set on a file whose data is not written back yet survive
# that write-back (root's write to the backing would drop them)
try:
    with open("capwb", "wb") as f:
        f.write(data[:65536])
    setcaps("capwb")
    time.sleep(1.5)  # past fs_basic.sh's writeback_delay
    caps("caps-after-writeback", "capwb")
except OSError as e:
    log("capwb", "err", errno.errorcode.get(e.errno, e.errno))
# a file written once (nothing to drop) then made set-uid: the next write
# by nobody must still drop it
mkfile("later", 0o666)
as_nobody("nobody-write-plain", pwrite_to("later"))
os.chmod("later", 0o4777)
as_nobody("nobody-write-made-suid", pwrite_to("later"))
mode("after-made-suid", "later")
try:
    mkfile("capw", 0o755)
    setcaps("capw")
    caps("caps-set", "capw")
    on_fd("capw", lambda fd: os.pwrite(fd, b"c", 0))()
    caps("caps-after-root-write", "capw")
    setcaps("capw")  # again, after a write that found nothing to drop
    on_fd("capw", lambda fd: os.pwrite(fd, b"c", 1))()
    caps("caps-after-second-write", "capw")
    setcaps("capw")
    os.truncate("capw", 10)
    caps("caps-after-truncate", "capw")
except OSError as e:
    log("caps", "err", errno.errorcode.get(e.errno, e.errno))

# New entries made by nobody with umask 002: the caller's umask alone
# decides the mode (the daemon's own must not apply again), the caller owns
# them, and a set-gid directory passes its group on (project directories).
os.mkdir("pubdir", 0o777)
os.chmod("pubdir", 0o777)
os.mkdir("sgdir", 0o777)
os.chown("sgdir", 0, 100)
os.chmod("sgdir", 0o2777)


def make_entries():
    os.umask(0o002)
    for d in ("pubdir", "sgdir"):
        os.close(os.open(d + "/f", os.O_CREAT | os.O_WRONLY, 0o666))
        os.mkdir(d + "/d", 0o777)
        os.mkfifo(d + "/p", 0o666)
        os.symlink("f", d + "/l")


as_nobody("nobody-creates", make_entries)
for d in ("pubdir", "sgdir"):
    for n in ("f", "d", "p", "l"):
        st("new-" + d + "-" + n, d + "/" + n)
    os.unlink(d + "/p")  # diff -r of the backing cannot compare fifos

# POSIX ACLs on top of the mode bits: the kernel enforces the backing's
# ACLs, a chmod moves the ACL mask, and in a directory with a default ACL
# new entries take it and ignore the creator's umask.
ACL_UNDEF = 0xFFFFFFFF


def acl(*entries):
    # system.posix_acl_* value: version 2, then (tag, perm, id) sorted
    b = (2).to_bytes(4, "little")
    for tag, perm, ident in sorted(entries, key=lambda e: (e[0], e[2])):
        b += tag.to_bytes(2, "little") + perm.to_bytes(2, "little") + ident.to_bytes(4, "little")
    return b


def acl_of(name, p, which="access"):
    try:
        log(name, "mode=%o" % os.stat(p).st_mode, "acl", h(os.getxattr(p, "system.posix_acl_" + which)))
    except OSError as e:
        log(name, "mode=%o" % os.stat(p).st_mode, "acl", errno.errorcode.get(e.errno, e.errno))


try:
    mkfile("aclf", 0o600)
    os.setxattr("aclf", "system.posix_acl_access",
                acl((1, 6, ACL_UNDEF), (2, 4, NOBODY), (4, 0, ACL_UNDEF), (0x10, 4, ACL_UNDEF), (0x20, 0, ACL_UNDEF)))
    acl_of("acl-set", "aclf")
    as_nobody("nobody-read-acl-granted", on_fd("aclf", lambda fd: None, os.O_RDONLY))
    os.chmod("aclf", 0o600)  # the mask (group bits) drops to ---
    acl_of("acl-after-chmod", "aclf")
    as_nobody("nobody-read-acl-masked", on_fd("aclf", lambda fd: None, os.O_RDONLY))
    os.mkdir("acld", 0o755)
    rwx_nobody = ((1, 7, ACL_UNDEF), (2, 7, NOBODY), (4, 5, ACL_UNDEF), (0x10, 7, ACL_UNDEF), (0x20, 0, ACL_UNDEF))
    os.setxattr("acld", "system.posix_acl_access", acl(*rwx_nobody))
    os.setxattr("acld", "system.posix_acl_default", acl(*rwx_nobody))

    def make_in_acld():
        os.umask(0o077)
        os.close(os.open("acld/f", os.O_CREAT | os.O_WRONLY, 0o666))
        os.mkdir("acld/d", 0o777)
    as_nobody("nobody-creates-in-default-acl-dir", make_in_acld)
    acl_of("acl-new-file", "acld/f")
    acl_of("acl-new-dir", "acld/d")
    acl_of("acl-new-dir-default", "acld/d", "default")
except OSError as e:
    log("acl", "err", errno.errorcode.get(e.errno, e.errno))

# a bigger file written in pieces and read back
with open("big", "wb") as f:
    for i in range(24):
        f.write(data[i * 1000:] + data[:i * 1000])
content("big", "big")

print("\n".join(out))
