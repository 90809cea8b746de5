-- Phi-2 (Microsoft 2023): a parallel block, x + attention(ln(x)) + mlp(ln(x)) with one layer norm,
-- rotary positions over the first 40% of each head (32 of 80 dims), biases everywhere, the tanh GeLU,
-- an untied output layer with a bias. Phi-2's sizes by default.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 51200, seq = 2048, layers = 32, hidden = 2560, heads = 32, ffn = 10240, norm_eps = 1e-5,
  positions = "rope", rope_theta = 10000, rotary_fraction = 0.4, activation = "gelu", bias = true,
  tied = false, head_bias = true, dropout = 0.0,
}

local function block(L, x)
  local h = nn.layernorm(L, "ln", x)
  return x + nn.attention(L, "attn", h) + nn.mlp(L, "mlp", h)
end

return plait.model {
  name = "phi2", family = "phi", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
