-- The Llama block, written out from primitives as a new variant would be: pre-RMSNorm attention (the
-- config's heads, kv_heads, head_dim, rotary positions and biases), then a pre-RMSNorm gated MLP without
-- biases: SwiGLU, silu(gate)·up, or with config.activation = "geglu" GeGLU, gelu(gate)·up (Gemma's tanh
-- GeLU). Llama, Qwen2 and Gemma (models/*.lua) share it: `block = require "llama_block"`.
local plait = require "plait"
local nn = require "plait.nn"

return function(L, x)
  local cfg = L.cfg
  local h = x + nn.attention(L, "attn", nn.rmsnorm(L, "attn_norm", x))
  local g = nn.rmsnorm(L, "mlp_norm", h)
  local gate = nn.linear(L, "gate", g, cfg.ffn, "column", { bias = false })
  local up = nn.linear(L, "up", g, cfg.ffn, "column", { bias = false })
  local act = cfg.activation == "geglu" and plait.gelu or plait.silu
  return h + nn.linear(L, "down", act(gate) * up, cfg.hidden, "row", { bias = false })
end
