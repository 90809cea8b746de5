-- plait.hf: how a model's tensors and configuration correspond to a Hugging Face architecture's, as data.
-- A family names the architecture, maps config.json's keys to the model's config, and lists which
-- Hugging Face tensor each of the model's tensors comes from: renamed, transposed (GPT-2's Conv1D
-- weights are [in, out]), several of the model's tensors concatenated into one (a fused QKV), optionally
-- interleaved in blocks (per head), several Hugging Face tensors joined into one of the model's (a
-- norm per head, experts), or longer than the model's (positions beyond its sequence).
-- `plait import` and `plait export` read a model's family (plait.model{family = ...}: a name of the
-- families below, or a family the model file declares or extends) and move the numbers; nothing in C
-- knows a family.
local core = require "plait.core"
local json = require "plait.json"
local readonly = require "plait.readonly"

local hf = {}

-- transformers' defaults per model_type: hf.defaults.llama.rms_norm_eps is 1e-6.
hf.defaults = require "plait.hf_defaults"

local function fail(fmt, ...) error(string.format(fmt, ...), 0) end

---------------------------------------------------------------------------------------------------
-- Declaring families.
--
-- hf.family{
--   name = "gpt2", architecture = "GPT2LMHeadModel", model_type = "gpt2",
--   base_prefix = "transformer.",  -- names of the base model's tensors start with it; import also
--                                  -- reads checkpoints saved without it (GPT2Model, LlamaModel)
--   config = {                     -- one entry per setting:
--     { hf = "n_embd", plait = "hidden" },          -- config.json's key and the model config's
--     { hf = "rope_theta", also = { "rope_parameters.rope_theta" }, plait = "rope_theta" },
--                                                   -- read from the first key present (a.b: b inside a)
--     { hf = "n_inner", plait = "ffn", hf_default = function(c) return 4 * c.n_embd end },
--     { hf = "n_positions", plait = "seq", at_least = true },   -- config.json's may be larger
--     { hf = "activation_function", plait = "activation", default = "gelu",
--       values = { gelu = { "gelu_new", "gelu_pytorch_tanh" }, relu = "relu" } },
--     { hf = "resid_pdrop", plait = "dropout", default = 0, check = false },  -- written, not compared
--     { hf = "sliding_window", plait = "sliding_window", nullable = true, hf_default = 4096 },
--                                                   -- null: none (the model's false or no value)
--     { hf = "tie_word_embeddings", plait = "tied", derive = function(model) ... end },
--     { hf = "scale_attn_weights", value = true },   -- fixed: what plait computes
--     { plait = "positions", value = "learned", default = "learned" },  -- what the model must say
--   },
--   tensors = { { hf = "transformer.wte.weight", plait = "wte" }, ... },   -- the model's own
--   -- hf = { "embed_out.weight", "lm_head.weight" }: names one tensor goes by (import reads the
--   -- first the folder holds, export writes the first)
--   layer = {                      -- each layer's; %d is the layer, the model's names are inside it
--     { hf = "transformer.h.%d.attn.c_attn.weight", plait = { "attn.q.weight", "attn.k.weight",
--       "attn.v.weight" }, transpose = true, groups = 1 },
--   },
--   -- several Hugging Face tensors joined into one of the model's: {h} is each index 0 .. count-1
--   -- (count: a key of the model's config, a number, or a function of the config)
--   { hf = "model.layers.%d.self_attn.q_layernorm.norms.{h}.weight", plait = "attn.q_norm.weight",
--     join = { index = "h", count = "heads" } },          -- blocks along axis 0, one after another
--   { hf = "model.layers.%d.experts.{e}.w1.weight", plait = "experts.w1",
--     join = { index = "e", count = "experts", stack = true } }, -- a new axis 0: [experts, ...]
--   ignore = { "transformer.h.%d.attn.bias" },      -- Hugging Face tensors that import skips
-- }
--
-- default: the model's value when its config has no such key (what plait.nn assumes); hf_default:
-- config.json's when it has none (what transformers assumes; without it, hf.defaults' for the
-- family's model_type); either may be a function (of the
-- model's config, or of config.json's table). values: the model's value to config.json's (a list: all
-- are read, the first is written). nullable: config.json's null is a value of its own, none,
-- which the model's false (--set key=none) or missing value stands for; without it, null reads as
-- a missing key (GPT-2's n_inner: null is 4 × n_embd).
-- A tensor entry with several plait names concatenates them along axis 0 (their first axis, the
-- output features of a weight); groups = g interleaves them in g blocks
-- (each part's rows split in g, block b holding every part's b-th piece); transpose: the Hugging Face
-- tensor is the transpose of that; rows = "at_least": it may have more rows than the model's (import
-- takes the first). An entry none of whose plait tensors the model has is left out (biases of a model
-- without them, an untied head); one the model has only some of is an error. join: tensor i of the
-- entry's names ({index} = i) is block i of the model's tensor's count equal blocks along join.axis
-- (0 by default); with stack = true the blocks are one wide there and the Hugging Face tensors lack
-- that axis (experts stacked into [experts, ...]); with transpose each block is stored transposed.

local family_fields = { name = "string", architecture = "string", model_type = "string", base_prefix = "string",
                        config = "table", tensors = "table", layer = "table", ignore = "table" }
local config_fields = { hf = "string", also = "table", plait = "string", default = true, hf_default = true,
                        when = "function", nullable = "boolean",
                        values = "table", at_least = "boolean", check = "boolean", derive = "function", value = true }
local tensor_fields = { hf = true, plait = true, transpose = "boolean", groups = true,
                        rows = "string", row = "boolean", join = "table" }
local join_fields = { index = "string", count = true, axis = "number", stack = "boolean" }

local function check_fields(t, fields, what)
  for k, v in pairs(t) do
    local want = fields[k]
    if want == nil then fail("%s: unknown field '%s'", what, tostring(k)) end
    if want ~= true and type(v) ~= want then fail("%s: '%s' must be a %s", what, k, want) end
  end
end

-- A tensor entry's hf: a name, or a list of the names one tensor goes by (the first is written).
local function check_names(names, what)
  if type(names) == "string" then return end
  local ok = type(names) == "table" and #names > 0
  for _, name in ipairs(ok and names or {}) do ok = ok and type(name) == "string" end
  if not ok then fail("%s: 'hf' must be a name or a list of names", what) end
end

-- A joined entry: one plait tensor, each hf name holding {index} once, count a config key, a
-- number or a function of the config, axis one of the model's tensor's.
local function check_join(e, what)
  local j = e.join
  check_fields(j, join_fields, what .. ": join")
  if not j.index or not string.match(j.index, "^[%a_][%w_]*$") then
    fail("%s: join needs an index, a name such as \"h\" that the hf name holds as {h}", what)
  end
  local count = type(j.count)
  if count ~= "string" and count ~= "number" and count ~= "function" then
    fail("%s: join needs a count: a key of the model's config, a number or a function", what)
  end
  if j.axis and (j.axis < 0 or j.axis % 1 ~= 0) then
    fail("%s: join's axis must be a whole number from 0", what)
  end
  for _, name in ipairs(type(e.hf) == "table" and e.hf or { e.hf }) do
    local _, n = string.gsub(name, "{" .. j.index .. "}", "")
    if n ~= 1 then fail("%s: '%s' must hold {%s} once", what, name, j.index) end
  end
  if type(e.plait) ~= "string" or e.groups or e.rows or e.row then
    fail("%s: a joined entry takes one plait tensor, without groups, rows or row", what)
  end
end

local family_meta = { __name = "plait.hf.family" }
local family_view = readonly.seal(family_meta, "the families' metatable")

local function check_family(f)
  if type(f) ~= "table" then fail("plait.hf.family takes a table") end
  check_fields(f, family_fields, "plait.hf.family")
  for _, k in ipairs({ "name", "architecture", "model_type", "config", "tensors", "layer" }) do
    if f[k] == nil then fail("plait.hf.family: missing field '%s'", k) end
  end
  for i, e in ipairs(f.config) do
    check_fields(e, config_fields, string.format("family %s: config entry %d", f.name, i))
    if not e.hf and not e.plait then fail("family %s: config entry %d names neither hf nor plait", f.name, i) end
  end
  for _, list in ipairs({ "tensors", "layer" }) do
    for i, e in ipairs(f[list]) do
      local what = string.format("family %s: %s entry %d", f.name, list, i)
      check_fields(e, tensor_fields, what)
      if not e.hf or not e.plait then fail("%s needs hf and plait", what) end
      check_names(e.hf, what)
      if e.rows and e.rows ~= "at_least" then fail("%s: rows must be \"at_least\"", what) end
      if e.join then check_join(e, what) end
    end
  end
  for i, name in ipairs(f.ignore or {}) do
    if type(name) ~= "string" then
      fail("family %s: ignore entry %d must be a string", f.name, i)
    end
  end
  f.ignore = f.ignore or {}
  f.base_prefix = f.base_prefix or ""
  if getmetatable(f) ~= family_view then setmetatable(f, family_meta) end
  return f
end

-- A family, checked.
function hf.family(f)
  local ok, err = pcall(check_family, f)
  if not ok then require("plait").fail("%s", err) end
  return f
end

-- What an entry is about: its Hugging Face key (or, for a requirement on the model, its plait key).
local function entry_key(e)
  if type(e) ~= "table" then return e end
  if type(e.hf) == "table" then return e.hf[1] end
  return e.hf or ("plait:" .. tostring(e.plait))
end

-- list's entries with more's: one about the same key replaces it, the others are added.
local function merge(list, more)
  local out, at = {}, {}
  for _, e in ipairs(list or {}) do
    out[#out + 1] = e
    at[entry_key(e)] = #out
  end
  for _, e in ipairs(more or {}) do
    local i = at[entry_key(e)]
    if i then out[i] = e else out[#out + 1] = e end
  end
  return out
end

-- list without the entries about the keys in `drop`.
local function without(list, drop)
  local dropped, out = {}, {}
  for _, key in ipairs(drop or {}) do dropped[key] = true end
  for _, e in ipairs(list or {}) do
    if not dropped[entry_key(e)] then out[#out + 1] = e end
  end
  return out
end

local lists = { config = true, tensors = true, layer = true, ignore = true }

-- v with tables copied all the way down (a family's entries; functions stay shared).
local function deep_copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = deep_copy(x) end
  return out
end

-- A family like `base` (a family or a built-in family's name) with `more`'s entries merged into its
-- config, tensors, layer and ignore lists (an entry for a key the base has replaces the base's; the
-- keys listed in more.drop are taken out) and its other fields replaced: a variant's own tensors and
-- settings.
-- Each key of `drop` names an entry of the base (a misspelt one would take nothing out).
local function check_drop(base, drop)
  if drop == nil then return end
  if type(drop) ~= "table" then
    require("plait").fail("plait.hf.extend: drop must be a list of keys")
  end
  local known = {}
  for list in pairs(lists) do
    for _, e in ipairs(base[list] or {}) do known[entry_key(e)] = true end
  end
  for _, key in ipairs(drop) do
    if not known[key] then
      require("plait").fail("plait.hf.extend: drop names '%s', which family %s has no entry for",
                            tostring(key), base.name)
    end
  end
end

function hf.extend(base, more)
  if type(base) == "string" then base = hf.families[base] or require("plait").fail("unknown family '%s'", base) end
  more = more or {}
  check_drop(base, more.drop)
  local f = {}
  for k, v in pairs(base) do f[k] = deep_copy(lists[k] and without(v, more.drop) or v) end
  for k, v in pairs(more) do
    if lists[k] then f[k] = merge(f[k], v)
    elseif k ~= "drop" then f[k] = v end
  end
  return hf.family(f)
end

---------------------------------------------------------------------------------------------------
-- The families plait ships.

hf.families = {}

-- Settings that apply to a model with scaled rotary frequencies (config.rope_scaling), or Llama 3's.
local function scaled(c) return c.rope_scaling ~= nil and c.rope_scaling ~= "none" end
local function llama3_scaled(c) return c.rope_scaling == "llama3" end

-- GPT-2 (GPT2LMHeadModel): learned positions, pre-LayerNorm blocks, GeLU (tanh) MLP, biases everywhere,
-- tied embeddings; attention and MLP weights are Conv1D, stored [in, out], and c_attn is q, k and v
-- side by side. Also the family of models/gpt.lua and models/tiny.lua.
hf.families.gpt2 = hf.family {
  name = "gpt2", architecture = "GPT2LMHeadModel", model_type = "gpt2", base_prefix = "transformer.",
  config = {
    { hf = "vocab_size", plait = "vocab" },
    { hf = "n_positions", plait = "seq", at_least = true },
    { hf = "n_embd", plait = "hidden" },
    { hf = "n_layer", plait = "layers" },
    { hf = "n_head", plait = "heads" },
    { hf = "n_inner", plait = "ffn", default = function(c) return 4 * c.hidden end,
      hf_default = function(c) return 4 * (c.n_embd or 768) end },
    { hf = "layer_norm_epsilon", plait = "norm_eps", default = 1e-5 },
    { hf = "activation_function", plait = "activation", default = "gelu",
      values = { gelu = { "gelu_new", "gelu_pytorch_tanh" }, relu = "relu" } },
    { hf = "tie_word_embeddings", plait = "tied",
      derive = function(model) return model.params["lm_head.weight"] == nil end },
    { hf = "resid_pdrop", plait = "dropout", default = 0, check = false },
    { hf = "embd_pdrop", plait = "dropout", default = 0, check = false },
    { hf = "attn_pdrop", value = 0.0, check = false },
    { hf = "initializer_range", plait = "init_std", default = 0.02, check = false },
    { hf = "bos_token_id", value = function(c) return c.vocab - 1 end, check = false },  -- GPT-2's end of text
    { hf = "eos_token_id", value = function(c) return c.vocab - 1 end, check = false },  -- is its last token
    { hf = "scale_attn_weights", value = true },
    { hf = "scale_attn_by_inverse_layer_idx", value = false },
    { hf = "add_cross_attention", value = false },
    { plait = "positions", value = "learned", default = "learned" },
    { plait = "norm", value = "layernorm", default = "layernorm" },
    { plait = "bias", value = true, default = true },
    { plait = "causal", value = true, default = true },
  },
  tensors = {
    { hf = "transformer.wte.weight", plait = "wte" },
    { hf = "transformer.wpe.weight", plait = "wpe", rows = "at_least" },
    { hf = "transformer.ln_f.weight", plait = "ln_f.weight" },
    { hf = "transformer.ln_f.bias", plait = "ln_f.bias" },
    { hf = "lm_head.weight", plait = "lm_head.weight" },
  },
  layer = {
    { hf = "transformer.h.%d.ln_1.weight", plait = "ln_1.weight" },
    { hf = "transformer.h.%d.ln_1.bias", plait = "ln_1.bias" },
    { hf = "transformer.h.%d.attn.c_attn.weight", plait = { "attn.q.weight", "attn.k.weight", "attn.v.weight" },
      transpose = true },
    { hf = "transformer.h.%d.attn.c_attn.bias", plait = { "attn.q.bias", "attn.k.bias", "attn.v.bias" } },
    { hf = "transformer.h.%d.attn.c_proj.weight", plait = "attn.proj.weight", transpose = true },
    { hf = "transformer.h.%d.attn.c_proj.bias", plait = "attn.proj.bias" },
    { hf = "transformer.h.%d.ln_2.weight", plait = "ln_2.weight" },
    { hf = "transformer.h.%d.ln_2.bias", plait = "ln_2.bias" },
    { hf = "transformer.h.%d.mlp.c_fc.weight", plait = "mlp.fc.weight", transpose = true },
    { hf = "transformer.h.%d.mlp.c_fc.bias", plait = "mlp.fc.bias" },
    { hf = "transformer.h.%d.mlp.c_proj.weight", plait = "mlp.proj.weight", transpose = true },
    { hf = "transformer.h.%d.mlp.c_proj.bias", plait = "mlp.proj.bias" },
  },
  -- the causal mask buffers older checkpoints hold, and the tied head's copy of wte
  ignore = { "transformer.h.%d.attn.bias", "transformer.h.%d.attn.masked_bias", "lm_head.weight" },
}

-- Llama (LlamaForCausalLM): RMSNorm, SwiGLU, rotary positions (rotate-half pairs, as plait rotates),
-- grouped-query attention, no biases by default, untied output layer by default. The names follow
-- models/llama.lua's block.
hf.families.llama = hf.family {
  name = "llama", architecture = "LlamaForCausalLM", model_type = "llama", base_prefix = "model.",
  config = {
    { hf = "vocab_size", plait = "vocab" },
    { hf = "max_position_embeddings", plait = "seq", at_least = true },
    { hf = "hidden_size", plait = "hidden" },
    { hf = "intermediate_size", plait = "ffn" },
    { hf = "num_hidden_layers", plait = "layers" },
    { hf = "num_attention_heads", plait = "heads" },
    { hf = "num_key_value_heads", plait = "kv_heads", default = function(c) return c.heads end,
      hf_default = function(c) return c.num_attention_heads or 32 end },
    { hf = "rms_norm_eps", plait = "norm_eps", default = 1e-5 },
    { hf = "rope_theta", also = { "rope_parameters.rope_theta" }, plait = "rope_theta", default = 10000,
      hf_default = 10000 },
    { hf = "hidden_act", plait = "activation", default = "gelu", values = { swiglu = "silu" } },
    { hf = "tie_word_embeddings", plait = "tied",
      derive = function(model) return model.params["lm_head.weight"] == nil end },
    { hf = "attention_bias", plait = "bias", default = true },
    { hf = "mlp_bias", plait = "bias", default = true },
    { hf = "head_dim", plait = "head_dim", default = function(c) return c.hidden // c.heads end,
      hf_default = function(c) return (c.hidden_size or 4096) // (c.num_attention_heads or 32) end },
    { hf = "rope_parameters.rope_type", also = { "rope_scaling.rope_type", "rope_scaling.type" }, plait = "rope_scaling",
      default = "none", values = { none = "default", linear = "linear", llama3 = "llama3" } },
    { hf = "rope_parameters.factor", also = { "rope_scaling.factor" }, plait = "rope_factor", when = scaled },
    { hf = "rope_parameters.low_freq_factor", also = { "rope_scaling.low_freq_factor" }, plait = "rope_low_freq_factor",
      when = llama3_scaled },
    { hf = "rope_parameters.high_freq_factor", also = { "rope_scaling.high_freq_factor" },
      plait = "rope_high_freq_factor", when = llama3_scaled },
    { hf = "rope_parameters.original_max_position_embeddings", also = { "rope_scaling.original_max_position_embeddings" },
      plait = "rope_original_positions", when = llama3_scaled },
    { hf = "pretraining_tp", value = 1, check = false },
    { hf = "attention_dropout", value = 0.0, check = false },
    { hf = "initializer_range", plait = "init_std", default = 0.02, check = false },
    { plait = "positions", value = "rope", default = "learned" },
    { plait = "norm", value = "rmsnorm", default = "layernorm" },
    { plait = "causal", value = true, default = true },
  },
  tensors = {
    { hf = "model.embed_tokens.weight", plait = "wte" },
    { hf = "model.norm.weight", plait = "ln_f.weight" },
    { hf = "lm_head.weight", plait = "lm_head.weight" },
  },
  layer = {
    { hf = "model.layers.%d.input_layernorm.weight", plait = "attn_norm.weight" },
    { hf = "model.layers.%d.self_attn.q_proj.weight", plait = "attn.q.weight" },
    { hf = "model.layers.%d.self_attn.k_proj.weight", plait = "attn.k.weight" },
    { hf = "model.layers.%d.self_attn.v_proj.weight", plait = "attn.v.weight" },
    { hf = "model.layers.%d.self_attn.o_proj.weight", plait = "attn.proj.weight" },
    { hf = "model.layers.%d.self_attn.q_proj.bias", plait = "attn.q.bias" },
    { hf = "model.layers.%d.self_attn.k_proj.bias", plait = "attn.k.bias" },
    { hf = "model.layers.%d.self_attn.v_proj.bias", plait = "attn.v.bias" },
    { hf = "model.layers.%d.self_attn.o_proj.bias", plait = "attn.proj.bias" },
    { hf = "model.layers.%d.post_attention_layernorm.weight", plait = "mlp_norm.weight" },
    { hf = "model.layers.%d.mlp.gate_proj.weight", plait = "gate.weight" },
    { hf = "model.layers.%d.mlp.up_proj.weight", plait = "up.weight" },
    { hf = "model.layers.%d.mlp.down_proj.weight", plait = "down.weight" },
    { hf = "model.layers.%d.mlp.gate_proj.bias", plait = "gate.bias" },
    { hf = "model.layers.%d.mlp.up_proj.bias", plait = "up.bias" },
    { hf = "model.layers.%d.mlp.down_proj.bias", plait = "down.bias" },
  },
  -- the rotary frequencies older checkpoints hold, and a tied head's copy of the embedding
  ignore = { "model.layers.%d.self_attn.rotary_emb.inv_freq", "lm_head.weight" },
}

-- Qwen2 (Qwen2ForCausalLM): Llama's tensors and settings with biases on q, k and v only (its config
-- has no attention_bias or mlp_bias), no sliding window, and its own defaults.
hf.families.qwen2 = hf.extend("llama", {
  name = "qwen2", architecture = "Qwen2ForCausalLM", model_type = "qwen2",
  drop = { "attention_bias", "mlp_bias", "pretraining_tp" },
  config = {
    { plait = "qkv_bias", value = true, default = function(c) return c.bias ~= false end },
    { plait = "bias", value = false, default = true },
    { hf = "use_sliding_window", value = false },
  },
})

-- Gemma (GemmaForCausalLM): Llama's tensors (no biases, tied by default) with heads of head_dim wide, RMS
-- norms that scale by 1 + weight, the embedding scaled by √hidden and a GeGLU MLP of the tanh GeLU (older
-- configs say hidden_act "gelu" and mean the same).
hf.families.gemma = hf.extend("llama", {
  name = "gemma", architecture = "GemmaForCausalLM", model_type = "gemma",
  drop = { "mlp_bias", "pretraining_tp" },
  config = {
    { hf = "head_dim", plait = "head_dim", default = function(c) return c.hidden // c.heads end },
    { hf = "hidden_act", also = { "hidden_activation" }, plait = "activation", default = "gelu",
      values = { geglu = { "gelu_pytorch_tanh", "gelu" } } },
    { hf = "tie_word_embeddings", plait = "tied",
      derive = function(model) return model.params["lm_head.weight"] == nil end },
    { hf = "use_bidirectional_attention", value = false, hf_default = false },
    { plait = "norm_offset", value = 1 },
    { plait = "scale_embedding", value = true, default = false },
  },
})

-- Gemma-2 (Gemma2ForCausalLM): Gemma's tensors with a norm after the attention (post_attention_layernorm)
-- and around the MLP (pre_ and post_feedforward_layernorm), scores scaled by query_pre_attn_scalar^−½
-- and capped (attn_logit_softcapping), final logits capped (final_logit_softcapping), a sliding window on
-- even layers (layer_types); the names follow models/gemma2.lua.
-- Gemma-2's layers alternate: even ones slide, odd ones see everything.
local function alternating_layers(n)
  local types = {}
  for i = 0, n - 1 do types[#types + 1] = i % 2 == 0 and "sliding_attention" or "full_attention" end
  return json.array(types)
end
local function gemma2_layer_types(c) return alternating_layers(c.layers) end
local function gemma2_hf_layer_types(hc) return alternating_layers(hc.num_hidden_layers or 26) end

hf.families.gemma2 = hf.extend("gemma", {
  name = "gemma2", architecture = "Gemma2ForCausalLM", model_type = "gemma2",
  drop = { "use_bidirectional_attention", "model.layers.%d.post_attention_layernorm.weight" },
  config = {
    { hf = "query_pre_attn_scalar", plait = "query_pre_attn_scalar" },
    { hf = "attn_logit_softcapping", plait = "attn_softcap", hf_default = 50 },
    { hf = "final_logit_softcapping", plait = "logit_softcap", hf_default = 30 },
    { hf = "sliding_window", plait = "sliding_window" },
    { hf = "layer_types", value = gemma2_layer_types, hf_default = gemma2_hf_layer_types },
  },
  layer = {
    { hf = "model.layers.%d.post_attention_layernorm.weight", plait = "attn_post_norm.weight" },
    { hf = "model.layers.%d.pre_feedforward_layernorm.weight", plait = "mlp_norm.weight" },
    { hf = "model.layers.%d.post_feedforward_layernorm.weight", plait = "mlp_post_norm.weight" },
  },
})

-- OLMo-2 (Olmo2ForCausalLM): Llama's tensors with the norms after the attention and the MLP
-- (post_attention_layernorm, post_feedforward_layernorm) and none before, and RMS norms of the whole q and
-- k projections; the names follow models/olmo2.lua.
hf.families.olmo2 = hf.extend("llama", {
  name = "olmo2", architecture = "Olmo2ForCausalLM", model_type = "olmo2",
  drop = { "mlp_bias", "pretraining_tp", "head_dim", "model.layers.%d.input_layernorm.weight",
           "model.layers.%d.post_attention_layernorm.weight" },
  config = {
    { hf = "rms_norm_eps", plait = "norm_eps", default = 1e-5 },
  },
  layer = {
    { hf = "model.layers.%d.self_attn.q_norm.weight", plait = "attn.q_norm.weight" },
    { hf = "model.layers.%d.self_attn.k_norm.weight", plait = "attn.k_norm.weight" },
    { hf = "model.layers.%d.post_attention_layernorm.weight", plait = "attn_norm.weight" },
    { hf = "model.layers.%d.post_feedforward_layernorm.weight", plait = "mlp_norm.weight" },
  },
})

-- BERT (BertForMaskedLM): learned positions and token type 0's vector added to the word embedding, then
-- a layer norm; post-norm blocks with the exact GeLU; the masked-LM head (dense, GeLU, layer norm, the
-- tied table and a bias). Export writes one token type (type_vocab_size 1); the pooler is passed over.
hf.families.bert = hf.family {
  name = "bert", architecture = "BertForMaskedLM", model_type = "bert", base_prefix = "bert.",
  config = {
    { hf = "vocab_size", plait = "vocab" },
    { hf = "max_position_embeddings", plait = "seq", at_least = true },
    { hf = "hidden_size", plait = "hidden" },
    { hf = "num_hidden_layers", plait = "layers" },
    { hf = "num_attention_heads", plait = "heads" },
    { hf = "intermediate_size", plait = "ffn", default = function(c) return 4 * c.hidden end },
    { hf = "hidden_act", plait = "activation", default = "gelu",
      values = { gelu_exact = "gelu", gelu = { "gelu_new", "gelu_pytorch_tanh" }, relu = "relu" } },
    { hf = "layer_norm_eps", plait = "norm_eps", default = 1e-5 },
    { hf = "type_vocab_size", value = 1, check = false },
    { hf = "tie_word_embeddings", value = true },
    { hf = "is_decoder", value = false },
    { hf = "add_cross_attention", value = false },
    { hf = "hidden_dropout_prob", plait = "dropout", default = 0, check = false },
    { hf = "attention_probs_dropout_prob", value = 0.0, check = false },
    { hf = "initializer_range", plait = "init_std", default = 0.02, check = false },
    { plait = "causal", value = false, default = true },
    { plait = "positions", value = "learned", default = "learned" },
    { plait = "bias", value = true, default = true },
  },
  tensors = {
    { hf = "bert.embeddings.word_embeddings.weight", plait = "wte" },
    { hf = "bert.embeddings.position_embeddings.weight", plait = "wpe", rows = "at_least" },
    { hf = "bert.embeddings.token_type_embeddings.weight", plait = "wtt", row = true },
    { hf = "bert.embeddings.LayerNorm.weight", plait = "ln_embed.weight" },
    { hf = "bert.embeddings.LayerNorm.bias", plait = "ln_embed.bias" },
    { hf = "cls.predictions.transform.dense.weight", plait = "mlm.dense.weight" },
    { hf = "cls.predictions.transform.dense.bias", plait = "mlm.dense.bias" },
    { hf = "cls.predictions.transform.LayerNorm.weight", plait = "mlm.ln.weight" },
    { hf = "cls.predictions.transform.LayerNorm.bias", plait = "mlm.ln.bias" },
    { hf = "cls.predictions.bias", plait = "mlm.bias" },
  },
  layer = {
    { hf = "bert.encoder.layer.%d.attention.self.query.weight", plait = "attn.q.weight" },
    { hf = "bert.encoder.layer.%d.attention.self.query.bias", plait = "attn.q.bias" },
    { hf = "bert.encoder.layer.%d.attention.self.key.weight", plait = "attn.k.weight" },
    { hf = "bert.encoder.layer.%d.attention.self.key.bias", plait = "attn.k.bias" },
    { hf = "bert.encoder.layer.%d.attention.self.value.weight", plait = "attn.v.weight" },
    { hf = "bert.encoder.layer.%d.attention.self.value.bias", plait = "attn.v.bias" },
    { hf = "bert.encoder.layer.%d.attention.output.dense.weight", plait = "attn.proj.weight" },
    { hf = "bert.encoder.layer.%d.attention.output.dense.bias", plait = "attn.proj.bias" },
    { hf = "bert.encoder.layer.%d.attention.output.LayerNorm.weight", plait = "ln_1.weight" },
    { hf = "bert.encoder.layer.%d.attention.output.LayerNorm.bias", plait = "ln_1.bias" },
    { hf = "bert.encoder.layer.%d.intermediate.dense.weight", plait = "mlp.fc.weight" },
    { hf = "bert.encoder.layer.%d.intermediate.dense.bias", plait = "mlp.fc.bias" },
    { hf = "bert.encoder.layer.%d.output.dense.weight", plait = "mlp.proj.weight" },
    { hf = "bert.encoder.layer.%d.output.dense.bias", plait = "mlp.proj.bias" },
    { hf = "bert.encoder.layer.%d.output.LayerNorm.weight", plait = "ln_2.weight" },
    { hf = "bert.encoder.layer.%d.output.LayerNorm.bias", plait = "ln_2.bias" },
  },
  ignore = { "cls.predictions.decoder.weight", "cls.predictions.decoder.bias", "bert.pooler.dense.weight",
             "bert.pooler.dense.bias", "bert.embeddings.position_ids" },
}

-- Mistral (MistralForCausalLM): Llama's tensors without biases, grouped-query attention over a sliding
-- window (config sliding_window; null: none).
hf.families.mistral = hf.extend("llama", {
  name = "mistral", architecture = "MistralForCausalLM", model_type = "mistral",
  drop = { "attention_bias", "mlp_bias", "pretraining_tp" },
  config = {
    { hf = "sliding_window", plait = "sliding_window", nullable = true },
    { hf = "num_key_value_heads", plait = "kv_heads", default = function(c) return c.heads end },
    { hf = "head_dim", plait = "head_dim", default = function(c) return c.hidden // c.heads end,
      hf_default = function(c) return (c.hidden_size or 4096) // (c.num_attention_heads or 32) end },
    { plait = "bias", value = false, default = true },
  },
})

-- Qwen3 (Qwen3ForCausalLM): Llama's tensors with RMS norms of each head of q and k (q_norm, k_norm,
-- head_dim wide), heads of head_dim (128 by default), no sliding window.
hf.families.qwen3 = hf.extend("llama", {
  name = "qwen3", architecture = "Qwen3ForCausalLM", model_type = "qwen3",
  drop = { "mlp_bias", "pretraining_tp" },
  config = {
    { hf = "head_dim", plait = "head_dim", default = function(c) return c.hidden // c.heads end },
    { hf = "use_sliding_window", value = false },
    { plait = "qk_norm", value = true, default = false },
  },
  layer = {
    { hf = "model.layers.%d.self_attn.q_norm.weight", plait = "attn.q_norm.weight" },
    { hf = "model.layers.%d.self_attn.k_norm.weight", plait = "attn.k_norm.weight" },
  },
})

-- Phi (PhiForCausalLM, Phi-1 to Phi-2): a parallel block with one layer norm (input_layernorm), rotary
-- positions over a part of each head (partial_rotary_factor), q, k, v and dense with biases, an MLP of
-- fc1 and fc2 with the tanh GeLU, a final layer norm and an untied output layer with a bias; the names
-- follow models/phi2.lua.
hf.families.phi = hf.family {
  name = "phi", architecture = "PhiForCausalLM", model_type = "phi", base_prefix = "model.",
  config = {
    { hf = "vocab_size", plait = "vocab" },
    { hf = "max_position_embeddings", plait = "seq", at_least = true },
    { hf = "hidden_size", plait = "hidden" },
    { hf = "intermediate_size", plait = "ffn" },
    { hf = "num_hidden_layers", plait = "layers" },
    { hf = "num_attention_heads", plait = "heads" },
    { hf = "num_key_value_heads", plait = "kv_heads", default = function(c) return c.heads end,
      hf_default = function(c) return c.num_attention_heads or 32 end },
    { hf = "layer_norm_eps", plait = "norm_eps", default = 1e-5 },
    { hf = "rope_theta", also = { "rope_parameters.rope_theta" }, plait = "rope_theta", default = 10000,
      hf_default = 10000 },
    { hf = "partial_rotary_factor", also = { "rope_parameters.partial_rotary_factor" }, plait = "rotary_fraction",
      default = 1 },
    { hf = "hidden_act", plait = "activation", default = "gelu",
      values = { gelu = { "gelu_new", "gelu_pytorch_tanh" } } },
    { hf = "tie_word_embeddings", plait = "tied",
      derive = function(model) return model.params["lm_head.weight"] == nil end },
    { hf = "qk_layernorm", value = false },
    { hf = "rope_scaling", value = json.null, hf_default = json.null },
    { hf = "rope_parameters.rope_type", value = "default" },
    { hf = "resid_pdrop", plait = "dropout", default = 0, check = false },
    { hf = "embd_pdrop", plait = "dropout", default = 0, check = false },
    { hf = "attention_dropout", value = 0.0, check = false },
    { hf = "initializer_range", plait = "init_std", default = 0.02, check = false },
    { plait = "positions", value = "rope", default = "learned" },
    { plait = "norm", value = "layernorm", default = "layernorm" },
    { plait = "bias", value = true, default = true },
    { plait = "head_bias", value = true, default = false },
    { plait = "causal", value = true, default = true },
  },
  tensors = {
    { hf = "model.embed_tokens.weight", plait = "wte" },
    { hf = "model.final_layernorm.weight", plait = "ln_f.weight" },
    { hf = "model.final_layernorm.bias", plait = "ln_f.bias" },
    { hf = "lm_head.weight", plait = "lm_head.weight" },
    { hf = "lm_head.bias", plait = "lm_head.bias" },
  },
  layer = {
    { hf = "model.layers.%d.input_layernorm.weight", plait = "ln.weight" },
    { hf = "model.layers.%d.input_layernorm.bias", plait = "ln.bias" },
    { hf = "model.layers.%d.self_attn.q_proj.weight", plait = "attn.q.weight" },
    { hf = "model.layers.%d.self_attn.q_proj.bias", plait = "attn.q.bias" },
    { hf = "model.layers.%d.self_attn.k_proj.weight", plait = "attn.k.weight" },
    { hf = "model.layers.%d.self_attn.k_proj.bias", plait = "attn.k.bias" },
    { hf = "model.layers.%d.self_attn.v_proj.weight", plait = "attn.v.weight" },
    { hf = "model.layers.%d.self_attn.v_proj.bias", plait = "attn.v.bias" },
    { hf = "model.layers.%d.self_attn.dense.weight", plait = "attn.proj.weight" },
    { hf = "model.layers.%d.self_attn.dense.bias", plait = "attn.proj.bias" },
    { hf = "model.layers.%d.mlp.fc1.weight", plait = "mlp.fc.weight" },
    { hf = "model.layers.%d.mlp.fc1.bias", plait = "mlp.fc.bias" },
    { hf = "model.layers.%d.mlp.fc2.weight", plait = "mlp.proj.weight" },
    { hf = "model.layers.%d.mlp.fc2.bias", plait = "mlp.proj.bias" },
  },
  ignore = { "model.layers.%d.self_attn.rotary_emb.inv_freq" },
}

-- Settings that transformers' rotary models take as rope_parameters: no scaling.
local function unscaled_rope()
  return {
    { hf = "rope_scaling", value = json.null, hf_default = json.null },
    { hf = "rope_parameters.rope_type", value = "default" },
  }
end

-- Entries and lists of entries as one list (an entry has no first element; a list has).
local function flat(items, out)
  out = out or {}
  for _, item in ipairs(items) do
    if item[1] ~= nil then flat(item, out) else out[#out + 1] = item end
  end
  return out
end

-- The entries of a weight and its bias (a layer norm's, or a linear layer's with a bias).
local function with_bias(hf_name, plait_name)
  return { { hf = hf_name .. ".weight", plait = plait_name .. ".weight" },
           { hf = hf_name .. ".bias", plait = plait_name .. ".bias" } }
end

-- The settings every causal model with rotary positions and layer norms fixes.
local rotary_layernorm = {
  { plait = "positions", value = "rope", default = "learned" },
  { plait = "norm", value = "layernorm", default = "layernorm" },
  { plait = "causal", value = true, default = true },
}

local function untied(model) return model.params["lm_head.weight"] == nil end

-- GPT-NeoX (GPTNeoXForCausalLM, Pythia): a parallel block (use_parallel_residual; sequential when
-- false) with a layer norm per branch, rotary positions over a part of each head (rotary_pct), a
-- fused query_key_value laid out head by head (q, k and v of head 0, then head 1's, ...), biases
-- everywhere, the exact GeLU and an untied output layer (embed_out); the names follow
-- models/pythia.lua.
local function per_head(c) return c.heads end

hf.families.gpt_neox = hf.family {
  name = "gpt_neox", architecture = "GPTNeoXForCausalLM", model_type = "gpt_neox",
  base_prefix = "gpt_neox.",
  config = flat { {
    { hf = "vocab_size", plait = "vocab" },
    { hf = "max_position_embeddings", plait = "seq", at_least = true },
    { hf = "hidden_size", plait = "hidden" },
    { hf = "intermediate_size", plait = "ffn" },
    { hf = "num_hidden_layers", plait = "layers" },
    { hf = "num_attention_heads", plait = "heads" },
    { hf = "layer_norm_eps", plait = "norm_eps", default = 1e-5 },
    -- transformers 5 reads a top-level theta of GPT-NeoX's only as rotary_emb_base
    { hf = "rotary_emb_base", also = { "rope_parameters.rope_theta", "rope_theta" },
      plait = "rope_theta", default = 10000, hf_default = 10000 },
    { hf = "rotary_pct", plait = "rotary_fraction", default = 1,
      also = { "rope_parameters.partial_rotary_factor", "partial_rotary_factor" } },
    { hf = "hidden_act", plait = "activation", default = "gelu",
      values = { gelu_exact = "gelu", gelu = { "gelu_new", "gelu_pytorch_tanh", "gelu_fast" } } },
    { hf = "use_parallel_residual", plait = "parallel", default = false },
    { hf = "tie_word_embeddings", plait = "tied", derive = untied },
    { hf = "attention_bias", value = true },
    { hf = "hidden_dropout", plait = "dropout", default = 0, check = false },
    { hf = "attention_dropout", value = 0.0, check = false },
    { hf = "initializer_range", plait = "init_std", default = 0.02, check = false },
    { plait = "bias", value = true, default = true },
  }, unscaled_rope(), rotary_layernorm },
  tensors = flat {
    { hf = "gpt_neox.embed_in.weight", plait = "wte" },
    with_bias("gpt_neox.final_layer_norm", "ln_f"),
    -- saved as embed_out; transformers 5 holds it as lm_head
    { hf = { "embed_out.weight", "lm_head.weight" }, plait = "lm_head.weight" },
  },
  layer = flat {
    with_bias("gpt_neox.layers.%d.input_layernorm", "ln_1"),
    { hf = "gpt_neox.layers.%d.attention.query_key_value.weight",
      plait = { "attn.q.weight", "attn.k.weight", "attn.v.weight" }, groups = per_head },
    { hf = "gpt_neox.layers.%d.attention.query_key_value.bias",
      plait = { "attn.q.bias", "attn.k.bias", "attn.v.bias" }, groups = per_head },
    with_bias("gpt_neox.layers.%d.attention.dense", "attn.proj"),
    with_bias("gpt_neox.layers.%d.post_attention_layernorm", "ln_2"),
    with_bias("gpt_neox.layers.%d.mlp.dense_h_to_4h", "mlp.fc"),
    with_bias("gpt_neox.layers.%d.mlp.dense_4h_to_h", "mlp.proj"),
  },
  -- the causal mask buffers and rotary frequencies older checkpoints hold
  ignore = { "gpt_neox.layers.%d.attention.bias", "gpt_neox.layers.%d.attention.masked_bias",
             "gpt_neox.layers.%d.attention.rotary_emb.inv_freq" },
}

-- GPT-J (GPTJForCausalLM): a parallel block with one layer norm (ln_1), rotary positions over the
-- first rotary_dim dims of each head in interleaved pairs (2i, 2i + 1: rotate_every_two, which
-- plait's rope computes with rope_interleaved), q, k, v and out_proj without biases, an MLP of
-- fc_in and fc_out with biases and the tanh GeLU, an untied output layer with a bias; the names
-- follow models/gptj.lua.
hf.families.gptj = hf.family {
  name = "gptj", architecture = "GPTJForCausalLM", model_type = "gptj",
  base_prefix = "transformer.",
  config = flat { {
    { hf = "vocab_size", plait = "vocab" },
    { hf = "n_positions", plait = "seq", at_least = true },
    { hf = "n_embd", plait = "hidden" },
    { hf = "n_layer", plait = "layers" },
    { hf = "n_head", plait = "heads" },
    { hf = "n_inner", plait = "ffn", default = function(c) return 4 * c.hidden end,
      hf_default = function(c) return 4 * (c.n_embd or 4096) end },
    { hf = "rotary_dim", plait = "rotary" },
    { hf = "layer_norm_epsilon", plait = "norm_eps", default = 1e-5 },
    { hf = "activation_function", plait = "activation", default = "gelu",
      values = { gelu = { "gelu_new", "gelu_pytorch_tanh" }, gelu_exact = "gelu" } },
    { hf = "tie_word_embeddings", plait = "tied", derive = untied },
    { hf = "resid_pdrop", plait = "dropout", default = 0, check = false },
    { hf = "embd_pdrop", plait = "dropout", default = 0, check = false },
    { hf = "attn_pdrop", value = 0.0, check = false },
    { hf = "initializer_range", plait = "init_std", default = 0.02, check = false },
    { plait = "rope_theta", value = 10000, default = 10000 },
    { plait = "rope_interleaved", value = true, default = false },
    { plait = "bias", value = true, default = true },
    { plait = "qkv_bias", value = false, default = function(c) return c.bias ~= false end },
    { plait = "proj_bias", value = false, default = function(c) return c.bias ~= false end },
    { plait = "head_bias", value = true, default = false },
  }, rotary_layernorm },
  tensors = flat {
    { hf = "transformer.wte.weight", plait = "wte" },
    with_bias("transformer.ln_f", "ln_f"),
    with_bias("lm_head", "lm_head"),
  },
  layer = flat {
    with_bias("transformer.h.%d.ln_1", "ln_1"),
    { hf = "transformer.h.%d.attn.q_proj.weight", plait = "attn.q.weight" },
    { hf = "transformer.h.%d.attn.k_proj.weight", plait = "attn.k.weight" },
    { hf = "transformer.h.%d.attn.v_proj.weight", plait = "attn.v.weight" },
    { hf = "transformer.h.%d.attn.out_proj.weight", plait = "attn.proj.weight" },
    with_bias("transformer.h.%d.mlp.fc_in", "mlp.fc"),
    with_bias("transformer.h.%d.mlp.fc_out", "mlp.proj"),
  },
  -- the causal mask buffers and sin/cos tables older checkpoints hold
  ignore = { "transformer.h.%d.attn.bias", "transformer.h.%d.attn.masked_bias",
             "transformer.h.%d.attn.embed_positions" },
}

-- Falcon (FalconForCausalLM): a parallel block with rotary positions, the exact GeLU, biases or
-- none (bias) and the embedding tied by default. Falcon-7B's layout (new_decoder_architecture
-- false): one layer norm (input_layernorm), one key/value head (multi_query) or one per head; the
-- new decoder architecture (Falcon-40B's): a layer norm per branch (ln_attn, ln_mlp) and
-- num_kv_heads. The fused query_key_value holds, for each key/value head, the queries that share
-- it, then its key and value: groups = kv_heads (one group of all queries, k and v for
-- multi-query; q, k, v head by head when each head has its own). The names follow
-- models/falcon.lua.
local function falcon_new(c) return c.new_decoder_architecture == true end
local function falcon_old(c) return not falcon_new(c) end
local function kv_groups(c) return c.kv_heads end

hf.families.falcon = hf.family {
  name = "falcon", architecture = "FalconForCausalLM", model_type = "falcon",
  base_prefix = "transformer.",
  config = flat { {
    { hf = "vocab_size", plait = "vocab" },
    { hf = "max_position_embeddings", plait = "seq", at_least = true },
    { hf = "hidden_size", plait = "hidden" },
    { hf = "ffn_hidden_size", plait = "ffn", default = function(c) return 4 * c.hidden end,
      hf_default = function(c) return 4 * (c.hidden_size or 4544) end },
    { hf = "num_hidden_layers", plait = "layers" },
    { hf = "num_attention_heads", plait = "heads" },
    { hf = "new_decoder_architecture", plait = "new_decoder_architecture", default = false },
    { hf = "num_kv_heads", plait = "kv_heads", default = function(c) return c.heads end,
      hf_default = function(c) return c.num_attention_heads or 71 end, when = falcon_new },
    { hf = "multi_query", value = function(c) return c.kv_heads == 1 end, when = falcon_old },
    { hf = "num_ln_in_parallel_attn",   -- transformers' null: 2 in a new decoder
      value = function(c) return falcon_new(c) and 2 or json.null end,
      hf_default = function(c) return falcon_new(c) and 2 or json.null end },
    { hf = "layer_norm_epsilon", plait = "norm_eps", default = 1e-5 },
    { hf = "rope_theta", also = { "rope_parameters.rope_theta" }, plait = "rope_theta",
      default = 10000, hf_default = 10000 },
    { hf = "activation", plait = "activation", default = "gelu",
      values = { gelu_exact = "gelu", gelu = { "gelu_new", "gelu_pytorch_tanh" } } },
    { hf = "bias", plait = "bias", default = true },
    { hf = "tie_word_embeddings", plait = "tied", derive = untied },
    { hf = "parallel_attn", value = true },
    { hf = "alibi", value = false },
    { hf = "hidden_dropout", plait = "dropout", default = 0, check = false },
    { hf = "attention_dropout", value = 0.0, check = false },
    { hf = "initializer_range", plait = "init_std", default = 0.02, check = false },
  }, unscaled_rope(), rotary_layernorm },
  tensors = flat {
    { hf = "transformer.word_embeddings.weight", plait = "wte" },
    with_bias("transformer.ln_f", "ln_f"),
    { hf = "lm_head.weight", plait = "lm_head.weight" },
  },
  layer = flat {
    with_bias("transformer.h.%d.input_layernorm", "ln"),
    with_bias("transformer.h.%d.ln_attn", "ln_attn"),
    with_bias("transformer.h.%d.ln_mlp", "ln_mlp"),
    { hf = "transformer.h.%d.self_attention.query_key_value.weight",
      plait = { "attn.q.weight", "attn.k.weight", "attn.v.weight" }, groups = kv_groups },
    { hf = "transformer.h.%d.self_attention.query_key_value.bias",
      plait = { "attn.q.bias", "attn.k.bias", "attn.v.bias" }, groups = kv_groups },
    with_bias("transformer.h.%d.self_attention.dense", "attn.proj"),
    with_bias("transformer.h.%d.mlp.dense_h_to_4h", "mlp.fc"),
    with_bias("transformer.h.%d.mlp.dense_4h_to_h", "mlp.proj"),
  },
  ignore = { "lm_head.weight" },  -- a tied head's copy of the embedding
}

-- StableLM (StableLmForCausalLM: StableLM-3B-4E1T, StableLM-2 without per-head norms): Llama's
-- tensors with layer norms (weight and bias), rotary positions over a part of each head
-- (partial_rotary_factor), biases on q, k and v with use_qkv_bias and none elsewhere, sequential
-- blocks (use_parallel_residual false) and no QK-norm (qk_layernorm false).
hf.families.stablelm = hf.extend("llama", {
  name = "stablelm", architecture = "StableLmForCausalLM", model_type = "stablelm",
  drop = { "attention_bias", "mlp_bias", "pretraining_tp", "head_dim", "rms_norm_eps" },
  config = {
    { hf = "layer_norm_eps", plait = "norm_eps", default = 1e-5 },
    { hf = "partial_rotary_factor", also = { "rope_parameters.partial_rotary_factor" },
      plait = "rotary_fraction", default = 1 },
    { hf = "use_qkv_bias", plait = "qkv_bias", default = function(c) return c.bias ~= false end },
    { hf = "qk_layernorm", value = false },
    { hf = "use_parallel_residual", value = false },
    { hf = "hidden_dropout", plait = "dropout", default = 0, check = false },
    { plait = "norm", value = "layernorm", default = "layernorm" },
    { plait = "bias", value = false, default = true },
  },
  tensors = {
    { hf = "model.norm.bias", plait = "ln_f.bias" },
  },
  layer = {
    { hf = "model.layers.%d.input_layernorm.bias", plait = "attn_norm.bias" },
    { hf = "model.layers.%d.post_attention_layernorm.bias", plait = "mlp_norm.bias" },
  },
})

-- StarCoder2 (Starcoder2ForCausalLM): pre-LayerNorm blocks with grouped-query attention over a
-- sliding window (null: none), rotary positions, biases everywhere (use_bias), an MLP of c_fc and
-- c_proj with the tanh GeLU, the embedding tied by default; the names follow
-- models/starcoder2.lua.
hf.families.starcoder2 = hf.family {
  name = "starcoder2", architecture = "Starcoder2ForCausalLM", model_type = "starcoder2",
  base_prefix = "model.",
  config = flat { {
    { hf = "vocab_size", plait = "vocab" },
    { hf = "max_position_embeddings", plait = "seq", at_least = true },
    { hf = "hidden_size", plait = "hidden" },
    { hf = "intermediate_size", plait = "ffn" },
    { hf = "num_hidden_layers", plait = "layers" },
    { hf = "num_attention_heads", plait = "heads" },
    { hf = "num_key_value_heads", plait = "kv_heads", default = function(c) return c.heads end },
    { hf = "norm_epsilon", plait = "norm_eps", default = 1e-5 },
    { hf = "rope_theta", also = { "rope_parameters.rope_theta" }, plait = "rope_theta",
      default = 10000, hf_default = 10000 },
    { hf = "sliding_window", plait = "sliding_window", nullable = true },
    { hf = "hidden_act", plait = "activation", default = "gelu",
      values = { gelu = { "gelu_pytorch_tanh", "gelu_new" }, gelu_exact = "gelu" } },
    { hf = "use_bias", plait = "bias", default = true },
    { hf = "tie_word_embeddings", plait = "tied", derive = untied },
    { hf = "residual_dropout", plait = "dropout", default = 0, check = false },
    { hf = "embedding_dropout", plait = "dropout", default = 0, check = false },
    { hf = "attention_dropout", value = 0.0, check = false },
    { hf = "initializer_range", plait = "init_std", default = 0.02, check = false },
  }, unscaled_rope(), rotary_layernorm },
  tensors = flat {
    { hf = "model.embed_tokens.weight", plait = "wte" },
    with_bias("model.norm", "ln_f"),
    { hf = "lm_head.weight", plait = "lm_head.weight" },
  },
  layer = flat {
    with_bias("model.layers.%d.input_layernorm", "ln_1"),
    with_bias("model.layers.%d.self_attn.q_proj", "attn.q"),
    with_bias("model.layers.%d.self_attn.k_proj", "attn.k"),
    with_bias("model.layers.%d.self_attn.v_proj", "attn.v"),
    with_bias("model.layers.%d.self_attn.o_proj", "attn.proj"),
    with_bias("model.layers.%d.post_attention_layernorm", "ln_2"),
    with_bias("model.layers.%d.mlp.c_fc", "mlp.fc"),
    with_bias("model.layers.%d.mlp.c_proj", "mlp.proj"),
  },
  ignore = { "lm_head.weight" },  -- a tied head's copy of the embedding
}

-- Cohere (CohereForCausalLM, Command-R): a parallel block with one layer norm without a bias
-- (input_layernorm), rotary positions in interleaved pairs (2i, 2i + 1, as GPT-J's), a SwiGLU MLP,
-- no biases (attention_bias), the embedding tied by default and the logits multiplied by
-- logit_scale; no QK-norm (use_qk_norm false). The names follow models/cohere.lua.
hf.families.cohere = hf.family {
  name = "cohere", architecture = "CohereForCausalLM", model_type = "cohere",
  base_prefix = "model.",
  config = flat { {
    { hf = "vocab_size", plait = "vocab" },
    { hf = "max_position_embeddings", plait = "seq", at_least = true },
    { hf = "hidden_size", plait = "hidden" },
    { hf = "intermediate_size", plait = "ffn" },
    { hf = "num_hidden_layers", plait = "layers" },
    { hf = "num_attention_heads", plait = "heads" },
    { hf = "num_key_value_heads", plait = "kv_heads", default = function(c) return c.heads end,
      hf_default = function(c) return c.num_attention_heads or 64 end },
    { hf = "layer_norm_eps", plait = "norm_eps", default = 1e-5 },
    { hf = "rope_theta", also = { "rope_parameters.rope_theta" }, plait = "rope_theta",
      default = 10000, hf_default = 500000 },
    { hf = "logit_scale", plait = "logit_scale", default = 1 },
    { hf = "hidden_act", plait = "activation", default = "gelu",
      values = { swiglu = "silu" } },
    { hf = "attention_bias", value = false },
    { hf = "tie_word_embeddings", plait = "tied", derive = untied },
    { hf = "use_qk_norm", value = false },
    { hf = "attention_dropout", value = 0.0, check = false },
    { hf = "initializer_range", plait = "init_std", default = 0.02, check = false },
    { plait = "rope_interleaved", value = true, default = false },
    { plait = "norm_bias", value = false, default = true },
    { plait = "bias", value = false, default = true },
  }, unscaled_rope(), rotary_layernorm },
  tensors = flat {
    { hf = "model.embed_tokens.weight", plait = "wte" },
    { hf = "model.norm.weight", plait = "ln_f.weight" },
    { hf = "lm_head.weight", plait = "lm_head.weight" },
  },
  layer = flat {
    { hf = "model.layers.%d.input_layernorm.weight", plait = "ln.weight" },
    { hf = "model.layers.%d.self_attn.q_proj.weight", plait = "attn.q.weight" },
    { hf = "model.layers.%d.self_attn.k_proj.weight", plait = "attn.k.weight" },
    { hf = "model.layers.%d.self_attn.v_proj.weight", plait = "attn.v.weight" },
    { hf = "model.layers.%d.self_attn.o_proj.weight", plait = "attn.proj.weight" },
    { hf = "model.layers.%d.mlp.gate_proj.weight", plait = "mlp.gate.weight" },
    { hf = "model.layers.%d.mlp.up_proj.weight", plait = "mlp.up.weight" },
    { hf = "model.layers.%d.mlp.down_proj.weight", plait = "mlp.proj.weight" },
  },
  ignore = { "lm_head.weight", "model.layers.%d.self_attn.rotary_emb.inv_freq" },
}

-- StableLM-2 with per-head QK norms (StableLmForCausalLM, qk_layernorm true: StableLM-2-12B): layer
-- norms with biases, rotary positions over a part of each head (partial_rotary_factor), q, k and v
-- with biases where use_qkv_bias, a LayerNorm without bias per head of q and of k (norms.{h}:
-- joined into the model's one weight of each), the parallel block where use_parallel_residual (then
-- no post_attention_layernorm), SwiGLU, untied; the names follow models/stablelm2.lua.
hf.families.stablelm2 = hf.family {
  name = "stablelm2", architecture = "StableLmForCausalLM", model_type = "stablelm",
  base_prefix = "model.",
  config = {
    { hf = "vocab_size", plait = "vocab" },
    { hf = "max_position_embeddings", plait = "seq", at_least = true },
    { hf = "hidden_size", plait = "hidden" },
    { hf = "intermediate_size", plait = "ffn" },
    { hf = "num_hidden_layers", plait = "layers" },
    { hf = "num_attention_heads", plait = "heads" },
    { hf = "num_key_value_heads", plait = "kv_heads" },
    { hf = "layer_norm_eps", plait = "norm_eps", default = 1e-5 },
    { hf = "rope_theta", also = { "rope_parameters.rope_theta" }, plait = "rope_theta",
      default = 10000, hf_default = 10000 },
    { hf = "partial_rotary_factor", also = { "rope_parameters.partial_rotary_factor" },
      plait = "rotary_fraction", default = 1 },
    { hf = "use_qkv_bias", plait = "qkv_bias", default = false },
    { hf = "use_parallel_residual", plait = "parallel", default = false },
    { hf = "tie_word_embeddings", plait = "tied",
      derive = function(model) return model.params["lm_head.weight"] == nil end },
    { hf = "qk_layernorm", value = true },
    { hf = "hidden_act", value = "silu" },
    { hf = "rope_scaling", value = json.null, hf_default = json.null },
    { hf = "rope_parameters.rope_type", value = "default" },
    { hf = "hidden_dropout", plait = "dropout", default = 0, check = false },
    { hf = "attention_dropout", value = 0.0, check = false },
    { hf = "initializer_range", plait = "init_std", default = 0.02, check = false },
    { plait = "positions", value = "rope", default = "learned" },
  },
  tensors = flat {
    { hf = "model.embed_tokens.weight", plait = "wte" },
    with_bias("model.norm", "ln_f"),
    { hf = "lm_head.weight", plait = "lm_head.weight" },
  },
  layer = flat {
    with_bias("model.layers.%d.input_layernorm", "attn_norm"),
    with_bias("model.layers.%d.self_attn.q_proj", "attn.q"),
    with_bias("model.layers.%d.self_attn.k_proj", "attn.k"),
    with_bias("model.layers.%d.self_attn.v_proj", "attn.v"),
    { hf = "model.layers.%d.self_attn.o_proj.weight", plait = "attn.proj.weight" },
    { hf = "model.layers.%d.self_attn.q_layernorm.norms.{h}.weight", plait = "attn.q_norm.weight",
      join = { index = "h", count = "heads" } },
    { hf = "model.layers.%d.self_attn.k_layernorm.norms.{h}.weight", plait = "attn.k_norm.weight",
      join = { index = "h", count = "kv_heads" } },
    with_bias("model.layers.%d.post_attention_layernorm", "mlp_norm"),
    { hf = "model.layers.%d.mlp.gate_proj.weight", plait = "gate.weight" },
    { hf = "model.layers.%d.mlp.up_proj.weight", plait = "up.weight" },
    { hf = "model.layers.%d.mlp.down_proj.weight", plait = "down.weight" },
  },
  ignore = { "model.layers.%d.self_attn.rotary_emb.inv_freq" },
}

-- Mixtures of experts. The settings transformers' share: the experts (config.json's key for them,
-- and other keys it may be read from), the top k, SwiGLU experts, and no auxiliary load-balancing
-- loss in the loss (output_router_logits false: plait's loss is the language model's alone;
-- written, not compared, as it changes no output).
local function moe_settings(experts_key, also)
  return {
    { hf = experts_key, also = also, plait = "experts" },
    { hf = "num_experts_per_tok", plait = "topk", default = 2 },
    { hf = "hidden_act", value = "silu" },
    { hf = "output_router_logits", value = false, check = false },
  }
end

-- Qwen's sparse layers: the experts' width (moe_intermediate_size; intermediate_size is a dense
-- layer's, which no layer is), the top k's weights renormalised with norm_topk_prob, and every
-- layer sparse (decoder_sparse_step 1, no mlp_only_layers: others are refused).
local qwen_sparse = {
  { hf = "moe_intermediate_size", plait = "expert_ffn", default = function(c) return c.ffn end },
  { hf = "intermediate_size", plait = "ffn", check = false },
  { hf = "norm_topk_prob", plait = "renormalize", default = true },
  { hf = "decoder_sparse_step", value = 1 },
  { hf = "mlp_only_layers", value = json.array {} },
}

-- A layer's mixture of experts under hf_prefix (the model's nn.moe named moe): the router
-- (gate.weight) and each expert's SwiGLU matrices, expert e's the model's block e of its stacked
-- [experts, ...] experts.w1 (gate), w3 (up) and w2 (down); `names` are the Hugging Face names of
-- gate, up and down.
local function expert_tensors(hf_prefix, moe, names)
  local stacked = { index = "e", count = "experts", stack = true }
  local out = { { hf = hf_prefix .. ".gate.weight", plait = moe .. ".gate.weight" } }
  for i, w in ipairs({ "w1", "w3", "w2" }) do
    out[#out + 1] = { hf = hf_prefix .. ".experts.{e}." .. names[i] .. ".weight",
                      plait = moe .. ".experts." .. w, join = stacked }
  end
  return out
end

-- Llama's dense MLP, which a mixture of experts replaces.
local llama_mlp = { "model.layers.%d.mlp.gate_proj.weight", "model.layers.%d.mlp.up_proj.weight",
                    "model.layers.%d.mlp.down_proj.weight", "model.layers.%d.mlp.gate_proj.bias",
                    "model.layers.%d.mlp.up_proj.bias", "model.layers.%d.mlp.down_proj.bias" }

-- Qwen's and OLMoE's experts: mlp.experts.{e}.gate_proj, up_proj and down_proj.
local qwen_experts = expert_tensors("model.layers.%d.mlp", "mlp", { "gate_proj", "up_proj",
                                                                    "down_proj" })

-- Entries of tensors whose Hugging Face names are the model's after a prefix.
local function same_names(prefix, names)
  local out = {}
  for i, name in ipairs(names) do out[i] = { hf = prefix .. name, plait = name } end
  return out
end

local function joined(...)
  local out = {}
  for _, list in ipairs({ ... }) do table.move(list, 1, #list, #out + 1, out) end
  return out
end

-- Mixtral (MixtralForCausalLM): Mistral's attention (no sliding window in Mixtral-8x7B's config)
-- and a mixture of experts (block_sparse_moe) of num_local_experts SwiGLU experts (w1 gate, w3 up,
-- w2 down, each of intermediate_size), the softmax over the experts renormalised over the top k.
-- The Hub's files and transformers' save_pretrained hold one tensor per expert; the model's
-- experts.w1, w3 and w2 stack them (transformers fuses them into gate_up_proj in memory only).
hf.families.mixtral = hf.extend("mistral", {
  name = "mixtral", architecture = "MixtralForCausalLM", model_type = "mixtral",
  drop = llama_mlp,
  config = flat { moe_settings("num_local_experts", { "num_experts" }), {
    { hf = "router_jitter_noise", value = 0.0, check = false },
    { plait = "renormalize", value = true, default = true },
  } },
  layer = expert_tensors("model.layers.%d.block_sparse_moe", "block_sparse_moe",
                         { "w1", "w3", "w2" }),
})

-- Qwen2-MoE (Qwen2MoeForCausalLM, Qwen1.5-MoE): Qwen2's attention (q, k and v biases: qkv_bias)
-- and a mixture of experts (mlp) of num_experts experts (gate_proj, up_proj, down_proj, each of
-- moe_intermediate_size) beside a shared expert of shared_expert_intermediate_size scaled by
-- sigmoid(shared_expert_gate); norm_topk_prob false by default.
hf.families.qwen2_moe = hf.extend("qwen2", {
  name = "qwen2_moe", architecture = "Qwen2MoeForCausalLM", model_type = "qwen2_moe",
  drop = joined(llama_mlp, { "plait:qkv_bias" }),
  config = flat { moe_settings("num_experts"), qwen_sparse, {
    { hf = "qkv_bias", plait = "qkv_bias", default = function(c) return c.bias ~= false end },
    { hf = "shared_expert_intermediate_size", plait = "shared_ffn" },
  } },
  layer = flat { qwen_experts, same_names("model.layers.%d.", {
    "mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight",
    "mlp.shared_expert.down_proj.weight", "mlp.shared_expert_gate.weight" }) },
})

-- Qwen3-MoE (Qwen3MoeForCausalLM): Qwen3's attention (q_norm and k_norm per head) and Qwen2-MoE's
-- experts without the shared one; num_experts (transformers 5 writes num_local_experts).
hf.families.qwen3_moe = hf.extend("qwen3", {
  name = "qwen3_moe", architecture = "Qwen3MoeForCausalLM", model_type = "qwen3_moe",
  drop = llama_mlp,
  config = flat { moe_settings("num_experts", { "num_local_experts" }), qwen_sparse },
  layer = qwen_experts,
})

-- OLMoE (OlmoeForCausalLM): Llama's pre-norm blocks with RMS norms of the whole q and k projections
-- (q_norm, k_norm, as OLMo-2's), no clipping of q, k and v (clip_qkv null), and a mixture of
-- experts (mlp) of num_experts experts of intermediate_size, the softmax at the top k not
-- renormalised (norm_topk_prob false by default); the names follow models/olmoe.lua.
hf.families.olmoe = hf.extend("llama", {
  name = "olmoe", architecture = "OlmoeForCausalLM", model_type = "olmoe",
  drop = joined(llama_mlp, { "mlp_bias", "pretraining_tp", "head_dim" }),
  config = flat { moe_settings("num_experts", { "num_local_experts" }), {
    { hf = "norm_topk_prob", plait = "renormalize", default = true },
    { hf = "clip_qkv", value = json.null, hf_default = json.null },
  } },
  layer = flat { qwen_experts, {
    { hf = "model.layers.%d.self_attn.q_norm.weight", plait = "attn.q_norm.weight" },
    { hf = "model.layers.%d.self_attn.k_norm.weight", plait = "attn.k_norm.weight" },
  } },
})

---------------------------------------------------------------------------------------------------
-- What import and export ask (called by the compiler with the model record and its tensors).

-- The model's family: plait.model{family = "gpt2"} names one of hf.families, or holds a family.
function hf._family(model)
  local f = model.family
  if f == nil then
    fail("model '%s' declares no Hugging Face family; add family = \"gpt2\" or \"llama\" to its plait.model{...}, "
         .. "or a family of its own (plait.hf.family{...})", model.name)
  end
  if type(f) == "string" then
    if hf.families[f] then return hf.families[f] end
    local known = {}
    for k in pairs(hf.families) do known[#known + 1] = k end
    table.sort(known)
    fail("model '%s' names an unknown Hugging Face family '%s' (plait knows %s); declare it in the model file "
         .. "with plait.hf.family{...}", model.name, f, table.concat(known, ", "))
  end
  -- a table not made by plait.hf.family (or a read-only view of one): a copy, checked as it is
  if getmetatable(f) ~= family_view then return check_family(deep_copy(f)) end
  return f
end

local function show(v)
  if type(v) == "table" then return json.encode(v) end
  if type(v) == "number" then return json.encode(v) end
  return tostring(v)
end

-- A value of config.json as JSON writes it (a string quoted: "128" is not 128).
local function show_json(v)
  if type(v) == "string" then return json.encode(v) end
  return show(v)
end

local function evaluate(v, arg)
  if type(v) == "function" then return v(arg) end
  return v
end

-- The model's value of a setting: derived from its tensors, its config, or the family's default.
local function plait_value(e, model)
  if e.derive then return e.derive(model) end
  local v = model.config[e.plait]
  if v == nil then v = evaluate(e.default, model.config) end
  if e.nullable and (v == nil or v == false) then return json.null end
  return v
end

-- config.json's values the model's value stands for (the first is what export writes), or nil.
local function hf_values(e, v)
  if not e.values then return { v } end
  local mapped = e.values[v]
  if mapped == nil then return nil end
  return type(mapped) == "table" and mapped or { mapped }
end

local function same(a, b)
  if type(a) == "number" and type(b) == "number" then return a == b end
  if type(a) == "table" and type(b) == "table" then return json.encode(a) == json.encode(b) end
  return a == b
end

-- The model's value that config.json's stands for, for a --set hint.
local function plait_for(e, hv)
  if not e.values then return hv end
  for pv, list in pairs(e.values) do
    for _, v in ipairs(type(list) == "table" and list or { list }) do
      if same(v, hv) then return pv end
    end
  end
end

-- Whether --set key=pv would be taken and change the model: a value of the kind the model's is (a
-- whole number for a whole number, finite), other than the one it has.
local function settable(current, pv)
  if type(pv) ~= type(current) or type(pv) == "table" then return false end
  if show(pv) == show(current) then return false end
  if type(pv) ~= "number" then return true end
  if pv ~= pv or math.abs(pv) == math.huge then return false end
  return math.type(current) ~= "integer" or (pv % 1 == 0 and (current < 1 or pv >= 1))
end

-- The fix for a disagreement: the --set that gives the model config.json's value, where plait takes
-- it.
local function hint(e, model, hv)
  local current = model.config[e.plait]
  if current == nil then return "" end
  local pv = plait_for(e, hv)
  if pv == nil then return "" end
  local none = e.nullable and (pv == json.null or current == false) -- none, or a value after none
  if not none and not settable(current, pv) then
    return string.format("; no --set %s gives the model config.json's %s: check that the folder is "
                         .. "this model's", e.plait, show_json(hv))
  end
  local value = pv == json.null and "none" or show(pv)
  return string.format("; import it with --set %s=%s", e.plait, value)
end

-- The value at a key of config.json: "a.b" is b inside a.
local function get_path(t, path)
  for key in string.gmatch(path, "[^.]+") do
    if type(t) ~= "table" then return nil end
    t = t[key]
  end
  return t
end

local function set_path(t, path, value)
  local keys = {}
  for key in string.gmatch(path, "[^.]+") do keys[#keys + 1] = key end
  for i = 1, #keys - 1 do
    t[keys[i]] = t[keys[i]] or {}
    t = t[keys[i]]
  end
  t[keys[#keys]] = value
end

-- The value transformers takes where config.json lacks a setting: the entry's hf_default, else
-- the one in `defaults` (transformers', of the family's model_type) at its key or its other keys.
local function default_value(e, hc, defaults)
  if e.hf_default ~= nil then return evaluate(e.hf_default, hc) end
  local v = get_path(defaults, e.hf)
  for _, key in ipairs(e.also or {}) do
    if v == nil then v = get_path(defaults, key) end
  end
  return v
end

-- config.json's value of a setting: its key, else the first of its other keys that is there, else the
-- default transformers takes.
local function hf_value(e, hc, defaults)
  local v = get_path(hc, e.hf)
  for _, key in ipairs(e.also or {}) do
    if v == nil or v == json.null then v = get_path(hc, key) end
  end
  if v == nil or (v == json.null and not e.nullable) then v = default_value(e, hc, defaults) end
  return v
end

-- One line for a disagreement of a mapped setting, or nil.
local function check_mapped(e, model, hc, defaults)
  local pv = plait_value(e, model)
  if pv == nil then
    return string.format("the model's config has no %s, which config.json's %s gives", e.plait, e.hf)
  end
  local hv = hf_value(e, hc, defaults)
  if hv == nil then
    return string.format("config.json has no %s, and neither the %s family nor transformers' "
                         .. "defaults of its model_type give one; add it to config.json", e.hf,
                         model.family_name)
  end
  local wanted = hf_values(e, pv)
  if not wanted then
    return string.format("the model has %s = %s, which the %s family has no %s for", e.plait, show(pv),
                         model.family_name, e.hf)
  end
  if e.at_least and type(hv) == "number" and type(pv) == "number" then
    if hv >= pv then return nil end
    return string.format("config.json has %s = %s, fewer than the model's %s = %s%s", e.hf, show(hv), e.plait,
                         show(pv), hint(e, model, hv))
  end
  for _, v in ipairs(wanted) do
    if same(v, hv) then return nil end
  end
  return string.format("config.json has %s = %s, the model has %s = %s%s", e.hf, show_json(hv),
                       e.plait, pv == json.null and "none" or show(pv), hint(e, model, hv))
end

local function check_fixed(e, model, hc, defaults)
  local want, hv = evaluate(e.value, model.config), get_path(hc, e.hf)
  if hv == nil or (hv == json.null and want ~= json.null) then
    hv = default_value(e, hc, defaults)
  end
  if hv == nil or same(hv, want) then return nil end
  return string.format("config.json has %s = %s, which plait does not compute (the %s family takes %s)", e.hf,
                       show(hv), model.family_name, show(want))
end

-- A setting the family requires of the model: the --set that gives it, or where the model's config
-- has no such key (its default applies: learned positions), the config entry to write.
local function check_required(e, model)
  local v = plait_value(e, model)
  if same(v, e.value) then return nil end
  local want = show_json(e.value)
  local fix = string.format("; set %s = %s in the model file's plait.config", e.plait, want)
  if model.config[e.plait] ~= nil and settable(model.config[e.plait], e.value) then
    fix = string.format("; import it with --set %s=%s", e.plait, show(e.value))
  end
  return string.format("the model has %s = %s, the %s family takes %s = %s%s", e.plait, show(v),
                       model.family_name, e.plait, show(e.value), fix)
end

-- Files of the folder are opened as regular files only: a FIFO or a device is refused, never waited
-- on.
local function read_file(path)
  local f, err = core.open_file(path)
  if not f then fail("cannot read %s; give a Hugging Face model folder", err) end
  local text = f:read("a")
  f:close()
  return text
end

local function read_json(path)
  local ok, v = pcall(json.decode, read_file(path), path)
  if not ok then fail("%s is not JSON (%s); give a Hugging Face model folder", path, v) end
  if type(v) ~= "table" or v.n then fail("%s holds no JSON object; give a Hugging Face model folder", path) end
  return v
end

local function check_architecture(f, hc, dir)
  local names = {}
  for i = 1, hc.architectures and hc.architectures.n or 0 do names[#names + 1] = tostring(hc.architectures[i]) end
  local matches = hc.model_type == f.model_type
  for _, a in ipairs(names) do matches = matches or a == f.architecture end
  if matches then return nil end
  return string.format("%s/config.json is of %s (model_type %s), the model's family %s reads %s; import it with a "
                       .. "model file of its family", dir, #names > 0 and table.concat(names, ", ") or "?",
                       tostring(hc.model_type), f.name, f.architecture)
end

-- The lines on which DIR/config.json disagrees with the model (its architecture, each setting).
-- A checkpoint of another architecture is that one line: its settings would only add noise. Before
-- the trace (traced false) the settings derived from the model's tensors are left out.
function hf._check_config(model, dir, traced)
  local f = hf._family(model)
  model.family_name = f.name
  local hc = read_json(dir .. "/config.json")
  local other = check_architecture(f, hc, dir)
  if other then return { other } end
  local problems, defaults = {}, hf.defaults[f.model_type] or {}
  local function add(line) if line then problems[#problems + 1] = line end end
  for _, e in ipairs(f.config) do
    if e.check ~= false and (not e.when or e.when(model.config)) and (traced or not e.derive) then
      if e.hf and e.plait then add(check_mapped(e, model, hc, defaults))
      elseif e.hf then add(check_fixed(e, model, hc, defaults))
      else add(check_required(e, model)) end
    end
  end
  return problems
end

local dtype_names = { F32 = "float32", BF16 = "bfloat16", F16 = "float16", F64 = "float64" }

-- config.json for the model, its tensors stored as `dtype` (F32, BF16, ...). The dtype goes under both
-- the key transformers 4 reads (torch_dtype) and the one later versions write (dtype).
function hf._config_text(model, dtype)
  local f = hf._family(model)
  model.family_name = f.name
  local out = { architectures = json.array { f.architecture }, model_type = f.model_type,
                torch_dtype = dtype_names[dtype], dtype = dtype_names[dtype] }
  for _, e in ipairs(f.config) do
    if e.when and not e.when(model.config) then -- a setting of another kind of model
    elseif e.hf and e.plait then
      local pv = plait_value(e, model)
      local values = pv ~= nil and hf_values(e, pv)
      if pv == nil then fail("the model's config has no %s, which the %s family writes as %s", e.plait, f.name, e.hf) end
      if not values then
        fail("the model has %s = %s, which the %s family has no %s for", e.plait, show(pv), f.name, e.hf)
      end
      set_path(out, e.hf, values[1])
    elseif e.hf then
      set_path(out, e.hf, evaluate(e.value, model.config))
    end
  end
  return json.encode(out, "  ") .. "\n"
end

---------------------------------------------------------------------------------------------------
-- Tensors: each Hugging Face tensor with the model's tensors it holds.

local function as_list(v) return type(v) == "table" and v or { v } end

-- A link: { hf = name, shape = {...} (as export writes it), transpose, groups, at_least, parts = {names} }.
local function link_of(e, hf_name, names, model, problems)
  local first = model.params[names[1]]
  if e.row then -- the model's vector is the first row of a matrix (BERT's token type 0)
    if #names ~= 1 or #first ~= 1 then
      problems[#problems + 1] = string.format("%s takes one vector as a row, not %s", hf_name, table.concat(names, ", "))
      return nil
    end
    return { hf = hf_name, shape = { 1, first[1] }, transpose = false, groups = 1, at_least = true, parts = names }
  end
  local rows, groups = 0, evaluate(e.groups, model.config) or 1
  for _, n in ipairs(names) do
    local s = model.params[n]
    if #s ~= #first then
      problems[#problems + 1] = string.format("%s joins %s and %s, which have different numbers of axes", hf_name,
                                              names[1], n)
      return nil
    end
    for a = 2, #s do
      if s[a] ~= first[a] then
        problems[#problems + 1] = string.format("%s joins %s and %s along axis 0, but they differ on axis %d",
                                                hf_name, names[1], n, a - 1)
        return nil
      end
    end
    if #s == 0 or s[1] % groups ~= 0 then
      problems[#problems + 1] = string.format("%s interleaves %s in %d blocks, which its %s rows do not divide",
                                              hf_name, n, groups, #s == 0 and "0" or tostring(s[1]))
      return nil
    end
    rows = rows + s[1]
  end
  local shape = { rows }
  for a = 2, #first do shape[a] = first[a] end
  if e.transpose then
    if #shape ~= 2 then
      problems[#problems + 1] = string.format("%s is a transpose, but %s has %d axes", hf_name, names[1], #shape)
      return nil
    end
    shape = { shape[2], shape[1] }
  end
  return { hf = hf_name, shape = shape, transpose = e.transpose or false, groups = groups,
           at_least = e.rows == "at_least", parts = names }
end

-- A joined entry's count for the model: the config's value of its key, the number, or the
-- function's; also its key, where one gives it. For a count that is not a positive whole number:
-- nil, nil and the problem.
local function join_count(e, hf_name, model)
  local count = e.join.count
  local key = type(count) == "string" and count or nil
  if key then count = model.config[key] else count = evaluate(count, model.config) end
  if type(count) ~= "number" or count % 1 ~= 0 or count < 1 then
    local given = key and string.format("%s = %s", key, show(count)) or show(count)
    return nil, nil, string.format("%s joins %s of them, not a positive whole number; give the "
                                   .. "join a count", hf_name, given)
  end
  return math.tointeger(count), key
end

-- The part of a joined entry's index i in the entry's names: {index} = i.
local function joined_names(e, names, i)
  local out = {}
  for k, name in ipairs(names) do
    out[k] = string.gsub(name, "{" .. e.join.index .. "}", tostring(i))
  end
  return out
end

-- What a joined entry's Hugging Face tensors are: "the 4 (heads) joined into the model's X".
local function join_text(count, key, name)
  local from = key and " (" .. key .. ")" or ""
  return string.format("the %d%s joined into the model's %s", count, from, name)
end

-- Why a join's count does not fit the model's tensor along its axis (of length size), or nil.
local function join_misfit(j, count, axis, size)
  if not size then return string.format("it has no axis %d", axis) end
  if j.stack and size ~= count then return string.format("that axis must be %d long", count) end
  if not j.stack and size % count ~= 0 then
    return string.format("%d must divide that axis", count)
  end
  return nil
end

-- The links of a joined entry: Hugging Face tensor i holds block i of the model's tensor's `count`
-- equal blocks along the join's axis (stacked: blocks of one, that axis absent from its shape).
local function join_links(e, hf_names, name, model, links, problems)
  local j, shape = e.join, model.params[name]
  local count, key, problem = join_count(e, hf_names[1], model)
  if not count then
    problems[#problems + 1] = problem
    return
  end
  local axis, size = j.axis or 0, shape[(j.axis or 0) + 1]
  local misfit = join_misfit(j, count, axis, size)
  if misfit then
    problems[#problems + 1] = string.format("%s %s %d tensors along axis %d of the model's %s, "
      .. "of shape %s: %s", hf_names[1], j.stack and "stacks" or "joins", count, axis, name,
      "[" .. table.concat(shape, ", ") .. "]", misfit)
    return
  end
  local block = { table.unpack(shape) }
  if j.stack then table.remove(block, axis + 1) else block[axis + 1] = size // count end
  if e.transpose and #block ~= 2 then
    problems[#problems + 1] = string.format("%s is a transpose, but its blocks of %s have %d axes",
                                            hf_names[1], name, #block)
    return
  end
  if e.transpose then block = { block[2], block[1] } end
  local text = join_text(count, key, name)
  for i = 0, count - 1 do
    local names = joined_names(e, hf_names, i)
    links[#links + 1] = { hf = names[1], also = { table.unpack(names, 2) }, shape = block,
                          transpose = e.transpose or false, groups = 1, at_least = false,
                          parts = { name },
                          join = { axis = axis, index = i, count = count, text = text } }
  end
end

local function add_entry(e, hf_names, prefix, model, links, owner, problems)
  local hf_name, names, have = hf_names[1], {}, 0
  for i, n in ipairs(as_list(e.plait)) do
    names[i] = prefix .. n
    if model.params[names[i]] then have = have + 1 end
  end
  if have == 0 then return end
  if have < #names then
    for _, n in ipairs(names) do
      if not model.params[n] then
        problems[#problems + 1] = string.format("%s holds %s, which the model does not have beside %s", hf_name, n,
                                                names[1])
        return
      end
    end
  end
  for _, n in ipairs(names) do
    if owner[n] then
      problems[#problems + 1] = string.format("the model's tensor %s is in both %s and %s", n, owner[n], hf_name)
    end
    owner[n] = hf_name
  end
  if e.join then return join_links(e, hf_names, names[1], model, links, problems) end
  local link = link_of(e, hf_name, names, model, problems)
  if link then link.also = { table.unpack(hf_names, 2) } end -- other names import reads it by
  links[#links + 1] = link
end

-- An entry's Hugging Face names, of the layer's tensor when layer is given.
local function hf_names(e, layer)
  local out = {}
  for i, name in ipairs(as_list(e.hf)) do out[i] = layer and string.format(name, layer) or name end
  return out
end

-- The links of the model's family for its tensors (params: name -> unpadded shape, every layer's
-- tensors by their checkpoint names), and the lines of what does not fit.
function hf._links(model, params)
  local f = hf._family(model)
  model.params = params
  local links, owner, problems = {}, {}, {}
  for _, e in ipairs(f.tensors) do add_entry(e, hf_names(e), "", model, links, owner, problems) end
  for layer = 0, model.layers - 1 do
    for _, e in ipairs(f.layer) do
      add_entry(e, hf_names(e, layer), string.format("layers.%d.", layer), model, links, owner,
                problems)
    end
  end
  local missing = {}
  for name in pairs(params) do
    if not owner[name] then missing[#missing + 1] = name end
  end
  table.sort(missing)
  local add = "add it to the family in the model file (plait.hf.extend)"
  for _, name in ipairs(missing) do
    local line = string.format("the model's tensor %s has no place in the %s family; %s", name,
                               f.name, add)
    if name == "wpe" then -- nn.embedding's learned positions: config.positions left "learned"
      line = string.format("the model's tensor wpe (learned positions) has no place in the %s "
                           .. "family: where its checkpoints hold no position table, set the "
                           .. "model's positions (\"rope\": rotary); else %s", f.name, add)
    end
    problems[#problems + 1] = line
  end
  return links, problems
end

-- A Lua pattern of a joined entry's name: matches it whatever its index, which it captures.
local function join_pattern(e, name)
  local escaped = string.gsub(name, "[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")
  return "^" .. string.gsub(escaped, "{" .. e.join.index .. "}", "(%%d+)") .. "$"
end

-- Where a Hugging Face tensor that import found no place for is named as a joined entry's with an
-- index beyond its count: what it is beyond ("index 4 beyond the 4 (heads) joined into the model's
-- layers.0.attn.q_norm.weight"); else nil.
function hf._beyond_join(model, name)
  local f = hf._family(model)
  local function beyond(e, layer)
    local plait_name = (layer and string.format("layers.%d.", layer) or "") .. e.plait
    if not model.params[plait_name] then return nil end
    for _, hf_name in ipairs(hf_names(e, layer)) do
      local pattern = join_pattern(e, hf_name)
      local index = string.match(name, pattern) or string.match(f.base_prefix .. name, pattern)
      local count, key = join_count(e, hf_name, model)
      if index and count and tonumber(index) >= count then
        return string.format("index %s beyond %s", index, join_text(count, key, plait_name))
      end
    end
  end
  for _, e in ipairs(f.tensors) do
    local text = e.join and beyond(e)
    if text then return text end
  end
  for layer = 0, model.layers - 1 do
    for _, e in ipairs(f.layer) do
      local text = e.join and beyond(e, layer)
      if text then return text end
    end
  end
  return nil
end

-- The Hugging Face tensors import passes over (the family's ignore list, every layer's), and the base
-- model's prefix that names may lack.
function hf._ignored(model)
  local f = hf._family(model)
  local set = {}
  for _, pattern in ipairs(f.ignore) do
    if string.find(pattern, "%%d") then
      for layer = 0, model.layers - 1 do set[string.format(pattern, layer)] = true end
    else
      set[pattern] = true
    end
  end
  return set, f.base_prefix
end

---------------------------------------------------------------------------------------------------
-- Files: one model.safetensors, or shards listed by model.safetensors.index.json.

local function exists(path)
  local f = core.open_file(path)
  if f then f:close() end
  return f ~= nil
end

-- The safetensors files of DIR, and for a sharded checkpoint the index's map of tensor to file.
function hf._files(dir)
  local index = dir .. "/model.safetensors.index.json"
  if not exists(index) then
    if not exists(dir .. "/model.safetensors") then
      fail("%s has neither model.safetensors nor model.safetensors.index.json; give a Hugging Face model folder "
           .. "saved with safetensors", dir)
    end
    return { "model.safetensors" }, nil
  end
  local v = read_json(index)
  if type(v.weight_map) ~= "table" then fail("%s has no weight_map; the index is damaged", index) end
  local files, seen = {}, {}
  local names = {}
  for name in pairs(v.weight_map) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local file = v.weight_map[name]
    if type(file) ~= "string" or string.find(file, "/") then fail("%s maps %s to '%s', not a file beside it", index, name, show(file)) end
    if not seen[file] then
      seen[file] = true
      files[#files + 1] = file
    end
  end
  return files, v.weight_map
end

-- model.safetensors.index.json for shards: map is tensor name -> file.
function hf._index_text(total_size, map)
  return json.encode({ metadata = { total_size = total_size }, weight_map = map }, "  ") .. "\n"
end

return hf
