#!/usr/bin/env python3
"""fsx_ops.py - differential random-operation tester for a mounted file system.

    fsx_ops.py run --mount M [--mount2 M2] --ref R [--seed S] [--ops N] [--full-every K]
    fsx_ops.py compare A B [--no-times]

`run` applies ONE seeded sequence of operations to two empty directories: the
mount under test (M) and a reference directory on a plain local file system
(R).  Every operation is done on M first, then on R, and its result (return
value or errno) must match.  After each step the paths and open handles the
step touched are compared (type, mode, size, nlink, bytes, user.* xattrs, and
times right after utimens / data writes); every K steps and at the end the
whole trees are compared.  The first difference fails the run with the op
number, the op, the seed and a diff.

The sequence depends only on the seed and on the reference's behaviour, so
the same seed replays the same operations (the seed is printed first).

With --mount2 (a second mount of the same cluster file system, on another
node), M and M2 are one tree seen from two nodes: every path operation and
every open goes through one of them at random, each handle does its
operations through the mount it was opened on, and each check reads
through either. What is checked is what a cluster mount promises: its
metadata and the bytes read after an open are current at once, while a
handle's kernel page cache may hold bytes that another node has since
overwritten until it is synced; so a handle whose file was changed through
the other mount since is fsync'ed (which drops that cache) before it is
read, as an MPI-IO program syncs after a barrier. An ESTALE from the
kernel (a rename through a directory the other node moved, which this
kernel knows by its old name: docs/nvcachefs-cluster.md) is retried once
after the names are looked up again, and counted. Appends through a
handle kept open while the other node extends the file must still land at
the file's end.

--append-direct: O_APPEND handles are direct I/O (as on a cluster mount),
so a shared mmap of one fails (ENODEV); the mmap step maps the file
through a path instead.

`compare` compares two trees once (used for backing dir vs reference after
unmount, where times are not meaningful: write-back rewrites them).

Python 3 standard library only.
"""

import argparse
import collections
import ctypes
import ctypes.util
import errno
import mmap
import os
import random
import stat
import sys
import time

KiB = 1024
MiB = 1024 * KiB
PAGE = mmap.PAGESIZE

FILE_NAMES = ['f%d' % i for i in range(8)]
DIR_NAMES = ['d%d' % i for i in range(3)]
XATTR_NAMES = ['user.k%d' % i for i in range(4)]
MAX_HANDLES = 8
# A file larger than this is compared in windows after each step (and in full
# by the periodic tree compare), to keep 10k steps well under a minute.
FULL_READ_LIMIT = 1 * MiB

# the times compared right after utimens (--no-atime-check: mtime only)
TIME_FIELDS = ('st_mtime_ns', 'st_atime_ns')

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10

_libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


def sys_fallocate(fd, mode, off, length):
    if _libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


class Mismatch(Exception):
    pass


def ename(e):
    return errno.errorcode.get(e, str(e)) if e else 'ok'


def call(fn, *args):
    """Run fn, return ('ok', value) or ('err', errno)."""
    try:
        return ('ok', fn(*args))
    except OSError as e:
        return ('err', e.errno)


def fmt_res(r):
    if r[0] == 'err':
        return 'error ' + ename(r[1])
    v = r[1]
    if isinstance(v, (bytes, bytearray)):
        return '%d bytes' % len(v)
    return 'ok %r' % (v,)


# ----------------------------------------------------------------------------
# Comparison of two trees / entries.

def read_all(path_or_fd, size_hint=None):
    own = isinstance(path_or_fd, str)
    fd = os.open(path_or_fd, os.O_RDONLY | os.O_NOFOLLOW) if own else path_or_fd
    try:
        chunks = []
        off = 0
        while True:
            b = os.pread(fd, MiB, off)
            if not b:
                break
            chunks.append(b)
            off += len(b)
        return b''.join(chunks)
    finally:
        if own:
            os.close(fd)


def first_diff(a, b):
    n = min(len(a), len(b))
    # Binary search on equal prefixes would be faster; a linear scan in 64 KiB
    # pieces is fast enough for a failure report.
    step = 64 * KiB
    for base in range(0, n, step):
        if a[base:base + step] != b[base:base + step]:
            for i in range(base, min(base + step, n)):
                if a[i] != b[i]:
                    return i
    return n if len(a) != len(b) else -1


def bytes_diff(label, m, r, base=0):
    i = first_diff(m, r)
    if i < 0:
        return None
    lo = max(0, i - 8)
    return ('%s: contents differ at byte %d (mount %d bytes, ref %d bytes)\n'
            '    mount[%d:]: %s\n    ref  [%d:]: %s' %
            (label, base + i, len(m), len(r), base + lo, m[lo:lo + 32].hex(),
             base + lo, r[lo:lo + 32].hex()))


def xattrs(path_or_fd):
    try:
        if isinstance(path_or_fd, str):
            names = os.listxattr(path_or_fd, follow_symlinks=False)
        else:
            names = os.listxattr(path_or_fd)
    except OSError as e:
        return ('err', e.errno)
    out = {}
    for n in sorted(names):
        if not n.startswith('user.'):
            continue
        try:
            out[n] = os.getxattr(path_or_fd, n, follow_symlinks=False) \
                if isinstance(path_or_fd, str) else os.getxattr(path_or_fd, n)
        except OSError as e:
            out[n] = 'error ' + ename(e.errno)
    return ('ok', out)


