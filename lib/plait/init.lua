-- plait: the language model files are written in: tensors with operators, parameters in scopes,
-- configuration with command-line overrides, and the model record the compiler traces.
local core = require "plait.core"
local readonly = require "plait.readonly"

local plait = {}

---------------------------------------------------------------------------------------------------
-- Errors name the model file's line, not the library's.

-- "file:line" of the innermost caller outside lib/plait; the model file's name where no frame of it is
-- left (a stage that is a library function).
function plait.fail(fmt, ...)
  error(core.where() .. ": " .. string.format(fmt, ...), 0)
end
local fail = plait.fail

---------------------------------------------------------------------------------------------------
-- Tensors: a handle on a value of the graph being traced.

local Tensor = {}
Tensor.__index = Tensor
plait.Tensor = Tensor

local function wrap(id) return setmetatable({ id = id }, Tensor) end

local tensor_view = readonly.seal(Tensor, "plait.Tensor")
local function is_tensor(x) return getmetatable(x) == tensor_view end
plait.is_tensor = is_tensor

local function operand(x, what)
  if is_tensor(x) then return x end
  if type(x) == "number" then return x end
  fail("%s expects a tensor or a number, got %s", what, type(x))
end

local function ew(op, a, b)
  return wrap(core.ew(op, operand(a, op), b ~= nil and operand(b, op) or nil))
end

Tensor.__add = function(a, b) return ew("add", a, b) end
Tensor.__sub = function(a, b) return ew("sub", a, b) end
Tensor.__mul = function(a, b) return ew("mul", a, b) end
Tensor.__div = function(a, b) return ew("div", a, b) end
Tensor.__unm = function(a) return ew("neg", a) end

