--[[
A busted --helper that records the charge of every query the specs run
(examples/bench/charges.lua compares the records of two builds, or of the
two backends):

  CHARGE_LOG=build/charges/local.jsonl \
    busted --lua=lua5.4 --helper=examples/bench/charge_log.lua spec/query_spec.lua

Each call of c:query (on a local database or on a cluster) appends one
JSON line: the spec file and line that made the call, the text, the
parameters, the options (without the continuation token, and the
page's number in its place), the nth time this same call was made in the
run, and what the page cost (charge, loaded, index_lookups, scanned, rows)
or the status it failed with.
]]

local regolith = require "regolith"
local json = regolith.json

local path = assert(os.getenv("CHARGE_LOG"), "CHARGE_LOG names the file")
local out = assert(io.open(path, "a"))
local seen, pages = {}, {}

-- The spec's line that made the call: the outermost frame in a
-- *_spec.lua (the line of the spec itself, not of a helper it calls).
local function caller()
  local at = "?"
  for level = 3, 40 do
    local info = debug.getinfo(level, "Sl")
    if info == nil then break end
    local src = info.short_src or ""
    if src:match("_spec%.lua$") then
      at = src:match("([^/]+_spec%.lua)$") .. ":" .. info.currentline
    end
  end
  return at
end

local function text(v)
  local ok, s = pcall(json.encode, v)
  return ok and s or "?"
end

local function record(sql, params, opts, rows, info, status)
  local o, page = {}, 1
  if type(opts) == "table" then
    for k, v in pairs(opts) do
      if k ~= "continuation" then o[k] = v end
    end
    if opts.continuation then page = (pages[opts.continuation] or 1) + 1 end
  end
  if type(info) == "table" and info.continuation then
    pages[info.continuation] = page
  end
  local key = table.concat({ caller(), tostring(sql), text(params or {}),
                             text(o), tostring(page) }, "\t")
  key = key:gsub("[^\t\32-\126]", function(c)     -- any bytes, as text
    return ("\\x%02x"):format(c:byte())
  end)
  seen[key] = (seen[key] or 0) + 1
  local r = { key = key, n = seen[key] }
  if rows then
    r.charge, r.loaded, r.lookups = info.charge, info.loaded, info.index_lookups
    r.scanned, r.rows = info.scanned, type(rows) == "table" and #rows or 0
    r.memory = info.executor and info.executor.partition_in_memory or nil
  else
    r.status = status
  end
  out:write(text(r), "\n")
  out:flush()
end

-- query, recording each call.
local function logged(query)
  return function(c, sql, params, opts)
    local rows, info, status = query(c, sql, params, opts)
    record(sql, params, opts, rows, info, status)
    return rows, info, status
  end
end

if os.getenv("REGOLITH_BACKEND") ~= "cluster" then
  -- A local container's methods: the metatable's __index.
  local mt = debug.getregistry()["regolith.container"]
  local methods = type(mt.__index) == "table" and mt.__index or mt
  methods.query = logged(methods.query)
else
  -- A cluster database's objects are proxies (regolith.cluster) that run
  -- the core's methods over the cluster, all with one metatable: its
  -- __index is wrapped when the first database is opened (the core's
  -- query itself, called on a proxy, would not be driven over the wire).
  local open = regolith.open
  regolith.open = function(...)
    local db, err, status = open(...)
    local mt = type(db) == "table" and getmetatable(db)
    if mt and not rawget(mt, "__charge_logged") then
      local index = mt.__index
      mt.__index = function(p, name)
        local f = index(p, name)
        if name == "query" and type(f) == "function" then return logged(f) end
        return f
      end
      mt.__charge_logged = true
    end
    return db, err, status
  end
end
