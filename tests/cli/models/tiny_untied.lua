-- tiny's configuration and name with an untied output matrix chosen in the model file, not the config:
-- its checkpoints hold one tensor more than tiny's (lm_head.weight) under the same configuration.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 256, seq = 64, layers = 4, hidden = 128, heads = 4, ffn = 512, dropout = 0.0,
}

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

local function head(S, x, targets) return nn.lm_head(S, x, targets, { tied = false }) end

return plait.model {
  name = "tiny", family = "gpt2", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = head,
  parallel = { mbs = 8, gbs = 8 },
}
