# hf.sh: plait export and plait import with Hugging Face folders, for a GPT-2-shaped and a Llama-shaped
# model: the exported folder has transformers' names, shapes, dtypes and config.json keys; export then
# import gives the weights back bit for bit; BF16 and sharded folders import and train; a family extended
# in the model file lays the fused QKV out head by head; every mismatch is one line, exit 1, nothing
# written.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
ST="python3 tests/tools/st.py"

cat /usr/share/common-licenses/GPL-3 > "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null || { fail data "plait data failed"; exit 0; }

G="layers=2 hidden=32 heads=2 ffn=64 seq=16"
L="layers=2 hidden=32 heads=4 kv_heads=2 ffn=48 seq=16 vocab=256"
# shellcheck disable=SC2086
{ $PLAIT build models/tiny.lua --set $G -o "$TMP/gpt" >"$TMP/build.log" 2>&1 &&
  $PLAIT build models/llama.lua --set $L -o "$TMP/llama" >>"$TMP/build.log" 2>&1 &&
  "$TMP/gpt/train" --data "$TMP/text.bin" --steps 2 --save "$TMP/gpt.ckpt" >/dev/null 2>&1 &&
  "$TMP/llama/train" --data "$TMP/text.bin" --steps 2 --save "$TMP/llama.ckpt" >/dev/null 2>&1; } ||
  { fail setup "$(tail -c 600 "$TMP/build.log")"; exit 0; }

# export: transformers' names, shapes and dtypes, and config.json's keys
# shellcheck disable=SC2086
expect_ok export_gpt2 $PLAIT export models/tiny.lua "$TMP/gpt.ckpt" -o "$TMP/gpt.hf" --set $G
# shellcheck disable=SC2086
expect_ok export_llama $PLAIT export models/llama.lua "$TMP/llama.ckpt" -o "$TMP/llama.hf" --set $L
$ST list "$TMP/gpt.hf/model.safetensors" >"$TMP/gpt.list" 2>&1
cat >"$TMP/gpt.want" <<'EOF'
transformer.h.0.attn.c_attn.bias F32 [96]
transformer.h.0.attn.c_attn.weight F32 [32, 96]
transformer.h.0.attn.c_proj.bias F32 [32]
transformer.h.0.attn.c_proj.weight F32 [32, 32]
transformer.h.0.ln_1.bias F32 [32]
transformer.h.0.ln_1.weight F32 [32]
transformer.h.0.ln_2.bias F32 [32]
transformer.h.0.ln_2.weight F32 [32]
transformer.h.0.mlp.c_fc.bias F32 [64]
transformer.h.0.mlp.c_fc.weight F32 [32, 64]
transformer.h.0.mlp.c_proj.bias F32 [32]
transformer.h.0.mlp.c_proj.weight F32 [64, 32]
EOF
{ grep '^transformer.h.0' "$TMP/gpt.list"; } >"$TMP/gpt.layer0"
if cmp -s "$TMP/gpt.want" "$TMP/gpt.layer0" && grep -q '^transformer.wte.weight F32 \[256, 32\]$' "$TMP/gpt.list" &&
   grep -q '^transformer.wpe.weight F32 \[16, 32\]$' "$TMP/gpt.list" && grep -q '^meta format=pt$' "$TMP/gpt.list" &&
   [ "$(grep -c '^transformer' "$TMP/gpt.list")" = 28 ] && ! grep -q lm_head "$TMP/gpt.list"; then
  pass gpt2_names_shapes_dtypes
else
  fail gpt2_names_shapes_dtypes "$(diff "$TMP/gpt.want" "$TMP/gpt.layer0" | head -5) $(head -c 300 "$TMP/gpt.list")"
fi
$ST list "$TMP/llama.hf/model.safetensors" >"$TMP/llama.list" 2>&1
for want in 'model.embed_tokens.weight F32 \[256, 32\]' 'lm_head.weight F32 \[256, 32\]' 'model.norm.weight F32 \[32\]' \
            'model.layers.1.self_attn.q_proj.weight F32 \[32, 32\]' 'model.layers.1.self_attn.k_proj.weight F32 \[16, 32\]' \
            'model.layers.1.self_attn.v_proj.weight F32 \[16, 32\]' 'model.layers.1.self_attn.o_proj.weight F32 \[32, 32\]' \
            'model.layers.1.mlp.gate_proj.weight F32 \[48, 32\]' 'model.layers.1.mlp.down_proj.weight F32 \[32, 48\]' \
            'model.layers.1.input_layernorm.weight F32 \[32\]' 'model.layers.1.post_attention_layernorm.weight F32 \[32\]'; do
  grep -q "^$want\$" "$TMP/llama.list" || missing="$missing; $want"
