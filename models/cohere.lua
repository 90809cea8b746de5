-- Cohere's Command-R (2024): a parallel block, x + attention(ln(x)) + mlp(ln(x)) with one layer
-- norm without a bias, rotary positions in interleaved pairs (2i, 2i + 1), a SwiGLU MLP, no
-- biases, the embedding tied to the output layer and the logits scaled by 1/16. Command-R v01's
-- sizes by default.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 256000, seq = 8192, layers = 40, hidden = 8192, heads = 64, kv_heads = 64, ffn = 22528,
  norm_eps = 1e-5, norm_bias = false, positions = "rope", rope_theta = 8000000,
  rope_interleaved = true, activation = "swiglu", bias = false, tied = true, logit_scale = 0.0625,
  dropout = 0.0,
}

local function block(L, x)
  local h = nn.layernorm(L, "ln", x)
  return x + nn.attention(L, "attn", h) + nn.mlp(L, "mlp", h)
end

return plait.model {
  name = "cohere", family = "cohere", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
