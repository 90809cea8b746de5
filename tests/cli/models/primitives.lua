-- Every elementwise primitive in one small GPT: an MLP of the exact GeLU, a leaky ReLU made of max and a
-- mask made of comparisons, clamp, erf, sqrt, rsqrt, log and abs, and output logits capped with softcap
-- (as Gemma-2 caps them). For gradient checks and layout equivalence, not for quality: the kinks of max,
-- min, abs and clamp sit away from where the activations are (near 0), so that finite differences do not
-- step across them.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config { vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 2, ffn = 64, dropout = 0.0 }

local function activation(u)
  local leaky = plait.max(u, 0.1 * u - 2) * plait.gt(u, -100) * plait.le(u, 100)
  local smooth = plait.sqrt(1 + plait.square(u)) + plait.rsqrt(1 + plait.square(u)) + plait.log(1 + plait.abs(u - 3))
  return plait.gelu_exact(u) + 0.5 * leaky + 0.1 * plait.clamp(smooth, nil, 50) + 0.1 * plait.erf(plait.min(u, 3))
end

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  local u = nn.linear(L, "fc", nn.layernorm(L, "ln_2", x), cfg.ffn, "column")
  return x + nn.linear(L, "proj", activation(u), cfg.hidden, "row")
end

local function head(S, x, targets)
  local logits = plait.matmul(nn.layernorm(S, "ln_f", x), S:get("wte"), { transpose = true })
  return plait.cross_entropy(plait.softcap(logits, 3), targets, { vocab = cfg.vocab })
end

return plait.model {
  name = "primitives", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = head,
}
