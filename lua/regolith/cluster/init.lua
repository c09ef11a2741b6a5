--[[
regolith.cluster: regolith on Redis Cluster (docs/cluster.md).

    local db = assert(regolith.open("redis://127.0.0.1:7000,127.0.0.1:7001/blog",
                                    { sync = "full" }))

The database is regolith's own: a handle of the C core (regolith.core),
whose tables live in Redis instead of a directory (csrc/store/remote.h).
Every method is the local one, run by the same engine; this module is the
I/O around it.  A call runs the method; when the engine read what it had
not been given, the call fetches it (one round trip, pipelined over the
nodes) and runs the method again; when the method wrote, the call applies
the write set it made, one atomic Function call per place (a bucket, or
the global place), and when a place refuses (what the method read has
changed), runs it again.  The handles this module returns are proxies
that drive each method call so; the core's handles stay inside them.

Redis keeps storage only (redis/regolith.lua): reads and range reads of
the tables, and "apply this part if what it was read from still holds".
]]

local core = require "regolith.core"
local redis = require "regolith.cluster.redis"
local layout = require "regolith.cluster.layout"

local M = {}

-- What the calls met (the contention benchmark reads it).
M.stats = { conflicts = 0, fetches = 0, applies = 0 }

local DEBUG = os.getenv("RG_DEBUG")
local MAX_ROUNDS = 400          -- runs of one call before it gives up
local LOCK_AFTER = 2            -- conflicts before waiting longer

local unpack = table.unpack or unpack
local pack = table.pack or function(...) return { n = select("#", ...), ... } end

local OPEN_OPTIONS = {
  sync = "string", readonly = "boolean", script_budget = "number",
  script_memory = "number", max_containers = "number", timeout = "number",
  retry_seconds = "number", wait_timeout = "number", password = "string",
  user = "string", transport = "string", protocol = "number",
  map_size = "number", retry_throttled = "number", meta_refresh = "number",
  query_time = "number", query_memory_items = "number",
}

local function now_ms()
  return core._processor.clock()
end

