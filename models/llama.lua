-- A Llama-style decoder (Touvron et al. 2023): RMSNorm, SwiGLU, rotary positions, grouped-query
-- attention (kv_heads < heads), no biases, an untied output layer. Llama-2-7B sizes by default; Llama 3.1's
-- rotary scaling with --set rope_scaling=llama3 (factor 8, frequencies 1 and 4, 8192 original positions).
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 32000, seq = 4096, layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008,
  norm = "rmsnorm", activation = "swiglu", positions = "rope", rope_theta = 10000, bias = false, tied = false,
  norm_eps = 1e-5, dropout = 0.0, rope_scaling = "none", rope_factor = 8, rope_low_freq_factor = 1,
  rope_high_freq_factor = 4, rope_original_positions = 8192,
}

-- The block is models/llama_block.lua, written out from primitives.
return plait.model {
  name = "llama", family = "llama", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = require "llama_block", head = nn.lm_head,
}
