-- plait.sandbox: the environment a model file runs in. It has Lua's pure libraries (string, table, math,
-- utf8, coroutine), the base functions that cannot reach outside (no dofile, loadfile or loading
-- bytecode), os's clock alone, and io.open and io.lines for reading files in the model file's folder
-- (and below it; a relative name is taken from that folder). require finds plait's own modules and Lua modules in the model file's folder, which run
-- in a sandbox of their own kind. Nothing in it writes a file, runs a program or reads the environment.
local core = require "plait.core"

local sandbox = {}

local base = { "assert", "error", "ipairs", "next", "pairs", "pcall", "print", "rawequal", "rawget", "rawlen",
               "rawset", "select", "setmetatable", "getmetatable", "tonumber", "tostring", "type", "xpcall",
               "collectgarbage", "_VERSION" }
local libraries = { "string", "table", "math", "utf8", "coroutine" }

local function copy(t)
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  return out
end

-- The path of a file the model file may read (in its folder, a relative name taken from there).
local function readable(path, mode)
  if type(path) ~= "string" then error("io.open takes a file name", 3) end
  if mode ~= nil and mode ~= "r" and mode ~= "rb" then
    error(string.format("a model file reads files only (io.open(%q, %q))", path, tostring(mode)), 3)
  end
  if path:sub(1, 1) ~= "/" then path = core.model_dir() .. "/" .. path end
  if not core.beside(path) then
    error(string.format("a model file reads files in its own folder only, not %s", path), 3)
  end
  return path
end

-- A fresh environment for a chunk of the model file's folder.
function sandbox.env()
  local env = {}
  for _, name in ipairs(base) do env[name] = _G[name] end
  for _, name in ipairs(libraries) do env[name] = copy(_G[name]) end
  env.os = { clock = os.clock }
  env.io = {
    open = function(path, mode) return io.open(readable(path, mode), mode or "r") end,
    lines = function(path, ...) return io.lines(readable(path), ...) end,
  }
  env.load = function(chunk, name, mode, chunk_env)
    if mode ~= nil and mode ~= "t" then error("a model file loads Lua text only, not bytecode", 2) end
    return load(chunk, name, "t", chunk_env or env)
  end
  env.require = sandbox.require
  env._G = env
  return env
end

local loaded = {}

-- plait's modules, and modules of the model file's folder (name.lua, a.b as a/b.lua) in sandboxes.
function sandbox.require(name)
  if type(name) ~= "string" then error("require takes a module name", 2) end
  if package.preload[name] then return require(name) end
  if loaded[name] ~= nil then return loaded[name] end
  local path = core.model_dir() .. "/" .. name:gsub("%.", "/") .. ".lua"
  if not core.beside(path) then
    error(string.format("module '%s' not found: a model file requires plait's modules and Lua files in its own "
                        .. "folder (%s)", name, path), 2)
  end
  local chunk, err = loadfile(path, "t", sandbox.env())
  if not chunk then error(err, 0) end
  local value = chunk(name)
  if value == nil then value = true end
  loaded[name] = value
  return value
end

return sandbox
