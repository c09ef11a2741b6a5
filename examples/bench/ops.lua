--[[
A fixed number of one operation, for instruction counts under callgrind
(time is too noisy on a shared machine to compare builds by):

  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
    valgrind --tool=callgrind --callgrind-out-file=out \
    lua5.4 examples/bench/ops.lua read 2000
  (and the same with `none`: the setup alone, to subtract)

Operations: none, read (a point read of a 1 KB item), create (a 1 KB item,
sync none), query (a routed query returning 5 of 25 items by an
equality), range (a routed range of 6 of 25), fanout (an equality over 8
physical partitions, 10 matches), group (GROUP BY with COUNT over every
partition: 5,000 index entries counted), group1 (GROUP BY with COUNT in
one partition of 1,000 small items among 4, from a composite index (/pk,
/k); its setup differs: subtract `group1 0`), twopath (`tag = @t AND
score < @s` over 800 partitions of 25 small items, 100 rows of 200
candidates, as query.lua's two paths; subtract `twopath 0`).  Prints the
operations done.
]]

local regolith = require "regolith"

local op, n = arg[1] or "none", tonumber(arg[2] or 1000)
local dir = os.tmpname()
os.remove(dir)
local db = assert(regolith.open(dir, { sync = "none" }))
local c = assert(db:create_container("c", { partition_key = "/pk",
  physical_partitions = 8 }))
local body = ("x"):rep(900)
for p = 0, 199 do
  local ops = {}
  for i = 0, 24 do
    ops[#ops + 1] = { op = "create", doc = { id = "i" .. i, pk = "p" .. p,
      k = i % 5, n = p * 25 + i, v = (p * 25 + i) % 500, body = body } }
  end
  assert(c:batch("p" .. p, ops))
end

if op == "read" then
  for i = 1, n do assert(c:read("i" .. (i % 25), "p" .. (i % 200))) end
elseif op == "create" then
  for i = 1, n do assert(c:create({ id = "new" .. i, pk = "p" .. (i % 200), body = body })) end
elseif op == "query" then
  for i = 1, n do
    assert(c:query("SELECT * FROM c WHERE c.pk = @pk AND c.k = 3", { pk = "p" .. (i % 200) }))
  end
elseif op == "range" then
  for i = 1, n do
    local p = i % 200
    assert(c:query("SELECT * FROM c WHERE c.pk = @pk AND c.n >= @lo AND c.n < @hi",
      { pk = "p" .. p, lo = p * 25 + 10, hi = p * 25 + 16 }))
  end
elseif op == "fanout" then
  for i = 1, n do assert(c:query("SELECT * FROM c WHERE c.v = @v", { v = i % 500 })) end
elseif op == "group1" then
  local e = assert(db:create_container("e", { partition_key = "/pk",
    indexing = { composite = { { { path = "/pk" }, { path = "/k" } } } } }))
  for p = 0, 3 do
    for b = 0, 9 do
      local ops = {}
      for i = b * 100, b * 100 + 99 do
        ops[#ops + 1] = { op = "create", doc = { id = "e" .. i, pk = "e" .. p, k = i % 10 } }
      end
      assert(e:batch("e" .. p, ops))
    end
  end
  for i = 1, n do
    assert(e:query("SELECT c.k, COUNT(1) AS n FROM c WHERE c.pk = @pk GROUP BY c.k",
                   { pk = "e" .. (i % 4) }))
  end
elseif op == "twopath" then
  local t = assert(db:create_container("t", { partition_key = "/pk",
    physical_partitions = 8,
    indexing = { composite = { { { path = "/tag" }, { path = "/score" } } } } }))
  for p = 0, 799 do
    local ops = {}
    for i = p, 19999, 800 do
      ops[#ops + 1] = { op = "create", doc = { id = ("item%06d"):format(i),
        pk = "p" .. p, cat = i % 200, score = (i * 7919) % 1000003,
        name = "name" .. i, n = i, tag = "t" .. (i % 100) } }
    end
    assert(t:batch("p" .. p, ops))
  end
  for _ = 1, n do
    assert(t:query("SELECT * FROM c WHERE c.tag = @t AND c.score < @s",
                   { t = "t7", s = 500000 }))
  end
elseif op == "group" then
  for _ = 1, n do assert(c:query("SELECT c.k, COUNT(1) AS n FROM c GROUP BY c.k")) end
elseif op ~= "none" then
  error("unknown operation " .. op)
end
print(op, op == "none" and 0 or n)
db:close()
os.execute("rm -rf '" .. dir .. "'")
