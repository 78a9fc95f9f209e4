#!/usr/bin/env bash
# fs_punch_fallback.sh - fallocate PUNCH_HOLE and ZERO_RANGE where the
# backing file system cannot do them (EOPNOTSUPP): nvcachefs writes zeros
# through the cache instead (fdata.c, punch_by_zeros). Two backings: an
# ext2 image on a loop device (here the ext4 driver serves ext2: it punches
# holes in its block-mapped files but refuses ZERO_RANGE) and a ramfs
# (refuses both). Ranges that cross cache blocks, end past the file's end,
# with and without KEEP_SIZE, on files whose data is dirty in the cache,
# only in the backing file, or both; every result (bytes and size) must
# match a model, through the mount, and in the backing files after
# unmount.
T_TIMEOUT=${T_TIMEOUT:-120}
. "$(dirname "$0")/lib.sh"
t_require_root
t_require_cmd fusermount3 python3 mkfs.ext2 losetup mount umount mountpoint cmp
bin=$(t_bin nvcachefs)
export NVCACHE_RUN_DIR=$T_DIR/run

# refused BACKDIR: the modes (punch, zero) the backing refuses, or nothing
refused() {
  python3 - "$1/probe" <<'PY'
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b'x' * 65536)
for name, mode in (('punch', 3), ('zero', 0x10)):
    r = libc.fallocate(fd, mode, ctypes.c_long(4096), ctypes.c_long(8192))
    if r < 0 and ctypes.get_errno() == errno.EOPNOTSUPP:
        print(name, end=' ')
os.close(fd)
os.unlink(sys.argv[1])
PY
}

# unmount_backing DIR: at cleanup; a daemon just killed may hold it a moment
unmount_backing() {
  local i
  for i in $(seq 50); do
    mountpoint -q "$1" || return 0
    umount "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  umount -l "$1"
}

