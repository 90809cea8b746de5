# train.sh: generated CPU programs train: gradients against finite differences in double precision (GPT,
# Llama-style and BERT-style), the loss falls, the step, progress, validation, JSON, sample and memory
# lines say what they should, a resumed run repeats an uninterrupted one bit for bit.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

# a token file of bytes from the project's own text
# a fixed English text (Debian's base-files), so that the project's own edits never change the data
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 /usr/share/common-licenses/MPL-2.0 > "$TMP/text.txt"
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
gradcheck primitives tests/cli/models/primitives.lua --mbs 2 --gbs 4
gradcheck attention_options tests/cli/models/attention_options.lua --mbs 2 --gbs 4
gradcheck fused_qkv tests/cli/models/fused_qkv.lua --mbs 2 --gbs 4
gradcheck frozen tests/cli/models/frozen.lua --mbs 2 --gbs 4
gradcheck constants tests/cli/models/constants.lua --mbs 2 --gbs 4
# the language's options (baseline.sh runs this file again on the baseline CPU path: these check the
# compiler, not the kernels, so they run once)
if [ "${PLAIT_CPU:-}" != baseline ]; then
gradcheck norm_no_bias tests/cli/models/norm_no_bias.lua --mbs 2 --gbs 4
# two concats with the same first part and results of different widths: the second result's dim
# is named after all its parts (half_ffn+quarter) rather than collide with the first's (half_ffn+)
gradcheck concat_collide tests/cli/models/concat_collide.lua --mbs 2 --gbs 4
# rotary positions given as a count turn exactly 30 of each head's 44 dims (a fraction gives 29)
gradcheck rotary_count tests/cli/models/rotary_count.lua --mbs 2 --gbs 4
ROTARY=$(grep -rho 'head_dim = [0-9]*, .rotary = [0-9]*' "$TMP/rotary_count" | sort -u)
if [ "$ROTARY" = "head_dim = 44, .rotary = 30" ]; then pass rotary_count_exact
else fail rotary_count_exact "$ROTARY"; fi
# logits multiplied by config.logit_scale: 0 gives every token the same odds, a loss of ln 256
gradcheck logit_scale tests/cli/models/logit_scale.lua --mbs 2 --gbs 4
if $PLAIT build tests/cli/models/logit_scale.lua --set logit_scale=0 -o "$TMP/scale0" \
     >/dev/null 2>&1 &&
   "$TMP/scale0/train" --eval "$TMP/text.bin" >"$TMP/scale0.out" 2>&1 &&
   grep -q '| loss 5.545177 |' "$TMP/scale0.out"; then pass logit_scale_zero_is_uniform
else fail logit_scale_zero_is_uniform "$(grep loss "$TMP/scale0.out")"; fi
# layer norms without bias hold a weight alone; ln_1 keeps the bias its options ask for
if "$TMP/norm_no_bias/train" --data "$TMP/text.bin" --steps 1 --save "$TMP/nnb" >/dev/null 2>&1 &&
   python3 tests/tools/st.py list "$TMP/nnb/model.safetensors" | grep -v '^adam\.' \
     >"$TMP/nnb.list" &&
   [ "$(grep -c 'ln_1.bias F64 \[32\]' "$TMP/nnb.list")" = 2 ] &&
   [ "$(grep -c 'ln_2.weight F64 \[8\]' "$TMP/nnb.list")" = 2 ] &&
   grep -q '^ln_f.weight ' "$TMP/nnb.list" && ! grep -q 'ln_2.bias\|ln_f.bias' "$TMP/nnb.list"; then
  pass layer_norm_without_bias
else
  fail layer_norm_without_bias "$(tr '\n' ' ' <"$TMP/nnb.list")"
fi
fi

# frozen parameters stay as they were over training; the others move
if $PLAIT build tests/cli/models/frozen.lua --mbs 2 --gbs 4 -o "$TMP/frozen" >"$TMP/build.log" 2>&1 &&
   "$TMP/frozen/train" --data "$TMP/text.bin" --steps 1 --decay-steps 10 --save "$TMP/frozen1" >"$TMP/frozen.out" 2>&1 &&
   "$TMP/frozen/train" --data "$TMP/text.bin" --load "$TMP/frozen1" --steps 4 --decay-steps 10 --save "$TMP/frozen4" \
     >>"$TMP/frozen.out" 2>&1; then
  moved=""
  for name in wpe layers.0.ln_1.weight layers.1.ln_1.bias ln_f.weight ln_f.bias wte; do
    a=$(python3 tests/tools/st.py digest "$TMP/frozen1/model.safetensors" "$name")
    b=$(python3 tests/tools/st.py digest "$TMP/frozen4/model.safetensors" "$name")
    [ "$a" = "$b" ] || moved="$moved $name"
  done
  if [ "$moved" = " ln_f.bias wte" ]; then pass "frozen_parameters_stay (moved:$moved)"
  else fail frozen_parameters_stay "moved over three steps:$moved (want ln_f.bias and wte only)"; fi
