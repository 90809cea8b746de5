# sandbox.sh: a model file is a stranger's code. Every way into plait's own tables it might try (changing
# a module it requires, the strings' or files' metatable, a tensor's or the record's metatable, reaching
# plait's internal modules and entry points, calling the library out of order or with arguments of the
# wrong kind, changing its record after plait.model) ends in one line naming its line, never a crash;
# and the same attempts swallowed by pcall leave plait as it was: an import afterwards reads the folder's
# files only, and writes the same checkpoint as a plain model file.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
mkdir -p "$TMP/m"

# model NAME TOP [BLOCK [HEAD]]: $TMP/m/NAME.lua, a small GPT-2 whose line 3 is TOP, whose block runs BLOCK
# on its input x first and whose head runs HEAD on its loss last.
model() {
  cat >"$TMP/m/$1.lua" <<EOF
local plait = require "plait"
local nn = require "plait.nn"
$2
local cfg = plait.config { vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 2, ffn = 64 }
local function block(L, x)
  ${3:-}
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end
local function head(S, x, targets)
  local loss = nn.lm_head(S, x, targets)
  ${4:-}
  return loss
end
return plait.model { name = "tiny", family = "gpt2", config = cfg, embed = nn.embedding, block = block,
                     head = head }
EOF
}

# attempt NAME PATTERN TOP [BLOCK [HEAD]]: the model file fails with one line: its line, then PATTERN.
attempt() {
  model "$1" "$3" "${4:-}" "${5:-}"
  expect_error "$1" "^plait: $TMP/m/$1.lua:[0-9]+: $2" timeout 60 $PLAIT plan "$TMP/m/$1.lua"
}

# plait's modules are read-only views
attempt change_plait "plait is plait's: a model file reads it and cannot change it \(plait.matmul\)$" \
  'plait.matmul = function() end'
attempt replace_trace "plait is plait's: .*\(plait._trace\)$" 'plait._trace = function() end'
attempt change_nn "plait.nn is plait's: .*\(plait.nn.linear\)$" 'nn.linear = nil'
attempt replace_hf_files "plait.hf is plait's: .*\(plait.hf._files\)$" \
  'require("plait.hf")._files = function() return { "../private.safetensors" } end'
attempt change_hf_family "plait.hf.families.gpt2 is plait's: .*\(plait.hf.families.gpt2.tensors\)$" \
  'require("plait.hf").families.gpt2.tensors = {}'
attempt change_hf_entry "plait.hf.families.gpt2.config.1 is plait's: .*\(plait.hf.families.gpt2.config.1.hf\)$" \
  'require("plait.hf").families.gpt2.config[1].hf = "x"'
attempt change_json "plait.json is plait's: .*\(plait.json.decode\)$" 'require("plait.json").decode = print'
attempt change_tensor_class "plait.Tensor is plait's: .*\(plait.Tensor.shape\)$" 'plait.Tensor.shape = nil'
attempt change_scope_class "plait.Scope is plait's: .*\(plait.Scope.param\)$" 'plait.Scope.param = nil'
# plait's entry points and internal modules are out of reach
attempt call_trace "attempt to call a nil value \(field '_trace'\)$" 'plait._trace({}, 1)'
attempt call_hf_files "attempt to call a nil value \(field '_files'\)$" 'require("plait.hf")._files("/etc")'
attempt require_core "module 'plait.core' is plait's own: a model file requires plait, plait.nn, plait.hf, plait.json" \
  'require "plait.core"'
attempt require_sandbox "module 'plait.sandbox' is plait's own" 'require "plait.sandbox"'
attempt require_limits "module 'plait.limits' is plait's own" 'require "plait.limits"'
# metatables of plait's
attempt string_index "attempt to index a nil value \(field '__index'\)$" 'getmetatable("").__index.find = nil'
attempt string_metatable "the strings' metatable is plait's: .*\(the strings' metatable.__index\)$" \
  'getmetatable("").__index = {}'
attempt file_metatable "the files' metatable is plait's: .*\(the files' metatable.__index\)$" \
  'getmetatable(io.open("file_metatable.lua")).__index = {}'
