--[[
regolith.cli.grid: query rows as an aligned text table, the way sqlite3's
`.mode table` and psql print them (`regolith query --format table`, the
shell's `.mode table`).

    local lines = require("regolith.cli.grid").lines(rows, { width = 40 })

The columns are the members of the rows' objects: `id` first, then the
others by name, and the system properties (_rid, _self, _etag,
_attachments, _ts, _lsn) last; a row that is not an object (SELECT VALUE)
is one column named "value".  A string prints as itself, null as "null",
a missing member as nothing, an object or array as JSON.  A cell longer
than opts.width characters (default 40) is cut with "...".  Widths count
UTF-8 characters, not bytes.
]]

local regolith = require "regolith"
local cjson = require "regolith.cli.json"

local M = {}

local OBJECT = getmetatable(regolith.object())
local ARRAY = getmetatable(regolith.array())
local SYSTEM = { _rid = 1, _self = 2, _etag = 3, _attachments = 4, _ts = 5,
                 _lsn = 6 }

-- Is v a JSON object (a table that is not an array)?
local function is_object(v)
  if type(v) ~= "table" then return false end
  local mt = getmetatable(v)
  if mt == OBJECT then return true end
  if mt == ARRAY or v[1] ~= nil then return false end
  return next(v) ~= nil
end

local function ulen(s)
  local _, n = s:gsub("[^\128-\191]", "")
  return n
end

-- The first n characters of s (UTF-8).
local function uprefix(s, n)
  local count, last = 0, 0
  for pos in s:gmatch("()[^\128-\191]") do
    count = count + 1
    if count > n then return s:sub(1, pos - 1) end
    last = pos
  end
  return s:sub(1, #s), last
end

local function cell(v, width)
  local text
  if v == nil then text = ""
  elseif v == regolith.null then text = "null"
  elseif type(v) == "string" then text = v
  elseif type(v) == "table" then text = cjson.encode(v)
  else text = regolith.json.encode(v) end
  text = text:gsub("[\r\n\t]", " ")
  if ulen(text) > width then text = uprefix(text, width - 3) .. "..." end
  return text
end

local function column_order(a, b)
  if a == "id" or b == "id" then return a == "id" and b ~= "id" end
  local sa, sb = SYSTEM[a], SYSTEM[b]
  if sa or sb then
    if sa and sb then return sa < sb end
    return sb ~= nil
  end
  return a < b
end

-- The column names of rows, in display order.
function M.columns(rows)
  local seen, names, scalar = {}, {}, false
  for _, row in ipairs(rows) do
    if is_object(row) then
      for k in pairs(row) do
        if not seen[k] then seen[k] = true; names[#names + 1] = k end
      end
    else
      scalar = true
    end
  end
  table.sort(names, column_order)
  if scalar then table.insert(names, 1, "value") end
  return names, scalar
end

-- lines(rows, opts) -> the table's lines (none for no rows).
function M.lines(rows, opts)
  local width = opts and opts.width or 40
  if #rows == 0 then return {} end
  local names, scalar = M.columns(rows)
  local cells, widths = {}, {}
  for j, name in ipairs(names) do widths[j] = ulen(cell(name, width)) end
  for i, row in ipairs(rows) do
    local line = {}
    for j, name in ipairs(names) do
      local v
      if is_object(row) then
        if not (scalar and j == 1) then v = row[name] end
      elseif scalar and j == 1 then
        v = row
      end
      line[j] = cell(v, width)
      if ulen(line[j]) > widths[j] then widths[j] = ulen(line[j]) end
    end
    cells[i] = line
  end
  local function render(values)
    local parts = {}
    for j, v in ipairs(values) do
      parts[j] = v .. (" "):rep(widths[j] - ulen(v))
    end
    return (table.concat(parts, " | "):gsub("%s+$", ""))
  end
  local head = {}
  for j, name in ipairs(names) do head[j] = cell(name, width) end
  local rule = {}
  for j = 1, #names do rule[j] = ("-"):rep(widths[j]) end
  local out = { render(head), table.concat(rule, "-+-") }
  for i = 1, #cells do out[#out + 1] = render(cells[i]) end
  return out
end

return M
