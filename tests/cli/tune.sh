# tune.sh: plait tune. Its first choice is the fastest of every layout plan accepts (checked against
# plait plan on each of them for a small search space), its numbers are plan's own, every layout it
# prints fits the device's memory, a layout flag pins its dimension; a model that fits nowhere is one
# line naming the least memory it needs; bad input is one line.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
TINY="models/tiny.lua --gbs 8"
json() { sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -n 1; }

# the first choice is the fastest among all layouts plan accepts on 4 devices (mbs 2, no
# recomputation), with and without the distributed optimizer
# shellcheck disable=SC2086
$PLAIT tune $TINY --gpus 4 --mbs 2 --recompute none --machine cpu --format json >"$TMP/tune.json"
best=$(json "$TMP/tune.json" iteration_time)
fastest=
for tp in 1 2 4; do for pp in 1 2 4; do
  dp=$((4 / (tp * pp))); [ $((tp * pp * dp)) = 4 ] || continue
  for sched in gpipe 1f1b "interleaved --vpp 2"; do for dopt in "" --distributed-optimizer; do
    # shellcheck disable=SC2086
    $PLAIT plan $TINY --tp $tp --pp $pp --dp $dp --mbs 2 --schedule $sched $dopt --machine cpu \
      --format json >"$TMP/plan.json" 2>/dev/null || continue
    t=$(json "$TMP/plan.json" iteration_time)
    if [ -z "$fastest" ] || awk -v a="$t" -v b="$fastest" 'BEGIN { exit !(a < b) }'; then fastest=$t; fi
  done; done
done; done
if [ -n "$best" ] && awk -v a="$best" -v b="$fastest" 'BEGIN { exit !(a <= b * (1 + 1e-12)) }'; then pass tune_finds_fastest
else fail tune_finds_fastest "tune's first $best s, the fastest plan $fastest s"; fi

# the first choice's numbers are those plait plan prints for its flags
flags=$(sed -n 's/.*"flags": "\(.*\)"}.*/\1/p' "$TMP/tune.json" | head -n 1)
# shellcheck disable=SC2086
$PLAIT plan $TINY $flags --machine cpu --format json >"$TMP/first.json"
if [ "$(json "$TMP/first.json" iteration_time)" = "$best" ] &&
   [ "$(json "$TMP/first.json" memory_bytes)" = "$(json "$TMP/tune.json" memory_bytes)" ]; then pass tune_numbers_are_plans
else fail tune_numbers_are_plans "tune $best s, plan $(json "$TMP/first.json" iteration_time) s ($flags)"; fi

# every printed layout fits the machine's memory; a pinned dimension holds in all of them
# shellcheck disable=SC2086
$PLAIT tune models/gpt.lua --set layers=8 hidden=1024 heads=16 --gpus 16 --gbs 64 --tp 2 --format json >"$TMP/gpt.json"
capacity=$(json "$TMP/gpt.json" memory_capacity)
rows=$(grep -c '"tp": ' "$TMP/gpt.json")
over=$(sed -n 's/.*"memory_bytes": \([0-9]*\).*/\1/p' "$TMP/gpt.json" | awk -v c="$capacity" '$1 > c' | wc -l)
other_tp=$(grep '"tp": ' "$TMP/gpt.json" | grep -vc '"tp": 2,')
if [ "$rows" = 5 ] && [ "$over" = 0 ] && [ "$other_tp" = 0 ]; then pass tune_fits_and_pins
else fail tune_fits_and_pins "$rows layouts, $over over $capacity bytes, $other_tp without tp 2"; fi

# the text report: the best five, why the rest lost, the first as flags
# shellcheck disable=SC2086
expect_ok tune_text $PLAIT tune $TINY --gpus 2 --machine cpu
if grep -q '^ 5 ' "$TMP/out" && grep -q 'by why they lost' "$TMP/out" && grep -q '^the first as plan.s flags: --tp' "$TMP/out"
then pass tune_text_report; else fail tune_text_report "$(head -c 600 "$TMP/out")"; fi

# a model that fits no layout: one line with the least memory a layout needs, which plan agrees with
sed 's/memory = 16e9/memory = 1e6/' lib/plait/machines/cpu.lua >"$TMP/small.lua"
# shellcheck disable=SC2086
expect_error tune_fits_nowhere "^plait: models/tiny.lua fits no layout on 2 devices of cpu \(1.00 MB each\): the smallest needs [0-9.]+ MB per device \(--tp .*\); use more devices" \
  $PLAIT tune $TINY --gpus 2 --machine "$TMP/small.lua"
need=$(sed -n 's/.*the smallest needs \([0-9.]*\) MB.*/\1/p' "$TMP/err")
flags=$(sed -n 's/.*per device (\(--tp [^)]*\)).*/\1/p' "$TMP/err")
# shellcheck disable=SC2086
plan_mb=$($PLAIT plan $TINY $flags --machine cpu --format json | json /dev/stdin memory_bytes | awk '{ printf "%.2f", $1 / 1e6 }')
if [ -n "$need" ] && [ "$need" = "$plan_mb" ]; then pass tune_fits_nowhere_names_plans_memory
else fail tune_fits_nowhere_names_plans_memory "tune says $need MB, plan $plan_mb MB ($flags)"; fi

expect_error tune_no_gpus '^plait: tune needs the number of devices: --gpus N$' $PLAIT tune models/tiny.lua
expect_error tune_zero_gpus '^plait: --gpus takes a positive integer' $PLAIT tune models/tiny.lua --gpus 0
expect_error tune_bad_format '^plait: --format svg: unknown format for tune \(text, json\)$' \
  $PLAIT tune models/tiny.lua --gpus 2 --format svg
expect_error tune_no_model '^plait: tune needs a model file' $PLAIT tune --gpus 2
expect_error tune_refused_everywhere '^plait: models/tiny.lua: plan refuses every layout on 3 devices' \
  $PLAIT tune models/tiny.lua --gpus 3 --tp 3
expect_error tune_unknown_flag '^plait: unknown flag --vpp-max' $PLAIT tune models/tiny.lua --gpus 2 --vpp-max 2
