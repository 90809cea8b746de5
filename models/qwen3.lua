-- Qwen3 (Qwen Team 2025): the Llama block with RMS norms of each head of q and k before the rotary
-- positions (QK-norm), heads of 128, grouped-query attention, no biases, rotary theta 10^6; Qwen3-8B
-- sizes by default (untied; the small sizes tie, --set tied=true).
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 151936, seq = 4096, layers = 36, hidden = 4096, heads = 32, kv_heads = 8, head_dim = 128, ffn = 12288,
  norm = "rmsnorm", norm_eps = 1e-6, activation = "swiglu", positions = "rope", rope_theta = 1000000,
  qk_norm = true, bias = false, tied = false, dropout = 0.0,
}

return plait.model {
  name = "qwen3", family = "qwen3", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = require "llama_block", head = nn.lm_head,
}
