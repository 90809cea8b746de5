-- tiny whose Hugging Face family is GPT-2's with two tensors kept in pieces, each piece a tensor of
-- its own that the family joins: every position's vector (stacked into wpe along a new first axis)
-- and every head's block of the output projection (Conv1D [head_dim, hidden] blocks, joined along
-- the model's second axis, the projection's input).
local plait = require "plait"
local nn = require "plait.nn"
local hf = require "plait.hf"

local cfg = plait.config { vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 2, ffn = 64 }

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

local joined = hf.extend("gpt2", {
  name = "gpt2-joined",
  drop = { "transformer.wpe.weight", "transformer.h.%d.attn.c_proj.weight" },
  tensors = {
    { hf = "transformer.wpe.{t}.weight", plait = "wpe",
      join = { index = "t", count = "seq", stack = true } },
  },
  layer = {
    { hf = "transformer.h.%d.attn.c_proj.heads.{h}.weight", plait = "attn.proj.weight",
      transpose = true, join = { index = "h", count = "heads", axis = 1 } },
  },
})

return plait.model {
  name = "tiny", family = joined, config = cfg,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
