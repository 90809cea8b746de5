-- tiny with a family of its own that holds a bad key, chosen by --set bad=...: "drop" (a drop
-- that names no entry of GPT-2's family), "entry" (a config entry's misspelt field), "table" (a
-- family written as a plain table, not through plait.hf.family, with a misspelt field), "join" (a
-- joined entry whose name lacks its index), "join_count" (a join of 5 blocks of 16 positions).
-- Import and export name the key.
local plait = require "plait"
local nn = require "plait.nn"
local hf = require "plait.hf"

local cfg = plait.config {
  vocab = 256, seq = 16, layers = 2, hidden = 32, heads = 2, ffn = 64, bad = "drop",
}

local function block(L, x)
  x = x + nn.attention(L, "attn", nn.layernorm(L, "ln_1", x))
  return x + nn.mlp(L, "mlp", nn.layernorm(L, "ln_2", x))
end

local function family()
  if cfg.bad == "drop" then
    return hf.extend("gpt2", { name = "gpt2-drop", drop = { "transformer.h.%d.attn.bais" } })
  elseif cfg.bad == "entry" then
    local entry = { hf = "n_head", plait = "heads", hf_defualt = 12 }
    return hf.extend("gpt2", { name = "gpt2-entry", config = { entry } })
  elseif cfg.bad == "join" then
    local entry = { hf = "transformer.wpe.weight", plait = "wpe",
                    join = { index = "t", count = "seq" } }
    return hf.extend("gpt2", { name = "gpt2-join", tensors = { entry } })
  elseif cfg.bad == "join_count" then
    local entry = { hf = "transformer.wpe.{t}.weight", plait = "wpe",
                    join = { index = "t", count = 5 } }
    return hf.extend("gpt2", { name = "gpt2-join-count", drop = { "transformer.wpe.weight" },
                               tensors = { entry } })
  end
  local f = {}
  for k, v in pairs(hf.families.gpt2) do f[k] = v end
  f.name, f.tensor = "gpt2-table", {}
  return f
end

return plait.model {
  name = "tiny", family = family(), config = cfg,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
