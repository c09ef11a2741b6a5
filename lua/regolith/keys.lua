--[[
regolith.keys: a document's partition key value, as c:read takes it.

    local keys = require "regolith.keys"
    local paths = keys.paths(c:spec())      -- once per container
    local pk = keys.of(doc, paths)          -- nil when a level is missing

For the tools that hold documents without their key: the command's import
and delete, the processors' re-drive, the explorer.
]]

local M = {}

-- The partition key paths of a container spec, each split into its
-- segments (JSON pointer escapes undone).
function M.paths(spec)
  local pk = spec.partition_key
  local paths = {}
  for i, path in ipairs(type(pk) == "table" and pk or { pk }) do
    local parts = {}
    for seg in path:gmatch("[^/]+") do
      parts[#parts + 1] = (seg:gsub("~1", "/"):gsub("~0", "~"))
    end
    paths[i] = parts
  end
  return paths
end

-- The partition key value of doc: a value, or an array of values for a
-- hierarchical key; nil when a level is missing or not a scalar.
function M.of(doc, paths)
  local values = {}
  for i, parts in ipairs(paths) do
    local v = doc
    for _, seg in ipairs(parts) do
      if type(v) ~= "table" then return nil end
      v = v[seg]
    end
    if v == nil or type(v) == "table" then return nil end
    values[i] = v
  end
  if #paths == 1 then return values[1] end
  return values
end

return M
