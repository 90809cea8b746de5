-- Layer norms with a weight and no bias: config.norm_bias = false takes the bias off ln_2 (a norm
-- over each run of 8 elements) and the final ln_f, while ln_1 keeps its own (opts.bias = true). For
-- gradient checks.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 2, ffn = 64, dropout = 0.0,
  norm_bias = false,
}

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x, { bias = true }))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x, { group = 8 }))
end

return plait.model {
  name = "norm_no_bias", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
