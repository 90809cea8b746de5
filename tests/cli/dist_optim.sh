#!/bin/sh
# dist_optim.sh: the distributed optimizer (--distributed-optimizer) trains as the same layout
# without it: gradients reduce-scattered in the order the all-reduce sums them, each data-parallel
# rank updating its chunk of every bucket, the weights gathered after the step. Losses equal bit for
# bit (the gradient norm, summed over shards in another order, within 1e-12), on threads and under
# mpirun; checkpoints hold the same full tensors with and without it and load at any layout; the
# plan's memory of the ranks falls by the optimizer state the ranks no longer repeat.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
fixed_text "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null ||
  { fail dist_optim_data "plait data failed"; exit 0; }
TINY="models/tiny.lua --mbs 2 --gbs 8"
LLAMA="models/llama.lua --set layers=4 hidden=64 heads=4 kv_heads=2 ffn=160 seq=32 vocab=256"
LLAMA="$LLAMA --mbs 2 --gbs 8"
SP="--tp 2 --pp 2 --dp 2 --sequence-parallel"
mpirun="timeout 120 mpirun -q --oversubscribe --allow-run-as-root"

# train NAME MODEL_AND_LAYOUT [LAUNCHER...]: builds and trains 10 steps; NAME.loss and NAME.norm
train() {
  run_name=$1 run_model=$2; shift 2
  # shellcheck disable=SC2086
  $PLAIT build $run_model -o "$TMP/$run_name" >"$TMP/$run_name.log" 2>&1 &&
    "$@" "$TMP/$run_name/train" --data "$TMP/text.bin" --steps 10 \
      --log-json "$TMP/$run_name.json" >>"$TMP/$run_name.log" 2>&1 || return 1
  sed -n 's/.*"loss": \([^,]*\),.*/\1/p' "$TMP/$run_name.json" >"$TMP/$run_name.loss"
  sed -n 's/.*"grad_norm": \([^,}]*\).*/\1/p' "$TMP/$run_name.json" >"$TMP/$run_name.norm"
  [ "$(wc -l <"$TMP/$run_name.loss")" = 10 ]
}

# worst relative difference of two columns of numbers
worst() {
  paste "$1" "$2" | awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1);
    if (r > w) w = r } END { printf "%.2g", w }'
}
first_rows() { paste "$TMP/$1" "$TMP/$2" | head -3 | tr '\n\t' '; '; }

# same_training NAME MODEL LAYOUT [LAUNCHER...]: with and without, the same losses and norms
same_training() {
  name=$1 model=$2 layout=$3; shift 3
  if ! train "$name" "$model $layout" "$@" ||
     ! train "$name.do" "$model $layout --distributed-optimizer" "$@"; then
    fail "dist_optim_same_$name" "a run failed: $(tail -c 300 "$TMP/$name.log")" \
      "$(tail -c 300 "$TMP/$name.do.log")"
    return
  fi
  norms=$(worst "$TMP/$name.norm" "$TMP/$name.do.norm")
  if ! cmp -s "$TMP/$name.loss" "$TMP/$name.do.loss"; then
    fail "dist_optim_same_$name" "losses differ: $(first_rows "$name.loss" "$name.do.loss")"
  elif ! awk -v w="$norms" 'BEGIN { exit !(w <= 1e-12) }'; then
    fail "dist_optim_same_$name" "gradient norms differ by $norms (relative)"
  else pass "dist_optim_same_$name (10 losses equal, norms within $norms)"; fi
}

same_training tiny_dp2 "$TINY" "--dp 2"
same_training tiny_dp4 "$TINY" "--dp 4"
same_training tiny_tp2pp2dp2 "$TINY" "--tp 2 --pp 2 --dp 2"
same_training tiny_pp2dp2_after "$TINY" "--pp 2 --dp 2 --grad-reduce after"
same_training llama_dp2 "$LLAMA" "--dp 2"
same_training llama_dp4 "$LLAMA" "--dp 4"
same_training llama_tp2pp2dp2 "$LLAMA" "$SP"

