#!/usr/bin/env bash
# nbd_fio.sh - fio's nbd engine against nvswapd and nbdkit's memory plugin
# (default allocator and allocator=malloc), side by side, each on a Unix
# socket: 1 MiB sequential write then read, 4 KiB random write and read at
# iodepth 16. numjobs 16 (one NBD connection each), as in the anchor
# measured here (FACTS.md: nbdkit 74k rand-write, 90k rand-read IOPS,
# 1.6 GB/s 1 MiB writes). The export is written whole before the random
# reads, so nothing is served from never-written pages.
#
#   NBDB_SIZE=1G (export)  NBDB_RUNTIME=8 (s per figure)  NBDB_JOBS=16
#   NBDB_TARGETS="nvswapd nvswapd-flat nbdkit nbdkit-malloc"; also
#   nvswapd-trace (nvswapd --trace-out: the cost of the access log, for
#   NBDB_TARGETS="nvswapd nvswapd-trace")
#   NBDB_BASE=/path/to/other/nvswapd: an A/B of a change; adds the targets
#   nvswapd-base and nvswapd-base-flat (that binary) and BENCH lines
#   nvswapd vs base. The targets' order rotates from round to round.
T_TIMEOUT=${T_TIMEOUT:-1500}
. "$(dirname "$0")/../system/lib.sh"
. "$(dirname "$0")/../system/nbd_common.bash"
t_require_cmd fio nbdkit python3
size=${NBDB_SIZE:-1G}
runtime=${NBDB_RUNTIME:-8}
jobs=${NBDB_JOBS:-16}
targets=${NBDB_TARGETS:-nvswapd nvswapd-flat nbdkit nbdkit-malloc${NBDB_BASE:+ nvswapd-base nvswapd-base-flat}}
echo "nbd_fio: export $size, ${runtime} s per figure, $jobs jobs, iodepth 16, Unix sockets"
t_is_sanitized "$(t_bin nvswapd)" && echo "WARNING: sanitizer build; figures are meaningless"

start_target() {  # start_target NAME SOCK -> sets tpid, uri
  local t=$1 sock=$2
  case $t in
    nvswapd) nbd_start "$sock" bench --size "$size"; tpid=$NBD_PID
             uri="nbd+unix:///bench?socket=$sock" ;;
    nvswapd-trace) nbd_start "$sock" benchtrc --size "$size" --trace-out "$T_DIR/bench.nvt.gz"
             tpid=$NBD_PID uri="nbd+unix:///benchtrc?socket=$sock" ;;
    nvswapd-flat) nbd_start "$sock" benchflat --size "$size" --store flat; tpid=$NBD_PID
             uri="nbd+unix:///benchflat?socket=$sock" ;;
    nvswapd-base) NBD_BIN=$NBDB_BASE nbd_start "$sock" benchbase --size "$size"
             tpid=$NBD_PID uri="nbd+unix:///benchbase?socket=$sock" ;;
    nvswapd-base-flat) NBD_BIN=$NBDB_BASE nbd_start "$sock" benchbflat --size "$size" --store flat
             tpid=$NBD_PID uri="nbd+unix:///benchbflat?socket=$sock" ;;
    nbdkit|nbdkit-malloc)
      local extra=()
      [ $t = nbdkit-malloc ] && extra=(allocator=malloc)
      nbdkit -f -U "$sock" memory "size=$size" "${extra[@]}" >"$T_DIR/$t.log" 2>&1 &
      tpid=$!
      t_cleanup "kill $tpid 2>/dev/null"
      t_wait 10 test -S "$sock" || t_fail "nbdkit did not start"
      uri="nbd+unix:///?socket=$sock" ;;
  esac
}

# run_fio URI RW BS -> prints "IOPS MB/s"
run_fio() {
  local uri=$1 rw=$2 bs=$3 extra=()
  [ "$rw" = write ] || [ "$rw" = read ] && extra=(--offset_increment=$(( $(numfmt --from=iec "$size") / jobs )) --size=$(( $(numfmt --from=iec "$size") / jobs )))
  fio --name=b --ioengine=nbd --uri="$uri" --rw="$rw" --bs="$bs" --iodepth=16 \
      --numjobs="$jobs" --group_reporting --time_based --runtime="$runtime" \
      "${extra[@]}" --output-format=json --output="$T_DIR/fio.json" >/dev/null 2>&1 ||
    { echo "0 0"; return; }
  python3 - "$T_DIR/fio.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
d = j["write"] if j["write"]["io_bytes"] else j["read"]
print("%.0f %.1f" % (d["iops"], d["bw_bytes"] / 1e6))
PY
}

declare -A res uris rr
for t in $targets; do
  start_target "$t" "$T_DIR/$t.sock"
  uris[$t]=$uri
  # Fill the whole export first, so reads never hit never-written pages.
  fio --name=fill --ioengine=nbd --uri="$uri" --rw=write --bs=1m --iodepth=16 \
      --size="$size" >/dev/null 2>&1 || echo "fill failed on $t"
