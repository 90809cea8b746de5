-- Split and concat, BLOOM-like: q, k and v from one fused projection laid out by head (groups = heads,
-- GPT-NeoX's, BLOOM's and Megatron's layout, so that a column split by whole heads splits on each rank
-- alone), ALiBi positions (each rank's heads take their own slopes), and an MLP whose hidden layer joins
-- two halves of different activations group by group. For gradient checks and layout equivalence.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config { vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 4, ffn = 64, dropout = 0.0,
                           qkv_groups = 4, concat_groups = 8 }
local head_dim = cfg.hidden // cfg.heads

local function attention(L, x)
  local s = L:sub("attn")
  local qkv = nn.linear(s, "qkv", x, plait.dim(3 * cfg.hidden, "qkv", 3 * head_dim), "column")
  local part = cfg.hidden // cfg.qkv_groups -- by head: head_dim; with qkv_groups = 1, [q; k; v] whole
  local q, k, v = qkv:split(-1, { part, part, part }, { groups = cfg.qkv_groups })
  local o = plait.attention(q, k, v, { heads = cfg.heads, causal = true, alibi = true })
  return nn.linear(s, "proj", o, cfg.hidden, "row")
end

local function mlp(L, x)
  local half = plait.dim(cfg.ffn // 2, "half_ffn", 4)
  local a = plait.gelu(nn.linear(L, "fc_a", x, half, "column"))
  local b = plait.tanh(nn.linear(L, "fc_b", x, half, "column"))
  local h = plait.concat({ a, b }, -1, { groups = cfg.concat_groups })
  return nn.linear(L, "proj", h, cfg.hidden, "row")
end

local function block(L, x)
  x = x + attention(L, nn.layernorm(L, "ln_1", x))
  return x + mlp(L, nn.layernorm(L, "ln_2", x))
end

return plait.model {
  name = "fused_qkv", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
