-- plait.readonly: read-only views of plait's own tables, which is all a model file gets of them. Reading a
-- view gives what the table holds (a table as a view in turn, the same view each time); writing to one is
-- refused; fields whose names begin with "_" (plait's entry points, such as plait._trace and
-- plait.hf._files, and metamethods) are left out; the table itself stays out of reach. seal(mt) makes
-- getmetatable give the view of a metatable of plait's, and setmetatable refuse to replace it.
local readonly = {}

local views = setmetatable({}, { __mode = "k" })     -- table -> its view
local originals = setmetatable({}, { __mode = "k" }) -- view -> its table

local function hidden(key) return type(key) == "string" and string.sub(key, 1, 1) == "_" end

-- The view of t named `name` (t itself when it is not a table).
function readonly.view(t, name)
  if type(t) ~= "table" then return t end
  if views[t] then return views[t] end
  local function entry(key, value)
    if key == nil or hidden(key) then return key, nil end
    return readonly.view(key, name), readonly.view(value, name .. "." .. tostring(key))
  end
  local function next_entry(_, key)
    local k, v = next(t, originals[key] or key)
    while hidden(k) do k, v = next(t, k) end
    return entry(k, v)
  end
  local view = setmetatable({}, {
    __index = function(_, key)
      if hidden(key) then return nil end
      return readonly.view(t[key], name .. "." .. tostring(key))
    end,
    __newindex = function(_, key)
      error(string.format("%s is plait's: a model file reads it and cannot change it (%s.%s)", name, name,
                          tostring(key)), 2)
    end,
    __pairs = function(self) return next_entry, self, nil end,
    __len = function() return #t end,
    __metatable = false,
  })
  views[t], originals[view] = view, t
  return view
end

-- mt, whose objects now show getmetatable the view of it (named `name`); returns that view.
function readonly.seal(mt, name)
  mt.__metatable = readonly.view(mt, name)
  return mt.__metatable
end

return readonly
