--[[
regolith.cluster.verify: db:verify() on Redis Cluster.

Checks, bucket by bucket of every container, that what the Functions
library keeps agrees with the items: every item's index entries and unique
keys (recomputed from its stored text by the local core's own code) exist
and name it, no index entry names a missing item or one without that term,
the latest feed holds each item once under its _lsn, the partitions'
counters and the bucket's counters match the items, and the bucket's
partition list holds exactly its partitions.  It reads node by node: it is
no snapshot, so run it with writers stopped (docs/cluster.md).
]]

local redis = require "regolith.cluster.redis"
local layout = require "regolith.cluster.layout"
local util = require "regolith.cluster.util"

local V = {}

-- The keys of a bucket's slot that belong to the container.
local function bucket_keys(C, b)
  local c = C.db.redis
  for _ = 1, 5 do
    local addr = c:node_for_slot(b.slot)
    local all = addr and c:call_node(addr, "CLUSTER", "GETKEYSINSLOT", b.slot, 1000000)
    if type(all) == "table" then
      local out = {}
      for _, k in ipairs(all) do
        if k:sub(1, #b.pfx) == b.pfx then out[#out + 1] = k end
      end
      return out
    end
    c:refresh()
  end
  return nil, "cannot list the keys of slot " .. b.slot
end

local function verify_bucket(C, r, report)
  local db, b = C.db, C:bucket(r)
  local function bad(fmt, ...)
    report[#report + 1] = ("container %s, bucket %d: " .. fmt):format(C.cname, r, ...)
  end
  local keys, err = bucket_keys(C, b)
  if not keys then bad("%s", err); return end
  local parts, indexes = {}, {}
  for _, k in ipairs(keys) do
    local rest = k:sub(#b.pfx + 1)
    if rest:sub(1, 2) == "p:" then parts[#parts + 1] = rest:sub(3)
    elseif rest:sub(1, 2) == "x:" then indexes[#indexes + 1] = rest:sub(3) end
  end
  -- the partitions and their items
  local cmds = { { "ZRANGE", b.S, 0, -1 }, { "ZRANGE", b.L, 0, -1, "WITHSCORES" },
    { "HMGET", b.K, "n", "b" } }
  for _, pk in ipairs(parts) do cmds[#cmds + 1] = { "HGETALL", b.p_prefix .. pk } end
  for _, x in ipairs(indexes) do cmds[#cmds + 1] = { "ZRANGE", b.pfx .. "x:" .. x, 0, -1 } end
  local res
  res, err = db:pipeline(cmds)
  if not res then bad("%s", err); return end
  local listed = {}
  for _, pk in ipairs(res[1]) do listed[pk] = true end
  local latest = {}
  for i = 1, #res[2], 2 do latest[res[2][i]] = tonumber(res[2][i + 1]) end
  local items, total, bytes = {}, 0, 0      -- ref -> {terms = set}
  for j, pk in ipairs(parts) do
    local h = res[3 + j]
    local f = {}
    for i = 1, #h, 2 do f[h[i]] = h[i + 1] end
    if not listed[pk] then bad("a partition is missing from its list") end
    listed[pk] = nil
    local n, sum = 0, 0
    for name, text in pairs(f) do
      if name:sub(1, 2) == "d:" then
        local id = name:sub(3)
        local ref = layout.ref(pk, id)
        n, sum = n + 1, sum + #text
        local ptext, pid, ppk, _, terms, uniques = C.S:prepare(text, true)
        local doc = util.decode(text)
        if not ptext or pid ~= id or ppk ~= pk then
          bad("item %q does not belong where it is stored", id)
        else
          local set = {}
          for i = 1, #terms, 2 do set[terms[i] .. "\0" .. terms[i + 1]] = true end
          items[ref] = set
          for i = 1, #uniques, 2 do
            if f["u:" .. uniques[i] .. ":" .. uniques[i + 1]] ~= id then
              bad("unique key %d of item %q does not name it", uniques[i], id)
            end
          end
          if not f["m:" .. id] then bad("item %q has no meta field", id) end
          if type(doc) ~= "table" or latest[ref] ~= doc._lsn then
            bad("the latest feed does not hold item %q under its _lsn", id)
          end
          latest[ref] = nil
        end
      elseif name:sub(1, 2) == "u:" and not f["d:" .. text] then
        bad("a unique key names missing item %q", text)
      end
    end
    if tonumber(f["\0n"]) ~= n or tonumber(f["\0b"]) ~= sum then
      bad("partition counters %s/%s, items %d/%d", tostring(f["\0n"]),
        tostring(f["\0b"]), n, sum)
    end
    total, bytes = total + n, bytes + sum
  end
  for _ in pairs(listed) do bad("the partition list names a missing partition") end
  for _ in pairs(latest) do bad("the latest feed names a missing item") end
  local k = res[3]
  if (tonumber(k[1] ~= redis.null and k[1] or nil) or 0) ~= total or
     (tonumber(k[2] ~= redis.null and k[2] or nil) or 0) ~= bytes then
    bad("bucket counters %s/%s, items %d/%d", tostring(k[1]), tostring(k[2]), total, bytes)
  end
  -- every index entry names an item holding that term; every term has one
  local seen = {}
  for j, x in ipairs(indexes) do
    for _, m in ipairs(res[3 + #parts + j]) do
      local pk, id = layout.unref(m)
      local ref = layout.ref(pk, id)
      local term = m:sub(1, #m - #ref)
      local set = items[ref]
      if not set or not set[x .. "\0" .. term] then
        bad("an index entry of %s names item %q, which has no such term", x, id)
      end
      seen[ref .. "\1" .. x .. "\0" .. term] = true
    end
  end
  for ref, set in pairs(items) do
    for t in pairs(set) do
      if not seen[ref .. "\1" .. t] then
        local _, id = layout.unref(ref)
        bad("an index entry of item %q is missing", id)
      end
    end
  end
end

-- db:verify() -> true | nil, report
local function verify(db)
  util.checkdb(db)
  local names, err, st = db:containers()
  if not names then return nil, err, st end
  local report = {}
  db.redis:refresh()
  for _, name in ipairs(names) do
    local C = db:container(name)
    if C then
      for r = 0, C.P - 1 do verify_bucket(C, r, report) end
    end
  end
  if #report == 0 then return true end
  return nil, table.concat(report, "\n") .. "\n"
end

function V.install(M)
  M.Db.verify = verify
end

return V