-- x:shape() is a list of { name = "hidden", size = 768 }; x:size(i) the size of axis i (negative from the end).
function Tensor:shape() return core.shape(self) end
function Tensor:size(i)
  local s = core.shape(self)
  if i < 0 then i = #s + 1 + i end
  if not s[i] then fail("axis %d out of range for a tensor of %d axes", i, #s) end
  return s[i].size
end
function Tensor:dim(i)
  local s = core.shape(self)
  if i < 0 then i = #s + 1 + i end
  if not s[i] then fail("axis %d out of range for a tensor of %d axes", i, #s) end
  return s[i].name
end

-- The elementwise functions of one operand or two (tensors or numbers, broadcast from the right), as
-- the compiler lists them (compiler/ir/expr.h's EXPR_OPS). gelu is the tanh approximation (GPT-2,
-- Megatron); gelu_exact is x·Φ(x) with the error function (BERT, GPT-NeoX, Falcon). min and max: the
-- gradient goes to the operand chosen, the first on a tie; comparisons (gt, ge) give 1 where they hold,
-- else 0 (for masks; no gradient flows through them).
for _, op in ipairs(core.ew_functions) do
  local name, arity = op[1], op[2]
  if arity == 1 then plait[name] = function(x) return ew(name, x) end
  else plait[name] = function(a, b) return ew(name, a, b) end end
  Tensor[name] = plait[name]
end
function plait.lt(a, b) return ew("gt", b, a) end
function plait.le(a, b) return ew("ge", b, a) end
Tensor.lt, Tensor.le = plait.lt, plait.le

function plait.square(x) return operand(x, "square") * x end

-- x limited to [lo, hi]; either bound may be nil.
function plait.clamp(x, lo, hi)
  if lo ~= nil then x = plait.max(x, lo) end
  if hi ~= nil then x = plait.min(x, hi) end
  return x
end

-- c·tanh(x/c): x softly limited to (−c, c), as Gemma-2 caps attention and output logits.
function plait.softcap(x, c)
  if type(c) ~= "number" or c <= 0 then fail("softcap needs a positive number, got %s", tostring(c)) end
  return c * plait.tanh(x / c)
end
Tensor.square, Tensor.clamp, Tensor.softcap = plait.square, plait.clamp, plait.softcap

-- Inverted dropout: keeps each unit with probability 1-p and scales it by 1/(1-p).
function plait.dropout(x, p)
  if type(p) ~= "number" or p < 0 or p >= 1 then fail("dropout probability must be in [0, 1), got %s", tostring(p)) end
  if p == 0 then return x end
  return wrap(core.dropout(operand(x, "dropout"), p))
end
Tensor.dropout = plait.dropout

---------------------------------------------------------------------------------------------------
-- Primitives beyond elementwise ones.

-- a·b, or a·bᵀ with { transpose = true }: a's last axis meets b's first (or last).
function plait.matmul(a, b, opts)
  opts = opts or {}
  return wrap(core.matmul(operand(a, "matmul"), operand(b, "matmul"), opts.transpose and true or false))
end

-- kind "layer" (weight and bias, or a weight alone: bias nil) or "rms" (weight only), over the
-- last axis, or with group = g over each run of g elements of it (a norm per head: QK-norm), the
-- weight g wide; without weight (and bias), the norm alone.
function plait.norm(kind, x, weight, bias, eps, group)
  return wrap(core.norm(kind, x, weight, bias, eps or 1e-5, group))
end

-- Rotary positions on x [b, seq, heads·head_dim]: in each head of opts.head_dim dims the first
-- opts.rotary (default: opts.fraction of the head, else all of it) turn by t·freq_i at position t, pairs
-- (i, i + rotary/2) (rotate half: Llama, NeoX) or, with opts.interleaved, (2i, 2i + 1) (GPT-J);
-- freq_i = theta^(−2i/rotary) (opts.theta, default 10000), scaled by opts.scaling: { type = "linear",
-- factor = f } or { type = "llama3", factor = 8, low_freq_factor = 1, high_freq_factor = 4,
-- original_positions = 8192 } (Llama 3.1's values by default).
local scaling_defaults = { linear = { factor = 1 },
                           llama3 = { factor = 8, low_freq_factor = 1, high_freq_factor = 4, original_positions = 8192 } }

local function positive(v, what)
  if type(v) ~= "number" or v <= 0 then fail("rope: %s must be a positive number, got %s", what, tostring(v)) end
  return v
end

local function rope_scaling(sc)
  if sc == nil then return "none" end
  if type(sc) ~= "table" then fail("rope: scaling must be a table such as { type = \"llama3\", factor = 8 }") end
  local defaults = scaling_defaults[sc.type]
  if not defaults then fail("rope: unknown scaling type '%s' (linear, llama3)", tostring(sc.type)) end
  local v = {}
  for k, d in pairs(defaults) do v[k] = positive(sc[k] == nil and d or sc[k], "scaling." .. k) end
  for k in pairs(sc) do
    if k ~= "type" and defaults[k] == nil then fail("rope: scaling %s takes no field '%s'", sc.type, tostring(k)) end
  end
  if sc.type == "llama3" and v.high_freq_factor <= v.low_freq_factor then
    fail("rope: llama3 scaling needs high_freq_factor > low_freq_factor, got %s and %s", v.high_freq_factor, v.low_freq_factor)
  end
  return sc.type, v.factor, v.low_freq_factor, v.high_freq_factor, v.original_positions
end

function plait.rope(x, opts)
  opts = opts or {}
  local head_dim = opts.head_dim
  if type(head_dim) ~= "number" or head_dim < 2 or head_dim ~= math.floor(head_dim) then
    fail("rope needs head_dim, a whole number of at least 2, got %s", tostring(head_dim))
  end
  local rotary = opts.rotary
  if rotary == nil then
    local fraction = opts.fraction or 1
    if type(fraction) ~= "number" or fraction <= 0 or fraction > 1 then
      fail("rope: fraction must be in (0, 1], got %s", tostring(fraction))
    end
    rotary = math.floor(head_dim * fraction)
  end
  return wrap(core.rope(operand(x, "rope"), head_dim, math.tointeger(rotary) or rotary, opts.interleaved and true or false,
                        positive(opts.theta or 10000, "theta"), rope_scaling(opts.scaling)))
end
Tensor.rope = plait.rope

-- Parts along the last axis (axis -1, or the number of the last): x:split(-1, {a, b, c}) takes a tensor of
-- a + b + c elements there apart; with opts.groups = g it is g runs of a + b + c and each part takes its
-- run from every group (a fused q, k, v laid out by head, g = heads, as Megatron lays it out: a column
-- split by whole heads then splits on each rank alone). plait.concat({a, b, c}, -1, {groups = g}) joins
-- them back. Under tensor parallelism the groups must divide among the ranks.
local function last_axis_only(x, axis, what)
  local n = #x:shape()
  if axis ~= -1 and axis ~= n then fail("%s: only along the last axis (-1 or %d), not %s", what, n, tostring(axis)) end
end

local function groups_of(opts, what)
  local g = opts and opts.groups or 1
  if type(g) ~= "number" or g < 1 or g ~= math.floor(g) then fail("%s: groups must be a positive whole number", what) end
  return math.tointeger(g)
end

function plait.split(x, axis, sizes, opts)
  operand(x, "split")
  last_axis_only(x, axis, "split")
  if type(sizes) ~= "table" or #sizes == 0 then fail("split takes a list of part sizes, such as {64, 64, 64}") end
  local parts = {}
  for i = 1, #sizes do parts[i] = wrap(core.split(x, groups_of(opts, "split"), sizes, i - 1)) end
  return table.unpack(parts)
end
Tensor.split = plait.split

function plait.concat(list, axis, opts)
  if type(list) ~= "table" or #list == 0 then fail("concat takes a list of tensors") end
  for i, t in ipairs(list) do
    if not is_tensor(t) then fail("concat: element %d is a %s, not a tensor", i, type(t)) end
  end
  last_axis_only(list[1], axis, "concat")
  return wrap(core.concat(list, groups_of(opts, "concat")))
end

-- q: [b, seq, heads·head_dim], k and v: [b, seq, kv_heads·head_dim]; opts: heads, kv_heads, causal, rope
-- (true: rotary positions over whole heads inside the attention kernel; a table: plait.rope's options,
-- applied to q and k first), rope_theta, window (causal: each query sees itself and the window − 1
-- positions before it: Mistral's sliding window), softcap (scores capped to c·tanh(s/c): Gemma-2), scale
-- (scores q·k·scale; default 1/√head_dim), alibi (scores less slope_h·|t − t'|, BLOOM's slopes: ALiBi).
function plait.attention(q, k, v, opts)
  local rope = opts.rope
  if type(rope) == "table" then
    local ropts = { theta = opts.rope_theta }
    for key, value in pairs(rope) do ropts[key] = value end
    ropts.head_dim = ropts.head_dim or q:size(-1) // opts.heads
    q, k, rope = plait.rope(q, ropts), plait.rope(k, ropts), false
  end
  for _, key in ipairs({ "window", "softcap", "scale" }) do
    local x = opts[key]
    if x == false then x = nil end -- false: none (a layer without the window its config sets)
    if x ~= nil and (type(x) ~= "number" or x <= 0 or (key == "window" and x ~= math.floor(x))) then
      fail("attention: %s must be a positive %s, got %s", key, key == "window" and "whole number" or "number", tostring(x))
    end
  end
  return wrap(core.attention(q, k, v, opts.heads, opts.kv_heads or opts.heads,
    opts.causal and true or false, rope and true or false, opts.rope_theta or 10000,
    opts.window and math.tointeger(opts.window) or nil, opts.softcap or nil, opts.scale or nil, opts.alibi and true or false))
end

-- The k largest along the last axis, largest first: values [.., k] and their indices [.., k]
-- (integers), a tie going to the lower index (as torch.topk does on the CPU). The values' gradient
-- goes back to where they were taken from; at a tie between the k-th and the next the choice, and
-- so the gradient, jumps.
function plait.topk(x, k)
  operand(x, "topk")
  if type(k) ~= "number" or k < 1 or k ~= math.floor(k) then
    fail("topk: k must be a positive whole number, got %s", tostring(k))
  end
  if k > x:size(-1) then fail("topk: k = %d is more than the last axis's %d", k, x:size(-1)) end
  k = math.tointeger(k)
  local values, indices = core.topk(x, k, plait.dim(k, "top" .. k))
  return wrap(values), wrap(indices)
end

-- A mixture of experts with static shapes: each of the tokens picks k experts (plait.topk's indices
-- over E expert scores), so that tokens·k rows are routed whatever the choice; how many each expert
-- gets is known when the program runs. plait.route(indices) gives the slots (integers like the
-- indices: where each token's k rows lie among the routed rows, grouped by expert, then in token
-- order) and the counts [E] of rows per expert; plait.dispatch(x, slots) copies each token's row x
-- [tokens.., width] to its slots: rows [routed, width]; plait.grouped_matmul(rows, w, counts, opts)
-- multiplies each expert's rows by its matrix of the parameter w [E, in, out] (with { transpose =
-- true }, w [E, out, in]: rows·w[e]ᵀ); plait.combine(rows, slots, weights) sums each token's rows
-- back, weighted by weights [tokens.., k]. Dispatch's derivative is an unweighted combine and the
-- combine's a weighted dispatch: both exact. plait.route(indices, { capacity_factor = C, priority =
-- p }) drops rows past each expert's capacity, ceil(tokens·k / E · C) rows (Megatron-Core's
-- moe_expert_capacity_factor): it keeps those of the largest priority p [tokens.., k] (the routing
-- weights: Megatron's "probs" policy), or without p the earliest tokens' ("position"); a dropped
-- row's slot is -1, its expert output nothing (the token keeps its other experts' and its
-- residual).
function plait.route(indices, opts)
  local factor, priority = opts and opts.capacity_factor or 0, opts and opts.priority
  if type(factor) ~= "number" or factor < 0 or factor ~= factor or factor == math.huge then
    fail("route: capacity_factor must be a finite number above 0 (0: keep every row), got %s",
         tostring(factor))
  end
  local slots, counts = core.route(operand(indices, "route"),
                                   priority and operand(priority, "route") or nil, factor)
  return wrap(slots), wrap(counts)
