#!/usr/bin/env bash
# ckpt_hpccg.sh - the seed paper's Table 2 on this machine: the CG mini-app
# (tests/mpi/hpccg.c), 4 ranks, windows of 256 MiB or more in all, one
# checkpoint per iteration, in its versions side by side:
#   none     no checkpoints
#   disk     fwrite + fsync of the window to the local disk every iteration,
#            with a CRC32C; a restart reads and checks the newest file only
#            (the other when the ranks agree on its version): the same
#            work as libnvckpt's restart
#   nvram    the same program as none under LD_PRELOAD=libnvckpt.so: full
#            checkpoints, and NVCACHE_CKPT_MODE=incremental
#   db       double-buffered (nvckpt_db_*: no copy)
#   dbmem    the double-buffered program with NVCACHE_CKPT=off: its two
#            buffers plain memory, no checkpoint -- what double buffering
#            costs the program itself, told apart from what the
#            checkpoints cost (db against dbmem)
# Figures: seconds per iteration (the median of CKB_REPS rounds; each round
# runs every version once, interleaved, so the machine's load falls on all
# alike), its ratio to none and to disk, also as the median of each
# round's own ratio to none (the runs side by side) and from the fastest
# run of each (the one least disturbed), the overhead per iteration; what
# one checkpoint costs a rank (libnvckpt's own count: copy, CRC, persist,
# commit; not the agreement), in wall-clock time and on the CPU (the rest
# of the wall time the rank was descheduled: 4 ranks on 2 cores, and the
# machine's other load), with the per-iteration ratio that CPU time alone
# gives (none + 4 ranks x CPU ms / cores); start time (process start to the first
# iteration, MPI_Init included) fresh and on a restart, and the restore
# alone (the start less MPI_Init), medians of CKB_REPS restarts each
# (disk: its files fsynced and dropped from the page cache before each of
# its restarts, as after a failure; NVRAM on /dev/shm, which is RAM here:
# no persistent memory on this machine, no emulated latency); and the
# bytes an incremental checkpoint copies when 10 % of the pages are
# written per iteration, against a full one. Every run has
# MPIR_CVAR_POLLS_BEFORE_YIELD=1 (ckpt_common.bash): 4 ranks on 2 cores.
#
# The NVRAM: persistent memory is mapped through DAX in 2 MiB pages; its
# emulation here is a tmpfs of the benchmark's own mounted with
# huge=always, which maps 2 MiB pages too (this machine's /dev/shm maps
# 4 KiB ones: its shmem_enabled is never). CKB_HUGE=0: /dev/shm instead
# (a full checkpoint then costs about 15 % more CPU, a restart's restore
# about a third more time, from the TLB and the page faults).
#
#   CKB_NX=128 CKB_NY=128 CKB_NZ=172 (per rank)  CKB_ITERS=8  CKB_REPS=3  CKB_HUGE=1
T_TIMEOUT=${T_TIMEOUT:-1800}   # before lib.sh, whose watchdog takes it
. "$(dirname "$0")/../system/lib.sh"
t_require_root
nvram_pages="4 KiB pages (/dev/shm)"
if [ "${CKB_HUGE:-1}" = 1 ]; then
  CK_NVRAM_DIR=$T_DIR/nvram-tmpfs
  mkdir -p "$CK_NVRAM_DIR"
  mount -t tmpfs -o huge=always,size=50% nvckpt-bench "$CK_NVRAM_DIR" ||
    t_fail "cannot mount a tmpfs with huge=always on $CK_NVRAM_DIR"
  t_cleanup "umount -l '$CK_NVRAM_DIR'"
  nvram_pages="2 MiB pages (a tmpfs with huge=always)"
fi
. "$(dirname "$0")/../system/ckpt_common.bash"
nx=${CKB_NX:-128} ny=${CKB_NY:-128} nz=${CKB_NZ:-172}
iters=${CKB_ITERS:-8} reps=${CKB_REPS:-3}
args=(--nx "$nx" --ny "$ny" --nz "$nz" --iters "$iters")
win_mib=$(( (8 * (8 + 2 * nx * ny * nz + (nz + 2) * nx * ny)) * 4 >> 20 ))
echo "ckpt_hpccg: 4 ranks x ${nx}x${ny}x${nz}, windows ${win_mib} MiB in all, $iters iterations, median of $reps interleaved rounds, MPIR_CVAR_POLLS_BEFORE_YIELD=$MPIR_CVAR_POLLS_BEFORE_YIELD, NVRAM in $nvram_pages; load: $(cut -d' ' -f1-3 /proc/loadavg)"
disk=$T_DIR/disk
mkdir -p "$disk"

