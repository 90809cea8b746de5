-- The Llama block, written out from primitives as a new variant would be: a pre-norm attention
-- (the config's norm, RMS norm for Llama; heads, kv_heads, head_dim, rotary positions and biases),
-- then a pre-norm gated MLP without biases: SwiGLU, silu(gate)·up, or with config.activation =
-- "geglu" GeGLU, gelu(gate)·up (Gemma's tanh GeLU). Llama, Qwen2, Gemma, Mistral, Qwen3 and
-- StableLM (layer norms) share it: `block = require "llama_block"`.
local plait = require "plait"
local nn = require "plait.nn"

return function(L, x)
  local cfg = L.cfg
  local h = x + nn.attention(L, "attn", nn.norm(L, "attn_norm", x))
  local g = nn.norm(L, "mlp_norm", h)
  local gate = nn.linear(L, "gate", g, cfg.ffn, "column", { bias = false })
  local up = nn.linear(L, "up", g, cfg.ffn, "column", { bias = false })
  local act = cfg.activation == "geglu" and plait.gelu or plait.silu
  return h + nn.linear(L, "down", act(gate) * up, cfg.hidden, "row", { bias = false })
end
