-- Query benchmarks: regolith against SQLite (lua-sql-sqlite3) on the same
-- data, in the same run.
--
--   lua5.4 examples/bench/query.lua [--items N] [--runs R] [--only PATTERN]
--
-- Two data sets of N items each (100,000 by default):
--   items   4,000 logical partitions of 25 small items (8 physical
--           partitions); composite indexes (/tag, /score) and (/tag,
--           /score DESC)
--   events  20 logical partitions of 5,000 (8 physical partitions);
--           composite indexes (/pk, /t) and (/pk, /kind)
-- and these requests, each returning its rows as Lua tables:
--   single     one logical partition of 25 items
--   fan-out    an equality on an indexed path over every partition
--   range      a range inside one partition of 5,000 items (100 results)
--   two paths  an equality and a range on two paths, across partitions
--   TOP asc    TOP 100 ... ORDER BY an indexed path, ascending
--   TOP desc   the same, descending
--   TOP 20 composite  tag = @t ORDER BY tag, score DESC: a composite index
--           read in order across the partitions (loads 20)
--   small range  a range of 6 rows in a logical partition of 25 items
--   GROUP 1    GROUP BY with COUNT inside one partition of 5,000 items
--   GROUP all  GROUP BY with COUNT across all 100,000 events
-- SQLite gets a relational table per data set with the matching indexes
-- (primary key (pk, id); cat, score, (tag, score); (pk, t), (pk, kind),
-- kind) and the same queries in SQL.  Medians and 99th percentiles of R
-- runs, in microseconds of CPU time (os.clock), both measured in this one
-- process.

local regolith = require "regolith"

local argparse = require "argparse"

local parser = argparse("query.lua", "Queries beside SQLite, same data, same run")
parser:option("--items", "Items in each data set.", "100000", tonumber)
parser:option("--runs", "Runs of each request (medians and p99 over them).", "200", tonumber)
parser:option("--only", "Only the requests whose name holds this Lua pattern.")
local args = parser:parse()
local N, RUNS, ONLY = args.items, args.runs, args.only
local PER_PARTITION = 25
local NPK = N // PER_PARTITION
local NCAT = N // 100
local NTAG = 100
local EPARTS = 20
local PER_EPART = N // EPARTS
local NKIND = 10

