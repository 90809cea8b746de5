# equivalence.sh: the layout changes speed and memory, never the numbers. A tiny GPT (with dropout) and
# a tiny Llama-style model trained 10 steps under many (tp, pp, vpp, dp, schedule, recomputation) layouts give each
# step's single-rank loss within 1e-5 relative and the single-rank final weights within 1e-4; two
# layouts do the same under mpirun; a checkpoint saved under one layout continues under another.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
DIFF=$PLAIT_ROOT/build/tools/ckpt_diff
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

cat README.md compiler/*.c > "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null || { fail data "plait data failed"; exit 0; }
TRAIN="--data $TMP/text.bin --steps 10 --lr 3e-3 --seed 7"

GPT="models/tiny.lua --set layers=8 hidden=64 heads=4 ffn=256 seq=32 dropout=0.1 --mbs 2 --gbs 8"
LLAMA="models/llama.lua --set layers=8 hidden=64 heads=4 kv_heads=2 ffn=160 seq=32 vocab=256 --mbs 2 --gbs 8"

# run NAME MODEL LAYOUT [LAUNCHER...]: builds and trains; losses in $TMP/NAME.loss, weights in $TMP/NAME/
run() {
  name=$1 model=$2 layout=$3; shift 3
  # shellcheck disable=SC2086
  $PLAIT build $model $layout -o "$TMP/$name.bin" >"$TMP/$name.log" 2>&1 &&
    timeout 300 "$@" "$TMP/$name.bin/train" $TRAIN --save "$TMP/$name" --log-json "$TMP/$name.json" >>"$TMP/$name.log" 2>&1 &&
    grep '"loss"' "$TMP/$name.json" | sed 's/.*"loss": \([^,]*\),.*/\1/' >"$TMP/$name.loss"
}

# same_losses REF NAME: each step's loss within 1e-5 relative
same_losses() {
  paste "$TMP/$1.loss" "$TMP/$2.loss" | awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1);
    if (r > worst) worst = r } END { printf "%.2g", worst; exit !(NR == 10 && worst <= 1e-5) }'
}

check_layout() { # model-name model layout launcher...
  tag=$1 model=$2 layout=$3; shift 3
  name="$tag$(echo "$layout" | tr -d ' -' | tr -c 'a-z0-9\n' '_')${1:+_mpi}"
  if ! run "$name" "$model" "$layout" "$@"; then fail "equivalent_$name" "$(tail -c 500 "$TMP/$name.log")"; return; fi
  worst=$(same_losses "$tag" "$name") || { fail "equivalent_$name" "losses differ from one rank by $worst (relative)"; return; }
  weights=$($DIFF "$TMP/$tag/model.safetensors" "$TMP/$name/model.safetensors" 1e-4) ||
    { fail "equivalent_$name" "final weights: $weights"; return; }
  pass "equivalent_$name (losses within $worst, weights: $weights)"
}

for tag in gpt llama; do
  model=$GPT; [ $tag = llama ] && model=$LLAMA
  run $tag "$model" "" || { fail "reference_$tag" "$(tail -c 500 "$TMP/$tag.log")"; continue; }
  for layout in "--tp 2" "--pp 2 --schedule gpipe" "--pp 2 --schedule 1f1b" "--pp 2 --vpp 2" "--dp 2" \
                "--tp 2 --pp 2 --dp 2" "--tp 2 --pp 2 --vpp 2 --sequence-parallel" "--pp 4 --vpp 2" \
                "--pp 2 --recompute full"; do
    check_layout $tag "$model" "$layout"
  done
done

# the same under MPI, one process per rank
for layout in "--tp 2" "--pp 2"; do
  check_layout gpt "$GPT" "$layout" mpirun -q -np 2 --oversubscribe
done

# a checkpoint saved at step 5 under (tp 2, pp 2) continues under (dp 2) with the one-rank losses
# shellcheck disable=SC2086
if $PLAIT build $GPT --tp 2 --pp 2 -o "$TMP/first" >/dev/null 2>&1 && $PLAIT build $GPT --dp 2 -o "$TMP/second" >/dev/null 2>&1 &&
   "$TMP/first/train" $TRAIN --steps 5 --decay-steps 10 --save "$TMP/half" >/dev/null 2>&1 &&
   "$TMP/second/train" $TRAIN --load "$TMP/half" --log-json "$TMP/resumed.json" >/dev/null 2>&1; then
  grep '"loss"' "$TMP/resumed.json" | sed 's/.*"loss": \([^,]*\),.*/\1/' >"$TMP/resumed.loss"
  tail -n 5 "$TMP/gpt.loss" >"$TMP/tail.loss"
  worst=$(paste "$TMP/tail.loss" "$TMP/resumed.loss" | awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / $1;
    if (r > worst) worst = r } END { printf "%.2g", worst; exit !(NR == 5 && worst <= 1e-5) }') &&
    pass "checkpoint_across_layouts (losses within $worst)" ||
    fail checkpoint_across_layouts "steps 6-10 differ from one rank's by $worst"
else
  fail checkpoint_across_layouts "a run failed"
fi
