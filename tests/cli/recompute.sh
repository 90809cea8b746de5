#!/bin/sh
# recompute.sh: --recompute full keeps each layer's input alone and re-runs one layer's forward just
# before its backward: the gradients are those of the model (finite differences in double precision;
# equivalence.sh trains it on two pipeline ranks against one), and the plan's activation memory falls on
# every rank. --recompute selective (below): the same losses as none, and the paper's Table 2 beside
# plait's.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
# a fixed English text (Debian's base-files), so that the project's own edits never change the data
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 /usr/share/common-licenses/MPL-2.0 > "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null || { fail recompute_data "plait data failed"; exit 0; }

SMALL="layers=3 hidden=32 heads=2 seq=16 vocab=256 ffn=64 dropout=0.1"
# shellcheck disable=SC2086
if $PLAIT build models/gpt.lua --set $SMALL --mbs 2 --gbs 4 --recompute full --double -o "$TMP/gpt" >"$TMP/build.log" 2>&1 &&
   "$TMP/gpt/train" --data "$TMP/text.bin" --gradcheck 60 >"$TMP/gpt.out" 2>&1; then
  pass "recompute_gradcheck ($(grep -o 'largest relative error [^ ;]*' "$TMP/gpt.out" | tr '\n' ' '))"
else
  fail recompute_gradcheck "$(tail -c 600 "$TMP/build.log") $(tail -c 600 "$TMP/gpt.out")"
fi

# activation bytes per pipeline rank, without and with recomputation
activations() { # flags...: one line of bytes per rank
  # shellcheck disable=SC2068
  $PLAIT plan models/gpt2.lua --machine cpu --format json $@ |
    python3 -c 'import json, sys; print(*[r["memory"]["activations"] for r in json.load(sys.stdin)["ranks"]])'
}
for layout in "--gbs 4" "--pp 4 --gbs 16"; do
  name=$(echo "$layout" | tr -d ' -')
  without=$(activations $layout) with=$(activations $layout --recompute full)
  if [ -n "$without" ] && echo "$without" "|" "$with" |
     awk '{ n = (NF - 1) / 2; for (i = 1; i <= n; i++) if (!($(i + n + 1) < $i)) bad = 1 } END { exit bad || n < 1 }'; then
    pass "recompute_saves_memory_$name (bytes per rank: $without -> $with)"
  else
    fail "recompute_saves_memory_$name" "activation bytes per rank without: '$without', with: '$with'"
  fi
done

# --recompute selective re-runs the memory-bound values (norms, GeLU, bias adds, dropout masks drawn
# again from their keys) inside the backward: the gradients are the model's, every step's loss is
# --recompute none's (the same kernels in the same order: bit for bit), tp 2 · pp 2 trains as one
# rank does, and the plan keeps less than without recomputation and more than with full.
# shellcheck disable=SC2086
if $PLAIT build models/gpt.lua --set $SMALL --mbs 2 --gbs 4 --recompute selective --double \
     -o "$TMP/sel" >"$TMP/sel.log" 2>&1 &&
   "$TMP/sel/train" --data "$TMP/text.bin" --gradcheck 60 >"$TMP/sel.out" 2>&1; then
  errors=$(grep -o 'largest relative error [^ ;]*' "$TMP/sel.out" | tr '\n' ' ')
  pass "selective_gradcheck ($errors)"
else
  fail selective_gradcheck "$(tail -c 600 "$TMP/sel.log") $(tail -c 600 "$TMP/sel.out")"
fi

