# hf_moe.sh: the mixtures of experts' families, whose files hold one tensor per expert that the
# model stacks into one: Mixtral's block_sparse_moe.experts.{e}.w1/w3/w2 and Qwen2-MoE's
# mlp.experts.{e}.gate_proj/up_proj/down_proj beside its shared expert. Export writes expert e's
# block of each stacked tensor under its name, import stacks them back bit for bit, a folder missing
# one expert's tensor is one line naming it (exit 1, nothing written), and a Qwen2-MoE config.json
# with dense layers (mlp_only_layers, decoder_sparse_step) is refused in one line.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
ST="python3 tests/tools/st.py"

fixed_text "$TMP/text.txt"
$PLAIT data --bytes "$TMP/text.txt" -o "$TMP/text.bin" >/dev/null ||
  { fail data "plait data failed"; exit 0; }

M="layers=2 hidden=32 heads=4 kv_heads=2 ffn=24 experts=4 topk=2 seq=16 vocab=256"
Q="layers=2 hidden=32 heads=4 kv_heads=2 ffn=48 expert_ffn=16 shared_ffn=24 experts=4 topk=2 \
seq=16 vocab=256"
# trained (name, model, sets): a checkpoint after one step, exported
trained() {
  # shellcheck disable=SC2086
  $PLAIT build "$2" --set $3 -o "$TMP/$1" >>"$TMP/build.log" 2>&1 &&
    "$TMP/$1/train" --data "$TMP/text.bin" --steps 1 --save "$TMP/$1.ckpt" >/dev/null 2>&1 &&
    $PLAIT export "$2" "$TMP/$1.ckpt" -o "$TMP/$1.hf" --set $3 >/dev/null 2>>"$TMP/build.log"
}
{ trained mixtral models/mixtral.lua "$M" && trained qwen2_moe models/qwen2_moe.lua "$Q"; } ||
  { fail setup "$(tail -c 600 "$TMP/build.log")"; exit 0; }

# pieces CKPT HF MOE NAMES: each expert's tensor in HF is its block of CKPT's stacked tensor, under
# MOE's prefix (w1, w3, w2 as NAMES says), of the right shape, and nothing else of the experts
pieces() {
  PYTHONPATH=tests/tools python3 - "$@" >"$TMP/py" 2>&1 <<'PY'
import sys, st
ours, _ = st.read(sys.argv[1])
theirs, _ = st.read(sys.argv[2])
moe, names = sys.argv[3], sys.argv[4].split(",")
count = 0
for layer in range(2):
    for w, name in zip(("w1", "w3", "w2"), names):
        dtype, shape, whole = ours["layers.%d.%s.experts.%s" % (layer, moe, w)]
        assert shape[0] == 4, shape
        block = len(whole) // 4
        for e in range(4):
            key = "model.layers.%d.%s.experts.%d.%s.weight" % (layer, moe, e, name)
            assert theirs[key][:2] == ("F32", shape[1:]), (key, theirs[key][:2], shape)
            assert theirs[key][2] == whole[e * block:(e + 1) * block], key
            count += 1
experts = [n for n in theirs if ".experts." in n]
assert len(experts) == count, sorted(experts)
print(count, "expert tensors")
PY
}
if pieces "$TMP/mixtral.ckpt/model.safetensors" "$TMP/mixtral.hf/model.safetensors" \
     block_sparse_moe w1,w3,w2; then
  pass "mixtral_one_tensor_per_expert ($(cat "$TMP/py"))"
else fail mixtral_one_tensor_per_expert "$(cat "$TMP/py")"; fi
if pieces "$TMP/qwen2_moe.ckpt/model.safetensors" "$TMP/qwen2_moe.hf/model.safetensors" \
     mlp gate_proj,up_proj,down_proj &&
   $ST list "$TMP/qwen2_moe.hf/model.safetensors" |
     grep -q '^model.layers.1.mlp.shared_expert_gate.weight F32 \[1, 32\]$'; then
  pass "qwen2_moe_one_tensor_per_expert ($(cat "$TMP/py"), a shared expert)"
else fail qwen2_moe_one_tensor_per_expert "$(cat "$TMP/py")"; fi

# export then import: every tensor back bit for bit
for name in mixtral qwen2_moe; do
  sets=$M
  [ "$name" = qwen2_moe ] && sets=$Q
  # shellcheck disable=SC2086
  if $PLAIT import "models/$name.lua" "$TMP/$name.hf" -o "$TMP/$name.back" --set $sets \
       >/dev/null 2>"$TMP/err" &&
     out=$($ST same "$TMP/$name.ckpt/model.safetensors" "$TMP/$name.back/model.safetensors" 2>&1)
  then pass "${name}_export_import_bit_identical ($out)"
  else fail "${name}_export_import_bit_identical" "$(cat "$TMP/err") $out"; fi
done

# refused (name, pattern, model, sets): one line, exit 1, nothing written
refused() {
  name=$1 pattern=$2 model=$3 sets=$4
  # shellcheck disable=SC2086
  expect_error "$name" "$pattern" $PLAIT import "$model" "$TMP/$name.hf" -o "$TMP/$name.out" \
    --set $sets
  if [ -e "$TMP/$name.out" ]; then fail "${name}_wrote_nothing" "$TMP/$name.out exists"
  else pass "${name}_wrote_nothing"; fi
}
cp -r "$TMP/mixtral.hf" "$TMP/expert_missing.hf"
W3=model.layers.1.block_sparse_moe.experts.2.w3.weight
$ST drop "$TMP/expert_missing.hf/model.safetensors" $W3
refused expert_missing "^plait: .*expert_missing.hf has no tensor $W3, index 2 of the 4 \
\(experts\) joined into the model's layers.1.block_sparse_moe.experts.w3; give a folder that \
holds all 4$" models/mixtral.lua "$M"

# dense_layers KEY VALUE: Qwen2-MoE's folder with config.json's KEY set to VALUE
dense_layers() {
  rm -rf "$TMP/$1.hf" && cp -r "$TMP/qwen2_moe.hf" "$TMP/$1.hf" &&
    python3 - "$TMP/$1.hf/config.json" "$1" "$2" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config[sys.argv[2]] = json.loads(sys.argv[3])
json.dump(config, open(sys.argv[1], "w"))
PY
}
dense_layers mlp_only_layers "[1]"
refused mlp_only_layers "^plait: config.json has mlp_only_layers = \[1\], which plait does not \
compute \(the qwen2_moe family takes \[\]\)$" models/qwen2_moe.lua "$Q"
dense_layers decoder_sparse_step 2
refused decoder_sparse_step "^plait: config.json has decoder_sparse_step = 2, which plait does \
not compute \(the qwen2_moe family takes 1\)$" models/qwen2_moe.lua "$Q"
