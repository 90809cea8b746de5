-- A model whose block adds tensors of different widths (line 9).
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config { vocab = 256, seq = 16, hidden = 32, heads = 2, layers = 2, ffn = 64 }

local function block(L, x)
  local up = nn.linear(L, "up", x, cfg.ffn, "column")
  return x + up
end

return plait.model { name = "mismatch", config = cfg, embed = nn.embedding, block = block, head = nn.lm_head }
