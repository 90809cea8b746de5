-- plait.nn: transformer layers (embedding, norms, linear, attention, MLP, dropout, LM and masked-LM heads)
-- composed from plait's primitives. Each takes a scope first, then an optional name, then its input;
-- options come from the opts table, else from the model's config (scope.cfg), else a default.
local plait = require "plait"

local nn = {}
local fail = plait.fail

-- nn.f(S, "name", x, ...) or nn.f(S, x, ...): splits off the optional name.
local function named(name, ...)
  if type(name) == "string" then return name, ... end
  return nil, name, ...
end

local function setting(opts, S, key, default)
  if opts and opts[key] ~= nil then return opts[key] end
  if S.cfg[key] ~= nil then return S.cfg[key] end
  return default
end

local function check_tensor(x, what)
  if not plait.is_tensor(x) then fail("%s expects a tensor, got %s", what, type(x)) end
end

-- Token embedding (vocab-parallel table "wte"; scaled by √hidden when config.scale_embedding, as Gemma
-- scales it), learned positions "wpe" unless config.positions ~= "learned", then dropout.
function nn.embedding(S, tokens, opts)
  check_tensor(tokens, "nn.embedding")
  local vocab = plait.vocab(setting(opts, S, "vocab"))
  local hidden = setting(opts, S, "hidden")
  local wte = S:param("wte", { vocab, hidden }, { shard = "vocab", std = setting(opts, S, "init_std", 0.02) })
  local x = plait.embedding(tokens, wte)
  if setting(opts, S, "scale_embedding", false) then x = x * math.sqrt(hidden) end
  if setting(opts, S, "positions", "learned") == "learned" then
    x = x + S:param("wpe", { "seq", hidden }, { std = setting(opts, S, "init_std", 0.02) })
  end
  return plait.dropout(x, setting(opts, S, "dropout", 0))
end

