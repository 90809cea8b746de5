# dist_optim_plan.sh: the distributed optimizer (ZeRO stage 1) in plan and tune. Per rank, Adam's
# state (and the fp32 master weights) is 1/dp of what it is without, weights and gradients are the
# same; DP sends a reduce-scatter of the fp32 gradients and an all-gather of the weights in the
# training precision, each (d-1)/d of them; the tied embedding's sum is 1/dp of the table; the
# iteration keeps its compute, shrinks its optimizer step by dp and adds the all-gather after it;
# tune offers it where a layout fits only with it, and says so.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
json() { sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -n 1; }
# time_of FILE KEY: a part of the iteration (0 where the plan has none)
time_of() { sed -n "/\"time\": {/s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | grep . || echo 0; }
# sent FILE GROUP: bytes a rank sends per iteration over the group
sent() { sed -n "s/.*\"per_iteration\": .*\"$2\": \([0-9]*\).*/\1/p" "$1"; }

# per rank: params weights gradients optimizer
ranks() {
  sed -n 's/.*"params": \([0-9]*\),.*/\1/p' "$1" >"$TMP/params"
  n='\([0-9]*\)'
  sed -n "s/.*\"memory\": {\"weights\": $n, \"gradients\": $n, \"optimizer\": $n,.*/\\1 \\2 \\3/p" \
    "$1" >"$TMP/memory"
  paste -d ' ' "$TMP/params" "$TMP/memory"
}

# per rank with and without: weights and gradients the same, Adam 1/d of k bytes a parameter
check_memory() {  # NAME D K
  bad=$(paste -d ' ' "$TMP/off.ranks" "$TMP/on.ranks" | awk -v d="$2" -v k="$3" '
    NF != 8 || $1 != $5 { print "rank " NR ": no pair"; next }
    $2 != $6 || $3 != $7 { print "rank " NR ": weights or gradients differ" }
    $4 != sprintf("%.0f", k * $1) { print "rank " NR ": optimizer " $4 " without, want " k "n" }
    $8 * d != $4 { print "rank " NR ": optimizer " $8 " with, " $4 " without, not 1/" d }')
  [ -s "$TMP/off.ranks" ] && [ -z "$bad" ] && pass "$1_memory" || fail "$1_memory" "$bad"
  grep -q "\"optimizer_sharded_over\": $2" "$TMP/on.json" &&
    ! grep -q optimizer_sharded "$TMP/off.json" &&
    pass "$1_json_says_sharded" || fail "$1_json_says_sharded" "no optimizer_sharded_over $2"
}

# DP: 2(d-1)/d of the fp32 gradients without; with, (d-1)/d of them and of the weights in A bytes
check_traffic() {  # NAME D A
  most=$(awk '$1 > m { m = $1 } END { print m }' "$TMP/off.ranks")
  verdict=$(awk -v n="$most" -v d="$2" -v a="$3" -v on="$(sent "$TMP/on.json" dp)" \
      -v off="$(sent "$TMP/off.json" dp)" 'BEGIN {
    want_off = 2 * (d - 1) / d * 4 * n; want_on = (d - 1) / d * 4 * n + (d - 1) / d * a * n
    if (off - want_off > 1 || want_off - off > 1) print "without: " off " bytes, want " want_off
    if (on - want_on > 1 || want_on - on > 1) print "with: " on " bytes, want " want_on }')
  [ -z "$verdict" ] && pass "$1_dp_bytes" || fail "$1_dp_bytes" "$verdict"
  embed_off=$(sent "$TMP/off.json" embed) embed_on=$(sent "$TMP/on.json" embed)
  [ "$embed_off" = 0 ] && return  # no tied embedding on two pipeline ranks
  awk -v a="$embed_on" -v b="$embed_off" -v d="$2" \
    'BEGIN { x = a * d - b; exit !(x <= d && x >= -d) }' &&
    pass "$1_tied_embedding_shard" ||
    fail "$1_tied_embedding_shard" "$embed_on with, $embed_off without"
}

# the same compute, TP, bubble and pipeline; the step 1/d; DP with the all-gather after the step
check_time() {  # NAME D
  verdict=$({ for key in compute tp bubble pp dp optimizer dp_weight_gather; do
      printf '%s %s ' "$(time_of "$TMP/off.json" $key)" "$(time_of "$TMP/on.json" $key)"; done
    echo "$(json "$TMP/off.json" iteration_time) $(json "$TMP/on.json" iteration_time)"; } |
    awk -v d="$2" '{
      for (i = 1; i <= 8; i += 2) if ($i != $(i + 1)) print "part " (i + 1) / 2 " changed"
      r = $12 * d / $11; if (r < 0.95 || r > 1.1) print "step " $11 " s without, " $12 " s with"
      if ($14 <= 0) print "no all-gather after the step"
      x = ($16 - $15) - (($10 + $12) - ($9 + $11))
      if (x > 1e-12 || x < -1e-12) print "the iteration is not its parts" }')
  [ -z "$verdict" ] && pass "$1_time" || fail "$1_time" "$verdict"
}

# check NAME D ADAM_BYTES WEIGHT_BYTES ARGS...: plans ARGS --dp D with and without the switch.
check() {
  name=$1 d=$2 adam=$3 wbytes=$4; shift 4
  if ! $PLAIT plan "$@" --dp "$d" --format json >"$TMP/off.json" 2>"$TMP/err" ||
     ! $PLAIT plan "$@" --dp "$d" --distributed-optimizer --format json >"$TMP/on.json" 2>"$TMP/err"
  then fail "$name" "plan failed: $(cat "$TMP/err")"; return; fi
  ranks "$TMP/off.json" >"$TMP/off.ranks"
  ranks "$TMP/on.json" >"$TMP/on.ranks"
  check_memory "$name" "$d" "$adam"
  check_traffic "$name" "$d" "$wbytes"
  check_time "$name" "$d"
}

LLAMA="models/llama.lua --tp 8 --pp 4 --gbs 64 --recompute full --sequence-parallel"
for d in 2 4 8; do
  check "gpt2_dp$d" "$d" 12 2 models/gpt2.lua --gbs 64
  # shellcheck disable=SC2086
  check "llama7b_tp8_pp4_dp$d" "$d" 12 2 $LLAMA
done
check gpt2_tp2_pp2_dp2 2 12 2 models/gpt2.lua --tp 2 --pp 2 --gbs 16
check tiny_cpu_pp2_dp4 4 8 4 models/tiny.lua --pp 2 --gbs 32 --machine cpu

# where it goes: one node's NVLink gathers GPT-2's weights faster than Adam over all of them runs,
# so the iteration is shorter; Llama-7B's DP group crosses nodes, where the gather costs more than
# the step saves
faster() {  # ARGS...: the iteration with the switch is shorter than without
  off=$($PLAIT plan "$@" --format json | json /dev/stdin iteration_time)
  on=$($PLAIT plan "$@" --distributed-optimizer --format json | json /dev/stdin iteration_time)
  awk -v a="$on" -v b="$off" 'BEGIN { exit !(a < b) }'
}
faster models/gpt2.lua --dp 8 --gbs 64 && pass gpt2_dp8_faster || fail gpt2_dp8_faster "not faster"
# shellcheck disable=SC2086
faster $LLAMA --dp 4 && fail llama7b_dp4_across_nodes_slower "faster with it" ||
  pass llama7b_dp4_across_nodes_slower

# reduced after the backward, the buckets are a reduce-scatter: about half the all-reduce's time
GPT2_AFTER="models/gpt2.lua --dp 8 --gbs 64 --grad-reduce after --format json"
# shellcheck disable=SC2086
$PLAIT plan $GPT2_AFTER >"$TMP/off.json"
# shellcheck disable=SC2086
$PLAIT plan $GPT2_AFTER --distributed-optimizer >"$TMP/on.json"
ratio=$(awk -v off="$(time_of "$TMP/off.json" dp)" -v on="$(time_of "$TMP/on.json" dp)" \
  -v g="$(time_of "$TMP/on.json" dp_weight_gather)" 'BEGIN { print (on - g) / off }')
awk -v r="$ratio" 'BEGIN { exit !(r > 0.4 && r < 0.6) }' && pass reduce_scatter_half_an_allreduce ||
  fail reduce_scatter_half_an_allreduce "reduce-scatter over all-reduce: $ratio"

# the text says so; at dp 1 it changes nothing and says there is nothing to shard
$PLAIT plan models/gpt2.lua --dp 4 --gbs 8 --distributed-optimizer >"$TMP/text"
memory='^memory      per rank, bf16 weights, fp32 gradients, fp32 master weights and Adam sharded'
memory="$memory over dp 4:\$"
dp="DP [0-9.e+-]* (reduce-scatter, then the weights' all-gather [0-9.e+-]* after the step)"
grep -q "$memory" "$TMP/text" && grep -q "$dp" "$TMP/text" && pass text_says_sharded ||
  fail text_says_sharded "$(grep -E '^(memory|iteration)' "$TMP/text")"
$PLAIT plan models/gpt2.lua --format json | grep -v '"distributed_optimizer"' >"$TMP/off.json"
$PLAIT plan models/gpt2.lua --use-distributed-optimizer --format json |
  grep -v '"distributed_optimizer"' |
  sed 's/, "optimizer_sharded_over": 1//; s/, "dp_weight_gather": 0//' >"$TMP/on.json"
$PLAIT plan models/gpt2.lua --use-distributed-optimizer >"$TMP/text"
cmp -s "$TMP/off.json" "$TMP/on.json" &&
  grep -q 'distributed optimizer on, dp 1: nothing to shard' "$TMP/text" &&
  pass dp1_changes_nothing ||
  fail dp1_changes_nothing "$(diff "$TMP/off.json" "$TMP/on.json" | head -c 600)"

# tune: Llama-7B data-parallel over 8 A100s fits only with Adam sharded (18 bytes a parameter do
# not)
DP8="models/llama.lua --gpus 8 --tp 1 --pp 1 --gbs 64"
# shellcheck disable=SC2086
$PLAIT tune $DP8 >"$TMP/tune.txt"
# shellcheck disable=SC2086
$PLAIT tune $DP8 --format json >"$TMP/tune.json"
why='^ 1 uses the distributed optimizer: without it the same layout needs .* more than the 80.00 GB'
if sed -n '4p' "$TMP/tune.txt" | grep -q ' yes  ' && grep -q "$why" "$TMP/tune.txt" &&
   grep -q '"without_distributed_optimizer": {"planned": [a-z]*, "fits": false' "$TMP/tune.json" &&
   ! grep -q '"distributed_optimizer": false' "$TMP/tune.json"
then pass tune_7b_fits_only_sharded
else fail tune_7b_fits_only_sharded "$(head -c 900 "$TMP/tune.txt")"; fi
flags=$(sed -n 's/.*"flags": "\(.*\)"}.*/\1/p' "$TMP/tune.json" | head -n 1)
# shellcheck disable=SC2086
$PLAIT plan models/llama.lua --gbs 64 $flags --format json >"$TMP/first.json"
[ "$(json "$TMP/first.json" iteration_time)" = "$(json "$TMP/tune.json" iteration_time)" ] &&
  [ "$(json "$TMP/first.json" memory_bytes)" = "$(json "$TMP/tune.json" memory_bytes)" ] &&
  pass tune_sharded_numbers_are_plans || fail tune_sharded_numbers_are_plans "$flags"

# searched only where there is something to shard; pinned by the flag, kept
TINY="models/tiny.lua --gbs 8 --machine cpu --format json"
# shellcheck disable=SC2086
$PLAIT tune $TINY --gpus 2 --tp 2 >"$TMP/dp1.json"
# shellcheck disable=SC2086
$PLAIT tune $TINY --gpus 4 --distributed-optimizer >"$TMP/pinned.json"
if ! grep -q '"distributed_optimizer": true' "$TMP/dp1.json" &&
   ! grep -q '"distributed_optimizer": false' "$TMP/pinned.json" &&
   ! grep -q without_distributed_optimizer "$TMP/pinned.json"
then pass tune_searches_where_it_shards
else fail tune_searches_where_it_shards "$(head -c 600 "$TMP/pinned.json")"; fi