end
function plait.dispatch(x, slots)
  return wrap(core.dispatch(operand(x, "dispatch"), operand(slots, "dispatch")))
end
function plait.grouped_matmul(rows, w, counts, opts)
  local what = "grouped_matmul"
  return wrap(core.grouped_matmul(operand(rows, what), operand(w, what), operand(counts, what),
                                  opts and opts.transpose and true or false))
end
function plait.combine(rows, slots, weights)
  local what = "combine"
  return wrap(core.combine(operand(rows, what), operand(slots, what), operand(weights, what)))
end

-- The route's counts [E] as fractions of its routed rows (real; each 1/(tokens·k) of a count): a
-- constant of the routing, through which no gradient flows (a load-balancing loss's f).
function plait.fractions(counts)
  return wrap(core.fractions(operand(counts, "fractions")))
end

-- A term added to the training loss: returns x as it is; the sum of term's elements (one per token,
-- [b, seq, ..]) times the loss scale (1 / the global batch's counted targets, as the cross entropy
-- is averaged) is added to the loss, and the gradient of the loss reaches term from there, in the
-- stage that made it. --eval and the validation loss leave loss terms out (the LM loss alone).
function plait.add_loss(x, term)
  return wrap(core.add_loss(operand(x, "add_loss"), operand(term, "add_loss")))
