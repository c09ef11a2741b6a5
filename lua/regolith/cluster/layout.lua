--[[
regolith.cluster.layout: where a database's places live in Redis Cluster,
and the Functions library that keeps them (redis/regolith.lua).

Places (csrc/store/remote.h): the global place, and bucket r of container
cid (its physical partition r of P).  The global place's keys carry the
hash tag {meta}; bucket r of container cid lives in slot

    (seed(db, cid) + floor(r * 16384 / P)) mod 16384

and its keys carry the tag T[slot]: the shortest decimal string whose
CRC16 mod 16384 is that slot (the table of 16384 tags is computed at first
use).  One bucket is one slot, so a resharding moves whole buckets; the
seed spreads the containers' buckets over the slot space.

A place's keys are rg:<db>:{T}:h<t> and z<t> for each table t, and v
(redis/regolith.lua writes them down); the database's seq counter is
rg:<db>:{meta}:seq, its throughput budgets' words rg:<db>:{meta}:tp.
]]

local redis = require "regolith.cluster.redis"

local M = {}

M.GLOBAL = 4294967295           -- the global place's cid
M.TABLES = 11

local floor = math.floor

function M.seed(db, cid)
  return redis.crc16("rg:" .. db .. ":" .. tostring(cid)) % 16384
end

function M.slot(db, cid, r, P)
  return (M.seed(db, cid) + floor(r * 16384 / P)) % 16384
end

local tags

-- The table of tags: slot -> the shortest decimal string hashing to it.
function M.tags()
  if not tags then
    local t, left, n = {}, 16384, 0
    local crc16 = redis.crc16
    while left > 0 do
      local s = tostring(n)
      local slot = crc16(s) % 16384
      if not t[slot] then t[slot] = s; left = left - 1 end
      n = n + 1
    end
    tags = t
  end
  return tags
end

-- The key prefix of a place.
function M.prefix(db, cid, bucket, buckets)
  if cid == M.GLOBAL then return "rg:" .. db .. ":{meta}:" end
  return "rg:" .. db .. ":{" .. M.tags()[M.slot(db, cid, bucket, buckets)] .. "}:"
end

-- The 23 keys of a place, as every Function takes them.
local cache = setmetatable({}, { __mode = "k" })
function M.place_keys(db, cid, bucket, buckets)
  local id = db .. "\0" .. cid .. "\0" .. bucket .. "\0" .. buckets
  local ks = cache[id]
  if ks then return ks end
  local pfx = M.prefix(db, cid, bucket, buckets)
  ks = {}
  for t = 0, M.TABLES - 1 do ks[t + 1] = pfx .. "h" .. t end
  for t = 0, M.TABLES - 1 do ks[M.TABLES + t + 1] = pfx .. "z" .. t end
  -- the global place's two halves share its tables, not their versions:
  -- what the first half gets once (path ids, shapes) does not refuse the
  -- other half's reads of a range
  ks[2 * M.TABLES + 1] = pfx .. ((cid == M.GLOBAL and bucket == 1) and "v1" or "v")
  cache[id] = ks
  return ks
end

-- The database's throughput budgets: one hash, field -> word (us).
function M.tp_key(db)
  return "rg:" .. db .. ":{meta}:tp"
end

function M.seq_key(db)
  return "rg:" .. db .. ":{meta}:seq"
end

-- Every key a database has in Redis matches this pattern (SCAN, on each
-- primary), and the keys of the layout before this one (a catalog hash).
function M.pattern(db) return "rg:" .. db .. ":*" end
function M.old_catalog(db) return "rg:" .. db .. ":{meta}:catalog" end

-- }==================================================================

-- The library's code and version: REGOLITH_FUNCTIONS names the file, else
-- redis/regolith.lua beside this checkout's lua/ folder, else
-- regolith_functions.lua installed beside this module.
function M.library()
  local here = debug.getinfo(1, "S").source:match("^@(.*)layout%.lua$") or "./"
  local candidates = { here .. "../../../redis/regolith.lua",
    here .. "regolith_functions.lua" }
  if os.getenv("REGOLITH_FUNCTIONS") then
    table.insert(candidates, 1, os.getenv("REGOLITH_FUNCTIONS"))
  end
  for _, path in ipairs(candidates) do
    local f = io.open(path, "r")
    if f then
      local code = f:read("*a")
      f:close()
      local version = code:match('\nlocal VERSION = "([^"]+)"')
      if not version then return nil, path .. " has no VERSION line" end
      return code, version, path
    end
  end
  return nil, "the regolith Functions library (redis/regolith.lua) was not found"
end

-- Declares the library to client c and loads it where it is missing or
-- of another, not newer, version.  Returns the number of primaries
-- loaded, or nil, message, kind ("version": a primary has a newer one).
function M.ensure_library(c)
  local code, version = M.library()
  if not code then return nil, version end
  c:use_library("regolith", code, version, "rg_version")
  return c:ensure_library()
end

return M
