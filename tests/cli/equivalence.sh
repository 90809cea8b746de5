# equivalence.sh: the layout changes speed and memory, never the numbers. A tiny GPT (with dropout) and
# a tiny Llama-style model trained 10 steps under many (tp, pp, vpp, dp, schedule, recomputation,
# gradients reduced during or after the backward) layouts, and with q, k, v (and gate, up) as separate
# GEMMs rather than one over their weights side by side (--separate-gemms), give each step's
# single-rank loss and gradient norm within 1e-5 relative (global-norm clipping counts every parameter
# once across TP, PP and DP; the Llama model's norms under TP or DP past step 1 are compared in double
# precision) and the single-rank final weights within 1e-4; two layouts do the same under mpirun; a
# checkpoint saved under one layout continues under another.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
DIFF=$PLAIT_ROOT/build/tools/ckpt_diff
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# a fixed English text (Debian's base-files), so that the project's own edits never change the data
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 /usr/share/common-licenses/MPL-2.0 > "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null || { fail data "plait data failed"; exit 0; }
DATA="--data $TMP/text.bin --lr 3e-3 --seed 7"
TRAIN="$DATA --steps 10"

GPT="models/tiny.lua --set layers=8 hidden=64 heads=4 ffn=256 seq=32 dropout=0.1 --mbs 2 --gbs 8"
LLAMA="models/llama.lua --set layers=8 hidden=64 heads=4 kv_heads=2 ffn=160 seq=32 vocab=256 --mbs 2 --gbs 8"

# run NAME MODEL LAYOUT [LAUNCHER...]: builds and trains; each step's loss in $TMP/NAME.loss, its gradient
# norm in $TMP/NAME.grad_norm, weights in $TMP/NAME/
run() {
  name=$1 model=$2 layout=$3; shift 3
  # shellcheck disable=SC2086
  $PLAIT build $model $layout -o "$TMP/$name.bin" >"$TMP/$name.log" 2>&1 &&
    timeout 300 "$@" "$TMP/$name.bin/train" $TRAIN --save "$TMP/$name" --log-json "$TMP/$name.json" >>"$TMP/$name.log" 2>&1 &&
    grep '"loss"' "$TMP/$name.json" | sed 's/.*"loss": \([^,]*\),.*/\1/' >"$TMP/$name.loss" &&
    grep '"loss"' "$TMP/$name.json" | sed -n 's/.*"grad_norm": \([^,}]*\).*/\1/p' >"$TMP/$name.grad_norm"
}

# near A B N: files A and B hold N numbers each, A's within 1e-5 relative of B's; prints the largest difference
near() {
  paste "$1" "$2" | awk -v n="$3" '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1);
    if (r > worst) worst = r } END { printf "%.2g", worst; exit !(NR == n && worst <= 1e-5) }'
}
# same_steps REF NAME [KIND]: each of the 10 steps' KIND (loss, the default, or grad_norm) within 1e-5 relative
same_steps() { near "$TMP/$1.${3:-loss}" "$TMP/$2.${3:-loss}" 10; }

check_layout() { # model-name model layout launcher...
  tag=$1 model=$2 layout=$3; shift 3
  name="$tag$(echo "$layout" | tr -d ' -' | tr -c 'a-z0-9\n' '_')${1:+_mpi}"
  if ! run "$name" "$model" "$layout" "$@"; then fail "equivalent_$name" "$(tail -c 500 "$TMP/$name.log")"; return; fi
  worst=$(same_steps "$tag" "$name") || { fail "equivalent_$name" "losses differ from one rank by $worst (relative)"; return; }
  # the gradient norm of every step; the Llama model's under TP or DP in single precision only its first
  # step's (the count alone: same weights, same batch), every step's in double precision below
  steps=10; case "$tag $layout" in "llama "*--tp*|"llama "*--dp*|"olmo "*--tp*|"olmo "*--dp*) steps=1 ;; esac
  head -n $steps "$TMP/$tag.grad_norm" >"$TMP/ref.grad_norm"; head -n $steps "$TMP/$name.grad_norm" >"$TMP/this.grad_norm"
  norms=$(near "$TMP/ref.grad_norm" "$TMP/this.grad_norm" $steps) ||
    { fail "equivalent_$name" "gradient norms differ from one rank by $norms (relative)"; return; }
  [ $steps = 10 ] || norms="$norms (step 1)"
  weights=$($DIFF "$TMP/$tag/model.safetensors" "$TMP/$name/model.safetensors" 1e-4) ||
    { fail "equivalent_$name" "final weights: $weights"; return; }
  pass "equivalent_$name (losses within $worst, gradient norms within $norms, weights: $weights)"
}