end

function plait.embedding(ids, table_) return wrap(core.embedding(ids, table_)) end

-- Softmax cross entropy of logits against integer targets, averaged over the global batch's counted targets.
-- opts.vocab: real vocabulary (padding beyond it is left out); opts.ignore: a target id that counts for
-- nothing (masked-LM training: the data then marks the masked positions, -1 elsewhere).
function plait.cross_entropy(logits, targets, opts)
  opts = opts or {}
  return wrap(core.xent(logits, targets, opts.vocab or 0, opts.ignore))
end

---------------------------------------------------------------------------------------------------
-- Dims: sizes named after the configuration key that holds them, so shapes print as [b, seq, hidden].

local config_keys = {} -- size -> key, filled by plait.config (first key wins, preferred names first)
local preferred = { "hidden", "ffn", "seq", "vocab", "heads" }

local last_config = {} -- the config plait.config or plait.model last named dims after

-- "config.hidden = -4 (--set hidden=-4)": where a bad size comes from, when a config key holds it.
local function size_origin(n)
  for k, v in pairs(last_config) do
    if v == n then
      local given = core.overrides()[k]
      return string.format("config.%s = %s%s: ", k, tostring(n), given and (" (--set " .. k .. "=" .. given .. ")") or "")
    end
  end
  return ""
