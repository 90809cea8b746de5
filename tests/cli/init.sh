#!/bin/sh
# init.sh: a program's parameters at step 0, read from its checkpoint: matrices and embeddings drawn from
# N(0, 0.02), the output projections of residual branches from N(0, 0.02/√(2·layers)), norm weights
# one and biases zero, and the same values under another layout (each element drawn at its global index).
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
cat /usr/share/common-licenses/GPL-3 >"$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" --val-fraction 0 >/dev/null || { fail init_data "plait data failed"; exit 0; }
for layout in one "tp2 --tp 2 --pp 2"; do
  name=${layout%% *} flags=${layout#"$name"}
  # shellcheck disable=SC2086
  $PLAIT build models/tiny.lua --set layers=8 $flags -o "$TMP/$name" >/dev/null 2>&1 &&
    "$TMP/$name/train" --data "$TMP/text.bin" --steps 0 --save "$TMP/$name.ckpt" >/dev/null 2>"$TMP/err" ||
    fail "init_$name" "$(cat "$TMP/err")"
done
if python3 - "$TMP/one.ckpt/model.safetensors" "$TMP/tp2.ckpt/model.safetensors" >"$TMP/py" 2>&1 <<'PY'
import json, math, struct, sys
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    out = {}
    for name, t in head.items():
        if name == "__metadata__" or not t["dtype"] == "F32": continue
        b, e = t["data_offsets"]
        out[name] = struct.unpack("<%df" % ((e - b) // 4), raw[8 + n + b:8 + n + e])
    return out
one, other = tensors(sys.argv[1]), tensors(sys.argv[2])
weights = {k: v for k, v in one.items() if not k.startswith("adam.")}
def std(v): return math.sqrt(sum(x * x for x in v) / len(v))
bad = []
for name, v in weights.items():
    kind = name.split(".")[-2] if "." in name else name
    if kind.startswith("ln") and name.endswith("weight"): want = "ones"
    elif name.endswith("bias"): want = "zeros"
    elif kind == "proj": want = 0.02 / math.sqrt(2 * 8)
    else: want = 0.02
    if want == "ones" and any(x != 1.0 for x in v): bad.append(name + ": not all ones")
    if want == "zeros" and any(x != 0.0 for x in v): bad.append(name + ": not all zeros")
    if isinstance(want, float) and abs(std(v) / want - 1) > 0.1:
        bad.append("%s: std %.5f, expected %.5f" % (name, std(v), want))
    if v != other.get(name): bad.append(name + ": differs under tp 2, pp 2")
print("; ".join(bad[:5]) if bad else "%d tensors; wte std %.5f, layers.0.attn.proj.weight std %.5f" %
      (len(weights), std(one["wte"]), std(one["layers.0.attn.proj.weight"])))
sys.exit(1 if bad or len(weights) != 4 + 8 * 16 else 0)
PY
then pass "init_distributions ($(cat "$TMP/py"))"; else fail init_distributions "$(cat "$TMP/py")"; fi