# under mpirun, the processes give the threads' losses (the MPI backend folds in the same order)
mpi_training() { # NAME PROCESSES MODEL_AND_LAYOUT
  if ! train "$1.mpi" "$3 --distributed-optimizer" $mpirun -np "$2"; then
    fail "dist_optim_mpi_$1" "$(tail -c 400 "$TMP/$1.mpi.log")"
  elif cmp -s "$TMP/$1.do.loss" "$TMP/$1.mpi.loss"; then pass "dist_optim_mpi_$1"
  else
    fail "dist_optim_mpi_$1" "not the threads' losses: $(first_rows "$1.do.loss" "$1.mpi.loss")"
  fi
}
if command -v mpirun >/dev/null; then
  mpi_training tiny_dp4 4 "$TINY --dp 4"
  mpi_training llama_tp2pp2dp2 8 "$LLAMA $SP"
else fail dist_optim_mpirun "mpirun not found; install openmpi-bin (make deps)"; fi

# ---- checkpoints: full logical tensors whichever way the state was kept --------------------------
# steps NAME: steps 4-6 of a run's output, without their times
steps() { grep '^step [4-6] |' "$TMP/$1.out" | sed 's/ | ms.*//'; }
run() { # NAME PROGRAM FLAGS...
  out=$1 program=$2; shift 2
  "$TMP/$program/train" --data "$TMP/text.bin" --decay-steps 6 "$@" >"$TMP/$out.out" 2>&1
}
# same_steps TEST A B: two runs' steps 4-6 alike
same_steps() {
  if [ -n "$(steps "$2")" ] && [ "$(steps "$2")" = "$(steps "$3")" ]; then pass "$1"
  else fail "$1" "$(steps "$2" | head -1) / $(steps "$3" | head -1)"; fi
}
small="$TINY --set layers=2"
$PLAIT build $small -o "$TMP/one" >/dev/null 2>&1
$PLAIT build $small --dp 4 -o "$TMP/dp4" >/dev/null 2>&1
$PLAIT build $small --dp 4 --distributed-optimizer -o "$TMP/dp4do" >/dev/null 2>&1
if run save_dp4 dp4 --steps 3 --save "$TMP/ck_dp4" &&
   run save_dp4do dp4do --steps 3 --save "$TMP/ck_dp4do" &&
   run save_one one --steps 3 --save "$TMP/ck_one"; then
  if cmp -s "$TMP/ck_dp4/model.safetensors" "$TMP/ck_dp4do/model.safetensors"; then
    pass dist_optim_checkpoint_same_file
  else fail dist_optim_checkpoint_same_file "the checkpoints saved with and without it differ"; fi
  run whole dp4do --steps 6 && run resumed dp4do --steps 6 --load "$TMP/ck_dp4do"
  same_steps dist_optim_resume_bit_for_bit whole resumed
  # saved with it at dp 4, at dp 1 without it: as the checkpoint of the same layout without it
  run one_from_do one --steps 6 --load "$TMP/ck_dp4do"
  run one_from_plain one --steps 6 --load "$TMP/ck_dp4"
  same_steps dist_optim_loads_at_dp1 one_from_do one_from_plain
  # saved at dp 1, with it at dp 4: as the same layout without it
  run do_from_one dp4do --steps 6 --load "$TMP/ck_one"
  run plain_from_one dp4 --steps 6 --load "$TMP/ck_one"
  same_steps dist_optim_loads_dp1_checkpoint do_from_one plain_from_one
else fail dist_optim_checkpoints "a run failed: $(tail -c 300 "$TMP/save_dp4do.out")"; fi

# ---- memory: the plan's bytes of the ranks, as the run reports them, fall by the optimizer's share
planned() { sed -n "s/.*the plan's memory of its ranks \([0-9.]*\) MB.*/\1/p" "$TMP/$1.out"; }
plain=$(planned save_dp4) sharded=$(planned save_dp4do)
params=$($PLAIT plan $small --dp 4 | sed -n 's/^parameters *\([0-9]*\).*/\1/p')
# four ranks, 8 bytes of Adam state per parameter, of which each keeps a quarter: 4*8*n*3/4 fewer
if [ -n "$plain" ] && [ -n "$sharded" ] &&
   awk -v a="$plain" -v b="$sharded" -v n="$params" \
     'BEGIN { d = a - b - 4 * 8 * n * 0.75 / 1e6; exit !(d < 0.02 && d > -0.02) }'; then
  pass "dist_optim_planned_memory ($plain MB -> $sharded MB for $params parameters)"
else
  fail dist_optim_planned_memory "planned $plain MB without, $sharded MB with, $params parameters"
fi