else
  fail frozen_parameters_stay "$(tail -c 600 "$TMP/build.log") $(tail -c 600 "$TMP/frozen.out")"
fi
gradcheck gemma models/gemma.lua --set $SMALL heads=4 kv_heads=2 head_dim=16 ffn=48 --mbs 2 --gbs 4
# Gemma-2's norms after the attention and the MLP see small vectors at init_std 0.02; at 0.1 finite differences stay accurate
gradcheck gemma2 models/gemma2.lua --set $SMALL layers=3 heads=4 kv_heads=2 head_dim=16 ffn=48 sliding_window=5 \
  query_pre_attn_scalar=24 attn_softcap=2 logit_softcap=4 init_std=0.1 --mbs 2 --gbs 4

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

# every step line has its format, and MFU is a fraction of the machine's peak GEMM rate: above 0, at most 100
step_re='^step [0-9]+ \| loss [0-9]+\.[0-9]{6} \| lr [0-9]\.[0-9]{3}e[-+][0-9]{2} \| grad-norm [0-9]+\.[0-9]{4} \| ms [0-9]+\.[0-9] \| tok/s [0-9]+ \| MFU [0-9]+\.[0-9]%$'
lines=$(grep -c '^step [0-9]* |' "$TMP/tiny.out")
odd=$(grep '^step [0-9]* | loss' "$TMP/tiny.out" | grep -v -E "$step_re" | head -n 1)
mfu=$(grep '^step [0-9]* | loss' "$TMP/tiny.out" | sed 's/.*MFU \([0-9.]*\)%/\1/' | sort -g | sed -n '1p;$p' | tr '\n' ' ')
if [ "$lines" = 30 ] && [ -z "$odd" ] && echo "$mfu" | awk '{ exit !($1 > 0 && $2 <= 100) }'; then
  pass "step_line_format (MFU from $(echo "$mfu" | sed 's/ $//; s/ /% to /')%)"
else
  fail step_line_format "$lines step lines; MFU from $mfu; first line off the format: '$odd'"
fi

# a long run of a small tiny with validation, JSON lines and a sample
if $PLAIT build models/tiny.lua --set layers=1 hidden=32 heads=2 ffn=64 seq=16 -o "$TMP/small" >"$TMP/build.log" 2>&1 &&
   "$TMP/small/train" --data "$TMP/text.bin" --steps 50 --eval-every 25 --eval-batches 2 --log-json "$TMP/small.json" \
     --sample 40 >"$TMP/small.out" 2>&1; then
  # a progress line every tenth of the way, none at the end
  grep '^progress ' "$TMP/small.out" | sed 's/about [0-9][0-9]* s left$/about S s left/' >"$TMP/progress"
  seq 5 5 45 | awk '{ printf "progress %d/50 steps (%d%%), about S s left\n", $1, 2 * $1 }' >"$TMP/progress.want"
  if cmp -s "$TMP/progress.want" "$TMP/progress"; then
    pass progress_lines
  else
    fail progress_lines "$(tr '\n' ';' <"$TMP/progress")"
  fi
  # --eval-every: a validation line at steps 25 and 50, the same loss in the JSON's val_loss
  printed=$(sed -n 's/^step \([0-9]*\) | validation loss \([0-9.]*\)$/\1 \2/p' "$TMP/small.out" | tr '\n' ' ')
  recorded=$(sed -n 's/^{"step": \([0-9]*\), "val_loss": \([0-9.e+-]*\)}$/\1 \2/p' "$TMP/small.json" |
             awk '{ printf "%d %.6f ", $1, $2 }')
  if [ "$printed" = "$recorded" ] && echo "$printed" | awk '{ exit !($1 == 25 && $3 == 50 && $2 > 0 && $2 < 6 && $4 > 0 && $4 < 6) }'; then
    pass "validation_loss ($printed)"
  else
    fail validation_loss "printed '$printed', recorded '$recorded'"
  fi
  # --log-json: every step's keys in order, the printed loss; the validation and memory lines
  keys=$(sed 's/: [^,}]*//g' "$TMP/small.json" | LC_ALL=C sort | uniq -c | sed 's/^ *//' | tr '\n' ';')
  want='1 {"peak_resident_bytes", "planned_bytes"};50 {"step", "loss", "lr", "grad_norm", "ms", "tokens_per_s", "mfu", "dp_buckets", "dp_buckets_during_backward", "pp_bytes_across_nodes", "tokens"};2 {"step", "val_loss"};'
  loss50=$(sed -n 's/^{"step": 50, "loss": \([0-9.]*\),.*/\1/p' "$TMP/small.json" | awk '{ printf "%.6f", $1 }')
  if [ "$keys" = "$want" ] && grep -q "^step 50 | loss $loss50 |" "$TMP/small.out"; then
    pass log_json_keys
  else
    fail log_json_keys "keys '$keys' (want '$want'); step 50's loss '$loss50'"
  fi
  # --sample N: N bytes after the "sample:" line, then a newline
  bytes=$(LC_ALL=C sed -n '/^sample:$/,/^peak resident memory /p' "$TMP/small.out" | LC_ALL=C sed '1d;$d' | wc -c)
  [ "$bytes" = 41 ] && pass sample_bytes || fail sample_bytes "$bytes bytes after 'sample:', not 40 and a newline"
