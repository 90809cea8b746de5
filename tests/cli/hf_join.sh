# hf_join.sh: families that join several Hugging Face tensors into one of the model's: StableLM-2's
# LayerNorm per head of q and k (norms.{h}, joined along the weight's axis) and a GPT-2 family whose
# position table is one tensor per position (stacked along a new axis) and whose output projection
# is one Conv1D block per head (joined along the model's second axis). Export writes each piece
# under its name with its block's values, import joins them back bit for bit, and an index missing
# from the folder or beyond the model's count is one line naming the tensor, exit 1, nothing
# written.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
ST="python3 tests/tools/st.py"

cat /usr/share/common-licenses/GPL-3 > "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null ||
  { fail data "plait data failed"; exit 0; }

G="layers=2 hidden=32 heads=2 ffn=64 seq=16"
S="layers=2 hidden=64 heads=4 kv_heads=2 ffn=96 seq=16 vocab=256 parallel=false qkv_bias=true"
# shellcheck disable=SC2086
{ $PLAIT build models/tiny.lua --set $G -o "$TMP/gpt" >"$TMP/build.log" 2>&1 &&
  $PLAIT build models/stablelm2.lua --set $S -o "$TMP/slm" >>"$TMP/build.log" 2>&1 &&
  "$TMP/gpt/train" --data "$TMP/text.bin" --steps 2 --save "$TMP/gpt.ckpt" >/dev/null 2>&1 &&
  "$TMP/slm/train" --data "$TMP/text.bin" --steps 2 --save "$TMP/slm.ckpt" >/dev/null 2>&1 &&
  $PLAIT export models/tiny.lua "$TMP/gpt.ckpt" -o "$TMP/gpt.hf" --set $G >/dev/null 2>&1; } ||
  { fail setup "$(tail -c 600 "$TMP/build.log")"; exit 0; }

# pieces PYTHON_CHECK ARGS...: tests/tools/st.py's reader for a check written in Python
pieces() {
  PYTHONPATH=tests/tools python3 - "$@" >"$TMP/py" 2>&1
}

# StableLM-2: q_layernorm.norms.{h}.weight is head h's run of the model's q_norm.weight (4 heads of
# 16), k_layernorm's of its k_norm.weight (2 kv heads)
# shellcheck disable=SC2086
if $PLAIT export models/stablelm2.lua "$TMP/slm.ckpt" -o "$TMP/slm.hf" --set $S \
     >/dev/null 2>"$TMP/err" &&
   pieces "$TMP/slm.ckpt/model.safetensors" "$TMP/slm.hf/model.safetensors" <<'PY'
import sys, st
ours, _ = st.read(sys.argv[1])
theirs, _ = st.read(sys.argv[2])
count = 0
for layer in range(2):
    for kind, heads in (("q", 4), ("k", 2)):
        whole = ours["layers.%d.attn.%s_norm.weight" % (layer, kind)][2]
        for h in range(heads + 1):
            name = "model.layers.%d.self_attn.%s_layernorm.norms.%d.weight" % (layer, kind, h)
            if h == heads:
                assert name not in theirs, name
                continue
            dtype, shape, blob = theirs[name]
            assert (dtype, shape) == ("F32", [16]), (name, dtype, shape)
            assert blob == whole[h * 64:(h + 1) * 64], name
            count += 1
assert not any("q_norm" in n or "k_norm" in n for n in theirs)
print(count, "norms")
PY
then pass "stablelm2_norms_per_head ($(cat "$TMP/py"))"
else fail stablelm2_norms_per_head "$(cat "$TMP/err" "$TMP/py")"; fi
# shellcheck disable=SC2086
if $PLAIT import models/stablelm2.lua "$TMP/slm.hf" -o "$TMP/slm.back" --set $S \
     >/dev/null 2>"$TMP/err" &&
   out=$($ST same "$TMP/slm.ckpt/model.safetensors" "$TMP/slm.back/model.safetensors" 2>&1); then
  pass "stablelm2_export_import_bit_identical ($out)"
else fail stablelm2_export_import_bit_identical "$(cat "$TMP/err") $out"; fi

# GPT-2 in pieces: transformer.wpe.{t}.weight is row t of wpe, c_proj.heads.{h}.weight head h's rows
# of GPT-2's own c_proj.weight (Conv1D, [in, out]: the model's axis 1 is its axis 0)
JOINED=tests/cli/models/tiny_joined.lua
if $PLAIT export $JOINED "$TMP/gpt.ckpt" -o "$TMP/joined.hf" >/dev/null 2>"$TMP/err" &&
   pieces "$TMP/gpt.hf/model.safetensors" "$TMP/joined.hf/model.safetensors" <<'PY'
