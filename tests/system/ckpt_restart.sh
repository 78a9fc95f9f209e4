#!/usr/bin/env bash
# ckpt_restart.sh - persistent MPI windows (libnvckpt), 4 ranks of the CG
# mini-app: kill -9 of all ranks and of one rank at random iterations, and
# of one rank and of all ranks inside a commit (at a random persist point
# of a random version); each time the job is restarted with
# NVCACHE_CKPT=restart and its final residual and solution vector must be
# bit-identical to an uninterrupted run. Also passive-target
# synchronization (checkpointed at the barrier after unlock_all), a window
# over the program's memory (MPI_Win_create), a shared one
# (MPI_Win_allocate_shared), a dynamic window (MPI_Win_create_dynamic with
# attached regions, tests/mpi/dynwin.c), one synchronized by passive
# target and MPI_Allreduce (checkpointed there), one by passive target
# and messages alone (never checkpointed: said once), incremental checkpoints
# (10 % of the pages written: bytes copied and a restart; a dynamic window's
# regions copied only in their written pages), the second level
# (NVCACHE_CKPT_FLUSH) after a rank's NVRAM is lost, after a restart is
# killed inside its first copy there and the NVRAM is lost, and for a dynamic
# window that grows after the NVRAM directory is wiped, the double-buffered version
# (nvckpt_db_*) killed and restarted (and with NVCACHE_CKPT=off: plain
# memory, no files), and the disk version's own restart.
. "$(dirname "$0")/lib.sh"
t_sanitizer_only
t_require_root
T_TIMEOUT=${T_TIMEOUT:-240}
. "$(dirname "$0")/ckpt_common.bash"

ITERS=30
args=(--iters $ITERS --nx 12 --ny 12 --nz 12)
ck_run "$T_DIR/ref" NVCACHE_CKPT=off -- "${args[@]}" || t_fail "the uninterrupted run failed: $(tail -3 "$T_DIR/ref.err")"
ref=$(ck_result "$T_DIR/ref")
[ -n "$ref" ] || t_fail "the uninterrupted run printed no result"
t_log "uninterrupted: $ref"

# restart_same NAME [ENV...] -- ARGS : restart, compare with the reference
restart_same() {
  local name=$1; shift
  ck_run "$T_DIR/$name.re" NVCACHE_CKPT=restart "$@" ||
    t_fail "$name: the restarted job failed: $(tail -3 "$T_DIR/$name.re.err")"
  local got from
  got=$(ck_result "$T_DIR/$name.re")
  from=$(grep '^startup_s' "$T_DIR/$name.re" | awk '{print $4}')
  [ "$got" = "$ref" ] || t_fail "$name: restarted result differs:
  got  $got
  want $ref"
  [ "${from:-0}" -gt 0 ] || t_fail "$name: the restart did not resume from a checkpoint ($(cat "$T_DIR/$name.re"))"
  t_log "$name: resumed at iteration $from, result bit-identical"
}

