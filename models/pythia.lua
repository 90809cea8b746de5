-- GPT-NeoX (Black et al. 2022) as Pythia trains it: a parallel block, x + attention(ln_1(x)) +
-- mlp(ln_2(x)) with a layer norm for each branch (sequential with --set parallel=false), rotary
-- positions over the first quarter of each head, biases everywhere, the exact GeLU, an untied
-- output layer. Pythia-6.9B's sizes by default.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 50432, seq = 2048, layers = 32, hidden = 4096, heads = 32, ffn = 16384, norm_eps = 1e-5,
  positions = "rope", rope_theta = 10000, rotary_fraction = 0.25, activation = "gelu_exact",
  bias = true, tied = false, parallel = true, dropout = 0.0,
}

local function block(L, x)
  if not L.cfg.parallel then
    x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
    return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
  end
  return x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
    + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

return plait.model {
  name = "pythia", family = "gpt_neox", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
