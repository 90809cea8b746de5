-- GPT-2 124M (Radford et al. 2019): the GPT block with vocab 50257, sequence 1024, 12 layers of 768 with 12 heads.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 50257, seq = 1024, layers = 12, hidden = 768, heads = 12, ffn = 3072, dropout = 0.0,
}

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

return plait.model {
  name = "gpt2", family = "gpt2", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
