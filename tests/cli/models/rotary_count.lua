-- Rotary positions over the first 30 of each head's 44 dims, given as a count (config.rotary): a
-- fraction would not do, 44 · (30/44) being 29.999... in floating point. --set rotary_fraction=...
-- beside it is refused.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 256, seq = 16, layers = 1, hidden = 88, heads = 2, ffn = 64, positions = "rope",
  rotary = 30, rotary_fraction = 1, norm = "rmsnorm", activation = "swiglu", bias = false,
}

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.rmsnorm(L, "attn_norm", x))
  return x + nn.mlp(L, "mlp", nn.rmsnorm(L, "mlp_norm", x))
end

return plait.model {
  name = "rotary_count", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