TINY="models/tiny.lua --set layers=4 hidden=64 heads=4 ffn=256 seq=32 dropout=0.1 --mbs 2 --gbs 8"
# losses NAME LAYOUT...: 10 steps' losses, one a line, in $TMP/NAME.loss
losses() {
  name=$1; shift
  # shellcheck disable=SC2086,SC2068
  $PLAIT build $TINY $@ -o "$TMP/$name" >"$TMP/$name.log" 2>&1 &&
    timeout 300 "$TMP/$name/train" --data "$TMP/text.bin" --lr 3e-3 --seed 7 --steps 10 \
      --log-json "$TMP/$name.json" >>"$TMP/$name.log" 2>&1 &&
    grep '"loss"' "$TMP/$name.json" | sed 's/.*"loss": \([^,]*\),.*/\1/' >"$TMP/$name.loss"
}
# worst_relative A B LIMIT: the largest relative difference of two files of 10 numbers; fails above
# LIMIT
worst_relative() {
  paste "$1" "$2" | awk -v limit="$3" '{ d = $1 - $2; if (d < 0) d = -d;
    r = d / ($1 < 0 ? -$1 : $1);
    if (r > worst) worst = r } END { printf "%.2g", worst; exit !(NR == 10 && worst <= limit) }'
}
if losses none "" && losses selective --recompute selective &&
   losses selective_tp2pp2 --recompute selective --tp 2 --pp 2; then
  if cmp -s "$TMP/none.loss" "$TMP/selective.loss"; then
    pass "selective_same_losses (10 steps bit for bit as --recompute none)"
  else
    fail selective_same_losses "$(paste "$TMP/none.loss" "$TMP/selective.loss" | head -3)"
  fi
  if worst=$(worst_relative "$TMP/none.loss" "$TMP/selective_tp2pp2.loss" 1e-5); then
    pass "selective_tp2_pp2_as_one_rank (losses within $worst)"
  else fail selective_tp2_pp2_as_one_rank "losses differ from one rank by $worst"; fi
else
  fail selective_losses "$(tail -c 400 "$TMP/none.log") $(tail -c 400 "$TMP/selective.log")
    $(tail -c 400 "$TMP/selective_tp2pp2.log")"
fi

for layout in "--gbs 4" "--tp 2 --pp 2 --gbs 8 --sequence-parallel"; do
  name=$(echo "$layout" | tr -d ' -')
  none=$(activations $layout) sel=$(activations $layout --recompute selective)
  full=$(activations $layout --recompute full)
  if [ -n "$none" ] && echo "$none" "|" "$sel" "|" "$full" |
     awk '{ n = (NF - 2) / 3; for (i = 1; i <= n; i++)
              if (!($(i + n + 1) < $i && $(i + 2 * n + 2) < $(i + n + 1))) bad = 1 }
          END { exit bad || n < 1 }'; then
    pass "selective_between_none_and_full_$name (bytes per rank: $none > $sel > $full)"
  else
    fail "selective_between_none_and_full_$name" "none '$none', selective '$sel', full '$full'"
  fi
done

# selective re-runs no collective: its TP traffic is none's (full's re-run forward doubles it)
tp_bytes() {
  # shellcheck disable=SC2086
  $PLAIT plan models/gpt.lua --tp 2 --pp 2 --gbs 8 --sequence-parallel --recompute "$1" \
    --format json | sed -n 's/.*"per_iteration": {"tp": \([0-9]*\),.*/\1/p'
}
tp_none=$(tp_bytes none) tp_sel=$(tp_bytes selective) tp_full=$(tp_bytes full)
if [ -n "$tp_none" ] && [ "$tp_none" = "$tp_sel" ] && [ "$tp_full" -gt "$tp_none" ]; then
  pass "selective_tp_traffic_as_none ($tp_none bytes; full $tp_full)"
else fail selective_tp_traffic_as_none "none '$tp_none', selective '$tp_sel', full '$tp_full'"; fi

# tune offers selective recomputation where it wins and says why: Table 1's 145.6B GPT over 1536
# A100s, where keeping everything does not fit the layouts that win
$PLAIT tune models/gpt.lua --set layers=96 hidden=12288 heads=96 dropout=0.1 --gpus 1536 \
  --gbs 2304 --machine a100 >"$TMP/tune145" 2>&1
why='^ 1 recomputes selectively: with --recompute none the same layout needs at least [0-9.]* GB, '
if grep -q "^ 1 .* selective " "$TMP/tune145" &&
   grep -q "${why}more than the 80.00 GB" "$TMP/tune145"; then
  pass "selective_tune_says_why ($(grep "^ 1 recomputes" "$TMP/tune145" | cut -c 4-))"
else fail selective_tune_says_why "$(head -c 1200 "$TMP/tune145")"; fi
$PLAIT tune models/gpt.lua --set layers=96 hidden=12288 heads=96 dropout=0.1 --gpus 1536 \
  --gbs 2304 --machine a100 --format json >"$TMP/tune145.json" 2>&1
