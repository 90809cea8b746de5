-- Constants: the original Transformer's sinusoidal positions as a fixed table instead of learned ones,
-- and a fixed per-channel scale of the MLP's hidden layer (taken in shares by tensor parallelism). Neither
-- is trained nor saved. For gradient checks and layout equivalence.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config { vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 2, ffn = 64, dropout = 0.0,
                           positions = "none" }

local function sinusoid(t, i)
  local angle = t / 10000 ^ (2 * (i // 2) / cfg.hidden)
  return i % 2 == 0 and math.sin(angle) or math.cos(angle)
end

local function embed(S, tokens)
  return nn.embedding(S, tokens) + plait.constant("positions", { "seq", "hidden" }, sinusoid)
end

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  local h = plait.gelu(nn.linear(L, "fc", nn.layernorm(L, "ln_2", x), cfg.ffn, "column"))
  local scale = plait.constant("channel_scale", { cfg.ffn }, function(i) return 1 + 0.5 * math.sin(i) end)
  return x + nn.linear(L, "proj", h * scale, cfg.hidden, "row")
end

return plait.model {
  name = "constants", config = cfg, layers = cfg.layers, embed = embed, block = block, head = nn.lm_head,
}
