# kv_replicate.sh: key/value heads fewer than tp, each held by tp/kv_heads ranks. A tiny
# Llama-style model with one and with two key/value heads trains 10 steps at tp 2, 4 and 8, with
# sequence parallelism, and at tp 2, pp 2, dp 2, giving each step's one-rank loss within 1e-6
# relative; in double precision at tp 4 every step's gradient norm matches one rank's within 1e-9
# (the gradients of k and v summed over the ranks holding each head); a checkpoint saved at tp 4
# continues at tp 1, and one saved at tp 1 at tp 4, with the uninterrupted run's losses, and at
# tp 4 again bit for bit; the plan shows the copies; tp = 3 with 2 key/value heads is refused
# naming key/value heads; the same under mpirun where it exists.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

fixed_text "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null ||
  { fail data "plait data failed"; exit 0; }
DATA="--data $TMP/text.bin --lr 3e-3 --seed 7 --decay-steps 10"
SHAPE="layers=2 hidden=32 heads=8 ffn=64 seq=16 vocab=256"

# run NAME KV_HEADS LAYOUT [TRAIN FLAGS...]: builds and trains 10 steps; losses in NAME.loss,
# gradient norms in NAME.grad_norm. The launcher, if any, comes from $LAUNCH.
run() {
  name=$1 kv=$2 layout=$3; shift 3
  # shellcheck disable=SC2086
  { [ -x "$TMP/$name/train" ] ||
      $PLAIT build models/llama.lua --set $SHAPE kv_heads=$kv --mbs 2 --gbs 4 $layout \
        -o "$TMP/$name" >"$TMP/$name.log" 2>&1; } &&
    timeout 120 $LAUNCH "$TMP/$name/train" $DATA --steps 10 --log-json "$TMP/$name.json" "$@" \
      >>"$TMP/$name.log" 2>&1 &&
    grep '"loss"' "$TMP/$name.json" | sed 's/.*"loss": \([^,]*\),.*/\1/' >"$TMP/$name.loss" &&
    grep '"loss"' "$TMP/$name.json" | sed -n 's/.*"grad_norm": \([^,}]*\).*/\1/p' \
      >"$TMP/$name.grad_norm"
}

# near A B N LIMIT: files A and B hold N numbers each, A's within LIMIT relative of B's; prints the
# largest difference
near() {
  paste "$1" "$2" | awk -v n="$3" -v limit="$4" '{ d = $1 - $2; if (d < 0) d = -d;
    r = d / ($1 < 0 ? -$1 : $1); if (r > worst) worst = r }
    END { printf "%.2g", worst; exit !(NR == n && worst <= limit) }'
}

# check REF NAME KV_HEADS LAYOUT: trained under LAYOUT, every step's loss within 1e-6 of REF's
check() {
  ref=$1 name=$2; shift 2
  if ! run "$name" "$@"; then fail "kv_$name" "$(tail -c 400 "$TMP/$name.log")"; return; fi
  if worst=$(near "$TMP/$ref.loss" "$TMP/$name.loss" 10 1e-6); then
    pass "kv_$name (losses within $worst)"
  else
    fail "kv_$name" "losses differ from one rank's by $worst (relative)"
  fi
}

for kv in 1 2; do
  run one$kv $kv "" || { fail "kv_reference_$kv" "$(tail -c 400 "$TMP/one$kv.log")"; continue; }
  for tp in 2 4 8; do check one$kv "kv${kv}_tp$tp" $kv "--tp $tp"; done
done
check one1 kv1_tp4_sp 1 "--tp 4 --sequence-parallel"
check one2 kv2_tp2_pp2_dp2 2 "--tp 2 --pp 2 --dp 2"

# double precision: the gradient norm of every step, k's and v's gradients counted once
if run double1 1 "--double" && run double1_tp4 1 "--tp 4 --double"; then
  if norms=$(near "$TMP/double1.grad_norm" "$TMP/double1_tp4.grad_norm" 10 1e-9) &&
     losses=$(near "$TMP/double1.loss" "$TMP/double1_tp4.loss" 10 1e-9); then
    pass "kv_double_tp4 (gradient norms within $norms, losses within $losses)"
  else fail kv_double_tp4 "gradient norms differ by $norms, losses by $losses"; fi
