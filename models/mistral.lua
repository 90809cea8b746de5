-- Mistral (Jiang et al. 2023): the Llama block with grouped-query attention (8 kv heads) over a sliding
-- window: each position sees itself and the 4095 before it. Mistral-7B-v0.1 sizes by default.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 32000, seq = 8192, layers = 32, hidden = 4096, heads = 32, kv_heads = 8, ffn = 14336,
  norm = "rmsnorm", norm_eps = 1e-5, activation = "swiglu", positions = "rope", rope_theta = 10000,
  sliding_window = 4096, bias = false, tied = false, dropout = 0.0,
}

return plait.model {
  name = "mistral", family = "mistral", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = require "llama_block", head = nn.lm_head,
}
