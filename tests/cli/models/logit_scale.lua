-- tiny with its logits multiplied by config.logit_scale before the loss (Cohere's logit_scale): 0.5
-- for gradient checks; 0 makes every logit 0, the loss then ln(vocab) whatever the weights.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 2, ffn = 64, logit_scale = 0.5,
}

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

return plait.model {
  name = "logit_scale", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