# run NAME BACKDIR: the files, the mount, the ranges, the model
run() {
  local name=$1 B=$2 M=$T_DIR/$1/m ref=$T_DIR/$1/ref pid
  mkdir -p "$M" "$ref"
  # files whose data is only in the backing when the mount starts
  python3 - "$B" <<'PY'
import os, sys
for name in ('backing', 'mixed'):
    with open(os.path.join(sys.argv[1], name), 'wb') as f:
        f.write(bytes((i * 7 + 3) % 251 + 1 for i in range(150000)))
PY
  # a long write-back delay: what is written through the mount stays dirty
  "$bin" "$M" -o "backing=$B,nvram=$T_SHM/$name.nv,cache_size=16M,writeback_delay=60" -f \
    >"$T_DIR/$name/log" 2>&1 &
  pid=$!
  t_cleanup "kill -9 $pid; wait $pid"   # its descriptors go before the backing's unmount
  t_cleanup "t_umount $M"
  t_wait 20 t_is_mounted "$M" || { cat "$T_DIR/$name/log"; t_fail "$name: no mount"; }
  python3 - "$M" "$ref" <<'PY' || { tail -5 "$T_DIR/$name/log" >&2; t_fail "$name: punch or zero range through the mount differs from the model"; }
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
KEEP, PUNCH, ZERO = 0x01, 0x02, 0x10
m, ref = sys.argv[1], sys.argv[2]

def fallocate(fd, mode, off, ln):
    if libc.fallocate(fd, mode, ctypes.c_long(off), ctypes.c_long(ln)) < 0:
        e = ctypes.get_errno()
        sys.exit('fallocate(%#x, %d, %d): %s' % (mode, off, ln, os.strerror(e)))

def model_op(data, mode, off, ln):
    end = off + ln
    if not mode & KEEP and end > len(data):
        data.extend(bytes(end - len(data)))
    stop = min(end, len(data))
    if off < stop:
        data[off:stop] = bytes(stop - off)

def check(fd, data, what):
    size = os.fstat(fd).st_size
    got = os.pread(fd, len(data) + 65536, 0)
    if size != len(data) or got != bytes(data):
        diff = next((i for i in range(min(len(got), len(data))) if got[i] != data[i]), None)
        sys.exit('%s: size %d (model %d), %d bytes read, first difference at %s'
                 % (what, size, len(data), len(got), diff))

def pattern(n, a, b):
    return bytes((i * a + b) % 251 + 1 for i in range(n))

# ranges (cache blocks are 16 KiB): inside one block, across blocks with
# unaligned edges, whole blocks, ending past the end with and without
# KEEP_SIZE, all past the end
ops = [
    (PUNCH | KEEP, 1000, 3000),
    (PUNCH | KEEP, 10000, 50000),
    (ZERO, 70000, 20000),
    (ZERO | KEEP, 32768, 16384),
    (PUNCH | KEEP, 140000, 30000),
    (ZERO | KEEP, 145000, 30000),
    (ZERO, 148000, 20000),
    (PUNCH | KEEP, 400000, 1000),
    (ZERO, 5, 1),
]
files = {}
# dirty: written through the mount, still open (not written back)
fd = os.open(os.path.join(m, 'dirty'), os.O_CREAT | os.O_RDWR, 0o644)
data = bytearray(pattern(150000, 13, 5))
os.pwrite(fd, bytes(data), 0)
files['dirty'] = (fd, data)
# backing: only the backing file has the bytes
fd = os.open(os.path.join(m, 'backing'), os.O_RDWR)
files['backing'] = (fd, bytearray(pattern(150000, 7, 3)))
# mixed: backing bytes, parts of some blocks overwritten (dirty)
fd = os.open(os.path.join(m, 'mixed'), os.O_RDWR)
data = bytearray(pattern(150000, 7, 3))
for off, ln in ((8000, 4000), (50000, 30000), (139000, 5000)):
    os.pwrite(fd, pattern(ln, 31, 11), off)
    data[off:off + ln] = pattern(ln, 31, 11)
files['mixed'] = (fd, data)
for name, (fd, data) in files.items():
    check(fd, data, name + ' before')
    for mode, off, ln in ops:
        fallocate(fd, mode, off, ln)
        model_op(data, mode, off, ln)
        check(fd, data, '%s after fallocate(%#x, %d, %d)' % (name, mode, off, ln))
    with open(os.path.join(ref, name), 'wb') as f:
        f.write(bytes(data))
    os.close(fd)
# and again through a new descriptor after the last close
for name, (fd, data) in files.items():
    fd = os.open(os.path.join(m, name), os.O_RDONLY)
    check(fd, data, name + ' reopened')
    os.close(fd)
PY
  fusermount3 -u "$M" || t_fail "$name: unmount failed"
  for _ in $(seq 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  wait $pid || t_fail "$name: nvcachefs exited non-zero: $(tail -3 "$T_DIR/$name/log")"
  local f
  for f in dirty backing mixed; do
    cmp "$ref/$f" "$B/$f" || t_fail "$name: $f in the backing differs from the model after unmount"
  done
  t_log "$name: 3 files x 9 ranges match the model through the mount and in the backing"
}

fell_back=
# ext2 on a loop device (the image on disk, under T_DIR)
mkdir -p "$T_DIR/ext2/b"
truncate -s 64M "$T_DIR/ext2.img"
mkfs.ext2 -q -F "$T_DIR/ext2.img" || t_fail "mkfs.ext2"
if loop=$(losetup --find --show "$T_DIR/ext2.img" 2>"$T_DIR/losetup.err"); then
  t_cleanup "losetup -d $loop"
  mount -t ext2 "$loop" "$T_DIR/ext2/b" || t_fail "mount of the ext2 image on $loop"
  t_cleanup "unmount_backing $T_DIR/ext2/b"
  r=$(refused "$T_DIR/ext2/b")
  t_log "ext2: the backing refuses: ${r:-nothing}"
  fell_back+=$r
  run ext2 "$T_DIR/ext2/b"
else
  t_log "ext2: no loop device ($(cat "$T_DIR/losetup.err")): skipped"
fi

# ramfs: no fallocate at all
mkdir -p "$T_DIR/ramfs/b"
mount -t ramfs nvtest-ramfs "$T_DIR/ramfs/b" || t_fail "mount of a ramfs"
t_cleanup "unmount_backing $T_DIR/ramfs/b"
r=$(refused "$T_DIR/ramfs/b")
t_log "ramfs: the backing refuses: ${r:-nothing}"
fell_back+=$r
run ramfs "$T_DIR/ramfs/b"

case $fell_back in
  *punch*zero*|*zero*punch*) ;;
  *) t_skip "no backing here refuses both punch and zero range (${fell_back:-neither}): the fallback was not reached for both" ;;
esac
t_log "PASS"
