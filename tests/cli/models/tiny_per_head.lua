-- tiny whose Hugging Face family is GPT-2's with the fused QKV laid out head by head (q, k and v of head
-- 0, then of head 1, ...), as GPT-NeoX lays out its query_key_value: a family extended in the model file.
local plait = require "plait"
local nn = require "plait.nn"
local hf = require "plait.hf"

local cfg = plait.config { vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 2, ffn = 64 }

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

local per_head = hf.extend("gpt2", {
  name = "gpt2-per-head",
  layer = {
    { hf = "transformer.h.%d.attn.c_attn.weight", plait = { "attn.q.weight", "attn.k.weight", "attn.v.weight" },
      transpose = true, groups = cfg.heads },
    { hf = "transformer.h.%d.attn.c_attn.bias", plait = { "attn.q.bias", "attn.k.bias", "attn.v.bias" },
      groups = cfg.heads },
  },
})

return plait.model {
  name = "tiny", family = per_head, config = cfg,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
