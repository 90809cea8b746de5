-- Qwen2-MoE (Qwen Team 2024, Qwen1.5-MoE): the Qwen2 block (biases on q, k and v only) with its MLP
-- a mixture of experts: each token's 4 of 60 SwiGLU experts of width 1408, weighted by the softmax
-- over all 60 taken at the top 4 (not renormalised: norm_topk_prob false), plus a shared expert of
-- width 5632 scaled by sigmoid(shared_expert_gate). Qwen1.5-MoE-A2.7B sizes by default; every layer
-- sparse (ffn, the width of a dense layer, only goes to config.json).
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 151936, seq = 4096, layers = 24, hidden = 2048, heads = 16, kv_heads = 16, ffn = 5632,
  experts = 60, topk = 4, expert_ffn = 1408, shared_ffn = 5632, renormalize = false,
  norm = "rmsnorm", norm_eps = 1e-6, positions = "rope", rope_theta = 1000000,
  bias = false, qkv_bias = true, tied = false, dropout = 0.0, aux_loss = 0.0, z_loss = 0.0,
  capacity_factor = 0.0, drop_policy = "probs",
}

return plait.model {
  name = "qwen2_moe", family = "qwen2_moe", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = require "moe_block" ("mlp"), head = nn.lm_head,
}