done
if [ -z "$missing" ] && [ "$(grep -c '^model\|^lm_head' "$TMP/llama.list")" = 21 ]; then pass llama_names_shapes_dtypes
else fail llama_names_shapes_dtypes "missing$missing"; fi
if python3 - "$TMP/gpt.hf/config.json" "$TMP/llama.hf/config.json" >"$TMP/py" 2>&1 <<'PY'
import json, sys
g, l = (json.load(open(p)) for p in sys.argv[1:])
want_g = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 256, "n_positions": 16, "n_embd": 32,
          "n_layer": 2, "n_head": 2, "n_inner": 64, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05,
          "tie_word_embeddings": True, "torch_dtype": "float32"}
want_l = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 256, "hidden_size": 32,
          "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "max_position_embeddings": 16, "rms_norm_eps": 1e-05, "rope_theta": 10000, "hidden_act": "silu",
          "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False, "head_dim": 8}
for have, want in ((g, want_g), (l, want_l)):
    for k, v in want.items():
        assert have.get(k) == v, "%s: %r, want %r" % (k, have.get(k), v)
PY
then pass config_json_keys; else fail config_json_keys "$(tail -n 2 "$TMP/py")"; fi

# import undoes export, bit for bit
# shellcheck disable=SC2086
expect_ok import_gpt2 $PLAIT import models/tiny.lua "$TMP/gpt.hf" -o "$TMP/gpt.back" --set $G
# shellcheck disable=SC2086
expect_ok import_llama $PLAIT import models/llama.lua "$TMP/llama.hf" -o "$TMP/llama.back" --set $L
for m in gpt llama; do
  if out=$($ST same "$TMP/$m.ckpt/model.safetensors" "$TMP/$m.back/model.safetensors" 2>&1) &&
     $ST list "$TMP/$m.back/model.safetensors" | grep -q '^meta contents=weights$'; then
    pass "${m}_export_import_bit_identical ($out)"
  else fail "${m}_export_import_bit_identical" "$out"; fi
done

# BF16: stored rounded to nearest even, read back exactly, and the import trains
# shellcheck disable=SC2086
if $PLAIT export models/llama.lua "$TMP/llama.ckpt" -o "$TMP/bf16.hf" --dtype bf16 --set $L >/dev/null 2>"$TMP/err" &&
   $PLAIT import models/llama.lua "$TMP/bf16.hf" -o "$TMP/bf16.back" --set $L >/dev/null 2>>"$TMP/err" &&
   grep -q '"torch_dtype": "bfloat16"' "$TMP/bf16.hf/config.json" &&
   [ "$($ST list "$TMP/bf16.hf/model.safetensors" | grep -c ' BF16 ')" = 21 ] &&
   out=$($ST same "$TMP/llama.ckpt/model.safetensors" "$TMP/bf16.back/model.safetensors" bf16 2>&1) &&
   "$TMP/llama/train" --data "$TMP/text.bin" --steps 3 --init "$TMP/bf16.back" >"$TMP/bf16.out" 2>&1 &&
   grep -q '^step 3 | loss' "$TMP/bf16.out"; then
  pass "bf16_import_trains ($out; $(grep '^step 3 ' "$TMP/bf16.out" | cut -d'|' -f2))"
else
  fail bf16_import_trains "$(cat "$TMP/err") $out $(tail -c 300 "$TMP/bf16.out")"
fi

# shards: at most 20 kB each, with the index, read back whole, and the import trains
# shellcheck disable=SC2086
if $PLAIT export models/tiny.lua "$TMP/gpt.ckpt" -o "$TMP/shards.hf" --shard-size 20KB --set $G >/dev/null 2>"$TMP/err" &&
   $PLAIT import models/tiny.lua "$TMP/shards.hf" -o "$TMP/shards.back" --set $G >/dev/null 2>>"$TMP/err" &&
   out=$($ST same "$TMP/gpt.ckpt/model.safetensors" "$TMP/shards.back/model.safetensors" 2>&1) &&
   "$TMP/gpt/train" --data "$TMP/text.bin" --steps 3 --init "$TMP/shards.back" >"$TMP/shards.out" 2>&1 &&
   python3 - "$TMP/shards.hf" >"$TMP/py" 2>&1 <<'PY'
import json, os, struct, sys
d = sys.argv[1]
index = json.load(open(os.path.join(d, "model.safetensors.index.json")))
files = sorted(set(index["weight_map"].values()))
assert len(files) > 2 and not os.path.exists(os.path.join(d, "model.safetensors")), files
assert files[0] == "model-00001-of-%05d.safetensors" % len(files), files[0]
total = 0
for f in files:
    size = os.path.getsize(os.path.join(d, f))
    n = struct.unpack("<Q", open(os.path.join(d, f), "rb").read(8))[0]
    total += size - 8 - n
    head = json.loads(open(os.path.join(d, f), "rb").read()[8:8 + n])
    for name in head:
        assert name == "__metadata__" or index["weight_map"][name] == f, name
