--[[
regolith.cli.json: JSON text with object members in sorted order.

    local text = require("regolith.cli.json").encode(value)

regolith.json.encode writes a table's members in the order Lua's table
gives them, which changes from one process to the next.  The command's
output (query rows, exports, the explorer's answers) should be the same
bytes for the same data, so that two exports can be compared with cmp and
an import/export round trip gives the same file: this writes every object
with its members sorted by name (bytewise) and no spaces.  Strings and
numbers are written by regolith.json.encode itself, so every rule of the
codec (UTF-8, NUL, integers, exact doubles, refused values) holds.
]]

local regolith = require "regolith"

local encode_scalar = regolith.json.encode
local null = regolith.null
local ARRAY = getmetatable(regolith.array())
local OBJECT = getmetatable(regolith.object())
local concat, sort = table.concat, table.sort

local M = {}

local MAX_DEPTH = 128

local function fail(msg) error({ canonical_error = msg }, 0) end

local encode

-- Is t written as an array?  As the codec decides: marked so, or an
-- unmarked non-empty sequence.
local function is_array(t)
  local mt = getmetatable(t)
  if mt == ARRAY then return true end
  if mt == OBJECT then return false end
  return t[1] ~= nil
end

function encode(v, out, depth)
  local t = type(v)
  if t == "table" then
    if depth > MAX_DEPTH then fail("nesting deeper than 128") end
    if is_array(v) then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        encode(v[i], out, depth + 1)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" then fail("a non-string key") end
        keys[#keys + 1] = k
      end
      sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = encode_scalar(k)
        out[#out + 1] = ":"
        encode(v[k], out, depth + 1)
      end
      out[#out + 1] = "}"
    end
  elseif v == null then
    out[#out + 1] = "null"
  else
    local s, msg = encode_scalar(v)
    if not s then fail(msg) end
    out[#out + 1] = s
  end
end

-- encode(value) -> text | nil, message, 400
function M.encode(v)
  local out = {}
  local ok, err = pcall(encode, v, out, 1)
  if not ok then
    if type(err) == "table" and err.canonical_error then
      return nil, err.canonical_error, 400
    end
    error(err, 0)
  end
  return concat(out)
end

return M
