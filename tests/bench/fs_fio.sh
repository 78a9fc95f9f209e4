#!/usr/bin/env bash
# fs_fio.sh - fio through nvcachefs vs libfuse passthrough_ll vs the backing
# file system itself, side by side in one run: 1 MiB sequential write and
# read, 4 KiB random write and read; psync, iodepth 1, numjobs 1 and 4;
# writes end with fsync (each target makes its data durable its own way:
# nvcachefs in NVRAM, the others on disk). Then the reads again on cold
# caches (".cold": files laid out, page caches dropped, one pass; fio_cold).
#
# Backings: "ext4" = a directory on the local disk (/var/tmp). "slowpfs"
# (FSB_SLOW=1, default) = an emulated slow parallel file system: ext4 on a
# loop device over a file on /var/tmp, mounted -o sync (no client write
# cache), with the loop device throttled by a cgroup-v1 blkio group to
# FSB_SLOW_BPS bytes/s and FSB_SLOW_IOPS IOPS each way (fsb_slowpfs in
# fs/lib.sh; no device-mapper here, so no dm-delay).
#
#   FSB_SIZE=64M (file per job; FSB_SLOW_SIZE=32M on slowpfs)
#   FSB_RUNTIME=5 (s per figure)  FSB_ONLY_SLOW=1 (slowpfs only)
#   FSB_NVRAM_OPTS=...  NVRAM emulation (default none; see fs/lib.sh)
T_TIMEOUT=${T_TIMEOUT:-900}
. "$(dirname "$0")/../system/lib.sh"
. "$(dirname "$0")/fs/lib.sh"
t_require_root
t_require_cmd fio fusermount3 python3
size=${FSB_SIZE:-64M}
runtime=${FSB_RUNTIME:-5}
slow=${FSB_SLOW:-1}
echo "fs_fio: NVRAM emulation: $(fsb_nvram_desc); file ${size} per job, ${runtime} s per figure"

# fio_run DIR RW BS NJOBS -> "MB/s IOPS"
fio_run() {
  local dir=$1 rw=$2 bs=$3 nj=$4 extra=()
  case $rw in write|randwrite) extra=(--end_fsync=1) ;; esac
  fio --name="fsb_${rw}_$nj" --directory="$dir" --rw="$rw" --bs="$bs" --size="$size" \
      --numjobs="$nj" --ioengine=psync --iodepth=1 --time_based --runtime="$runtime" \
      --group_reporting --unlink=1 --output-format=json "${extra[@]}" >"$T_DIR/fio.json" 2>"$T_DIR/fio.err" ||
    { cat "$T_DIR/fio.err" >&2; echo "0 0"; return; }
  python3 - "$T_DIR/fio.json" "$rw" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))['jobs'][0]
d = j['write'] if 'write' in sys.argv[2] else j['read']
print('%.1f %.0f' % (d['bw_bytes'] / 1e6, d['iops']))
EOF
}

# fio_cold DIR RW BS NJOBS -> "MB/s IOPS": a read on cold caches, one pass
# over the files. They are laid out by a first fio run, then every page
# cache is dropped (the backing's and the FUSE mounts'; nvcachefs's NVRAM
# is a tmpfs file, not a cache the kernel drops), so passthrough_ll and the
# backing dir read from the backing while nvcachefs serves from NVRAM: data
# written by an earlier job step, after the node's page cache moved on.
fio_cold() {
  local dir=$1 rw=$2 bs=$3 nj=$4
  fio --name="fsb_cold_$nj" --directory="$dir" --rw=write --bs=1M --size="$size" \
      --numjobs="$nj" --ioengine=psync --end_fsync=1 --output-format=json >/dev/null 2>"$T_DIR/fio.err" ||
    { cat "$T_DIR/fio.err" >&2; echo "0 0"; return; }
  sync
  echo 1 >/proc/sys/vm/drop_caches
  fio --name="fsb_cold_$nj" --directory="$dir" --rw="$rw" --bs="$bs" --size="$size" \
      --numjobs="$nj" --ioengine=psync --iodepth=1 --group_reporting --unlink=1 \
      --output-format=json >"$T_DIR/fio.json" 2>"$T_DIR/fio.err" ||
    { cat "$T_DIR/fio.err" >&2; echo "0 0"; return; }
  python3 - "$T_DIR/fio.json" <<'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))['jobs'][0]['read']
print('%.1f %.0f' % (d['bw_bytes'] / 1e6, d['iops']))
EOF2
}

# figures RUNNER SUFFIX "RW BS NAME"...: each spec with 1 and 4 jobs on the
# three targets of bench_backing (its tag, root and mounts), BENCH lines
# named fs_fio.TAG.NAME[SUFFIX].jN
figures() {
  local runner=$1 suffix=$2 spec rw bs unit nj name nv pt dr
  shift 2
  for spec in "$@"; do
    set -- $spec; rw=$1 bs=$2 name=$3
    for nj in 1 4; do
      read -r nvbw nvio <<<"$("$runner" "$T_DIR/$tag-nvm" "$rw" "$bs" "$nj")"
      read -r ptbw ptio <<<"$("$runner" "$T_DIR/$tag-ptm" "$rw" "$bs" "$nj")"
      read -r drbw drio <<<"$("$runner" "$root/direct" "$rw" "$bs" "$nj")"
      if [ "$bs" = 1M ]; then
        unit=MB/s nv=$nvbw pt=$ptbw dr=$drbw
      else
        unit=IOPS nv=$nvio pt=$ptio dr=$drio
      fi
      fsb_line "fs_fio.$tag.$name$suffix.j$nj" "$nv" "$unit" passthrough_ll "$pt"
      fsb_line "fs_fio.$tag.$name$suffix.j$nj.vs_backing" "$nv" "$unit" "$tag-dir" "$dr"
    done
  done
}

# bench_backing TAG BACKING_ROOT
bench_backing() {
  local tag=$1 root=$2 nvpid ptpid size=${3:-$size}
  mkdir -p "$root/direct" "$root/nvb" "$root/ptb"
  fsb_mount_nv "$T_DIR/$tag-nvm" "$root/nvb" "cache_size=2G"; nvpid=$FSB_PID
  fsb_mount_pt "$T_DIR/$tag-ptm" "$root/ptb"; ptpid=$FSB_PID
  figures fio_run "" "write 1M seqwrite" "read 1M seqread" "randwrite 4k randwrite" "randread 4k randread"
  figures fio_cold .cold "read 1M seqread" "randread 4k randread"
  echo "nvcachefs stats after the $tag runs:"
  "$(t_bin nvcachectl)" stats "$T_DIR/$tag-nvm" | grep -E 'hits|misses|written_back_bytes|backpressure' || true
  fsb_umount "$T_DIR/$tag-nvm" "$nvpid"
  fsb_umount "$T_DIR/$tag-ptm" "$ptpid"
}

[ "${FSB_ONLY_SLOW:-0}" = 1 ] || bench_backing ext4 "$T_DIR/ext4"

if [ "$slow" = 1 ]; then
  if fsb_slowpfs "$T_DIR/slowpfs"; then
    bench_backing slowpfs "$T_DIR/slowpfs" "${FSB_SLOW_SIZE:-32M}"
  fi
fi
