# plan_schedule.sh: the schedule inside plans: the text plan read back by plait check, a hand-written
# schedule file planned with a model (a broken one refused), model costs in check, the planned trace read
# back, and the measured one (DIR/train --trace at pp 2): trace-event JSON with the plan's actions that
# plait check reads back, finding the bubble the program printed.
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
# a trace's actions are validated as a schedule's: one with a forward left out is refused
grep -v '"name":"1F2"' "$TMP/plan.json" >"$TMP/gap.json"
expect_error trace_missing_a_forward "gap.json: rank 1, step [0-9]+: 1SEND_F2 sends before 1F2 has produced it" $PLAIT check "$TMP/gap.json"

# the measured trace: a pp-2 run's --trace FILE is trace-event JSON holding each rank's actions of the
# plan in order; plait check reads it back and finds the bubble the program printed, over an iteration
# as long as the program's last step
P2="models/tiny.lua --set layers=2 hidden=64 heads=4 ffn=256 seq=32 --pp 2 --mbs 2 --gbs 8"
fixed_text "$TMP/text.txt"
# shellcheck disable=SC2086
if $PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null && $PLAIT build $P2 -o "$TMP/pp2" >"$TMP/err" 2>&1 &&
   $PLAIT plan $P2 --format json -o "$TMP/pp2.plan.json" 2>>"$TMP/err" &&
   timeout 60 "$TMP/pp2/train" --data "$TMP/text.bin" --steps 3 --trace "$TMP/measured.json" >"$TMP/pp2.out" 2>>"$TMP/err"; then
  if python3 - "$TMP/measured.json" "$TMP/pp2.plan.json" >"$TMP/py" 2>&1 <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
plan = {r["rank"]: r["actions"] for r in json.load(open(sys.argv[2]))["ranks"]}
spans = [e for e in events if e["ph"] == "X"]
assert spans and all({"name", "cat", "pid", "tid", "ts", "dur"} <= e.keys() and e["ts"] >= 0 and e["dur"] >= 0 for e in spans)
assert {e["pid"] for e in spans} == {0, 1} and {e["args"]["name"] for e in events if e["name"] == "process_name"} == {"rank 0", "rank 1"}
for rank, actions in plan.items():
    mine = sorted((e for e in spans if e["pid"] == rank), key=lambda e: e["args"]["step"])
    assert [e["name"] for e in mine] == actions, (rank, [e["name"] for e in mine], actions)
    compute = [e for e in mine if e["tid"] == 0]
    assert all(a["ts"] + a["dur"] <= b["ts"] + 0.002 for a, b in zip(compute, compute[1:])), f"rank {rank}: compute overlaps"
print(len(spans))
PY
  then pass "measured_trace_is_trace_events ($(cat "$TMP/py") events, the plan's actions)"
  else fail measured_trace_is_trace_events "$(tail -c 600 "$TMP/py")"; fi
  printed=$(sed -n 's/^trace .*: measured bubble \([0-9.e-]*\) .*/\1/p' "$TMP/pp2.out")
  ms=$(sed -n 's/^step 3 | .* | ms \([0-9.]*\) | .*/\1/p' "$TMP/pp2.out")
  if $PLAIT check "$TMP/measured.json" >"$TMP/measured.out" 2>"$TMP/err" && grep -q 'measured.json: valid schedule: 2 ranks' "$TMP/measured.out"; then
    read_back=$(sed -n 's/^bubble fraction: \([0-9.e-]*\) .*measured in the trace.*/\1/p' "$TMP/measured.out")
    iteration=$(sed -n 's/^iteration time: \([0-9.e-]*\) s$/\1/p' "$TMP/measured.out")
    # the bubble to the program's 4 printed digits; the traced iteration (seconds) inside the last step's time
    if ! awk -v a="$printed" -v b="$read_back" 'BEGIN { d = a - b; exit !(a != "" && b != "" && a > 0 && (d < 0 ? -d : d) <= 1e-4) }'; then
      fail measured_trace_reads_back "plait check finds bubble '$read_back', the program printed '$printed'"
    elif ! awk -v s="$iteration" -v ms="$ms" 'BEGIN { exit !(s != "" && ms != "" && 1000 * s >= ms / 5 && 1000 * s <= 1.2 * ms + 2) }'; then
      fail measured_trace_reads_back "the trace's iteration takes '$iteration' s, the program's last step '$ms' ms"
    else
      pass "measured_trace_reads_back (bubble $read_back, the program printed $printed; iteration $iteration s, step $ms ms)"
    fi
  else
    fail measured_trace_reads_back "$(head -c 400 "$TMP/err") $(head -c 400 "$TMP/measured.out")"
  fi
else
  fail measured_trace_is_trace_events "$(tail -c 600 "$TMP/err")"
fi
