#!/bin/sh
# moe.sh: mixtures of experts on one rank: a small one's gradients against finite differences in
# double precision (top-2 renormalised, softmax at the top-2 without renormalising, top-1 of 8
# experts over fewer tokens than experts so that some receive none, top-3 with a shared expert); it
# trains in float (the loss falls) and two pipeline stages give one stage's losses; what is not
# supported yet, or an expert ffn that tp does not divide, is refused in one line.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

cat /usr/share/common-licenses/GPL-3 >"$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null ||
  { fail data "plait data failed"; exit 0; }
MOE=tests/cli/models/moe.lua

# the router starts large enough (the model's router_std) that no token's k-th and next experts'
# scores lie within a finite difference's step of a tie, where the choice and the loss's slope jump
gradcheck() { # name, --set values...
  name=$1; shift
  if $PLAIT build $MOE --double --mbs 2 --gbs 4 -o "$TMP/$name" --set "$@" >"$TMP/build.log" 2>&1 &&
     "$TMP/$name/train" --data "$TMP/text.bin" --gradcheck 150 >"$TMP/$name.out" 2>&1; then
    errors=$(grep -o 'largest relative error [^ ;]*' "$TMP/$name.out" | tr '\n' ' ')
    pass "gradcheck_moe_$name ($errors)"
  else
    fail "gradcheck_moe_$name" "$(tail -c 600 "$TMP/build.log") $(tail -c 600 "$TMP/$name.out")"
  fi
}
gradcheck top2 topk=2
gradcheck no_renormalize renormalize=false
gradcheck empty_experts experts=8 topk=1 seq=4
gradcheck shared_top3 shared_ffn=16 topk=3 router_std=3

# the experts' GEMMs of the empty_experts run go over the routed rows, 2·4 tokens × top-1 = 8, not
# tokens × experts: how many each expert takes is known only at run time
if grep -q 'k_grouped_gemm(GEMM_T, EXPERTS, .*ROUTED_TOP1' "$TMP/empty_experts/model.c" &&
   grep -q 'ROUTED_TOP1 = 8\b' "$TMP/empty_experts/model.c"; then
  pass moe_rows_are_tokens_times_k
else fail moe_rows_are_tokens_times_k "$(grep -m1 k_grouped_gemm "$TMP/empty_experts/model.c")"; fi

# float: the loss falls; two pipeline stages give the same losses
LAYOUT="--mbs 2 --gbs 4"
train() { # name, layout flags...
  name=$1; shift
  $PLAIT build $MOE "$@" -o "$TMP/$name" >"$TMP/build.log" 2>&1 &&
    "$TMP/$name/train" --data "$TMP/text.bin" --steps 20 --lr 3e-3 --seed 7 \
      --log-json "$TMP/$name.json" >"$TMP/$name.out" 2>&1 &&
    grep '"loss"' "$TMP/$name.json" | sed 's/.*"loss": \([^,]*\),.*/\1/' >"$TMP/$name.loss"
}
# shellcheck disable=SC2086
if train one $LAYOUT &&
   awk 'NR == 1 { first = $1 } { last = $1 } END { exit !(last < first - 1) }' "$TMP/one.loss"; then
  pass "moe_trains ($(head -n1 "$TMP/one.loss") -> $(tail -n1 "$TMP/one.loss"))"
else fail moe_trains "$(tail -c 600 "$TMP/build.log") $(tail -c 400 "$TMP/one.out")"; fi
# shellcheck disable=SC2086
if train pp2 $LAYOUT --pp 2 &&
   paste "$TMP/one.loss" "$TMP/pp2.loss" | awk '{ d = $1 - $2; if (d < 0) d = -d
     if (d > 1e-5 * $1) bad = 1 } END { exit bad || NR != 20 }'; then
  pass moe_pipeline_same_losses
else
  fail moe_pipeline_same_losses \
    "$(tail -c 600 "$TMP/build.log") $(paste "$TMP/one.loss" "$TMP/pp2.loss" | head -3)"
fi

expect_error moe_tp_ffn_not_dividing \
  'ffn = 25 is not divisible by tp = 2 \(tensor parallelism splits moe.experts.w1\)' \
  $PLAIT plan $MOE --tp 2 --set ffn=25
expect_error moe_cuda_refused \
  'topk: top-k and mixtures of experts have no CUDA kernels yet; build for the CPU' \
  $PLAIT build $MOE --backend cuda --emit-only -o "$TMP/cuda"
expect_error moe_topk_beyond_experts \
  'nn.moe: topk = 5 is more than the 4 experts; choose topk from 1 to 4' \
  $PLAIT plan $MOE --set topk=5
expect_error moe_topk_zero 'nn.moe: topk must be a whole number of at least 1, got 0' \
  $PLAIT plan $MOE --set topk=0