end

-- A dim from a number (named after its config key, else after the number) or a dim name.
function plait.dim(n, name, granule)
  if type(n) == "string" then return n end
  if type(n) ~= "number" or n < 1 or n ~= math.floor(n) then
    fail("%sa size must be a positive integer, got %s", size_origin(n), tostring(n))
  end
  name = name or config_keys[n] or tostring(math.tointeger(n))
  local ok, err = pcall(core.dim, name, n, granule or 1)
  if not ok then error(err, 0) end -- core's message names the model file's line already
  return name
end

-- The vocabulary dim: padded to a multiple of 128·tp, as Megatron does; the padding is left out of the loss.
function plait.vocab(n)
  local ok, name = pcall(core.vocab_dim, n)
  if not ok then error(name, 0) end -- core's message names the model file's line already
  return name
end

local function dims_of(shape)
  local out = {}
  for i, d in ipairs(shape) do out[i] = plait.dim(d) end
  return out
end

---------------------------------------------------------------------------------------------------
-- Configuration: defaults in the model file, overridden by `--set key=value`.

local function convert(key, text, default)
  if type(default) == "number" and text == "none" then return false end -- a setting turned off
  if type(default) == "number" then
    local n = tonumber(text)
    if not n then fail("--set %s=%s: %s takes a number, or none to turn it off", key, text, key) end
    if math.type(default) == "float" then return n + 0.0 end -- a fraction stays one: 30.0, not 30
    return n
  elseif type(default) == "boolean" then
    if text == "true" or text == "1" then return true end
    if text == "false" or text == "0" then return false end
    fail("--set %s=%s: %s takes true or false", key, text, key)
  end
  return text
end

