--[[
Item benchmarks: point read, create, upsert and patch of 1 KB documents
through the Lua API, with sync "none" and "full", beside the rawest
baseline (examples/bench/raw_lmdb.c: mdb_get/mdb_put plus cJSON
parse/print of the same bytes), and point reads of a small item.

Beside them, what a Lua user would otherwise write: SQLite through
lua-sql-sqlite3, one table (pk, id, doc) keyed by (pk, id), the document
as JSON text turned to and from Lua tables by the same JSON bridge, in WAL
mode with synchronous OFF (for "none") or FULL (for "full").  SQLite keeps
no index on the document's properties and no change feed: it does less
work per write than regolith, which indexes every property.

Run from the repository root (make bench does):
  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
    lua5.4 examples/bench/items.lua [--raw build/bench/raw_lmdb] [--n 20000]

Every figure is the median, over batches of 100 operations, of the time
per operation, in microseconds.
]]

local regolith = require "regolith"
local system = require "system"

local args = { raw = "build/bench/raw_lmdb", n = 20000, json = nil }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if not k or arg[i + 1] == nil then error("usage: items.lua [--raw PATH] [--n N] [--json FILE]") end
    args[k] = arg[i + 1]
    i = i + 2
  end
  args.n = tonumber(args.n)
end

local BATCH = 100
local now = system.monotime

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  return p
end

