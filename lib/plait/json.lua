-- plait.json: JSON text to Lua values and back, for Hugging Face's config.json and shard index files.
-- Objects become tables with string keys, arrays tables with a field n (their length: a null inside stays
-- a hole), null the value json.null; numbers are Lua integers when written without a fraction or an
-- exponent, floats otherwise. Encoding writes object keys sorted, and each float in the fewest digits
-- that read back to it.
local core = require "plait.core"
local readonly = require "plait.readonly"

local json = {}

local null_meta = { __tostring = function() return "null" end, __name = "json.null" }
readonly.seal(null_meta, "json.null's metatable")
json.null = setmetatable({}, null_meta)

---------------------------------------------------------------------------------------------------
-- Decoding: a recursive-descent reader over the text; errors name the byte where reading stopped.

local function decode_error(state, what)
  error(string.format("%s: %s at byte %d", state.source, what, state.pos), 0)
end

local function skip_space(state)
  state.pos = string.find(state.text, "[^ \t\r\n]", state.pos) or #state.text + 1
end

local function peek(state)
  skip_space(state)
  return string.sub(state.text, state.pos, state.pos)
end

local function expect(state, char)
  if peek(state) ~= char then decode_error(state, "expected '" .. char .. "'") end
  state.pos = state.pos + 1
end

local escapes = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }

local function hex4(state)
  local digits = string.match(state.text, "^%x%x%x%x", state.pos)
  if not digits then decode_error(state, "a \\u escape without four hex digits") end
  state.pos = state.pos + 4
  return tonumber(digits, 16)
end

-- \uXXXX (the 'u' read), with a surrogate pair for code points above 0xFFFF.
local function unicode_escape(state)
  local code = hex4(state)
  if code >= 0xD800 and code <= 0xDBFF and string.sub(state.text, state.pos, state.pos + 1) == "\\u" then
    state.pos = state.pos + 2
    local low = hex4(state)
    if low < 0xDC00 or low > 0xDFFF then decode_error(state, "a high surrogate without its low half") end
    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
  end
  return utf8.char(code)
end

local function read_string(state)
  expect(state, '"')
  local parts = {}
  while true do
    local stop = string.find(state.text, '["\\%c]', state.pos)
    if not stop then decode_error(state, "an unterminated string") end
    parts[#parts + 1] = string.sub(state.text, state.pos, stop - 1)
    local char = string.sub(state.text, stop, stop)
    state.pos = stop + 1
    if char == '"' then break end
    if char ~= "\\" then state.pos = stop; decode_error(state, "a control character in a string") end
    local kind = string.sub(state.text, state.pos, state.pos)
    state.pos = state.pos + 1
    if kind == "u" then parts[#parts + 1] = unicode_escape(state)
    elseif escapes[kind] then parts[#parts + 1] = escapes[kind]
    else decode_error(state, "an unknown escape in a string") end
  end
  return table.concat(parts)
end

local function read_number(state)
  local text = string.match(state.text, "^-?%d+%.?%d*[eE]?[-+]?%d*", state.pos)
  local value = text and tonumber(text)
  if value == nil then decode_error(state, "a malformed number") end
  state.pos = state.pos + #text
  return value
end

local read_value

local function read_array(state)
  expect(state, "[")
  local array = { n = 0 }
  if peek(state) == "]" then state.pos = state.pos + 1; return array end
  repeat
    array.n = array.n + 1
    local value = read_value(state)
    if value ~= json.null then array[array.n] = value end
    local more = peek(state) == ","
    if more then state.pos = state.pos + 1 end
  until not more
  expect(state, "]")
  return array
end

local function read_object(state)
  expect(state, "{")
  local object = {}
  if peek(state) == "}" then state.pos = state.pos + 1; return object end
  repeat
    if peek(state) ~= '"' then decode_error(state, "expected a string key") end
    local key = read_string(state)
    expect(state, ":")
    object[key] = read_value(state)
    local more = peek(state) == ","
    if more then state.pos = state.pos + 1 end
  until not more
  expect(state, "}")
  return object
end

local literals = { ["true"] = true, ["false"] = false, null = json.null }

function read_value(state)
  local char = peek(state)
  if char == "{" then return read_object(state) end
  if char == "[" then return read_array(state) end
  if char == '"' then return read_string(state) end
  if char == "-" or string.match(char, "%d") then return read_number(state) end
  local word = string.match(state.text, "^%a+", state.pos)
  if word and literals[word] ~= nil then
    state.pos = state.pos + #word
    return literals[word]
  end
  decode_error(state, "expected a value")
end

-- The value the text holds; `source` names it in errors ("config.json").
function json.decode(text, source)
  local state = { text = text, pos = 1, source = source or "JSON" }
  local value = read_value(state)
  skip_space(state)
  if state.pos <= #text then decode_error(state, "text after the value") end
  return value
end

---------------------------------------------------------------------------------------------------
-- Encoding.

-- Strings are escaped as every JSON string plait writes (runtime/escape.c): a byte that is not UTF-8
-- becomes U+FFFD.
local encode_string = core.json_string

-- The fewest significant digits that read back to the same float; integers as integers.
local function encode_number(x)
  if math.type(x) == "integer" then return tostring(x) end
  if x ~= x or x == math.huge or x == -math.huge then error("JSON has no " .. tostring(x), 0) end
  if x == math.floor(x) and math.abs(x) < 2 ^ 53 then return string.format("%.1f", x) end
  for digits = 1, 17 do
    local text = string.format("%." .. digits .. "g", x)
    if tonumber(text) == x then return text end
  end
end

local encode_value

local function encode_table(t, indent, depth)
  local pad, inner = "", ""
  if indent then pad, inner = "\n" .. string.rep(indent, depth), "\n" .. string.rep(indent, depth + 1) end
  local items = {}
  if t.n then
    for i = 1, t.n do items[i] = inner .. encode_value(t[i] == nil and json.null or t[i], indent, depth + 1) end
    return "[" .. table.concat(items, ",") .. (#items > 0 and pad or "") .. "]"
  end
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  for i, k in ipairs(keys) do
    items[i] = inner .. encode_string(k) .. (indent and ": " or ":") .. encode_value(t[k], indent, depth + 1)
  end
  return "{" .. table.concat(items, ",") .. (#items > 0 and pad or "") .. "}"
end

function encode_value(v, indent, depth)
  if v == json.null then return "null" end
  local kind = type(v)
  if kind == "string" then return encode_string(v) end
  if kind == "number" then return encode_number(v) end
  if kind == "boolean" then return tostring(v) end
  if kind == "table" then return encode_table(v, indent, depth) end
  error("JSON has no " .. kind, 0)
end

-- A list for encoding: json.array{...} (a plain table with keys is an object).
function json.array(items)
  items.n = #items
  return items
end

-- The text of a value; with indent (e.g. "  "), one member per line.
function json.encode(v, indent)
  return encode_value(v, indent, 0)
end

return json