# kill_at NAME WHO K [ENV...] -- ARGS : start, kill -9 WHO (all | a rank
# number) once rank 0 reported iteration K
kill_at() {
  local name=$1 who=$2 k=$3; shift 3
  ck_start "$T_DIR/$name" "$@" --progress --delay-ms 5
  ck_wait_iter "$T_DIR/$name" "$k" || t_fail "$name: never reached iteration $k: $(tail -3 "$T_DIR/$name.err")"
  local pids
  mapfile -t pids < <(ck_rank_pids)
  [ ${#pids[@]} -eq 4 ] || t_fail "$name: expected 4 rank pids, got ${#pids[@]}"
  if [ "$who" = all ]; then kill -9 "${pids[@]}"; else kill -9 "$(cat "$T_DIR/pids/pid.$who")"; fi
  wait "$ck_pid" && t_fail "$name: mpiexec exited 0 after a kill -9"
  grep -q '^result ' "$T_DIR/$name" && t_fail "$name: the killed job finished anyway"
  t_log "$name: killed $who at iteration $k"
}

k=$((5 + RANDOM % 20))
kill_at all_ranks all $k -- "${args[@]}"
restart_same all_ranks -- "${args[@]}"

k=$((5 + RANDOM % 20)) r=$((RANDOM % 4))
kill_at one_rank $r $k -- "${args[@]}"
restart_same one_rank -- "${args[@]}"

# Inside a commit: persist points are 2 at creation, then 3 per version
# (record cleared, slot persisted, record persisted); a random one of
# version v. One rank first (mpiexec then ends the others wherever they
# are), then all ranks at the same point.
crash_run() {  # NAME RANK|all POINT -- ARGS
  local name=$1 who=$2 pt=$3; shift 4
  local sel='true'
  [ "$who" = all ] || sel="[ \"\$PMI_RANK\" = $who ]"
  timeout 120 mpiexec -n 4 sh -c \
    "export LD_PRELOAD=\"$CK_PRELOAD\"; if $sel; then export NVCACHE_CRASH_AT=$pt; fi; exec \"\$0\" \"\$@\"" \
    "$CK_APP" "$@" >"$T_DIR/$name" 2>"$T_DIR/$name.err" &&
    t_fail "$name: the job ran to the end though NVCACHE_CRASH_AT=$pt"
  grep -q '^result ' "$T_DIR/$name" && t_fail "$name: the killed job finished"
  t_log "$name: rank $who killed at persist point $pt"
}
v=$((3 + RANDOM % 20))
crash_run commit_one $((RANDOM % 4)) $((2 + 3 * (v - 1) + 1 + RANDOM % 3)) -- "${args[@]}"
restart_same commit_one -- "${args[@]}"
v=$((3 + RANDOM % 20))
crash_run commit_all all $((2 + 3 * (v - 1) + 1 + RANDOM % 3)) -- "${args[@]}"
restart_same commit_all -- "${args[@]}"

# A restart that is killed too, then restarted again.
k=$((5 + RANDOM % 20))
kill_at twice_1 all $k -- "${args[@]}"
ck_start "$T_DIR/twice_2" NVCACHE_CKPT=restart -- "${args[@]}" --progress --delay-ms 5
ck_wait_iter "$T_DIR/twice_2" $((k + 5)) || t_fail "twice: the restart never reached iteration $((k + 5))"
mapfile -t pids < <(ck_rank_pids)
kill -9 "${pids[@]}"
wait "$ck_pid"
restart_same twice -- "${args[@]}"

# Passive target (lock_all / Put / unlock_all + barrier), a window over
# the program's own memory (MPI_Win_create), and MPI's shared memory
# (MPI_Win_allocate_shared).
kill_at passive $((RANDOM % 4)) $((5 + RANDOM % 20)) -- "${args[@]}" --sync passive
restart_same passive -- "${args[@]}" --sync passive
kill_at create all $((5 + RANDOM % 20)) -- "${args[@]}" --win create
restart_same create -- "${args[@]}" --win create
kill_at shared $((RANDOM % 4)) $((5 + RANDOM % 20)) -- "${args[@]}" --win shared
restart_same shared -- "${args[@]}" --win shared

# A dynamic window: three regions attached and a scratch one attached and
# detached again on each rank; killed at a random iteration, restarted.
dargs=(--iters $ITERS)
CK_APP=$CK_DYN ck_run "$T_DIR/dref" NVCACHE_CKPT=off -- "${dargs[@]}" ||
  t_fail "dynamic: the uninterrupted run failed: $(tail -3 "$T_DIR/dref.err")"
CK_APP=$CK_DYN kill_at dynamic $((RANDOM % 4)) $((5 + RANDOM % 20)) -- "${dargs[@]}"
CK_APP=$CK_DYN ref=$(ck_result "$T_DIR/dref") restart_same dynamic -- "${dargs[@]}"
# Passive target with an MPI_Allreduce as the only collective (no fence,
# no barrier): checkpointed at the Allreduce after unlock_all; killed,
# restarted, bit-identical.
CK_APP=$CK_DYN ck_run "$T_DIR/lkref" NVCACHE_CKPT=off -- "${dargs[@]}" --sync lockall ||
  t_fail "lockall: the uninterrupted run failed: $(tail -3 "$T_DIR/lkref.err")"
CK_APP=$CK_DYN kill_at lockall $((RANDOM % 4)) $((5 + RANDOM % 20)) NVCACHE_CKPT_JOB=lk -- "${dargs[@]}" --sync lockall
CK_APP=$CK_DYN ref=$(ck_result "$T_DIR/lkref") restart_same lockall NVCACHE_CKPT_JOB=lk -- "${dargs[@]}" --sync lockall
# Passive target with no collective at all (messages to the neighbours):
# no version can be committed; the job says so once for the window.
CK_APP=$CK_DYN ck_run "$T_DIR/lockp2p" NVCACHE_CKPT_JOB=lp -- --iters 5 --sync lockp2p ||
  t_fail "lockp2p: the job failed: $(tail -3 "$T_DIR/lockp2p.err")"
[ "$(grep -c "window 'win0': 20 passive-target synchronizations .*never checkpointed" \
  "$T_DIR/lockp2p.err")" = 1 ] || t_fail "lockp2p: no single warning: $(cat "$T_DIR/lockp2p.err")"
t_log "lockp2p: $(grep -o "window 'win0'.*" "$T_DIR/lockp2p.err")"
# Allreduces inside one lock_all epoch (flush_all after each Put): not a
# consistent point while an epoch is open, never checkpointed, said.
CK_APP=$CK_DYN ck_run "$T_DIR/lockopen" NVCACHE_CKPT_JOB=lo -- --iters 5 --sync lockopen ||
  t_fail "lockopen: the job failed: $(tail -3 "$T_DIR/lockopen.err")"
[ "$(grep -c "window 'win0': 2[0-9] passive-target synchronizations .*never checkpointed" \
  "$T_DIR/lockopen.err")" = 1 ] || t_fail "lockopen: checkpointed inside an open epoch, or no single warning: $(cat "$T_DIR/lockopen.err")"
t_log "lockopen: $(grep -o "window 'win0'.*" "$T_DIR/lockopen.err")"

# Incremental checkpoints (written pages only): 10 % of the pages written
# per iteration, killed and restarted; the bytes copied are at most 1/3 of
# a full checkpoint's.
targs=(--iters 30 --nx 16 --ny 16 --nz 16 --mode touch --touch-pct 10)
ck_run "$T_DIR/tref" NVCACHE_CKPT=off -- "${targs[@]}" || t_fail "touch reference failed"
tref=$(ck_result "$T_DIR/tref")
ck_run "$T_DIR/tfull" NVCACHE_CKPT_STATS=1 -- "${targs[@]}" || t_fail "touch full failed"
ck_run "$T_DIR/tinc" NVCACHE_CKPT_STATS=1 NVCACHE_CKPT_MODE=incremental -- "${targs[@]}" || t_fail "touch incremental failed"
[ "$(ck_result "$T_DIR/tinc")" = "$tref" ] || t_fail "incremental: result differs"
full=$(sed -n "s/.*'touch' rank 0: .* \([0-9]*\) bytes copied (full).*/\1/p" "$T_DIR/tfull.err")
inc=$(sed -n "s/.*'touch' rank 0: .* \([0-9]*\) bytes copied (incremental).*/\1/p" "$T_DIR/tinc.err")
[ -n "$full" ] && [ -n "$inc" ] || t_fail "incremental: no byte counts ($(grep nvckpt "$T_DIR/tinc.err"))"
[ $((inc * 3)) -le "$full" ] || t_fail "incremental copied $inc bytes, full $full: more than 1/3"
t_log "incremental: $inc bytes copied against $full in full ($((inc * 100 / full)) %)"
kill_at touch_kill all $((5 + RANDOM % 20)) NVCACHE_CKPT_MODE=incremental -- "${targs[@]}"
ref=$tref restart_same touch_kill NVCACHE_CKPT_MODE=incremental -- "${targs[@]}"
# A dynamic window's regions (3 x 512 KiB a rank, 1/16 of their pages
# written per iteration): incremental copies at most 1/3 of full's bytes.
dtargs=(--iters 12 --sizes 65536,65536,65536 --stride 16)
CK_APP=$CK_DYN ck_run "$T_DIR/dtref" NVCACHE_CKPT=off -- "${dtargs[@]}" || t_fail "dynamic touch reference failed"
CK_APP=$CK_DYN ck_run "$T_DIR/dtfull" NVCACHE_CKPT_STATS=1 -- "${dtargs[@]}" || t_fail "dynamic touch full failed"
CK_APP=$CK_DYN ck_run "$T_DIR/dtinc" NVCACHE_CKPT_STATS=1 NVCACHE_CKPT_MODE=incremental -- "${dtargs[@]}" ||
  t_fail "dynamic touch incremental failed: $(tail -3 "$T_DIR/dtinc.err")"
[ "$(ck_result "$T_DIR/dtinc")" = "$(ck_result "$T_DIR/dtref")" ] || t_fail "dynamic incremental: result differs"
full=$(sed -n "s/.*'win0' rank 0: .* \([0-9]*\) bytes copied (full).*/\1/p" "$T_DIR/dtfull.err")
inc=$(sed -n "s/.*'win0' rank 0: .* \([0-9]*\) bytes copied (incremental).*/\1/p" "$T_DIR/dtinc.err")
[ -n "$full" ] && [ -n "$inc" ] || t_fail "dynamic incremental: no byte counts ($(grep nvckpt "$T_DIR/dtinc.err"))"
[ $((inc * 3)) -le "$full" ] || t_fail "dynamic incremental copied $inc bytes, full $full: more than 1/3"
t_log "dynamic incremental: $inc bytes copied against $full in full ($((inc * 100 / full)) %)"

# The second level: every 4th version copied in the background to a
# directory on disk; one rank's NVRAM lost, the restart reads all from there.
mkdir -p "$T_DIR/flushdir"
fl=(NVCACHE_CKPT_FLUSH="$T_DIR/flushdir" NVCACHE_CKPT_FLUSH_EVERY=4 NVCACHE_CKPT_JOB=fl)
kill_at flush all $((10 + RANDOM % 15)) "${fl[@]}" -- "${args[@]}"
[ "$(ls "$T_DIR/flushdir/fl" | wc -l)" = 4 ] || t_fail "flush: no second-level files in $T_DIR/flushdir/fl: $(ls -R "$T_DIR/flushdir")"
lost=$((RANDOM % 4))
rm "$NVCACHE_CKPT_DIR/fl/cg.r$lost.nvckpt"
restart_same flush "${fl[@]}" -- "${args[@]}"
grep -q "restarting from $T_DIR/flushdir" "$T_DIR/flush.re.err" || t_fail "flush: the restart did not use the second level"
t_log "flush: rank $lost's NVRAM file removed; restarted from the second level"
# A restart keeps the second level's copies until its own first copy is
# complete: killed inside that copy (all ranks, NVCACHE_CRASH_IN), the
# NVRAM directory then lost, the job still restarts from the second level.
ck_run "$T_DIR/flush_crash" NVCACHE_CKPT=restart NVCACHE_CRASH_IN=flush-copy "${fl[@]}" -- \
  --iters $((ITERS + 10)) --nx 12 --ny 12 --nz 12 &&
  t_fail "flush_crash: the job ran to the end though NVCACHE_CRASH_IN=flush-copy"
grep -q "killed in flush-copy" "$T_DIR/flush_crash.err" || t_fail "flush_crash: not killed in the copy: $(tail -3 "$T_DIR/flush_crash.err")"
rm -rf "${NVCACHE_CKPT_DIR:?}/fl"
restart_same flush_kept "${fl[@]}" -- "${args[@]}"
grep -q "restarting from $T_DIR/flushdir" "$T_DIR/flush_kept.re.err" || t_fail "flush_kept: the restart did not use the second level"
t_log "flush_kept: killed inside a restart's first second-level copy, NVRAM lost: restarted from the copies kept"
# A dynamic window on the second level: a region attached at iteration 8
# grows its areas (NVRAM and second level); killed later, the NVRAM
# directory wiped, restarted from the second level.
dfl=(NVCACHE_CKPT_FLUSH="$T_DIR/flushdir" NVCACHE_CKPT_FLUSH_EVERY=4 NVCACHE_CKPT_JOB=dfl)
dgargs=(--iters $ITERS --grow-at 8)
CK_APP=$CK_DYN ck_run "$T_DIR/dgref" NVCACHE_CKPT=off -- "${dgargs[@]}" || t_fail "dynamic flush: reference failed"
CK_APP=$CK_DYN kill_at dflush all $((14 + RANDOM % 12)) "${dfl[@]}" -- "${dgargs[@]}"
[ "$(ls "$T_DIR/flushdir/dfl" | wc -l)" = 4 ] || t_fail "dynamic flush: no second-level files: $(ls -R "$T_DIR/flushdir/dfl")"
rm -rf "${NVCACHE_CKPT_DIR:?}/dfl"
CK_APP=$CK_DYN ref=$(ck_result "$T_DIR/dgref") restart_same dflush "${dfl[@]}" -- "${dgargs[@]}"
grep -q "restarting from $T_DIR/flushdir" "$T_DIR/dflush.re.err" || t_fail "dynamic flush: the restart did not use the second level"
t_log "dynamic flush: NVRAM directory wiped; restarted from the second level, result bit-identical"

# The double-buffered version: same result, killed and restarted.
ck_run "$T_DIR/db" -- "${args[@]}" --mode db || t_fail "db run failed: $(tail -3 "$T_DIR/db.err")"
[ "$(ck_result "$T_DIR/db")" = "$ref" ] || t_fail "db: result differs from the plain run: $(ck_result "$T_DIR/db")"
k=$((5 + RANDOM % 20))
kill_at db_kill all $k -- "${args[@]}" --mode db
restart_same db_kill -- "${args[@]}" --mode db
# NVCACHE_CKPT=off: the double buffers are plain memory, no file is made.
ck_run "$T_DIR/dbmem" NVCACHE_CKPT=0 NVCACHE_CKPT_JOB=dbmem -- "${args[@]}" --mode db ||
  t_fail "db with NVCACHE_CKPT=0 failed: $(tail -3 "$T_DIR/dbmem.err")"
[ "$(ck_result "$T_DIR/dbmem")" = "$ref" ] || t_fail "db with NVCACHE_CKPT=0: result differs"
[ ! -e "$NVCACHE_CKPT_DIR/dbmem" ] || t_fail "db with NVCACHE_CKPT=0 made checkpoint files"

# The disk version restarts from its own files.
mkdir -p "$T_DIR/disk"
kill_at disk_kill all $((5 + RANDOM % 20)) NVCACHE_CKPT=off -- "${args[@]}" --mode disk --dir "$T_DIR/disk"
ck_run "$T_DIR/disk.re" NVCACHE_CKPT=off -- "${args[@]}" --mode disk --dir "$T_DIR/disk" --restart ||
  t_fail "disk restart failed"
[ "$(ck_result "$T_DIR/disk.re")" = "$ref" ] || t_fail "disk: restarted result differs"
t_log "disk version: restarted from its files, result bit-identical"
t_log "PASS"
