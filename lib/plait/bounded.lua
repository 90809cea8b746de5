-- plait.bounded: the library functions a model file calls whose work runs no Lua instruction, each
-- charging that work to the instruction limit before it runs (plait.limits, compiler/front/lua_limits.c), so
-- that no call, or loop of calls, outlasts the limit: string.find, match, gmatch and gsub by a bound on
-- their backtracking (compiler/front/lua_patterns.c), table.move, insert, remove, sort, concat and unpack by the
-- elements they touch, select and string.rep by the values and repetitions they make, and string.format,
-- byte, pack and unpack, utf8's functions, tonumber, load, print (to stderr) and a garbage
-- collection by what they read, and a caught error by the stack Lua walks. What a call allocates is
-- counted by the allocator. A
-- model file's string, table and utf8 are copies of these tables, and method calls on strings
-- ("x"):rep(n) reach them through the string metatable.
local limits = require "plait.limits"

local charge, pattern = limits.charge, limits.pattern
local BYTES_PER_STEP = 16 -- reading this many bytes counts as one instruction

local function copy(t)
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  return out
end

local function length(s) return type(s) == "string" and #s or 0 end

-- The bytes of the strings among the arguments.
local function bytes(...)
  local args, read = table.pack(...), 0
  for i = 1, args.n do read = read + length(args[i]) end
  return read
end

-- How many of positions i to j (Lua's relative positions, defaults first and last) lie in 1..n.
local function span(n, i, j)
  i, j = math.tointeger(i or 1), math.tointeger(j or n)
  if not i or not j then return 0 end
  if i < 0 then i = n + i + 1 end
  if j < 0 then j = n + j + 1 end
  return math.max(math.min(j, n) - math.max(i, 1) + 1, 0)
end

-- The elements from f to e (0 when they are not whole numbers: the call then refuses them itself).
local function count(f, e)
  f, e = math.tointeger(f), math.tointeger(e)
  if not f or not e or e < f then return 0 end
  return e - f + 1.0
end

-- #t, where t is a table whose length is a number (else 0: the call refuses it itself).
local function size(t)
  if type(t) ~= "table" then return 0 end
  local n = #t
  return math.type(n) and n or 0
end

local bounded = { string = copy(string), table = copy(table), utf8 = copy(utf8), base = {} }
local S, T, U = bounded.string, bounded.table, bounded.utf8

for _, name in ipairs({ "find", "match", "gmatch", "gsub" }) do
  local f = string[name]
  S[name] = function(s, p, ...)
    if type(s) == "string" and type(p) == "string" then
      if name == "find" and select(2, ...) then charge((#s + 1.0) * (#p + 1), "string.find", "steps")
      else pattern(s, p, name) end
    end
    return f(s, p, ...)
  end
end

function S.rep(s, n, sep)
  charge(count(1, n), "string.rep", "repetitions")
  return string.rep(s, n, sep)
end

function S.format(fmt, ...)
  charge(bytes(fmt, ...) / BYTES_PER_STEP, "string.format", "steps")
  return string.format(fmt, ...)
end

function S.byte(s, i, j)
  charge(span(length(s), i, j or i), "string.byte", "values")
  return string.byte(s, i, j)
end

for _, name in ipairs({ "pack", "packsize", "unpack" }) do
  local f = string[name]
  S[name] = function(fmt, ...)
    charge(length(fmt), "string." .. name, "format items")
    return f(fmt, ...)
  end
end

function T.move(a1, f, e, t, a2)
  charge(2 * count(f, e), "table.move", "steps")
  return table.move(a1, f, e, t, a2)
end

function T.insert(t, ...)
  if select("#", ...) > 1 then charge(2 * size(t), "table.insert", "steps") end
  return table.insert(t, ...)
end

function T.remove(t, ...)
  if select("#", ...) > 0 then charge(2 * size(t), "table.remove", "steps") end
  return table.remove(t, ...)
end

function T.sort(t, comp)
  local n = size(t)
  charge(4 * n * math.log(n + 1, 2), "table.sort", "steps")
  return table.sort(t, comp)
end

function T.concat(t, sep, i, j)
  charge(2 * count(i or 1, j or size(t)), "table.concat", "steps")
  return table.concat(t, sep, i, j)
end

function T.unpack(t, i, j)
  charge(count(i or 1, j or size(t)), "table.unpack", "values")
  return table.unpack(t, i, j)
end

function U.len(s, i, j)
  charge(span(length(s), i or 1, j or -1), "utf8.len", "bytes")
  return utf8.len(s, i, j)
end

function U.codepoint(s, i, j)
  charge(span(length(s), i, j or i), "utf8.codepoint", "bytes")
  return utf8.codepoint(s, i, j)
end

function U.offset(s, n, i)
  charge(math.min(length(s), math.abs(tonumber(n) or 0) * 4), "utf8.offset", "bytes")
  return utf8.offset(s, n, i)
end

local B = bounded.base

function B.tonumber(x, ...)
  charge(length(x) / BYTES_PER_STEP, "tonumber", "steps")
  return tonumber(x, ...)
end

-- The chunk's bytes, and when it does not load, the error caught (as the sandbox's pcall charges it).
local function loaded(f, err)
  if not f then limits.caught() end
  return f, err
end

function B.load(chunk, ...)
  charge(length(chunk), "load", "bytes")
  return loaded(load(chunk, ...))
end

-- A model file's print goes to stderr, as Lua's print writes (tostring, tabs between): stdout is
-- plait's own output, which may be a plan in JSON.
function B.print(...)
  charge(bytes(...) / BYTES_PER_STEP, "print", "steps")
  local n, parts = select("#", ...), { ... }
  for i = 1, n do parts[i] = tostring(parts[i]) end
  io.stderr:write(table.concat(parts, "\t", 1, n), "\n")
end

function B.select(n, ...)
  if n ~= "#" then charge(select("#", ...), "select", "values") end
  return select(n, ...)
end

function B.collectgarbage(opt, ...)
  if opt == nil or opt == "collect" or opt == "step" then
    charge(collectgarbage("count") * 1024 / 4, "collectgarbage", "steps")
  end
  return collectgarbage(opt, ...)
end

return bounded