# every layout on the Llama model; the GPT model (learned positions, biases, GeLU) on the layouts
# that shard it differently, the schedules being the same code for both
LAYOUTS_GPT='"--tp 2" "--pp 2 --vpp 2" "--tp 2 --pp 2 --dp 2" "--tp 2 --pp 2 --vpp 2 --sequence-parallel"'
LAYOUTS_LLAMA='"--tp 2" "--pp 2 --schedule gpipe" "--pp 2 --schedule 1f1b" "--pp 2 --vpp 2" "--dp 2" \
  "--tp 2 --pp 2 --dp 2" "--tp 2 --pp 2 --vpp 2 --sequence-parallel" "--pp 4 --vpp 2" \
  "--pp 2 --recompute full" "--pp 2 --dp 2 --grad-reduce after" "--separate-gemms"'
for tag in gpt llama; do
  model=$GPT layouts=$LAYOUTS_GPT
  [ $tag = llama ] && model=$LLAMA layouts=$LAYOUTS_LLAMA
  run $tag "$model" "" || { fail "reference_$tag" "$(tail -c 500 "$TMP/$tag.log")"; continue; }
  eval "set -- $layouts"
  for layout in "$@"; do check_layout $tag "$model" "$layout"; done
done

# against_one_rank NAME MODEL LAYOUT...: trained at one rank, then under each layout, every step's loss
# within 1e-5 of the single rank's
against_one_rank() {
  ref_name=$1 ref_model=$2; shift 2
  if run "$ref_name" "$ref_model" ""; then
    for ref_layout in "$@"; do check_layout "$ref_name" "$ref_model" "$ref_layout"; done
  else
    fail "reference_$ref_name" "$(tail -c 500 "$TMP/$ref_name.log")"
  fi
}

# A parallel block (x + attention + MLP, tests/cli/models/custom_block.lua): its two partial sums are summed
# before one reduction, the biases added after it; the losses are the single rank's
against_one_rank parallel "tests/cli/models/custom_block.lua --set layers=4 --mbs 2 --gbs 8" \
  "--tp 2" "--tp 2 --pp 2 --sequence-parallel"

# Every elementwise primitive (tests/cli/models/primitives.lua: exact GeLU, min, max, comparisons, clamp,
# erf, sqrt, rsqrt, log, abs, softcapped logits) under tp 2 and pp 2
against_one_rank primitives "tests/cli/models/primitives.lua --set layers=4 --mbs 2 --gbs 8" "--tp 2" "--pp 2"

# Attention options written from primitives (tests/cli/models/attention_options.lua: norms per head,
# partial, interleaved and scaled rotary positions, a sliding window, capped scores, a scale of its own)
# under tp 2 with sequence parallelism and pp 2
against_one_rank options "tests/cli/models/attention_options.lua --set layers=4 --mbs 2 --gbs 8" \
  "--tp 2 --sequence-parallel" "--pp 2"

# Gemma-2's layers that differ (a sliding window on even layers only), capped scores and logits, under
# tp 2 with sequence parallelism and pp 2 (the layers' own options follow them to their pipeline stage)
against_one_rank gemma2 "models/gemma2.lua --set layers=4 hidden=64 heads=4 kv_heads=2 head_dim=32 ffn=96 seq=32 vocab=256 sliding_window=9 attn_softcap=5 logit_softcap=3 --mbs 2 --gbs 8" \
  "--tp 2 --sequence-parallel" "--pp 2"

# Split and concat (tests/cli/models/fused_qkv.lua: q, k, v from a fused projection laid out by head, an
# MLP joining two halves group by group) and ALiBi (each rank's heads their own slopes) under tp 2 with
# sequence parallelism and pp 2
against_one_rank fused "tests/cli/models/fused_qkv.lua --set layers=4 --mbs 2 --gbs 8" \
  "--tp 2 --sequence-parallel" "--pp 2"

# Frozen parameters (tests/cli/models/frozen.lua: positions, norms) under tp 2 with sequence parallelism,
# pp 2 and dp 2: left out of the gradient norm and the optimizer alike on every layout
against_one_rank frozen "tests/cli/models/frozen.lua --set layers=4 --mbs 2 --gbs 8" \
  "--tp 2 --sequence-parallel" "--pp 2" "--dp 2"

