--[[
regolith.cluster: regolith's API on Redis Cluster (docs/cluster.md).

    local db = assert(regolith.open("redis://127.0.0.1:7000,127.0.0.1:7001/blog",
                                    { sync = "full" }))

returns a database with the methods of a local one.  The items live in
Redis (one hash per logical partition, each bucket of a container pinned to
one hash slot: regolith.cluster.layout); every change is one call of the
Functions library (redis/regolith.lua), which checks all its conditions
before its first write.  Everything a local write, query or script
computes before it touches storage is computed here by the same C code
(regolith.core's storage-free entry points, csrc/host/cluster.c), so a
document, an index term, a query's answer, a charge or a script's run is
the same in both modes.  This file holds the database and container
handles and the catalog; items.lua, query.lua, scripts.lua and feed.lua
hold the rest.

What differs from a local database is written down in docs/cluster.md,
one line each; a method that cannot exist here returns nil, a message
saying so, and 501.
]]

local core = require "regolith.core"
local redis = require "regolith.cluster.redis"
local layout = require "regolith.cluster.layout"
local util = require "regolith.cluster.util"

local M = {}

local Db = {}
Db.__index = Db
local Container = {}
Container.__index = Container

M.Db, M.Container = Db, Container

local OPEN_OPTIONS = {
  sync = "string", readonly = "boolean", script_budget = "number",
  script_memory = "number", max_containers = "number", timeout = "number",
  retry_seconds = "number", wait_timeout = "number", password = "string",
  user = "string", transport = "string", protocol = "number",
  map_size = "number", all_versions = "boolean", script_refresh = "number",
  query_time = "number",
}

local function closed_error(what)
  error("attempt to use a closed " .. what, 3)
end

-- {==================================================================
-- Opening
-- ===================================================================

-- regolith.open("redis://host:port[,host:port...]/name", opts)
function M.open(url, opts)
  if url:find("\0", 1, true) then
    error("bad argument #1 to 'open' (a path must not contain NUL)", 2)
  end
  opts = util.check_options(opts, OPEN_OPTIONS, "open", 2)
  local seeds, name = url:match("^redis://([^/]+)/(.*)$")
  if not seeds then
    return nil, "a cluster URL is redis://host:port[,host:port...]/name", 400
  end
  if not name:match("^[%w_%-%.]+$") or #name > 100 then
    return nil, "the database name in a cluster URL is 1 to 100 letters, " ..
      "digits, '_', '-' or '.'", 400
  end
  local sync = opts.sync or "full"
  if sync ~= "full" and sync ~= "lazy" and sync ~= "none" then
    error("open: option 'sync' must be \"full\", \"lazy\" or \"none\"", 2)
  end
  if opts.map_size ~= nil then
    error("open: option 'map_size' does not apply to a Redis Cluster", 2)
  end
  local budget = util.integer_option(opts, "script_budget", 0, 1, 2 ^ 50, "open", 2)
  local memory = util.integer_option(opts, "script_memory", 0, 2 ^ 16, 2 ^ 40, "open", 2)
  local c, err = redis.connect(seeds, { timeout = opts.timeout,
    retry_seconds = opts.retry_seconds, password = opts.password,
    user = opts.user, transport = opts.transport, protocol = opts.protocol })
  if not c then return nil, "cannot reach the cluster: " .. tostring(err), 500 end
  local ok, lerr = layout.ensure_library(c)
  if not ok then
    c:close()
    return nil, "cannot load the regolith Functions library: " .. tostring(lerr), 500
  end
  local db = setmetatable({
    url = url, name = name, redis = c, sync = sync,
    wait_ms = util.integer_option(opts, "wait_timeout", 1000, 1, 600000, "open", 2),
    read_only = opts.readonly or false,
    stream = opts.all_versions ~= false,
    script_refresh = opts.script_refresh or 0,
    max_containers = util.integer_option(opts, "max_containers", nil, 1, 2 ^ 20, "open", 2),
    stepper = core.stepper(budget, memory),
    conts = setmetatable({}, { __mode = "v" }),
    paths = {}, scripts = {},
  }, Db)
  local key = layout.meta_key(name, "secret")
  local secret = c:call("GET", key)
  if secret == redis.null then
    local set, serr = c:call("SET", key, util.random_bytes(16), "NX")
    if set == nil then c:close(); return nil, "cannot reach the cluster: " .. serr, 500 end
    secret = c:call("GET", key)
  end
  if type(secret) ~= "string" or #secret ~= 16 then
    c:close()
    return nil, "cannot read the database's secret: " .. tostring(secret), 500
  end
  db.secret = secret
  return db
end

-- }==================================================================

-- {==================================================================
-- Calls
-- ===================================================================

local function redis_fail(msg, kind)
  if kind == "in_doubt" then
    return nil, "the cluster connection broke after the write was sent: its " ..
      "outcome is unknown (" .. tostring(msg) .. ")", 500
  end
  return nil, "cluster: " .. tostring(msg), 500
end
M.redis_fail = redis_fail

function Db:check()
  if getmetatable(self) ~= Db then
    error("bad argument #1 (regolith.db expected, got " .. type(self) .. ")", 3)
  end
  if not self.redis then closed_error("database") end
  return self
end
util.checkdb = Db.check

-- One call, routed by its key: reply | nil, message, 500.
function Db:call(...)
  local v, msg, kind = util.checkdb(self).redis:call(...)
  if v == nil then return redis_fail(msg, kind) end
  return v
end

-- Several calls, pipelined: the replies (a failed one as nil, message, 500
-- for the whole lot).
function Db:pipeline(cmds)
  local res = util.checkdb(self).redis:pipeline(cmds)
  for i = 1, #cmds do
    if redis.is_error(res[i]) then return redis_fail(res[i].message, res[i].kind) end
  end
  return res
end

-- A write Function call; with sync = "full", WAIT 1 in the same round
-- trip (docs/cluster.md, Durability): a write no replica acknowledged is
-- 500 "not replicated", its outcome unknown.  `before` (optional) is a
-- command of the same slot sent first in the same round trip; its reply
-- is the second result.
function Db:fcall_write(name, keys, argv, before)
  local c = util.checkdb(self).redis
  local cmds = {}
  if before then cmds[1] = before end
  cmds[#cmds + 1] = redis.fcall_cmd("FCALL", name, keys, argv)
  local n = #cmds
  if self.sync == "full" then cmds[n + 1] = { "WAIT", 1, self.wait_ms } end
  local moved = c.stats.moved + c.stats.ask
  local res = c:pipeline(cmds)
  local v = res[n]
  if redis.is_error(v) then return redis_fail(v.message, v.kind) end
  if self.sync == "full" and type(v) == "table" and v[1] == "OK" then
    local acked = res[n + 1]
    if c.stats.moved + c.stats.ask ~= moved then
      -- redirected: the WAIT went to the node the write did not reach
      local again = c:pipeline({ { "EXISTS", keys[1] }, { "WAIT", 1, self.wait_ms } })
      acked = again[2]
    end
    if type(acked) ~= "number" or acked < 1 then
      return nil, "not replicated: no replica acknowledged the write within " ..
        self.wait_ms .. " ms (sync = \"full\"); its outcome is unknown", 500
    end
  end
  return v, before and res[1]
end

-- }==================================================================

-- {==================================================================
-- The database handle
-- ===================================================================

function Db:close()
  if not self.redis then return end
  if self.close_processors then self:close_processors() end
  for _, cont in pairs(self.conts) do cont.closed = true end
  self.redis:close()
  self.redis = nil
end

function Db:__tostring()
  if not self.redis then return "regolith.db (closed)" end
  return "regolith.db (" .. self.url .. ")"
end

-- The catalog's view of container `name`: cid and spec text, or nil.
function Db:lookup(name)
  local catalog = layout.meta_key(self.name, "catalog")
  local cid, err, st = self:call("HGET", catalog, "n:" .. name)
  if cid == nil then return nil, err, st end
  if cid == redis.null then return false end
  local spec
  spec, err, st = self:call("HGET", catalog, "c:" .. cid)
  if spec == nil then return nil, err, st end
  if spec == redis.null then return false end
  return tonumber(cid), spec
end

local function check_name(name, what)
  if type(name) ~= "string" then
    error("bad argument #1: " .. what .. " must be a string", 3)
  end
  return core.check_name(name, what)
end

-- The message and status refusing a write on a read-only handle, or nil.
function Db:readonly()
  if self.read_only then return "the database is open read-only", 403 end
end

function Db:container_of(name, cid, text)
  local cont = self.conts[name]
  if cont and cont.cid == cid and not cont.deleted then return cont end
  local S = core.cluster_spec(text, cid)
  local info = S:info()
  cont = setmetatable({ db = self, cname = name, cid = cid, S = S, text = text,
    info = info, P = info.partitions, buckets = {},
    -- writes go to the all-versions stream where the container keeps that
    -- history and the handle records it
    stream = self.stream and info.all_versions }, Container)
  if not self.paths[cid] then self.paths[cid] = { list = {}, set = {} } end
  cont.known = self.paths[cid]
  if info.ts_index then cont:learn_paths({ info.ts_index }) end
  if info.lsn_index then cont:learn_paths({ info.lsn_index }) end
  self.conts[name] = cont
  return cont
end

function Db:create_container(name, opts)
  util.checkdb(self)
  local text, err, st = core.spec_check(name, opts)
  if not text then return nil, err, st end
  local rerr, rst = self:readonly()
  if rerr then return nil, rerr, rst end
  local keys, argv = layout.meta_args(self.name, nil, "create", name, text,
    self.max_containers or "")
  local r
  r, err, st = self:call((table.unpack or unpack)(redis.fcall_cmd("FCALL", "rg_meta", keys, argv)))
  if r == nil then return nil, err, st end
  if r[1] ~= "OK" then return nil, r[3], r[2] end
  return self:container_of(name, r[2], text), util.info(nil, 201)
end

function Db:container(name)
  util.checkdb(self)
  local ok, err, st = check_name(name, "a container name")
  if not ok then return nil, err, st end
  local cid, text
  cid, text, st = self:lookup(name)
  if cid == nil then return nil, text, st end
  if not cid then return nil, "container not found", 404 end
  return self:container_of(name, cid, text)
end

function Db:containers()
  util.checkdb(self)
  local all, err, st = self:call("HKEYS", layout.meta_key(self.name, "catalog"))
  if not all then return nil, err, st end
  local names = {}
  for _, f in ipairs(all) do
    if f:sub(1, 2) == "n:" then names[#names + 1] = f:sub(3) end
  end
  table.sort(names)
  return names
end

-- Deletes every key of a container's buckets (after the catalog forgot
-- it: a cid is never reused, so what a late writer adds is never seen).
function Db:drop_keys(cid, P)
  local c = self.redis
  for r = 0, P - 1 do
    local b = layout.bucket_keys(self.name, cid, r, P)
    local slot_pfx = layout.slot_prefix(self.name, b.slot)
    local mine = { b.pfx, slot_pfx .. "lease:" .. cid .. ":", slot_pfx .. "dead:" .. cid .. ":" }
    for _ = 1, 3 do                  -- a moving slot: try its new node
      c:refresh()
      local addr = c:node_for_slot(b.slot)
      local keys = addr and c:call_node(addr, "CLUSTER", "GETKEYSINSLOT", b.slot, 100000)
      if type(keys) == "table" then
        local cmds = {}
        for _, k in ipairs(keys) do
          for _, p in ipairs(mine) do
            if k:sub(1, #p) == p then cmds[#cmds + 1] = { "UNLINK", k }; break end
          end
        end
        if #cmds == 0 or not redis.is_error(c:pipeline(cmds)[1]) then break end
      end
    end
  end
end

function Db:delete_container(name)
  util.checkdb(self)
  local ok, err, st = check_name(name, "a container name")
  if not ok then return nil, err, st end
  local rerr, rst = self:readonly()
  if rerr then return nil, rerr, rst end
  local cid, text
  cid, text, st = self:lookup(name)
  if cid == nil then return nil, text, st end
  if not cid then return nil, "container not found", 404 end
  local keys, argv = layout.meta_args(self.name, cid, "drop", name, tostring(cid))
  local r
  r, err, st = self:call((table.unpack or unpack)(redis.fcall_cmd("FCALL", "rg_meta", keys, argv)))
  if r == nil then return nil, err, st end
  if r[1] ~= "OK" then return nil, r[3], r[2] end
  local cont = self.conts[name]
  if cont and cont.cid == cid then cont.deleted = true end
  self:drop_keys(cid, core.cluster_spec(text, cid):info().partitions)
  self.scripts[cid] = nil
  return true, util.info(nil, 204)
end

-- db:stats() -> {items, bytes, containers = {name = {items, bytes}}}:
-- summed from the buckets' counters (not a snapshot).
function Db:stats()
  util.checkdb(self)
  local names, err, st = self:containers()
  if not names then return nil, err, st end
  local out = { items = 0, bytes = 0, containers = {} }
  for _, name in ipairs(names) do
    local cont = self:container(name)
    if cont then
      local cmds = {}
      for r = 0, cont.P - 1 do cmds[#cmds + 1] = { "HMGET", cont:bucket(r).K, "n", "b" } end
      local res
      res, err, st = self:pipeline(cmds)
      if not res then return nil, err, st end
      local n, b = 0, 0
      for _, v in ipairs(res) do
        n = n + (tonumber(v[1]) or 0)
        b = b + (tonumber(v[2]) or 0)
      end
      out.containers[name] = { items = n, bytes = b }
      out.items, out.bytes = out.items + n, out.bytes + b
    end
  end
  return out
end

function Db:backup(path)
  util.checkdb(self)
  if type(path) ~= "string" then
    error("bad argument #1 to 'backup' (string expected, got " .. type(path) .. ")", 2)
  end
  if path:find("\0", 1, true) then error("bad argument #1 to 'backup' (a path must not contain NUL)", 2) end
  return nil, "backup is not available on a Redis Cluster: there is no " ..
    "consistent copy across nodes; copy each node's RDB/AOF files " ..
    "(docs/cluster.md)", 501
end

-- What a cluster does not have: each says so (docs/cluster.md).
local function unavailable(what, why)
  return function(self)
    util.checkdb(self)
    return nil, what .. " is not available on a Redis Cluster: " .. why ..
      " (docs/cluster.md)", 501
  end
end

Db.compact = unavailable("compact", "there is no consistent copy across " ..
  "nodes to repack; copy each node's RDB/AOF files")
Db.replace_container = unavailable("replace_container",
  "rebuilding a container's indexes in place would need every bucket at once")
Db.group = unavailable("group", "one transaction cannot span the slots of " ..
  "several partitions; each write commits alone")
Db.group_commit = unavailable("group_commit", "one transaction cannot span " ..
  "the slots of several partitions; each write commits alone")
Db.write_queue = unavailable("write_queue", "one transaction cannot span " ..
  "the slots of several partitions; each write commits alone")

-- db:set_throughput(nil) -> true: there is no budget to clear; a budget
-- is 501 (throughput budgets are a local database's, docs/throughput.md).
function Db:set_throughput(v)
  util.checkdb(self)
  if v == nil then return true, util.info(nil, 200) end
  return unavailable("set_throughput", "request-unit budgets live in a " ..
    "local database's shared memory")(self)
end

-- db:purge_expired() -> count, info: every container's expired items.
function Db:purge_expired()
  util.checkdb(self)
  local rerr, rst = self:readonly()
  if rerr then return nil, rerr, rst end
  local names, err, st = self:containers()
  if not names then return nil, err, st end
  local total = 0
  for _, name in ipairs(names) do
    local cont = self:container(name)
    if cont and cont.info.ttl then
      for r = 0, cont.P - 1 do
        local n
        n, err, st = cont:purge(r)
        if not n then return nil, err, st end
        total = total + n
      end
    end
  end
  return total, util.info(nil, 200)
end

-- }==================================================================

-- {==================================================================
-- The container handle
-- ===================================================================

function Container:check()
  if getmetatable(self) ~= Container then
    error("bad argument #1 (regolith.container expected, got " .. type(self) .. ")", 3)
  end
  if self.closed or not self.db.redis then closed_error("container") end
  if self.deleted then
    return nil, "container '" .. self.cname .. "' has been deleted", 404
  end
  return self
end

util.check = Container.check

function Container:__tostring()
  if self.closed or not self.db.redis then return "regolith.container (closed)" end
  return "regolith.container (" .. self.cname .. ")"
end

function Container:name()
  util.check(self)
  return self.cname
end

-- c:bulk_load -> nil, message, 501: a bulk load's batch is one
-- transaction over many partitions, which a cluster cannot make.
function Container:bulk_load()
  local ok, err, st = util.check(self)
  if not ok then return nil, err, st end
  return nil, "bulk_load is not available on a Redis Cluster: a batch is " ..
    "one transaction over many partitions, and each partition commits " ..
    "alone; write with create, upsert or batch (docs/cluster.md)", 501
end

function Container:spec()
  util.check(self)
  local spec = util.decode(self.text)
  spec.revision = nil                -- the layout's revision is internal
  return spec
end

-- The keys of bucket r.
function Container:bucket(r)
  local b = self.buckets[r]
  if not b then
    b = layout.bucket_keys(self.db.name, self.cid, r, self.P)
    self.buckets[r] = b
  end
  return b
end

-- Notes index ids as ones this container's items have terms in.
function Container:learn_paths(ids)
  local k = self.known
  for _, id in ipairs(ids) do
    if not k.set[id] then k.set[id] = true; k.list[#k.list + 1] = id end
  end
end

-- The all_versions retention of bucket r, at most once a second.
function Container:trim(r)
  local ret = self.info.retention
  if not ret or ret < 0 then return end
  self.trimmed = self.trimmed or {}
  local now = self.db.redis.t.now()
  if (self.trimmed[r] or 0) + 1 > now then return end
  self.trimmed[r] = now
  require("regolith.cluster.feed").trim(self, r)
end

-- Removes up to all expired items of bucket r; returns how many.
function Container:purge(r)
  local b, total = self:bucket(r), 0
  for _ = 1, 1000 do
    local keys, argv = layout.purge_args(b, self.known.list, 100, self.stream)
    local res, err, st = self.db:fcall_write("rg_purge", keys, argv)
    if not res then return nil, err, st end
    if res[1] == "PATHS" then self:learn_paths(res[2])
    else
      total = total + res[1]
      if res[1] < 100 then return total end
    end
  end
  return total
end

-- }==================================================================

-- The methods of the other files.
require("regolith.cluster.items").install(M)
require("regolith.cluster.query").install(M)
require("regolith.cluster.scripts").install(M)
require("regolith.cluster.feed").install(M)
require("regolith.cluster.verify").install(M)

return M
