# plot.sh: `plait plot` draws training logs: the SVG's points map back to the logs' values through
# the scale each panel states, two logs give two series and a legend of two (names escaped), bad
# logs are refused in one line naming FILE:LINE and leave the output as it was.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

fixed_text "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null ||
  { fail data "plait data failed"; exit 0; }
if ! $PLAIT build models/tiny.lua --set layers=1 hidden=32 heads=2 ffn=64 seq=16 -o "$TMP/tiny" \
     >"$TMP/build.log" 2>&1; then
  fail build "$(tail -c 400 "$TMP/build.log")"; exit 0
fi
# two short runs: the second at another learning rate and seed, its log under a name XML must escape
"$TMP/tiny/train" --data "$TMP/text.bin" --steps 12 --eval-every 4 --log-json "$TMP/a.json" \
  >/dev/null &&
"$TMP/tiny/train" --data "$TMP/text.bin" --steps 8 --eval-every 4 --lr 3e-3 --seed 7 \
  --log-json "$TMP/b&<c>.json" >/dev/null || { fail train "a training run failed"; exit 0; }

# check_svg NAME SVG X RUNS LOG...: every polyline vertex and circle of the SVG, mapped back
# through its panel's data-x0..data-height, is the log's value (step or tokens, loss, lr,
# grad_norm, val_loss) to within the 0.005 pixels of the printed coordinates; RUNS series, one
# legend entry per log named as given.
check_svg() {
  name=$1; shift
  if python3 - "$@" >"$TMP/check.out" 2>&1 <<'PY'
import json, sys, xml.etree.ElementTree as ET
svg, xkey, runs, logs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(svg).getroot()
steps, vals = [], []
for path in logs:
    lines = [json.loads(l) for l in open(path)]
    steps.append([l for l in lines if "loss" in l and "step" in l])
    vals.append([l for l in lines if "val_loss" in l])
key = {"loss": "loss", "lr": "lr", "grad_norm": "grad_norm"}
checked = 0
def x_of(run, line, is_val):
    if xkey == "steps": return line["step"]
    if not is_val: return line["tokens"]
    return line["step"] * steps[run][0]["tokens"] / steps[run][0]["step"]
def close(got, want, span, pixels):
    return abs(got - want) <= 0.006 * span / pixels + 1e-12 * abs(want)
panels = root.findall(f"{ns}g[@data-panel]")
assert [p.get("data-panel") for p in panels][0] == "loss", "the first panel is not the loss"
for p in panels:
    x0, x1, y0, y1, left, top, width, height = (float(p.get("data-" + k)) for k in
        ("x0", "x1", "y0", "y1", "left", "top", "width", "height"))
    unx = lambda px: x0 + (px - left) / width * (x1 - x0)
    uny = lambda py: y0 + (top + height - py) / height * (y1 - y0)
    lines = p.findall(f"{ns}polyline")
    assert sorted(int(l.get("data-run")) for l in lines) == list(range(runs)), "series per panel"
    for l in lines:
        run = int(l.get("data-run"))
        pts = [tuple(map(float, v.split(","))) for v in l.get("points").split()]
        assert len(pts) == len(steps[run]), f"{len(pts)} points for {len(steps[run])} steps"
        for (px, py), s in zip(pts, steps[run]):
            assert close(unx(px), x_of(run, s, False), x1 - x0, width), f"x {unx(px)} for {s}"
            want = s[key[p.get("data-panel")]]
            assert close(uny(py), want, y1 - y0, height), f"{uny(py)} != {want}"
            checked += 1
    circles = p.findall(f"{ns}circle")
    for run in range(runs):
        got = [c for c in circles if int(c.get("data-run")) == run]
        want = vals[run] if p.get("data-panel") == "loss" else []
        assert len(got) == len(want), f"{len(got)} circles for {len(want)} validation lines"
        for c, v in zip(got, want):
            assert close(unx(float(c.get("cx"))), x_of(run, v, True), x1 - x0, width), "val x"
            assert close(uny(float(c.get("cy"))), v["val_loss"], y1 - y0, height), "val loss"
            checked += 1
legend = [t.text for t in root.iter(f"{ns}text") if t.get("text-anchor") == "start"][1:]
assert legend == logs, f"legend {legend}, logs {logs}"
print(f"{checked} points")
PY
  then pass "$name ($(cat "$TMP/check.out"))"; else fail "$name" "$(tail -n 3 "$TMP/check.out")"; fi
}

expect_ok "one log" "$PLAIT" plot "$TMP/a.json" -o "$TMP/one.svg"
check_svg "one log's points" "$TMP/one.svg" steps 1 "$TMP/a.json"
expect_ok "two logs, all panels" "$PLAIT" plot "$TMP/a.json" "$TMP/b&<c>.json" --lr --grad-norm \
  -o "$TMP/two.svg"
check_svg "two logs' points, lr and grad-norm panels" "$TMP/two.svg" steps 2 "$TMP/a.json" \
  "$TMP/b&<c>.json"
