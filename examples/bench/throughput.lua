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
    [--url redis://HOST:PORT/NAME]

With --url, on a Redis Cluster (docs/cluster.md; e.g. --rounds 30 --burst
200): there a budget's words live in Redis, so a read with a budget reads
them in the fetch it makes anyway and adds what it spent in one more call.

Prints the median time per read of each, its p99 (of the rounds' means),
and the median over the rounds of each round's ratio to the container
without a budget.
]]

local regolith = require "regolith"
local system = require "system"

local args = { rounds = 300, burst = 5000, url = false }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if not (k and args[k] ~= nil and arg[i + 1] and
            (k == "url" or tonumber(arg[i + 1]))) then
      error("usage: throughput.lua [--rounds N] [--burst N] [--url URL]")
    end
    args[k] = k == "url" and arg[i + 1] or tonumber(arg[i + 1])
    i = i + 2
  end
end

local now = system.monotime

local path = args.url
if not path then
  path = os.tmpname()
  os.remove(path)
end
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
  for _ = 1, args.url and 200 or 20000 do                 -- warm
    assert(cont:read("item", "p"))
  end
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
  local s = {}
  for i, x in ipairs(case.t) do s[i] = x end
  table.sort(s)
  print(("  %-18s median %6.0f ns per read (p99 %6.0f), %+5.1f %% against no budget"):format(
    case.name, median(case.t), s[math.ceil(#s * 0.99)],
    (median(ratios) - 1) * 100))
end
local st = db:stats().containers.c2.throughput
assert(st.throttled == 0, "the budget refused a read")
if args.url then
  for i = 1, #cases do assert(db:delete_container("c" .. i)) end
  db:close()
else
  db:close()
  os.execute("rm -rf '" .. path .. "'")
end