# Constants (tests/cli/models/constants.lua: fixed sinusoidal positions, a fixed channel scale sliced by
# tensor parallelism) under tp 2 with sequence parallelism and pp 2
against_one_rank constants "tests/cli/models/constants.lua --set layers=4 --mbs 2 --gbs 8" \
  "--tp 2 --sequence-parallel" "--pp 2"

# Gemma's norms without weight, times 1 + w, and its scaled embedding, under tp 2 and pp 2
against_one_rank gemma "models/gemma.lua --set layers=4 hidden=64 heads=4 kv_heads=2 head_dim=32 ffn=96 seq=32 vocab=256 --mbs 2 --gbs 8" \
  "--tp 2 --sequence-parallel" "--pp 2"

# OLMo-2's norms of the whole q and k (gathered under tp) and after the attention and the MLP (its gradient
# norms under tp compared at step 1, as the Llama model's: see below)
against_one_rank olmo "models/olmo2.lua --set layers=4 hidden=64 heads=4 kv_heads=2 ffn=96 seq=32 vocab=256 --mbs 2 --gbs 8" \
  "--tp 2" "--pp 2"

# The Llama model's gradient norm of every step, in double precision. In single precision, layouts that
# sum in another order (TP, DP) give norms that drift from one rank's beyond 1e-5 after a few steps
# (measured: 1e-4 to 8e-3, at a gradient spike) while the losses stay within 1e-5: an element whose
# gradient is a cancelling sum (~1e-8) differs by rounding, Adam's first step turns that into a
# full-size step either way, and the trajectories part. In double precision TP, PP, DP and sequence
# parallelism give the one-rank norms to every printed digit.
LLAMA4="models/llama.lua --set layers=4 hidden=64 heads=4 kv_heads=2 ffn=160 seq=32 vocab=256 --mbs 2 --gbs 8"
if run llama4 "$LLAMA4" "--double"; then
  for layout in "--tp 2 --pp 2 --dp 2 --double" "--tp 2 --pp 2 --vpp 2 --sequence-parallel --double"; do
    check_layout llama4 "$LLAMA4" "$layout"
  done
else
  fail reference_llama4 "$(tail -c 500 "$TMP/llama4.log")"
fi

# the same under MPI, one process per rank
for layout in "--tp 2" "--pp 2"; do
  check_layout gpt "$GPT" "$layout" mpirun -q -np 2 --oversubscribe
done

# a checkpoint saved at step 5 under (tp 2, pp 2) continues under (dp 2) with the one-rank losses and
# gradient norms
# shellcheck disable=SC2086
if $PLAIT build $GPT --tp 2 --pp 2 -o "$TMP/first" >/dev/null 2>&1 && $PLAIT build $GPT --dp 2 -o "$TMP/second" >/dev/null 2>&1 &&
   "$TMP/first/train" $DATA --steps 5 --decay-steps 10 --save "$TMP/half" >/dev/null 2>&1 &&
   "$TMP/second/train" $TRAIN --load "$TMP/half" --log-json "$TMP/resumed.json" >/dev/null 2>&1; then
  grep '"loss"' "$TMP/resumed.json" | sed 's/.*"loss": \([^,]*\),.*/\1/' >"$TMP/resumed.loss"
  grep '"loss"' "$TMP/resumed.json" | sed -n 's/.*"grad_norm": \([^,}]*\).*/\1/p' >"$TMP/resumed.grad_norm"
  tail -n 5 "$TMP/gpt.loss" >"$TMP/tail.loss"
  tail -n 5 "$TMP/gpt.grad_norm" >"$TMP/tail.grad_norm"
  if ! worst=$(near "$TMP/tail.loss" "$TMP/resumed.loss" 5); then
    fail checkpoint_across_layouts "the losses of steps 6-10 differ from one rank's by $worst"
  elif ! norms=$(near "$TMP/tail.grad_norm" "$TMP/resumed.grad_norm" 5); then
    fail checkpoint_across_layouts "the gradient norms of steps 6-10 differ from one rank's by $norms"
  else
    pass "checkpoint_across_layouts (losses within $worst, gradient norms within $norms)"
  fi
else
  fail checkpoint_across_layouts "a run failed"
fi
