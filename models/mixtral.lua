-- Mixtral (Jiang et al. 2024): the Mistral block with its MLP a sparse mixture of experts: each
-- token's 2 of 8 SwiGLU experts, weighted by the softmax over their router scores (nn.moe:
-- "block_sparse_moe", router "gate", experts w1, w3, w2). Mixtral-8x7B-v0.1 sizes by default (no
-- sliding window).
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 32000, seq = 4096, layers = 32, hidden = 4096, heads = 32, kv_heads = 8, ffn = 14336,
  experts = 8, topk = 2, norm = "rmsnorm", norm_eps = 1e-5, positions = "rope", rope_theta = 1e6,
  bias = false, tied = false, dropout = 0.0, aux_loss = 0.0, z_loss = 0.0,
  capacity_factor = 0.0, drop_policy = "probs",
}

return plait.model {
  name = "mixtral", family = "mixtral", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = require "moe_block" ("block_sparse_moe"), head = nn.lm_head,
}
