-- tiny_per_head's model under its family with a model_type of its own, which transformers' defaults
-- (plait.hf.defaults) do not cover: a setting config.json lacks has no value to compare.
local hf = require "plait.hf"

local model = require "tiny_per_head"
model.family = hf.extend(model.family, { name = "gpt2-own-type", model_type = "gpt2_own" })
return model
