-- Gemma (Gemma Team 2024): RMSNorms that scale by 1 + weight, the embedding scaled by √hidden and tied to
-- the output layer, heads of 256 wider than hidden/heads, rotary positions, GeGLU (tanh GeLU of the gate
-- times up), no biases; Gemma-7B sizes by default (Gemma-2B: --set layers=18 hidden=2048 heads=8
-- kv_heads=1 ffn=16384).
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 256000, seq = 8192, layers = 28, hidden = 3072, heads = 16, kv_heads = 16, head_dim = 256, ffn = 24576,
  norm = "rmsnorm", norm_offset = 1, norm_eps = 1e-6, positions = "rope", rope_theta = 10000,
  scale_embedding = true, activation = "geglu", bias = false, tied = true, dropout = 0.0,
}

return plait.model {
  name = "gemma", family = "gemma", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = require "llama_block", head = nn.lm_head,
}
