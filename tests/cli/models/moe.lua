-- A small mixture of experts for gradient checks and training: a Llama-style attention, then nn.moe
-- in place of the MLP (config.experts experts, config.topk of them a token, renormalised or not, a
-- shared expert when config.shared_ffn is set). With fewer tokens than experts (seq=4 under
-- experts=8, topk=1) some experts receive no token. The router starts large (router_std) so that no
-- token's k-th and next scores are near a tie, where the choice, and the loss's slope, jump under
-- finite differences. config.aux_loss and config.z_loss (0: off) add the router's losses;
-- config.capacity_factor (0: dropless) drops the rows past each expert's capacity.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 2, ffn = 24, experts = 4, topk = 2,
  renormalize = true, shared_ffn = 0, router_std = 0.5, norm = "rmsnorm", positions = "rope",
  bias = false, tied = false, aux_loss = 0.0, z_loss = 0.0,
  capacity_factor = 0.0, drop_policy = "probs", router_score = "softmax", routed_scale = 1.0,
}

local function block(L, x)
  local h = x + nn.attention(L, "attn", nn.norm(L, "attn_norm", x))
  return h + nn.moe(L, "moe", nn.norm(L, "moe_norm", h))
end

return plait.model {
  name = "moe", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
