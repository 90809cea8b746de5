-- The routing ops one at a time in a block, for gradient checks of each: config.part "topk" (a
-- router's top-k values, mapped back to the width: topk's gradient alone), "combine" (the rows
-- each token's k experts would give, here its own projected row, weighted by the raw top-k values
-- and summed: dispatch and combine without a GEMM between), or "experts" (dispatch, a grouped GEMM
-- per expert, combine); config.capacity_factor drops rows past each expert's capacity (priority
-- the top-k values, or the earliest with drop_policy "position").
local plait = require "plait"
local nn = require "plait.nn"

local cfg = plait.config {
  vocab = 256, seq = 8, layers = 1, hidden = 16, experts = 4, topk = 2, part = "experts",
  capacity_factor = 0.0, drop_policy = "probs", norm = "rmsnorm", positions = "rope",
  bias = false, tied = false,
}

local function block(L, x)
  local E, k = plait.dim(cfg.experts, "experts"), cfg.topk
  local router = L:param("router", { E, x:dim(-1) }, { std = 0.5 })
  local values, indices = plait.topk(plait.matmul(x, router, { transpose = true }), k)
  if cfg.part == "topk" then
    return x + plait.matmul(values, L:param("back", { x:dim(-1), values:dim(-1) }),
                            { transpose = true })
  end
  local capacity = cfg.capacity_factor > 0 and { capacity_factor = cfg.capacity_factor,
    priority = cfg.drop_policy == "probs" and values or nil } or nil
  local slots, counts = plait.route(indices, capacity)
  local rows = plait.dispatch(nn.linear(L, "in", x, x:size(-1)), slots)
  if cfg.part == "experts" then
    rows = plait.grouped_matmul(rows, L:param("w", { E, x:dim(-1), x:dim(-1) }), counts)
  end
  return x + plait.combine(rows, slots, values)
end

return plait.model {
  name = "moe_ops", config = cfg, layers = cfg.layers,
  embed = nn.embedding, block = block, head = nn.lm_head,
}
