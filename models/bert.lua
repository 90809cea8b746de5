-- A BERT-style bidirectional encoder (Devlin et al. 2019) with post-LayerNorm blocks, the exact (erf) GeLU
-- and a masked-LM head tied to the embedding; BERT-large sizes by default. The embedding adds token type
-- 0's vector ("wtt": every position is of type 0). Targets are -1 where a position is not masked.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 30522, seq = 512, layers = 24, hidden = 1024, heads = 16, ffn = 4096, causal = false, dropout = 0.0,
  activation = "gelu_exact", norm_eps = 1e-12,
}

local function embed(S, tokens)
  local x = nn.embedding(S, tokens) + S:param("wtt", { cfg.hidden }, { std = 0.02 })
  return nn.layernorm(S, "ln_embed", x)
end

local function block(L, x)
  x = nn.layernorm(L, "ln_1", x + nn.attention(L, "attn", x))
  return nn.layernorm(L, "ln_2", x + nn.mlp(L, "mlp", x))
end

return plait.model {
  name = "bert", family = "bert", config = cfg, layers = cfg.layers,
  embed = embed, block = block, head = nn.mlm_head,
}