assert total == index["metadata"]["total_size"], (total, index["metadata"])
print(len(files), "shards")
PY
then
  pass "sharded_import_trains ($(cat "$TMP/py"); $out)"
else
  fail sharded_import_trains "$(cat "$TMP/err") $out $(cat "$TMP/py") $(tail -c 300 "$TMP/shards.out")"
fi

# a checkpoint with more positions than the model's sequence: the first ones, with a note
# shellcheck disable=SC2086
if $PLAIT build models/tiny.lua --set layers=2 hidden=32 heads=2 ffn=64 seq=32 --emit-only -o "$TMP/long" >/dev/null 2>&1 &&
   $PLAIT build models/tiny.lua --set layers=2 hidden=32 heads=2 ffn=64 seq=32 -o "$TMP/long" >/dev/null 2>&1 &&
   "$TMP/long/train" --data "$TMP/text.bin" --steps 1 --save "$TMP/long.ckpt" >/dev/null 2>&1 &&
   $PLAIT export models/tiny.lua "$TMP/long.ckpt" -o "$TMP/long.hf" --set layers=2 hidden=32 heads=2 ffn=64 seq=32 >/dev/null &&
   $PLAIT import models/tiny.lua "$TMP/long.hf" -o "$TMP/short.back" --set $G >"$TMP/out" 2>"$TMP/err" &&
   grep -q '^note: transformer.wpe.weight has 32 rows, the model.s wpe 16: the first 16 are taken$' "$TMP/out" &&
   out=$($ST rows "$TMP/long.ckpt/model.safetensors" wpe "$TMP/short.back/model.safetensors" wpe 16 2>&1); then
  pass "longer_positions_sliced ($out)"
else
  fail longer_positions_sliced "$(cat "$TMP/out" "$TMP/err") $out"
fi

# round_trip NAME MODEL SETS ARCHITECTURE PRESENT ABSENT: a model trained a step, exported (config.json of
# ARCHITECTURE, a tensor PRESENT and none matching ABSENT) and imported again, bit for bit
round_trip() {
  name=$1 model=$2 sets=$3 arch=$4 present=$5 absent=$6
  # shellcheck disable=SC2086
  if $PLAIT build "$model" --set $sets -o "$TMP/$name" >/dev/null 2>"$TMP/err" &&
     "$TMP/$name/train" --data "$TMP/text.bin" --steps 1 --save "$TMP/$name.ckpt" >/dev/null 2>>"$TMP/err" &&
     $PLAIT export "$model" "$TMP/$name.ckpt" -o "$TMP/$name.hf" --set $sets >/dev/null 2>>"$TMP/err" &&
     $ST list "$TMP/$name.hf/model.safetensors" | grep -q "^$present\$" &&
     ! $ST list "$TMP/$name.hf/model.safetensors" | grep -q "$absent" && grep -q "\"$arch\"" "$TMP/$name.hf/config.json" &&
     $PLAIT import "$model" "$TMP/$name.hf" -o "$TMP/$name.back" --set $sets >/dev/null 2>>"$TMP/err" &&
     out=$($ST same "$TMP/$name.ckpt/model.safetensors" "$TMP/$name.back/model.safetensors" 2>&1); then
    pass "${name}_export_import ($out)"
  else
    fail "${name}_export_import" "$(tail -c 400 "$TMP/err") $out"
  fi
}
# Qwen2: Llama's tensors with biases on q, k and v and none on the output projection
round_trip qwen2 models/qwen2.lua "layers=2 hidden=32 heads=4 kv_heads=2 ffn=48 seq=16 vocab=256" Qwen2ForCausalLM \
  'model.layers.1.self_attn.k_proj.bias F32 \[16\]' o_proj.bias
# OLMo-2: norms after the attention and the MLP, and of the whole q and k
round_trip olmo2 models/olmo2.lua "layers=2 hidden=32 heads=4 kv_heads=2 ffn=48 seq=16 vocab=256" Olmo2ForCausalLM \
  'model.layers.1.self_attn.k_norm.weight F32 \[16\]' input_layernorm
# Gemma: heads of head_dim wider than hidden/heads, (1 + w) norms, tied (no lm_head)
round_trip gemma models/gemma.lua "layers=2 hidden=32 heads=4 kv_heads=2 head_dim=16 ffn=48 seq=16 vocab=256" \
  GemmaForCausalLM 'model.layers.0.self_attn.q_proj.weight F32 \[64, 32\]' lm_head