def compare_stat(label, sm, sr, times, diffs, is_dir=False):
    fm, fr = stat.S_IFMT(sm.st_mode), stat.S_IFMT(sr.st_mode)
    if fm != fr:
        diffs.append('%s: type mount %o ref %o' % (label, fm, fr))
        return False
    if stat.S_IMODE(sm.st_mode) != stat.S_IMODE(sr.st_mode):
        diffs.append('%s: mode mount %o ref %o' % (label, stat.S_IMODE(sm.st_mode),
                                                   stat.S_IMODE(sr.st_mode)))
    if sm.st_nlink != sr.st_nlink:
        diffs.append('%s: nlink mount %d ref %d' % (label, sm.st_nlink, sr.st_nlink))
    if not is_dir and sm.st_size != sr.st_size:
        diffs.append('%s: size mount %d ref %d' % (label, sm.st_size, sr.st_size))
    if times:
        for f in TIME_FIELDS:
            if getattr(sm, f) != getattr(sr, f):
                diffs.append('%s: %s mount %d ref %d' % (label, f[3:8], getattr(sm, f),
                                                         getattr(sr, f)))
    return True


def compare_path(rel, mroot, rroot, diffs, times=False, full=True, windows=()):
    """Compare one path (relative) of both trees; append differences."""
    mp, rp = os.path.join(mroot, rel), os.path.join(rroot, rel)
    label = rel or '/'
    a, b = call(os.lstat, mp), call(os.lstat, rp)
    if a[0] != b[0] or (a[0] == 'err' and a[1] != b[1]):
        diffs.append('%s: lstat mount %s, ref %s' % (label, fmt_res(a), fmt_res(b)))
        return
    if a[0] == 'err':
        return
    sm, sr = a[1], b[1]
    if not compare_stat(label, sm, sr, times, diffs, stat.S_ISDIR(sr.st_mode)):
        return
    if stat.S_ISLNK(sr.st_mode):
        lm, lr = call(os.readlink, mp), call(os.readlink, rp)
        if lm != lr:
            diffs.append('%s: readlink mount %r ref %r' % (label, lm, lr))
        return
    xm, xr = xattrs(mp), xattrs(rp)
    if xm != xr:
        diffs.append('%s: xattrs mount %r ref %r' % (label, xm, xr))
    if stat.S_ISDIR(sr.st_mode):
        lm, lr = call(lambda p: sorted(os.listdir(p)), mp), call(lambda p: sorted(os.listdir(p)), rp)
        if lm != lr:
            diffs.append('%s: directory entries mount %r ref %r' % (label, lm, lr))
        return
    if not stat.S_ISREG(sr.st_mode):
        return
    if full or sr.st_size <= FULL_READ_LIMIT:
        cm, cr = call(read_all, mp), call(read_all, rp)
        if cm[0] != 'ok' or cr[0] != 'ok':
            diffs.append('%s: read mount %s ref %s' % (label, fmt_res(cm), fmt_res(cr)))
            return
        d = bytes_diff(label, cm[1], cr[1])
        if d:
            diffs.append(d)
        return
    compare_windows(label, mp, rp, windows, sr.st_size, diffs)


def compare_windows(label, mp, rp, windows, size, diffs):
    wins = list(windows) + [(0, 64 * KiB), (max(0, size - 64 * KiB), 64 * KiB)]
    fm = os.open(mp, os.O_RDONLY)
    try:
        fr = os.open(rp, os.O_RDONLY)
        try:
            for off, ln in wins:
                m, r = os.pread(fm, ln, off), os.pread(fr, ln, off)
                d = bytes_diff(label, m, r, off)
                if d:
                    diffs.append(d)
                    return
        finally:
            os.close(fr)
    finally:
        os.close(fm)


def walk(root):
    out = []
    stack = ['']
    while stack:
        d = stack.pop()
        for name in sorted(os.listdir(os.path.join(root, d))):
            rel = os.path.join(d, name)
            out.append(rel)
            st = os.lstat(os.path.join(root, rel))
            if stat.S_ISDIR(st.st_mode):
                stack.append(rel)
    return sorted(out)


def compare_trees(mroot, rroot, times=False):
    diffs = []
    wm, wr = walk(mroot), walk(rroot)
    if wm != wr:
        sm, sr = set(wm), set(wr)
        diffs.append('tree: only in mount: %s; only in ref: %s' %
                     (sorted(sm - sr), sorted(sr - sm)))
    compare_path('', mroot, rroot, diffs, times=False)
    for rel in wr:
        if rel in wm:
            compare_path(rel, mroot, rroot, diffs, times=times)
    return diffs


# ----------------------------------------------------------------------------
# The random sequence.

class Handle:
    def __init__(self, hid, rel, flags, fdm, fdr, mi):
        self.hid, self.rel, self.flags, self.fdm, self.fdr = hid, rel, flags, fdm, fdr
        self.mi = mi    # the mount (index) it was opened through

    def readable(self):
        return (self.flags & os.O_ACCMODE) != os.O_WRONLY

    def writable(self):
        return (self.flags & os.O_ACCMODE) != os.O_RDONLY

    def __repr__(self):
        return 'h%d(%s)' % (self.hid, self.rel) if not self.mi else \
            'h%d(%s)@m%d' % (self.hid, self.rel, self.mi + 1)