# run VARIANT OUT [extra env...]: one run of a version
run() {
  local v=$1 out=$2; shift 2
  case $v in
    none)  ck_run "$out" NVCACHE_CKPT=off "$@" -- "${args[@]}" ;;
    disk)  ck_run "$out" NVCACHE_CKPT=off "$@" -- "${args[@]}" --mode disk --dir "$disk" ;;
    nvram) ck_run "$out" NVCACHE_CKPT_STATS=1 "$@" -- "${args[@]}" ;;
    inc)   ck_run "$out" NVCACHE_CKPT_STATS=1 NVCACHE_CKPT_MODE=incremental "$@" -- "${args[@]}" ;;
    db)    ck_run "$out" NVCACHE_CKPT_STATS=1 "$@" -- "${args[@]}" --mode db ;;
    dbmem) ck_run "$out" NVCACHE_CKPT=0 "$@" -- "${args[@]}" --mode db ;;
  esac || { echo "ckpt_hpccg: $v failed: $(tail -3 "$out.err")"; return 1; }
  ck_result "$out" >/dev/null || return 1
}

# loop seconds per iteration, start seconds of a run's output
per_iter() { awk -v n="$iters" '/^startup_s/ {s = $2} /^time_s/ {t = $2} END {printf "%.4f", (t - s) / n}' "$1"; }
start_s() { awk '/^startup_s/ {print $2}' "$1"; }
# the start without MPI_Init (the same for all versions): the restore
own_s() { awk '/^startup_s/ {printf "%.3f", $2 - $6}' "$1"; }
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# ms per version per rank, over the ranks of a run (NVCACHE_CKPT_STATS):
# wall clock, on the CPU, in the agreement
ck_ms() { sed -n 's/.* \([0-9.]*\) ms per version.*/\1/p' "$1.err" | awk '{s += $1} END {if (NR) printf "%.2f", s / NR}'; }
ck_cpu() { sed -n 's/.* on the CPU \([0-9.]*\) ms.*/\1/p' "$1.err" | awk '{s += $1} END {if (NR) printf "%.2f", s / NR}'; }
ck_agree() { sed -n 's/.*; agreement \([0-9.]*\) ms$/\1/p' "$1.err" | awk '{s += $1} END {if (NR) printf "%.2f", s / NR}'; }
cores=$(nproc)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
declare -A it st ms cpu agr pr
variants=(none disk nvram inc db dbmem)
for ((r = 1; r <= reps; r++)); do
  for v in "${variants[@]}"; do
    run $v "$T_DIR/$v.$r" || continue
    it[$v]="${it[$v]:-} $(per_iter "$T_DIR/$v.$r")"
    [ -f "$T_DIR/none.$r" ] && pr[$v]="${pr[$v]:-} $(ratio "$(per_iter "$T_DIR/$v.$r")" "$(per_iter "$T_DIR/none.$r")")"
    st[$v]="${st[$v]:-} $(start_s "$T_DIR/$v.$r")"
    if [ -n "$(ck_ms "$T_DIR/$v.$r")" ]; then
      ms[$v]="${ms[$v]:-} $(ck_ms "$T_DIR/$v.$r")"
      cpu[$v]="${cpu[$v]:-} $(ck_cpu "$T_DIR/$v.$r")"
      agr[$v]="${agr[$v]:-} $(ck_agree "$T_DIR/$v.$r")"
    fi
    echo "  run $r $v: $(per_iter "$T_DIR/$v.$r") s/iteration, start $(start_s "$T_DIR/$v.$r") s, checkpoint $(ck_ms "$T_DIR/$v.$r") ms (CPU $(ck_cpu "$T_DIR/$v.$r")), load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
ref=$(ck_result "$T_DIR/none.1")
for v in disk nvram inc db dbmem; do
  [ "$(ck_result "$T_DIR/$v.1")" = "$ref" ] || echo "ckpt_hpccg: WARNING: $v's result differs from none's"
done