-- Sizes in the config name the dims of that size: preferred keys first, then the rest in order.
local function name_dims(cfg)
  for k in pairs(config_keys) do config_keys[k] = nil end
  last_config = cfg
  local keys = {}
  for _, k in ipairs(preferred) do if type(cfg[k]) == "number" then keys[#keys + 1] = k end end
  local rest = {}
  for k, v in pairs(cfg) do
    if type(v) == "number" then rest[#rest + 1] = k end
  end
  table.sort(rest)
  for _, k in ipairs(rest) do keys[#keys + 1] = k end
  for _, k in ipairs(keys) do
    local v = cfg[k]
    if v >= 1 and v == math.floor(v) and not config_keys[v] then config_keys[v] = k end
  end
end

-- Returns the defaults with the --set overrides applied; numbers name dims of their size.
function plait.config(defaults)
  local cfg = {}
  for k, v in pairs(defaults) do cfg[k] = v end
  for key, text in pairs(core.overrides()) do
    if defaults[key] ~= nil then
      cfg[key] = convert(key, text, defaults[key])
      core.consume(key)
    end
  end
  name_dims(cfg)
  core.set_config(cfg)
  return cfg
end

---------------------------------------------------------------------------------------------------
-- Scopes name parameters: "wte" at model scope, "attn.q.weight" inside a layer.

-- Inside a block, L.layer is the layer's index (0 to layers − 1, as the parameters' "layers.N." names
-- count); a block that reads it is traced once per layer, and its layers may differ in their attention's
-- options (window, softcap, scale, rope_theta): Gemma-2's alternating sliding and global layers.
local Scope = {}
plait.Scope = Scope
readonly.seal(Scope, "plait.Scope")
Scope.__index = function(self, key)
  if key ~= "layer" then return Scope[key] end
  local probe = rawget(self, "probe")
  if probe then probe.read = true end
  return rawget(self, "index")
end

-- probe: a table shared by a block's scopes, marked when one of them reads its layer.
function Scope.new(prefix, cfg, layers, block, index, probe)
  return setmetatable({ prefix = prefix, cfg = cfg, layers = layers, block = block, counts = {}, index = index,
                        probe = probe }, Scope)
end

function Scope:sub(name)
  return Scope.new(self.prefix .. name .. ".", self.cfg, self.layers, self.block, rawget(self, "index"),
                   rawget(self, "probe"))
end

-- A child scope named `name`, or, when name is nil, kind_1, kind_2, ... in call order.
function Scope:child(name, kind)
  if name then return self:sub(name) end
  self.counts[kind] = (self.counts[kind] or 0) + 1
  return self:sub(kind .. "_" .. self.counts[kind])
end

local hints = { column = true, row = true, vocab = true, replicated = true }
local inits = { normal = true, zeros = true, ones = true }

-- scope:param(name, shape, { init = "normal"|"zeros"|"ones", std = 0.02, shard = "column"|"row"|"vocab",
--                            decay = true for matrices, trainable = true })
-- trainable = false freezes it: no gradient is computed for it and the optimizer leaves it as it is (it
-- is saved and loaded with the others).
function Scope:param(name, shape, opts)
  opts = opts or {}
  local init = opts.init or "normal"
  local shard = opts.shard or "replicated"
  if not inits[init] then fail("unknown init '%s' (normal, zeros, ones)", tostring(init)) end
  if not hints[shard] then fail("unknown shard hint '%s' (column, row, vocab, replicated)", tostring(shard)) end
  local decay = opts.decay
  if decay == nil then decay = #shape >= 2 end
  local trainable = opts.trainable ~= false
  return wrap(core.param(self.prefix .. name, dims_of(shape), init, opts.std or 0.02, shard, decay and trainable,
                         trainable))
end

-- A constant of the model: values the model file computes when plait builds the program, not trained and
-- not saved in checkpoints (a mask, a fixed position table); every rank holds all of it (at most 2^28
-- values: those over 65536 go into DIR/constants.bin beside the program). values: a function of the
-- (0-based) indices, called for each value in turn, or a flat list in row-major order. The same name
-- gives the same constant wherever it is used.
function plait.constant(name, shape, values)
  if type(name) ~= "string" then fail("plait.constant takes a name first, got %s", type(name)) end
  if type(shape) ~= "table" or #shape == 0 then fail("plait.constant: the shape is a list of dims") end
  if type(values) ~= "function" and type(values) ~= "table" then
    fail("plait.constant: values are a function of the indices or a list of numbers, got %s", type(values))
  end
  return wrap(core.constant(name, dims_of(shape), values))
end

-- A parameter made at model scope by another stage (the embedding table, for a tied head).
function Scope:get(name)
  local id = core.param_ref(name)
  if not id then fail("no parameter named '%s' at model scope", name) end
  return wrap(id)
end

---------------------------------------------------------------------------------------------------
-- The model record and its tracing.

local model_fields = { name = "string", config = "table", embed = "function", block = "function",
                       head = "function", layers = "number", parallel = "table", family = "string or table" }

local record_meta = { __name = "plait.model" }
local record_view = readonly.seal(record_meta, "the model record's metatable")

-- family: the Hugging Face family (plait.hf) that import and export read: a name or a family table.
-- A C function calls it, so that `return plait.model{...}` (a tail call) keeps the model file's frame and
-- errors name its line.
local function model(m)
  if type(m) ~= "table" then fail("plait.model takes a table") end
  for k, v in pairs(m) do
    local want = model_fields[k]
    if not want then fail("plait.model: unknown field '%s'", tostring(k)) end
    if not string.find(want, type(v), 1, true) then fail("plait.model: '%s' must be a %s", k, want) end
  end
  for _, k in ipairs({ "name", "config", "embed", "block", "head" }) do
    if m[k] == nil then fail("plait.model: missing field '%s'", k) end
  end
  m.layers = m.layers or m.config.layers
  if type(m.layers) ~= "number" or m.layers < 1 or m.layers ~= math.floor(m.layers) or m.layers > 2 ^ 20 then
    fail("plait.model: 'layers' must be a whole number from 1 to 2^20, got %s", tostring(m.layers))
  end
  for _, k in ipairs({ "seq", "hidden" }) do
    if type(m.config[k]) ~= "number" then fail("plait.model: config.%s must be a number", k) end
  end
  m.parallel = m.parallel or {}
  name_dims(m.config)
  core.set_config(m.config, m.name) -- as the model file left them (derived sizes included)
  if getmetatable(m) ~= record_view then setmetatable(m, record_meta) end
  return m
end
plait.model = core.keeps_caller(model)

local function expect_tensor(x, what)
  if not is_tensor(x) then fail("%s must return a tensor, got %s", what, type(x)) end
  return x
end

local function dim_names(t)
  local names = {}
  for i, d in ipairs(t:shape()) do names[i] = d.name end
  return names
end

local function shape_text(t) return "[" .. table.concat(dim_names(t), ", ") .. "]" end
Tensor.__tostring = function(t) return "tensor" .. shape_text(t) end

-- Called by the compiler: traces embed, one block and head into three graphs.
function plait._trace(m, mbs)
  local cfg = m.config
  plait.dim(mbs, "b")
  plait.dim(cfg.seq, "seq")
  local tokens_shape = { "b", "seq" }

  core.stage("embed")
  local S = Scope.new("", cfg, m.layers, false)
  local x = expect_tensor(m.embed(S, wrap(core.input("tokens", tokens_shape, "int"))), "embed")
  core.output(x)
  local x_dims = dim_names(x)

  core.stage("block")
  local xin = wrap(core.input("x", x_dims, "real"))
  local probe = {}
  local y = expect_tensor(m.block(Scope.new("", cfg, m.layers, true, 0, probe), xin), "block")
  if shape_text(y) ~= shape_text(xin) then
    fail("block returns %s but takes %s; a block must keep its input's shape", shape_text(y), shape_text(xin))
  end
  core.output(y)
  if probe.read then -- layers that differ: each traced and compared with layer 0
    for layer = 1, m.layers - 1 do
      core.stage("block_variant")
      local xv = wrap(core.input("x", x_dims, "real"))
      core.variant_output(expect_tensor(m.block(Scope.new("", cfg, m.layers, true, layer, {}), xv), "block"), layer)
    end
    core.variant_done()
  end

  core.stage("head")
  local xh = wrap(core.input("x", x_dims, "real"))
  local targets = wrap(core.input("targets", tokens_shape, "int"))
  local loss = expect_tensor(m.head(S, xh, targets), "head")
  core.output(loss)
end

return plait
