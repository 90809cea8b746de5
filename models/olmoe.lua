-- OLMoE (Muennighoff et al. 2024): pre-norm blocks whose attention RMS-norms the whole q and k
-- projections (models/olmo_attention.lua, as OLMo-2's), and whose MLP is a mixture of experts:
-- each token's 8 of 64 SwiGLU experts of width 1024, weighted by the softmax over all 64 taken at
-- the top 8 (not renormalised). No biases, untied; OLMoE-1B-7B sizes by default.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 50304, seq = 4096, layers = 16, hidden = 2048, heads = 16, kv_heads = 16, ffn = 1024,
  experts = 64, topk = 8, renormalize = false, norm = "rmsnorm", norm_eps = 1e-5,
  positions = "rope", rope_theta = 10000, bias = false, tied = false, dropout = 0.0,
  aux_loss = 0.0, z_loss = 0.0,
  capacity_factor = 0.0, drop_policy = "probs",
}

return plait.model {
  name = "olmoe", family = "olmoe", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = require "moe_block" ("mlp", require "olmo_attention"),
  head = nn.lm_head,
}