done
# Figure by figure, the targets back to back, NBDB_ROUNDS times (best
# kept): this machine is shared, so interleaving keeps the ratios fair.
tlist=($targets)
for round in $(seq "${NBDB_ROUNDS:-2}"); do
  order=()
  for i in "${!tlist[@]}"; do order+=("${tlist[$(( (i + round - 1) % ${#tlist[@]} ))]}"); done
  for f in "write 1m seqwrite_1m" "read 1m seqread_1m" "randwrite 4k randwrite_4k" "randread 4k randread_4k"; do
    set -- $f
    for t in "${order[@]}"; do
      r=$(run_fio "${uris[$t]}" "$1" "$2")
      echo "round $round $t $3: ${r% *} IOPS, ${r#* } MB/s"
      old=${res[$t,$3]:-0 0}
      [ "${r%% *}" -gt "${old%% *}" ] && res[$t,$3]=$r
      rr[$round,$t,$3]=$r
    done
  done
done
# Summary: nvswapd against the best nbdkit, and against the anchors.
for fig in randwrite_4k randread_4k seqwrite_1m seqread_1m; do
  best=0
  for t in nbdkit nbdkit-malloc; do
    v=${res[$t,$fig]:-0 0}; v=${v% *}
    [ "${v%.*}" -gt "$best" ] && best=${v%.*}
  done
  for t in nvswapd nvswapd-flat; do
    [ -n "${res[$t,$fig]:-}" ] || continue
    v=${res[$t,$fig]}
    if [[ $fig == *_4k ]]; then
      val=${v% *} unit=IOPS bestv=$best
    else
      val=${v#* } unit=MB/s
      bestv=0
      for k in nbdkit nbdkit-malloc; do
        m=${res[$k,$fig]:-0 0}; m=${m#* }
        awk -v a="$m" -v b="$bestv" 'BEGIN{exit !(a>b)}' && bestv=$m
      done
    fi
    ratio=$(awk -v a="$val" -v b="$bestv" 'BEGIN{ if (b>0) printf "%.2f", a/b; else print "n/a" }')
    echo "BENCH nbd_${fig}_${t} $val $unit vs nbdkit_memory_best $bestv $unit ratio $ratio"
  done
done
# A/B: nvswapd against the base binary, round by round (same round, so
# the same moment of a shared machine), and the median of those ratios.
for pair in nvswapd:nvswapd-base nvswapd-flat:nvswapd-base-flat; do
  a=${pair%:*} b=${pair#*:}
  [ -n "${uris[$b]:-}" ] && [ -n "${uris[$a]:-}" ] || continue
  for fig in randwrite_4k randread_4k seqwrite_1m seqread_1m; do
    ratios=()
    for round in $(seq "${NBDB_ROUNDS:-2}"); do
      x=${rr[$round,$a,$fig]:-0 0} y=${rr[$round,$b,$fig]:-0 0}
      if [[ $fig == *_4k ]]; then x=${x% *} y=${y% *}; else x=${x#* } y=${y#* }; fi
      ratios+=("$(awk -v a="$x" -v b="$y" 'BEGIN{ if (b>0) printf "%.3f", a/b; else print 0 }')")
    done
    med=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{v[NR]=$1} END{ if (NR%2) print v[(NR+1)/2]; else printf "%.3f", (v[NR/2]+v[NR/2+1])/2 }')
    echo "BENCH nbd_${fig}_${a}_vs_base ${med} ratio_median rounds ${ratios[*]}"
  done
done
if [ -n "${uris[nvswapd-trace]:-}" ]; then
  echo "access log: $(nbd_stat benchtrc trace_records) records, $(nbd_stat benchtrc trace_dropped) dropped"
  for fig in randwrite_4k randread_4k seqwrite_1m seqread_1m; do
    a=${res[nvswapd-trace,$fig]:-} b=${res[nvswapd,$fig]:-}
    [ -n "$a" ] && [ -n "$b" ] || continue
    echo "BENCH nbd_${fig}_nvswapd_trace ${a% *} IOPS vs nvswapd ${b% *} IOPS ratio $(awk -v x="${a% *}" -v y="${b% *}" 'BEGIN{ if (y>0) printf "%.3f", x/y; else print "n/a" }')"
  done
fi
for fig in randwrite_4k:74000 randread_4k:90000; do
  v=${res[nvswapd,${fig%:*}]:-}
  [ -n "$v" ] && echo "BENCH nbd_${fig%:*}_nvswapd ${v% *} IOPS vs facts_anchor_nbdkit ${fig#*:} IOPS ratio $(awk -v a="${v% *}" -v b="${fig#*:}" 'BEGIN{printf "%.2f", a/b}')"
done
exit 0
