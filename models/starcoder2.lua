-- StarCoder2 (Lozhkov et al. 2024): pre-LayerNorm blocks with grouped-query attention over a
-- sliding window, rotary positions, biases everywhere, an MLP of the tanh GeLU, the embedding tied
-- to the output layer. StarCoder2-3B's sizes by default.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 49152, seq = 16384, layers = 30, hidden = 3072, heads = 24, kv_heads = 2, ffn = 12288,
  norm_eps = 1e-5, positions = "rope", rope_theta = 999999.4420358813, sliding_window = 4096,
  activation = "gelu", bias = true, tied = true, dropout = 0.0,
}

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

return plait.model {
  name = "starcoder2", family = "starcoder2", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
