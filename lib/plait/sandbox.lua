-- plait.sandbox: the environment a model file runs in. It has Lua's pure libraries (string, table, math,
-- utf8, coroutine: its own copies, their costly functions bounded by plait.bounded), the base functions
-- that cannot reach outside (no dofile, loadfile or loading bytecode), os's clock alone, and io.open and
-- io.lines for reading regular files in the model file's folder (and below it; a relative name is
-- taken from that folder; a FIFO or a device is refused, never waited on). require gives read-only
-- views (plait.readonly) of plait's public modules (plait, plait.nn, plait.hf, plait.json) and runs
-- Lua modules of the model file's folder in sandboxes of their own kind.
-- Nothing in it writes a file, runs a program or reads the environment, and nothing it changes reaches
-- plait's own code, whose modules run in the host's environment with the libraries they captured.
-- Its limits hold: no table of it has a finalizer (__gc runs with the limits' hook off), and once a limit
-- has run out, pcall, xpcall, coroutine.resume and coroutine.close raise its error again.
local core = require "plait.core"
local limits = require "plait.limits"
local readonly = require "plait.readonly"
local bounded = require "plait.bounded"

local sandbox = {}

-- Every string of the state shares one metatable: method calls on strings reach the bounded functions
-- (plait's own code calls string.find(s, ...) on the library it captured, never a method of a string),
-- and getmetatable gives views of it and of the files' metatable, which cannot be replaced.
getmetatable("").__index = bounded.string
readonly.seal(getmetatable(""), "the strings' metatable")
readonly.seal(getmetatable(io.stdout), "the files' metatable")

local base = { "assert", "error", "ipairs", "next", "pairs", "rawequal", "rawget", "rawlen", "rawset",
               "getmetatable", "tostring", "type", "_VERSION" }
local public = { plait = true, ["plait.nn"] = true, ["plait.hf"] = true, ["plait.json"] = true }

local function copy(t)
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  return out
end

-- A call's results, or, when it failed after a limit ran out, that limit's error again; the error caught
-- is charged (catching one walks the whole stack).
local function unless_out(ok, ...)
  if not ok and limits.exceeded() then error((...), 0) end
  if not ok then limits.caught() end
  return ok, ...
end

local function guarded_pcall(f, ...) return unless_out(pcall(f, ...)) end

local function guarded_xpcall(f, handler, ...)
  local function handle(e)
    if limits.exceeded() then return e end
    return handler(e)
  end
  return unless_out(xpcall(f, handle, ...))
end

local function guarded_coroutine()
  local co = copy(coroutine)
  function co.resume(thread, ...)
    if limits.exceeded() then error("a limit has run out", 0) end
    return unless_out(coroutine.resume(thread, ...))
  end
  function co.close(thread) return unless_out(coroutine.close(thread)) end
  return co
end

local function guarded_setmetatable(t, mt)
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
    error("a model file's tables have no finalizers (__gc): plait does not run them; close what needs "
          .. "closing yourself", 2)
  end
  return setmetatable(t, mt)
end

-- The path of a file the model file may read (in its folder, a relative name taken from there).
local function readable(path, mode)
  if type(path) ~= "string" then error("io.open takes a file name", 3) end
  if mode ~= nil and mode ~= "r" and mode ~= "rb" then
    error(string.format("a model file reads files only (io.open(%q, %q))", path, tostring(mode)), 3)
  end
  if string.sub(path, 1, 1) ~= "/" then path = core.model_dir() .. "/" .. path end
  if not core.beside(path) then
    error(string.format("a model file reads files in its own folder only, not %s", path), 3)
  end
  return path
end

-- io.lines(path, ...) on a file the model file may read: the file closes at its end (or when a
-- generic for's loop leaves: the fourth value).
local function lines(path, ...)
  local f, err = core.open_file(readable(path))
  if not f then error(err, 2) end
  local next_line = f:lines(...)
  local function ended(first, ...)
    if first == nil then f:close() end
    return first, ...
  end
  return function() return ended(next_line()) end, nil, nil, f
end

-- A fresh environment for a chunk of the model file's folder.
function sandbox.env()
  local env = {}
  for _, name in ipairs(base) do env[name] = _G[name] end
  for name, f in pairs(bounded.base) do env[name] = f end
  env.string, env.table, env.utf8 = copy(bounded.string), copy(bounded.table), copy(bounded.utf8)
  env.math = copy(math)
  env.coroutine = guarded_coroutine()
  env.pcall, env.xpcall, env.setmetatable = guarded_pcall, guarded_xpcall, guarded_setmetatable
  env.os = { clock = os.clock }
  env.io = {
    open = function(path, mode) return core.open_file(readable(path, mode)) end,
    lines = lines,
  }
  env.load = function(chunk, name, mode, chunk_env)
    if mode ~= nil and mode ~= "t" then error("a model file loads Lua text only, not bytecode", 2) end
    return bounded.base.load(chunk, name, "t", chunk_env or env)
  end
  env.require = sandbox.require
  env._G = env
  return env
end

local loaded = {}

-- plait's public modules as views, and modules of the model file's folder (name.lua, a.b as a/b.lua) in
-- sandboxes.
function sandbox.require(name)
  if type(name) ~= "string" then error("require takes a module name", 2) end
  if public[name] then return readonly.view(require(name), name) end
  if name == "plait" or string.find(name, "^plait%.") then
    error(string.format("module '%s' is plait's own: a model file requires plait, plait.nn, plait.hf, "
                        .. "plait.json and Lua files in its own folder", name), 2)
  end
  if loaded[name] ~= nil then return loaded[name] end
  local path = core.model_dir() .. "/" .. string.gsub(name, "%.", "/") .. ".lua"
  if not core.beside(path) then
    error(string.format("module '%s' not found: a model file requires plait's modules and Lua files in its "
                        .. "own folder (%s)", name, path), 2)
  end
  local chunk, err = core.load_file(path, sandbox.env())
  if not chunk then error(err, 0) end
  local value = chunk(name)
  if value == nil then value = true end
  loaded[name] = value
  return value
end

return sandbox
