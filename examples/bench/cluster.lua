--[[
The Redis Cluster client and Functions on a local cluster: median latencies
of a point read, an FCALL write (with and without WAIT 1), a two-document
commit and pipelined fan-outs, through lua/regolith/cluster/redis.lua, beside
redis-benchmark's plain commands (one connection, no pipelining) on the same
cluster.

    LUA_PATH='lua/?.lua;lua/?/init.lua;;' lua5.4 examples/bench/cluster.lua
      [--url redis://127.0.0.1:7000/bench] [--n 5000]

Without --url (or REGOLITH_URL) it starts a cluster in a temporary
directory (tools/redis-cluster.sh) and stops it at the end.  Index terms
and documents are made up here: the library treats them as bytes.
]]

local redis = require "regolith.cluster.redis"
local layout = require "regolith.cluster.layout"
local socket = require "socket"

local args = { n = 5000 }
do
  local i = 1
  while arg[i] do
    local k = arg[i]:match("^%-%-(.*)")
    if not k or not arg[i + 1] then error("usage: cluster.lua [--url URL] [--n N]") end
    args[k] = arg[i + 1]
    i = i + 2
  end
end
local N = tonumber(args.n)
local url = args.url or os.getenv("REGOLITH_URL")

local function sh(cmd)
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("*a")
  p:close()
  return out
end

local dir
if not url then
  dir = os.tmpname()
  os.remove(dir)
  local base = sh("RG_CLUSTER_OWNER=$PPID tools/redis-cluster.sh start " .. dir):match("(%d+)%s*$")
  assert(base, "the cluster did not start")
  url = "redis://127.0.0.1:" .. base .. "/bench"
end
local seeds, db = url:match("^redis://([^/]+)/?(.*)$")
db = (db ~= "" and db or "bench") .. os.time()

local c = assert(redis.connect(seeds))
assert(layout.ensure_library(c))

local function median(xs)
  table.sort(xs)
  return xs[math.floor((#xs + 1) / 2)]
end

local function p99(xs)
  table.sort(xs)
  return xs[math.max(1, math.floor(#xs * 0.99))]
end

-- Times f(i) n times; returns the median and p99 in microseconds.
local function timed(n, f)
  local xs = {}
  for i = 1, n do
    local t0 = socket.gettime()
    f(i)
    xs[i] = (socket.gettime() - t0) * 1e6
  end
  return median(xs), p99(xs)
end

local rows = {}
local function row(name, med, p, note)
  rows[#rows + 1] = { name, med, p, note or "" }
end

local PATHS = { "1", "2", "3" }
local P = 64
local function bucket(i) return layout.bucket_keys(db, 1, i % P, P) end
local function pk_of(i) return "\9p" .. (i % 997) .. "\0\1" end
local function op(kind, id, i)
  return { kind = kind, id = id,
    text = ('{"id":"%s","pk":"p%d","n":%d,"tags":["a","b"],"body":"%s"}'):format(id,
      i % 997, i, ("x"):rep(200)),
    terms = { { 1, "\8" .. string.format("%08d", i) }, { 2, "\9t" .. (i % 10) .. "\0\1" },
      { 3, "\9p" .. (i % 997) .. "\0\1" } } }
end

-- writes: one rg_write per new item
local written = {}
local med, p = timed(N, function(i)
  local b, pk = bucket(i), pk_of(i)
  local keys, argv = layout.commit_args(b, pk, PATHS, { op("create", "w" .. i, i) })
  local r = assert(c:fcall("rg_write", keys, argv))
  assert(r[1] == "OK", r[4])
  written[i] = { b, pk, "w" .. i }
end)
row("write: FCALL rg_write (3 index terms)", med, p)

med, p = timed(N, function(i)
  local w = written[i]
  assert(c:call("HGET", layout.partition_key(w[1], w[2]), "d:" .. w[3]) ~= redis.null)
end)
row("point read: HGET", med, p)

med, p = timed(math.min(N, 2000), function(i)
  local w = written[i]
  local keys, argv = layout.read_args(w[1], w[2], { w[3] })
  assert(c:fcall_ro("rg_read", keys, argv))
end)
row("read with version: FCALL_RO rg_read", med, p)

med, p = timed(math.min(N, 2000), function(i)
  local b, pk = bucket(i), pk_of(i)
  local keys, argv = layout.commit_args(b, pk, PATHS, { op("create", "s" .. i, i) })
  local res = c:pipeline({ redis.fcall_cmd("FCALL", "rg_write", keys, argv),
    { "WAIT", 1, 1000 } })
  assert(res[1][1] == "OK" and res[2] == 1, "not replicated")
end)
row("write + WAIT 1 (sync full), one round trip", med, p)

med, p = timed(math.min(N, 2000), function(i)
  local b, pk = bucket(i), pk_of(i)
  local keys, argv = layout.commit_args(b, pk, PATHS,
    { op("upsert", "w" .. i, i + 1), op("create", "c" .. i, i) },
    { header = true, pv = "" })
  local r = assert(c:fcall("rg_commit", keys, argv))
  assert(r[1] == "OK" or r[1] == "FAILED", tostring(r[1]))
end)
row("commit of 2 documents: FCALL rg_commit", med, p)

for _, fan in ipairs({ 16, 64, 256 }) do
  local Pf = fan
  med, p = timed(200, function(i)
    local cmds = {}
    for r = 0, Pf - 1 do
      local b = layout.bucket_keys(db, 2, r, Pf)
      local keys, argv = layout.scan_args(b, { path = "1", limit = 10 })
      cmds[#cmds + 1] = redis.fcall_cmd("FCALL_RO", "rg_scan", keys, argv)
    end
    local res = c:pipeline(cmds)
    for j = 1, #res do assert(not redis.is_error(res[j]), res[j]) end
  end)
  row(("fan-out: %d x FCALL_RO rg_scan, pipelined"):format(fan), med, p)
end

-- plain commands through redis-benchmark (one connection, no pipeline)
local port = seeds:match(":(%d+)")
local function bench(cmdline)
  local out = sh(("redis-benchmark -p %s --cluster -c 1 -n %d --csv %s 2>/dev/null"):format(
    port, N, cmdline))
  local p50 = out:match('\n"[^"]*","[%d%.]+","[%d%.]+","[%d%.]+","([%d%.]+)"')
  return p50 and tonumber(p50) * 1000
end
local plain = {
  { "redis-benchmark GET (p50)", bench("-t get") },
  { "redis-benchmark SET (p50)", bench("-t set") },
  { "redis-benchmark HSET (p50)", bench("-t hset") },
}

print(("Redis Cluster, 3 primaries + 3 replicas on 127.0.0.1; %s under %s; n = %d"):format(
  "regolith.cluster.redis (" .. c.t.name .. ")", jit and jit.version or _VERSION, N))
print(("%-48s %10s %10s  %s"):format("operation", "median us", "p99 us", ""))
for _, r in ipairs(rows) do
  print(("%-48s %10.0f %10.0f  %s"):format(r[1], r[2], r[3], r[4]))
end
for _, r in ipairs(plain) do
  print(("%-48s %10s %10s"):format(r[1], r[2] and ("%.0f"):format(r[2]) or "n/a", ""))
end
local get = plain[1][2]
if get then
  print(("point read through the client / redis-benchmark GET: %.2f"):format(rows[2][2] / get))
end

c:close()
if dir then
  sh("tools/redis-cluster.sh stop " .. dir .. " && rm -rf " .. dir)
end