panels=$(grep -o 'data-panel="[a-z_]*"' "$TMP/two.svg" | tr '\n' ' ')
if [ "$panels" = 'data-panel="loss" data-panel="lr" data-panel="grad_norm" ' ]; then
  pass "three panels"
else fail "three panels" "$panels"; fi
expect_ok "against tokens" "$PLAIT" plot "$TMP/a.json" "$TMP/b&<c>.json" --x tokens \
  -o "$TMP/tokens.svg"
check_svg "points against tokens" "$TMP/tokens.svg" tokens 2 "$TMP/a.json" "$TMP/b&<c>.json"
if rsvg-convert -o "$TMP/two.png" "$TMP/two.svg" 2>"$TMP/err" && [ -s "$TMP/two.png" ]; then
  pass "svg renders"
else fail "svg renders" "$(cat "$TMP/err")"; fi

# Bad inputs: one line, exit 1, the output as it was (absent, or the same bytes), no temporary left.
grep -v '"loss"' "$TMP/a.json" | grep -v val_loss >"$TMP/nosteps.json"
{ sed -n 1,2p "$TMP/a.json"; printf '{"step": 3, "loss": 4.5,\n'; } >"$TMP/cut.json"
{ sed -n 1p "$TMP/a.json"; printf '{"step": 2, "loss": "high"}\n'; } >"$TMP/string.json"
{ sed -n 1p "$TMP/a.json"; printf '{"step": 2.5, "loss": 4}\n'; } >"$TMP/halfstep.json"
printf '{"step": 1, "loss": 4}\n{"step": 2, "loss": 1e999}\n' >"$TMP/huge.json"
awk 'BEGIN { s = ""; for (i = 0; i < 40; i++) s = s "[" ; print "{\"a\": " s }' >"$TMP/deep.json"
printf '{"step": 1, "loss": 4}\n{"step": 2, "loss": 3} x\n' >"$TMP/trailing.json"
printf '{"step": 1, "loss": 4.%070d}\n' 1 >"$TMP/longnumber.json"
printf 'kept' >"$TMP/kept.svg"
bad() { # NAME PATTERN ARGS...
  bad_name=$1 bad_pattern=$2; shift 2
  for out in "$TMP/kept.svg" "$TMP/absent.svg"; do
    expect_error "$bad_name ($(basename "$out"))" "$bad_pattern" "$PLAIT" plot "$@" -o "$out"
  done
  if [ "$(cat "$TMP/kept.svg")" != kept ] || [ -e "$TMP/absent.svg" ] ||
     ls "$TMP" | grep -q '\.tmp\.'; then
    fail "$bad_name leaves the output as it was" "$(ls "$TMP")"
  else pass "$bad_name leaves the output as it was"; fi
}
bad "no step lines" "nosteps.json has no step lines" "$TMP/nosteps.json"
bad "a cut line" "cut.json:3: not JSON at byte 24: expected a member's key" \
  "$TMP/a.json" "$TMP/cut.json"
bad "a loss that is a string" "string.json:2: \"loss\" is a string, not a number" \
  "$TMP/string.json"
bad "a step that is not whole" "halfstep.json:2: step 2.5 is not a whole number" \
  "$TMP/halfstep.json"
bad "a number beyond a double" "huge.json:2: not JSON at byte 20: a number beyond a double's" \
  "$TMP/huge.json"
bad "nesting too deep" "deep.json:1: .*nested more than 32 deep" "$TMP/deep.json"
bad "a number too long to read exactly" \
  "longnumber.json:1: not JSON at byte 20: a number of more than 63 characters" \
  "$TMP/longnumber.json"
bad "text after the object" "trailing.json:2: not JSON at byte 23: more text after the value" \
  "$TMP/trailing.json"
bad "a missing file" "nothere.json: cannot open it \(No such file or directory\)" \
  "$TMP/nothere.json"
mkdir "$TMP/folder.json"
bad "a folder" "folder.json: not a regular file \(a directory\)" "$TMP/folder.json"
head -c 70000 /dev/zero | tr '\0' ' ' >"$TMP/long.json"
bad "a line too long" "long.json:1: the line is longer than 65536 bytes" "$TMP/long.json"
printf '{"step": 1, "loss": 4}\n' >"$TMP/notokens.json"
bad "tokens asked of a log without them" "notokens.json: step 1 has no \"tokens\"" \
  --x tokens "$TMP/notokens.json"
bad "an unknown --x" "--x takes steps or tokens" --x time "$TMP/a.json"
cp "$TMP/a.json" "$TMP/input.json"
expect_error "the output is an input" "-o .*input.json is also an input" \
  "$PLAIT" plot "$TMP/input.json" -o "$TMP/input.json"
if cmp -s "$TMP/a.json" "$TMP/input.json"; then pass "the input is left as it was"
else fail "the input is left as it was" "input.json changed"; fi
