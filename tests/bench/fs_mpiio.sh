#!/usr/bin/env bash
# fs_mpiio.sh - MPI-IO shared-file workload (MPICH/ROMIO, 4 ranks): a
# collective interleaved write_at_all of one shared file + MPI_File_sync +
# close, then a collective read_at_all (verified) of it. Through the
# nvcachefs mount vs straight into its backing file system (a directory on
# the local ext4 disk), and through passthrough_ll for reference; then the
# same over an emulated slow PFS (FSB_SLOW=1, default; fsb_slowpfs in
# fs/lib.sh). The program is tests/system/fsx/fsx_mpiio.c (the system
# test's workload).
#
#   FSB_MPI_MIB=256 (shared file size)  FSB_MPI_REPS=3 (best of)
#   FSB_NVRAM_OPTS=... (see fs/lib.sh)
. "$(dirname "$0")/../system/lib.sh"
. "$(dirname "$0")/fs/lib.sh"
t_require_root
t_require_cmd fusermount3 mpicc mpiexec
export HYDRA_LAUNCHER=fork
mib=${FSB_MPI_MIB:-256}
reps=${FSB_MPI_REPS:-3}
echo "fs_mpiio: NVRAM emulation: $(fsb_nvram_desc); 4 ranks, ${mib} MiB shared file, best of $reps"
prog=$T_DIR/fsx_mpiio
mpicc -O2 -o "$prog" "$T_ROOT/tests/system/fsx/fsx_mpiio.c" || t_fail "mpicc failed"

# run DIR -> "write_s read_s" (best of reps; the file is removed between reps)
run() {
  local dir=$1 w best_w= best_r= r i
  fsb_warm_memory
  for ((i = 0; i < reps; i++)); do
    w=$(mpiexec -n 4 "$prog" write "$dir/shared.dat" "$mib" 7 | awk '/wrote/ {print $(NF-1)}')
    r=$(mpiexec -n 4 "$prog" read "$dir/shared.dat" "$mib" 7 | awk '/^read/ {print $(NF-1)}')
    [ -n "$w" ] && [ -n "$r" ] || { echo "0 0"; return; }
    best_w=$(awk -v a="$w" -v b="${best_w:-1e9}" 'BEGIN{print (a<b)?a:b}')
    best_r=$(awk -v a="$r" -v b="${best_r:-1e9}" 'BEGIN{print (a<b)?a:b}')
    rm -f "$dir/shared.dat"
    sleep 1
  done
  echo "$best_w $best_r"
}

# bench TAG ROOT: the mount over ROOT/nvb vs ROOT/direct (+ passthrough_ll).
bench() {
  local tag=$1 root=$2 nvpid ptpid nvw nvr drw drr ptw ptr t0
  mkdir -p "$root/direct"
  fsb_mount_nv "$T_DIR/$tag-nvm" "$root/nvb" "cache_size=$((mib * 4))M"; nvpid=$FSB_PID
  fsb_mount_pt "$T_DIR/$tag-ptm" "$root/ptb"; ptpid=$FSB_PID
  read -r nvw nvr <<<"$(run "$T_DIR/$tag-nvm")"
  read -r drw drr <<<"$(run "$root/direct")"
  read -r ptw ptr <<<"$(run "$T_DIR/$tag-ptm")"
  echo "$tag seconds (write+sync+close / read): nvcachefs $nvw / $nvr | $tag dir $drw / $drr | passthrough_ll $ptw / $ptr"
  fsb_line_time "fs_mpiio.$tag.write_sync.${mib}M" "$nvw" "$tag-dir" "$drw"
  fsb_line_time "fs_mpiio.$tag.read.${mib}M" "$nvr" "$tag-dir" "$drr"
  fsb_line_time "fs_mpiio.$tag.write_sync.${mib}M.vs_passthrough" "$nvw" passthrough_ll "$ptw"
  fsb_line_time "fs_mpiio.$tag.read.${mib}M.vs_passthrough" "$nvr" passthrough_ll "$ptr"
  t0=$SECONDS
  fsb_umount "$T_DIR/$tag-nvm" "$nvpid"
  echo "$tag: nvcachefs unmount took $((SECONDS - t0)) s"
  fsb_umount "$T_DIR/$tag-ptm" "$ptpid"
}

bench ext4 "$T_DIR/ext4"
if [ "${FSB_SLOW:-1}" = 1 ] && fsb_slowpfs "$T_DIR/slowpfs"; then
  bench slowpfs "$T_DIR/slowpfs"
fi
