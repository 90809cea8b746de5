-- OLMo-2 (OLMo Team 2024): RMS norms after the attention and the MLP rather than before, RMS norms of the
-- whole q and k projections (QK-norm), rotary theta 5·10^5, SwiGLU, no biases, untied; OLMo-2-7B sizes.
-- Its attention is models/olmo_attention.lua (nn.attention has no place for whole-q and k norms).
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 100352, seq = 4096, layers = 32, hidden = 4096, heads = 32, kv_heads = 32, ffn = 11008,
  norm = "rmsnorm", norm_eps = 1e-6, positions = "rope", rope_theta = 500000, activation = "swiglu",
  bias = false, tied = false, dropout = 0.0,
}

local attention = require "olmo_attention"

local function block(L, x)
  local h = x + nn.rmsnorm(L, "attn_norm", attention(L, x))
  local gate = nn.linear(L, "gate", h, cfg.ffn, "column", { bias = false })
  local up = nn.linear(L, "up", h, cfg.ffn, "column", { bias = false })
  local mlp = nn.linear(L, "down", plait.silu(gate) * up, cfg.hidden, "row", { bias = false })
  return h + nn.rmsnorm(L, "mlp_norm", mlp)
end

return plait.model {
  name = "olmo2", family = "olmo2", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
