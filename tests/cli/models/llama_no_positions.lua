-- A Llama-shaped model that says nothing of its positions: nn.embedding then gives it a learned
-- table (wpe), which Llama's checkpoints do not hold. Importing one tells it to set positions: the
-- llama family's requirement, or with --set any_positions=true a family without it, whose tensors
-- have no place for wpe.
local plait = require "plait"
local nn = require "plait.nn"
local hf = require "plait.hf"

local cfg = plait.config {
  vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 4, kv_heads = 2, ffn = 48,
  norm = "rmsnorm", activation = "swiglu", bias = false, tied = false, any_positions = false,
}

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.rmsnorm(L, "attn_norm", x))
  local h = nn.rmsnorm(L, "mlp_norm", x)
  local gate = nn.linear(L, "gate", h, cfg.ffn, "column")
  local up = nn.linear(L, "up", h, cfg.ffn, "column")
  return x + nn.linear(L, "down", plait.silu(gate) * up, cfg.hidden, "row")
end

-- Llama's family without its requirement that the model's positions be rotary.
local function any_positions()
  return hf.extend("llama", { name = "llama-any", drop = { "plait:positions" } })
end

return plait.model {
  name = "llama_no_positions", config = cfg, layers = cfg.layers,
  family = cfg.any_positions and any_positions() or "llama",
  embed = nn.embedding, block = block, head = nn.lm_head,
}
