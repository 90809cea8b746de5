-- tiny with a dim that is not a whole number of pieces: its error names this file's line once.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config { vocab = 256, seq = 16, layers = 1, hidden = 32, heads = 2, ffn = 64 }

local function block(L, x)
  local pieces = plait.dim(30, "pieces", 4)
  return x + nn.linear(L, "up", x, pieces, "column")
end

return plait.model {
  name = "bad_dim", config = cfg,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
