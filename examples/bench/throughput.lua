--[[
What a throughput budget (docs/throughput.md) costs a request that it
admits: point reads of a small item (about 170 bytes) on a container
without a budget and on one with a budget it never exhausts, in the same
process, in alternating bursts, so that the load of a shared machine
falls on both alike.  A third container without a budget, measured the
same way, shows the noise: its ratio to the first should be 1.

Run from the repository root (make bench does):
  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
    lua5.4 examples/bench/throughput.lua [--rounds 300] [--burst 5000]

Prints the median time per read of each, and the median over the rounds
of each round's ratio to the container without a budget.
]]

local regolith = require "regolith"
local system = require "system"

local args = { rounds = 300, burst = 5000 }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if not (k and args[k] and tonumber(arg[i + 1])) then
      error("usage: throughput.lua [--rounds N] [--burst N]")
    end
    args[k] = tonumber(arg[i + 1])
    i = i + 2
  end
end

local now = system.monotime

local path = os.tmpname()
os.remove(path)
local db = assert(regolith.open(path, { sync = "none" }))
local DOC = { id = "item", pk = "p", title = "A small item of about 170 bytes",
  tags = { "a", "b", "c" }, n = 42, text = ("lorem ipsum "):rep(6) }

local cases = {}
for i, c in ipairs({
  { "no budget", nil },
  { "a budget", 1000000000 },         -- never exhausted: every read admitted
  { "no budget, again", nil },
}) do
  local cont = assert(db:create_container("c" .. i, { partition_key = "/pk",
    throughput = c[2] }))
  assert(cont:create(DOC))
  for _ = 1, 20000 do assert(cont:read("item", "p")) end  -- warm
  cases[i] = { name = c[1], c = cont, t = {} }
end

for r = 1, args.rounds do
  for k = 1, #cases do
    local case = cases[(k + r) % #cases + 1]       -- rotate the order
    local c, read = case.c, case.c.read
    local t0 = now()
    for _ = 1, args.burst do read(c, "item", "p") end
    case.t[r] = (now() - t0) / args.burst * 1e9
  end
end

local function median(v)
  local s = {}
  for i, x in ipairs(v) do s[i] = x end
  table.sort(s)
  return s[math.floor(#s / 2) + 1]
end

print(("point reads, %d rounds of %d reads each:"):format(args.rounds,
  args.burst))
for _, case in ipairs(cases) do
  local ratios = {}
  for r = 1, args.rounds do ratios[r] = case.t[r] / cases[1].t[r] end
  print(("  %-18s median %6.0f ns per read, %+5.1f %% against no budget"):format(
    case.name, median(case.t), (median(ratios) - 1) * 100))
end
local st = db:stats().containers.c2.throughput
assert(st.throttled == 0, "the budget refused a read")
db:close()
os.execute("rm -rf '" .. path .. "'")
