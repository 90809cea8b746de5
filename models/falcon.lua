-- Falcon (Almazrouei et al. 2023): a parallel block with rotary positions, no biases, the exact
-- GeLU and the embedding tied to the output layer. Falcon-7B's layout by default: one layer norm
-- for both branches and multi-query attention (kv_heads = 1); --set new_decoder_architecture=true
-- gives Falcon-40B's, a layer norm for each branch (ln_attn, ln_mlp) and grouped-query attention
-- (kv_heads).
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 65024, seq = 2048, layers = 32, hidden = 4544, heads = 71, kv_heads = 1, ffn = 18176,
  norm_eps = 1e-5, positions = "rope", rope_theta = 10000, activation = "gelu_exact", bias = false,
  tied = true, new_decoder_architecture = false, dropout = 0.0,
}

-- The older layout has one key/value head (multi_query) or one per head.
if not cfg.new_decoder_architecture and cfg.kv_heads ~= 1 and cfg.kv_heads ~= cfg.heads then
  plait.fail("falcon: without new_decoder_architecture kv_heads is 1 or heads (%d), not %d",
             cfg.heads, cfg.kv_heads)
end

local function block(L, x)
  if L.cfg.new_decoder_architecture then
    return x + nn.attention(L, "attn", nn.layernorm(L, "ln_attn", x))
      + nn.mlp(L, "mlp", nn.layernorm(L, "ln_mlp", x))
  end
  local h = nn.layernorm(L, "ln", x)
  return x + nn.attention(L, "attn", h) + nn.mlp(L, "mlp", h)
end

return plait.model {
  name = "falcon", family = "falcon", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
