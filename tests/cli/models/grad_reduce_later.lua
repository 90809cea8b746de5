-- A model file whose layout names a time to reduce gradients that plait does not know ("later").
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config { vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 2, ffn = 64 }

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

return plait.model {
  name = "grad_reduce_later", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
  parallel = { grad_reduce = "later" },
}
