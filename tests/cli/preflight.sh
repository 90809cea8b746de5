# preflight.sh: what a generated program refuses before any work, in one line and within a bounded time:
# every flag out of its range, given twice or without its value; a named pipe as an input (opening it would
# wait for ever); an output path that is no regular file, lies in no folder or is one of the run's inputs;
# a plan larger than the memory the process can take; more ranks as threads than OpenBLAS can serve; under
# mpirun, ranks that run another program or other flags, and a refusal every rank finds, told once. Also
# what it guarantees: the log and the trace are put in place whole or not at all (a full disk leaves the
# old file and no temporary; a run that fails keeps the lines written up to the failure), and many ranks
# as threads share the cores instead of spinning on OpenBLAS.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="timeout 60 mpirun -q --oversubscribe"

fixed_text "$TMP/text.txt"
M="models/tiny.lua --set layers=1 hidden=32 heads=2 ffn=64 seq=16"
# shellcheck disable=SC2086
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null &&
  $PLAIT build $M --dp 2 --mbs 4 --gbs 8 -o "$TMP/tiny" >"$TMP/build.log" 2>&1 ||
  { fail build "$(tail -c 600 "$TMP/build.log")"; exit 0; }
T=$TMP/tiny/train
D="--data $TMP/text.bin"

# ---- flags: out of range, twice, without a value ------------------------------------------------------
while IFS='|' read -r name flags pattern; do
  # shellcheck disable=SC2086
  expect_error "flag_$name" "$pattern" $T $D $flags
done <<'FLAGS'
steps_negative|--steps -1|^plait: --steps takes a whole number from 0 to 1000000000000, not '-1'$
steps_past_int64|--steps 99999999999999999999|^plait: --steps takes a whole number from 0 to 1000000000000, not
steps_not_a_number|--steps ten|^plait: --steps takes a number, not 'ten'$
warmup_fraction|--steps 1 --warmup 1.5|^plait: --warmup takes a whole number from 0 to
decay_steps_zero|--steps 1 --decay-steps 0|^plait: --decay-steps takes a whole number from 1 to
save_every_zero|--steps 1 --save-every 0|^plait: --save-every takes a whole number from 1 to
eval_every_zero|--steps 1 --eval-every 0|^plait: --eval-every takes a whole number from 1 to
eval_batches_zero|--steps 1 --eval-every 1 --eval-batches 0|^plait: --eval-batches takes a whole number from 1 to 1000000000000, not '0'$
sample_past_limit|--steps 1 --sample 99999999999|^plait: --sample takes a whole number from 1 to 1000000 \(bytes of text\), not '99999999999'$
sample_zero|--steps 1 --sample 0|^plait: --sample takes a whole number from 1 to 1000000
gradcheck_zero|--gradcheck 0|^plait: --gradcheck takes a whole number from 1 to 1000000 \(elements to check\), not '0'$
seed_negative|--steps 1 --seed -1|^plait: --seed takes a whole number from 0 to 18446744073709551615, not '-1'$
seed_past_uint64|--steps 1 --seed 18446744073709551616|^plait: --seed takes a whole number from 0 to 18446744073709551615, not
lr_nan|--steps 1 --lr nan|^plait: --lr takes a finite number of at least 0, not 'nan'$
lr_infinite|--steps 1 --lr inf|^plait: --lr takes a finite number of at least 0, not 'inf'$
lr_negative|--steps 1 --lr -0.001|^plait: --lr takes a finite number of at least 0, not '-0.001'$
weight_decay_negative|--steps 1 --weight-decay -1|^plait: --weight-decay takes a finite number of at least 0, not '-1'$
weight_decay_nan|--steps 1 --weight-decay nan|^plait: --weight-decay takes a finite number of at least 0
grad_clip_zero|--steps 1 --grad-clip 0|^plait: --grad-clip takes a finite number above 0, not '0'$
grad_clip_infinite|--steps 1 --grad-clip inf|^plait: --grad-clip takes a finite number above 0, not 'inf'$
steps_twice|--steps 1 --steps 2|^plait: --steps is given twice \('1', then '2'\); give it once$
data_twice|--steps 1 --data other.bin|^plait: --data is given twice \('.*text.bin', then 'other.bin'\); give it once$
lr_twice|--steps 1 --lr 0.1 --lr 0.2|^plait: --lr is given twice \('0.1', then '0.2'\); give it once$
switch_twice|--steps 1 --override-schedule --override-schedule|^plait: --override-schedule is given twice; give it once$
steps_without_value|--steps|^plait: --steps takes a number; give it after --steps$
seed_followed_by_a_flag|--seed --steps 1|^plait: --seed takes a number, but the flag --steps follows it; give the value after --seed$
save_every_without_save|--steps 2 --save-every 1|^plait: --save-every 1 saves checkpoints into --save DIR; give --save DIR as well$
FLAGS
expect_error flag_data_followed_by_a_flag "^plait: --data takes a file, but the flag --steps follows it; give the value after --data$" \
  $T --data --steps 1
