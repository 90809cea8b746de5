-- A GPT with a 256-symbol byte vocabulary, small enough to train in seconds on a CPU.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 256, seq = 64, layers = 4, hidden = 128, heads = 4, ffn = 512, dropout = 0.0,
}

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

return plait.model {
  name = "tiny", family = "gpt2", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
  parallel = { mbs = 8, gbs = 8 },
}
