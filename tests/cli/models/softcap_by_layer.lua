-- A GPT whose even layers cap their attention's scores (Gemma-2's cap) and odd ones do not: a GPU
-- program runs the capped layers' attention on plait's kernels and the others' on cuDNN.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config { vocab = 512, seq = 256, layers = 4, hidden = 256, heads = 4, ffn = 1024, dropout = 0.0 }

local function block(L, x)
  local capped = L.layer % 2 == 0 and 50.0 or nil
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x), { attn_softcap = capped })
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

return plait.model {
  name = "softcap_by_layer", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