expect_error flag_trace_without_steps "^plait: --trace records the timeline of the last training step; give --steps N as well$" \
  $T $D --trace "$TMP/trace.json"
# the ends of the ranges are taken
expect_ok flag_largest_seed $T $D --steps 1 --seed 18446744073709551615 --lr 0 --weight-decay 0 --grad-clip 1e-9

# --sample keeps only the window it reads: more bytes than the sequence length come out, all of them
expect_ok sample_longer_than_the_window $T $D --steps 1 --sample 100
if [ "$(sed -n '/^sample:$/,/^peak resident/p' "$TMP/out" | sed '1d;$d' | tr -d '\n' | wc -c)" -ge 90 ]; then
  pass sample_text_printed
else fail sample_text_printed "$(cat "$TMP/out")"; fi

# ---- inputs: a named pipe would wait for a writer for ever ----------------------------------------------
mkfifo "$TMP/pipe"
mkdir -p "$TMP/pipe_ckpt" && mkfifo "$TMP/pipe_ckpt/model.safetensors"
PIPE_FIX="is a named pipe, not a regular file; give the path of a token file made with plait data$"
within fifo_data_is_quick 10 expect_error fifo_as_data "^plait: --data .*/pipe $PIPE_FIX" \
  timeout 20 $T --data "$TMP/pipe" --steps 1
within fifo_val_is_quick 10 expect_error fifo_as_val "^plait: --val .*/pipe $PIPE_FIX" \
  timeout 20 $T $D --val "$TMP/pipe" --eval-every 1 --steps 1
within fifo_eval_is_quick 10 expect_error fifo_as_eval "^plait: --eval .*/pipe $PIPE_FIX" timeout 20 $T --eval "$TMP/pipe"
within fifo_checkpoint_is_quick 10 expect_error fifo_as_checkpoint \
  "^plait: --load .*/pipe_ckpt: .*/pipe_ckpt/model.safetensors is a named pipe, not a regular file; give the folder of a checkpoint$" \
  timeout 20 $T $D --steps 1 --load "$TMP/pipe_ckpt"

# ---- outputs: checked before any work ------------------------------------------------------------------
REGULAR="give the path of a regular file \(it is written beside that path and renamed into place\)$"
expect_error log_to_dev_full "^plait: --log-json /dev/full is a character device; $REGULAR" $T $D --steps 1 --log-json /dev/full
within log_to_a_pipe_is_quick 10 expect_error log_to_a_pipe "^plait: --log-json .*/pipe is a named pipe; $REGULAR" \
  timeout 20 $T $D --steps 1 --log-json "$TMP/pipe"
expect_error log_to_a_folder "^plait: --log-json .* is a directory; " $T $D --steps 1 --log-json "$TMP"
expect_error log_in_a_missing_folder \
  "^plait: --log-json .*/nowhere/log.json: its folder .*/nowhere does not exist \(No such file or directory\); create it first, or give another path$" \
  $T $D --steps 1 --log-json "$TMP/nowhere/log.json"
expect_error trace_over_the_data "^plait: --trace .*/text.bin is also --data \(.*/text.bin\); writing it would replace that: give another path$" \
  $T $D --steps 1 --trace "$TMP/text.bin"
expect_error log_over_the_program "^plait: --log-json .*/tiny/train is also this program itself \(.*/tiny/train\); " \
  $T $D --steps 1 --log-json "$T"
expect_error log_over_the_saved_checkpoint "^plait: --log-json .*/ckpt/model.safetensors is also the checkpoint file --save writes " \
  $T $D --steps 1 --save "$TMP/ckpt" --log-json "$TMP/ckpt/model.safetensors"