FLAG_NAMES = [(os.O_WRONLY, 'WRONLY'), (os.O_RDWR, 'RDWR'), (os.O_CREAT, 'CREAT'),
              (os.O_EXCL, 'EXCL'), (os.O_TRUNC, 'TRUNC'), (os.O_APPEND, 'APPEND')]


def flag_str(f):
    s = [n for v, n in FLAG_NAMES if f & v]
    return '|'.join(s) or 'RDONLY'


class Runner:
    def __init__(self, args):
        self.ms = [args.mount] + ([args.mount2] if args.mount2 else [])
        self.m, self.r = args.mount, args.ref
        self.cur = 0           # the mount this step's path operations use
        self.op_mount = 0      # the mount this step changed file data through
        self.stale = collections.defaultdict(set)   # inode (in R) -> mounts to sync
        self.seed = args.seed
        self.rng = random.Random(args.seed)
        self.nops = args.ops
        self.full_every = args.full_every
        self.verbose = args.verbose
        self.no_append = args.no_append
        self.skip_mtime = args.no_mtime_check
        self.final_files = args.final_files
        self.hold_open = args.hold_open
        self.append_direct = args.append_direct
        self.handles = []
        self.next_hid = 0
        self.counts = collections.Counter()
        self.unsupported = collections.Counter()
        self.errors = collections.Counter()   # errno outcomes both sides agreed on
        self.estale = 0        # ESTALE retried after a fresh lookup (two mounts)
        self.history = collections.deque(maxlen=12)
        self.entries = []      # (rel, is_dir) in the reference, sorted
        self.rescan()
        # What the current step touched, for the compare that follows it.
        self.touched = set()
        self.touched_handles = set()
        self.check_times = set()
        self.check_mtime_after = {}
        self.windows = collections.defaultdict(list)

    # -- model of the reference tree -------------------------------------
    def rescan(self):
        self.entries = [(rel, os.path.isdir(os.path.join(self.r, rel)) and
                         not os.path.islink(os.path.join(self.r, rel)))
                        for rel in walk(self.r)]

    def dirs(self):
        return [''] + [e for e, d in self.entries if d]

    def files(self):
        return [e for e, d in self.entries
                if not d and stat.S_ISREG(os.lstat(os.path.join(self.r, e)).st_mode)]

    def any_path(self, existing_bias=0.85, want='any'):
        rng = self.rng
        if rng.random() < existing_bias:
            if want == 'file':
                pool = self.files()
            elif want == 'dir':
                pool = self.dirs()[1:]
            else:
                pool = [e for e, _ in self.entries]
            if pool:
                return rng.choice(pool)
        parent = rng.choice(self.dirs())
        name = rng.choice(DIR_NAMES if want == 'dir' else FILE_NAMES if want == 'file'
                          else FILE_NAMES + DIR_NAMES)
        return os.path.join(parent, name)

    def new_path(self, want='file'):
        # Bias towards names that exist so renames and creates collide often.
        return self.any_path(existing_bias=0.3, want=want)

    # -- random sizes --------------------------------------------------------
    def offset(self):
        rng = self.rng
        x = rng.random()
        if x < 0.70:
            return rng.randrange(0, 256 * KiB)
        if x < 0.90:  # around the 1 MiB stripe boundaries
            return max(0, rng.randrange(1, 4) * MiB + rng.randrange(-8 * KiB, 8 * KiB))
        return rng.randrange(0, 4 * MiB)

    def length(self):
        rng = self.rng
        x = rng.random()
        if x < 0.5:
            return rng.randrange(1, 4097)
        if x < 0.88:
            return rng.randrange(4 * KiB, 64 * KiB)
        return rng.randrange(64 * KiB, 1 * MiB)

    def data(self, n):
        if self.rng.random() < 0.1:
            return bytes([self.rng.randrange(256)]) * n
        return self.rng.randbytes(n)

    # -- doing one thing on both sides -------------------------------------
    def both(self, desc, fn, *args, optional_unsupported=False):
        """fn(root_or_side, *args) on mount then ref; results must agree."""
        a = call(fn, 'm', *args)
        if a[0] == 'err' and a[1] == errno.ESTALE and len(self.ms) > 1:
            # a directory the other node moved is still known to this
            # kernel by its old name: the lookup of its new one fails (as
            # on NFS) until the old name is looked up again
            self.estale += 1
            self.relookup()
            a = call(fn, 'm', *args)
        if optional_unsupported and a[0] == 'err' and a[1] in (errno.EOPNOTSUPP, errno.ENOSYS):
            self.unsupported[desc.split()[0]] += 1
            return a
        b = call(fn, 'r', *args)
        if (a[0], a[1] if a[0] == 'err' else None) != (b[0], b[1] if b[0] == 'err' else None) \
                or (a[0] == 'ok' and a[1] != b[1]):
            detail = ''
            if a[0] == 'ok' and b[0] == 'ok' and isinstance(a[1], bytes):
                detail = '\n' + (bytes_diff('returned data', a[1], b[1]) or '')
            raise Mismatch('%s: mount %s, ref %s%s' % (desc, fmt_res(a), fmt_res(b), detail))
        if b[0] == 'err':
            self.errors[ename(b[1])] += 1
        return b

    def p(self, side, rel):
        return os.path.join(self.ms[self.cur] if side == 'm' else self.r, rel)

    def fd(self, h, side):
        return h.fdm if side == 'm' else h.fdr

    # -- two mounts: page caches another node's writes made stale ----------
    def view(self, h):
        """Before h's mount reads its file: if the file's bytes changed
        through the other mount since, fsync h there (it drops the page
        cache and the size the kernel holds)."""
        ino = os.fstat(h.fdr).st_ino
        if h.mi in self.stale.get(ino, ()):
            self.both('fsync %r (sync before reading another node\'s bytes)' % h,
                      lambda s: os.fsync(self.fd(h, s)))
            self.stale[ino].discard(h.mi)

    def mark_stale(self):
        """After a step that changed file data through mount op_mount, every
        other mount's page cache of the files it touched may be stale."""
        others = set(range(len(self.ms))) - {self.op_mount}
        inos = set()
        for h in self.touched_handles:
            if h in self.handles:
                inos.add(os.fstat(h.fdr).st_ino)
        for rel in self.touched:
            st = call(os.lstat, os.path.join(self.r, rel))
            if st[0] == 'ok' and stat.S_ISREG(st[1].st_mode):
                inos.add(st[1].st_ino)
        for ino in inos:
            self.stale[ino] |= others

    def relookup(self):
        """every name the sequence uses, looked up on this step's mount in
        every directory the reference has"""
        for d in self.dirs():
            for name in FILE_NAMES + DIR_NAMES:
                call(os.lstat, os.path.join(self.ms[self.cur], d, name))

    def via(self, desc):
        """desc with the mount its path operations went through"""
        return 'm%d: %s' % (self.cur + 1, desc) if len(self.ms) > 1 else desc

    def check_mount(self):
        """the mount a check reads through"""
        return self.ms[self.rng.randrange(len(self.ms))] if len(self.ms) > 1 else self.m

    # -- operations -------------------------------------------------------
    def op_open(self):
        rng = self.rng
        if len(self.handles) >= MAX_HANDLES:
            return self.op_close()
        rel = self.any_path(existing_bias=0.7, want='file')
        acc = rng.choice([os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_RDWR, os.O_RDWR])
        flags = acc
        if rng.random() < 0.5:
            flags |= os.O_CREAT
            if rng.random() < 0.15:
                flags |= os.O_EXCL
        if acc != os.O_RDONLY and rng.random() < 0.12:
            flags |= os.O_TRUNC
        if acc != os.O_RDONLY and rng.random() < 0.1 and not self.no_append:
            flags |= os.O_APPEND
        mode = rng.choice([0o644, 0o600, 0o664, 0o755])
        desc = 'open %s %s %o' % (rel, flag_str(flags), mode)
        fds = {}

        def do(side):
            fds[side] = os.open(self.p(side, rel), flags | os.O_NOFOLLOW, mode)
            return 0
        try:
            res = self.both(desc, do)
        except Mismatch:
            for fd in fds.values():
                os.close(fd)
            raise
        if res[0] == 'ok':
            h = Handle(self.next_hid, rel, flags, fds['m'], fds['r'], self.cur)
            self.next_hid += 1
            self.handles.append(h)
            self.touched_handles.add(h)
            desc += ' -> %r' % h
        self.touched.add(rel)
        if flags & os.O_CREAT:
            self.rescan()
        return desc

    def op_close(self):
        if not self.handles:
            return self.op_open()
        h = self.rng.choice(self.handles)
        self.handles.remove(h)
        self.touched_handles.discard(h)
        desc = 'close %r' % h
        self.both(desc, lambda s: os.close(self.fd(h, s)))
        self.touched.add(h.rel)
        return desc

    def pick_handle(self, pred=lambda h: True):
        hs = [h for h in self.handles if pred(h)]
        h = self.rng.choice(hs) if hs else None
        if h is not None and len(self.ms) > 1:
            self.view(h)
        return h

    def op_write(self):
        rng = self.rng
        off, data = self.offset(), None
        data = self.data(self.length())
        h = self.pick_handle() if rng.random() < 0.7 else None
        if h is not None:
            self.op_mount = h.mi
            if h.flags & os.O_APPEND:
                desc = 'append %r len %d' % (h, len(data))
                res = self.both(desc, lambda s: os.write(self.fd(h, s), data))
            else:
                desc = 'pwrite %r off %d len %d' % (h, off, len(data))
                res = self.both(desc, lambda s: os.pwrite(self.fd(h, s), data, off))
                self.windows[h.rel].append((off, len(data)))
            self.touched_handles.add(h)
            self.touched.add(h.rel)
            if res[0] == 'ok':
                self.check_mtime_after[h] = True
            return desc
        rel = self.any_path(existing_bias=0.9, want='file')
        create = rng.random() < 0.3
        flags = os.O_WRONLY | (os.O_CREAT if create else 0)
        desc = 'write-by-path %s %soff %d len %d' % (rel, 'CREAT ' if create else '', off, len(data))

        def do(side):
            fd = os.open(self.p(side, rel), flags | os.O_NOFOLLOW, 0o644)
            try:
                return os.pwrite(fd, data, off)
            finally:
                os.close(fd)
        res = self.both(desc, do)
        self.touched.add(rel)
        self.windows[rel].append((off, len(data)))
        if res[0] == 'ok':
            self.check_mtime_after[rel] = True
        if create:
            self.rescan()
        return desc

    def op_read(self):
        rng = self.rng
        off, ln = self.offset(), self.length()
        h = self.pick_handle() if rng.random() < 0.6 else None
        if h is not None:
            desc = 'pread %r off %d len %d' % (h, off, ln)
            self.both(desc, lambda s: os.pread(self.fd(h, s), ln, off))
            return desc
        rel = self.any_path(want='file')
        desc = 'read-by-path %s off %d len %d' % (rel, off, ln)

        def do(side):
            fd = os.open(self.p(side, rel), os.O_RDONLY | os.O_NOFOLLOW)
            try:
                return os.pread(fd, ln, off)
            finally:
                os.close(fd)
        self.both(desc, do)
        return desc

    def trunc_size(self):
        rng = self.rng
        x = rng.random()
        if x < 0.3:
            return 0
        if x < 0.8:
            return rng.randrange(0, 300 * KiB)
        return rng.randrange(0, 4 * MiB)

    def op_truncate(self):
        size = self.trunc_size()
        h = self.pick_handle()
        if h is not None and self.rng.random() < 0.6:
            desc = 'ftruncate %r %d' % (h, size)
            self.op_mount = h.mi
            self.both(desc, lambda s: os.ftruncate(self.fd(h, s), size))
            self.touched_handles.add(h)
            self.touched.add(h.rel)
            return desc
        rel = self.any_path(want='file')
        desc = 'truncate %s %d' % (rel, size)
        self.both(desc, lambda s: os.truncate(self.p(s, rel), size))
        self.touched.add(rel)
        return desc

    def op_rename(self):
        rng = self.rng
        src = self.any_path(existing_bias=0.9)
        x = rng.random()
        open_targets = [h.rel for h in self.handles]
        if x < 0.3 and open_targets:
            dst = rng.choice(open_targets)          # rename over an open file
        elif x < 0.45:
            dst = self.any_path(existing_bias=1.0, want='dir')
        else:
            dst = self.new_path(want='any')
        desc = 'rename %s -> %s' % (src, dst)
        self.both(desc, lambda s: os.rename(self.p(s, src), self.p(s, dst)))
        self.touched.update([src, dst, os.path.dirname(src), os.path.dirname(dst)])
        self.rescan()
        return desc

    def op_unlink(self):
        rng = self.rng
        open_targets = [h.rel for h in self.handles]
        if open_targets and rng.random() < 0.4:
            rel = rng.choice(open_targets)           # unlink of an open file
        else:
            rel = self.any_path(existing_bias=0.9, want='file')
        desc = 'unlink %s' % rel
        self.both(desc, lambda s: os.unlink(self.p(s, rel)))
        self.touched.update([rel, os.path.dirname(rel)])
        for h in self.handles:
            if h.rel == rel:
                self.touched_handles.add(h)
        self.rescan()
        return desc

    def op_link(self):
        src = self.any_path(existing_bias=0.9, want='any')
        dst = self.new_path(want='file')
        desc = 'link %s -> %s' % (src, dst)
        self.both(desc, lambda s: os.link(self.p(s, src), self.p(s, dst)))
        self.touched.update([src, dst, os.path.dirname(dst)])
        self.rescan()
        return desc

    def op_symlink(self):
        target = self.rng.choice(FILE_NAMES + ['../' + FILE_NAMES[0], 'nowhere/x'])
        dst = self.new_path(want='file')
        desc = 'symlink %s -> %s' % (dst, target)
        self.both(desc, lambda s: os.symlink(target, self.p(s, dst)))
        self.touched.update([dst, os.path.dirname(dst)])
        self.rescan()
        return desc

    def op_mkdir(self):
        rel = self.new_path(want='dir')
        if rel.count('/') > 2:
            rel = self.rng.choice(DIR_NAMES)
        mode = self.rng.choice([0o755, 0o700, 0o775])
        desc = 'mkdir %s %o' % (rel, mode)
        self.both(desc, lambda s: os.mkdir(self.p(s, rel), mode))
        self.touched.update([rel, os.path.dirname(rel)])
        self.rescan()
        return desc

    def op_rmdir(self):
        rel = self.any_path(existing_bias=0.9, want='dir')
        desc = 'rmdir %s' % rel
        self.both(desc, lambda s: os.rmdir(self.p(s, rel)))
        self.touched.update([rel, os.path.dirname(rel)])
        self.rescan()
        return desc

    def op_mmap(self):
        """MAP_SHARED write of a range inside the file, msync, unmap."""
        rng = self.rng
        files = self.files()
        h = self.pick_handle(lambda h: (h.flags & os.O_ACCMODE) == os.O_RDWR and
                             not (self.append_direct and h.flags & os.O_APPEND))
        if h is not None and rng.random() < 0.5:
            rel, use = h.rel, h
            self.op_mount = h.mi
            size = os.fstat(h.fdr).st_size
        elif files:
            rel, use = rng.choice(files), None
            size = os.lstat(os.path.join(self.r, rel)).st_size
        else:
            return self.op_write()
        if size == 0:
            return self.op_write()
        pages = (size + PAGE - 1) // PAGE
        mpage = rng.randrange(0, pages)
        moff = mpage * PAGE
        mlen = min(size - moff, rng.randrange(1, 64) * PAGE)
        woff = rng.randrange(0, mlen)
        data = self.data(rng.randrange(1, min(mlen - woff, 32 * KiB) + 1))
        desc = 'mmap-write %s map [%d,+%d) write +%d len %d' % (
            repr(use) if use else rel, moff, mlen, woff, len(data))

        def do(side):
            if use is not None:
                fd, own = self.fd(use, side), False
            else:
                fd, own = os.open(self.p(side, rel), os.O_RDWR | os.O_NOFOLLOW), True
            try:
                mm = mmap.mmap(fd, mlen, flags=mmap.MAP_SHARED,
                               prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=moff)
                try:
                    mm[woff:woff + len(data)] = data
                    mm.flush()
                    return bytes(mm[:mlen])
                finally:
                    mm.close()
            finally:
                if own:
                    os.close(fd)
        self.both(desc, do)
        self.touched.add(rel)
        self.windows[rel].append((moff + woff, len(data)))
        if use is not None:
            self.touched_handles.add(use)
        return desc

    def op_fsync(self):
        h = self.pick_handle()
        if h is None:
            return self.op_open()
        kind = self.rng.choice(['fsync', 'fsync', 'fdatasync'])
        desc = '%s %r' % (kind, h)
        fn = os.fsync if kind == 'fsync' else os.fdatasync
        self.both(desc, lambda s: fn(self.fd(h, s)))
        return desc

    def op_chmod(self):
        mode = self.rng.choice([0o644, 0o600, 0o640, 0o755, 0o700, 0o444, 0o4755, 0o2755, 0o1777])
        h = self.pick_handle()
        if h is not None and self.rng.random() < 0.4:
            desc = 'fchmod %r %o' % (h, mode)
            self.both(desc, lambda s: os.fchmod(self.fd(h, s), mode))
            self.touched_handles.add(h)
            self.touched.add(h.rel)
            return desc
        rel = self.any_path(existing_bias=0.95)
        if os.path.islink(os.path.join(self.r, rel)):
            return 'skip chmod of symlink'
        desc = 'chmod %s %o' % (rel, mode)
        self.both(desc, lambda s: os.chmod(self.p(s, rel), mode))
        self.touched.add(rel)
        return desc

    def op_utimens(self):
        rng = self.rng
        # Times in the past (2001-2020), to the nanosecond.
        at = rng.randrange(1_000_000_000, 1_600_000_000) * 10 ** 9 + rng.randrange(10 ** 9)
        mt = rng.randrange(1_000_000_000, 1_600_000_000) * 10 ** 9 + rng.randrange(10 ** 9)
        h = self.pick_handle()
        if h is not None and rng.random() < 0.3:
            desc = 'futimens %r %d %d' % (h, at, mt)
            self.both(desc, lambda s: os.utime(self.fd(h, s), ns=(at, mt)))
            self.touched_handles.add(h)
            self.check_times.add(h)
            return desc
        rel = self.any_path(existing_bias=0.95)
        desc = 'utimensat %s %d %d' % (rel, at, mt)
        self.both(desc, lambda s: os.utime(self.p(s, rel), ns=(at, mt), follow_symlinks=False))
        self.touched.add(rel)
        self.check_times.add(rel)
        return desc

    def op_xattr(self):
        rng = self.rng
        name = rng.choice(XATTR_NAMES)
        h = self.pick_handle()
        target = h if (h is not None and rng.random() < 0.3) else None
        rel = None
        if target is None:
            rel = self.any_path(existing_bias=0.95)
            if os.path.islink(os.path.join(self.r, rel)):
                return 'skip xattr on symlink'

        def tgt(side):
            if target is not None:
                return self.fd(target, side)
            return self.p(side, rel)
        what = repr(target) if target else rel
        if rng.random() < 0.7:
            value = self.data(rng.randrange(0, 300))
            flags = rng.choice([0, 0, os.XATTR_CREATE, os.XATTR_REPLACE])
            desc = 'setxattr %s %s len %d flags %d' % (what, name, len(value), flags)
            self.both(desc, lambda s: os.setxattr(tgt(s), name, value, flags))
        else:
            desc = 'removexattr %s %s' % (what, name)
            self.both(desc, lambda s: os.removexattr(tgt(s), name))
        if target is not None:
            self.touched_handles.add(target)
        else:
            self.touched.add(rel)
        return desc

    def op_fallocate(self):
        rng = self.rng
        h = self.pick_handle(lambda h: h.writable())
        if h is None:
            return self.op_open()
        self.op_mount = h.mi
        off, ln = self.offset(), self.length()
        mode = rng.choice([0, 0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE,
                           FALLOC_FL_ZERO_RANGE])
        if mode == 0:
            # posix_fallocate: what applications call; glibc emulates it when
            # the file system has no fallocate.
            desc = 'posix_fallocate %r off %d len %d' % (h, off, ln)
            self.both(desc, lambda s: os.posix_fallocate(self.fd(h, s), off, ln))
        else:
            desc = 'fallocate %r mode %#x off %d len %d' % (h, mode, off, ln)
            self.both(desc, lambda s: sys_fallocate(self.fd(h, s), mode, off, ln),
                      optional_unsupported=True)
        self.windows[h.rel].append((off, ln))
        self.touched_handles.add(h)
        self.touched.add(h.rel)
        return desc

    OPS = [('write', 24), ('read', 12), ('open', 9), ('close', 7), ('truncate', 5),
           ('rename', 5), ('unlink', 4), ('link', 3), ('symlink', 1), ('mkdir', 2),
           ('rmdir', 2), ('mmap', 3), ('fsync', 3), ('chmod', 2), ('utimens', 2),
           ('xattr', 4), ('fallocate', 3)]

    # -- checks ----------------------------------------------------------------
    def check_step(self, t_before):
        diffs = []
        for h in list(self.touched_handles):
            if h not in self.handles:
                continue
            sm, sr = call(os.fstat, h.fdm), call(os.fstat, h.fdr)
            if sm[0] != 'ok' or sr[0] != 'ok':
                diffs.append('%r: fstat mount %s ref %s' % (h, fmt_res(sm), fmt_res(sr)))
                continue
            compare_stat(repr(h), sm[1], sr[1], h in self.check_times, diffs)
            if self.check_mtime_after.get(h) and sm[1].st_mtime_ns < t_before \
                    and not self.skip_mtime:
                diffs.append('%r: mtime not updated by the write (%d < op start %d; ref %d)' %
                             (h, sm[1].st_mtime_ns, t_before, sr[1].st_mtime_ns))
            if len(self.ms) > 1:
                self.view(h)
            if h.readable() and sr[1].st_size <= FULL_READ_LIMIT:
                cm, cr = call(read_all, h.fdm), call(read_all, h.fdr)
                if cm != cr:
                    if cm[0] == 'ok' and cr[0] == 'ok':
                        diffs.append(bytes_diff('%r via handle' % h, cm[1], cr[1]))
                    else:
                        diffs.append('%r: read via handle mount %s ref %s' %
                                     (h, fmt_res(cm), fmt_res(cr)))
            xm, xr = xattrs(h.fdm), xattrs(h.fdr)
            if xm != xr:
                diffs.append('%r: xattrs mount %r ref %r' % (h, xm, xr))
        for rel in sorted(self.touched):
            cm = self.check_mount()
            compare_path(rel, cm, self.r, diffs, times=rel in self.check_times,
                         full=False, windows=self.windows.get(rel, ()))
            if self.check_mtime_after.get(rel) and not self.skip_mtime:
                st = call(os.lstat, os.path.join(cm, rel))
                if st[0] == 'ok' and st[1].st_mtime_ns < t_before:
                    diffs.append('%s: mtime not updated by the write (%d < op start %d)' %
                                 (rel, st[1].st_mtime_ns, t_before))
        return diffs

    def write_final_files(self):
        """Leave data a crash must not lose: files in final/ written at random
        offsets (across stripe boundaries) and closed."""
        for side in ('m', 'r'):
            os.makedirs(self.p(side, 'final'), exist_ok=True)
        for k in range(self.final_files):
            rel = 'final/g%d' % k
            chunks = [(self.offset(), self.data(self.length())) for _ in range(6)]

            def do(side):
                fd = os.open(self.p(side, rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    for off, d in chunks:
                        os.pwrite(fd, d, off)
                finally:
                    os.close(fd)
            self.both('final file %s' % rel, do)
        diffs = compare_trees(self.m, self.r)
        if diffs:
            self.fail(self.nops, 'compare after writing final files', diffs)

    def hold(self):
        """fsync every open handle, then signal the test and wait to be killed:
        a crash now must lose nothing (closed files and fsync'ed handles)."""
        for h in self.handles:
            self.both('fsync %r before crash' % h, lambda s: os.fsync(self.fd(h, s)))
        diffs = compare_trees(self.m, self.r)
        if diffs:
            self.fail(self.nops, 'compare before the crash', diffs)
        with open(self.hold_open, 'w') as f:
            f.write('%d open handles\n' % len(self.handles))
        print('fsx_ops: %d ops done, %d handles open and fsync\'ed; waiting to be killed' %
              (self.nops, len(self.handles)), flush=True)
        while True:
            time.sleep(3600)

    def fail(self, i, desc, lines):
        print('FAIL at op #%d (seed %d): %s' % (i, self.seed, desc), file=sys.stderr)
        for line in lines:
            print('  ' + line, file=sys.stderr)
        print('  last ops:', file=sys.stderr)
        for n, d in self.history:
            print('    #%d %s' % (n, d), file=sys.stderr)
        print('  open handles: %r' % self.handles, file=sys.stderr)
        print('  reproduce: %s run --mount M --ref R --seed %d --ops %d' %
              (sys.argv[0], self.seed, self.nops), file=sys.stderr)
        sys.exit(1)

    def run(self):
        names = [n for n, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        start = time.monotonic()
        for i in range(1, self.nops + 1):
            kind = self.rng.choices(names, weights)[0]
            self.touched, self.touched_handles = set(), set()
            self.check_times, self.check_mtime_after = set(), {}
            self.windows = collections.defaultdict(list)
            # File times come from a coarse clock that lags by more than 20 ms
            # here at times; one second of slack still catches an mtime left
            # behind, because utimens sets times years in the past.
            t_before = time.time_ns() - 1_000_000_000
            desc = kind
            if len(self.ms) > 1:
                self.cur = self.rng.randrange(len(self.ms))
            self.op_mount = self.cur
            try:
                desc = getattr(self, 'op_' + kind)()
            except Mismatch as e:
                self.fail(i, self.via(desc), [str(e)])
            desc = self.via(desc)
            self.counts[kind] += 1
            self.history.append((i, desc))
            if self.verbose:
                print('#%d %s' % (i, desc), file=sys.stderr)
            self.touched.discard('.')
            if len(self.ms) > 1 and (kind in ('write', 'truncate', 'mmap', 'fallocate') or
                                     (kind == 'open' and 'TRUNC' in desc)):
                self.mark_stale()
            diffs = self.check_step(t_before)
            if not diffs and (i % self.full_every == 0 or i == self.nops):
                diffs = compare_trees(self.ms[(i // self.full_every) % len(self.ms)], self.r)
            if diffs:
                self.fail(i, desc, diffs)
            if i % 1000 == 0:
                print('fsx_ops: %d ops, %.1f s' % (i, time.monotonic() - start), file=sys.stderr)
        if self.final_files:
            self.write_final_files()
        if self.hold_open:
            self.hold()
        # Close everything, then the trees must still agree.
        for h in list(self.handles):
            self.handles.remove(h)
            for fd in (h.fdm, h.fdr):
                os.close(fd)
        diffs = compare_trees(self.m, self.r)
        if diffs:
            self.fail(self.nops, 'final compare after closing all handles', diffs)
        print('fsx_ops: %d ops passed in %.1f s (seed %d); ops: %s' %
              (self.nops, time.monotonic() - start, self.seed,
               ', '.join('%s %d' % kv for kv in sorted(self.counts.items()))))
        print('fsx_ops: expected errors matched: %s' %
              ', '.join('%s %d' % kv for kv in sorted(self.errors.items())))
        if self.estale:
            print('fsx_ops: %d ESTALE retried after looking the tree up again' % self.estale)
        if self.unsupported:
            print('fsx_ops: unsupported on the mount (allowed, EOPNOTSUPP): %s' %
                  ', '.join('%s %d' % kv for kv in sorted(self.unsupported.items())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    r = sub.add_parser('run')
    r.add_argument('--mount', required=True)
    r.add_argument('--mount2', help='the same file system mounted on a second node')
    r.add_argument('--append-direct', action='store_true',
                   help='O_APPEND handles are direct I/O: no shared mmap through them')
    r.add_argument('--ref', required=True)
    r.add_argument('--seed', type=int, default=None)
    r.add_argument('--ops', type=int, default=10000)
    r.add_argument('--full-every', type=int, default=250)
    r.add_argument('--verbose', action='store_true', help='print every op')
    r.add_argument('--no-append', action='store_true',
                   help='never open O_APPEND (libfuse passthrough_ll opens its backing file '
                   'O_APPEND too, so the kernel\'s write-back of an mmap-dirtied page through '
                   'that handle lands at EOF: a known passthrough_ll bug)')
    r.add_argument('--no-mtime-check', action='store_true',
                   help='diagnosis only (to look past a known mtime bug); the system test '
                   'never passes it')
    r.add_argument('--no-atime-check', action='store_true',
                   help='after utimens compare mtime only (a cluster mount reads the '
                   'backing for blocks no node holds, and a readahead the kernel sent '
                   'before the utimens may be served after it, moving its atime)')
    r.add_argument('--final-files', type=int, default=0,
                   help='after the sequence, write N more files under final/ and close them')
    r.add_argument('--hold-open', metavar='MARKER',
                   help='at the end fsync the open handles, create MARKER and wait to be killed')
    c = sub.add_parser('compare')
    c.add_argument('a')
    c.add_argument('b')
    c.add_argument('--times', action='store_true', help='also compare atime/mtime')
    args = ap.parse_args()
    if args.cmd == 'compare':
        diffs = compare_trees(args.a, args.b, times=args.times)
        if diffs:
            print('trees differ (%s vs %s):' % (args.a, args.b), file=sys.stderr)
            for d in diffs[:50]:
                print('  ' + d, file=sys.stderr)
            sys.exit(1)
        print('trees equal: %s == %s (%d entries)' % (args.a, args.b, len(walk(args.b))))
        return
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), 'little')
    if args.no_atime_check:
        global TIME_FIELDS
        TIME_FIELDS = ('st_mtime_ns',)
    print('fsx_ops: seed %d, %d ops%s' % (args.seed, args.ops,
          ' through two mounts' if args.mount2 else ''), flush=True)
    for d in (args.mount, args.ref):
        if os.listdir(d):
            sys.exit('fsx_ops: %s is not empty' % d)
    Runner(args).run()


if __name__ == '__main__':
    main()