else fail kv_double_tp4 "$(tail -c 400 "$TMP/double1_tp4.log")"; fi

# checkpoints stay whole tensors: saved at tp 4 (one key/value head on 4 ranks), continued at tp 1,
# and the other way round
resume() { # NAME PROGRAM CHECKPOINT: steps 6-10 from the checkpoint; their losses in NAME.loss
  timeout 120 "$TMP/$2/train" $DATA --steps 10 --load "$3" --log-json "$TMP/$1.json" \
    >"$TMP/$1.log" 2>&1 &&
    grep '"loss"' "$TMP/$1.json" | sed 's/.*"loss": \([^,]*\),.*/\1/' >"$TMP/$1.loss"
}
if timeout 120 "$TMP/kv1_tp4/train" $DATA --steps 5 --save "$TMP/ck_tp4" >/dev/null 2>&1 &&
   timeout 120 "$TMP/one1/train" $DATA --steps 5 --save "$TMP/ck_one" >/dev/null 2>&1 &&
   resume tp1_from_tp4 one1 "$TMP/ck_tp4" && resume tp4_from_tp1 kv1_tp4 "$TMP/ck_one" &&
   resume tp4_from_tp4 kv1_tp4 "$TMP/ck_tp4"; then
  tail -n 5 "$TMP/one1.loss" >"$TMP/one_tail.loss"
  tail -n 5 "$TMP/kv1_tp4.loss" >"$TMP/tp4_tail.loss"
  if ! cmp -s "$TMP/tp4_tail.loss" "$TMP/tp4_from_tp4.loss"; then
    fail kv_checkpoint "resumed at tp 4, steps 6-10 are not the uninterrupted run's bit for bit"
  elif ! a=$(near "$TMP/one_tail.loss" "$TMP/tp1_from_tp4.loss" 5 1e-6); then
    fail kv_checkpoint "saved at tp 4, continued at tp 1: losses differ by $a"
  elif ! b=$(near "$TMP/one_tail.loss" "$TMP/tp4_from_tp1.loss" 5 1e-6); then
    fail kv_checkpoint "saved at tp 1, continued at tp 4: losses differ by $b"
  else
    pass "kv_checkpoint (tp 4 to tp 1 within $a, tp 1 to tp 4 within $b, tp 4 to tp 4 bit for bit)"
  fi
else fail kv_checkpoint "a run failed: $(tail -c 300 "$TMP/tp1_from_tp4.log")"; fi

# the plan: the copies, their parameters and their gradients' all-reduce
$PLAIT plan models/llama.lua --set kv_heads=2 --tp 8 >"$TMP/plan.txt" 2>&1
held="each key/value head held by 4 of the 8 TP ranks: +786432 parameters a layer"
$PLAIT plan models/llama.lua --set kv_heads=2 --tp 8 --format json >"$TMP/plan.json" 2>&1
copies='"kv_head_copies": {"ranks_per_head": 4, "params_per_layer": 786432, '
if grep -q "^kv heads    $held" "$TMP/plan.txt" && grep -q "^  $copies" "$TMP/plan.json" &&
   ! $PLAIT plan models/llama.lua --set kv_heads=8 --tp 8 --format json | grep -q kv_head_copies
then pass kv_plan
else fail kv_plan "$(grep -e '^kv' -e '^traffic' "$TMP/plan.txt" | head -c 400)"; fi

expect_error kv_refused "key/value heads .* tp = 3 .*choose a tp that divides 2 or is a multiple" \
  $PLAIT plan models/llama.lua --set $SHAPE heads=6 hidden=48 kv_heads=2 --tp 3

if command -v mpirun >/dev/null 2>&1; then
  LAUNCH="mpirun -q -np 4 --oversubscribe" check one1 kv1_tp4_mpi 1 "--tp 4"
else
  echo "skip kv_mpi: no mpirun"
fi