attempt tensor_metatable "plait.Tensor is plait's: .*\(plait.Tensor.__add\)$" '' 'getmetatable(x).__add = nil'
attempt tensor_setmetatable "cannot change a protected metatable$" '' 'setmetatable(x, {})'
attempt record_metatable "cannot change a protected metatable$" \
  'setmetatable(plait.model { name = "m", config = { seq = 1, hidden = 1 }, layers = 1, embed = print, block = print,
                              head = print }, {})'
attempt view_metatable "cannot change a protected metatable$" 'setmetatable(plait, {})'

# the library called out of order, and with arguments of the wrong kind
attempt tensor_outside_trace "tensors can only be made while plait traces a model's stages$" \
  'plait.Scope.new("", {}, 1, false):param("w", { 8 })'
attempt norm_of_scalar "a norm takes a tensor of at least one axis, not a scalar$" '' '' 'plait.norm("rms", loss)'
attempt dropout_of_number "dropout of a number alone: it takes a tensor$" '' 'plait.dropout(3, 0.5)'
attempt heads_out_of_range "argument 4: 1099511627776 is out of range$" '' \
  'plait.attention(x, x, x, { heads = 2^40 })'
attempt forged_tensor "a tensor from another stage was used in stage block" '' \
  'x = x + setmetatable({ id = 10^9 }, { __metatable = getmetatable(x) })'
attempt split_too_wide "split: part 1's size must be a whole number from 1 to 2147483647$" '' \
  'plait.split(x, -1, { 2^40 })'
attempt rope_of_scalar "rope takes \[batch, seq, heads·head_dim\], not a tensor of 0 axes$" '' '' \
  'plait.rope(loss, { head_dim = 2 })'
attempt xent_of_scalar "cross entropy takes a tensor of at least one axis, not a scalar$" '' '' \
  'plait.cross_entropy(loss, targets)'
# a record changed after plait.model is checked again
model changed_record 'local fix = true'
sed -i 's/^return plait.model {/local m = plait.model {/' "$TMP/m/changed_record.lua"
{ cat "$TMP/m/changed_record.lua"; echo 'm.layers = 2^40'; echo 'return m'; } >"$TMP/m/changed_layers.lua"
{ cat "$TMP/m/changed_record.lua"; echo 'm.name = {}'; echo 'return m'; } >"$TMP/m/changed_name.lua"
expect_error changed_layers "^plait: $TMP/m/changed_layers.lua: plait.model: 'layers' must be a whole number from 1 to 2\^20$" \
  $PLAIT plan "$TMP/m/changed_layers.lua"
expect_error changed_name "^plait: $TMP/m/changed_name.lua: the model's name must be a string$" \
  $PLAIT plan "$TMP/m/changed_name.lua"

# A model file's own copies: changing its string, table and math changes nothing of plait's.
model own_copies 'string.format, string.find, table.concat, math.floor, string.rep = nil, nil, nil, nil, nil'
expect_ok own_copies_leave_plait_alone $PLAIT plan "$TMP/m/own_copies.lua"

