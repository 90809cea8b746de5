-- GPT-J (Wang and Komatsuzaki 2021): a parallel block, x + attention(ln_1(x)) + mlp(ln_1(x)) with
-- one layer norm, rotary positions over the first 64 dims of each head of 256 in interleaved pairs
-- (2i, 2i + 1), no biases on q, k, v and the output projection, the tanh GeLU, an untied output
-- layer with a bias. GPT-J-6B's sizes by default.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 50400, seq = 2048, layers = 28, hidden = 4096, heads = 16, ffn = 16384, norm_eps = 1e-5,
  positions = "rope", rope_theta = 10000, rotary = 64, rope_interleaved = true, activation = "gelu",
  bias = true, qkv_bias = false, proj_bias = false, tied = false, head_bias = true, dropout = 0.0,
}

local function block(L, x)
  local h = nn.layernorm(L, "ln_1", x)
  return x + nn.attention(L, "attn", h) + nn.mlp(L, "mlp", h)
end

return plait.model {
  name = "gptj", family = "gptj", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
