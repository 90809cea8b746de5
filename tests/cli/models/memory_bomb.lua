-- A model file that allocates without bound: the memory budget stops it.
local t = {}
for i = 1, math.huge do t[i] = string.rep("x", 4096) .. i end
