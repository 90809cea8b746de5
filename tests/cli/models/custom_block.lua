-- A new block composed from primitives: a parallel attention + MLP block (as in GPT-J), with ReLU² activation.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config { vocab = 512, seq = 32, hidden = 64, heads = 4, layers = 2, ffn = 256 }

local function block(L, x)
  local h = nn.layernorm(L, "ln", x)
  local up = plait.relu(nn.linear(L, "up", h, cfg.ffn, "column"))
  local mlp = nn.linear(L, "down", up * up, cfg.hidden, "row")
  return x + nn.attention(L, "attn", h) + mlp
end

return plait.model { name = "parallel-block", config = cfg, embed = nn.embedding, block = block, head = nn.lm_head }