local function median(t)
  table.sort(t)
  return t[math.floor(#t / 2) + 1]
end

-- Times `fn(i)` for i = 1..n in batches; returns the median microseconds.
local function timed(n, fn)
  local per = {}
  local i = 0
  while i < n do
    local t0 = now()
    for _ = 1, BATCH do
      i = i + 1
      fn(i)
    end
    per[#per + 1] = (now() - t0) * 1e6 / BATCH
  end
  return median(per)
end

local content = ("The quick brown fox jumps over the lazy dog. "):rep(15)
local function doc1k(i)
  return {
    id = "item-" .. i, pk = "p" .. (i % 1000), type = "post",
    title = "A title for item number " .. i, content = content,
    tags = { "lua", "lmdb", "cosmos" }, views = i * 3, score = i / 7,
    creationDate = "2026-11-21T10:00:00Z",
  }
end

local function small(i)
  return { id = "s" .. i, pk = "p" .. (i % 1000), n = i }
end

local function run_raw(sync, n, text)
  local docfile = os.tmpname()
  local f = assert(io.open(docfile, "w"))
  f:write(text)
  f:close()
  local dir = tmpdir()
  os.execute("mkdir -p " .. dir)
  local p = assert(io.popen(("%s %s %s %d %s"):format(args.raw, dir, docfile,
    n, sync)))
  local out = p:read("a")
  p:close()
  os.execute("rm -rf " .. dir .. " " .. docfile)
  local r = regolith.json.decode(out)
  if not r then error("raw baseline failed: " .. tostring(out)) end
  return r
end

local results = {}

local function bench_sync(sync, n)
  local db = assert(regolith.open(tmpdir(), { sync = sync }))
  local c = assert(db:create_container("items", { partition_key = "/pk" }))
  local r = {}
  r.create = timed(n, function(i) assert(c:create(doc1k(i))) end)
  math.randomseed(42)
  r.read = timed(n, function()
    local i = math.random(n)
    assert(c:read("item-" .. i, "p" .. (i % 1000)))
  end)
  r.upsert = timed(n, function(i)
    local d = doc1k(i)
    d.views = d.views + 1
    assert(c:upsert(d))
  end)
  local ops = { { op = "incr", path = "/views", value = 1 } }
  r.patch = timed(n, function(i)
    assert(c:patch("item-" .. i, "p" .. (i % 1000), ops))
  end)
  local narrow = assert(db:create_container("narrow", { partition_key = "/pk",
    indexing = { excluded = { "/*" }, included = { "/type/?" } } }))
  r.create_narrow = timed(n, function(i) assert(narrow:create(doc1k(i))) end)
  local s = assert(db:create_container("small", { partition_key = "/pk" }))
  for i = 1, n do assert(s:create(small(i))) end
  r.read_small = timed(n, function()
    local i = math.random(n)
    assert(s:read("s" .. i, "p" .. (i % 1000)))
  end)
  local stored = assert(c:read("item-1", "p1"))
  r.bytes = #regolith.json.encode(stored)
  local sstored = assert(s:read("s1", "p1"))
  r.small_bytes = #regolith.json.encode(sstored)
  r.raw = run_raw(sync, n, regolith.json.encode(stored))
  db:close()
  return r
end

-- The same operations on SQLite (see the top of the file).
local function bench_sqlite(sync, n)
  local luasql = require "luasql.sqlite3"
  local env = luasql.sqlite3()
  local path = tmpdir() .. ".sqlite"
  local con = assert(env:connect(path))
  local encode, decode = regolith.json.encode, regolith.json.decode
  local function q(s) return "'" .. s:gsub("'", "''") .. "'" end
  local function one(sql)
    local cur = assert(con:execute(sql))
    local row = cur:fetch()
    cur:close()
    return row
  end
  one("PRAGMA journal_mode = WAL")
  assert(con:execute("PRAGMA synchronous = " .. (sync == "full" and "FULL" or "OFF")))
  assert(con:execute("CREATE TABLE items (pk TEXT, id TEXT, doc TEXT, " ..
                     "PRIMARY KEY (pk, id)) WITHOUT ROWID"))
  local function put(verb, d)
    assert(con:execute(("%s INTO items VALUES (%s, %s, %s)")
      :format(verb, q(d.pk), q(d.id), q(encode(d)))) == 1)
  end
  local function get(id, pk)
    return assert(decode(assert(one(("SELECT doc FROM items WHERE pk = %s AND id = %s")
      :format(q(pk), q(id))))))
  end
  local r = {}
  r.create = timed(n, function(i) put("INSERT", doc1k(i)) end)
  math.randomseed(42)
  r.read = timed(n, function()
    local i = math.random(n)
    get("item-" .. i, "p" .. (i % 1000))
  end)
  r.upsert = timed(n, function(i)
    local d = doc1k(i)
    d.views = d.views + 1
    put("INSERT OR REPLACE", d)
  end)
  r.patch = timed(n, function(i)              -- read, change, write: atomic
    assert(con:execute("BEGIN IMMEDIATE"))
    local d = get("item-" .. i, "p" .. (i % 1000))
    d.views = d.views + 1
    put("INSERT OR REPLACE", d)
    assert(con:execute("COMMIT"))
  end)
  for i = 1, n do put("INSERT", small(i)) end
  r.read_small = timed(n, function()
    local i = math.random(n)
    get("s" .. i, "p" .. (i % 1000))
  end)
  con:close()
  env:close()
  os.remove(path); os.remove(path .. "-wal"); os.remove(path .. "-shm")
  return r
end

local function machine()
  local f = io.open("/proc/cpuinfo")
  local model = f and f:read("a"):match("model name%s*:%s*([^\n]+)") or "?"
  if f then f:close() end
  local p = io.popen("nproc")
  local cores = p:read("l")
  p:close()
  return ("%s, %s cores, %s"):format(model, cores, _VERSION)
end

print(("regolith item benchmarks on %s"):format(machine()))
print(("medians of batches of %d operations, microseconds per operation"):format(BATCH))
print()
print(("%-22s %-6s %10s %8s %7s %8s %7s"):format("operation", "sync",
  "regolith", "raw", "ratio", "SQLite", "ratio"))
local function cell(ours, theirs)
  if not theirs then return "-", "-" end
  return ("%.2f"):format(theirs), ("%.2f"):format(ours / theirs)
end
for _, sync in ipairs({ "none", "full" }) do
  local n = sync == "full" and math.min(args.n, 2000) or args.n
  local r = bench_sync(sync, n)
  r.sqlite = bench_sqlite(sync, n)
  results[sync] = r
  local sq = r.sqlite
  local rows = {
    { "create 1 KB", r.create, r.raw.write_us, sq.create },
    { "create, 1 index path", r.create_narrow, r.raw.write_us, sq.create },
    { "upsert 1 KB", r.upsert, r.raw.write_us, sq.upsert },
    { "patch 1 KB", r.patch, r.raw.write_us, sq.patch },
    { "point read 1 KB", r.read, r.raw.read_us, sq.read },
    { ("point read %d B"):format(r.small_bytes), r.read_small, nil, sq.read_small },
  }
  for _, row in ipairs(rows) do
    local raw, rawr = cell(row[2], row[3])
    local sql, sqlr = cell(row[2], row[4])
    print(("%-22s %-6s %10.2f %8s %7s %8s %7s"):format(row[1], sync, row[2],
      raw, rawr, sql, sqlr))
  end
end
print()
print(("stored item size: %d bytes (1 KB document with system properties)"):format(results.none.bytes))

if args.json then
  local f = assert(io.open(args.json, "w"))
  f:write(regolith.json.encode(results))
  f:close()
end
