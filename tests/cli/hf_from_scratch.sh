# hf_from_scratch.sh: docs/hf.md's walk-through, a model file with a family of its own for an
# architecture plait does not ship (tests/cli/models/internlm2.lua: InternLM2): it plans at
# InternLM2-7B's published size; a small InternLM2 folder written here without torch imports, its
# fused wqkv split by kv head as InternLM2 lays it out; the import trains; and export gives the
# folder's tensors back byte for byte under their names, with config.json's keys.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
MODEL=tests/cli/models/internlm2.lua
S="vocab=256 hidden=64 heads=4 kv_heads=2 ffn=96 layers=2 seq=32"

if $PLAIT plan $MODEL >"$TMP/plan" 2>&1 && grep -q '^parameters  7737708544 ' "$TMP/plan"; then
  pass "plans_internlm2_7b ($(grep '^parameters' "$TMP/plan"))"
else fail plans_internlm2_7b "$(head -c 400 "$TMP/plan")"; fi

# a folder as InternLM2's save_pretrained writes it: config.json and model.safetensors, 2 layers
# of 64 with 4 heads sharing 2 kv heads, values drawn from a seeded generator
if PYTHONPATH=tests/tools python3 - "$TMP/hf" >"$TMP/py" 2>&1 <<'PY'
import json, os, random, struct, sys, st
out = sys.argv[1]
rng = random.Random(7)
V, H, NH, KV, F, LAYERS = 256, 64, 4, 2, 96, 2
D = H // NH
shapes = {"model.tok_embeddings.weight": [V, H], "model.norm.weight": [H], "output.weight": [V, H]}
for layer in range(LAYERS):
    p = "model.layers.%d." % layer
    shapes.update({p + "attention_norm.weight": [H], p + "ffn_norm.weight": [H],
                   p + "attention.wqkv.weight": [(NH + 2 * KV) * D, H],
                   p + "attention.wo.weight": [H, NH * D],
                   p + "feed_forward.w1.weight": [F, H], p + "feed_forward.w3.weight": [F, H],
                   p + "feed_forward.w2.weight": [H, F]})
tensors = {}
for name, shape in shapes.items():
    n = shape[0] * (shape[1] if len(shape) > 1 else 1)
    values = [rng.gauss(0, 0.02) + (1 if name.endswith("norm.weight") else 0) for _ in range(n)]
    tensors[name] = ("F32", shape, struct.pack("<%df" % n, *values))
os.makedirs(out)
st.write(os.path.join(out, "model.safetensors"), tensors, {"format": "pt"})
config = {"architectures": ["InternLM2ForCausalLM"], "model_type": "internlm2", "vocab_size": V,
          "hidden_size": H, "intermediate_size": F, "num_hidden_layers": LAYERS,
          "num_attention_heads": NH, "num_key_value_heads": KV, "max_position_embeddings": 64,
          "rms_norm_eps": 1e-5, "rope_theta": 1000000, "bias": False, "tie_word_embeddings": False,
          "hidden_act": "silu", "rope_scaling": {"type": "dynamic", "factor": 2.0},
          "auto_map": {"AutoModelForCausalLM": "modeling_internlm2.InternLM2ForCausalLM"}}
json.dump(config, open(os.path.join(out, "config.json"), "w"), indent=2)
print(len(tensors), "tensors")
PY
then pass "writes_internlm2_folder ($(cat "$TMP/py"))"
else fail writes_internlm2_folder "$(cat "$TMP/py")"; exit 0; fi

# shellcheck disable=SC2086
expect_ok imports $PLAIT import $MODEL "$TMP/hf" -o "$TMP/ckpt" --set $S
# wqkv by kv head g: its 2 q heads, its k head, its v head (16 rows each)
if PYTHONPATH=tests/tools python3 - "$TMP/hf/model.safetensors" "$TMP/ckpt/model.safetensors" \
     >"$TMP/py" 2>&1 <<'PY'
import sys, st
theirs, _ = st.read(sys.argv[1])
ours, _ = st.read(sys.argv[2])
row = 64 * 4
for layer in range(2):
    wqkv = theirs["model.layers.%d.attention.wqkv.weight" % layer][2]
    q, k, v = (ours["layers.%d.attn.%s.weight" % (layer, part)][2] for part in "qkv")
    for g in range(2):
        block = wqkv[g * 4 * 16 * row:(g + 1) * 4 * 16 * row]
        assert block[:32 * row] == q[g * 32 * row:(g + 1) * 32 * row], (layer, g, "q")
        assert block[32 * row:48 * row] == k[g * 16 * row:(g + 1) * 16 * row], (layer, g, "k")
        assert block[48 * row:] == v[g * 16 * row:(g + 1) * 16 * row], (layer, g, "v")
print("wqkv split by kv head")
PY
then pass "wqkv_split_by_kv_head ($(cat "$TMP/py"))"
else fail wqkv_split_by_kv_head "$(cat "$TMP/py")"; fi

cat /usr/share/common-licenses/GPL-3 >"$TMP/text.txt"
# shellcheck disable=SC2086
if $PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null 2>"$TMP/err" &&
   $PLAIT build $MODEL --set $S -o "$TMP/prog" >/dev/null 2>>"$TMP/err" &&
   "$TMP/prog/train" --init "$TMP/ckpt" --data "$TMP/text.bin" --steps 2 \
     >"$TMP/train" 2>>"$TMP/err" &&
   grep -q '^step 2 | loss' "$TMP/train"; then
  pass "import_trains ($(grep '^step 2 ' "$TMP/train" | cut -d'|' -f2))"
else fail import_trains "$(tail -c 400 "$TMP/err") $(tail -c 200 "$TMP/train")"; fi

# export: the folder's tensors byte for byte, config.json's mapped keys as they were
# shellcheck disable=SC2086
expect_ok exports $PLAIT export $MODEL "$TMP/ckpt" -o "$TMP/back" --set $S
if PYTHONPATH=tests/tools python3 - "$TMP/hf" "$TMP/back" >"$TMP/py" 2>&1 <<'PY'
import json, os, sys, st
theirs, _ = st.read(os.path.join(sys.argv[1], "model.safetensors"))
back, _ = st.read(os.path.join(sys.argv[2], "model.safetensors"))
assert sorted(back) == sorted(theirs), sorted(set(back) ^ set(theirs))
for name in theirs:
    assert back[name] == theirs[name], name
want = json.load(open(os.path.join(sys.argv[1], "config.json")))
have = json.load(open(os.path.join(sys.argv[2], "config.json")))
for key in ("architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size",
            "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "rms_norm_eps",
            "rope_theta", "bias", "tie_word_embeddings", "hidden_act"):
    assert have[key] == want[key], (key, have[key], want[key])
print(len(back), "tensors byte for byte")
PY
then pass "export_round_trip_byte_identical ($(cat "$TMP/py"))"
else fail export_round_trip_byte_identical "$(cat "$TMP/py")"; fi
