-- Frozen parameters (trainable = false): the learned positions, each block's first layer norm (weight and
-- bias: its backward computes no parameter gradient) and the final norm's weight (its bias trains, so
-- both gradients are computed and the frozen one left out). For gradient checks and for checking that
-- training leaves them as they were.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config { vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 2, ffn = 64, dropout = 0.0 }

local function frozen_layernorm(S, name, x, bias_too)
  local s = S:sub(name)
  local w = s:param("weight", { cfg.hidden }, { init = "ones", trainable = false })
  local b = s:param("bias", { cfg.hidden }, { init = "zeros", trainable = not bias_too })
  return plait.norm("layer", x, w, b, 1e-5)
end

local function embed(S, tokens)
  local x = plait.embedding(tokens, S:param("wte", { plait.vocab(cfg.vocab), cfg.hidden }, { shard = "vocab" }))
  return x + S:param("wpe", { "seq", cfg.hidden }, { trainable = false })
end

local function block(L, x)
  x = x + nn.attention(L, "attn", frozen_layernorm(L, "ln_1", x, true))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

local function head(S, x, targets)
  local logits = plait.matmul(frozen_layernorm(S, "ln_f", x, false), S:get("wte"), { transpose = true })
  return plait.cross_entropy(logits, targets, { vocab = cfg.vocab })
end

return plait.model {
  name = "frozen", config = cfg, layers = cfg.layers, embed = embed, block = block, head = head,
}
