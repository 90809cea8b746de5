-- OLMo's attention with QK-norm over the whole q and k projections (OLMo-2, OLMoE): q, k, v without
-- biases, an RMS norm of all of q ("q_norm", heads·head_dim wide) and of all of k ("k_norm"), then
-- rotary attention (grouped-query with config.kv_heads) and the output projection. Written out
-- from primitives: nn.attention's qk_norm is per head. `require "olmo_attention"` is the function
-- of (L, x).
local plait = require "plait"
local nn = require "plait.nn"

return function(L, x)
  local cfg = L.cfg
  local s, head_dim = L:sub("attn"), cfg.hidden // cfg.heads
  local qdim = plait.dim(cfg.heads * head_dim, "qdim", head_dim)
  local kvdim = plait.dim(cfg.kv_heads * head_dim, "kvdim", head_dim)
  local q = nn.rmsnorm(s, "q_norm", nn.linear(s, "q", x, qdim, "column", { bias = false }))
  local k = nn.rmsnorm(s, "k_norm", nn.linear(s, "k", x, kvdim, "column", { bias = false }))
  local v = nn.linear(s, "v", x, kvdim, "column", { bias = false })
  local o = plait.attention(q, k, v, { heads = cfg.heads, kv_heads = cfg.kv_heads, causal = true,
                                       rope = true, rope_theta = cfg.rope_theta })
  return nn.linear(s, "proj", o, cfg.hidden, "row", { bias = false, residual = true })
end