import sys, st
whole, _ = st.read(sys.argv[1])
pieces, _ = st.read(sys.argv[2])
row = 32 * 4
for t in range(16):
    dtype, shape, blob = pieces["transformer.wpe.%d.weight" % t]
    assert shape == [32] and blob == whole["transformer.wpe.weight"][2][t * row:(t + 1) * row], t
for layer in range(2):
    proj = whole["transformer.h.%d.attn.c_proj.weight" % layer][2]
    for h in range(2):
        dtype, shape, blob = pieces["transformer.h.%d.attn.c_proj.heads.%d.weight" % (layer, h)]
        assert shape == [16, 32] and blob == proj[h * 16 * row:(h + 1) * 16 * row], (layer, h)
assert "transformer.wpe.weight" not in pieces and "transformer.h.0.attn.c_proj.weight" not in pieces
print(len(pieces), "tensors")
PY
then pass "joined_pieces_stacked_and_by_head ($(cat "$TMP/py"))"
else fail joined_pieces_stacked_and_by_head "$(cat "$TMP/err" "$TMP/py")"; fi
if $PLAIT import $JOINED "$TMP/joined.hf" -o "$TMP/joined.back" >/dev/null 2>"$TMP/err" &&
   out=$($ST same "$TMP/gpt.ckpt/model.safetensors" "$TMP/joined.back/model.safetensors" 2>&1); then
  pass "joined_export_import_bit_identical ($out)"
else fail joined_export_import_bit_identical "$(cat "$TMP/err") $out"; fi

# an index missing, or one beyond the model's count: one line naming the tensor and the fix, exit 1,
# nothing written
damaged() { # name, folder to copy
  rm -rf "$TMP/$1.hf" && cp -r "$2" "$TMP/$1.hf"
}
refused() { # name, pattern, model, sets...
  name=$1 pattern=$2 model=$3; shift 3
  # shellcheck disable=SC2086
  expect_error "$name" "$pattern" $PLAIT import "$model" "$TMP/$name.hf" -o "$TMP/$name.out" "$@"
  if [ -e "$TMP/$name.out" ]; then fail "${name}_wrote_nothing" "$TMP/$name.out exists"
  else pass "${name}_wrote_nothing"; fi
}
NORM=model.layers.0.self_attn.q_layernorm.norms
damaged norm_missing "$TMP/slm.hf"
$ST drop "$TMP/norm_missing.hf/model.safetensors" $NORM.3.weight
# shellcheck disable=SC2086
refused norm_missing "^plait: .*norm_missing.hf has no tensor $NORM.3.weight, index 3 of the 4 \
\(heads\) joined into the model's layers.0.attn.q_norm.weight; give a folder that holds all 4$" \
  models/stablelm2.lua --set $S
damaged norm_extra "$TMP/slm.hf"
$ST add "$TMP/norm_extra.hf/model.safetensors" model.layers.1.self_attn.k_layernorm.norms.2.weight
# shellcheck disable=SC2086
refused norm_extra "^plait: .*norm_extra.hf/model.safetensors holds tensor \
model.layers.1.self_attn.k_layernorm.norms.2.weight, index 2 beyond the 2 \(kv_heads\) joined into \
the model's layers.1.attn.k_norm.weight; give a folder whose tensors match its config.json, or a \
family whose join takes it$" models/stablelm2.lua --set $S
damaged position_extra "$TMP/joined.hf"
$ST add "$TMP/position_extra.hf/model.safetensors" wpe.16.weight
refused position_extra "holds tensor wpe.16.weight, index 16 beyond the 16 \(seq\) joined into the \
model's wpe; " $JOINED
damaged head_missing "$TMP/joined.hf"
$ST drop "$TMP/head_missing.hf/model.safetensors" transformer.h.1.attn.c_proj.heads.0.weight
refused head_missing "has no tensor transformer.h.1.attn.c_proj.heads.0.weight, index 0 of the 2 \
\(heads\) joined into the model's layers.1.attn.proj.weight" $JOINED
# a join declared wrong: a name without its index, a count that does not divide the axis
BAD=tests/cli/models/family_bad_key.lua
for bad in "join|family gpt2-join: tensors entry 2: 'transformer.wpe.weight' must hold \{t\} once" \
           "join_count|transformer.wpe.\{t\}.weight joins 5 tensors along axis 0 of the model's \
wpe, of shape \[16, 32\]: 5 must divide that axis"; do
  # shellcheck disable=SC2086
  expect_error "family_bad_${bad%%|*}" "${bad#*|}\$" \
    $PLAIT export $BAD "$TMP/gpt.ckpt" -o "$TMP/bad.hf" --set "bad=${bad%%|*}"
  if [ -e "$TMP/bad.hf" ]; then fail "family_bad_${bad%%|*}_wrote_nothing" "$TMP/bad.hf exists"
  else pass "family_bad_${bad%%|*}_wrote_nothing"; fi
done
