-- A model file whose block calls something that does not exist (line 9).
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config { vocab = 256, seq = 16, hidden = 32, heads = 2, layers = 2 }

local function block(L, x)
  local h = nn.layernorm(L, "ln", x)
  return x + nn.attentoin(L, "attn", h)
end

return plait.model { name = "broken", config = cfg, embed = nn.embedding, block = block, head = nn.lm_head }