expect_error log_and_trace_one_file "^plait: --log-json .*/both.json is also --trace \(.*/both.json\); " \
  $T $D --steps 1 --log-json "$TMP/both.json" --trace "$TMP/both.json"

# ---- writing the log and the trace: whole or not at all ---------------------------------------------
no_temporaries() { ! ls "$TMP" | grep -q '\.tmp\.'; }
expect_ok log_written $T $D --steps 3 --log-json "$TMP/log.json" --trace "$TMP/trace.json"
if [ "$(grep -c '"step"' "$TMP/log.json")" = 3 ] && grep -q peak_resident_bytes "$TMP/log.json" &&
   python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$TMP/trace.json" && no_temporaries; then
  pass log_and_trace_complete
else fail log_and_trace_complete "$(cat "$TMP/log.json") $(ls "$TMP")"; fi
# a file-size limit of 512 bytes: the third line of the log does not fit
echo "the old log" >"$TMP/log.json"
expect_error log_on_a_full_disk \
  "^plait: rank 0: --log-json .*/log.json: cannot write \(File too large\); the old file is left as it was: free space there, or give another path$" \
  sh -c 'ulimit -f 1; exec "$@"' sh $T $D --steps 10 --log-json "$TMP/log.json"
if [ "$(cat "$TMP/log.json")" = "the old log" ] && no_temporaries; then pass log_on_a_full_disk_leaves_the_old_file
else fail log_on_a_full_disk_leaves_the_old_file "$(head -c 300 "$TMP/log.json"); $(ls "$TMP")"; fi
echo "the old trace" >"$TMP/trace.json"
expect_error trace_on_a_full_disk "^plait: rank 0: --trace .*/trace.json: cannot (write|put the file in place) \(File too large\)" \
  sh -c 'ulimit -f 1; exec "$@"' sh $T $D --steps 1 --trace "$TMP/trace.json"
if [ "$(cat "$TMP/trace.json")" = "the old trace" ] && no_temporaries; then pass trace_on_a_full_disk_leaves_the_old_file
else fail trace_on_a_full_disk_leaves_the_old_file "$(head -c 300 "$TMP/trace.json"); $(ls "$TMP")"; fi
# a run that fails keeps the lines written before the failure
expect_error log_of_a_failed_run "^plait: rank [01]: step 2: the gradient norm is -?nan" $T $D --steps 5 --lr 1e30 --log-json "$TMP/log.json"
if [ "$(grep -c '"step"' "$TMP/log.json")" = 1 ] && no_temporaries; then pass log_of_a_failed_run_kept
else fail log_of_a_failed_run_kept "$(head -c 300 "$TMP/log.json"); $(ls "$TMP")"; fi

# ---- memory and threads --------------------------------------------------------------------------------
# shellcheck disable=SC2086
$PLAIT build models/tiny.lua --set layers=64 hidden=16384 heads=128 ffn=65536 seq=16 -o "$TMP/huge" >/dev/null 2>&1 &&
  $PLAIT build $M --tp 2 --dp 512 --mbs 1 --gbs 512 -o "$TMP/wide" >/dev/null 2>&1 &&
  $PLAIT build models/tiny.lua --set layers=1 hidden=128 heads=2 ffn=512 seq=64 --dp 32 --mbs 1 --gbs 32 -o "$TMP/dp32" \
    >/dev/null 2>&1 || fail build "plait build of the memory and thread programs failed"
within plan_larger_than_memory_is_quick 10 expect_error plan_larger_than_memory \
  "^plait: the plan needs [0-9.]+ TB for this process's rank, more than the [0-9.]+ [KMGT]?B of (the machine's available memory \(MemAvailable\)|the room its cgroup's memory limit .* leaves); run a smaller model or microbatch, or split it over processes with --tp or --pp \(mpirun\)$" \
  timeout 20 "$TMP/huge/train" $D --steps 1
