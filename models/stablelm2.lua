-- StableLM-2 (Stability AI 2024) with per-head QK norms: layer norms with biases, rotary positions
-- over the first quarter of each head, grouped-query attention, q and k each layer-normed head by
-- head with every head's own weights (no bias) before the rotary positions, SwiGLU without biases,
-- a parallel block (x + attn(ln(x)) + mlp(ln(x)); parallel = false: x + attn(ln(x)), then a
-- second norm before the MLP), untied; StableLM-2-12B sizes.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 100352, seq = 4096, layers = 40, hidden = 5120, heads = 32, kv_heads = 8, ffn = 13824,
  norm_eps = 1e-5, positions = "rope", rope_theta = 10000, rotary_fraction = 0.25, qkv_bias = false,
  parallel = true, tied = false, dropout = 0.0,
}

-- A layer norm of each head of x (runs of head_dim) alone, scaled by that head's own weights: one
-- vector as wide as x, split by heads under tensor parallelism as x is. Hugging Face keeps a
-- LayerNorm per head (q_layernorm.norms.{h}), which the stablelm2 family joins into it.
local function per_head_norm(s, name, x, head_dim)
  local w = s:sub(name):param("weight", { x:dim(-1) },
                              { init = "ones", decay = false, shard = "column" })
  return plait.norm("layer", x, nil, nil, cfg.norm_eps, head_dim) * w
end

local function attention(L, x)
  local s, head_dim = L:sub("attn"), cfg.hidden // cfg.heads
  local qdim = plait.dim(cfg.heads * head_dim, "qdim", head_dim)
  local kvdim = plait.dim(cfg.kv_heads * head_dim, "kvdim", head_dim)
  local qkv = { bias = cfg.qkv_bias }
  local q = per_head_norm(s, "q_norm", nn.linear(s, "q", x, qdim, "column", qkv), head_dim)
  local k = per_head_norm(s, "k_norm", nn.linear(s, "k", x, kvdim, "column", qkv), head_dim)
  local v = nn.linear(s, "v", x, kvdim, "column", qkv)
  local o = plait.attention(q, k, v, { heads = cfg.heads, kv_heads = cfg.kv_heads, causal = true,
                                       rope = { fraction = cfg.rotary_fraction },
                                       rope_theta = cfg.rope_theta })
  return nn.linear(s, "proj", o, cfg.hidden, "row", { bias = false, residual = true })
end

local function mlp(L, x)
  local gate = nn.linear(L, "gate", x, cfg.ffn, "column", { bias = false })
  local up = nn.linear(L, "up", x, cfg.ffn, "column", { bias = false })
  return nn.linear(L, "down", plait.silu(gate) * up, cfg.hidden, "row", { bias = false })
end

local function block(L, x)
  local h = nn.layernorm(L, "attn_norm", x)
  if cfg.parallel then return x + attention(L, h) + mlp(L, h) end
  x = x + attention(L, h)
  return x + mlp(L, nn.layernorm(L, "mlp_norm", x))
end

return plait.model {
  name = "stablelm2", family = "stablelm2", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
