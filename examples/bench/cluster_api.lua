--[[
regolith's API on Redis Cluster beside a local database, on this machine:
median and 99th-percentile latencies of a point read (also by a handle
keeping the catalog, meta_refresh = 60, on the cluster), a write (sync none
and full), a procedure, a routed query and a fan-out query, the same calls
on a local database, and plain Redis commands through the same client;
then the throughput of 4 writer processes against the cluster with its
slots on 3 primaries and then all on 1, and against a local database.

    LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
      lua5.4 examples/bench/cluster_api.lua [--n 2000] [--seconds 5]
        [--json FILE]

It starts a cluster of its own (tools/redis-cluster.sh: 3 primaries, 3
replicas, 127.0.0.1) and stops it at the end.  Numbers from a shared
machine are noisy: compare within one run.
]]

local regolith = require "regolith"
local redis = require "regolith.cluster.redis"
local socket = require "socket"

-- {=====================================================================
-- A writer process (--child URL_OR_PATH SECONDS OUT)
-- ======================================================================
if arg[1] == "--child" then
  local path, seconds, out = arg[2], tonumber(arg[3]), arg[4]
  local db = assert(regolith.open(path, { sync = "none" }))
  local c = assert(db:container("load"))
  local me = tostring(os.time()) .. tostring(math.random(1e9))
  local n, deadline = 0, socket.gettime() + seconds
  while socket.gettime() < deadline do
    n = n + 1
    assert(c:upsert({ id = me .. "-" .. n, pk = "k" .. (n % 64), n = n, s = "some text" }))
  end
  db:close()
  local f = assert(io.open(out, "w"))
  f:write(n, "\n")
  f:close()
  os.exit(0)
end
-- }=====================================================================

local args = { n = 2000, seconds = 5 }
do
  local i = 1
  while arg[i] do
    local k = arg[i]:match("^%-%-(.*)")
    if not k or not arg[i + 1] then
      error("usage: cluster_api.lua [--n N] [--seconds S] [--json FILE]")
    end
    args[k] = tonumber(arg[i + 1]) or arg[i + 1]
    i = i + 2
  end
end

local own = dofile("examples/bench/own_cluster.lua")
local sh = own.sh

local dir = os.tmpname()
os.remove(dir)
local base = own.start(dir .. "/cluster")
local seeds = "127.0.0.1:" .. base
local function stop()
  own.stop(dir .. "/cluster")
  sh("rm -rf " .. dir)
end

