# faults.sh: a failing rank brings the whole job down, non-zero, within a bounded time, naming the rank
# and why; no rank hangs. A world that does not match the plan is refused with one line, under mpirun
# and under srun (its variables faked, as srun sets them).
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun -q --oversubscribe"
# bounded: every job runs under `timeout 60` (its status 124, a hang, fails) and must end within BOUND s
LIMIT="timeout 60" BOUND=30

fixed_text "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null
head -c 2000 "$TMP/text.bin" > "$TMP/bad.bin"
M="models/tiny.lua --set layers=2 hidden=64 heads=4 ffn=256 seq=32 --mbs 2 --gbs 8"
# shellcheck disable=SC2086
$PLAIT build $M --dp 2 -o "$TMP/dp2" >/dev/null 2>&1 && $PLAIT build $M --tp 2 --pp 2 -o "$TMP/tp2pp2" >/dev/null 2>&1 ||
  { fail build "plait build failed"; exit 0; }

within world_size_mismatch_is_quick $BOUND expect_error world_size_mismatch \
  "the launcher started 3 ranks but the plan needs tp·pp·dp = 1·1·2 = 2; run mpirun -np 2" \
  $LIMIT $MPIRUN -np 3 "$TMP/dp2/train" --data "$TMP/text.bin" --steps 2
# one name on every rank (the ranks must agree on their flags), another file behind it on rank 1: a
# machine whose copy of the data is damaged
mkdir -p "$TMP/good_copy" "$TMP/bad_copy"
cp "$TMP/text.bin" "$TMP/good_copy/data.bin" && cp "$TMP/bad.bin" "$TMP/bad_copy/data.bin"
within bad_data_on_one_rank_is_quick $BOUND expect_error bad_data_on_one_rank "^plait: rank 1: data.bin: .*truncated" \
  $LIMIT $MPIRUN -np 1 --wdir "$TMP/good_copy" "$TMP/dp2/train" --data data.bin --steps 2 \
  : -np 1 --wdir "$TMP/bad_copy" "$TMP/dp2/train" --data data.bin --steps 2
within nan_threads_is_quick $BOUND expect_error nan_threads "^plait: rank [0-3]: step 2: the gradient norm is -?nan" \
  $LIMIT "$TMP/tp2pp2/train" --data "$TMP/text.bin" --steps 5 --lr 1e30
within nan_mpi_is_quick $BOUND expect_error nan_mpi "^plait: rank [0-3]: step 2: the gradient norm is -?nan" \
  $LIMIT $MPIRUN -np 4 "$TMP/tp2pp2/train" --data "$TMP/text.bin" --steps 5 --lr 1e30

# srun: SLURM_PROCID with SLURM_STEP_ID marks a process srun started, SLURM_STEP_NUM_TASKS (or
# SLURM_NTASKS) its world. Faked here for one process that MPI sees as a world of one.
srun_env() { # TASKS: the variables srun sets for task 0 of a step of TASKS tasks
  echo "SLURM_JOB_ID=4242 SLURM_JOBID=4242 SLURM_STEP_ID=0 SLURM_STEPID=0 SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NODEID=0" \
       "SLURM_NNODES=1 SLURM_NTASKS=$1 SLURM_NPROCS=$1 SLURM_STEP_NUM_TASKS=$1 SLURM_NTASKS_PER_NODE=$1"
}
# shellcheck disable=SC2046
within srun_world_size_mismatch_is_quick $BOUND expect_error srun_world_size_mismatch \
  '^plait: the launcher started 1 rank but the plan needs tp·pp·dp = 1·1·2 = 2; run srun -n 2$' \
  env $(srun_env 1) $LIMIT "$TMP/dp2/train" --data "$TMP/text.bin" --steps 2
# shellcheck disable=SC2046
within srun_without_pmi_is_quick $BOUND expect_error srun_without_pmi \
  '^plait: the launcher started 2 ranks but MPI sees a world of 1; .*srun --mpi=pmix' \
  env $(srun_env 2) $LIMIT "$TMP/dp2/train" --data "$TMP/text.bin" --steps 2
