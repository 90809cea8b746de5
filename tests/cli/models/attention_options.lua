-- Attention written out from primitives with every option a family needs: norms per head of q (RMS) and
-- k (layer norm: weight and bias), rotary positions over part of each head with interleaved pairs on q
-- and k and Llama-3.1 frequency scaling (its blend of frequencies reached at this short sequence by a
-- small original_positions), linear scaling on v, grouped-query heads, a sliding window of 6, scores
-- capped at 4, a scale other than 1/√head_dim. For gradient checks and layout equivalence; weights start
-- at std 0.1, so that the norms per head see vectors large enough for finite differences to be accurate.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config { vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 4, kv_heads = 2, ffn = 64,
                           init_std = 0.1, dropout = 0.0 }
local head_dim = cfg.hidden // cfg.heads

local function attention(L, x)
  local s = L:sub("attn")
  local qdim = plait.dim(cfg.heads * head_dim, "qdim", head_dim)
  local kvdim = plait.dim(cfg.kv_heads * head_dim, "kvdim", head_dim)
  local q = nn.rmsnorm(s, "q_norm", nn.linear(s, "q", x, qdim, "column"), { group = head_dim })
  local k = nn.layernorm(s, "k_norm", nn.linear(s, "k", x, kvdim, "column"), { group = head_dim })
  local v = nn.linear(s, "v", x, kvdim, "column")
  local rope = { head_dim = head_dim, fraction = 0.5, interleaved = true, theta = 100,
                 scaling = { type = "llama3", factor = 4, low_freq_factor = 1, high_freq_factor = 4, original_positions = 24 } }
  q, k = plait.rope(q, rope), plait.rope(k, rope)
  v = plait.rope(v, { head_dim = head_dim, scaling = { type = "linear", factor = 2 } })
  local o = plait.attention(q, k, v, { heads = cfg.heads, kv_heads = cfg.kv_heads, causal = true, window = 6,
                                       softcap = 4, scale = 0.3 })
  return nn.linear(s, "proj", o, cfg.hidden, "row")
end

local function block(L, x)
  x = x + attention(L, nn.layernorm(L, "ln_1", x))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

return plait.model {
  name = "attention_options", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
