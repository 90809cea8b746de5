-- tiny_per_head's model with a Hugging Face family plait does not know: import and export name it and stop.
local model = require "tiny_per_head"
model.family = "neox"
return model
