-- Llama-3 (Grattafiori et al. 2024): the Llama block with a vocabulary of 128256, grouped-query attention
-- of 8 kv heads and rotary theta 5·10^5; Llama-3-8B sizes. (Llama-3.1's rotary scaling is not here yet.)
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 128256, seq = 8192, layers = 32, hidden = 4096, heads = 32, kv_heads = 8, ffn = 14336,
  norm = "rmsnorm", activation = "swiglu", positions = "rope", rope_theta = 500000, bias = false, tied = false,
  norm_eps = 1e-5, dropout = 0.0,
}

return plait.model {
  name = "llama3", family = "llama", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = require "llama_block", head = nn.lm_head,
}