# vocabulary padding: a vocabulary of 250 is padded to 256 at tp 2; the padded rows are not exported, and
# an import runs at tp 2 again (padding added as zeros)
V="layers=2 hidden=32 heads=4 kv_heads=2 ffn=48 seq=16 vocab=250"
# shellcheck disable=SC2086
if $PLAIT build models/llama.lua --set $V --tp 2 -o "$TMP/padded" >/dev/null 2>"$TMP/err" &&
   "$TMP/padded/train" --data "$TMP/text.bin" --steps 1 --save "$TMP/padded.ckpt" >/dev/null 2>>"$TMP/err" &&
   $PLAIT export models/llama.lua "$TMP/padded.ckpt" -o "$TMP/padded.hf" --set $V >/dev/null 2>>"$TMP/err" &&
   $ST list "$TMP/padded.hf/model.safetensors" | grep -q '^model.embed_tokens.weight F32 \[250, 32\]$' &&
   $ST list "$TMP/padded.hf/model.safetensors" | grep -q '^lm_head.weight F32 \[250, 32\]$' &&
   $PLAIT import models/llama.lua "$TMP/padded.hf" -o "$TMP/padded.back" --set $V >/dev/null 2>>"$TMP/err" &&
   "$TMP/padded/train" --data "$TMP/text.bin" --steps 2 --init "$TMP/padded.back" >"$TMP/padded.out" 2>>"$TMP/err"; then
  pass "vocabulary_padding_not_exported ($(grep -c '^step' "$TMP/padded.out") steps at tp 2 from the import)"
else
  fail vocabulary_padding_not_exported "$(tail -c 400 "$TMP/err")"
fi

# a family extended in the model file: q, k and v interleaved head by head, and back
if $PLAIT export tests/cli/models/tiny_per_head.lua "$TMP/gpt.ckpt" -o "$TMP/perhead.hf" >/dev/null 2>"$TMP/err" &&
   out=$($ST perhead "$TMP/gpt.ckpt/model.safetensors" "$TMP/perhead.hf/model.safetensors" 1 2 2>&1) &&
   $PLAIT import tests/cli/models/tiny_per_head.lua "$TMP/perhead.hf" -o "$TMP/perhead.back" >/dev/null 2>>"$TMP/err" &&
   same=$($ST same "$TMP/gpt.ckpt/model.safetensors" "$TMP/perhead.back/model.safetensors" 2>&1) &&
   ! cmp -s "$TMP/perhead.hf/model.safetensors" "$TMP/gpt.hf/model.safetensors"; then
  pass "extended_family_per_head ($out; $same)"
else
  fail extended_family_per_head "$(cat "$TMP/err") $out $same"
fi

# an entry of several names: export writes the first (embed_out.weight), import reads either
EO="$TMP/eo"
# shellcheck disable=SC2086
if $PLAIT build tests/cli/models/tiny_embed_out.lua --set $G -o "$EO" >/dev/null 2>"$TMP/err" &&
   "$EO/train" --data "$TMP/text.bin" --steps 1 --save "$EO.ckpt" >/dev/null 2>>"$TMP/err" &&
   $PLAIT export tests/cli/models/tiny_embed_out.lua "$EO.ckpt" -o "$EO.hf" --set $G \
     >/dev/null 2>>"$TMP/err" &&
   $ST list "$EO.hf/model.safetensors" | grep -q '^embed_out.weight F32 \[256, 32\]$' &&
   ! $ST list "$EO.hf/model.safetensors" | grep -q '^lm_head' &&
   $ST rename "$EO.hf/model.safetensors" embed_out.weight lm_head.weight &&
   $PLAIT import tests/cli/models/tiny_embed_out.lua "$EO.hf" -o "$EO.back" --set $G \
     >/dev/null 2>>"$TMP/err" &&
   out=$($ST same "$EO.ckpt/model.safetensors" "$EO.back/model.safetensors" 2>&1); then
  pass "entry_of_several_names ($out)"
else
  fail entry_of_several_names "$(tail -c 400 "$TMP/err") $out"
fi
$ST drop "$EO.hf/model.safetensors" lm_head.weight
# shellcheck disable=SC2086
expect_error entry_of_several_names_missing \
  "eo.hf has no tensor embed_out.weight \(nor lm_head.weight\), which the model.s lm_head.weight" \
  $PLAIT import tests/cli/models/tiny_embed_out.lua "$EO.hf" -o "$TMP/out.ckpt" --set $G

# mismatches: one line each, exit 1, nothing written
nothing_written() { # name, folder
  if [ -e "$2" ]; then fail "$1_wrote_nothing" "$2 exists"; else pass "$1_wrote_nothing"; fi
}
broken() { # name: a copy of the GPT-2 folder to damage
  rm -rf "$TMP/$1.hf"
  cp -r "$TMP/gpt.hf" "$TMP/$1.hf"
}
# Mistral v0.2's "sliding_window": null is no window (--set sliding_window=none), not transformers'
# default 4096, which only a missing key means: export writes null, import asks for none, and the
# model's program attends without a window
M="layers=2 hidden=32 heads=4 kv_heads=2 ffn=48 seq=16 vocab=256"
round_trip mistral_no_window models/mistral.lua "$M sliding_window=none" MistralForCausalLM \
  'model.layers.1.self_attn.k_proj.weight F32 \[16, 32\]' bias
