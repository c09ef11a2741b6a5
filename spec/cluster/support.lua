-- Shared by the cluster specs: the cluster they run against, clients, fresh
-- database names, snapshots of a slot, and the fault operations.
--
-- REGOLITH_URL (redis://host:port[,host:port...]/name) names a running
-- cluster; RG_CLUSTER_DIR, when also set, is the directory that
-- tools/redis-cluster.sh started it in, which the fault specs need to kill
-- and restart nodes by pid.  Without REGOLITH_URL the first spec that asks
-- starts a cluster in a temporary directory (tools/redis-cluster.sh), and
-- it is stopped when busted's suite ends (spec/cluster/helper.lua loads
-- this module before the files are insulated, so that one cluster serves
-- every file).  Without redis-server, C.available is false and every
-- cluster spec is pending: nothing is reported as passing.
local redis = require "regolith.cluster.redis"
local layout = require "regolith.cluster.layout"
local H = require "helper"
local luassert = require "luassert"

local C = {}

-- A shell command's output (stderr too) and whether it exited with 0.
local function sh(cmd)
  return H.run(cmd .. " 2>&1")
end
C.sh = sh

C.available = select(2, sh("command -v redis-server && command -v redis-cli"))

local started_dir

-- Starts the cluster (once) unless REGOLITH_URL names one.  Returns the
-- seed list, or nil and why.
function C.ensure()
  if C.seeds then return C.seeds end
  if not C.available then return nil, "redis-server is not installed" end
  local url = os.getenv("REGOLITH_URL")
  if url then
    C.seeds = url:match("^redis://([^/]+)")
    C.dir = os.getenv("RG_CLUSTER_DIR")
  else
    local dir = os.tmpname()
    os.remove(dir)
    -- the watcher stops it if this process ends without the suite's end
    -- (busted --list, an interrupt)
    local out, ok = sh('RG_CLUSTER_OWNER=$PPID tools/redis-cluster.sh start ' .. dir)
    if not ok then return nil, "the cluster did not start: " .. out end
    started_dir, C.dir = dir, dir
    -- stopped when the suite ends, also when specs failed
    local has_busted, busted = pcall(require, "busted")
    if has_busted then
      busted.subscribe({ "suite", "end" }, function() C.stop(); return nil, true end)
    end
    C.seeds = "127.0.0.1:" .. out:match("(%d+)%s*$")
  end
  -- every node as a seed: a spec that kills one may still connect
  if C.dir and not C.seeds:find(",", 1, true) then
    local ports, ok = sh("tools/redis-cluster.sh ports " .. C.dir)
    if ok then
      local all = {}
      for p in ports:gmatch("%d+") do all[#all + 1] = "127.0.0.1:" .. p end
      if #all > 0 then C.seeds = table.concat(all, ",") end
    end
  end
  return C.seeds
end

-- Stops the cluster this module started (not one named by REGOLITH_URL).
function C.stop()
  if started_dir then
    sh("tools/redis-cluster.sh stop " .. started_dir .. " && rm -rf " .. started_dir)
    started_dir, C.seeds, C.dir = nil, nil, nil
  end
end

-- Raises unless the cluster is whole (every node ok, every primary with
-- its replica online) within `seconds` (90): a file's specs start from a
-- whole cluster, whatever the one before did to it, and a cluster that
-- stays broken fails with what each node sees rather than with the
-- CLUSTERDOWN of whichever spec comes next.  A cluster found broken for
-- good is marked (DIR/broken): every later wait of the run fails at once,
-- so that a run whose cluster broke ends in minutes, not after a wait per
-- spec file.
function C.whole(seconds)
  if not C.dir then return end
  local mark = C.dir .. "/broken"
  local f = io.open(mark, "r")
  if f then
    f:close()
    error("the cluster stayed broken earlier in this run (see " .. mark .. ")", 2)
  end
  local out, ok = sh("tools/redis-cluster.sh wait " .. C.dir .. " " .. (seconds or 90))
  if not ok then
    f = io.open(mark, "w")
    if f then f:write(out) f:close() end
    error("the cluster is not whole:\n" .. out, 2)
  end
end

-- For the top of each describe block: true when the cluster runs (and is
-- whole); else it marks the block pending (busted's `pending`, passed in)
-- with why.
function C.ready(pending)
  local seeds, why = C.ensure()
  if not seeds then pending("no Redis Cluster: " .. why) end
  if seeds then C.whole() end
  return seeds ~= nil
end

-- A client on the cluster, with the regolith library loaded.  The specs'
-- clients retry for 30 s (the library's default is 10): on a loaded
-- machine a node can miss the node timeout and be failed over in the
-- middle of a spec, and the cluster is down until its replica takes over.
function C.client(opts)
  opts = opts or {}
  if opts.retry_seconds == nil then opts.retry_seconds = 30 end
  local c = assert(redis.connect(C.seeds, opts))
  assert(layout.ensure_library(c))
  return c
end

local n = 0
-- The slot of the bucket holding logical partition pk of container c (a
-- handle) of the database at url.
function C.slot_of(url, c, pk)
  local cid, bucket, buckets = c:_remote_bucket(pk)
  return layout.slot(url:match("/([^/]+)$"), cid, bucket, buckets)
end

function C.fresh_db()
  n = n + 1
  return ("spec%d_%d_%d"):format(os.time(), math.random(1e6), n)
end

-- Every key of a slot with its content, read on the node that serves it
-- (DUMP would not do: a read can rehash a hash table and change its DUMP):
-- equal snapshots mean nothing was written.
local READ = { string = { "GET" }, hash = { "HGETALL" }, list = { "LRANGE", 0, -1 },
  zset = { "ZRANGE", 0, -1, "WITHSCORES" }, set = { "SMEMBERS" }, stream = { "XRANGE", "-", "+" } }

local function flat(v, out)
  if type(v) ~= "table" then out[#out + 1] = tostring(v); return out end
  for _, x in ipairs(v) do flat(x, out) end
  return out
end

function C.snapshot(c, slot)
  local addr = c:node_for_slot(slot)
  local keys = assert(c:call_node(addr, "CLUSTER", "GETKEYSINSLOT", slot, 100000))
  local snap = {}
  for _, k in ipairs(keys) do
    local t = assert(c:call_node(addr, "TYPE", k))
    local cmd = READ[t]
    local v = assert(c:call_node(addr, cmd[1], k, select(2, (table.unpack or unpack)(cmd))))
    v = flat(v, {})
    if t == "hash" then                     -- field order is not content
      local pairs_ = {}
      for i = 1, #v, 2 do pairs_[#pairs_ + 1] = v[i] .. "=" .. v[i + 1] end
      table.sort(pairs_)
      v = pairs_
    elseif t == "set" then
      table.sort(v)
    end
    snap[k] = t .. ":" .. table.concat(v, "\0")
  end
  return snap
end

-- The node addresses and pids of the cluster's servers, by role.
function C.nodes(c)
  local addr = c:primaries()[1]
  local text = assert(c:call_node(addr, "CLUSTER", "NODES"))
  local out = {}
  for line in text:gmatch("[^\n]+") do
    local id, a, flags, master = line:match("^(%S+) (%S+)@%d+ (%S+) (%S+)")
    out[#out + 1] = { id = id, addr = a, primary = flags:find("master") ~= nil,
      of = master ~= "-" and master or nil, failed = flags:find("fail") ~= nil }
  end
  return out
end

function C.pid_of(addr)
  local port = addr:match(":(%d+)$")
  local f = C.dir and io.open(C.dir .. "/" .. port .. "/pid")
  if not f then return nil end
  local pid = f:read("*l")
  f:close()
  return pid
end

-- Stops the server at addr (SIGSTOP) and returns once it is stopped (its
-- state in /proc is T), so that it answers nothing, replication included,
-- until C.resume_node(addr).  Needs C.dir (the servers' pids).
function C.pause_node(addr)
  local pid = assert(C.pid_of(addr), "no pid for " .. addr)
  assert(select(2, sh("kill -STOP " .. pid)))
  for _ = 1, 3000 do
    local f = io.open("/proc/" .. pid .. "/stat")
    local st = f and f:read("a"):match("%) (%a)")
    if f then f:close() end
    if st == "T" then return end
    sh("sleep 0.01")
  end
  error("the server at " .. addr .. " did not stop")
end

function C.resume_node(addr)
  local pid = assert(C.pid_of(addr), "no pid for " .. addr)
  assert(select(2, sh("kill -CONT " .. pid)))
end

-- Waits until the cluster is whole again (every node ok, replicas online).
function C.restart_node(addr)
  local port = addr:match(":(%d+)$")
  return sh("tools/redis-cluster.sh restart " .. C.dir .. " " .. port)
end

local function node_ids(c)
  local ids = {}
  for _, nd in ipairs(C.nodes(c)) do ids[nd.addr] = nd.id end
  return ids
end

-- Starts moving slot `slot` from its node to node `to`, as redis-cli
-- --cluster reshard does, and moves the keys named (none: the slot is
-- half-moved, for ASK and TRYAGAIN).  Returns the node it moves from.
function C.begin_migration(c, slot, to, keys)
  assert(c:refresh())
  local from = c:node_for_slot(slot)
  local ids = node_ids(c)
  assert(c:call_node(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from]))
  assert(c:call_node(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to]))
  local host, port = to:match("^(.*):(%d+)$")
  for _, k in ipairs(keys or {}) do
    assert(c:call_node(from, "MIGRATE", host, port, k, 0, 5000))
  end
  return from
end

-- Ends a migration: the rest of the keys move, and every primary is told
-- that `to` serves the slot.
function C.finish_migration(c, slot, from, to)
  local keys = assert(c:call_node(from, "CLUSTER", "GETKEYSINSLOT", slot, 100000))
  local host, port = to:match("^(.*):(%d+)$")
  for _, k in ipairs(keys) do
    assert(c:call_node(from, "MIGRATE", host, port, k, 0, 5000))
  end
  -- the primaries that serve slots (a node's view of another's role can
  -- lag behind, so CLUSTER NODES could name a replica "master")
  local ids = node_ids(c)
  assert(c:refresh())
  for _, addr in ipairs(c:primaries()) do
    assert(c:call_node(addr, "CLUSTER", "SETSLOT", slot, "NODE", ids[to]))
  end
  assert(c:refresh())
  -- every node, replicas too, learns the new owner by gossip: a failover
  -- before a replica has learnt it would leave the slot to no one
  C.whole(60)
end

-- Moves a whole slot to node `to`; returns the node it came from.
function C.migrate_slot(c, slot, to)
  local from = C.begin_migration(c, slot, to)
  C.finish_migration(c, slot, from, to)
  return from
end

-- A primary other than addr.
function C.other_primary(c, addr)
  for _, a in ipairs(c:primaries()) do if a ~= addr then return a end end
end

-- {==================================================================
-- Child processes and their logs (the fault specs' writers)
-- ===================================================================

-- Starts `script` (a file under spec/cluster/faults/) with args in the
-- background; returns a handle whose :wait(seconds) waits until the
-- child has written its last line ("done") to its log, and :lines().
function C.spawn(script, ...)
  local args = { ... }
  local done = os.tmpname()
  os.remove(done)
  local quoted = {}
  for i, a in ipairs(args) do quoted[i] = "'" .. tostring(a) .. "'" end
  local cmd = H.lua_cmd("spec/cluster/faults/" .. script .. " " .. table.concat(quoted, " "))
  os.execute("(" .. cmd .. " > " .. done .. ".out 2>&1; echo $? > " .. done .. ") &")
  local child = { done = done }
  function child.wait(_, seconds)
    local socket = require "socket"
    local deadline = socket.gettime() + (seconds or 120)
    while socket.gettime() < deadline do
      local f = io.open(done, "r")
      if f then
        local code = f:read("*l")
        f:close()
        local o = io.open(done .. ".out", "r")
        local out = o and o:read("*a") or ""
        if o then o:close() end
        os.remove(done)
        os.remove(done .. ".out")
        return code == "0", out
      end
      socket.sleep(0.1)
    end
    return false, "the child did not end in time"
  end
  return child
end

-- The lines of a writer's log, tallied: acknowledged ids, doubtful ids,
-- counts of increments, errors.
function C.tally(path, into)
  into = into or { ok = {}, doubt = {}, inc_ok = 0, inc_doubt = 0, errors = {},
    writes = 0, done = 0 }
  for line in io.lines(path) do
    local tag, id, how = line:match("^(c) (%S+) (%a+)$")
    if tag then
      into.writes = into.writes + 1
      if how == "ok" then into.ok[#into.ok + 1] = id else into.doubt[#into.doubt + 1] = id end
    elseif line == "i ok" then into.inc_ok, into.writes = into.inc_ok + 1, into.writes + 1
    elseif line == "i doubt" then into.inc_doubt, into.writes = into.inc_doubt + 1, into.writes + 1
    elseif line == "done" then into.done = into.done + 1
    else into.errors[#into.errors + 1] = line end
  end
  return into
end

-- Starts two writer processes (faults/writer.lua) on container `cont` of
-- the database at `url`, over `parts` partition keys, with sync mode
-- `sync` (nil: the writer's own); C.finish_writers waits for them.
function C.start_writers(url, cont, parts, sync)
  local w = { kids = {}, logs = {} }
  for i = 1, 2 do
    w.logs[i] = os.tmpname()
    w.kids[i] = C.spawn("writer.lua", url, cont, "w" .. i, parts, w.logs[i], sync)
  end
  return w
end

-- Waits for the writers (60 s each), tallies their logs into one table
-- (removing them) and checks that none of them reported an error.
function C.finish_writers(w)
  local t
  for i = 1, #w.kids do
    local done, why = w.kids[i]:wait(60)
    luassert.is_true(done, why)
  end
  for i = 1, #w.logs do t = C.tally(w.logs[i], t); os.remove(w.logs[i]) end
  luassert.are.same({}, t.errors)
  return t
end

-- Waits until every node agrees about the slots (redis-cli --cluster
-- check, which rebalance insists on), up to `seconds`.
function C.wait_agreement(addr, seconds)
  return C.wait_until(seconds or 30, function()
    local out = C.sh("redis-cli --cluster check " .. addr)
    return not out:find("[ERR]", 1, true) and not out:find("[WARNING]", 1, true)
  end)
end

-- Waits until `check()` is true (polled every 0.1 s), up to `seconds`.
function C.wait_until(seconds, check)
  local socket = require "socket"
  local deadline = socket.gettime() + seconds
  repeat
    if check() then return true end
    socket.sleep(0.1)
  until socket.gettime() > deadline
  return false
end

-- }==================================================================

-- The fault specs' counter: procedure "inc" adds one to the item
-- "counter" of partition "counter" of container c (which it creates, at 0)
-- and returns the new value.
function C.counter(c)
  assert(c:create_procedure("inc", [[
    return function(ctx)
      local d = assert(ctx:read("counter"))
      d.n = d.n + 1
      assert(ctx:replace(d))
      return d.n
    end]]))
  assert(c:create({ id = "counter", pk = "counter", n = 0 }))
end

-- A deterministic stream of numbers in 1..n (the same items on both
-- backends and under both interpreters: every product stays below 2^53,
-- exact in LuaJIT's doubles too).
function C.rng(seed)
  local s = seed
  return function(n)
    s = (s * 16807) % 2147483647
    return s % n + 1
  end
end

C.redis, C.layout = redis, layout
return C
