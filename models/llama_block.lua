-- The Llama block, written out from primitives as a new variant would be: pre-RMSNorm attention (the
-- config's heads, kv_heads, rotary positions and biases), then a pre-RMSNorm SwiGLU MLP without biases.
-- Llama (models/llama.lua) and Qwen2 (models/qwen2.lua) share it: `block = require "llama_block"`.
local plait = require "plait"
local nn = require "plait.nn"

return function(L, x)
  local cfg = L.cfg
  local h = x + nn.attention(L, "attn", nn.rmsnorm(L, "attn_norm", x))
  local g = nn.rmsnorm(L, "mlp_norm", h)
  local gate = nn.linear(L, "gate", g, cfg.ffn, "column", { bias = false })
  local up = nn.linear(L, "up", g, cfg.ffn, "column", { bias = false })
  return h + nn.linear(L, "down", plait.silu(gate) * up, cfg.hidden, "row", { bias = false })
end
