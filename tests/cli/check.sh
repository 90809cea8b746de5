#!/bin/sh
# check.sh: `plait check`: valid schedules (named, hand-written text, PyTorch CSV, a printed plan) pass
# with their bubble and peaks; invalid ones exit 1 with one line on stderr naming rank, step and action;
# every user mistake gives one line; the trace is JSON Perfetto can load and the SVG renders.
. "$(dirname "$0")/../cli/lib.sh"

# expect_output NAME PATTERN: $TMP/out (from the last expect_ok) holds a line matching PATTERN.
expect_output() {
  if grep -q -E -- "$2" "$TMP/out"; then pass "$1"; else fail "$1" "no line matching '$2' in: $(head -c 400 "$TMP/out")"; fi
}

expect_ok "1f1b by name" "$PLAIT" check 1f1b --pp 4 --gbs 8
expect_output "1f1b bubble (pp-1)/m" '^bubble fraction: 0\.375 '
expect_output "1f1b rank 1 holds 3 microbatches" '^  rank 1: 3$'
expect_ok "interleaved by name" "$PLAIT" check interleaved --pp 4 --vpp 2 --gbs 8
expect_output "interleaved bubble (pp-1)/(vpp m)" '^bubble fraction: 0\.1875 '
expect_output "interleaved peak in microbatches and chunk passes" '^  rank 0: 5\.5 \(11 chunk passes\)$'
# --grad-reduce after: both of rank 0's reductions follow its last backward
expect_ok "reductions after the backward" "$PLAIT" check interleaved --pp 2 --vpp 2 --gbs 4 --grad-reduce after --format text
expect_output "reductions after the backward" "0B3 0REDUCE_GRAD 2REDUCE_GRAD STEP$"

cat >"$TMP/gpipe.txt" <<'TXT'
# GPipe on two ranks, compute only: plait adds the sends, receives, reductions and the step
rank 0: 0F0..3 0B0..3
rank 1: 1F0..3 1B0..3
TXT
expect_ok "hand-written compute-only text" "$PLAIT" check "$TMP/gpipe.txt" --unit-costs
expect_output "hand-written bubble" '^bubble fraction: 0\.25 '
expect_output "hand-written gpipe peak" '^  rank 0: 4$'

printf '0F0,0F1,,,0B0,,0B1\n,1F0,1B0,1F1,,1B1,\n' >"$TMP/order.csv"
expect_ok "PyTorch CSV, compute only" "$PLAIT" check "$TMP/order.csv"
expect_ok "lowered plan as CSV" "$PLAIT" check interleaved --pp 2 --vpp 2 --gbs 4 --format csv -o "$TMP/plan.csv"
expect_ok "CSV with communication reads back" "$PLAIT" check "$TMP/plan.csv"
expect_output "CSV with communication bubble" '^bubble fraction: 0\.125 '

expect_ok "lowered plan as text" "$PLAIT" check 1f1b --pp 3 --gbs 6 --format text -o "$TMP/plan.txt"
{ echo "plan: a model"; echo "memory: rank 0: 1 GB"; cat "$TMP/plan.txt"; echo "collectives: none"; } >"$TMP/whole.txt"
expect_ok "a printed plan with other sections reads back" "$PLAIT" check "$TMP/whole.txt"
expect_output "printed plan bubble" '^bubble fraction: 0\.333333 '
expect_ok "a file checked against the layout" "$PLAIT" check "$TMP/plan.txt" --pp 3 --gbs 6
expect_error "a file with another layout" 'has 3 ranks but the layout needs 4' "$PLAIT" check "$TMP/plan.txt" --pp 4 --gbs 6

# invalid schedules: exit 1, one line on stderr naming rank and step, the neighbourhood on stdout
cat >"$TMP/deadlock.txt" <<'TXT'
rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0REDUCE_GRAD STEP
rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1REDUCE_GRAD STEP
TXT
expect_error "deadlock" 'deadlock.txt: rank 0, step 3: deadlock: every rank is blocked; 0SEND_F1 waits for rank 1' \
  "$PLAIT" check "$TMP/deadlock.txt"
if [ "$(grep -c '^  rank [01] | steps' "$TMP/out")" = 2 ]; then pass "deadlock neighbourhood"; else fail "deadlock neighbourhood" "$(cat "$TMP/out")"; fi
sed 's/ 1RECV_F1//' "$TMP/deadlock.txt" >"$TMP/dropped.txt"
expect_error "dropped receive" 'rank 1, step 4: 1F1 has no receive of its input \(1RECV_F1\) before it' "$PLAIT" check "$TMP/dropped.txt"
printf 'rank 0: 0B0 0F0\n' >"$TMP/backward.txt"
expect_error "backward before forward" 'rank 0, step 0: 0B0 runs before its forward 0F0' "$PLAIT" check "$TMP/backward.txt"
printf 'rank 0: 0F0 0F0 0B0\n' >"$TMP/twice.txt"
expect_error "microbatch twice" 'rank 0, step 1: 0F0 runs twice \(first at step 0\)' "$PLAIT" check "$TMP/twice.txt"

