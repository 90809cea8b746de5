-- InternLM2 (Shanghai AI Laboratory 2024), written with its Hugging Face family as docs/hf.md's
-- "A family from scratch" walks through it: Llama's block (pre-RMSNorm attention with grouped-query
-- heads and rotary positions, a SwiGLU MLP, no biases, untied) under InternLM2's own names, its q,
-- k and v in one tensor laid out by kv head (each kv head's q heads, then its k, then its v).
-- InternLM2-7B sizes.
local plait = require "plait"
local nn = require "plait.nn"
local hf = require "plait.hf"

local cfg = plait.config {
  vocab = 92544, seq = 4096, layers = 32, hidden = 4096, heads = 32, kv_heads = 8, ffn = 14336,
  norm = "rmsnorm", norm_eps = 1e-5, positions = "rope", rope_theta = 1000000, bias = false,
  tied = false, dropout = 0.0,
}

local function block(L, x)
  local h = x + nn.attention(L, "attn", nn.rmsnorm(L, "attn_norm", x))
  local g = nn.rmsnorm(L, "mlp_norm", h)
  local gate = nn.linear(L, "gate", g, cfg.ffn, "column", { bias = false })
  local up = nn.linear(L, "up", g, cfg.ffn, "column", { bias = false })
  return h + nn.linear(L, "down", plait.silu(gate) * up, cfg.hidden, "row", { bias = false })
end

local internlm2 = hf.family {
  name = "internlm2", architecture = "InternLM2ForCausalLM", model_type = "internlm2",
  base_prefix = "model.",
  config = {
    { hf = "vocab_size", plait = "vocab", hf_default = 103168 },
    { hf = "max_position_embeddings", plait = "seq", at_least = true, hf_default = 2048 },
    { hf = "hidden_size", plait = "hidden", hf_default = 4096 },
    { hf = "intermediate_size", plait = "ffn", hf_default = 11008 },
    { hf = "num_hidden_layers", plait = "layers", hf_default = 32 },
    { hf = "num_attention_heads", plait = "heads", hf_default = 32 },
    { hf = "num_key_value_heads", plait = "kv_heads",
      hf_default = function(c) return c.num_attention_heads or 32 end },
    { hf = "rms_norm_eps", plait = "norm_eps", hf_default = 1e-6 },
    { hf = "rope_theta", plait = "rope_theta", hf_default = 10000 },
    { hf = "bias", plait = "bias", hf_default = true },
    { hf = "tie_word_embeddings", plait = "tied", hf_default = false },
    { hf = "hidden_act", value = "silu", hf_default = "silu" },
    { plait = "positions", value = "rope", default = "learned" },
    { plait = "norm", value = "rmsnorm", default = "layernorm" },
  },
  tensors = {
    { hf = "model.tok_embeddings.weight", plait = "wte" },
    { hf = "model.norm.weight", plait = "ln_f.weight" },
    { hf = "output.weight", plait = "lm_head.weight" },
  },
  layer = {
    { hf = "model.layers.%d.attention_norm.weight", plait = "attn_norm.weight" },
    { hf = "model.layers.%d.attention.wqkv.weight", plait = { "attn.q.weight", "attn.k.weight",
      "attn.v.weight" }, groups = cfg.kv_heads },
    { hf = "model.layers.%d.attention.wo.weight", plait = "attn.proj.weight" },
    { hf = "model.layers.%d.ffn_norm.weight", plait = "mlp_norm.weight" },
    { hf = "model.layers.%d.feed_forward.w1.weight", plait = "gate.weight" },
    { hf = "model.layers.%d.feed_forward.w3.weight", plait = "up.weight" },
    { hf = "model.layers.%d.feed_forward.w2.weight", plait = "down.weight" },
  },
}

return plait.model {
  name = "internlm2", family = internlm2, config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
