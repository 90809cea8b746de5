-- A constant of 300,000 values, more than model.c carries (plait build writes it into
-- DIR/constants.bin): a fixed scale of each position's wide hidden layer in the embedding stage.
-- --set pieces=5 gives the same values as five constants of 60,000 (each in model.c) over five
-- slices of that layer, for comparison.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config { vocab = 256, seq = 32, layers = 1, hidden = 32, heads = 2, ffn = 64,
                           wide = 9375, pieces = 1, dropout = 0.0 }

local function scale(t, j) return 0.5 + 0.25 * math.sin(0.37 * t + 0.011 * j) end

local function scaled(h)
  if cfg.pieces == 1 then return h * plait.constant("scale", { "seq", cfg.wide }, scale) end
  local width, sizes = cfg.wide // cfg.pieces, {}
  for i = 1, cfg.pieces do sizes[i] = width end
  local parts = { h:split(-1, sizes) }
  for i, part in ipairs(parts) do
    local first = (i - 1) * width
    parts[i] = part * plait.constant("scale_" .. i, { "seq", part:dim(-1) },
                                     function(t, j) return scale(t, first + j) end)
  end
  return plait.concat(parts, -1)
end

local function embed(S, tokens)
  local x = nn.embedding(S, tokens)
  return x + nn.linear(S, "down", scaled(nn.linear(S, "up", x, cfg.wide)), cfg.hidden)
end

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

return plait.model {
  name = "large_constant", config = cfg, layers = cfg.layers, embed = embed, block = block,
  head = nn.lm_head,
}
