--[[
Where a request's time goes through the write queue: the summary of a
trace the queue wrote (REGOLITH_QUEUE_TRACE=<file>, store/queue.c) while
processes wrote through it, e.g. the writers benchmark's rows:

  REGOLITH_QUEUE_TRACE=/tmp/q.trace LUA_PATH='lua/?.lua;lua/?/init.lua;;' \
    LUA_CPATH='build/lua5.4/?.so;;' lua5.4 examples/bench/writers.lua --n 1000
  lua5.4 examples/bench/queuetrace.lua /tmp/q.trace

For each request (line "r"): from queued to a leader claiming it, from
claimed to its transaction committed, from committed to its outcome
(the commit's flush), from the outcome to its process seeing it (the
wake-up), and the whole; for each batch (line "b"): its members, the
leader's gathering, its transaction (every member run, and the commit),
per member, and the flush. Medians, p90 and p99, in µs.
]]

local file = assert(arg[1], "usage: queuetrace.lua TRACE")
local r, b = { {}, {}, {}, {}, {} }, { {}, {}, {}, {}, {} }
local led = 0
for line in io.lines(file) do
  local kind, rest = line:match("^(%a) (.*)$")
  local v = {}
  for x in (rest or ""):gmatch("%S+") do v[#v + 1] = tonumber(x) end
  if kind == "r" and #v == 6 then
    for i = 1, 5 do table.insert(r[i], v[i]) end
    led = led + v[6]
  elseif kind == "b" and #v == 4 then
    table.insert(b[1], v[1])
    table.insert(b[2], v[2])
    table.insert(b[3], v[3])
    table.insert(b[4], v[3] / math.max(1, v[1]))
    table.insert(b[5], v[4])
  end
end

local function q(t, p)
  if #t == 0 then return 0 end
  local s = {}                       -- a copy (unpack: too many for a
  for i = 1, #t do s[i] = t[i] end   -- trace of a million lines)
  table.sort(s)
  return s[math.max(1, math.ceil(#s * p))]
end

local function row(name, t)
  print(("%-34s %9.0f %9.0f %9.0f"):format(name, q(t, 0.5), q(t, 0.9), q(t, 0.99)))
end

print(("%d requests (%d of them led a batch), %d batches"):format(#r[1], led, #b[1]))
print(("%-34s %9s %9s %9s"):format("", "p50", "p90", "p99"))
row("queued -> claimed (µs)", r[1])
row("claimed -> committed (µs)", r[2])
row("committed -> durable (µs)", r[3])
row("durable -> seen by its process (µs)", r[4])
row("the whole (µs)", r[5])
row("batch: members", b[1])
row("batch: gathering (µs)", b[2])
row("batch: transaction (µs)", b[3])
row("batch: transaction per member (µs)", b[4])
row("batch: flush (µs)", b[5])
local sizes = {}
for _, n in ipairs(b[1]) do sizes[n] = (sizes[n] or 0) + 1 end
local keys = {}
for n in pairs(sizes) do keys[#keys + 1] = n end
table.sort(keys)
local parts = {}
for _, n in ipairs(keys) do parts[#parts + 1] = ("%d:%d"):format(n, sizes[n]) end
print("batch sizes (members:batches) " .. table.concat(parts, " "))