# an address-space limit that leaves no room beside OpenBLAS's buffers (which OpenBLAS would retry for ever)
within plan_past_ulimit_v_is_quick 10 expect_error plan_past_ulimit_v \
  "^plait: the plan needs [0-9.]+ [KMG]?B for the 2 ranks of this process, more than the [0-9.]+ [KMG]?B of the room its address-space limit \(ulimit -v\) leaves beside OpenBLAS's [0-9]+ buffers of [0-9]+ MB; raise that limit by at least [0-9]+ kB, or run fewer ranks per process \(mpirun\), or a smaller model or microbatch$" \
  timeout 20 sh -c 'ulimit -v 600000; exec "$@"' sh $T $D --steps 1
# limits too tight for OpenBLAS's first buffers, which its constructor would retry for ever before main:
# refused before it runs, naming the limit to set
for limit in "-v 100000" "-v 250000" "-d 20000" "-d 100000"; do
  flag=${limit% *}
  within "start_under_ulimit${flag}_${limit#* }_is_quick" 10 expect_error "start_under_ulimit${flag}_${limit#* }" \
    "^plait: OpenBLAS maps [0-9]+ buffers of [0-9]+ MB at start-up, more than the [0-9]+ MB ulimit $flag leaves; raise it to at least [0-9]+ \(ulimit $flag [0-9]+\)" \
    timeout 20 sh -c "ulimit $limit; exec \"\$@\"" sh $T $D --steps 1
done
within too_many_threads_is_quick 10 expect_error too_many_ranks_as_threads \
  "^plait: tp·pp·dp = 2·1·512 = 1024 ranks as threads of one process, more than the [0-9]+ it can run: this program's OpenBLAS hands out [0-9]+ GEMM buffers at once \(built for [0-9]+ threads\); start them as processes \(mpirun -np 1024\), or choose a smaller layout$" \
  timeout 20 "$TMP/wide/train" $D --steps 1
# 32 ranks on this machine's cores, each GEMM on its rank's share (before: every rank's GEMM on every
# core, spinning on OpenBLAS's one set of thread buffers; one step in 60 s on 2 cores)
within ranks_as_threads_share_the_cores 20 expect_ok dp32_three_steps timeout 60 "$TMP/dp32/train" $D --steps 3

# ---- under mpirun: one program, one set of flags, one line -----------------------------------------
if ! command -v mpirun >/dev/null; then fail mpirun_available "mpirun not found; install openmpi-bin (make deps)"; exit 0; fi
# shellcheck disable=SC2086
$PLAIT build models/gpt.lua --set layers=1 hidden=32 heads=2 ffn=64 seq=16 vocab=256 --dp 2 --mbs 4 --gbs 8 -o "$TMP/gpt" \
  >/dev/null 2>&1 && $PLAIT build $M --tp 2 --mbs 4 --gbs 8 -o "$TMP/tp2" >/dev/null 2>&1 ||
  fail build "plait build of the MPI programs failed"
within mpi_another_model_is_quick 30 expect_error mpi_another_model \
  "^plait: rank 1 runs another program than rank 0 \(model 'gpt' against 'tiny'\); launch one program on every rank$" \
  $MPIRUN -np 1 $T $D --steps 2 : -np 1 "$TMP/gpt/train" $D --steps 2
within mpi_another_grid_is_quick 30 expect_error mpi_another_grid \
  "^plait: rank 1 runs another program than rank 0 \(a grid of tp·pp·dp = 2·1·1 against 1·1·2\); launch one program on every rank$" \
  $MPIRUN -np 1 $T $D --steps 2 : -np 1 "$TMP/tp2/train" $D --steps 2
within mpi_other_steps_is_quick 30 expect_error mpi_other_steps \
  "^plait: rank 1 was started with --steps 3, rank 0 with --steps 2; give every rank the same flags$" \
  $MPIRUN -np 1 $T $D --steps 2 : -np 1 $T $D --steps 3
within mpi_save_on_one_rank_is_quick 30 expect_error mpi_save_on_one_rank \
  "^plait: rank 1 was started with --save .*/ckpt, rank 0 without --save; give every rank the same flags$" \
  $MPIRUN -np 1 $T $D --steps 2 : -np 1 $T $D --steps 2 --save "$TMP/ckpt"
within mpi_refusal_told_once_is_quick 30 expect_error mpi_refusal_told_once \
  "^plait: rank 0: --eval-batches takes a whole number from 1 to 1000000000000, not '0'$" \
  $MPIRUN -np 2 $T $D --steps 1 --eval-every 1 --eval-batches 0