if grep -q '"with_recompute_none": {"planned": [a-z]*, "fits": false' "$TMP/tune145.json"; then
  pass selective_tune_json_says_why
else
  fail selective_tune_json_says_why "$(grep -m1 -o '"with_recompute_none[^}]*' "$TMP/tune145.json")"
fi

# --print recompute lists what the block keeps and recomputes and the work the recomputation adds
if $PLAIT plan models/gpt2.lua --recompute selective --print recompute >"$TMP/print" 2>&1 &&
   grep -q '^  recomputed .* norm ' "$TMP/print" && grep -q '^  kept .* matmul ' "$TMP/print" &&
   grep -q '^  kept .* attention ' "$TMP/print" &&
   ! grep -q '^  recomputed .* \(matmul\|attention\|allgather\)' "$TMP/print" &&
   grep -q 'recomputed [1-9][0-9]* bytes (saved); the recomputation adds [1-9]' "$TMP/print"; then
  pass "selective_print_recompute"
else
  fail selective_print_recompute "$(head -c 800 "$TMP/print")"
fi

# the choice is priced on the machine: on the cpu file (tanh at 1e8/s) GPT-2 124M keeps the GeLU
# output (its re-run priced beside it) and re-runs the norms; on an A100 (T=1024, B=1) it re-runs
# the GeLU; each stage's recomputation within 2% of its time
choice() { # machine flags...: "kept" or "recomputed" for the GeLU output (t19), the largest share
  machine=$1; shift
  # shellcheck disable=SC2068
  $PLAIT plan models/gpt2.lua --machine "$machine" $@ --recompute selective \
    --print recompute >"$TMP/choice_$machine" 2>&1 || return 1
  gelu=$(sed -n 's/^  \(kept\|recomputed\) *t19 .* ew .*/\1/p' "$TMP/choice_$machine")
  share=$(sed -n "s/.*, \([0-9.]*\)% of the stage's .*/\1/p" "$TMP/choice_$machine" |
    sort -g | tail -n 1)
  echo "$gelu $share"
}
cpu=$(choice cpu --set seq=512 --mbs 4) a100=$(choice a100)
if [ "${cpu% *}" = kept ] && [ "${a100% *}" = recomputed ] &&
   grep -q '^  kept  *t19 .*; recomputing it would add [0-9.]* ms ([3-9]\.[0-9]*% of the stage)' \
     "$TMP/choice_cpu" && grep -q '^  recomputed t0 .* norm ' "$TMP/choice_cpu" &&
   awk -v a="${cpu#* }" -v b="${a100#* }" 'BEGIN { exit !(a > 0 && a <= 2 && b > 0 && b <= 2) }'
then
  pass "selective_priced_on_the_machine (GeLU output on cpu ${cpu% *}, on a100 ${a100% *}; \
largest shares ${cpu#* }% and ${a100#* }%)"
else
  fail selective_priced_on_the_machine "cpu '$cpu' a100 '$a100' $(head -c 1500 "$TMP/choice_cpu")"
fi

# tune searches selective beside none and full, and keeps to it when pinned
TUNE="models/gpt2.lua --gpus 4 --gbs 16"
# shellcheck disable=SC2086
if $PLAIT tune $TUNE >"$TMP/tune" 2>&1 && grep -q ' selective ' "$TMP/tune" &&
   grep -q ' none ' "$TMP/tune" && $PLAIT tune $TUNE --recompute selective >"$TMP/pinned" 2>&1 &&
   ! grep -E '^ *[0-9]+ ' "$TMP/pinned" | grep -q -e ' none ' -e ' full '; then
  pass "selective_tuned"
else
  fail selective_tuned "$(head -c 600 "$TMP/tune") $(head -c 600 "$TMP/pinned")"
fi