else
  fail small_run "$(tail -c 800 "$TMP/build.log") $(tail -c 800 "$TMP/small.out")"
fi

# resuming from a checkpoint gives the losses of an uninterrupted run, bit for bit: with the same flags,
# and with no flag of the seed or schedule at all (the checkpoint's seed 5 and lr 3e-3 then hold)
T=$TMP/tiny/train
if $T --data "$TMP/text.bin" --steps 8 --lr 3e-3 --seed 5 >"$TMP/full.out" 2>&1 &&
   $T --data "$TMP/text.bin" --steps 4 --decay-steps 8 --lr 3e-3 --seed 5 --save "$TMP/ckpt" >/dev/null 2>&1 &&
   $T --data "$TMP/text.bin" --steps 8 --lr 3e-3 --seed 5 --load "$TMP/ckpt" >"$TMP/resumed.out" 2>&1 &&
   $T --data "$TMP/text.bin" --steps 8 --load "$TMP/ckpt" >"$TMP/bare.out" 2>&1; then
  grep '^step [5-8] |' "$TMP/full.out" | sed 's/ | ms.*//' >"$TMP/a"
  grep '^step [5-8] |' "$TMP/resumed.out" | sed 's/ | ms.*//' >"$TMP/b"
  grep '^step [5-8] |' "$TMP/bare.out" | sed 's/ | ms.*//' >"$TMP/c"
  if [ -s "$TMP/a" ] && cmp -s "$TMP/a" "$TMP/b" && cmp -s "$TMP/a" "$TMP/c"; then pass resume_bit_for_bit
  else fail resume_bit_for_bit "$(diff "$TMP/a" "$TMP/b" | head -5) $(diff "$TMP/a" "$TMP/c" | head -5)"; fi
else
  fail resume_bit_for_bit "a run failed: $(tail -c 400 "$TMP/resumed.out") $(tail -c 400 "$TMP/bare.out")"
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

# --profile: a table of the steps after the first by kind of work, and the same as a JSON line (rank 0's)
# whose GEMM FLOPs and attention FLOPs (causal: half the scores) add up to its half of the plan's model
# FLOPs at tp 2 (which count attention's full T×T scores), and whose kinds, collectives among them, fit
# in the step's time
LAYOUT="--set layers=2 --tp 2 --mbs 2 --gbs 4"
# shellcheck disable=SC2086
if $PLAIT build models/tiny.lua $LAYOUT -o "$TMP/profiled" >"$TMP/build.log" 2>&1 &&
   "$TMP/profiled/train" --data "$TMP/text.bin" --steps 3 --profile --log-json "$TMP/profiled.json" \
     >"$TMP/profiled.out" 2>&1; then
  # shellcheck disable=SC2086
  model=$($PLAIT plan models/tiny.lua $LAYOUT --machine cpu --format json | sed -n 's/.*"flops_per_iteration": \([0-9]*\).*/\1/p')
  line=$(grep '"profile_steps": 2,' "$TMP/profiled.json")
  number() { echo "$line" | sed "s/.*\"$1\": {\"ms\": \([^,]*\), \"flops\": \([^,]*\), \"bytes\": \([^}]*\)}.*/\1 \2 \3/"; }
  verdict=$(awk -v model="$model" -v gemm="$(number gemm)" -v attn="$(number attention)" -v opt="$(number optimizer)" \
    -v step="$(echo "$line" | sed 's/.*"step_ms": \([^,]*\),.*/\1/')" -v kinds="$(for k in gemm attention norm \
    elementwise rope split_concat bias_sums embedding xent optimizer grad_norm comm; do number $k | awk '{ print $1 }'; done | tr '\n' ' ')" '
    BEGIN { split(gemm, g, " "); split(attn, a, " "); split(opt, o, " "); n = split(kinds, k, " ")
      for (i = 1; i <= n; i++) sum += k[i]
      if (g[2] + 2 * a[2] != model / 2) { printf "GEMM %s + 2 x attention %s FLOPs, plan %s", g[2], a[2], model; exit }
      if (o[3] <= 0 || sum > step * 1.001 || sum < step * 0.5) { printf "kinds %.3f ms of a %.3f ms step, optimizer %s bytes", sum, step, o[3]; exit }
      print "ok" }')
  if [ "$verdict" = ok ] && grep -q '^profile over 2 steps after the first' "$TMP/profiled.out" &&
     grep -q '^  gemm ' "$TMP/profiled.out" && grep -q '^  comm ' "$TMP/profiled.out"; then
    pass "profile_accounts_for_the_step ($model model FLOPs over 2 ranks)"
  else
    fail profile_accounts_for_the_step "$verdict: $(grep -A 14 '^profile' "$TMP/profiled.out" | head -c 900)"
  fi
else
  fail profile_accounts_for_the_step "$(tail -c 800 "$TMP/build.log") $(tail -c 800 "$TMP/profiled.out")"
fi
