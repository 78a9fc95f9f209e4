#!/usr/bin/env bash
# ckpt_badinput.sh - persistent MPI windows (libnvckpt) given bad input: a
# restart with another number of ranks or another window size, a torn
# checkpoint, a missing or full NVCACHE_CKPT_DIR, two jobs of one name at
# once, bad settings, a dynamic window's regions of another size or number. Each gets a clear error at MPI_Win_allocate (or, for
# the torn one, falls back to the previous version) and loses nothing: the
# checkpoint still restarts to the uninterrupted run's result afterwards.
. "$(dirname "$0")/lib.sh"
t_require_root
T_TIMEOUT=${T_TIMEOUT:-180}
. "$(dirname "$0")/ckpt_common.bash"

args=(--iters 30 --nx 12 --ny 12 --nz 12)
ck_run "$T_DIR/ref" NVCACHE_CKPT=off -- "${args[@]}" ||
  t_fail "reference run failed: $(tail -5 "$T_DIR/ref.err")"
ref=$(ck_result "$T_DIR/ref")

# A job killed at iteration 15 leaves a checkpoint to restart from.
ck_start "$T_DIR/first" -- "${args[@]}" --progress --delay-ms 5
ck_wait_iter "$T_DIR/first" 15 || t_fail "the first job never reached iteration 15"
mapfile -t pids < <(ck_rank_pids)
kill -9 "${pids[@]}"
wait "$ck_pid"
job=$NVCACHE_CKPT_DIR/cg
sums() { sha256sum "$job"/*.nvckpt; }
sums >"$T_DIR/sums0"
ctl=$(t_bin nvcachectl)
"$ctl" ckpt list "$NVCACHE_CKPT_DIR" >"$T_DIR/list" || t_fail "nvcachectl ckpt list failed"
# killed at 15 or, on a loaded machine, a few iterations after it was seen
grep -E -q '^cg +cg +4 +[0-9]+ +(1[4-9]|2[0-9]) +(1[4-9]|2[0-9]) .*restartable' "$T_DIR/list" ||
  t_fail "nvcachectl ckpt list does not show job cg restartable near version 15: $(cat "$T_DIR/list")"
"$ctl" ckpt show "$NVCACHE_CKPT_DIR" cg >"$T_DIR/show" || t_fail "nvcachectl ckpt show failed"
[ "$(grep -c 'checksum ok' "$T_DIR/show")" -ge 4 ] || t_fail "ckpt show: $(cat "$T_DIR/show")"

# expect_error NAME PATTERN [ENV...] -- ARGS [-n N] : the run fails, its
# stderr matches PATTERN, and the checkpoint files are unchanged.
expect_error() {
  local name=$1 pat=$2 np=4; shift 2
  if [ "$1" = -n ]; then np=$2; shift 2; fi
  _ck_cmd "$T_DIR/$name" "$@"
  env "${ck_env[@]}" timeout 60 mpiexec "${ck_pre[@]}" -n $np "$CK_APP" "${ck_args[@]}" \
    >"$T_DIR/$name" 2>"$T_DIR/$name.err" && t_fail "$name: the job ran"
  grep -q '^startup_s' "$T_DIR/$name" && t_fail "$name: the job got past MPI_Win_allocate"
  grep -E -q "$pat" "$T_DIR/$name.err" ||
    t_fail "$name: no error matching '$pat'; stderr: $(grep -v 'info:' "$T_DIR/$name.err" | head -5)"
  sums | cmp -s - "$T_DIR/sums0" || t_fail "$name: the checkpoint files changed"
  t_log "$name: $(grep -E -m1 "$pat" "$T_DIR/$name.err" | sed 's/.*nvckpt[^:]*: //')"
}

expect_error ranks "checkpointed by 4 ranks, this job has 2" -n 2 NVCACHE_CKPT=restart -- "${args[@]}"
expect_error ranks8 "checkpointed by 4 ranks, this job has 8" -n 8 NVCACHE_CKPT=restart -- "${args[@]}"
expect_error size "checkpointed with [0-9]+ bytes, this run asks for [0-9]+ bytes" \
  NVCACHE_CKPT=restart -- --iters 30 --nx 13 --ny 12 --nz 12
expect_error nodir "NVCACHE_CKPT_DIR $T_SHM/absent: No such file or directory" \
  NVCACHE_CKPT_DIR="$T_SHM/absent" -- "${args[@]}"
expect_error badmode "NVCACHE_CKPT=sometimes: expected on, off or restart" NVCACHE_CKPT=sometimes -- "${args[@]}"
expect_error badevery "NVCACHE_CKPT_EVERY=0: expected" NVCACHE_CKPT_EVERY=0 -- "${args[@]}"
expect_error badjob "NVCACHE_CKPT_JOB=../x: a job name" NVCACHE_CKPT_JOB=../x -- "${args[@]}"

# A dynamic window restarted with another region size, or another number
# of regions: a clear error naming both; its files unchanged.
CK_APP=$CK_DYN ck_run "$T_DIR/dyn" NVCACHE_CKPT_JOB=dyn -- --iters 5 || t_fail "dynamic: the job failed: $(tail -5 "$T_DIR/dyn.err")"
dsums() { sha256sum "$NVCACHE_CKPT_DIR"/dyn/*.nvckpt; }
dsums >"$T_DIR/dsums0"
CK_APP=$CK_DYN expect_error dynsize "attached region 1 was checkpointed with 8000 bytes, this run attaches 8008 bytes" \
  NVCACHE_CKPT=restart NVCACHE_CKPT_JOB=dyn -- --iters 10 --sizes 300,1001,517
CK_APP=$CK_DYN expect_error dyncount "checkpointed with 3 attached regions, this run has 4 attached at its first" \
  NVCACHE_CKPT=restart NVCACHE_CKPT_JOB=dyn -- --iters 10 --sizes 300,1000,517,9
dsums | cmp -s - "$T_DIR/dsums0" || t_fail "dynamic: its checkpoint files changed"

# A full directory: a 1 MiB tmpfs.
mkdir -p "$T_DIR/small"
mount -t tmpfs -o size=1m nvtest-ckpt "$T_DIR/small" || t_fail "cannot mount a small tmpfs"
t_cleanup "umount $T_DIR/small"
expect_error full "NVCACHE_CKPT_DIR $T_DIR/small is full: .* needs [0-9]+ MiB" \
  NVCACHE_CKPT_DIR="$T_DIR/small" -- --iters 3 --nx 64 --ny 64 --nz 16
[ -z "$(find "$T_DIR/small" -type f)" ] || t_fail "full: files left in the full directory: $(find "$T_DIR/small" -type f)"

# Two jobs of one name at once: the second is refused, the first goes on.
ck_start "$T_DIR/running" NVCACHE_CKPT_JOB=twin -- "${args[@]}" --progress --delay-ms 20
ck_wait_iter "$T_DIR/running" 2 || t_fail "twin: the first job never started"
expect_error twin "in use: a job named 'twin' is running already" NVCACHE_CKPT_JOB=twin -- "${args[@]}"
"$ctl" ckpt list "$NVCACHE_CKPT_DIR" | grep -E -q '^twin .*running' || t_fail "ckpt list does not show twin running"
"$ctl" ckpt delete "$NVCACHE_CKPT_DIR" twin 2>"$T_DIR/del.err" && t_fail "ckpt delete of a running job succeeded"
grep -q "job twin is running" "$T_DIR/del.err" || t_fail "ckpt delete of a running job: $(cat "$T_DIR/del.err")"
wait "$ck_pid" || t_fail "twin: the first job failed: $(tail -3 "$T_DIR/running.err")"
[ "$(ck_result "$T_DIR/running")" = "$ref" ] || t_fail "twin: the first job's result is wrong"

# A torn checkpoint: flip a byte of rank 1's newest version, in a job that
# ended (all ranks hold the same two versions). The restart finds it by its
# checksum and goes back to the version before, which all ranks hold.
ck_run "$T_DIR/whole" NVCACHE_CKPT_JOB=torn -- "${args[@]}" || t_fail "torn: the job failed"
newest=$(python3 - "$NVCACHE_CKPT_DIR/torn/cg.r1.nvckpt" <<'EOF'
import struct, sys
f = open(sys.argv[1], 'r+b')
sb = f.read(4096)
extra_max, data_size = struct.unpack_from('<IQ', sb, 12)
slot = (data_size + extra_max + 4095) // 4096 * 4096
f.seek(4096); recs = f.read(4096)
v = [struct.unpack_from('<Q', recs, s * 2048)[0] for s in (0, 1)]
s = 0 if v[0] > v[1] else 1
f.seek(8192 + s * slot + data_size // 2); b = f.read(1)
f.seek(8192 + s * slot + data_size // 2); f.write(bytes([b[0] ^ 0x40]))
print(v[s])
EOF
) || t_fail "cannot tear rank 1's checkpoint"
ck_run "$T_DIR/torn" NVCACHE_CKPT_JOB=torn NVCACHE_CKPT=restart -- "${args[@]}" || t_fail "torn: restart failed: $(tail -3 "$T_DIR/torn.err")"
grep -q "version $newest in slot [01] fails its checksum" "$T_DIR/torn.err" ||
  t_fail "torn: the torn version $newest was not reported"
grep -q "restored version $((newest - 1)) " "$T_DIR/torn.err" ||
  t_fail "torn: not restored from version $((newest - 1)): $(grep restored "$T_DIR/torn.err")"
[ "$(ck_result "$T_DIR/torn")" = "$ref" ] || t_fail "torn: restarted result differs"
t_log "torn: version $newest of rank 1 failed its checksum; restarted from $((newest - 1)), result bit-identical"

# After all that, the first job's checkpoint still restarts to the result.
ck_run "$T_DIR/last" NVCACHE_CKPT=restart -- "${args[@]}" || t_fail "the final restart failed"
[ "$(ck_result "$T_DIR/last")" = "$ref" ] || t_fail "the final restart's result differs"
t_log "the first job's checkpoint, refused to every bad run, restarts bit-identically"
"$ctl" ckpt delete "$NVCACHE_CKPT_DIR" cg || t_fail "ckpt delete cg failed"
[ -e "$job" ] && t_fail "ckpt delete left $job"
"$ctl" ckpt list "$NVCACHE_CKPT_DIR" | grep -q '^cg ' && t_fail "ckpt list still shows cg after delete"
t_log "nvcachectl ckpt list/show/delete: as expected"
t_log "PASS"
