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
physical partitions, 10 matches).  Prints the operations done.
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
elseif op ~= "none" then
  error("unknown operation " .. op)
end
print(op, op == "none" and 0 or n)
db:close()
os.execute("rm -rf '" .. dir .. "'")