local clock = os.clock
local function median(t)
  table.sort(t)
  local n = #t
  if n % 2 == 1 then return t[(n + 1) // 2] end
  return (t[n // 2] + t[n // 2 + 1]) / 2
end
local function p99(t)                -- t sorted (by median)
  return t[math.max(1, math.ceil(#t * 0.99))]
end

local function item(i)
  return { id = ("item%06d"):format(i), pk = "p" .. (i % NPK), cat = i % NCAT,
           score = (i * 7919) % 1000003, name = "name" .. i, n = i,
           tag = "t" .. (i % NTAG) }
end

local function event(p, j)
  return { id = ("ev%06d"):format(j), pk = "e" .. p, t = (j * 7) % (PER_EPART * 7),
           kind = "k" .. (j % NKIND), val = j % 1000 }
end

-- regolith ------------------------------------------------------------------
local dir = os.tmpname()
os.remove(dir)
local db = assert(regolith.open(dir, { sync = "none", map_size = 256 * 2^20 }))
local c = assert(db:create_container("items", { partition_key = "/pk",
  physical_partitions = 8,
  indexing = { composite = { { { path = "/tag" }, { path = "/score" } },
                             { { path = "/tag" }, { path = "/score", order = "descending" } } } } }))
local ev = assert(db:create_container("events", { partition_key = "/pk",
  physical_partitions = 8,
  indexing = { composite = { { { path = "/pk" }, { path = "/t" } },
                             { { path = "/pk" }, { path = "/kind" } } } } }))
io.stderr:write(("loading %d items and %d events into regolith... "):format(N, N))
local t0 = clock()
for p = 0, NPK - 1 do
  local ops = {}
  for i = p, N - 1, NPK do ops[#ops + 1] = { op = "create", doc = item(i) } end
  assert(c:batch("p" .. p, ops))
end
for p = 0, EPARTS - 1 do
  local ops = {}
  for j = 0, PER_EPART - 1 do
    ops[#ops + 1] = { op = "create", doc = event(p, j) }
    if #ops == 100 then assert(ev:batch("e" .. p, ops)) ops = {} end
  end
  if #ops > 0 then assert(ev:batch("e" .. p, ops)) end
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
  score INTEGER, name TEXT, n INTEGER, tag TEXT, PRIMARY KEY (pk, id))]]))
assert(con:execute("CREATE INDEX items_cat ON items (cat)"))
assert(con:execute("CREATE INDEX items_score ON items (score)"))
assert(con:execute("CREATE INDEX items_tag_score ON items (tag, score)"))
assert(con:execute([[CREATE TABLE events (id TEXT, pk TEXT, t INTEGER,
  kind TEXT, val INTEGER, PRIMARY KEY (pk, id))]]))
assert(con:execute("CREATE INDEX events_pk_t ON events (pk, t)"))
assert(con:execute("CREATE INDEX events_pk_kind ON events (pk, kind)"))
assert(con:execute("CREATE INDEX events_kind ON events (kind)"))
io.stderr:write(("loading %d rows and %d events into SQLite... "):format(N, N))
t0 = clock()
con:setautocommit(false)
for i = 0, N - 1 do
  local d = item(i)
  assert(con:execute(("INSERT INTO items VALUES ('%s', '%s', %d, %d, '%s', %d, '%s')")
    :format(d.id, d.pk, d.cat, d.score, d.name, d.n, d.tag)))
end
for p = 0, EPARTS - 1 do
  for j = 0, PER_EPART - 1 do
    local e = event(p, j)
    assert(con:execute(("INSERT INTO events VALUES ('%s', '%s', %d, '%s', %d)")
      :format(e.id, e.pk, e.t, e.kind, e.val)))
  end
end
con:commit()
con:setautocommit(true)
assert(con:execute("ANALYZE"))
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
  if ONLY and not name:find(ONLY) then return end
  math.randomseed(42)
  for r = 1, RUNS do
    local k = math.random(0, NPK - 1)
    local s = clock()
    local rows
    rows, info = ours(k)
    a[r] = (clock() - s) * 1e6
    assert(rows and #rows == expect, name .. ": regolith returned " .. tostring(rows and #rows or info))
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
                            ours99 = p99(a), theirs99 = p99(b),
                            charge = info.charge, loaded = info.loaded,
                            partitions = info.partitions }
end

local span = 100 * 7                 -- t values in a range of 100 events

bench("single partition, 25 items", PER_PARTITION,
  function(k) return c:query("SELECT * FROM c WHERE c.pk = @pk", { pk = "p" .. k }) end,
  function(k) return sqlite_rows("SELECT * FROM items WHERE pk = 'p" .. k .. "'") end)

bench("fan-out, indexed equality, 100 of " .. N, 100,
  function(k) return c:query("SELECT * FROM c WHERE c.cat = @cat", { cat = k % NCAT }) end,
  function(k) return sqlite_rows("SELECT * FROM items WHERE cat = " .. (k % NCAT)) end)

bench("one partition of 5000, range, 100 rows", 100,
  function(k)
    local lo = (k % 40) * span
    return ev:query("SELECT * FROM c WHERE c.pk = @pk AND c.t >= @lo AND c.t < @hi",
                    { pk = "e" .. (k % EPARTS), lo = lo, hi = lo + span })
  end,
  function(k)
    local lo = (k % 40) * span
    return sqlite_rows(("SELECT * FROM events WHERE pk = 'e%d' AND t >= %d AND t < %d")
      :format(k % EPARTS, lo, lo + span))
  end)

local function two_paths_count(k)    -- how many items of tag k have score < 100000
  local n = 0
  for i = k % NTAG, N - 1, NTAG do
    if (i * 7919) % 1000003 < 100000 then n = n + 1 end
  end
  return n
end
local two_expect = two_paths_count(7)
bench("fan-out, two paths (= and <), " .. two_expect .. " rows", two_expect,
  function() return c:query("SELECT * FROM c WHERE c.tag = @t AND c.score < @s",
                            { t = "t7", s = 100000 }) end,
  function() return sqlite_rows("SELECT * FROM items WHERE tag = 't7' AND score < 100000") end)

bench("fan-out, TOP 100 ORDER BY score ASC", 100,
  function() return c:query("SELECT TOP 100 * FROM c ORDER BY c.score") end,
  function() return sqlite_rows("SELECT * FROM items ORDER BY score LIMIT 100") end)

bench("fan-out, TOP 100 ORDER BY score DESC", 100,
  function() return c:query("SELECT TOP 100 * FROM c ORDER BY c.score DESC") end,
  function() return sqlite_rows("SELECT * FROM items ORDER BY score DESC LIMIT 100") end)

bench("fan-out, TOP 20 ORDER BY tag, score DESC (composite)", 20,
  function() return c:query("SELECT TOP 20 * FROM c WHERE c.tag = @t ORDER BY c.tag, c.score DESC",
                            { t = "t7" }) end,
  function() return sqlite_rows("SELECT * FROM items WHERE tag = 't7' ORDER BY tag, score DESC LIMIT 20") end)

bench("one partition of 25, range, 6 rows", 6,
  function(k) return c:query("SELECT * FROM c WHERE c.pk = @pk AND c.n >= @lo AND c.n < @hi",
                             { pk = "p" .. k, lo = k + 10 * NPK, hi = k + 16 * NPK }) end,
  function(k) return sqlite_rows(("SELECT * FROM items WHERE pk = 'p%d' AND n >= %d AND n < %d")
                                 :format(k, k + 10 * NPK, k + 16 * NPK)) end)

bench("GROUP BY in one partition of 5000", NKIND,
  function(k) return ev:query("SELECT c.kind, COUNT(1) AS n FROM c WHERE c.pk = @pk GROUP BY c.kind",
                              { pk = "e" .. (k % EPARTS) }) end,
  function(k) return sqlite_rows(("SELECT kind, COUNT(*) AS n FROM events WHERE pk = 'e%d' GROUP BY kind")
                                 :format(k % EPARTS)) end)

bench("GROUP BY across " .. N .. " events", NKIND,
  function() return ev:query("SELECT c.kind, COUNT(1) AS n FROM c GROUP BY c.kind") end,
  function() return sqlite_rows("SELECT kind, COUNT(*) AS n FROM events GROUP BY kind") end)

print(("%-52s %12s %12s %8s %10s %10s %8s %7s %6s"):format("request (median of " .. RUNS .. ")",
  "regolith us", "SQLite us", "ratio", "p99 ours", "p99 SQLite", "RU", "loaded", "parts"))
for _, r in ipairs(results) do
  print(("%-52s %12.1f %12.1f %7.2fx %10.1f %10.1f %8.2f %7d %6d"):format(r.name, r.ours,
    r.theirs, r.theirs / r.ours, r.ours99, r.theirs99, r.charge, r.loaded, r.partitions))
end
print("(ratio > 1: regolith is faster; os.clock CPU time)")

con:close()
env:close()
db:close()
os.execute("rm -rf '" .. dir .. "' '" .. sqlpath .. "'")