# The same attempts caught by pcall, then an import: it reads the folder's files only and writes what a
# plain model file's import writes.
python3 - "$TMP" <<'PY' || fail setup "could not write the Hugging Face folders"
import json, struct, sys
tmp = sys.argv[1]
def tensors(layers, value):
    shapes = {"transformer.wte.weight": [256, 32], "transformer.wpe.weight": [16, 32],
              "transformer.ln_f.weight": [32], "transformer.ln_f.bias": [32]}
    for l in range(layers):
        for name, shape in [("attn.c_attn.weight", [32, 96]), ("attn.c_attn.bias", [96]),
                            ("attn.c_proj.weight", [32, 32]), ("attn.c_proj.bias", [32]),
                            ("ln_1.weight", [32]), ("ln_1.bias", [32]), ("ln_2.weight", [32]), ("ln_2.bias", [32]),
                            ("mlp.c_fc.weight", [32, 64]), ("mlp.c_fc.bias", [64]),
                            ("mlp.c_proj.weight", [64, 32]), ("mlp.c_proj.bias", [32])]:
            shapes["transformer.h.%d.%s" % (l, name)] = shape
    header, blobs, at = {}, [], 0
    for i, name in enumerate(sorted(shapes)):
        n = 1
        for d in shapes[name]: n *= d
        blob = struct.pack("<%df" % n, *[value * ((i + k) % 7 - 3) for k in range(n)])
        header[name] = {"dtype": "F32", "shape": shapes[name], "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"".join(blobs)
import os
os.makedirs(tmp + "/hf", exist_ok=True)
open(tmp + "/hf/model.safetensors", "wb").write(tensors(2, 0.01))
open(tmp + "/private.safetensors", "wb").write(tensors(2, 0.5))
json.dump({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 256, "n_positions": 16,
           "n_embd": 32, "n_layer": 2, "n_head": 2, "n_inner": 64, "activation_function": "gelu_new"},
          open(tmp + "/hf/config.json", "w"))
PY
model plain ''
model swallowed 'local hf = require "plait.hf"
for _, try in ipairs({
  function() hf._files = function() return { "../private.safetensors" } end end,
  function() rawset(hf, "_files", function() return { "../private.safetensors" } end) end,
  function() getmetatable("").__index.find = function() return nil end end,
  function() rawset(getmetatable(""), "__index", { find = function() return nil end }) end,
  function() rawset(getmetatable(io.open("plain.lua")), "__index", {}) end,
  function() hf.families.gpt2.tensors[1].hf = "transformer.wpe.weight" end,
  function() getmetatable(hf.family { name = "f", architecture = "A", model_type = "t", config = {}, tensors = {},
                                      layer = {} }).__name = "x" end,
}) do pcall(try) end'
expect_ok import_plain $PLAIT import "$TMP/m/plain.lua" "$TMP/hf" -o "$TMP/plain.ckpt"
expect_ok import_after_attempts $PLAIT import "$TMP/m/swallowed.lua" "$TMP/hf" -o "$TMP/swallowed.ckpt"
if cmp -s "$TMP/plain.ckpt/model.safetensors" "$TMP/swallowed.ckpt/model.safetensors"; then
  pass import_reads_only_its_folder
else
  fail import_reads_only_its_folder "the checkpoints differ"
fi

# Errors of every kind name the model file's line: Lua's own, those raised by C functions, values that
# are not messages; control characters in them are shown escaped.
attempt compare_kinds "attempt to compare string with number$" 'local x = "a" < 1'
attempt c_stack_overflow "C stack overflow$" \
  'local function f() return string.gsub("a", "a", f) end f()'
attempt error_table "the model file raised an error that is not a message \(a table\); raise a string" \
  'error({ 1, 2 })'
attempt error_nil "the model file raised an error that is not a message \(a nil\); raise a string" 'error(nil)'
attempt error_escapes 'bad \\x1b\[31mred \\x07$' 'error("bad \27[31mred \7")'
if grep -q "$(printf '\033')" "$TMP/err"; then fail error_escapes_raw "ESC reached stderr raw"
else pass error_escapes_raw; fi

# The files a model file reads are regular files: a FIFO (io.open, io.lines, require) is refused at
# once, never waited on; regular files read as with Lua's io.
mkfifo "$TMP/m/pipe" "$TMP/m/pipemod.lua"
FIFO_FIX="not a regular file \(a FIFO\); plait reads regular files only, give the path of one$"
within io_open_fifo_ends 10 attempt io_open_fifo "$TMP/m/pipe: $FIFO_FIX" 'local f = io.open("pipe")'
within io_lines_fifo_ends 10 attempt io_lines_fifo "$TMP/m/pipe: $FIFO_FIX" 'for l in io.lines("pipe") do end'
within require_fifo_ends 10 attempt require_fifo "$TMP/m/pipemod.lua: $FIFO_FIX" 'require "pipemod"'
within model_fifo_ends 10 expect_error model_fifo \
  "^plait: cannot open model file $TMP/m/pipe: not a regular file \(a FIFO\); give a model file" \
  timeout 20 $PLAIT plan "$TMP/m/pipe"
model reads_files 'local n = 0
for line in io.lines("plain.lua") do n = n + 1 end
local f = assert(io.open("plain.lua", "rb"))
assert(n > 5 and f:read("l") == "local plait = require \"plait\"" and f:close())'
expect_ok reads_regular_files $PLAIT plan "$TMP/m/reads_files.lua"
