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

local function block(L, x)
  local h = x + nn.attention(L, "attn", nn.rmsnorm(L, "attn_norm", x))
  local g = nn.rmsnorm(L, "mlp_norm", h)
  local gate = nn.linear(L, "gate", g, cfg.ffn, "column", { bias = false })
  local up = nn.linear(L, "up", g, cfg.ffn, "column", { bias = false })
  return h + nn.linear(L, "down", plait.silu(gate) * up, cfg.hidden, "row", { bias = false })
end

return plait.model {
  name = "qwen2", family = "qwen2", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
