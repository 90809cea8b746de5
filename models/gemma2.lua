-- Gemma-2 (Gemma Team 2024): the Gemma block with norms before and after both the attention and the MLP,
-- scores scaled by query_pre_attn_scalar^−½ and capped at 50, sliding-window attention (4096) on even
-- layers and global attention on odd ones, final logits capped at 30, tied; Gemma-2-9B sizes by default.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 256000, seq = 8192, layers = 42, hidden = 3584, heads = 16, kv_heads = 8, head_dim = 256, ffn = 14336,
  norm = "rmsnorm", norm_offset = 1, norm_eps = 1e-6, positions = "rope", rope_theta = 10000,
  scale_embedding = true, activation = "geglu", query_pre_attn_scalar = 256, attn_softcap = 50.0, logit_softcap = 30.0,
  sliding_window = 4096, bias = false, tied = true, dropout = 0.0, init_std = 0.02,
}

local function block(L, x)
  local window = L.layer % 2 == 0 and cfg.sliding_window -- even layers slide, odd ones see everything
  local attention = nn.attention(L, "attn", nn.rmsnorm(L, "attn_norm", x),
                                 { sliding_window = window, attn_scale = cfg.query_pre_attn_scalar ^ -0.5 })
  local h = x + nn.rmsnorm(L, "attn_post_norm", attention)
  local g = nn.rmsnorm(L, "mlp_norm", h)
  local gate = nn.linear(L, "gate", g, cfg.ffn, "column", { bias = false })
  local up = nn.linear(L, "up", g, cfg.ffn, "column", { bias = false })
  local mlp = nn.linear(L, "down", plait.gelu(gate) * up, cfg.hidden, "row", { bias = false })
  return h + nn.rmsnorm(L, "mlp_post_norm", mlp)
end

return plait.model {
  name = "gemma2", family = "gemma2", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