NULL_HF="$TMP/mistral_no_window.hf" MISSING_HF="$TMP/mistral_default.hf"
if grep -q '"sliding_window": null' "$NULL_HF/config.json"; then pass mistral_exports_null
else fail mistral_exports_null "$(grep sliding "$NULL_HF/config.json")"; fi
HAS="config.json has sliding_window"
# shellcheck disable=SC2086
expect_error mistral_null_is_no_window \
  "$HAS = null, the model has sliding_window = 8; import it with --set sliding_window=none$" \
  $PLAIT import models/mistral.lua "$NULL_HF" -o "$TMP/out.ckpt" --set $M sliding_window=8
nothing_written mistral_null_is_no_window "$TMP/out.ckpt"
# config.json is compared before the model is traced: Mistral's default window of 4096, longer than
# this sequence of 16, would stop the trace; the config's line and its --set come first
# shellcheck disable=SC2086
NONE="import it with --set sliding_window=none"
expect_error mistral_config_before_trace \
  "^plait: $HAS = null, the model has sliding_window = 4096; $NONE$" \
  $PLAIT import models/mistral.lua "$NULL_HF" -o "$TMP/out.ckpt" --set $M
cp -r "$NULL_HF" "$MISSING_HF"
sed -i '/"sliding_window"/d' "$MISSING_HF/config.json"
# shellcheck disable=SC2086
expect_error mistral_missing_is_4096 \
  "$HAS = 4096, the model has sliding_window = none; import it with --set sliding_window=4096$" \
  $PLAIT import models/mistral.lua "$MISSING_HF" -o "$TMP/out.ckpt" --set $M sliding_window=none
emit() { # folder, sliding_window
  # shellcheck disable=SC2086
  $PLAIT build models/mistral.lua --set $M "sliding_window=$2" --emit-only -o "$1" >/dev/null 2>&1
}
if emit "$TMP/nowin" none && emit "$TMP/win" 8 &&
   ! grep -rq '\.window = ' "$TMP/nowin" && grep -rq '\.window = 8' "$TMP/win"; then
  pass mistral_none_attends_without_window
else
  fail mistral_none_attends_without_window \
    "$(grep -rho '\.window = [0-9]*' "$TMP/nowin" "$TMP/win" | sort -u)"
fi
broken missing
$ST drop "$TMP/missing.hf/model.safetensors" transformer.h.1.ln_2.bias
# shellcheck disable=SC2086
expect_error missing_tensor "missing.hf has no tensor transformer.h.1.ln_2.bias, which the model.s layers.1.ln_2.bias comes from" \
  $PLAIT import models/tiny.lua "$TMP/missing.hf" -o "$TMP/out.ckpt" --set $G
nothing_written missing_tensor "$TMP/out.ckpt"
broken extra
$ST add "$TMP/extra.hf/model.safetensors" transformer.h.0.attn.rotary
# shellcheck disable=SC2086
expect_error extra_tensor "holds tensor transformer.h.0.attn.rotary, which the model has no place for" \
  $PLAIT import models/tiny.lua "$TMP/extra.hf" -o "$TMP/out.ckpt" --set $G
nothing_written extra_tensor "$TMP/out.ckpt"
broken shape
$ST cut "$TMP/shape.hf/model.safetensors" transformer.wte.weight 255
# shellcheck disable=SC2086
expect_error another_shape "tensor transformer.wte.weight has shape \\[255, 32\\], the model needs \\[256, 32\\]" \
  $PLAIT import models/tiny.lua "$TMP/shape.hf" -o "$TMP/out.ckpt" --set $G
nothing_written another_shape "$TMP/out.ckpt"
broken config
sed -i 's/"n_head": 2/"n_head": 4/' "$TMP/config.hf/config.json"
# shellcheck disable=SC2086
expect_error config_disagreement "config.json has n_head = 4, the model has heads = 2; import it with --set heads=4" \
  $PLAIT import models/tiny.lua "$TMP/config.hf" -o "$TMP/out.ckpt" --set $G
nothing_written config_disagreement "$TMP/out.ckpt"
# a hint is a --set plait takes and that changes the model; else the line says none does
HINT_NONE="check that the folder is this model's$"
broken hint_fraction
sed -i 's/"n_layer": 2/"n_layer": 4.5/' "$TMP/hint_fraction.hf/config.json"
# shellcheck disable=SC2086
expect_error hint_not_a_whole_number \
  "config.json has n_layer = 4.5, the model has layers = 2; no --set layers gives the model config.json's 4.5: $HINT_NONE" \
  $PLAIT import models/tiny.lua "$TMP/hint_fraction.hf" -o "$TMP/out.ckpt" --set $G
