--[[
Writers contending on a Redis Cluster: 16 processes on one logical
partition, then 16 on one physical partition (each its own logical
partition, all in the same bucket), for --seconds each.  Every process
repeats two calls: the create of a new item, and a procedure that reads
its partition's counter item and writes it back one higher (a
read-modify-write, which conflicts whenever another writer changed the
counter between the read and the commit).  Printed per case: the calls
per second (creates and procedures), and the conflicts the client met and
retried (a conflict reruns the call), per 1,000 calls.

    LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
      lua5.4 examples/bench/contention.lua [--seconds 5] [--writers 16]
        [--url redis://HOST:PORT/NAME] [--json FILE]

Without --url it starts a cluster of its own (tools/redis-cluster.sh: 3
primaries, 3 replicas, 127.0.0.1) and stops it at the end.  The counters
end exact (checked): every procedure's increment is there once.
]]

local regolith = require "regolith"
local socket = require "socket"

-- The conflicts the cluster client retried, counted where it waits
-- before a retry (its backoff).
local function count_conflicts()
  local n = { 0 }
  local ok, cluster = pcall(require, "regolith.cluster")
  if ok and type(cluster) == "table" and cluster.stats then
    return function() return cluster.stats.conflicts or 0 end
  end
  local ok2, items = pcall(require, "regolith.cluster.items")
  if ok2 and type(items) == "table" and items.backoff then
    local backoff = items.backoff
    items.backoff = function(...) n[1] = n[1] + 1; return backoff(...) end
  end
  return function() return n[1] end
end

-- {=====================================================================
-- A writer process (--child URL PK SECONDS OUT)
-- ======================================================================
if arg[1] == "--child" then
  local url, pk, seconds, out = arg[2], arg[3], tonumber(arg[4]), arg[5]
  local conflicts = count_conflicts()
  local db = assert(regolith.open(url, { sync = "none" }))
  local c = assert(db:container("hot"))
  local me = tostring(socket.gettime()):gsub("%.", "") .. tostring(math.random(1e9))
  local creates, procs, failed, n = 0, 0, 0, 0
  local deadline = socket.gettime() + seconds
  while socket.gettime() < deadline do
    n = n + 1
    if c:create({ id = me .. "-" .. n, pk = pk, n = n }) then creates = creates + 1
    else failed = failed + 1 end
    if c:execute("inc", pk, "counter") then procs = procs + 1
    else failed = failed + 1 end
  end
  db:close()
  local f = assert(io.open(out, "w"))
  f:write(creates, " ", procs, " ", failed, " ", conflicts(), "\n")
  f:close()
  os.exit(0)
end
-- }=====================================================================

local parser = require("argparse")("contention.lua",
  "Writers contending on a Redis Cluster")
parser:option("--seconds", "Seconds each case runs.", "5", tonumber)
parser:option("--writers", "Writer processes.", "16", tonumber)
parser:option("--url", "A cluster's redis:// URL (else one is started).")
parser:option("--json", "Writes the results there too.")
local args = parser:parse()

local own = dofile("examples/bench/own_cluster.lua")
local sh = own.sh

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)
local url = args.url
if not url then
  local base = own.start(dir .. "/cluster")
  url = "redis://127.0.0.1:" .. base .. "/contention"
end

local P = 16

-- Partition keys all in physical partition 0 of P: found on a local
-- database, whose feed ranges are the same buckets as a cluster's.
local function same_bucket(n)
  local db = assert(regolith.open(dir .. "/local", { sync = "none" }))
  local c = assert(db:create_container("probe", { partition_key = "/pk",
    physical_partitions = P }))
  for i = 1, n * P * 3 do assert(c:create({ id = "p", pk = "w" .. i })) end
  local page = assert(c:changes({ feed_range = 1, max_items = 100000 }))
  local pks = {}
  for _, doc in ipairs(page) do
    if #pks < n then pks[#pks + 1] = doc.pk end
  end
  db:close()
  assert(#pks == n, "not enough partition keys in one bucket")
  return pks
end

local lua = (jit and "luajit" or "lua5.4")
local env = ("LUA_PATH='%s' LUA_CPATH='%s'"):format(package.path, package.cpath)

-- Runs the writers on the partition keys pks (one per writer); returns
-- creates/s, procedures/s, failures, conflicts, and the counters' sum.
local function run(name, pks)
  local db = assert(regolith.open(url))
  local c = db:container("hot")
  if c then assert(db:delete_container("hot")) end
  c = assert(db:create_container("hot", { partition_key = "/pk",
    physical_partitions = P }))
  assert(c:create_procedure("inc", [[
    return function(ctx, id)
      local d = ctx:read(id) or { id = id, pk = ctx.partition_key, n = 0 }
      d.n = d.n + 1
      assert(ctx:upsert(d))
      return d.n
    end]]))
  local outs = {}
  for k = 1, #pks do
    outs[k] = ("%s/%s%d"):format(dir, name, k)
    os.execute(("%s %s examples/bench/contention.lua --child '%s' '%s' %d %s &"):format(
      env, lua, url, pks[k], args.seconds, outs[k]))
  end
  local r = { creates = 0, procs = 0, failed = 0, conflicts = 0 }
  local deadline = socket.gettime() + args.seconds + 120
  for k = 1, #pks do
    while socket.gettime() < deadline do
      local f = io.open(outs[k])
      local line = f and f:read("*l")
      if f then f:close() end
      if line then
        local a, b, x, y = line:match("(%d+) (%d+) (%d+) (%d+)")
        r.creates, r.procs = r.creates + a, r.procs + b
        r.failed, r.conflicts = r.failed + x, r.conflicts + y
        break
      end
      socket.sleep(0.1)
    end
  end
  local sum, seen = 0, {}
  for _, pk in ipairs(pks) do
    if not seen[pk] then
      seen[pk] = true
      local doc = c:read("counter", pk)
      sum = sum + (doc and doc.n or 0)
    end
  end
  db:close()
  r.exact = sum == r.procs
  return r
end

local hot = {}
for k = 1, args.writers do hot[k] = "hot" end
local results = {
  logical = run("logical", hot),
  physical = run("physical", same_bucket(args.writers)),
}
if not args.url then own.stop(dir .. "/cluster") end
sh("rm -rf " .. dir)

print(("%d writers on a Redis Cluster (3+3, 127.0.0.1), %d s each (%s)"):format(
  args.writers, args.seconds, _VERSION .. (jit and " / LuaJIT" or "")))
print(("%-20s %10s %12s %10s %18s %6s"):format("case", "creates/s", "procedures/s",
  "failures", "conflicts/1000", "exact"))
for _, k in ipairs({ "logical", "physical" }) do
  local r = results[k]
  local calls = r.creates + r.procs
  print(("%-20s %10.0f %12.0f %10d %18.1f %6s"):format(
    k == "logical" and "one logical part." or "one physical part.",
    r.creates / args.seconds, r.procs / args.seconds, r.failed,
    calls > 0 and 1000 * r.conflicts / calls or 0, tostring(r.exact)))
end
if args.json then
  local f = assert(io.open(args.json, "w"))
  for _, k in ipairs({ "logical", "physical" }) do
    local r = results[k]
    f:write(("%s %d %d %d %d %s\n"):format(k, r.creates, r.procs, r.failed,
      r.conflicts, tostring(r.exact)))
  end
  f:close()
end
