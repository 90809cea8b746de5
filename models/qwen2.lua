-- Qwen2 (Yang et al. 2024): the Llama block with biases on q, k and v only, rotary positions of theta
-- 10^6, RMSNorm of eps 10^-6, grouped-query attention; Qwen2-7B sizes by default (untied; the small
-- sizes tie, --set tied=true).
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 152064, seq = 4096, layers = 28, hidden = 3584, heads = 28, kv_heads = 4, ffn = 18944,
  norm = "rmsnorm", activation = "swiglu", positions = "rope", rope_theta = 1000000, norm_eps = 1e-6,
  bias = false, qkv_bias = true, tied = false, dropout = 0.0,
}

return plait.model {
  name = "qwen2", family = "qwen2", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = require "llama_block", head = nn.lm_head,
}