nothing_written hint_not_a_whole_number "$TMP/out.ckpt"
broken hint_same
sed -i 's/"n_embd": 32/"n_embd": "32"/' "$TMP/hint_same.hf/config.json"
# shellcheck disable=SC2086
expect_error hint_not_the_same_value \
  "config.json has n_embd = \"32\", the model has hidden = 32; no --set hidden gives the model config.json's \"32\": $HINT_NONE" \
  $PLAIT import models/tiny.lua "$TMP/hint_same.hf" -o "$TMP/out.ckpt" --set $G
nothing_written hint_not_the_same_value "$TMP/out.ckpt"
# a key config.json lacks is transformers' default for its model_type (plait.hf.defaults: GPT-2's
# n_embd is 768); a family of a model_type transformers does not know has none, and import says so
broken no_n_embd
sed -i '/"n_embd"/d' "$TMP/no_n_embd.hf/config.json"
# shellcheck disable=SC2086
expect_error missing_key_takes_transformers_default \
  "config.json has n_embd = 768, the model has hidden = 32; import it with --set hidden=768" \
  $PLAIT import models/tiny.lua "$TMP/no_n_embd.hf" -o "$TMP/out.ckpt" --set $G
# shellcheck disable=SC2086
NO_KEY="config.json has no n_embd, and neither the gpt2-own-type family nor transformers'"
expect_error missing_key_without_default "$NO_KEY defaults of its" \
  $PLAIT import tests/cli/models/tiny_own_type.lua "$TMP/no_n_embd.hf" -o "$TMP/out.ckpt"
nothing_written missing_key_without_default "$TMP/out.ckpt"
# shellcheck disable=SC2086
expect_error another_architecture "config.json is of LlamaForCausalLM \\(model_type llama\\), the model.s family gpt2 reads GPT2LMHeadModel" \
  $PLAIT import models/tiny.lua "$TMP/llama.hf" -o "$TMP/out.ckpt" --set $G
KNOWN="bert, cohere, falcon, gemma, gemma2, gpt2, gpt_neox, gptj, llama, mistral, mixtral, olmo2"
KNOWN="$KNOWN, olmoe, phi, qwen2, qwen2_moe, qwen3, qwen3_moe, stablelm, stablelm2, starcoder2"
UNKNOWN="model 'tiny' names an unknown Hugging Face family 'neox'"
expect_error unknown_family "$UNKNOWN \\(plait knows $KNOWN\\)" \
  $PLAIT import tests/cli/models/unknown_family.lua "$TMP/gpt.hf" -o "$TMP/out.ckpt"
expect_error no_family "model 'primitives' declares no Hugging Face family" \
  $PLAIT export tests/cli/models/primitives.lua "$TMP/gpt.ckpt" -o "$TMP/out.hf"
nothing_written no_family "$TMP/out.hf"
# a model of learned positions (wpe) importing Llama's: the family's requirement says to set its
# positions, and a family without that requirement says so of wpe
# shellcheck disable=SC2086
expect_error positions_by_set "^plait: the model has positions = learned, the llama family takes \
positions = rope; import it with --set positions=rope$" \
  $PLAIT import models/llama.lua "$TMP/llama.hf" -o "$TMP/out.ckpt" --set $L positions=learned
expect_error positions_in_model_file "^plait: the model has positions = learned, the llama family \
takes positions = rope; set positions = \"rope\" in the model file's plait.config$" \
  $PLAIT import tests/cli/models/llama_no_positions.lua "$TMP/llama.hf" -o "$TMP/out.ckpt"
expect_error positions_wpe_no_place "^plait: the model's tensor wpe \(learned positions\) has no \
place in the llama-any family: where its checkpoints hold no position table, set the model's \
positions" \
  $PLAIT import tests/cli/models/llama_no_positions.lua "$TMP/llama.hf" -o "$TMP/out.ckpt" \
  --set any_positions=true
nothing_written positions_wpe_no_place "$TMP/out.ckpt"
# a bad key anywhere in a family the model file declares is one line naming it
for bad in "drop|drop names 'transformer.h.%d.attn.bais', which family gpt2 has no entry for" \
           "entry|family gpt2-entry: config entry 5: unknown field 'hf_defualt'" \
           "table|plait.hf.family: unknown field 'tensor'"; do
  expect_error "family_bad_${bad%%|*}" "${bad#*|}\$" \
    $PLAIT export tests/cli/models/family_bad_key.lua "$TMP/gpt.ckpt" -o "$TMP/out.hf" \
    --set "bad=${bad%%|*}"
  nothing_written "family_bad_${bad%%|*}" "$TMP/out.hf"
