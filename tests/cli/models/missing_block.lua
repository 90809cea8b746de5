-- A model without a block: the error names this file (its plait.model{} is a tail call, so no line).
local plait = require "plait"
local nn = require "plait.nn"
local cfg = plait.config { vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 2, ffn = 64 }
return plait.model { name = "x", config = cfg, embed = nn.embedding, head = nn.lm_head }
