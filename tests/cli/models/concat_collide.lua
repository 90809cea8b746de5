-- Two concats whose first parts share a dim (half_ffn) but whose results differ in width: the first
-- result's dim is half_ffn+, the second's, which may not take that name, half_ffn+quarter. For
-- gradient checks.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config { vocab = 256, seq = 16, layers = 1, hidden = 32, heads = 2, ffn = 64 }

local function block(L, x)
  local half = plait.dim(cfg.ffn // 2, "half_ffn")
  local a = nn.linear(L, "fc_a", x, half, "column")
  local b = nn.linear(L, "fc_b", x, half, "column")
  local wide = plait.concat({ a, b }, -1)
  local c = nn.linear(L, "fc_c", x, plait.dim(16, "quarter"), "column")
  local narrow = plait.concat({ a, c }, -1)
  x = x + nn.linear(L, "proj_wide", plait.gelu(wide), cfg.hidden, "row")
  return x + nn.linear(L, "proj_narrow", plait.gelu(narrow), cfg.hidden, "row")
end

return plait.model {
  name = "concat_collide", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
