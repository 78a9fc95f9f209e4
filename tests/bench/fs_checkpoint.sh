#!/usr/bin/env bash
# fs_checkpoint.sh - a checkpoint-like burst: 256 MiB in 1 MiB write()s,
# fsync, close; five checkpoints (five files) in a row. Through nvcachefs
# (fsync = persisted in NVRAM; write-back to the backing dir follows in the
# background) vs straight into a directory on the local ext4 disk, and, for
# reference, through passthrough_ll. Then the same over an emulated slow
# parallel file system (FSB_SLOW=1, default; fsb_slowpfs in fs/lib.sh) as
# the backing dir and as the direct target. Figure: seconds per checkpoint
# (mean of five; lower is better) and the application-visible bandwidth.
# Each target starts on warm memory (fsb_warm_memory in fs/lib.sh).
#
#   FSB_CKPT_MIB=256  FSB_CKPT_COUNT=5  FSB_NVRAM_OPTS=... (see fs/lib.sh)
. "$(dirname "$0")/../system/lib.sh"
. "$(dirname "$0")/fs/lib.sh"
t_require_root
t_require_cmd fusermount3 python3
mib=${FSB_CKPT_MIB:-256}
count=${FSB_CKPT_COUNT:-5}
echo "fs_checkpoint: NVRAM emulation: $(fsb_nvram_desc); $count checkpoints of $mib MiB in 1 MiB writes"

# ckpt DIR -> mean seconds per checkpoint
ckpt() {
  python3 - "$1" "$mib" "$count" <<'EOF'
import os, sys, time
d, mib, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
buf = os.urandom(1 << 20)
times = []
for c in range(count):
    t0 = time.monotonic()
    fd = os.open(os.path.join(d, 'ckpt.%d' % c), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for i in range(mib):
        os.write(fd, buf)
    os.fsync(fd)
    os.close(fd)
    times.append(time.monotonic() - t0)
print('%.4f' % (sum(times) / len(times)), ' '.join('%.3f' % t for t in times), file=sys.stdout)
EOF
}

# bench TAG ROOT: nvcachefs over ROOT/nvb, the plain dir ROOT/direct,
# passthrough_ll over ROOT/ptb; files removed after each so a small backing
# holds one set at a time.
bench() {
  local tag=$1 root=$2 nv nvall dr drall pt ptall nvpid ptpid t0 c
  mkdir -p "$root/direct"
  fsb_warm_memory
  fsb_mount_nv "$T_DIR/$tag-nvm" "$root/nvb" "cache_size=$((mib * count * 2))M"; nvpid=$FSB_PID
  read -r nv nvall <<<"$(ckpt "$T_DIR/$tag-nvm")"
  # The write-back must still complete: time from the last close to a clean exit.
  t0=$SECONDS
  fsb_umount "$T_DIR/$tag-nvm" "$nvpid"
  echo "$tag: nvcachefs unmount (write-back of what was left) took $((SECONDS - t0)) s"
  for c in $(seq 0 $((count - 1))); do
    [ "$(stat -c %s "$root/nvb/ckpt.$c")" = $((mib * 1048576)) ] ||
      echo "WARNING: $tag: backing ckpt.$c incomplete after unmount"
  done
  rm -rf "$root/nvb"
  fsb_warm_memory
  read -r dr drall <<<"$(ckpt "$root/direct")"
  rm -rf "$root/direct"
  fsb_warm_memory
  fsb_mount_pt "$T_DIR/$tag-ptm" "$root/ptb"; ptpid=$FSB_PID
  read -r pt ptall <<<"$(ckpt "$T_DIR/$tag-ptm")"
  fsb_umount "$T_DIR/$tag-ptm" "$ptpid"
  rm -rf "$root/ptb"
  echo "$tag per checkpoint (s): nvcachefs $nvall | $tag dir $drall | passthrough_ll $ptall"
  fsb_line_time "fs_checkpoint.$tag.${mib}M" "$nv" "$tag-dir" "$dr"
  fsb_line_time "fs_checkpoint.$tag.${mib}M.vs_passthrough" "$nv" passthrough_ll "$pt"
  fsb_line "fs_checkpoint.$tag.${mib}M.bw" "$(awk -v m="$mib" -v s="$nv" 'BEGIN{print m*1.048576/s}')" MB/s \
    "$tag-dir" "$(awk -v m="$mib" -v s="$dr" 'BEGIN{print m*1.048576/s}')"
}

bench ext4 "$T_DIR/ext4"
if [ "${FSB_SLOW:-1}" = 1 ] && fsb_slowpfs "$T_DIR/slowpfs"; then
  bench slowpfs "$T_DIR/slowpfs"
fi