done
# shellcheck disable=SC2086
expect_error import_over_its_source "-o .*gpt.hf is the Hugging Face folder itself" \
  $PLAIT import models/tiny.lua "$TMP/gpt.hf" -o "$TMP/gpt.hf" --set $G
expect_error no_config_json "cannot read .*nowhere/config.json" $PLAIT import models/tiny.lua "$TMP/nowhere" -o "$TMP/out.ckpt"
# the folder's files are regular files of its own: a FIFO is refused at once, never waited on; a shard
# that leads outside the folder (a name, an absolute path, a link) is refused; a Hugging Face cache's
# snapshot, whose files link to its blobs, imports
FIFO_FIX="not a regular file \(a FIFO\); plait reads regular files only, give the path of one$"
fifo_in() { # name, file of a copy of the GPT-2 folder made a FIFO
  broken "$1"
  rm -f "$TMP/$1.hf/$2" && mkfifo "$TMP/$1.hf/$2"
  # shellcheck disable=SC2086
  within "$1_ends" 10 expect_error "$1" "^plait: .*$1.hf/$2: $FIFO_FIX" \
    timeout 20 $PLAIT import models/tiny.lua "$TMP/$1.hf" -o "$TMP/out.ckpt" --set $G
  nothing_written "$1" "$TMP/out.ckpt"
}
fifo_in fifo_config config.json
fifo_in fifo_index model.safetensors.index.json
fifo_in fifo_weights model.safetensors
shard_at() { # name, file the index names, pattern of the message[, where that file links to]
  rm -rf "$TMP/$1.hf" && cp -r "$TMP/shards.hf" "$TMP/$1.hf"
  [ -z "${4:-}" ] || ln -s "$4" "$TMP/$1.hf/$2"
  python3 - "$TMP/$1.hf/model.safetensors.index.json" "$2" <<'PY'
import json, sys
index = json.load(open(sys.argv[1]))
index["weight_map"][sorted(index["weight_map"])[0]] = sys.argv[2]
json.dump(index, open(sys.argv[1], "w"))
PY
  sums=$(cd "$TMP/$1.hf" && md5sum ./* ../gpt.hf/*)
  # shellcheck disable=SC2086
  expect_error "$1" "$3" $PLAIT import models/tiny.lua "$TMP/$1.hf" -o "$TMP/out.ckpt" --set $G
  nothing_written "$1" "$TMP/out.ckpt"
  if [ "$sums" = "$(cd "$TMP/$1.hf" && md5sum ./* ../gpt.hf/*)" ]; then pass "$1_unchanged"
  else fail "$1_unchanged" "the folder's files changed"; fi
}
OUT_FIX="import reads the folder's own files only: copy the file into the folder$"
shard_at shard_absolute "$TMP/gpt.hf/model.safetensors" \
  "maps .* to '$TMP/gpt.hf/model.safetensors', not a file beside it"
shard_at shard_relative ../gpt.hf/model.safetensors "maps .* to '../gpt.hf/model.safetensors', not a file beside it"
shard_at shard_parent .. "^plait: .*shard_parent.hf/\.\. leads outside .*shard_parent.hf \(to $TMP\); $OUT_FIX"
shard_at shard_link_out model-link.safetensors \
  "^plait: .*shard_link_out.hf/model-link.safetensors leads outside .*shard_link_out.hf \(to $TMP/gpt.hf/model.safetensors\); $OUT_FIX" \
  "$TMP/gpt.hf/model.safetensors"
mkdir -p "$TMP/cache/blobs" "$TMP/cache/snapshots/abc"
cp "$TMP/gpt.hf/model.safetensors" "$TMP/cache/blobs/0123"
cp "$TMP/gpt.hf/config.json" "$TMP/cache/snapshots/abc/"
ln -s ../../blobs/0123 "$TMP/cache/snapshots/abc/model.safetensors"
# shellcheck disable=SC2086
expect_ok cache_snapshot_imports $PLAIT import models/tiny.lua "$TMP/cache/snapshots/abc" -o "$TMP/cache.ckpt" --set $G
# export: a checkpoint of another configuration, over its own folder, a dtype it does not write
# shellcheck disable=SC2086
expect_error export_another_configuration "saved with heads = 2, this model has heads = 4" \
  $PLAIT export models/tiny.lua "$TMP/gpt.ckpt" -o "$TMP/out.hf" --set $G heads=4
nothing_written export_another_configuration "$TMP/out.hf"
# shellcheck disable=SC2086
expect_error export_over_its_source "-o .*gpt.ckpt is the plait checkpoint's folder" \
  $PLAIT export models/tiny.lua "$TMP/gpt.ckpt" -o "$TMP/gpt.ckpt" --set $G
# shellcheck disable=SC2086
expect_error export_dtype "--dtype f8: export writes f32, bf16, f16 or f64" \
  $PLAIT export models/tiny.lua "$TMP/gpt.ckpt" -o "$TMP/out.hf" --dtype f8 --set $G
# a second export into the same folder with fewer shards leaves no stale shard behind
# shellcheck disable=SC2086
if $PLAIT export models/tiny.lua "$TMP/gpt.ckpt" -o "$TMP/shards.hf" --set $G >/dev/null 2>"$TMP/err" &&
   [ "$(ls "$TMP/shards.hf")" = "$(printf 'config.json\nmodel.safetensors')" ]; then
  pass export_replaces_stale_shards
else
  fail export_replaces_stale_shards "$(ls "$TMP/shards.hf" | tr '\n' ' ') $(cat "$TMP/err")"
fi

# a NaN or an infinity in the weights is refused wherever weights are read, naming the tensor and the
# place: import (a transformers file has no checksums), --load and --init of a plait checkpoint (its
# checksums dropped, as a file written before them), export
cp -r "$TMP/gpt.hf" "$TMP/nan.hf"
$ST unsum "$TMP/nan.hf/model.safetensors"
$ST nan "$TMP/nan.hf/model.safetensors" transformer.h.0.attn.c_attn.weight 37
# shellcheck disable=SC2086
expect_error import_refuses_nan "tensor 'transformer.h.0.attn.c_attn.weight' holds a NaN at \\[0, 37\\]: its values are damaged" \
  $PLAIT import models/tiny.lua "$TMP/nan.hf" -o "$TMP/nan.ckpt" --set $G
nothing_written import_refuses_nan "$TMP/nan.ckpt"
cp -r "$TMP/gpt.ckpt" "$TMP/nan.ckpt"
$ST unsum "$TMP/nan.ckpt/model.safetensors"
$ST nan "$TMP/nan.ckpt/model.safetensors" wte 3
expect_error load_refuses_nan "tensor 'wte' holds a NaN at \\[0, 3\\]" \
  "$TMP/gpt/train" --data "$TMP/text.bin" --steps 1 --load "$TMP/nan.ckpt"
expect_error init_refuses_nan "tensor 'wte' holds a NaN at \\[0, 3\\]" \
  "$TMP/gpt/train" --data "$TMP/text.bin" --steps 1 --init "$TMP/nan.ckpt"
expect_error eval_refuses_nan "tensor 'wte' holds a NaN at \\[0, 3\\]" \
  "$TMP/gpt/train" --eval "$TMP/text.bin" --init "$TMP/nan.ckpt"
# shellcheck disable=SC2086
expect_error export_refuses_nan "tensor 'wte' holds a NaN at \\[0, 3\\]" \
  $PLAIT export models/tiny.lua "$TMP/nan.ckpt" -o "$TMP/nan.out.hf" --set $G
nothing_written export_refuses_nan "$TMP/nan.out.hf"
# finite weights whose forward overflows: --eval ends with one line, not "loss nan" and exit 0
cp -r "$TMP/gpt.ckpt" "$TMP/huge.ckpt"
$ST unsum "$TMP/huge.ckpt/model.safetensors"
$ST fill "$TMP/huge.ckpt/model.safetensors" layers.0.ln_1.weight 3e38
expect_error eval_refuses_a_nan_loss "text.bin: the loss is NaN: the weights overflow on this data" \
  "$TMP/gpt/train" --eval "$TMP/text.bin" --init "$TMP/huge.ckpt"

# a Gemma-2 config.json without layer_types takes transformers' alternating layers for its own
# number of layers (num_hidden_layers), as transformers does
G2="layers=2 hidden=32 heads=2 kv_heads=1 head_dim=16 ffn=64 seq=16 vocab=256 sliding_window=8"
# shellcheck disable=SC2086
if $PLAIT build models/gemma2.lua --set $G2 -o "$TMP/g2" >/dev/null 2>&1 &&
   "$TMP/g2/train" --data "$TMP/text.bin" --steps 1 --save "$TMP/g2.ckpt" >/dev/null 2>&1 &&
   $PLAIT export models/gemma2.lua "$TMP/g2.ckpt" -o "$TMP/g2.hf" --set $G2 >/dev/null 2>&1 &&
   python3 -c 'import json, sys; p = sys.argv[1]; c = json.load(open(p)); c.pop("layer_types")
json.dump(c, open(p, "w"))' "$TMP/g2.hf/config.json" &&
   $PLAIT import models/gemma2.lua "$TMP/g2.hf" -o "$TMP/g2.back" --set $G2 >"$TMP/g2.out" 2>&1
then pass gemma2_layer_types_from_layers
else fail gemma2_layer_types_from_layers "$(tail -c 300 "$TMP/g2.out" 2>/dev/null)"; fi