# user mistakes: one line each
printf 'rank 0: 0F0 0Q1\n' >"$TMP/bad.txt"
expect_error "malformed text" 'bad.txt:1:13: expected an action such as 0F3' "$PLAIT" check "$TMP/bad.txt"
printf '0F0,0F1\n1F0,zz\n' >"$TMP/bad.csv"
expect_error "malformed CSV" 'bad.csv:2:5: expected an action' "$PLAIT" check "$TMP/bad.csv"
expect_error "unknown schedule" "unknown schedule 'zigzag'; use gpipe, 1f1b, interleaved, or a schedule file" "$PLAIT" check zigzag
expect_error "missing file" 'schedule file .*none.txt: cannot open it \(No such file or directory\)' "$PLAIT" check "$TMP/none.txt"
expect_error "interleaved needs m a multiple of pp" 'multiple of pp \(4\); use 8 microbatches' \
  "$PLAIT" check interleaved --pp 4 --vpp 2 --gbs 6
expect_error "1f1b with chunks" '1f1b runs one chunk per rank' "$PLAIT" check 1f1b --pp 4 --vpp 2 --gbs 8
expect_error "no file" 'check needs a schedule' "$PLAIT" check
expect_error "unknown flag" 'unknown flag --bogus' "$PLAIT" check 1f1b --bogus 2
expect_error "unknown format" "unknown format 'png'" "$PLAIT" check 1f1b --format png
expect_error "unwritable output" 'cannot write .*/no/dir/x.svg' "$PLAIT" check 1f1b --format svg -o "$TMP/no/dir/x.svg"

# the trace is JSON with the fields Perfetto reads; the SVG renders
expect_ok "trace" "$PLAIT" check interleaved --pp 4 --vpp 2 --gbs 8 --format trace -o "$TMP/trace.json"
if python3 - "$TMP/trace.json" >"$TMP/py" 2>&1 <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
spans = [e for e in events if e["ph"] == "X"]
assert spans and all({"name", "cat", "pid", "tid", "ts", "dur"} <= e.keys() for e in spans)
assert {e["pid"] for e in spans} == {0, 1, 2, 3}
assert all(e["dur"] >= 0 for e in spans) and max(e["ts"] + e["dur"] for e in spans) == 57e6
assert any(e["name"] == "thread_name" and e["args"]["name"] == "compute" for e in events)
PY
then pass "trace is valid JSON with complete events"; else fail "trace is valid JSON with complete events" "$(cat "$TMP/py")"; fi
expect_ok "svg" "$PLAIT" check interleaved --pp 4 --vpp 2 --gbs 8 --format svg -o "$TMP/t.svg"
if rsvg-convert -o "$TMP/t.png" "$TMP/t.svg" 2>"$TMP/err" && [ -s "$TMP/t.png" ]; then pass "svg renders"
else fail "svg renders" "$(cat "$TMP/err")"; fi

# a planned trace beside a measured one: every action of both, each duration and the ratio
cat /usr/share/common-licenses/GPL-3 > "$TMP/text.txt"
if $PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null &&
   $PLAIT build models/tiny.lua --set layers=2 --pp 2 --mbs 2 --gbs 4 -o "$TMP/tiny" >/dev/null &&
   $PLAIT plan models/tiny.lua --set layers=2 --pp 2 --mbs 2 --gbs 4 --machine cpu --format trace -o "$TMP/planned.json" &&
   "$TMP/tiny/train" --data "$TMP/text.bin" --steps 2 --trace "$TMP/measured.json" >/dev/null &&
   $PLAIT check "$TMP/planned.json" "$TMP/measured.json" >"$TMP/compare" 2>"$TMP/err"; then
  actions=$(grep -c '^[01] ' "$TMP/compare")
  want=$(grep -c '"ph":"X"' "$TMP/planned.json")
  if [ "$actions" = "$want" ] && grep -q '^planned .*iteration [0-9.]* ms' "$TMP/compare" &&
     grep -q '^measured .*(measured/planned [0-9.]*)' "$TMP/compare" && grep -q '^total F ' "$TMP/compare"; then
    pass "planned beside measured ($actions actions)"
  else
    fail "planned beside measured" "$actions action lines for $want actions: $(head -c 400 "$TMP/compare")"
  fi
else
  fail "planned beside measured" "$(cat "$TMP/err")"
fi
$PLAIT plan models/tiny.lua --set layers=2 --pp 2 --mbs 2 --gbs 8 --machine cpu --format trace -o "$TMP/planned8.json"
expect_error "traces of different schedules" "ran different schedules .*compare the plan and the run of one layout" \
  $PLAIT check "$TMP/planned8.json" "$TMP/measured.json"
expect_error "two files that are not traces" "check takes two files only as traces to compare" \
  $PLAIT check "$TMP/planned.json" models/tiny.lua
