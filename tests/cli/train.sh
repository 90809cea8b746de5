# train.sh: generated CPU programs train: gradients against finite differences in double precision (GPT,
# Llama-style and BERT-style), the loss falls, a resumed run repeats an uninterrupted one bit for bit.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

# a token file of bytes from the project's own text
cat README.md compiler/*.c > "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null || { fail data "plait data failed"; exit 0; }

SMALL="layers=2 hidden=32 heads=2 seq=16 vocab=256"
gradcheck() { # name, model, --set values..., then -- and layout flags
  name=$1 model=$2; shift 2
  if $PLAIT build "$model" --double -o "$TMP/$name" "$@" >"$TMP/build.log" 2>&1 &&
     "$TMP/$name/train" --data "$TMP/text.bin" --gradcheck 120 >"$TMP/$name.out" 2>&1; then
    pass "gradcheck_$name ($(grep -o 'largest relative error [^ ;]*' "$TMP/$name.out" | tr '\n' ' '))"
  else
    fail "gradcheck_$name" "$(tail -c 600 "$TMP/build.log") $(tail -c 600 "$TMP/$name.out")"
  fi
}
gradcheck gpt models/gpt.lua --set $SMALL ffn=64 dropout=0.1 --mbs 2 --gbs 4
gradcheck llama models/llama.lua --set $SMALL heads=4 kv_heads=2 ffn=48 --mbs 2 --gbs 4
gradcheck bert models/bert.lua --set $SMALL ffn=64 --mbs 2 --gbs 4

# tiny: the loss falls over 30 steps
if $PLAIT build models/tiny.lua -o "$TMP/tiny" >"$TMP/build.log" 2>&1 &&
   "$TMP/tiny/train" --data "$TMP/text.bin" --steps 30 --lr 3e-3 >"$TMP/tiny.out" 2>&1; then
  first=$(grep '^step 1 |' "$TMP/tiny.out" | sed 's/.*loss \([0-9.]*\).*/\1/')
  last=$(grep '^step 30 |' "$TMP/tiny.out" | sed 's/.*loss \([0-9.]*\).*/\1/')
  if awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5.3 && a < 5.8 && b < a - 1.0) }'; then
    pass "tiny_loss_falls ($first -> $last)"
  else
    fail tiny_loss_falls "loss $first -> $last"
  fi
else
  fail tiny_loss_falls "$(tail -c 800 "$TMP/build.log") $(tail -c 800 "$TMP/tiny.out")"
fi

# resuming from a checkpoint gives the losses of an uninterrupted run, bit for bit
T=$TMP/tiny/train
if $T --data "$TMP/text.bin" --steps 8 --lr 3e-3 >"$TMP/full.out" 2>&1 &&
   $T --data "$TMP/text.bin" --steps 4 --decay-steps 8 --lr 3e-3 --save "$TMP/ckpt" >/dev/null 2>&1 &&
   $T --data "$TMP/text.bin" --steps 8 --lr 3e-3 --load "$TMP/ckpt" >"$TMP/resumed.out" 2>&1; then
  grep '^step [5-8] |' "$TMP/full.out" | sed 's/ | ms.*//' >"$TMP/a"
  grep '^step [5-8] |' "$TMP/resumed.out" | sed 's/ | ms.*//' >"$TMP/b"
  if [ -s "$TMP/a" ] && cmp -s "$TMP/a" "$TMP/b"; then pass resume_bit_for_bit
  else fail resume_bit_for_bit "$(diff "$TMP/a" "$TMP/b" | head -5)"; fi
else
  fail resume_bit_for_bit "a run failed: $(tail -c 400 "$TMP/resumed.out")"
fi

# the program's own account of its memory is the plan's: Σ over the ranks of its threads of memory_bytes
LAYOUT="--set layers=4 --tp 2 --pp 2 --mbs 2 --gbs 4"
# shellcheck disable=SC2086
if $PLAIT build models/tiny.lua $LAYOUT -o "$TMP/tiny22" >"$TMP/build.log" 2>&1 &&
   "$TMP/tiny22/train" --data "$TMP/text.bin" --steps 1 --log-json "$TMP/tiny22.json" >"$TMP/tiny22.out" 2>&1; then
  # shellcheck disable=SC2086
  plan=$($PLAIT plan models/tiny.lua $LAYOUT --machine cpu --format json | grep -o '"memory_bytes": [0-9]*' |
         awk '{ s += $2 } END { printf "%.0f", 2 * s }')  # each pipeline rank's bytes on both of its TP ranks
  own=$(grep -o '"planned_bytes": [0-9]*' "$TMP/tiny22.json" | awk '{ print $2 }')
  if [ -n "$own" ] && [ "$own" = "$plan" ] && grep -q "^peak resident memory .*the plan's memory of its ranks" "$TMP/tiny22.out"; then
    pass "planned_bytes_match_plan ($own bytes)"
  else
    fail planned_bytes_match_plan "program $own, plan $plan: $(tail -n 2 "$TMP/tiny22.out")"
  fi
  # the memory line in plait plan's units: decimal, two decimals, B KB MB GB
  in_units() { awk -v b="$1" 'BEGIN { split("KB MB GB TB PB", u, " "); n = 0
    while (b >= 1000 && n < 5) { b /= 1000; n++ }
    if (n) printf "%.2f %s", b, u[n]; else printf "%.0f B", b }'; }
  resident=$(grep -o '"peak_resident_bytes": [0-9]*' "$TMP/tiny22.json" | awk '{ print $2 }')
  line="peak resident memory $(in_units "$resident") (this process); the plan's memory of its ranks $(in_units "$own") (CPU)"
  if grep -q -F -x "$line" "$TMP/tiny22.out"; then pass "memory_in_plan_units ($(in_units "$own"))"
  else fail memory_in_plan_units "wanted '$line', got '$(grep '^peak resident' "$TMP/tiny22.out")'"; fi
else
  fail planned_bytes_match_plan "$(tail -c 800 "$TMP/build.log") $(tail -c 800 "$TMP/tiny22.out")"
fi
