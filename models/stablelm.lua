-- StableLM (Stability AI 2023): the Llama block with layer norms (weight and bias), rotary
-- positions over the first quarter of each head, SwiGLU, biases on q, k and v with --set
-- qkv_bias=true (StableLM-2's use_qkv_bias), an untied output layer. StableLM-3B-4E1T's sizes by
-- default.
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 50304, seq = 4096, layers = 32, hidden = 2560, heads = 32, kv_heads = 32, ffn = 6912,
  norm = "layernorm", norm_eps = 1e-5, activation = "swiglu", positions = "rope",
  rope_theta = 10000, rotary_fraction = 0.25, bias = false, qkv_bias = false, tied = false,
  dropout = 0.0,
}

return plait.model {
  name = "stablelm", family = "stablelm", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = require "llama_block", head = nn.lm_head,
}
