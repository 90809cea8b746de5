# plan_golden.sh: plans of reference models and layouts, text and json, against tests/golden/.
# UPDATE_GOLDEN=1 rewrites the golden files (review the diff before committing them).
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

while read -r name args; do
  [ -z "$name" ] && continue
  for format in text json; do
    golden=tests/golden/$name.$format
    # shellcheck disable=SC2086
    if ! $PLAIT plan $args --format $format >"$TMP/plan" 2>"$TMP/err"; then
      fail "golden_$name.$format" "plan failed: $(cat "$TMP/err")"
    elif [ "${UPDATE_GOLDEN:-0}" = 1 ]; then
      cp "$TMP/plan" "$golden" && pass "golden_$name.$format (updated)"
    elif diff -u "$golden" "$TMP/plan" >"$TMP/diff"; then
      pass "golden_$name.$format"
    else
      fail "golden_$name.$format" "differs from $golden: $(head -c 1500 "$TMP/diff")"
    fi
  done
done <<'CASES'
gpt2 models/gpt2.lua
gpt_1.3b_tp2_pp2 models/gpt.lua --tp 2 --pp 2 --gbs 64
llama_7b_tp8_pp4_sp models/llama.lua --tp 8 --pp 4 --gbs 64 --sequence-parallel --recompute full
bert_large_tp2_dp4 models/bert.lua --tp 2 --dp 4 --gbs 32 --mbs 2
tiny_interleaved models/tiny.lua --pp 2 --vpp 2 --gbs 32 --mbs 4 --machine cpu
CASES

# The dot form: Graphviz renders it, and the block shows its two forward and two backward all-reduces.
if $PLAIT plan models/gpt.lua --set layers=2 hidden=256 heads=8 seq=128 --tp 2 --format dot >"$TMP/block.dot" &&
   dot -Tsvg "$TMP/block.dot" -o "$TMP/block.svg" 2>"$TMP/err"; then
  n=$(grep -c 'label="allreduce"\|label="bwd allreduce"' "$TMP/block.dot")
  [ "$n" = 4 ] && pass dot_renders || fail dot_renders "expected 4 all-reduce nodes in the block, found $n"
  drawn=$(grep -o '^  t[0-9]* \[' "$TMP/block.dot" | sort -u | wc -l)
  joined=$(grep -o 't[0-9]* -> n\|-> t[0-9]*;' "$TMP/block.dot" | grep -o 't[0-9]*' | sort -u | wc -l)
  [ "$drawn" = "$joined" ] && pass dot_no_orphans || fail dot_no_orphans "$drawn tensors drawn, $joined of them joined to a node"
else
  fail dot_renders "$(cat "$TMP/err")"
fi

# Layers that differ: the plan says which attention option varies and which layers take each value
want="layers      attention 0's window by layer: 4096 at 21 layers (0, 2, 4, …); none at 21 layers (1, 3, 5, …)"
if $PLAIT plan models/gemma2.lua >"$TMP/gemma2.plan" 2>"$TMP/err" && grep -qxF "$want" "$TMP/gemma2.plan"; then
  pass plan_layers_differ
else
  fail plan_layers_differ "$(grep '^layers' "$TMP/gemma2.plan") $(cat "$TMP/err")"
fi
