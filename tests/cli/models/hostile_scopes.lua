-- A GPT whose scopes are named as C keywords, runtime symbols, the stage functions' own arguments
-- and the dims' constants: the generated program must name its buffers apart from all of them.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 256, seq = 64, layers = 2, hidden = 128, heads = 4, ffn = 512, dropout = 0.0,
}

local function block(L, x)
  x = x + nn.attention(L, "int", nn.layernorm(L, "B", x))
  return x + nn.mlp(L, "rt_x", nn.layernorm(L, "dy", x))
end

return plait.model {
  name = "hostile", family = "gpt2", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
  parallel = { mbs = 2, gbs = 2 },
}
