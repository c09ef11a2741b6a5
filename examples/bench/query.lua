-- Query benchmarks: regolith against SQLite (lua-sql-sqlite3) on the same
-- data, in the same run.
--
--   lua5.4 examples/bench/query.lua [--items N] [--runs R]
--
-- Three requests, each returning its rows as Lua tables:
--   single   one logical partition of 25 small items
--   fan-out  an equality on an indexed path over every partition
--            (8 physical partitions, 100 matches among N items)
--   top      SELECT TOP 100 ... ORDER BY an indexed path, descending
-- SQLite gets a relational table with the matching indexes (pk, cat,
-- score) and the same queries in SQL.  Medians of R runs, in microseconds.

local regolith = require "regolith"

local N, RUNS = 100000, 200
do
  local i = 1
  while arg[i] do
    if arg[i] == "--items" then N = tonumber(arg[i + 1]); i = i + 2
    elseif arg[i] == "--runs" then RUNS = tonumber(arg[i + 1]); i = i + 2
    else error("unknown argument " .. arg[i]) end
  end
end
local PER_PARTITION = 25
local NPK = N // PER_PARTITION
local NCAT = N // 100

local clock = os.clock
local function median(t)
  table.sort(t)
  local n = #t
  if n % 2 == 1 then return t[(n + 1) // 2] end
  return (t[n // 2] + t[n // 2 + 1]) / 2
end

local function item(i)
  return { id = ("item%06d"):format(i), pk = "p" .. (i % NPK), cat = i % NCAT,
           score = (i * 7919) % 1000003, name = "name" .. i, n = i }
end

-- regolith ------------------------------------------------------------------
local dir = os.tmpname()
os.remove(dir)
local db = assert(regolith.open(dir, { sync = "none", map_size = 256 * 2^20 }))
local c = assert(db:create_container("items", { partition_key = "/pk",
                                                physical_partitions = 8 }))
io.stderr:write(("loading %d items into regolith... "):format(N))
local t0 = clock()
for p = 0, NPK - 1 do
  local ops = {}
  for i = p, N - 1, NPK do ops[#ops + 1] = { op = "create", doc = item(i) } end
  assert(c:batch("p" .. p, ops))
end
io.stderr:write(("%.1fs\n"):format(clock() - t0))

-- SQLite --------------------------------------------------------------------
local luasql = require "luasql.sqlite3"
local env = luasql.sqlite3()
local sqlpath = dir .. ".sqlite"
local con = assert(env:connect(sqlpath))
assert(con:execute("PRAGMA journal_mode = OFF"))
assert(con:execute("PRAGMA synchronous = OFF"))
assert(con:execute([[CREATE TABLE items (id TEXT, pk TEXT, cat INTEGER,
  score INTEGER, name TEXT, n INTEGER, PRIMARY KEY (pk, id))]]))
assert(con:execute("CREATE INDEX items_cat ON items (cat)"))
assert(con:execute("CREATE INDEX items_score ON items (score)"))
io.stderr:write(("loading %d rows into SQLite... "):format(N))
t0 = clock()
con:setautocommit(false)
for i = 0, N - 1 do
  local d = item(i)
  assert(con:execute(("INSERT INTO items VALUES ('%s', '%s', %d, %d, '%s', %d)")
    :format(d.id, d.pk, d.cat, d.score, d.name, d.n)))
end
con:commit()
con:setautocommit(true)
io.stderr:write(("%.1fs\n"):format(clock() - t0))

local function sqlite_rows(sql)
  local cur = assert(con:execute(sql))
  local rows = {}
  local row = cur:fetch({}, "a")
  while row do
    rows[#rows + 1] = row
    row = cur:fetch({}, "a")
  end
  cur:close()
  return rows
end

-- the runs ------------------------------------------------------------------
local results = {}

local function bench(name, expect, ours, theirs)
  local a, b, info = {}, {}, nil
  math.randomseed(42)
  for r = 1, RUNS do
    local k = math.random(0, NPK - 1)
    local s = clock()
    local rows
    rows, info = ours(k)
    a[r] = (clock() - s) * 1e6
    assert(rows and #rows == expect, name .. ": regolith returned " .. tostring(rows and #rows))
  end
  math.randomseed(42)
  for r = 1, RUNS do
    local k = math.random(0, NPK - 1)
    local s = clock()
    local rows = theirs(k)
    b[r] = (clock() - s) * 1e6
    assert(#rows == expect, name .. ": SQLite returned " .. #rows)
  end
  results[#results + 1] = { name = name, ours = median(a), theirs = median(b),
                            charge = info.charge, loaded = info.loaded,
                            partitions = info.partitions }
end

bench("single partition, 25 items", PER_PARTITION,
  function(k) return c:query("SELECT * FROM c WHERE c.pk = @pk", { pk = "p" .. k }) end,
  function(k) return sqlite_rows("SELECT * FROM items WHERE pk = 'p" .. k .. "'") end)

bench("fan-out, indexed equality, 100 of " .. N, 100,
  function(k) return c:query("SELECT * FROM c WHERE c.cat = @cat", { cat = k % NCAT }) end,
  function(k) return sqlite_rows("SELECT * FROM items WHERE cat = " .. (k % NCAT)) end)

bench("fan-out, TOP 100 ORDER BY score DESC", 100,
  function() return c:query("SELECT TOP 100 * FROM c ORDER BY c.score DESC") end,
  function() return sqlite_rows("SELECT * FROM items ORDER BY score DESC LIMIT 100") end)

print(("%-40s %12s %12s %8s %8s %7s %6s"):format("request (median of " .. RUNS .. ")",
  "regolith us", "SQLite us", "ratio", "RU", "loaded", "parts"))
for _, r in ipairs(results) do
  print(("%-40s %12.1f %12.1f %7.2fx %8.2f %7d %6d"):format(r.name, r.ours, r.theirs,
    r.theirs / r.ours, r.charge, r.loaded, r.partitions))
end
print("(ratio > 1: regolith is faster; os.clock CPU time)")

con:close()
env:close()
db:close()
os.execute("rm -rf '" .. dir .. "' '" .. sqlpath .. "'")
