--[[
Full-text search on a Redis Cluster against the same on a local database,
in one run: a two-term AND (FullTextContainsAll, TOP 10) and an ORDER BY
RANK FullTextScore with TOP 10, fanned out over 8 buckets, through a
full-text index and by scan, on the cluster and locally.  Prints each
one's median and 99th-percentile latency (ms), its charge and the records
it read, and checks that all four give the same rows.

    LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
      lua5.4 examples/bench/search_cluster.lua [--docs 3000] [--runs 200]
        [--url redis://127.0.0.1:7000/bench]

Without --url it starts a cluster of its own (examples/bench/own_cluster.lua)
and stops it at the end.  Numbers from a shared machine are noisy: compare
within one run.
]]

local regolith = require "regolith"
local socket = require "socket"

local args = { docs = 3000, runs = 200 }
do
  local i = 1
  while arg[i] do
    local k = arg[i]:match("^%-%-(.*)")
    if not k or not arg[i + 1] then
      error("usage: search_cluster.lua [--docs N] [--runs N] [--url URL]")
    end
    args[k] = tonumber(arg[i + 1]) or arg[i + 1]
    i = i + 2
  end
end

local own, dir = nil, nil
local url = args.url
if not url then
  own = dofile("examples/bench/own_cluster.lua")
  dir = os.tmpname()
  os.remove(dir)
  url = "redis://127.0.0.1:" .. own.start(dir) .. "/ftbench"
end
local path = os.tmpname()
os.remove(path)

-- a seeded corpus: 6 to 30 words a text, drawn from 400 words with a
-- skewed frequency (word k about 1/k as often)
local seed = 12345
local function rnd(n)
  seed = (seed * 16807) % 2147483647
  return seed % n + 1
end
local function word()
  return "w" .. math.min(rnd(rnd(rnd(400))), 400)
end
local docs = {}
for i = 1, args.docs do
  local t = {}
  for j = 1, rnd(25) + 5 do t[j] = word() end
  docs[i] = { id = ("d%05d"):format(i), pk = "p" .. rnd(64), text = table.concat(t, " ") }
end

local function spec(indexed)
  return { partition_key = "/pk", physical_partitions = 8,
    full_text = { paths = { { path = "/text" } } },
    indexing = indexed and { full_text = { "/text" } } or nil }
end

local sides = {}
for _, where in ipairs({ { "cluster", url }, { "local", path } }) do
  local db = assert(regolith.open(where[2], { sync = "none" }))
  local side = { name = where[1], db = db }
  for _, kind in ipairs({ "index", "scan" }) do
    pcall(db.delete_container, db, kind)
    local c = assert(db:create_container(kind, spec(kind == "index")))
    local t0 = socket.gettime()
    for i = 1, #docs, 500 do
      local b = {}
      for j = i, math.min(i + 499, #docs) do b[#b + 1] = docs[j] end
      assert(c:bulk_load(b))
    end
    side[kind] = c
    side["load_" .. kind] = socket.gettime() - t0
  end
  sides[#sides + 1] = side
end

local QUERIES = {
  { "AND top 10", "SELECT TOP 10 VALUE c.id FROM c WHERE FullTextContainsAll(c.text, 'w3', 'w9')" },
  { "RANK top 10", "SELECT TOP 10 c.id, FullTextScore(c.text, 'w5', 'w17') AS s FROM c ORDER BY RANK FullTextScore(c.text, 'w5', 'w17')" },
}

local function stats(t)
  table.sort(t)
  local function at(p) return t[math.max(1, math.ceil(#t * p))] end
  return at(0.5), at(0.99)
end

local up = io.popen("uptime"):read("*a"):gsub("%s+$", "")
print(("%d docs, 8 buckets, %d runs an index query (a quarter of that by scan); %s"):format(
  args.docs, args.runs, up))
for _, s in ipairs(sides) do
  print(("load (bulk, 500 a call) on %s: %.2f s with the index, %.2f s without"):format(
    s.name, s.load_index, s.load_scan))
end
print(("%-12s %-8s %-6s %10s %10s %9s %9s"):format("query", "backend", "plan", "p50 ms", "p99 ms", "RU", "ft_read"))
for _, q in ipairs(QUERIES) do
  local ref
  for _, s in ipairs(sides) do
    for _, kind in ipairs({ "index", "scan" }) do
      local c = s[kind]
      local rows, info = assert(c:query(q[2]))
      local key = regolith.json.encode(rows)
      ref = ref or key
      assert(key == ref, q[1] .. ": " .. s.name .. " " .. kind .. " gives other rows")
      local t = {}
      local runs = kind == "index" and args.runs or math.max(10, args.runs // 4)
      for i = 1, runs do
        local t0 = socket.gettime()
        assert(c:query(q[2]))
        t[i] = (socket.gettime() - t0) * 1000
      end
      local p50, p99 = stats(t)
      print(("%-12s %-8s %-6s %10.3f %10.3f %9.2f %9s"):format(q[1], s.name, kind, p50, p99,
        info.charge, tostring(info.full_text_read or "-")))
    end
  end
end
print("uptime after: " .. io.popen("uptime"):read("*a"):gsub("%s+$", ""))

for _, s in ipairs(sides) do
  if s.name == "cluster" then
    assert(s.db:delete_container("index"))
    assert(s.db:delete_container("scan"))
  end
  s.db:close()
end
os.execute("rm -rf '" .. path .. "'")
if own then own.stop(dir) end