# Korthikanti et al. 2022, Table 2: activation bytes per layer per microbatch (16-bit
# activations) of the 22B GPT (h 6144, a 64, s 2048, b 1, t 8), in units of sbh, beside plait's
# (one TP rank's share of a layer in the slot). plait's differ by terms docs/plan.md itemises; each
# row's plait value must be the paper's formula with those terms, within 1% (the attention's
# log-sum-exp and the norms' statistics, which neither side counts, make the rest):
#   scores  5as/(ht): the fused attention keeps no s² scores, softmax or score-dropout mask
#   masks   2/t' (t' = t with sequence parallelism, else 1): dropout masks are drawn again
#   gather  +3.5: with sequence parallelism the two all-gathered norm outputs are kept whole (2·2),
#           not the paper's sharded norm outputs (2·2/t)
#   more    -5 (tp) / -1 (tp + sp): selective also re-runs both norms' outputs (2 + 2) and the GeLU
#           output (8/t); under sequence parallelism the gathered norm outputs stay kept
#   full    2/t with sequence parallelism: the layer input kept is the sharded residual stream
PAPER_GPT="models/gpt.lua --set layers=48 hidden=6144 heads=64 seq=2048 ffn=24576 dropout=0.1"
PAPER_GPT="$PAPER_GPT --tp 8"
sbh_per_layer() { # flags...: one layer's kept bytes over sbh
  # shellcheck disable=SC2068,SC2086
  $PLAIT plan $PAPER_GPT $@ --print memory |
    sed -n 's/^chunk 0: .*layers \([0-9]*\), head \([0-9]*\).*/\1 \2/p' |
    awk '{ printf "%.4f", ($2 - $1) / 48 * 2 / (2048 * 6144) }'
}
for row in "none||26.3333|-13.3333 - 2" "selective||13|-2 - 5" "full||2|0" \
           "none|--sequence-parallel|17.5833|-13.3333 - 0.25 + 3.5" \
           "selective|--sequence-parallel|4.25|-0.25 + 3.5 - 1" \
           "full|--sequence-parallel|2|-1.75"; do
  recompute=${row%%|*} rest=${row#*|}; sp=${rest%%|*} rest=${rest#*|}
  paper=${rest%%|*} terms=${rest#*|}
  # shellcheck disable=SC2086
  plait=$(sbh_per_layer --recompute $recompute $sp)
  name="paper_table2_${recompute}${sp:+_sp}"
  if python3 -c "import sys; p, e = $plait, $paper + ($terms); sys.exit(abs(p - e) > e / 100)"; then
    pass "$name (paper ${paper} sbh; plait ${plait} sbh = paper ${terms})"
  else
    fail "$name" "plait keeps ${plait:-nothing} sbh; expected the paper's ${paper} ${terms}"
  fi
done

# under sequence parallelism an all-gathered norm output may be gathered again in the backward, as
# Megatron-LM does, where the machine prices it within the budget: on a machine of fast links the
# tiny model re-gathers (both a layer, the head's too), trains bit for bit as none, and the plan's
# TP bytes grow; on the A100 the 22B GPT's re-gathers (2.2% of a layer each) are priced and kept
sed 's/link_bandwidth = 5e9/link_bandwidth = 5e13/; s/name = "cpu"/name = "cpu-fast-links"/' \
  lib/plait/machines/cpu.lua >"$TMP/fast.lua"
SP="--tp 2 --sequence-parallel --machine $TMP/fast.lua"
# shellcheck disable=SC2086
$PLAIT plan $TINY $SP --recompute selective --print recompute >"$TMP/sp_print" 2>&1
sp_bytes() { # recompute: the plan's TP bytes an iteration
  # shellcheck disable=SC2086
  $PLAIT plan $TINY $SP --recompute "$1" --format json |
    sed -n 's/.*"per_iteration": {"tp": \([0-9]*\),.*/\1/p'
}
# shellcheck disable=SC2086
if [ "$(grep -c "^  recomputed .*allgather " "$TMP/sp_print")" -ge 2 ] &&
   losses sp_none $SP && losses sp_selective $SP --recompute selective &&
   cmp -s "$TMP/sp_none.loss" "$TMP/sp_selective.loss" &&
   [ "$(sp_bytes selective)" -gt "$(sp_bytes none)" ] &&
   $PLAIT plan $PAPER_GPT --sequence-parallel --recompute selective --print recompute |
     grep -q '^  kept .*allgather .*; recomputing it would add'; then
  pass "selective_regathers (all-gathers re-run, losses bit for bit, TP bytes $(sp_bytes none) \
-> $(sp_bytes selective))"
else
  fail selective_regathers "$(head -c 1500 "$TMP/sp_print") $(tail -c 300 "$TMP/sp_selective.log")"
fi
