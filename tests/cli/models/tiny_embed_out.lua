-- tiny_untied's model under a family whose output matrix goes by two names: embed_out.weight (as
-- GPT-NeoX names it, and export writes) or lm_head.weight; import reads whichever the folder holds.
local hf = require "plait.hf"

local model = require "tiny_untied"
model.family = hf.extend("gpt2", {
  name = "gpt2-embed-out",
  drop = { "lm_head.weight" },
  tensors = { { hf = { "embed_out.weight", "lm_head.weight" }, plait = "lm_head.weight" } },
})
return model