-- Layer norm (weight and bias) or RMS norm (weight) over the last axis, or with opts.group = g over each
-- run of g elements (a norm per head, its weight g wide: Qwen3's QK-norm). A layer norm has no bias
-- with opts.bias = false, else config.norm_bias = false (Cohere's, StableLM's). With
-- config.norm_offset = c (Gemma: 1) the weight starts at zero and scales by c + weight: the norm
-- alone times (c + w), as Gemma computes it.
local function layer_norm_bias(opts, S)
  if opts and opts.bias ~= nil then return opts.bias end
  return setting(nil, S, "norm_bias", true)
end

local function norm(kind, S, ...)
  local name, x, opts = named(...)
  check_tensor(x, "nn." .. kind .. "norm")
  local s = S:child(name, kind == "layer" and "ln" or "rms")
  local group = opts and opts.group
  local width = group or x:size(-1)
  local offset = setting(opts, S, "norm_offset")
  local eps = setting(opts, S, "norm_eps", 1e-5)
  local w = s:param("weight", { width }, { init = offset and "zeros" or "ones", decay = false })
  local biased = kind == "layer" and layer_norm_bias(opts, S)
  local b = biased and s:param("bias", { width }, { init = "zeros", decay = false }) or nil
  if not offset then return plait.norm(kind, x, w, b, eps, group) end
  if group then fail("nn.%snorm: norm_offset with groups is not supported; write the norm with plait.norm", kind) end
  local y = plait.norm(kind, x, nil, nil, eps) * (offset + w)
  return b and y + b or y
end

function nn.layernorm(S, ...) return norm("layer", S, ...) end
function nn.rmsnorm(S, ...) return norm("rms", S, ...) end
-- The norm the config names: config.norm = "layernorm" (default) or "rmsnorm".
function nn.norm(S, ...)
  local kind = S.cfg.norm or "layernorm"
  if kind ~= "layernorm" and kind ~= "rmsnorm" then fail("config.norm must be layernorm or rmsnorm, got %s", kind) end
  return norm(kind == "layernorm" and "layer" or "rms", S, ...)
end

-- y = x·Wᵀ + b with W [out, in]. shard: "column" (W split by output: y split), "row" (W split by input:
-- y partial sums, summed where a consumer needs them), or nil (replicated). Output projections of a
-- residual branch (row-parallel inside a block, or opts.residual) start with std / sqrt(2·layers).
function nn.linear(S, ...)
  local name, x, out, shard, opts = named(...)
  check_tensor(x, "nn.linear")
  opts = opts or {}
  local s = S:child(name, "linear")
  local residual = opts.residual
  if residual == nil then residual = S.block and shard == "row" end
  local std = setting(opts, S, "init_std", 0.02)
  if residual then std = std / math.sqrt(2 * S.layers) end
  local w = s:param("weight", { out, x:dim(-1) }, { shard = shard, std = std })
  local y = plait.matmul(x, w, { transpose = true })
  if setting(opts, S, "bias", true) then
    y = y + s:param("bias", { out }, { init = "zeros", shard = shard == "column" and "column" or nil })
  end
  return y
end

-- Rotary positions as the config asks: over whole heads (true: inside the attention kernel), or a part
-- of each head (config.rotary_fraction: Phi-2's 0.4, NeoX's 0.25; or config.rotary, a count of
-- dims: GPT-J's 64 of 256, exact where a fraction's product may round below it), interleaved pairs
-- (config.rope_interleaved), or scaled frequencies (config.rope_scaling = "linear" or "llama3" with
-- rope_factor, rope_low_freq_factor, rope_high_freq_factor, rope_original_positions).
local function rope_options(opts, S, head_dim)
  local fraction = setting(opts, S, "rotary_fraction", 1)
  local rotary = setting(opts, S, "rotary") or nil -- false (--set rotary=none): none given
  if rotary ~= nil and fraction ~= 1 then
    fail("nn.attention: rotary (%s dims) and rotary_fraction (%s) both given; give one",
         tostring(rotary), tostring(fraction))
  end
  local interleaved = setting(opts, S, "rope_interleaved", false)
  local kind = setting(opts, S, "rope_scaling", "none")
  local whole = (rotary or head_dim) == head_dim and fraction == 1
  if whole and not interleaved and kind == "none" then return true end
  local scaling
  if kind ~= "none" then
    scaling = { type = kind, factor = setting(opts, S, "rope_factor") }
    if kind == "llama3" then
      scaling.low_freq_factor = setting(opts, S, "rope_low_freq_factor")
      scaling.high_freq_factor = setting(opts, S, "rope_high_freq_factor")
      scaling.original_positions = setting(opts, S, "rope_original_positions")
    end
  end
  return { fraction = fraction, rotary = rotary, interleaved = interleaved, scaling = scaling }
end

-- Multi-head attention with its projections: q, k, v (column-parallel, split by heads), the attention
-- itself (causal unless config.causal == false; RoPE with config.positions == "rope"; grouped-query
-- with config.kv_heads < heads), and the output projection (row-parallel), then dropout. Heads are
-- hidden/heads wide unless config.head_dim says otherwise (Gemma's 256 beside a hidden of 3072); q, k
-- and v have biases when config.qkv_bias (default: config.bias, itself true by default), the output
-- projection when config.proj_bias (default: config.bias). config.sliding_window, attn_softcap and
-- attn_scale are plait.attention's window, softcap and scale; config.positions = "alibi" gives ALiBi. With config.qk_norm, q and k are RMS-normed
-- per head before the rotary positions (Qwen3's QK-norm: "q_norm", "k_norm", head_dim wide).
function nn.attention(S, ...)
  local name, x, opts = named(...)
  check_tensor(x, "nn.attention")
  local s = S:child(name, "attn")
  local hidden = x:size(-1)
  local heads = setting(opts, S, "heads")
  local kv_heads = setting(opts, S, "kv_heads", heads)
  if type(heads) ~= "number" then fail("nn.attention needs heads (opts.heads or config.heads)") end
  for _, what in ipairs({ "heads", "kv_heads" }) do
    local n = what == "heads" and heads or kv_heads
    if type(n) ~= "number" or n < 1 or n ~= math.floor(n) then fail("%s must be a positive integer, got %s", what, tostring(n)) end
  end
  local head_dim = setting(opts, S, "head_dim")
  if head_dim == nil and hidden % heads ~= 0 then fail("hidden %d is not divisible by heads %d", hidden, heads) end
  if heads % kv_heads ~= 0 then fail("heads %d is not divisible by kv_heads %d", heads, kv_heads) end
  head_dim = head_dim or hidden // heads
  local qdim = plait.dim(heads * head_dim, "qdim", head_dim)
  local kvdim = plait.dim(kv_heads * head_dim, "kvdim", head_dim)
  local bias = setting(opts, S, "bias", true)
  local qkv = { bias = setting(opts, S, "qkv_bias", bias) }
  local q = nn.linear(s, "q", x, qdim, "column", qkv)
  local k = nn.linear(s, "k", x, kvdim, "column", qkv)
  if setting(opts, S, "qk_norm", false) then
    q = nn.rmsnorm(s, "q_norm", q, { group = head_dim })
    k = nn.rmsnorm(s, "k_norm", k, { group = head_dim })
  end
  local v = nn.linear(s, "v", x, kvdim, "column", qkv)
  local o = plait.attention(q, k, v, {
    heads = heads, kv_heads = kv_heads,
    causal = setting(opts, S, "causal", true),
    rope = setting(opts, S, "positions", "learned") == "rope" and rope_options(opts, S, head_dim),
    rope_theta = setting(opts, S, "rope_theta", 10000),
    window = setting(opts, S, "sliding_window"),
    softcap = setting(opts, S, "attn_softcap"),
    scale = setting(opts, S, "attn_scale"),
    alibi = setting(opts, S, "positions", "learned") == "alibi",
  })
  local y = nn.linear(s, "proj", o, hidden, "row", { bias = setting(opts, S, "proj_bias", bias), residual = true })
  return plait.dropout(y, setting(opts, S, "dropout", 0))
end

-- The feed-forward block: activation "gelu" (fc, GeLU, proj; "gelu_exact" for the erf form), "relu", or
-- "swiglu" (silu(gate)·up, down),
-- of width opts.ffn or config.ffn; column-parallel in, row-parallel out; then dropout.
function nn.mlp(S, ...)
  local name, x, opts = named(...)
  check_tensor(x, "nn.mlp")
  local s = S:child(name, "mlp")
  local hidden = x:size(-1)
  local ffn = setting(opts, S, "ffn", 4 * hidden)
  local activation = setting(opts, S, "activation", "gelu")
  local lopts = { bias = setting(opts, S, "bias", true) }
  local h
  if activation == "swiglu" then
    local gate = nn.linear(s, "gate", x, ffn, "column", lopts)
    local up = nn.linear(s, "up", x, ffn, "column", lopts)
    h = plait.silu(gate) * up
  elseif activation == "gelu" or activation == "gelu_exact" or activation == "relu" then
    h = plait[activation](nn.linear(s, "fc", x, ffn, "column", lopts))
  else
    fail("unknown activation '%s' (gelu, gelu_exact, relu, swiglu)", tostring(activation))
  end
  local y = nn.linear(s, "proj", h, hidden, "row", { bias = lopts.bias, residual = true })
  return plait.dropout(y, setting(opts, S, "dropout", 0))
end

-- A constant of ones [rows, cols] (dims named), for sums over the last axis and spreads over it as
-- products.
local function ones(rows, cols)
  return plait.constant("ones." .. rows .. "x" .. cols, { rows, cols }, function() return 1 end)
end

-- log Σ exp over the last axis of x [.., n], its largest m [.., 1] taken out first (stable).
local function logsumexp(x, m)
  local n, one = x:dim(-1), plait.dim(1, "one")
  local e = plait.exp(x - plait.matmul(m, ones(one, n)))
  return m + plait.log(plait.matmul(e, ones(n, one)))
end

-- The largest of the top-k scores (values [.., k], largest first): [.., 1].
local function top_value(values)
  local k = values:size(-1)
  return k == 1 and values or plait.split(values, -1, { 1, k - 1 })
end

-- The routing weights of the top-k scores (values [.., k], largest first) of logits [.., E]:
-- softmax over the experts, taken at the top k (OLMoE; Qwen2-MoE without norm_topk_prob), or
-- renormalised over the top k (Mixtral, whose softmax over the top-k logits is the same).
local function softmax_weights(logits, values, renormalize)
  local lse = logsumexp(renormalize and values or logits, top_value(values))
  return plait.exp(values - plait.matmul(lse, ones(plait.dim(1, "one"), values:dim(-1))))
end

-- x [.., n] over its sum along the last axis.
local function normalized(x)
  local n, one = x:dim(-1), plait.dim(1, "one")
  return x / plait.matmul(plait.matmul(x, ones(n, one)), ones(one, n))
end

-- The routing weights as the router scores (score "softmax" or "sigmoid": DeepSeek-V3's, each
-- expert's sigmoid, renormalised over the top k when asked), times scale (DeepSeek-V3's
-- routed_scaling_factor; 1: none). The sigmoid is monotonic, so the top k logits are the top k
-- scores.
local function routing_weights(logits, values, score, renormalize, scale)
  local w
  if score == "sigmoid" then
    w = plait.sigmoid(values)
    if renormalize then w = normalized(w) end
  else
    w = softmax_weights(logits, values, renormalize)
  end
  return scale == 1 and w or w * scale
end

local function whole_number(v, what, least)
  if type(v) ~= "number" or v < least or v ~= math.floor(v) then
    fail("nn.moe: %s must be a whole number of at least %d, got %s", what, least, tostring(v))
  end
  return math.tointeger(v)
end

-- The experts' SwiGLU over their routed rows, as Mixtral's: w1 (gate) and w3 (up) [E, ffn, hidden],
-- w2 (down) [E, hidden, ffn]; under tensor parallelism each expert's ffn is split as a dense MLP's.
local function experts_mlp(s, rows, counts, E, ffn, S, opts)
  local hidden, std = rows:dim(-1), setting(opts, S, "init_std", 0.02)
  local w1 = s:param("experts.w1", { E, ffn, hidden }, { std = std, shard = "column" })
  local w3 = s:param("experts.w3", { E, ffn, hidden }, { std = std, shard = "column" })
  local w2 = s:param("experts.w2", { E, hidden, ffn },
    { std = std / math.sqrt(2 * S.layers), shard = "row" })
  local t = { transpose = true }
  local gate = plait.grouped_matmul(rows, w1, counts, t)
  local h = plait.silu(gate) * plait.grouped_matmul(rows, w3, counts, t)
  return plait.grouped_matmul(h, w2, counts, t)
end

-- Qwen2-MoE's shared expert: a dense SwiGLU of width opts.shared_ffn ("shared_expert": gate_proj,
-- up_proj, down_proj) scaled by sigmoid(x·gᵀ) ("shared_expert_gate", one output).
local function shared_expert(s, x, shared_ffn)
  local e = s:sub("shared_expert")
  local lopts = { bias = false }
  local gate = nn.linear(e, "gate_proj", x, shared_ffn, nil, lopts)
  local h = plait.silu(gate) * nn.linear(e, "up_proj", x, shared_ffn, nil, lopts)
  local y = nn.linear(e, "down_proj", h, x:size(-1), nil, { bias = false, residual = true })
  local gate = plait.sigmoid(nn.linear(s, "shared_expert_gate", x, plait.dim(1, "one"), nil, lopts))
  return y * plait.matmul(gate, ones(plait.dim(1, "one"), x:dim(-1)))
end

-- The auxiliary losses of a router's logits [.., E] (Megatron-Core's and the Switch Transformer's
-- form), per token: aux · E · Σ_e f_e·p_e, f_e the fraction of the routed rows expert e takes
-- (no gradient) and p_e the token's probability of e (softmax, or the sigmoid scores normalised
-- over the experts, as Megatron-Core's), its mean over the tokens P_e,
-- plus z · (logsumexp of the logits)². Each layer adds its own, as Megatron-Core's gradient does
-- (its log shows their mean over the layers).
local function router_losses(logits, values, counts, score, aux, z)
  if aux == 0 and z == 0 then return nil end
  local one, E = plait.dim(1, "one"), logits:dim(-1)
  local lse = logsumexp(logits, top_value(values))
  local term
  if aux ~= 0 then
    local p = score == "sigmoid" and normalized(plait.sigmoid(logits))
              or plait.exp(logits - plait.matmul(lse, ones(one, E)))
    local balance = plait.matmul(p * plait.fractions(counts), ones(E, one))
    term = balance * (aux * logits:size(-1))
  end
  if z ~= 0 then
    local zterm = plait.square(lse) * z
    term = term and term + zterm or zterm
  end
  return term
end

local function coefficient(v, what)
  if type(v) ~= "number" or v < 0 then
    fail("nn.moe: %s must be a number of at least 0 (0: off), got %s", what, tostring(v))
  end
  return v
end

-- The route's options under opts.capacity_factor (config.capacity_factor, default 0: dropless):
-- each expert keeps ceil(tokens·k / E · factor) rows, by opts.drop_policy (config.drop_policy)
-- "probs" (the default, Megatron-Core's: the rows of the largest routing weights) or "position"
-- (the earliest tokens'); nil when dropless.
local function capacity_options(opts, S, weights)
  local factor = coefficient(setting(opts, S, "capacity_factor", 0), "capacity_factor")
  if factor == 0 then return nil end
  local policy = setting(opts, S, "drop_policy", "probs")
  if policy ~= "probs" and policy ~= "position" then
    fail("nn.moe: drop_policy must be \"probs\" or \"position\", got %s", tostring(policy))
  end
  return { capacity_factor = factor, priority = policy == "probs" and weights or nil }
end

-- A mixture of experts (static shapes, dropless unless given a capacity: capacity_options): a
-- router "gate.weight" [experts, hidden] (no bias) scores each token; its opts.topk (config.topk,
-- default 2) best of opts.experts (config.experts) experts each run a SwiGLU MLP of width
-- opts.expert_ffn (config.expert_ffn, else config.ffn) on it, summed with the routing weights: the
-- softmax over the experts at the top k (or with opts.router_score "sigmoid" each one's sigmoid),
-- renormalised over them when opts.renormalize (config.renormalize, default true: Mixtral), times
-- opts.routed_scale (config.routed_scale, default 1). With
-- opts.shared_ffn (config.shared_ffn; 0 or false: none) a shared expert is added (Qwen2-MoE). The
-- router starts with std opts.router_std (config.router_std, else init_std); it is whole on every
-- tensor-parallel rank. opts.aux_loss (config.aux_loss, default 0: none) and opts.z_loss
-- (config.z_loss, default 0) add the router's load-balancing loss and z-loss to the training loss
-- (router_losses; plait.add_loss).
function nn.moe(S, ...)
  local name, x, opts = named(...)
  check_tensor(x, "nn.moe")
  local s = S:child(name, "moe")
  local experts = whole_number(setting(opts, S, "experts"), "experts", 1)
  local topk = whole_number(setting(opts, S, "topk", 2), "topk", 1)
  if topk > experts then
    fail("nn.moe: topk = %d is more than the %d experts; choose topk from 1 to %d", topk, experts,
         experts)
  end
  local ffn = whole_number(setting(opts, S, "expert_ffn", setting(opts, S, "ffn")), "expert_ffn", 1)
  local E = plait.dim(experts, "experts")
  local router_std = setting(opts, S, "router_std", setting(opts, S, "init_std", 0.02))
  local router = s:param("gate.weight", { E, x:dim(-1) }, { std = router_std })
  local logits = plait.matmul(x, router, { transpose = true })
  local values, indices = plait.topk(logits, topk)
  local score = setting(opts, S, "router_score", "softmax")
  if score ~= "softmax" and score ~= "sigmoid" then
    fail("nn.moe: router_score must be \"softmax\" or \"sigmoid\", got %s", tostring(score))
  end
  local weights = routing_weights(logits, values, score, setting(opts, S, "renormalize", true),
                                  setting(opts, S, "routed_scale", 1))
  local capacity = capacity_options(opts, S, weights)
  local slots, counts = plait.route(indices, capacity)
  local rows = experts_mlp(s, plait.dispatch(x, slots), counts, E, plait.dim(ffn), S, opts)
  local y = plait.combine(rows, slots, weights)
  local aux = coefficient(setting(opts, S, "aux_loss", 0), "aux_loss")
  local routed = counts -- the load-balancing loss counts the rows before any are dropped
  if aux ~= 0 and capacity then routed = select(2, plait.route(indices)) end
  local term = router_losses(logits, values, routed, score, aux,
                             coefficient(setting(opts, S, "z_loss", 0), "z_loss"))
  if term then y = plait.add_loss(y, term) end
  local shared = setting(opts, S, "shared_ffn")
  if shared and shared ~= 0 then
    y = y + shared_expert(s, x, plait.dim(whole_number(shared, "shared_ffn", 1)))
  end
  return y
end

function nn.dropout(S, x, p)
  return plait.dropout(x, p or setting(nil, S, "dropout", 0))
end

-- The logits of x against the output matrix: the embedding table when tied (config.tied, default true),
-- else a vocab-parallel "lm_head.weight", plus "lm_head.bias" when config.head_bias (Phi-2).
local function logits(S, x, opts)
  local vocab = plait.vocab(setting(opts, S, "vocab"))
  local w
  if setting(opts, S, "tied", true) then
    w = S:get("wte")
  else
    w = S:param("lm_head.weight", { vocab, x:size(-1) }, { shard = "vocab", std = setting(opts, S, "init_std", 0.02) })
  end
  local z = plait.matmul(x, w, { transpose = true })
  if setting(opts, S, "head_bias", false) then
    z = z + S:param("lm_head.bias", { vocab }, { init = "zeros", shard = "vocab" })
  end
  return z, vocab
end

-- Language-model head: final norm "ln_f", logits (multiplied by config.logit_scale: Cohere's; then
-- capped to c·tanh(z/c) with config.logit_softcap = c: Gemma-2), softmax cross entropy against the
-- next tokens.
function nn.lm_head(S, x, targets, opts)
  check_tensor(x, "nn.lm_head")
  local h = nn.norm(S, "ln_f", x, opts)
  local z = logits(S, h, opts)
  local scale = setting(opts, S, "logit_scale")
  if scale then z = z * scale end
  local cap = setting(opts, S, "logit_softcap")
  if cap then z = plait.softcap(z, cap) end
  return plait.cross_entropy(z, targets, { vocab = setting(opts, S, "vocab") })
end

-- Masked-LM head (BERT): dense + GeLU (the config's: "gelu_exact" for the erf form) + layer norm "mlm",
-- logits against the tied table plus a bias,
-- cross entropy over the masked positions only (targets equal to -1 count for nothing).
function nn.mlm_head(S, x, targets, opts)
  check_tensor(x, "nn.mlm_head")
  local hidden = x:size(-1)
  local s = S:sub("mlm")
  local act = setting(opts, S, "activation", "gelu") == "gelu_exact" and plait.gelu_exact or plait.gelu
  local h = act(nn.linear(s, "dense", x, hidden, nil, { residual = false }))
  h = nn.layernorm(s, "ln", h, opts)
  local z, vocab = logits(S, h, opts)
  z = z + s:param("bias", { vocab }, { init = "zeros", shard = "vocab" })
  return plait.cross_entropy(z, targets, { vocab = setting(opts, S, "vocab"), ignore = -1 })
end

return nn