none=$(med ${it[none]})
mn() { printf '%s\n' "$@" | sort -g | head -1; }
dsk=$(med ${it[disk]})
echo "BENCH ckpt_hpccg_iter_none $none s"
for v in disk nvram inc db dbmem; do
  [ -n "${it[$v]:-}" ] || continue
  x=$(med ${it[$v]})
  name=$v; [ $v = nvram ] && name=nvram_full; [ $v = inc ] && name=nvram_incremental
  echo "BENCH ckpt_hpccg_iter_$name $x s vs none $none s ratio $(ratio "$x" "$none")"
  echo "BENCH ckpt_hpccg_iter_${name}_paired $(med ${pr[$v]}) ratio (median of the rounds' own ratios to none)"
  echo "BENCH ckpt_hpccg_iter_${name}_fastest $(mn ${it[$v]}) s vs none $(mn ${it[none]}) s ratio $(ratio "$(mn ${it[$v]})" "$(mn ${it[none]})")"
  echo "BENCH ckpt_hpccg_overhead_$name $(awk -v a="$x" -v b="$none" 'BEGIN {printf "%.4f", a - b}') s/iteration"
  [ $v != disk ] && echo "BENCH ckpt_hpccg_iter_${name}_vs_disk $x s vs disk $dsk s ratio $(ratio "$x" "$dsk")"
done
# what the checkpoints add to the double-buffered program (db against
# dbmem, each round's own ratio), and what double buffering costs it
if [ -n "${it[db]:-}" ] && [ -n "${it[dbmem]:-}" ]; then
  pd=""
  for ((r = 1; r <= reps; r++)); do
    [ -f "$T_DIR/db.$r" ] && [ -f "$T_DIR/dbmem.$r" ] &&
      pd="$pd $(ratio "$(per_iter "$T_DIR/db.$r")" "$(per_iter "$T_DIR/dbmem.$r")")"
  done
  echo "BENCH ckpt_hpccg_iter_db_vs_dbmem $(med ${it[db]}) s vs dbmem $(med ${it[dbmem]}) s ratio $(ratio "$(med ${it[db]})" "$(med ${it[dbmem]})") paired $(med $pd)"
fi
for v in nvram inc db; do
  [ -n "${ms[$v]:-}" ] || continue
  name=nvram_full; [ $v = inc ] && name=nvram_incremental; [ $v = db ] && name=db
  echo "BENCH ckpt_hpccg_cost_$name $(med ${ms[$v]}) ms/checkpoint/rank vs iter_none $(awk -v a="$none" 'BEGIN {printf "%.1f", a * 1000}') ms ratio $(awk -v a="$(med ${ms[$v]})" -v b="$none" 'BEGIN {printf "%.3f", a / 1000 / b}')"
  c=$(med ${cpu[$v]})
  echo "BENCH ckpt_hpccg_cpu_$name $c ms/checkpoint/rank on the CPU (agreement $(med ${agr[$v]}) ms wall)"
  echo "BENCH ckpt_hpccg_iter_${name}_by_cpu $(awk -v n="$none" -v c="$c" -v k="$cores" 'BEGIN {printf "%.4f", n + 4 * c / 1000 / k}') s vs none $none s ratio $(awk -v n="$none" -v c="$c" -v k="$cores" 'BEGIN {printf "%.3f", 1 + 4 * c / 1000 / k / n}')"
done
echo "BENCH ckpt_hpccg_start_none $(med ${st[none]}) s"