-- {==================================================================
-- Fetching and applying
-- ===================================================================

local function in_doubt(err, kind)
  if kind == "in_doubt" then
    return "the cluster connection broke after a write was sent: its " ..
      "outcome is unknown (" .. tostring(err) .. ")", 500
  end
  return "cluster: " .. tostring(err), kind == "connection" and 503 or 500
end

-- The tables of sorted duplicates (their zset members are the entries).
local DUPS = { [2] = true, [6] = true }

-- A place's reads (rg_get's requests) with single-key commands, which
-- follow ASK one key at a time: while a slot is half-moved, a Function
-- naming several of its keys is refused (TRYAGAIN) until the move ends.
-- Each table's version is read before its range (a write between them
-- makes the commit refuse what was read, never accept it).  The answers
-- as rg_get gives them.
local function fetch_plain(D, g)
  local keys = layout.place_keys(D.name, g.n.cid, g.n.bucket, g.n.buckets)
  local T = layout.TABLES
  local cmds = {}
  for _, n in ipairs(g.reqs) do
    local h, z, v = keys[n.tb + 1], keys[T + n.tb + 1], keys[2 * T + 1]
    if n.range then
      cmds[#cmds + 1] = { "HGET", v, "t" .. n.tb }
      local key, open = n.key, n.after
      local function bound(k) return k == "" and (open and "(" or "-") or ((open and "(" or "[") .. k) end
      if not n.back then
        cmds[#cmds + 1] = { "ZRANGEBYLEX", z, (key == "" and not open) and "-" or bound(key), "+",
          "LIMIT", 0, n.limit + 1 }
      else
        cmds[#cmds + 1] = { "ZREVRANGEBYLEX", z, key == "" and "+" or bound(key), "-",
          "LIMIT", 0, n.limit + 1 }
      end
    else
      cmds[#cmds + 1] = { "HGET", h, n.key }
    end
  end
  local res = D.redis:pipeline(cmds)
  local out, j, vcmds, vfor = {}, 1, {}, {}
  for i, n in ipairs(g.reqs) do
    if n.range then
      local ver, members = res[j], res[j + 1]
      j = j + 2
      if redis.is_error(ver) then return nil, ver end
      if redis.is_error(members) then return nil, members end
      local done = #members <= n.limit and 1 or 0
      if #members > n.limit then members[#members] = nil end
      out[i] = { members, {}, done, ver == redis.null and "0" or ver }
      if DUPS[n.tb] or #members == 0 then
        for k = 1, #members do out[i][2][k] = "" end
      else
        local c = { "HMGET", keys[n.tb + 1] }
        for k = 1, #members do c[#c + 1] = members[k] end
        vcmds[#vcmds + 1] = c
        vfor[#vfor + 1] = i
      end
    else
      local r = res[j]
      j = j + 1
      if redis.is_error(r) then return nil, r end
      out[i] = r == redis.null and false or r
    end
  end
  if #vcmds > 0 then
    local vres = D.redis:pipeline(vcmds)
    for k, i in ipairs(vfor) do
      local vals = vres[k]
      if redis.is_error(vals) then return nil, vals end
      for m = 1, #out[i][1] do
        local x = vals[m]
        out[i][2][m] = (x == nil or x == redis.null) and "" or x
      end
    end
  end
  return out
end

-- The table of a place's reads when they are all point reads of one
-- table (one HGET or HMGET reads them at once, as rg_get would), or nil.
local function one_table(reqs)
  local tb
  for _, n in ipairs(reqs) do
    if n.range or (tb and n.tb ~= tb) then return nil end
    tb = n.tb
  end
  return tb
end

-- Fetches what the last run needed: every place's reads in one command
-- (HGET or HMGET when they are point reads of one table, else a Function
-- call), all pipelined (a place whose slot is half-moved, or whose call
-- ran out of redirections: fetch_plain).
local function fetch(D)
  local h = D.handle
  local needs, seqs, tps = h:_remote_needs()
  local by, order = {}, {}
  for _, n in ipairs(needs) do
    local id = n.cid .. ":" .. n.bucket
    local g = by[id]
    if not g then
      g = { n = n, args = { "1" }, reqs = {} }
      by[id] = g
      order[#order + 1] = g
    end
    local a = g.args
    if n.range then
      a[#a + 1] = "r"; a[#a + 1] = n.tb; a[#a + 1] = n.key
      a[#a + 1] = n.after and "1" or "0"; a[#a + 1] = n.back and "1" or "0"
      a[#a + 1] = n.limit
    else
      a[#a + 1] = "p"; a[#a + 1] = n.tb; a[#a + 1] = n.key
    end
    g.reqs[#g.reqs + 1] = n
  end
  local cmds = {}
  for i, g in ipairs(order) do
    local keys = layout.place_keys(D.name, g.n.cid, g.n.bucket, g.n.buckets)
    local tb = one_table(g.reqs)
    if tb then                         -- one command reads them at once
      local c = { #g.reqs == 1 and "HGET" or "HMGET", keys[tb + 1] }
      for _, n in ipairs(g.reqs) do c[#c + 1] = n.key end
      cmds[i] = c
      g.plain = true
    else
      cmds[i] = redis.fcall_cmd("FCALL_RO", "rg_get", keys, g.args)
    end
  end
  if seqs > 0 then
    cmds[#cmds + 1] = { "INCRBY", layout.seq_key(D.name), seqs }
  end
  local tpi
  if #tps > 0 then                    -- the budgets' words, read
    local args = {}
    for _, f in ipairs(tps) do args[#args + 1] = f; args[#args + 1] = "0" end
    cmds[#cmds + 1] = redis.fcall_cmd("FCALL", "rg_tp",
      { layout.tp_key(D.name) }, args)
    tpi = #cmds
  end
  if #cmds == 0 then return true end
  M.stats.fetches = M.stats.fetches + 1
  local res = D.redis:pipeline(cmds, true)
  local t = now_ms()
  for i, g in ipairs(order) do
    local r = res[i]
    if g.plain and #g.reqs == 1 and not redis.is_error(r) then r = { r } end
    if redis.is_error(r) and (r.kind == "tryagain" or r.kind == "cluster") then
      local perr                        -- (a read: safe to make again)
      r, perr = fetch_plain(D, g)
      if not r then r = perr end
    end
    if redis.is_error(r) then return nil, in_doubt(r.message, r.kind) end
    for j, n in ipairs(g.reqs) do
      local a = r[j]
      if n.range then
        h:_remote_feed_range(n.cid, n.bucket, n.buckets, n.tb, n.key,
          n.after, n.back, a[1], a[2], a[3] == 1, tonumber(a[4]), t)
      else
        h:_remote_feed_point(n.cid, n.bucket, n.buckets, n.tb, n.key,
          a ~= false and a ~= redis.null and a or nil, t)
      end
    end
  end
  if seqs > 0 then
    local r = res[#order + 1]
    if redis.is_error(r) then return nil, in_doubt(r.message, r.kind) end
    h:_remote_feed_seqs(r - seqs + 1, seqs)
  end
  if tpi then
    local r = res[tpi]
    if redis.is_error(r) then return nil, in_doubt(r.message, r.kind) end
    h:_remote_feed_tp(r[1], tps, { unpack(r, 2) })
  end
  return true
end

-- After a call: what it spent of throughput budgets goes to their words
-- (rg_tp adds it on the server's clock).  A spend that fails is lost: the
-- call's outcome stands.
local function spend(D)
  local sp = D.handle:_remote_tp_spent()
  if #sp == 0 then return end
  D.redis:pipeline({ redis.fcall_cmd("FCALL", "rg_tp",
    { layout.tp_key(D.name) }, sp) })
end

-- Replaces the stand-in for the lsn with lsn in what a call returned.
local function patch(v, stand_in, lsn, seen)
  if type(v) ~= "table" or seen[v] then return end
  seen[v] = true
  for k, x in pairs(v) do
    if x == stand_in then v[k] = lsn
    elseif type(x) == "table" then patch(x, stand_in, lsn, seen) end
  end
end

-- After a WAIT that no replica answered in time: whether one replica of
-- the primary holding `key` still gets the write, waiting on while the
-- offset its replicas acknowledge moves from one WAIT to the next (a big
-- write set on a busy replica takes longer than wait_timeout to arrive,
-- and is not lost for that).  A replica that is gone, stopped or cut off
-- acknowledges nothing more: the write is then not replicated after one
-- more wait_timeout.  On the connection that sent the write, so that WAIT
-- waits for that write.
local REPLICA_ROUNDS = 30
local function replicated(D, key)
  local addr = D.redis:node_for(key)
  if not addr then return false end
  local last
  for _ = 1, REPLICA_ROUNDS do
    local role = D.redis:call_node(addr, "ROLE")
    if type(role) ~= "table" or role[1] ~= "master" then return false end
    local acked = -1
    for _, r in ipairs(type(role[3]) == "table" and role[3] or {}) do
      acked = math.max(acked, tonumber(r[3]) or -1)
    end
    if acked < 0 or (last and acked <= last) then return false end
    last = acked
    local n = tonumber((D.redis:call_node(addr, "WAIT", 1, D.wait_ms)))
    if n and n >= 1 then return true end
  end
  return false
end
M._replicated = replicated      -- (its spec drives it with a scripted node)

-- Applies the write set: what the global place is written once first
-- (path ids, shapes: bucket 1 of the global place), then the buckets' at
-- once, then the rest of the global place's (the catalog, leases), which
-- depends on them.  true and the lsn of the first bucket's part, false
-- when a place refused (the call runs again), or nil, message, status.
local function apply(D)
  local h = D.handle
  local parts, stand_in = h:_remote_parts()
  local first = 1
  local lsn
  M.stats.applies = M.stats.applies + 1
  if DEBUG then
    for i, p in ipairs(parts) do
      io.stderr:write(("part %d (%d:%d)\n%s\n"):format(i, p.cid, p.bucket,
        require("regolith.cluster.debugparts").decode(p.data)))
    end
  end
  local function cmd_of(p)
    return redis.fcall_cmd("FCALL", "rg_apply",
      layout.place_keys(D.name, p.cid, p.bucket, p.buckets), { "1", p.data })
  end
  local function settle(i, p, r)
    if redis.is_error(r) then return nil, in_doubt(r.message, r.kind) end
    if r[1] == "OK" then
      h:_remote_applied(i, r[2])
      if p.cid ~= layout.GLOBAL and not lsn then lsn = r[2] end
      return true
    end
    local t = now_ms()
    if DEBUG then
      io.stderr:write(("refused part %d (%d:%d): %s\n"):format(i, p.cid, p.bucket, tostring(r[1])))
      for _, f in ipairs(r[2]) do
        io.stderr:write(("  kind %s tb %s %q = %q\n"):format(tostring(f[1]), tostring(f[2]), tostring(f[3]), tostring(f[4])))
      end
    end
    for _, f in ipairs(r[2]) do          -- what the place holds now
      if f[1] ~= 4 and f[1] ~= 5 then
        h:_remote_feed_point(p.cid, p.bucket, p.buckets, f[2], f[3],
          f[4] ~= false and f[4] ~= redis.null and f[4] or nil, t)
      elseif f[1] == 4 then
        h:_remote_feed_range(p.cid, p.bucket, p.buckets, f[2], "", false,
          false, {}, {}, false, tonumber(f[4]), t)
      else
        h:_remote_feed_point(p.cid, p.bucket, p.buckets, f[2], f[3], f[4], t)
      end
    end
    h:_remote_refused(i)
    return false
  end
  local last = #parts
  if parts[1] and parts[1].cid == layout.GLOBAL and parts[1].bucket == 1 then
    local r = D.redis:pipeline({ cmd_of(parts[1]) })[1]
    local ok, err, st = settle(1, parts[1], r)
    if ok ~= true then return ok, err, st end
    first = 2
  end
  local tail = parts[last] and parts[last].cid == layout.GLOBAL and
    parts[last].bucket == 0 and last >= first and last
  local cmds, idx = {}, {}
  for i = first, tail and last - 1 or last do
    cmds[#cmds + 1] = cmd_of(parts[i])
    idx[#cmds] = i
    if D.sync == "full" then cmds[#cmds + 1] = { "WAIT", 1, D.wait_ms } end
  end
  local res = #cmds > 0 and D.redis:pipeline(cmds) or {}
  local all, failure = true, nil
  for j, i in pairs(idx) do
    local ok, err, st = settle(i, parts[i], res[j])
    if ok == nil then failure = failure or { err, st }
    elseif not ok then all = false end
    if D.sync == "full" and ok then
      local w = res[j + 1]
      if (redis.is_error(w) or tonumber(w) == nil or tonumber(w) < 1) and
         (failure or not replicated(D, cmds[j][4])) then
        failure = failure or { "not replicated: no replica acknowledged the " ..
          "write, nor more of its primary's stream, within " .. D.wait_ms ..
          " ms (it is applied on its primary; " ..
          "whether it survives a failover is unknown)", 500 }
      end
    end
  end
  if failure then return nil, failure[1], failure[2] end
  if all and tail then
    local r = D.redis:pipeline({ cmd_of(parts[tail]) })[1]
    local ok, err, st = settle(tail, parts[tail], r)
    if ok ~= true then return ok, err, st end
  end
  return all, lsn, stand_in
end

-- A call made inside a running one (a transactional processor's
-- handler calling a method): when what it read was not all there, it goes
-- back to its mark, fetches and runs again alone, so that the handler's
-- own code runs on whole answers and once.  A transport that cannot block
-- inside the core's call (cosockets) leaves it to the outer call, which
-- then runs again whole; so does a fetch that shows the running call read
-- what has changed since (remote.c `moved`: still incomplete once fed).
local function nested(D, f, ...)
  local h = D.handle
  if not D.blocking or not h:_remote_complete() then return f(...) end
  for _ = 1, MAX_ROUNDS do
    local m = h:_remote_mark()
    local out = pack(pcall(f, ...))
    if h:_remote_complete() then
      h:_remote_keep(m)
      if not out[1] then error(out[2], 0) end
      return unpack(out, 2, out.n)
    end
    h:_remote_back(m)
    local ok, err, st = fetch(D)
    if not ok then return nil, err, st end
    h:_remote_fetched()
    if not h:_remote_complete() then return f(...) end
  end
  return nil, "cluster: the call kept asking for more (" .. MAX_ROUNDS ..
    " runs)", 500
end

-- Runs f (a method of the core's handles) as one call on the cluster.
local function drive(D, f, ...)
  local h = D.handle
  if h:_in_scope() then return nested(D, f, ...) end
  h:_remote_reset(now_ms(), D.meta_refresh)
  local conflicts = 0
  for round = 1, MAX_ROUNDS do
    if round > 1 then h:_remote_rerun() end
    local out = pack(pcall(f, ...))
    local state = h:_remote_state()
    if DEBUG then
      io.stderr:write(("round %d state %s -> %s %s %s\n"):format(round, state,
        tostring(out[1]), tostring(out[2]), tostring(out[4])))
      if state == "fetch" then
        for _, n in ipairs((h:_remote_needs())) do
          io.stderr:write(("  need %d:%d tb %d %q%s\n"):format(n.cid, n.bucket, n.tb, n.key, n.range and " range" or ""))
        end
      end
    end
    if state == "done" then
      spend(D)
      if not out[1] then error(out[2], 0) end
      return unpack(out, 2, out.n)
    elseif state == "fetch" then
      local ok, err, st = fetch(D)
      if not ok then return nil, err, st end
    elseif out[1] then                        -- apply
      local ok, lsn, stand_in = apply(D)
      if ok == nil then return nil, lsn, stand_in end
      if ok then
        spend(D)
        if stand_in and stand_in ~= 0 and lsn then
          local seen = {}
          for i = 2, out.n do patch(out[i], stand_in, lsn, seen) end
        end
        return unpack(out, 2, out.n)
      end
      conflicts = conflicts + 1
      M.stats.conflicts = M.stats.conflicts + 1
      -- at once the first time (often a guess of the engine's, an item
      -- guessed absent, refused with what is there); then wait, longer
      -- after a few (a hot partition)
      if conflicts > 1 then
        local cap = conflicts > LOCK_AFTER and 0.02 or 0.002
        core._processor.sleep(math.random() * cap)
      end
    else
      error(out[2], 0)
    end
  end
  return nil, "cluster: the call kept conflicting with other writers (" ..
    MAX_ROUNDS .. " runs)", 503
end

-- }==================================================================

-- {==================================================================
-- Proxies
-- ===================================================================

-- A proxy of a core handle (a database, a container, a processor's
-- state): its methods drive their calls; a method returning a handle
-- returns its proxy.
local Proxy = {}
local handles = setmetatable({}, { __mode = "k" })   -- proxy -> handle
local proxies = setmetatable({}, { __mode = "kv" })  -- handle -> proxy

-- The metatables of the core's handles a proxy stands for.
local handle_mt = { [core._methods.db] = true, [core._methods.container] = true }

local function wrap(D, v)
  if type(v) ~= "userdata" or not handle_mt[getmetatable(v)] then return v end
  local p = proxies[v]
  if p then return p end
  p = setmetatable({ __D = D }, Proxy)
  handles[p] = v
  proxies[v] = p
  return p
end

function M.handle(p) return handles[p] end

local function wrap_all(D, ...)
  local n = select("#", ...)
  if n == 0 then return end
  local out = pack(...)
  for i = 1, n do out[i] = wrap(D, out[i]) end
  return unpack(out, 1, n)
end

-- Arguments that are proxies go to the core as their handles.
local function unwrap_all(...)
  local n = select("#", ...)
  local out = pack(...)
  for i = 1, n do
    local h = type(out[i]) == "table" and handles[out[i]]
    if h then out[i] = h end
  end
  return unpack(out, 1, n)
end

local methods_cache = setmetatable({}, { __mode = "k" })

-- Is f written in Lua (a method assembled in lua/regolith, which calls the
-- proxy's methods itself) rather than the core's?
local lua_method = setmetatable({}, { __mode = "k" })
local function is_lua(f)
  local v = lua_method[f]
  if v == nil then
    v = debug.getinfo(f, "S").what ~= "C"
    lua_method[f] = v
  end
  return v
end

Proxy.__index = function(p, name)
  local h = handles[p]
  local D = rawget(p, "__D")
  local extra = D.extra[getmetatable(h)]
  local own = extra and extra[name]
  if own ~= nil then return own end
  local m = h and h[name]
  if type(m) ~= "function" then return m end
  if is_lua(m) then return m end      -- it calls the proxy's own methods
  local cache = methods_cache[p]
  if not cache then cache = {}; methods_cache[p] = cache end
  local f = cache[name]
  if not f then
    f = function(self, ...)
      local target = handles[self] or self
      local args = pack(unwrap_all(...))
      return wrap_all(D, drive(D, function()
        return m(target, unpack(args, 1, args.n))
      end))
    end
    cache[name] = f
  end
  return f
end

Proxy.__tostring = function(p)       -- the core's: "regolith.db (url)"
  return tostring(handles[p])
end

-- }==================================================================

-- {==================================================================
-- Opening
-- ===================================================================

local function check_options(opts)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    error("open: options must be a table, not " .. type(opts), 3)
  end
  for k, v in pairs(opts) do
    local want = OPEN_OPTIONS[k]
    if want == nil then error("open: unknown option '" .. tostring(k) .. "'", 3) end
    if type(v) ~= want then
      error("open: option '" .. k .. "' must be a " .. want, 3)
    end
    if want == "string" and v:find("\0", 1, true) then
      error("open: option '" .. k .. "' must not contain NUL", 3)
    end
  end
  return opts
end

local function random_bytes(n)
  local f = io.open("/dev/urandom", "rb")
  local s = f and f:read(n)
  if f then f:close() end
  if s and #s == n then return s end
  local t = {}
  for i = 1, n do t[i] = string.char(math.random(0, 255)) end
  return table.concat(t)
end

local VERSION_KEY, SECRET_KEY = "\1version", "\1secret"
local FORMAT = "\0\0\0\2"          -- csrc/store/layout.h RG_FORMAT_VERSION

-- regolith.open("redis://host:port[,host:port...]/name", opts)
function M.open(url, opts)
  if url:find("\0", 1, true) then
    error("bad argument #1 to 'open' (a path must not contain NUL)", 2)
  end
  opts = check_options(opts)
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
  local c, err = redis.connect(seeds, { timeout = opts.timeout,
    retry_seconds = opts.retry_seconds, password = opts.password,
    user = opts.user, transport = opts.transport, protocol = opts.protocol })
  if not c then return nil, "cannot reach the cluster: " .. tostring(err), 500 end
  local ok, lerr, lkind = layout.ensure_library(c)
  if not ok then
    c:close()
    return nil, "cannot load the regolith Functions library: " .. tostring(lerr),
      lkind == "version" and 426 or 500
  end
  -- the format and the secret, made by the first open
  local meta = layout.place_keys(name, layout.GLOBAL, 0, 1)[1]
  local r = c:pipeline({ { "HGET", meta, VERSION_KEY }, { "HGET", meta, SECRET_KEY },
    { "EXISTS", layout.old_catalog(name) } })
  for _, x in ipairs(r) do
    if redis.is_error(x) then c:close(); return nil, "cannot reach the cluster: " .. x.message, 500 end
  end
  if r[1] == redis.null then
    if r[3] == 1 then
      c:close()
      return nil, "the cluster database '" .. name .. "' is of the layout before " ..
        "this release (one hash per logical partition); this release reads " ..
        "format 2's places: export it with the release that made it and " ..
        "import it here (docs/cluster.md, \"Moving a database of the " ..
        "earlier layout\")", 426
    end
    if not opts.readonly then
      local zmeta = layout.place_keys(name, layout.GLOBAL, 0, 1)[layout.TABLES + 1]
      c:pipeline({ { "HSETNX", meta, SECRET_KEY, random_bytes(16) },
        { "ZADD", zmeta, 0, SECRET_KEY }, { "HSETNX", meta, VERSION_KEY, FORMAT },
        { "ZADD", zmeta, 0, VERSION_KEY } })
      r = c:pipeline({ { "HGET", meta, VERSION_KEY }, { "HGET", meta, SECRET_KEY } })
    end
  end
  if r[1] ~= FORMAT or type(r[2]) ~= "string" or #r[2] ~= 16 then
    c:close()
    if r[1] == redis.null then
      return nil, "no regolith database '" .. name .. "' on the cluster", 404
    end
    return nil, "the cluster database '" .. name .. "' is of another format " ..
      "(" .. tostring(r[1] and r[1]:byte(4)) .. ")", 500
  end
  local handle, herr, hst = core._open_remote(url, r[2], {
    sync = sync, readonly = opts.readonly,
    script_budget = opts.script_budget, script_memory = opts.script_memory,
    max_containers = opts.max_containers,
    retry_throttled = opts.retry_throttled, query_time = opts.query_time,
    query_memory_items = opts.query_memory_items })
  if not handle then c:close(); return nil, herr, hst end
  local D = {
    url = url, name = name, redis = c, handle = handle, sync = sync,
    blocking = c.t.name ~= "cosocket",
    wait_ms = opts.wait_timeout or 1000,
    meta_refresh = (opts.meta_refresh or 0) * 1000,
    extra = {},
  }
  local db = wrap(D, handle)
  local extra = {}
  for k, v in pairs(M.db_extra) do extra[k] = v end
  D.extra[getmetatable(handle)] = extra
  D.db = db
  extra.close = function()
    if D.closed then return true end
    D.closed = true
    if M.on_close then M.on_close(db) end
    handle:close()
    c:close()
    return true
  end
  extra.cluster = function() return c end
  return db
end

-- Members every database proxy has beside the core's methods (regolith's
-- init.lua adds the processors' here), and what runs when one closes.
M.db_extra = {}
M.on_close = nil

-- db:write_queue -> nil, message, 501: the queue is a file beside a local
-- database's own that its processes share (store/queue.h); a cluster's
-- clients share no file, and each write is already one call to Redis.
M.db_extra.write_queue = function()
  return nil, "write_queue is not available on a Redis Cluster: the queue " ..
    "is a file the processes of one machine share beside a local " ..
    "database; write with the container's methods (docs/cluster.md)", 501
end

-- The processors' state (regolith.processor): the core's, on the
-- container's handle, its calls driven as the others.
local P = core._processor
M.db_extra.processor_backend = {
  new = function(cont, ...)
    local st = P.new(handles[cont], ...)
    handle_mt[getmetatable(st)] = true
    return wrap(rawget(cont, "__D"), st)
  end,
  in_transaction = function(db) return P.in_transaction(handles[db]) end,
  is_container = function(v)
    return type(v) == "table" and handles[v] ~= nil and core.is_container(handles[v])
  end,
}

return M
