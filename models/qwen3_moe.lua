-- Qwen3-MoE (Qwen Team 2025): the Qwen3 block (RMS norms of each head of q and k, heads of 128, no
-- biases) with its MLP a mixture of experts: each token's 8 of 128 SwiGLU experts of width 768,
-- weighted by the softmax over their scores renormalised over the 8 (norm_topk_prob), no shared
-- expert. Qwen3-30B-A3B sizes by default; every layer sparse (ffn, the width of a dense layer, only
-- goes to config.json).
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 151936, seq = 4096, layers = 48, hidden = 2048, heads = 32, kv_heads = 4, head_dim = 128,
  ffn = 6144, experts = 128, topk = 8, expert_ffn = 768, renormalize = true,
  norm = "rmsnorm", norm_eps = 1e-6, positions = "rope", rope_theta = 1000000, qk_norm = true,
  bias = false, tied = false, dropout = 0.0, aux_loss = 0.0, z_loss = 0.0,
  capacity_factor = 0.0, drop_policy = "probs",
}

return plait.model {
  name = "qwen3_moe", family = "qwen3_moe", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = require "moe_block" ("mlp"), head = nn.lm_head,
}
