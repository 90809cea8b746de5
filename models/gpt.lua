-- The GPT family of the Megatron-LM papers: learned positions, pre-LayerNorm blocks, GeLU MLP of 4·hidden,
-- embeddings tied to the output layer. Sizes from --set layers=N hidden=N heads=N (and vocab=, seq=).
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 51200, seq = 2048, layers = 24, hidden = 2048, heads = 16, ffn = 0, dropout = 0.0,
}
if cfg.ffn == 0 then cfg.ffn = 4 * cfg.hidden end

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

return plait.model {
  name = "gpt", family = "gpt2", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
