-- A block whose layers differ in more than their attention's options: refused, naming the line.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config { vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 2, ffn = 64, dropout = 0.0 }

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  if L.layer == 1 then x = x * 0.5 end
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

return plait.model {
  name = "layer_differs", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