# without SLURM_STEP_NUM_TASKS, SLURM_NTASKS gives the world
within srun_ntasks_only_is_quick $BOUND expect_error srun_ntasks_only \
  '^plait: the launcher started 3 ranks but MPI sees a world of 1; ' \
  env SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=3 $LIMIT "$TMP/dp2/train" --data "$TMP/text.bin" --steps 2
# inside an allocation (salloc, sbatch) but not started by srun: the ranks are threads of this process
if env SLURM_JOB_ID=4242 SLURM_JOBID=4242 SLURM_NTASKS=4 SLURM_NPROCS=4 SLURM_NNODES=1 \
     $LIMIT "$TMP/dp2/train" --data "$TMP/text.bin" --steps 1 >"$TMP/alloc.out" 2>&1 &&
   grep -q '^tiny: tp 1 × pp 1 × dp 2 .*; local ranks' "$TMP/alloc.out" && grep -q '^step 1 |' "$TMP/alloc.out"; then
  pass slurm_allocation_without_srun_runs_threads
else
  fail slurm_allocation_without_srun_runs_threads "$(head -c 400 "$TMP/alloc.out")"
fi

# a rank killed in the middle of training: mpirun ends the job with a non-zero status, promptly, and
# names the rank and the signal (its own line, which -q would hide: hence no -q here)
rank_pid() { # RANK: the process of that MPI rank of the job below
  for p in $(pgrep -f "^$TMP/tp2pp2/train "); do
    [ "$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')" = "$1" ] && echo "$p"
  done
}
$LIMIT mpirun --oversubscribe -np 4 "$TMP/tp2pp2/train" --data "$TMP/text.bin" --steps 100000 >"$TMP/killed.out" 2>"$TMP/killed.err" &
job=$!
while ! grep -q '^step 3 ' "$TMP/killed.out" 2>/dev/null && kill -0 $job 2>/dev/null; do sleep 0.2; done
victim=$(rank_pid 2)
start=$(date +%s)
if [ -n "$victim" ]; then kill -9 "$victim"; else kill $job; fi
wait $job; status=$?
took=$(( $(date +%s) - start ))
if [ -z "$victim" ]; then fail rank_killed "no rank 2 to kill: $(tail -c 300 "$TMP/killed.out") $(tail -c 300 "$TMP/killed.err")"
elif [ "$status" = 0 ] || [ "$status" = 124 ]; then fail rank_killed "mpirun exited with $status $took s after the kill"
elif [ "$took" -gt $BOUND ]; then fail rank_killed "the job ended $took s after the kill, more than $BOUND s"
elif ! grep -q -E 'process rank 2 .*exited on signal 9' "$TMP/killed.err"; then
  fail rank_killed "mpirun exited $status but its stderr does not name rank 2 and signal 9: $(head -c 400 "$TMP/killed.err")"
else pass "rank_killed (mpirun exited $status $took s after the kill: $(grep -o -E 'process rank 2 .*exited on signal 9' "$TMP/killed.err"))"; fi

# a token file cut short under a running program: the read that faults ends it with one line naming the
# file, not a bare SIGBUS
cp "$TMP/text.bin" "$TMP/cut.bin"
$LIMIT "$TMP/dp2/train" --data "$TMP/cut.bin" --steps 100000 >"$TMP/cut.out" 2>"$TMP/cut.err" &
job=$!
while ! grep -q '^step 2 ' "$TMP/cut.out" 2>/dev/null && kill -0 $job 2>/dev/null; do sleep 0.2; done
truncate -s 1100 "$TMP/cut.bin"
wait $job; status=$?
if [ "$status" = 1 ] && [ "$(wc -l <"$TMP/cut.err")" = 1 ] &&
   grep -q "^plait: $TMP/cut.bin: the file was cut short while this program read it; .*restore it" "$TMP/cut.err"; then
  pass data_cut_short_while_training
else
  fail data_cut_short_while_training "status $status: $(head -c 400 "$TMP/cut.err")"
fi
