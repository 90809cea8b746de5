# plan_schedule.sh: the schedule inside plans: a hand-written schedule file planned with a model, the
# text plan read back by plait check, model costs in check, traces (planned and measured) read back.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
M="models/tiny.lua --set layers=8 hidden=64 heads=4 ffn=256 seq=32"

# a plan in its text form is a schedule plait check accepts, and check reports its bubble
# shellcheck disable=SC2086
if $PLAIT plan $M --pp 4 --gbs 16 --mbs 2 --machine cpu -o "$TMP/plan.txt" &&
   $PLAIT check "$TMP/plan.txt" >"$TMP/check.out" 2>&1 && grep -q "bubble fraction: 0.375 " "$TMP/check.out"; then
  pass plan_text_reads_back
else
  fail plan_text_reads_back "$(cat "$TMP/check.out" 2>/dev/null | head -3)"
fi

# a hand-written compute-only schedule (1F1B for pp 2, 4 microbatches) planned with a model
cat > "$TMP/mine.txt" <<'SCHEDULE'
# 1F1B by hand
schedule pp=2 vpp=1 microbatches=4 {
rank 0: 0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3
rank 1: 1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3
}
SCHEDULE
# shellcheck disable=SC2086
if $PLAIT plan $M --pp 2 --gbs 8 --mbs 2 --schedule "$TMP/mine.txt" --format json -o "$TMP/mine.json" 2>"$TMP/err" &&
   grep -q '"actions": \["0F0", "0SEND_F0"' "$TMP/mine.json"; then
  pass plan_with_a_schedule_file
else
  fail plan_with_a_schedule_file "$(cat "$TMP/err")"
fi
# ... and a broken one is refused naming the rank and step
sed 's/rank 1: 1F0 1B0/rank 1: 1B0 1F0/' "$TMP/mine.txt" > "$TMP/broken.txt"
# shellcheck disable=SC2086
expect_error plan_with_a_broken_schedule "schedule .*broken.txt: rank 1, step 0" \
  $PLAIT plan $M --pp 2 --gbs 8 --mbs 2 --schedule "$TMP/broken.txt"

# check with a model's costs gives the plan's simulated bubble
# shellcheck disable=SC2086
plan_bubble=$($PLAIT plan $M --pp 4 --gbs 16 --mbs 2 --machine cpu --format json | grep '"bubble_fraction"' | sed 's/.*: \([0-9.e-]*\),/\1/')
# shellcheck disable=SC2086
check_bubble=$($PLAIT check 1f1b --pp 4 --gbs 16 --mbs 2 --model $M --machine cpu | grep 'bubble fraction' | sed 's/bubble fraction: \([0-9.e-]*\) .*/\1/')
awk -v a="$plan_bubble" -v b="$check_bubble" 'BEGIN { d = a - b; exit !(a > 0 && (d < 0 ? -d : d) < 1e-5 * a) }' &&
  pass "check_with_model_costs ($check_bubble)" || fail check_with_model_costs "plan $plan_bubble, check $check_bubble"

# a trace read back: the plan's simulated trace gives the plan's bubble and draws
# shellcheck disable=SC2086
if $PLAIT plan $M --pp 4 --gbs 16 --mbs 2 --machine cpu --format trace -o "$TMP/plan.json" &&
   $PLAIT check "$TMP/plan.json" >"$TMP/trace.out" && $PLAIT check "$TMP/plan.json" --format svg -o "$TMP/plan.svg"; then
  traced=$(grep 'bubble fraction' "$TMP/trace.out" | sed 's/bubble fraction: \([0-9.e-]*\) .*/\1/')
  awk -v a="$plan_bubble" -v b="$traced" 'BEGIN { d = a - b; exit !((d < 0 ? -d : d) < 1e-3 * a) }' && grep -q '<svg' "$TMP/plan.svg" &&
    pass "trace_reads_back ($traced)" || fail trace_reads_back "plan $plan_bubble, from its trace $traced"
else
  fail trace_reads_back "plait failed"
fi
printf '{"traceEvents":[\n{"name":"3Q12","ph":"X","pid":0,"tid":0,"ts":0,"dur":1,"args":{"step":0}}\n]}\n' > "$TMP/odd.json"
expect_error trace_with_an_unknown_action "odd.json:2: a trace event plait cannot read" $PLAIT check "$TMP/odd.json"