local function stats(xs)
  table.sort(xs)
  return xs[math.floor((#xs + 1) / 2)], xs[math.max(1, math.floor(#xs * 0.99))]
end

-- Times f(i) n times: median and p99 in microseconds.
local function timed(n, f)
  local xs = {}
  for i = 1, n do
    local t0 = socket.gettime()
    f(i)
    xs[i] = (socket.gettime() - t0) * 1e6
  end
  return stats(xs)
end

local DOC = ("x"):rep(800)

-- The calls on one backend: {name = {median, p99}}.
local function measure(path)
  local out = {}
  local db = assert(regolith.open(path, { sync = "none" }))
  local full = assert(regolith.open(path, { sync = "full" }))
  local c = assert(db:create_container("c", { partition_key = "/pk",
    physical_partitions = 16 }))
  local fc = assert(full:container("c"))
  assert(c:create_procedure("inc", [[
    return function(ctx, id)
      local d = ctx:read(id) or { id = id, pk = ctx.partition_key, n = 0 }
      d.n = d.n + 1
      assert(ctx:upsert(d))
      return d.n
    end]]))
  local N = args.n
  for i = 1, 1000 do
    assert(c:upsert({ id = "r" .. i, pk = "k" .. (i % 100), n = i % 10, s = DOC }))
  end
  out.read = { timed(N, function(i)
    assert(c:read("r" .. (i % 1000 + 1), "k" .. ((i % 1000 + 1) % 100))) end) }
  do                -- a handle that keeps the catalog (cluster only)
    local ok, kept = pcall(regolith.open, path, { sync = "none", meta_refresh = 60 })
    local kc = ok and kept and kept:container("c")
    if kc then
      out.read_kept = { timed(N, function(i)
        assert(kc:read("r" .. (i % 1000 + 1), "k" .. ((i % 1000 + 1) % 100))) end) }
      kept:close()
    end
  end
  out.write = { timed(N, function(i)
    assert(c:upsert({ id = "w" .. i, pk = "k" .. (i % 100), n = i, s = DOC })) end) }
  out.write_full = { timed(math.floor(N / 2), function(i)
    assert(fc:upsert({ id = "f" .. i, pk = "k" .. (i % 100), n = i, s = DOC })) end) }
  out.procedure = { timed(math.floor(N / 2), function(i)
    assert(c:execute("inc", "k" .. (i % 100), "counter")) end) }
  out.routed_query = { timed(N, function(i)
    assert(c:query("SELECT * FROM c WHERE c.pk = @p", { p = "k" .. (i % 100) })) end) }
  out.fanout_query = { timed(math.floor(N / 4), function(i)
    assert(c:query("SELECT VALUE c.id FROM c WHERE c.n = @n", { n = i % 10 })) end) }
  full:close()
  db:close()
  return out
end

-- {=====================================================================
-- Latencies
-- ======================================================================
local results = {}
results.cluster = measure("redis://" .. seeds .. "/lat")
results["local"] = measure(dir .. "/local")
do                                   -- plain Redis through the same client
  local c = assert(redis.connect(seeds))
  local plain = {}
  plain.GET = { timed(args.n, function(i) assert(c:call("GET", "g" .. (i % 100))) end) }
  plain.SET = { timed(args.n, function(i) assert(c:call("SET", "g" .. (i % 100), DOC)) end) }
  plain.HGET = { timed(args.n, function(i) assert(c:call("HGET", "h" .. (i % 100), "f")) end) }
  results.redis = plain
  c:close()
end
-- }=====================================================================

-- {=====================================================================
-- Throughput: 4 writer processes
-- ======================================================================
local lua = (jit and "luajit" or "lua5.4")
local env = ("LUA_PATH='%s' LUA_CPATH='%s'"):format(package.path, package.cpath)
local function throughput(path, procs)
  local db = assert(regolith.open(path))
  if not db:container("load") then
    assert(db:create_container("load", { partition_key = "/pk", physical_partitions = 64 }))
  end
  db:close()
  local outs = {}
  for k = 1, procs do
    outs[k] = dir .. "/out" .. k
    os.execute(("%s %s examples/bench/cluster_api.lua --child '%s' %d %s &"):format(env, lua,
      path, args.seconds, outs[k]))
  end
  local total, deadline = 0, socket.gettime() + args.seconds + 60
  for k = 1, procs do
    while socket.gettime() < deadline do
      local f = io.open(outs[k])
      local n = f and tonumber(f:read("*l"))
      if f then f:close() end
      if n then total = total + n; os.remove(outs[k]); break end
      socket.sleep(0.1)
    end
  end
  return total / args.seconds
end

local admin = assert(redis.connect(seeds))
local ids = {}
for line in admin:call_node(seeds, "CLUSTER", "NODES"):gmatch("[^\n]+") do
  local id, flags = line:match("^(%S+) %S+ (%S+)")
  if flags:find("master") then ids[#ids + 1] = id end
end
results.throughput = {}
results.throughput.cluster_3 = throughput("redis://" .. seeds .. "/tp3", 4)
-- every slot to one primary
sh(("redis-cli --cluster rebalance %s --cluster-weight %s=1 %s=0 %s=0 --cluster-yes"):format(
  seeds, ids[1], ids[2], ids[3]))
results.throughput.cluster_1 = throughput("redis://" .. seeds .. "/tp1", 4)
results.throughput["local"] = throughput(dir .. "/tplocal", 4)
admin:close()
stop()
-- }=====================================================================

local function us(v) return v >= 100 and ("%.0f"):format(v) or ("%.1f"):format(v) end
print(("regolith API on a local Redis Cluster (3+3, 127.0.0.1) and on a local database; " ..
  "medians / p99 in microseconds, n = %d (%s)"):format(args.n, _VERSION .. (jit and " / LuaJIT" or "")))
print(("%-14s %16s %16s"):format("call", "cluster", "local"))
for _, k in ipairs({ "read", "read_kept", "write", "write_full", "procedure", "routed_query",
                    "fanout_query" }) do
  local cl, lo = results.cluster[k], results["local"][k]
  local function pair(x) return x and ("%7s / %-7s"):format(us(x[1]), us(x[2])) or ("%17s"):format("-") end
  print(("%-14s %s %s"):format(k, pair(cl), pair(lo)))
end
print(("plain Redis through the client: GET %s, SET %s, HGET %s"):format(
  us(results.redis.GET[1]), us(results.redis.SET[1]), us(results.redis.HGET[1])))
local t = results.throughput
print(("throughput, 4 writer processes, sync none: cluster on 3 primaries %.0f/s, " ..
  "on 1 primary %.0f/s; local %.0f/s"):format(t.cluster_3, t.cluster_1, t["local"]))
if args.json then
  local f = assert(io.open(args.json, "w"))
  f:write(regolith.json.encode(results), "\n")
  f:close()
end
