-- A BERT-style bidirectional encoder (Devlin et al. 2019) with post-LayerNorm blocks and a masked-LM head
-- tied to the embedding; BERT-large sizes by default. Targets are -1 where a position is not masked.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 30522, seq = 512, layers = 24, hidden = 1024, heads = 16, ffn = 4096, causal = false, dropout = 0.0,
}

local function embed(S, tokens)
  return nn.layernorm(S, "ln_embed", nn.embedding(S, tokens))
end

local function block(L, x)
  x = nn.layernorm(L, "ln_1", x + nn.attention(L, "attn", x))
  return nn.layernorm(L, "ln_2", x + nn.mlp(L, "mlp", x))
end

return plait.model {
  name = "bert", config = cfg, layers = cfg.layers,
  embed = embed, block = block, head = nn.mlm_head,
}
