-- The pre-norm block of the mixture-of-experts models: the config's attention (nn.attention:
-- grouped-query, rotary, q/k/v biases with qkv_bias, per-head QK-norm with qk_norm), then nn.moe
-- in place of the MLP. `require "moe_block"` is a function of the MoE layer's name ("mlp": Qwen's
-- names; "block_sparse_moe": Mixtral's) and optionally of the attention (OLMoE's): the block.
local nn = require "plait.nn"

return function(moe_name, attention)
  attention = attention or function(L, x) return nn.attention(L, "attn", x) end
  return function(L, x)
    local h = x + attention(L, nn.norm(L, "attn_norm", x))
    return h + nn.moe(L, moe_name, nn.norm(L, "mlp_norm", h))
  end
end