# Restarts from the checkpoints the last runs left (the last iteration),
# CKB_REPS rounds, interleaved. Before each disk restart its files are
# fsynced and their pages dropped from the page cache (posix_fadvise
# DONTNEED, those files only), so it reads the device as after a failure.
drop_disk() {
  python3 - "$disk" <<'EOF'
import os, sys
for f in os.listdir(sys.argv[1]):
    fd = os.open(os.path.join(sys.argv[1], f), os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
EOF
}
declare -A rs ro ri
# where an NVRAM restart's time goes, per rank (NVCACHE_CKPT_STATS): the
# median over ranks and rounds of field F (open, check, agreement)
re_part() { grep -h "rank .*: restored version" "$T_DIR"/re.$1.*.err | sed -n "s/.* $2 \([0-9.]*\) ms.*/\1/p" | sort -g | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}'; }
for ((r = 1; r <= reps; r++)); do
  drop_disk
  cached=$(fincore -b -n -o RES "$disk"/* 2>/dev/null | awk '{s += $1} END {printf "%d", s / 1048576}')
  ck_run "$T_DIR/re.disk.$r" NVCACHE_CKPT=off -- "${args[@]}" --mode disk --dir "$disk" --restart
  ck_run "$T_DIR/re.nvram.$r" NVCACHE_CKPT=restart NVCACHE_CKPT_STATS=1 -- "${args[@]}"
  ck_run "$T_DIR/re.db.$r" NVCACHE_CKPT=restart NVCACHE_CKPT_STATS=1 -- "${args[@]}" --mode db
  for v in disk nvram db; do
    grep -q "restored $iters " "$T_DIR/re.$v.$r" || echo "ckpt_hpccg: WARNING: the $v restart did not resume at $iters: $(grep startup "$T_DIR/re.$v.$r")"
    rs[$v]="${rs[$v]:-} $(start_s "$T_DIR/re.$v.$r")"
    ro[$v]="${ro[$v]:-} $(own_s "$T_DIR/re.$v.$r")"
    ri[$v]="${ri[$v]:-} $(awk '/^startup_s/ {print $6}' "$T_DIR/re.$v.$r")"
  done
  echo "  restart $r: disk $(start_s "$T_DIR/re.disk.$r") s (its files' pages dropped before it: ${cached:-?} MiB of them left in the page cache), nvram $(start_s "$T_DIR/re.nvram.$r") s, db $(start_s "$T_DIR/re.db.$r") s"
done
rd=$(med ${rs[disk]}) od=$(med ${ro[disk]})
for v in disk nvram db; do
  x=$(med ${rs[$v]}) o=$(med ${ro[$v]})
  if [ $v = disk ]; then
    echo "BENCH ckpt_hpccg_restart_disk $x s vs start_none $(med ${st[none]}) s ratio $(ratio "$x" "$(med ${st[none]})")"
    echo "BENCH ckpt_hpccg_restore_disk $o s"
  else
    echo "BENCH ckpt_hpccg_restart_$v $x s vs disk $rd s ratio $(ratio "$x" "$rd") ($(awk -v a="$rd" -v b="$x" 'BEGIN {printf "%.1f", a / b}')x faster)"
    echo "BENCH ckpt_hpccg_restore_$v $o s vs disk $od s ratio $(ratio "$o" "$od") ($(awk -v a="$od" -v b="$o" 'BEGIN {printf "%.1f", a / b}')x faster)"
  fi
  echo "BENCH ckpt_hpccg_restart_${v}_mpi_init $(med ${ri[$v]}) s"
done
# The nvram restart's start includes the checkpoint libnvckpt takes at the
# program's first fence (a version like any other); the disk version
# writes nothing there.
fw="" fc=""
for ((r = 1; r <= reps; r++)); do
  fw="$fw $(ck_ms "$T_DIR/re.nvram.$r")" fc="$fc $(ck_cpu "$T_DIR/re.nvram.$r")"
done
echo "ckpt_hpccg: an nvram restart per rank (medians): open $(re_part nvram open) ms, check and copy $(re_part nvram "check and copy") ms, agreement $(re_part nvram agreement) ms, then the checkpoint at the first fence $(med $fw) ms (CPU $(med $fc) ms); double-buffered: open $(re_part db open) ms, check $(re_part db check) ms, agreement $(re_part db agreement) ms"

# Incremental against full: 10 % of the pages written per iteration.
targs=(--nx "$nx" --ny "$ny" --nz "$nz" --iters 20 --mode touch --touch-pct 10)
ck_run "$T_DIR/tfull" NVCACHE_CKPT_STATS=1 -- "${targs[@]}"
ck_run "$T_DIR/tinc" NVCACHE_CKPT_STATS=1 NVCACHE_CKPT_MODE=incremental -- "${targs[@]}"
bytes() { sed -n "s/.*'touch' rank 0: .* \([0-9]*\) bytes copied.*/\1/p" "$1.err"; }
f=$(bytes "$T_DIR/tfull") i=$(bytes "$T_DIR/tinc")
if [ -n "$f" ] && [ -n "$i" ]; then
  echo "BENCH ckpt_touch10_bytes_incremental $i bytes vs full $f bytes ratio $(ratio "$i" "$f")"
  tf=$(awk '/^startup_s/ {s = $2} /^time_s/ {t = $2} END {printf "%.3f", t - s}' "$T_DIR/tfull")
  ti=$(awk '/^startup_s/ {s = $2} /^time_s/ {t = $2} END {printf "%.3f", t - s}' "$T_DIR/tinc")
  echo "BENCH ckpt_touch10_time_incremental $ti s vs full $tf s ratio $(ratio "$ti" "$tf")"
fi
